/*
 * Attack: fill the daemon's disk through the fds it passes (issue 14
 * item 4), as an app playing its own runtime.
 *
 *   capture STATE_DIR CAP  ask for a stack capture; on its fd try
 *                          fallocate and ftruncate of 1 GiB, then write
 *                          4 x CAP bytes; send CaptureDone for what it wrote
 *   crash STATE_DIR        register a CRASH trigger; on the crash fd try
 *                          fallocate, ftruncate and a write at 1 GiB
 *
 * After each try, and again after the session ended (the daemon has
 * unlinked its file; the attacker still holds the fd), the state dir's
 * filesystem must not have lost 1 GiB, and the fd must not be a file on it
 * with 1 GiB of blocks. capture also checks that the capture failed (cap)
 * and that a well-behaved capture right after it still succeeds.
 *
 * Exit 0: the attack failed. 1: it worked. 2: the test could not run.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "hrt.h"
#include "profilingd.pb-c.h"

#define GIB (1ull << 30)
/* Far below 1 GiB, far above what others' builds write meanwhile. */
#define GREW_MAX (384ull << 20)

static const char *state;
static uint64_t free0;
static int worked;

static uint64_t free_bytes(void)
{
	struct statvfs v;
	HCHECK(statvfs(state, &v) == 0, "statvfs %s: %s", state, strerror(errno));
	return (uint64_t)v.f_bavail * v.f_frsize;
}

/* Has fd, or the filesystem, taken the attacker's gigabyte? */
static void check(int fd, const char *when)
{
	struct stat st, sd;
	uint64_t now = free_bytes();
	uint64_t lost = free0 > now ? free0 - now : 0;
	uint64_t blocks = 0;
	HCHECK(stat(state, &sd) == 0, "stat %s", state);
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_dev == sd.st_dev)
		blocks = (uint64_t)st.st_blocks * 512;
	printf("%s: state fs lost %llu MiB; the fd holds %llu MiB of its blocks\n", when,
	       (unsigned long long)(lost >> 20), (unsigned long long)(blocks >> 20));
	if (lost >= GREW_MAX || blocks >= GREW_MAX) {
		printf("ATTACK WORKED: %s: the daemon's disk grew by the attacker's fd\n", when);
		worked = 1;
	}
}

static void try(int r, const char *what)
{
	printf("%s: %s\n", what, r == 0 ? "succeeded" : strerror(errno));
}

static int t_capture(uint64_t cap)
{
	const char *caps[] = { "stack_sampling" };
	struct hrt_outcome o = { 0 };
	struct prof_params p = PROF_PARAMS_INIT(.duration_ms = 100);
	uint64_t sid, wrote = 0;
	int fd;

	prof_client *c = hrt_client();
	int rt = hrt_runtime(caps, 1);
	int r = prof_request(c, PROF_STACK_SAMPLING, &p, "fill", hrt_on_result, &o, NULL);
	HCHECK(r == 0, "refused: %s", prof_strerror(-r));
	HCHECK(hrt_read(rt, &fd, &sid, 20000) == PD__DAEMON_TO_RUNTIME__MSG_CAPTURE, "no capture");
	HCHECK(fd >= 0, "no fd");
	free0 = free_bytes();
	try(fallocate(fd, 0, 0, (off_t)GIB), "fallocate 1 GiB");
	check(fd, "after fallocate");
	try(ftruncate(fd, (off_t)GIB), "ftruncate 1 GiB");
	check(fd, "after ftruncate");
	/* Past the cap: the daemon must stop reading, not store it. */
	static char junk[1 << 16];
	memset(junk, 'j', sizeof(junk));
	int err = 0;
	while (wrote < 4 * cap) {
		ssize_t n = write(fd, junk, sizeof(junk));
		if (n < 0) {
			err = errno;
			break;
		}
		wrote += (uint64_t)n;
	}
	printf("wrote %llu bytes (4 x cap %llu)%s%s\n", (unsigned long long)wrote,
	       (unsigned long long)cap, err ? ", then " : "", err ? strerror(err) : "");
	hrt_done(rt, sid, wrote);
	hrt_wait(c, &o, 120000);
	printf("capture result: %d (%s) %s\n", o.error, prof_strerror(o.error), o.msg);
	if (o.error == 0) {
		printf("ATTACK WORKED: a capture past the cap was stored\n");
		worked = 1;
	}
	check(fd, "after the session ended");
	close(fd);

	/* The friendly path: a small, honest capture right after. */
	memset(&o, 0, sizeof(o));
	r = prof_request(c, PROF_STACK_SAMPLING, &p, "honest", hrt_on_result, &o, NULL);
	HCHECK(r == 0, "honest capture refused: %s", prof_strerror(-r));
	/* The daemon may have cancelled the oversize capture: skip that. */
	while (hrt_read(rt, &fd, &sid, 20000) != PD__DAEMON_TO_RUNTIME__MSG_CAPTURE)
		HCHECK(fd < 0, "an fd with a message that is not a capture");
	uint64_t n = hrt_write_pprof(fd);
	close(fd);
	hrt_done(rt, sid, n);
	hrt_wait(c, &o, 120000);
	printf("honest result: %d (%s) %s\n", o.error, prof_strerror(o.error), o.msg);
	HCHECK(o.error == 0, "the honest capture failed");

	/* A runtime that declares more than it writes and keeps its end
	 * open: the deadline ends the session, its slot comes back. */
	memset(&o, 0, sizeof(o));
	r = prof_request(c, PROF_STACK_SAMPLING, &p, "short", hrt_on_result, &o, NULL);
	HCHECK(r == 0, "short capture refused: %s", prof_strerror(-r));
	HCHECK(hrt_read(rt, &fd, &sid, 20000) == PD__DAEMON_TO_RUNTIME__MSG_CAPTURE, "no capture");
	HCHECK(write(fd, "\x1f\x8b", 2) == 2, "write");
	hrt_done(rt, sid, 1000);
	hrt_wait(c, &o, 120000);
	printf("short result: %d (%s) %s\n", o.error, prof_strerror(o.error), o.msg);
	if (o.error != PROF_E_TIMEOUT) {
		printf("ATTACK WORKED: a runtime short of its declared bytes kept the session\n");
		worked = 1;
	}
	close(fd);
	close(rt);
	prof_close(c);
	return 0;
}

static int t_crash(void)
{
	const char *caps[] = { "trace_ring" };
	struct prof_trigger t = PROF_TRIGGER_INIT(.type = PROF_TRIGGER_CRASH, .capture = PROF_SYSTEM_TRACE);
	int fd = -1;

	prof_client *c = hrt_client();
	int rt = hrt_runtime(caps, 1);
	int r = prof_add_trigger(c, &t);
	HCHECK(r == 0, "CRASH trigger refused: %s", prof_strerror(-r));
	while (fd < 0) {
		int which = hrt_read(rt, &fd, NULL, 20000);
		if (which != PD__DAEMON_TO_RUNTIME__MSG_CRASH_FD && fd >= 0) {
			close(fd);
			fd = -1;
		}
	}
	free0 = free_bytes();
	try(fallocate(fd, 0, 0, (off_t)GIB), "fallocate 1 GiB");
	check(fd, "after fallocate");
	try(ftruncate(fd, (off_t)GIB), "ftruncate 1 GiB");
	check(fd, "after ftruncate");
	try(pwrite(fd, "x", 1, (off_t)GIB) == 1 ? 0 : -1, "write at 1 GiB");
	check(fd, "after the write at 1 GiB");
	/* Gone from the app's side: the daemon drops what it kept for us. */
	prof_clear_triggers(c);
	close(rt);
	prof_close(c);
	usleep(300 * 1000);
	check(fd, "after the app disconnected");
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	HCHECK(argc >= 3, "usage: hostile_disk_fill capture STATE_DIR CAP | crash STATE_DIR");
	state = argv[2];
	if (!strcmp(argv[1], "capture") && argc == 4)
		t_capture(strtoull(argv[3], NULL, 10));
	else if (!strcmp(argv[1], "crash"))
		t_crash();
	else
		HCHECK(0, "unknown test %s", argv[1]);
	if (!worked)
		printf("attack failed: the daemon's disk kept its space\n");
	return worked;
}

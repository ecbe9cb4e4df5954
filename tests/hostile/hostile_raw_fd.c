/*
 * Attack: read the machine's kernel data back through the capture fd.
 *
 * The attacker plays its own runtime, asks for a system trace of itself,
 * writes a small trace into the fd the daemon passes, keeps that fd, and
 * once the result is in (by then the daemon has gathered the kernel's sched
 * data for the trace) tries every way of reading from it: pread at 0, read,
 * and reopening /proc/self/fd/N. The attack works if anything comes back
 * beyond the attacker's own bytes, or if the victim's name (argv[1], the
 * comm of another user's process running meanwhile) shows up.
 *
 * Exit 0: the attack failed. 1: it worked. 2: the test could not run.
 * Prints "result: <error>" for the friendly path (the capture itself).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "hrt.h"
#include "trace_fmt.h"

#define BACK_MAX (64u << 20)

/* Everything fd yields from offset 0 (pread) or its position (read). */
static size_t drain(int fd, int positional, unsigned char *buf, size_t cap, int *err)
{
	size_t got = 0;
	*err = 0;
	while (got < cap) {
		ssize_t n = positional ? pread(fd, buf + got, cap - got, (off_t)got)
				       : read(fd, buf + got, cap - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			*err = errno;
			break;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return got;
}

int main(int argc, char **argv)
{
	HCHECK(argc == 2 && argv[1][0], "usage: hostile_raw_fd VICTIM_COMM");
	const char *victim = argv[1];
	const char *caps[] = { "trace_ring" };
	struct hrt_outcome o = { 0 };
	struct prof_params p = PROF_PARAMS_INIT(.duration_ms = 1500);
	uint64_t id = 0, sid = 0, wrote = 0;
	int fd = -1;

	signal(SIGPIPE, SIG_IGN);
	prof_client *c = hrt_client();
	int rt = hrt_runtime(caps, 1);
	int r = prof_request(c, PROF_SYSTEM_TRACE, &p, "rawfd", hrt_on_result, &o, &id);
	HCHECK(r == 0, "system trace refused: %s", prof_strerror(-r));
	HCHECK(hrt_read(rt, &fd, &sid, 20000) == PD__DAEMON_TO_RUNTIME__MSG_CAPTURE,
	       "no CaptureRequest");
	HCHECK(fd >= 0, "CaptureRequest without an fd");

	/* The app's honest part: a process track of its own. */
	struct tfmt_out *t = malloc(sizeof(*t));
	HCHECK(t, "malloc");
	tfmt_init(t, fd);
	tfmt_process(t, getpid(), "hostile", NULL);
	HCHECK(tfmt_finish(t, &wrote) == 0, "writing the trace: %s", strerror(errno));
	free(t);
	hrt_done(rt, sid, wrote);
	hrt_wait(c, &o, 120000);
	printf("result: %d (%s) %s\n", o.error, prof_strerror(o.error), o.msg);

	/* The kernel half is in the daemon's hands now: read back what we can. */
	unsigned char *buf = malloc(BACK_MAX);
	HCHECK(buf, "malloc");
	int worked = 0, err;
	size_t n = drain(fd, 1, buf, BACK_MAX, &err);
	printf("pread: %zu bytes back (wrote %llu)%s%s\n", n, (unsigned long long)wrote,
	       err ? ", then " : "", err ? strerror(err) : "");
	if (n > wrote || memmem(buf, n, victim, strlen(victim))) {
		printf("ATTACK WORKED: pread gave %zu bytes%s\n", n,
		       memmem(buf, n, victim, strlen(victim)) ? " with the victim's name" : "");
		worked = 1;
	}
	n = drain(fd, 0, buf, BACK_MAX, &err);
	printf("read: %zu bytes%s%s\n", n, err ? ", then " : "", err ? strerror(err) : "");
	if (n && memmem(buf, n, victim, strlen(victim))) {
		printf("ATTACK WORKED: read gave the victim's name\n");
		worked = 1;
	}
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	int again = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (again < 0) {
		printf("reopen: %s\n", strerror(errno));
	} else {
		n = drain(again, 0, buf, BACK_MAX, &err);
		printf("reopen: %zu bytes%s%s\n", n, err ? ", then " : "", err ? strerror(err) : "");
		if (n > wrote || memmem(buf, n, victim, strlen(victim))) {
			printf("ATTACK WORKED: the reopened fd gave %zu bytes\n", n);
			worked = 1;
		}
		close(again);
	}
	free(buf);
	close(fd);
	close(rt);
	prof_close(c);
	if (!worked)
		printf("attack failed: nothing of the kernel's data came back through the fd\n");
	return worked;
}

/*
 * profilingd-jattach: the daemon's helper for HotSpot JVMs (docs/JVM.md).
 * The daemon runs it as root; it drops to the JVM's uid and gid (the VM's
 * attach listener accepts only its own user) and speaks the attach
 * protocol:
 *
 *   profilingd-jattach --pid P heapdump > dump.hprof
 *       GC.heap_dump into a private directory in the JVM's /tmp, then
 *       Thread.print; fd 1 gets the dump with the threads' stacks appended
 *       as HPROF records.
 *   profilingd-jattach --pid P load /abs/libprofiling_jvmti.so [OPTIONS]
 *       JVMTI.agent_load of the profilingd agent into a running VM.
 *   profilingd-jattach --pid P jcmd 'COMMAND ARGS'
 *       any diagnostic command; its output on fd 1 (tests, benchmarks).
 *   profilingd-jattach --pid P listen
 *       start the VM's attach listener now and send nothing: a VM that
 *       later runs out of heap could not start it then (the listener's
 *       Thread object is a Java allocation).
 *
 * --start-time S (the daemon always passes it): P's start time when the
 * daemon bound the capture to P (/proc/P/stat field 22). Once connected to
 * the VM's attach socket the helper reads it again; a P that is another
 * process by then fails with "error: target replaced: ..." (exit 70),
 * before any command is sent.
 *
 * The last line on fd 2 is the status: "ok ..." or "error: ...".
 * Exit 0; 69 when no attach listener answers; 70 on other errors.
 */
#include "ja.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sysexits.h>
#include <unistd.h>

#include "jattach_policy.h"
#include "sandbox.h"
#include "util.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: profilingd-jattach --pid P [--start-time S] [--timeout-ms T]\n"
		"                          [--debug-seccomp] COMMAND\n"
		"Speaks the HotSpot attach protocol to JVM P as P's user. COMMAND:\n"
		"  heapdump            GC.heap_dump + Thread.print; the HPROF with the\n"
		"                      threads' stacks appended goes to stdout\n"
		"  load LIB [OPTIONS]  load a JVMTI agent (absolute path) into the VM\n"
		"  jcmd 'CMD ARGS'     run a diagnostic command, its output to stdout\n"
		"  listen              start the VM's attach listener, send nothing\n"
		"T: the whole command's time limit in ms (default 120000).\n"
		"S: P's start time (/proc/P/stat field 22): checked again once attached.\n"
		"The last stderr line is the status: \"ok ...\" or \"error: ...\".\n"
		"Once it runs as P's user it is under policy/seccomp/jattach.policy;\n"
		"--debug-seccomp traps a forbidden call and names it (exit 75) instead\n"
		"of a kill.\n");
}

#define fail util_fail

/* --start-time: the process the daemon bound the capture to (0: not given). */
static unsigned long long expect_start;

/*
 * Once attached: pid must still be the process the daemon admitted. The
 * attach socket is found by pid, so a VM that took a reused pid would
 * answer; a mismatch ends the helper here, before any command.
 */
static void check_target(pid_t pid)
{
	uint64_t now_start = 0;
	if (!expect_start)
		return;
	int r = util_proc_start_time((int)pid, &now_start);
	if (r == 0 && now_start == expect_start)
		return;
	exit(fail(EX_SOFTWARE, "target replaced: pid %d %s (start time %llu, expected %llu)",
		  (int)pid, r < 0 ? "is gone" : "is another process now",
		  (unsigned long long)now_start, expect_start));
}

/* Appended to the "ok" line: the stale names ja_clear_stale removed. */
static char cleared[96];
/* Whose live listener or directory holds the socket's name (ja_clear_stale). */
static uid_t holder = (uid_t)-1;

/* A failed attach's exit code and words for the status line. */
static int attach_code(int r)
{
	return r == -ETIMEDOUT || r == -EADDRINUSE ? EX_UNAVAILABLE : EX_SOFTWARE;
}

static const char *attach_err(int r)
{
	if (r == -ETIMEDOUT)
		return "no attach listener answered in time";
	static char why[128];
	if (r == -EADDRINUSE && holder != (uid_t)-1) {
		util_fmt(why, sizeof(why), "another user's file (a live socket or a directory) "
			 "holds the name of the VM's attach socket (uid %u)", (unsigned)holder);
		return why;
	}
	/* Left for another reason: the VM in a pid or user namespace of its
	 * own, something mounted on the name (ja_stale.c). */
	if (r == -EADDRINUSE)
		return "another user's file holds the name of the VM's attach socket or trigger "
		       "and was left in place (docs/JVM.md, \"Stale attach sockets\")";
	return strerror(-r);
}

/* The effective uid and gid of pid (the VM compares the peer's with them). */
static int proc_euid(pid_t pid, uid_t *uid, gid_t *gid)
{
	unsigned u[4], g[4];
	if (util_proc_creds((int)pid, u, g) < 0)
		return -ESRCH;
	*uid = u[1];
	*gid = g[1];
	return 0;
}

static int become(uid_t uid, gid_t gid)
{
	if (geteuid() == uid && getegid() == gid)
		return 0;
	if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
		return -errno;
	/* The switch set the flag to fs.suid_dumpable, which may be 1. */
	return sbx_no_dump();
}

/* One command on a fresh connection; the reply's status and text. */
static int run(pid_t pid, uint64_t deadline, const char *cmd, const char *a0, const char *a1,
	       const char *a2, int *status, char **reply, const char **body, size_t *blen)
{
	uint64_t now = util_mono_ms();
	int left = deadline > now ? (int)(deadline - now) : 0;
	int fd = ja_connect(pid, left < 10000 ? left : 10000);
	if (fd < 0)
		return fd;
	check_target(pid);
	int r = ja_send(fd, cmd, a0, a1, a2);
	size_t len = 0;
	bool cut = false;
	now = util_mono_ms();
	if (r == 0)
		r = ja_read_reply(fd, deadline > now ? (int)(deadline - now) : 1, reply, &len, &cut);
	close(fd);
	if (r < 0)
		return r;
	if (ja_parse_reply(*reply, len, status, body, blen) < 0) {
		free(*reply);
		*reply = NULL;
		return -EBADMSG;
	}
	return 0;
}

/* The first line of a reply's text, for an error message. */
static void first_line(const char *s, size_t n, char *out, size_t on)
{
	size_t k = 0;
	while (k < n && s[k] != '\n' && k + 1 < on)
		k++;
	memcpy(out, s, k);
	out[k] = '\0';
}

static int heapdump(pid_t pid, uint64_t deadline)
{
	char dir[96], jdir[64], jpath[96], path[128], msg[256];
	char *reply = NULL;
	const char *body;
	size_t blen;
	int st, r, code = EX_SOFTWARE;

	/* A private directory in the JVM's /tmp, owned by its user (us, now). */
	if (util_fmt(dir, sizeof(dir), "/proc/%d/root/tmp/profilingd-XXXXXX", (int)pid) < 0 ||
	    !mkdtemp(dir))
		return fail(EX_SOFTWARE, "cannot create a dump directory in the JVM's /tmp: %s",
			    strerror(errno));
	const char *base = strrchr(dir, '/') + 1;
	util_fmt(jdir, sizeof(jdir), "/tmp/%s", base);
	util_fmt(jpath, sizeof(jpath), "%s/heap.hprof", jdir);
	util_fmt(path, sizeof(path), "%s/heap.hprof", dir);

	char cmd[160];
	util_fmt(cmd, sizeof(cmd), "GC.heap_dump %s", jpath);
	uint64_t t0 = util_mono_ms();
	r = run(pid, deadline, "jcmd", cmd, NULL, NULL, &st, &reply, &body, &blen);
	uint64_t t1 = util_mono_ms();
	if (r < 0) {
		code = fail(r == -ECONNREFUSED || r == -ENOENT ? EX_UNAVAILABLE : attach_code(r),
			    "GC.heap_dump: %s", attach_err(r));
		goto out;
	}
	if (st != 0 || !memmem(body, blen, "Heap dump file created", 22)) {
		first_line(body, blen, msg, sizeof(msg));
		code = fail(EX_SOFTWARE, "GC.heap_dump failed (status %d): %s", st, msg);
		goto out;
	}
	free(reply);
	reply = NULL;

	/* The stacks of every thread, right after the dump. */
	struct ja_threads th = { 0 };
	int tr = run(pid, deadline, "jcmd", "Thread.print", NULL, NULL, &st, &reply, &body, &blen);
	uint64_t t2 = util_mono_ms();
	if (tr == 0 && st == 0)
		tr = ja_threads_parse(body, blen, &th);
	else if (tr == 0)
		tr = -EBADMSG;

	int in = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (in < 0) {
		code = fail(EX_SOFTWARE, "cannot open the dump: %s", strerror(errno));
		ja_threads_free(&th);
		goto out;
	}
	struct stat sb;
	fstat(in, &sb);
	r = ja_hprof_with_threads(in, 1, &th);
	close(in);
	if (r < 0) {
		code = fail(EX_SOFTWARE, "writing the dump: %s", strerror(-r));
		ja_threads_free(&th);
		goto out;
	}
	uint32_t frames = th.nframes;
	fprintf(stderr, "ok bytes=%lld threads=%u frames=%u dump_ms=%llu print_ms=%llu%s%s%s\n",
		(long long)sb.st_size, th.nthreads, frames, (unsigned long long)(t1 - t0),
		(unsigned long long)(t2 - t1), tr < 0 ? " threads_error=" : "",
		tr < 0 ? strerror(-tr) : "", cleared);
	ja_threads_free(&th);
	code = 0;
out:
	free(reply);
	unlink(path);
	rmdir(dir);
	return code;
}

static int load(pid_t pid, uint64_t deadline, const char *lib, const char *opts)
{
	char *reply = NULL, msg[256];
	const char *body;
	size_t blen;
	int st, rc;
	if (lib[0] != '/')
		return fail(EX_SOFTWARE, "the agent path must be absolute: %s", lib);
	int r = run(pid, deadline, "load", lib, "true", opts, &st, &reply, &body, &blen);
	if (r < 0)
		return fail(attach_code(r), "load: %s", attach_err(r));
	int code = 0;
	if (st != 0 || ja_parse_load_rc(body, blen, &rc) < 0 || rc != 0) {
		first_line(body, blen, msg, sizeof(msg));
		code = fail(EX_SOFTWARE, "the VM did not load the agent (status %d): %s", st, msg);
	} else {
		fprintf(stderr, "ok loaded %s%s\n", lib, cleared);
	}
	free(reply);
	return code;
}

static int jcmd(pid_t pid, uint64_t deadline, const char *line)
{
	char *reply = NULL;
	const char *body;
	size_t blen;
	int st;
	int r = run(pid, deadline, "jcmd", line, NULL, NULL, &st, &reply, &body, &blen);
	if (r < 0)
		return fail(attach_code(r), "jcmd: %s", attach_err(r));
	r = util_write_all(1, body, blen);
	free(reply);
	if (r < 0)
		return fail(EX_SOFTWARE, "writing the output: %s", strerror(-r));
	if (st != 0)
		return fail(EX_SOFTWARE, "the command failed with status %d", st);
	fprintf(stderr, "ok%s\n", cleared);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "start-time", required_argument, NULL, 's' },
		{ "timeout-ms", required_argument, NULL, 't' },
		{ "debug-seccomp", no_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	long pid = 0, timeout = 120000;
	bool debug_seccomp = false;
	int c;

	/* It becomes the JVM's user: that user must not ptrace it (sandbox.h). */
	if (sbx_no_dump() < 0)
		return fail(EX_SOFTWARE, "PR_SET_DUMPABLE: %s", strerror(errno));
	while ((c = getopt_long(argc, argv, "+p:s:t:h", opts, NULL)) != -1) {
		char *e;
		switch (c) {
		case 'p':
			pid = strtol(optarg, &e, 10);
			if (*e || pid <= 0 || pid > 0x3fffffff)
				return fail(2, "bad --pid %s", optarg);
			break;
		case 's':
			errno = 0;
			expect_start = strtoull(optarg, &e, 10);
			if (errno || *e || optarg[0] < '0' || optarg[0] > '9' || !expect_start)
				return fail(2, "bad --start-time %s", optarg);
			break;
		case 't':
			timeout = strtol(optarg, &e, 10);
			if (*e || timeout < 100 || timeout > 3600000)
				return fail(2, "--timeout-ms must be 100..3600000");
			break;
		case 'S':
			debug_seccomp = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!pid || optind >= argc) {
		usage(stderr);
		return 2;
	}
	const char *what = argv[optind];
	uid_t uid;
	gid_t gid;
	int r = proc_euid((pid_t)pid, &uid, &gid);
	if (r < 0)
		return fail(EX_UNAVAILABLE, "no process %ld", pid);
	/* As root still: a leftover attach socket the VM cannot replace. */
	struct ja_stale st;
	r = ja_clear_stale((pid_t)pid, expect_start, uid, &st);
	if (st.removed) {
		char a[40] = "", b[40] = "";
		if (st.removed & JA_STALE_SOCKET)
			util_fmt(a, sizeof(a), " stale_socket_removed_uid=%u", (unsigned)st.owner[0]);
		if (st.removed & JA_STALE_TRIGGER)
			util_fmt(b, sizeof(b), " stale_trigger_removed_uid=%u", (unsigned)st.owner[1]);
		util_fmt(cleared, sizeof(cleared), "%s%s", a, b);
	}
	if (r == -EADDRINUSE)
		holder = st.owner[0];
	if ((r = become(uid, gid)) < 0)
		return fail(EX_SOFTWARE, "cannot become uid %u gid %u: %s", (unsigned)uid,
			    (unsigned)gid, strerror(-r));
	/* Sandbox last: no uid change, exec or other socket domain from here. */
	if ((r = sbx_install(jattach_policy, jattach_policy_count, debug_seccomp)) < 0)
		return fail(EX_SOFTWARE, "cannot install the seccomp filter: %s", strerror(-r));
	uint64_t deadline = util_mono_ms() + (uint64_t)timeout;
	if (!strcmp(what, "heapdump") && argc - optind == 1)
		return heapdump((pid_t)pid, deadline);
	if (!strcmp(what, "load") && (argc - optind == 2 || argc - optind == 3))
		return load((pid_t)pid, deadline, argv[optind + 1],
			    argc - optind == 3 ? argv[optind + 2] : "");
	if (!strcmp(what, "listen") && argc - optind == 1) {
		int fd = ja_connect((pid_t)pid, timeout < 10000 ? (int)timeout : 10000);
		if (fd < 0)
			return fail(attach_code(fd), "listen: %s", attach_err(fd));
		check_target((pid_t)pid);
		close(fd);
		fprintf(stderr, "ok listening%s\n", cleared);
		return 0;
	}
	if (!strcmp(what, "jcmd") && argc - optind == 2)
		return jcmd((pid_t)pid, deadline, argv[optind + 1]);
	usage(stderr);
	return 2;
}

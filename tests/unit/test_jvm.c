/*
 * svc_jvm_detect's cache (svc_jvm.h) against real child processes: an
 * answer must never outlive the process it was about. A pid reused by a
 * new process (clone3 with set_tid puts it on the very pid) and an exec
 * (the same pid and start time, another executable) are each looked at
 * afresh. The "JVMs" are copies of sleep(1): one named java (the launcher
 * rule), one whose perf-data file (/tmp/hsperfdata_<user>/<pid>) this test
 * writes (the embedded-VM rule). Needs root (set_tid); skips otherwise.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <linux/netlink.h>
#include <linux/sched.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "svc_jvm.h"
#include "trg.h"
#include "util.h"

static char dir[64];
static char java[128], other[128]; /* copies of sleep: named java, and not */
static char sh_dir[128], java_sh[160]; /* a copy of sh named java */
static char perf_dir[128]; /* the hsperfdata directory, when this test made it */

static int copy_file(const char *from, const char *to)
{
	char buf[65536];
	int in = open(from, O_RDONLY | O_CLOEXEC);
	int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	ssize_t n = -1;
	if (in >= 0 && out >= 0)
		while ((n = read(in, buf, sizeof(buf))) > 0)
			if (write(out, buf, (size_t)n) != n) {
				n = -1;
				break;
			}
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	return n == 0 ? 0 : -1;
}

static int setup(void **state)
{
	(void)state;
	const char *sleep_bin = access("/usr/bin/sleep", X_OK) == 0 ? "/usr/bin/sleep" : "/bin/sleep";
	snprintf(dir, sizeof(dir), "/tmp/pd-jvm.XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(java, sizeof(java), "%s/java", dir);
	snprintf(other, sizeof(other), "%s/worker", dir);
	snprintf(sh_dir, sizeof(sh_dir), "%s/sh", dir);
	snprintf(java_sh, sizeof(java_sh), "%s/java", sh_dir);
	if (mkdir(sh_dir, 0755) < 0 || copy_file("/bin/sh", java_sh) < 0)
		return -1;
	return copy_file(sleep_bin, java) == 0 && copy_file(sleep_bin, other) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	unlink(java);
	unlink(other);
	unlink(java_sh);
	rmdir(sh_dir);
	rmdir(dir);
	if (perf_dir[0])
		rmdir(perf_dir); /* only if empty: a JVM may have used it since */
	return 0;
}

/* Run exe (sleep 60) in a child: on pid want when want > 0 (clone3 set_tid). */
static pid_t spawn(const char *exe, pid_t want)
{
	pid_t pid;
	if (want > 0) {
		struct clone_args ca = { .exit_signal = SIGCHLD, .set_tid = (uintptr_t)&want,
					 .set_tid_size = 1 };
		pid = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
	} else {
		pid = fork();
	}
	if (pid == 0) {
		execl(exe, exe, "60", (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* pid's state letter from /proc/<pid>/stat, or 0. */
static char state_of(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	const char *p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

/* Until pid runs exe and has gone to sleep in it (every program here
 * waits: sleep, or sh's read). /proc/<pid>/exe shows the new image before
 * the kernel queues the exec's connector event; the sleep comes after. */
static void wait_exec(pid_t pid, const char *exe)
{
	char link[64], now[256];
	snprintf(link, sizeof(link), "/proc/%d/exe", (int)pid);
	for (;;) {
		ssize_t n = readlink(link, now, sizeof(now) - 1);
		if (n > 0) {
			now[n] = '\0';
			if (!strcmp(now, exe) && state_of(pid) == 'S')
				return;
		}
		usleep(1000);
	}
}

static void reap(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static uint64_t start_of(pid_t pid)
{
	uint64_t s = 0;
	assert_int_equal(util_proc_start_time((int)pid, &s), 0);
	return s;
}

static void perf_file(pid_t pid, char *path, size_t n)
{
	struct passwd *pw = getpwuid(getuid());
	assert_non_null(pw);
	char d[128];
	snprintf(d, sizeof(d), "/tmp/hsperfdata_%s", pw->pw_name);
	/* As HotSpot makes it (0755, never group or other writable, which
	 * a real JVM of this user would refuse to publish into). */
	if (mkdir(d, 0755) == 0)
		snprintf(perf_dir, sizeof(perf_dir), "%s", d);
	snprintf(path, n, "%s/%d", d, (int)pid);
}

static void test_launcher_name(void **state)
{
	(void)state;
	pid_t a = spawn(java, 0), b = spawn(other, 0);
	assert_true(a > 0 && b > 0);
	wait_exec(a, java);
	wait_exec(b, other);
	assert_true(svc_jvm_detect(a, start_of(a)));
	assert_true(svc_jvm_detect(a, start_of(a)));   /* from the cache */
	assert_true(svc_jvm_detect(a, 0));             /* without it */
	assert_false(svc_jvm_detect(b, start_of(b)));
	assert_false(svc_jvm_detect(b, 0));
	reap(a);
	reap(b);
	/* Gone: not a JVM, whatever was cached. */
	assert_false(svc_jvm_detect(a, 1));
}

/*
 * A JVM (by its perf data) exits; a process that is none gets its pid.
 * Its answer is its own, not the cached one of the pid's first owner.
 */
static void test_pid_reused(void **state)
{
	(void)state;
	char perf[256];
	if (geteuid() != 0)
		skip();
	pid_t a = spawn(other, 0);
	assert_true(a > 0);
	wait_exec(a, other);
	perf_file(a, perf, sizeof(perf));
	int fd = open(perf, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);
	uint64_t sa = start_of(a);
	assert_true(svc_jvm_detect(a, sa));
	/* Gone with its VM; the answer stays cached for up to its age
	 * (SVC_JVM_PERF_TTL_MS), which a loaded machine may outlast: then
	 * this test shows less, never a false failure. */
	unlink(perf);
	reap(a);
	/* A later start time (clock ticks): wait for the next tick at least. */
	struct timespec two_ticks = { 0, 2 * 1000000000L / sysconf(_SC_CLK_TCK) };
	nanosleep(&two_ticks, NULL);
	pid_t b = spawn(other, a);
	if (b < 0 && (errno == EEXIST || errno == EPERM || errno == ENOSYS)) {
		printf("skipped: pid %d could not be taken again (%s)\n", (int)a, strerror(errno));
		skip();
	}
	assert_int_equal(b, a);
	wait_exec(b, other);
	uint64_t sb = start_of(b);
	assert_true(sb != sa);
	/* Same pid, same executable, within the perf-data answer's age: only
	 * the start time tells the two apart. */
	assert_false(svc_jvm_detect(b, sb));
	reap(b);
}

/* A child running this test's image (not a JVM) that execs java when a
 * byte is written to *wfd; returned once it runs. */
static pid_t child_to_java(int *wfd)
{
	int p[2];
	assert_int_equal(pipe(p), 0);
	pid_t a = fork();
	assert_true(a >= 0);
	if (a == 0) {
		char c;
		close(p[1]);
		if (read(p[0], &c, 1) == 1)
			execl(java, java, "60", (char *)NULL);
		_exit(127);
	}
	close(p[0]);
	char self[256];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	assert_true(n > 0);
	self[n] = '\0';
	wait_exec(a, self);
	*wfd = p[1];
	return a;
}

/* An exec keeps the pid and the start time: the executable tells. */
static void test_exec(void **state)
{
	(void)state;
	/* Not a JVM until told, then the launcher. */
	int wfd;
	pid_t a = child_to_java(&wfd);
	uint64_t s = start_of(a);
	assert_false(svc_jvm_detect(a, s));
	assert_int_equal(write(wfd, "x", 1), 1);
	close(wfd);
	wait_exec(a, java);
	assert_int_equal(start_of(a), s);
	assert_true(svc_jvm_detect(a, s));
	reap(a);
}

/* The process events as the daemon wires them (svc_trigger's exec op),
 * and which pids' execs have been handed out. */
static pid_t execd[256];
static size_t nexecd;
/* The execs of one pid the test watches, counted: the ring above may lose
 * them among the machine's other execs. */
static pid_t watched;
static unsigned nwatched;

static void on_exec(pid_t pid)
{
	svc_jvm_exec(pid);
	execd[nexecd++ % 256] = pid;
	nwatched += pid == watched;
}

/* What the connector reported lost, as the daemon wires it (svc_trigger's
 * lost op drops every answer). */
static unsigned nlost;

static void on_lost(void)
{
	nlost++;
	svc_jvm_lost();
}

static bool saw_exec(pid_t pid)
{
	for (size_t i = 0; i < 256 && i < nexecd; i++)
		if (execd[i] == pid)
			return true;
	return false;
}

/* Run the loop until nothing waits in the socket: the cache is then
 * served without a stat. Bounded by turns, not time; false if that never
 * happened. */
static bool pump(struct event_base *b)
{
	for (int i = 0; i < 20000; i++) {
		event_base_loop(b, EVLOOP_NONBLOCK);
		if (trg_proc_current())
			return true;
		usleep(500);
	}
	return false;
}

/* Run the loop until the watched pid's n-th exec was handed out, or an
 * overrun dropped every answer (the look after it reads afresh), and
 * nothing waits in the socket. The kernel queues an exec's event after
 * /proc/<pid>/exe shows the new image, so an earlier exec's event may
 * still come after wait_exec() and pump(): counting tells them apart.
 * Bounded by turns, not time. */
static bool pump_execs(struct event_base *b, unsigned n)
{
	unsigned lost0 = nlost;
	for (int i = 0; i < 20000; i++) {
		event_base_loop(b, EVLOOP_NONBLOCK);
		if ((nwatched >= n || nlost != lost0) && trg_proc_current())
			return true;
		usleep(500);
	}
	return false;
}

/*
 * The proc connector on a loop of its own, wired as the daemon wires it
 * (exec drops that pid's answer, lost the given way), with an empty
 * cache; the test is skipped without root or a netlink connector.
 */
static struct event_base *connector_loop(void (*lost)(void))
{
	if (geteuid() != 0) {
		printf("skipped: the proc connector needs root\n");
		skip();
	}
	struct event_base *b = event_base_new();
	assert_non_null(b);
	static struct trg_ops ops;
	ops = (struct trg_ops){ .exec = on_exec, .lost = lost };
	assert_int_equal(trg_proc_init(b, &ops), 0);
	if (strncmp(trg_proc_status(), "netlink", 7)) {
		printf("skipped: %s\n", trg_proc_status());
		trg_proc_fini();
		event_base_free(b);
		skip();
	}
	svc_jvm_forget();
	return b;
}

/*
 * The event path: with the proc connector current, a cached answer is
 * served without the stat of /proc/<pid>/exe, so only the exec event
 * stands between an exec and a stale answer. Both ways: a process that
 * execs into java is a JVM, and a java that execs another program (as it
 * could a setuid binary) is no longer one, at the first look after the
 * kernel reported the exec. Without svc_jvm_exec dropping the slot both
 * asserts after pump() fail (the old answer, same pid and start time).
 */
static void test_exec_event(void **state)
{
	(void)state;
	struct event_base *b = connector_loop(on_lost);

	/* Not a JVM (this test's image), then exec into java. */
	int wfd;
	pid_t a = child_to_java(&wfd);
	watched = a; /* forked: its one exec is the one into java */
	nwatched = 0;
	assert_true(pump(b));
	uint64_t s = start_of(a);
	assert_false(svc_jvm_detect(a, s));
	assert_true(pump(b));
	assert_false(svc_jvm_detect(a, s)); /* from the cache */
	assert_int_equal(write(wfd, "x", 1), 1);
	close(wfd);
	wait_exec(a, java);
	assert_true(pump_execs(b, 1));
	assert_int_equal(start_of(a), s);
	assert_true(svc_jvm_detect(a, s));

	/* A java (by the launcher's name) that execs another program. */
	int q[2];
	assert_int_equal(pipe(q), 0);
	pid_t c = fork();
	assert_true(c >= 0);
	if (c == 0) {
		close(q[1]);
		if (dup2(q[0], 0) == 0)
			execl(java_sh, java_sh, "-c", "read x; exec \"$0\" 60", other, (char *)NULL);
		_exit(127);
	}
	/* Its execs: into java_sh, then into other. Events are read only in
	 * pump(), so none of c's was counted before this. */
	watched = c;
	nwatched = 0;
	close(q[0]);
	wait_exec(c, java_sh);
	assert_true(pump(b));
	uint64_t sc = start_of(c);
	assert_true(svc_jvm_detect(c, sc));
	assert_true(pump(b));
	assert_true(svc_jvm_detect(c, sc)); /* from the cache */
	assert_int_equal(write(q[1], "x\n", 2), 2);
	close(q[1]);
	wait_exec(c, other);
	assert_true(pump_execs(b, 2));
	assert_int_equal(start_of(c), sc);
	assert_false(svc_jvm_detect(c, sc));

	/* Lost events forget every answer: the next look reads afresh. */
	svc_jvm_lost();
	assert_true(svc_jvm_detect(a, s));
	assert_false(svc_jvm_detect(c, sc));
	reap(a);
	reap(c);
	trg_proc_fini();
	event_base_free(b);
}

/* This process's proc-connector socket (trg_proc's), or -1. */
static int connector_fd(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int found = -1;
	if (!d)
		return -1;
	while (found < 0 && (e = readdir(d))) {
		int fd = atoi(e->d_name), v = 0;
		socklen_t len = sizeof(v);
		if (fd <= 2 || fd == dirfd(d))
			continue;
		if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &len) < 0 || v != AF_NETLINK)
			continue;
		len = sizeof(v);
		if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &v, &len) == 0 && v == NETLINK_CONNECTOR)
			found = fd;
	}
	closedir(d);
	return found;
}

/*
 * The connector's overrun, for real: with the receive buffer at the
 * kernel's minimum and nobody reading, a few execs fill it, and the exec
 * of a process whose answer is cached is dropped by the kernel. Nothing
 * but the overrun (ENOBUFS at the next read, reported through the lost
 * op) tells the cache, and the connector is current again once the queue
 * is read, so the cached "not a JVM" would be served without a stat.
 * Fails with the lost op not forgetting, or trg_proc not reporting the
 * ENOBUFS.
 */
static void test_exec_lost(void **state)
{
	(void)state;
	struct event_base *b = connector_loop(on_lost);
	nlost = 0;
	nexecd = 0; /* saw_exec() below is about this test's execs */

	int wfd;
	pid_t a = child_to_java(&wfd);
	assert_true(pump(b));
	uint64_t s = start_of(a);
	assert_false(svc_jvm_detect(a, s));

	/* The smallest buffer the kernel allows (a few events), then 64
	 * execs with nobody reading: it overruns. */
	int fd = connector_fd();
	assert_true(fd >= 0);
	int one = 1;
	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &one, sizeof(one)), 0);
	for (int i = 0; i < 64; i++) {
		pid_t t = fork();
		assert_true(t >= 0);
		if (t == 0) {
			execl(other, other, "0", (char *)NULL);
			_exit(127);
		}
		assert_int_equal(waitpid(t, NULL, 0), t);
	}
	assert_int_equal(write(wfd, "x", 1), 1);
	close(wfd);
	wait_exec(a, java);

	assert_true(pump(b));
	assert_true(nlost > 0);
	assert_false(saw_exec(a)); /* the kernel dropped it: only "lost" says so */
	assert_int_equal(start_of(a), s);
	assert_true(svc_jvm_detect(a, s));
	reap(a);
	trg_proc_fini();
	event_base_free(b);
}

/* svc_jvm_forget: cached answers go, the next look reads afresh. */
static void test_forget(void **state)
{
	(void)state;
	char perf[256];
	if (geteuid() != 0)
		skip();
	pid_t a = spawn(other, 0);
	assert_true(a > 0);
	wait_exec(a, other);
	uint64_t s = start_of(a);
	assert_false(svc_jvm_detect(a, s));
	perf_file(a, perf, sizeof(perf));
	int fd = open(perf, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);
	svc_jvm_forget();
	assert_true(svc_jvm_detect(a, s));
	unlink(perf);
	reap(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_launcher_name),
		cmocka_unit_test(test_pid_reused),
		cmocka_unit_test(test_exec),
		cmocka_unit_test(test_exec_event),
		cmocka_unit_test(test_exec_lost),
		cmocka_unit_test(test_forget),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}

/*
 * trg_bench_app MODE ...: the app side of bench/triggers_bench.sh. Every
 * mode is the same executable, so that a trigger registered by one mode
 * matches the execs of another (the daemon keys cold starts on the
 * registering process's /proc/<pid>/exe and uid). Times are printed as
 * CLOCK_REALTIME seconds with microseconds, the clock of the daemon's log.
 *
 *   register-cold TIMEOUT_MS     COLD_START trigger, then exit
 *   idle MS                      sleep MS and exit; never connects
 *   exec-loop N MS LOG           fork+exec "idle MS" N times, one at a time;
 *                                stamp just before execve, watch LOG (inotify)
 *                                for the daemon's fire line of that pid and
 *                                for the end of its session
 *   oom CGDIR                    OOM trigger at 50 % of CGDIR's limit (v1
 *                                memory.limit_in_bytes, else v2 memory.max), then
 *                                commit 256 KiB a millisecond; stamp the step
 *                                where usage crosses the line, go on to 60 %
 *                                of the limit or the heap capture's result
 *   spin IDLE_MS MAX_MS          EXCESSIVE_CPU trigger (90 %, 1000 ms), idle
 *                                IDLE_MS, stamp T0, spin for MAX_MS or
 *                                until SIGTERM
 *   register-idle                EXCESSIVE_CPU and HANG (1 h) triggers
 *   oom-idle                     OOM trigger (50 %), then sleep connected
 *                                until SIGTERM
 *   swarm N                      N forked idle clients: connect (retrying a
 *                                refused connect), one heartbeat, sleep
 *                                until SIGTERM
 *   oom-swarm N UID0 NUIDS CGPFX N forked oom-idle children: child i (1..N)
 *                                moves into the cgroup CGPFX<i>, takes uid
 *                                UID0 + i % NUIDS, connects (retrying), adds
 *                                the OOM trigger (50 %), sleeps until SIGTERM;
 *                                one line when all have answered
 *
 * A benchmark helper: it prints what it saw and never judges it.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <grp.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include <profiling/profiling.h>

static volatile sig_atomic_t stop;
static volatile uint64_t sink;

static void on_term(int sig)
{
	stop = 1;
}

static double now_rt(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !stop)
		;
}

static prof_client *connect_or_die(void)
{
	int err = 0;
	prof_client *c = prof_connect(NULL, &err);
	if (!c) {
		fprintf(stderr, "trg_bench_app: connect: %s\n", strerror(-err));
		exit(1);
	}
	return c;
}

static void add_or_die(prof_client *c, const struct prof_trigger *t)
{
	int r = prof_add_trigger(c, t);
	if (r < 0) {
		fprintf(stderr, "trg_bench_app: add trigger %d: %s\n", t->type, prof_strerror(r));
		exit(1);
	}
}

/* ------------------------------------------------------------ cold start */

static int register_cold(unsigned timeout_ms)
{
	prof_client *c = connect_or_die();
	struct prof_trigger t = PROF_TRIGGER_INIT(.type = PROF_TRIGGER_COLD_START, .timeout_ms = timeout_ms);
	add_or_die(c, &t);
	prof_close(c);
	return 0;
}

/* The daemon's log, followed with inotify: new bytes are scanned line by line. */
struct follow {
	int fd, in;
	char buf[65536];
	size_t len;
};

/* A line matches when it holds a and (if set) b. */
struct alt {
	const char *a, *b;
};

/*
 * Wait up to ms for a new line matching one of the nalt alternatives; on a
 * match copy it to line, set *when to the time it was read and return 1.
 * The time is taken right after read() returned the bytes, so it bounds the
 * daemon's write() from above by the inotify wake-up.
 */
static int follow_wait(struct follow *f, const struct alt *alts, int nalt, int ms, double *when,
		       char *line, size_t linesz)
{
	uint64_t end = mono_ms() + (uint64_t)ms;
	double t = now_rt();
	for (;;) {
		ssize_t n;
		int got = 0;
		while (f->len < sizeof(f->buf) - 1 &&
		       (n = read(f->fd, f->buf + f->len, sizeof(f->buf) - 1 - f->len)) > 0) {
			f->len += (size_t)n;
			got = 1;
		}
		if (got)
			t = now_rt();
		f->buf[f->len] = '\0';
		char *nl;
		while ((nl = memchr(f->buf, '\n', f->len))) {
			*nl = '\0';
			int match = 0;
			for (int i = 0; i < nalt && !match; i++)
				match = strstr(f->buf, alts[i].a) &&
					(!alts[i].b || strstr(f->buf, alts[i].b));
			if (match && line && linesz) {
				size_t l = strlen(f->buf);
				if (l >= linesz)
					l = linesz - 1;
				memcpy(line, f->buf, l);
				line[l] = '\0';
			}
			size_t used = (size_t)(nl + 1 - f->buf);
			memmove(f->buf, nl + 1, f->len - used);
			f->len -= used;
			f->buf[f->len] = '\0';
			if (match) {
				*when = t;
				return 1;
			}
		}
		if (f->len == sizeof(f->buf) - 1)
			f->len = 0; /* a line too long to be ours */
		int64_t left = (int64_t)(end - mono_ms());
		if (left <= 0)
			return 0;
		struct pollfd pf = { .fd = f->in, .events = POLLIN };
		if (poll(&pf, 1, (int)left) > 0) {
			char ev[4096];
			if (read(f->in, ev, sizeof(ev)) < 0 && errno != EAGAIN)
				return 0;
		}
	}
}

/* After a fire line "... fired for pid P: session S", wait for S to end. */
static int wait_session_end(struct follow *f, const char *fire_line, int ms)
{
	const char *p = strstr(fire_line, ": session ");
	char a1[48], a2[48];
	double t;
	if (!p)
		return 0;
	unsigned long long id = strtoull(p + 10, NULL, 10);
	snprintf(a1, sizeof(a1), "session %llu (pid", id);
	snprintf(a2, sizeof(a2), "session %llu:", id);
	/* A failure inside the daemon's failure-log window has no line of its
	 * own: the window's summary, at most 1 s later, names the last one
	 * ("...; the last, session N (pid P), failed: ..."), which with one
	 * session at a time is ours. */
	const struct alt ends[] = { { a1, ") failed:" }, { a2, "redacted" }, { a1, "), failed:" } };
	return follow_wait(f, ends, 3, ms, &t, NULL, 0);
}

static int exec_loop(int n, const char *ms, const char *log)
{
	struct follow *f = calloc(1, sizeof(*f));
	char self[4096], fired[64], line[1280];
	double t;
	ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (!f || sl <= 0)
		return 1;
	self[sl] = '\0';
	f->fd = open(log, O_RDONLY | O_CLOEXEC);
	f->in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (f->fd < 0 || f->in < 0 || inotify_add_watch(f->in, log, IN_MODIFY) < 0) {
		fprintf(stderr, "trg_bench_app: cannot follow %s: %s\n", log, strerror(errno));
		return 1;
	}
	/* This process is an exec of the registered executable too: its own
	 * cold start must end first, or the first child's fire is only counted.
	 * The log is read from the start, so its fire line is not missed. */
	snprintf(fired, sizeof(fired), "fired for pid %d:", (int)getpid());
	const struct alt own = { "cold-start trigger", fired };
	if (follow_wait(f, &own, 1, 1000, &t, line, sizeof(line)))
		wait_session_end(f, line, 5000);
	/* The stamp before execve is written by the child into shared memory. */
	double *stamp = mmap(NULL, sizeof(double), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
			     -1, 0);
	if (stamp == MAP_FAILED)
		return 1;
	int missed = 0, unended = 0;
	for (int i = 0; i < n && !stop; i++) {
		*stamp = 0;
		pid_t pid = fork();
		if (pid < 0)
			return 1;
		if (pid == 0) {
			char *args[] = { self, "idle", (char *)ms, NULL };
			*stamp = now_rt();
			execv(self, args);
			_exit(127);
		}
		double seen = 0;
		snprintf(fired, sizeof(fired), "fired for pid %d:", (int)pid);
		const struct alt want = { "cold-start trigger", fired };
		int got = follow_wait(f, &want, 1, 2000, &seen, line, sizeof(line));
		int st;
		waitpid(pid, &st, 0);
		if (!got) {
			missed++;
			printf("sample pid=%d t0=%.6f seen=none\n", (int)pid, *stamp);
			continue;
		}
		printf("sample pid=%d t0=%.6f seen=%.6f\n", (int)pid, *stamp, seen);
		fflush(stdout);
		/* The session's end clears the trigger's running mark; only then
		 * does the next exec fire instead of being counted. */
		if (!wait_session_end(f, line, 5000))
			unended++;
	}
	printf("exec-loop: %d execs, %d without a fire line within 2 s, %d sessions not seen "
	       "ending within 5 s\n", n, missed, unended);
	return 0;
}

/* ------------------------------------------------------------------ OOM */

static int read_u64(const char *dir, const char *file, uint64_t *v)
{
	char path[600], buf[64];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	*v = strtoull(buf, NULL, 10);
	return 0;
}

static int oom_result, oom_error;

static void on_oom_result(const struct prof_result *r, void *ud)
{
	if (r->trigger != PROF_TRIGGER_OOM)
		return;
	oom_result = 1;
	oom_error = r->error;
	printf("result t=%.6f error=%d format=%s size=%llu\n", now_rt(), r->error, r->format,
	       (unsigned long long)r->size);
}

#define OOM_STEP (256u << 10)
#define OOM_MAX_STEPS 4096

static int oom(const char *dir)
{
	uint64_t limit, usage;
	const char *usage_file = "memory.usage_in_bytes";
	if (read_u64(dir, "memory.limit_in_bytes", &limit) < 0) {
		/* cgroup v2: the limit set on CGDIR itself */
		usage_file = "memory.current";
		if (read_u64(dir, "memory.max", &limit) < 0 || !limit) {
			fprintf(stderr, "trg_bench_app: no memory limit in %s\n", dir);
			return 1;
		}
	}
	prof_client *c = connect_or_die();
	prof_set_result_listener(c, on_oom_result, NULL);
	struct prof_trigger t = PROF_TRIGGER_INIT(.type = PROF_TRIGGER_OOM, .memory_percent = 50);
	add_or_die(c, &t);
	/* The daemon's line: limit / 100 * percent. */
	uint64_t thr = limit / 100 * 50;
	static char *chunk[OOM_MAX_STEPS];
	int k = 0, cross = -1;
	double before = 0, after = 0;
	usage = 0;
	read_u64(dir, usage_file, &usage);
	uint64_t start_usage = usage, cross_usage = 0;
	/*
	 * A steady leak of one step per millisecond, on past the line until
	 * the result comes or usage reaches 60 % of the limit (the capture
	 * itself needs room in the group): the kernel
	 * checks v1 thresholds only every 128 page events per CPU, so a leak
	 * that stopped right at the line might never be signalled.
	 */
	while (k < OOM_MAX_STEPS && !oom_result) {
		double t_step = now_rt();
		chunk[k] = malloc(OOM_STEP);
		if (!chunk[k])
			break;
		memset(chunk[k], 0x5a, OOM_STEP); /* commit: the cgroup counts touched pages */
		k++;
		if (read_u64(dir, usage_file, &usage) < 0)
			break;
		if (cross < 0 && usage >= thr) {
			before = t_step;
			after = now_rt();
			cross = k;
			cross_usage = usage;
		}
		if (usage >= limit / 100 * 60)
			break;
		if (cross >= 0)
			prof_dispatch(c, 0);
		sleep_ms(1);
	}
	printf("cross pid=%d before=%.6f after=%.6f usage=%llu threshold=%llu start=%llu steps=%d "
	       "past=%d top=%llu\n", (int)getpid(), before, after, (unsigned long long)cross_usage,
	       (unsigned long long)thr, (unsigned long long)start_usage, cross, k - cross,
	       (unsigned long long)usage);
	fflush(stdout);
	uint64_t end = mono_ms() + 3000;
	while (!oom_result && mono_ms() < end)
		prof_dispatch(c, 100);
	if (!oom_result)
		printf("result none within 3 s\n");
	for (int i = 0; i < k; i++)
		free(chunk[i]);
	prof_close(c);
	return 0;
}

/* -------------------------------------------------------------- spinner */

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#define SHARE_SLOTS 8

/* Spin; note this thread's share of a core in each of the first 250 ms
 * slots, to tell a slow detector from a spinner that did not get the CPU. */
__attribute__((noinline)) static void spin_until(uint64_t end_ms, unsigned share[SHARE_SLOTS])
{
	uint64_t x = 1, start = mono_ms(), next = start + 250, c0 = thread_cpu_ns();
	int slot = 0;
	while (!stop && mono_ms() < end_ms) {
		for (int i = 0; i < 100000; i++)
			x = x * 6364136223846793005ull + 1;
		uint64_t now = mono_ms();
		if (slot < SHARE_SLOTS && now >= next) {
			uint64_t c1 = thread_cpu_ns();
			share[slot++] = (unsigned)((c1 - c0) / 10000u / (now - (next - 250)));
			c0 = c1;
			next = now + 250;
		}
	}
	sink = x;
}

static int spin(unsigned idle_ms, unsigned max_ms)
{
	prof_client *c = connect_or_die();
	/* The smallest window the daemon takes is 250 ms, its tick; 1000 ms is
	 * four whole ticks over the line. */
	struct prof_trigger t = PROF_TRIGGER_INIT(.type = PROF_TRIGGER_EXCESSIVE_CPU, .cpu_percent = 90,
				  .cpu_window_ms = 1000);
	add_or_die(c, &t);
	printf("ready pid=%d t=%.6f\n", (int)getpid(), now_rt());
	fflush(stdout);
	sleep_ms(idle_ms);
	printf("spin t0=%.6f\n", now_rt());
	fflush(stdout);
	unsigned share[SHARE_SLOTS] = { 0 };
	spin_until(mono_ms() + max_ms, share);
	printf("stop t=%.6f\n", now_rt());
	printf("share");
	for (int i = 0; i < SHARE_SLOTS; i++)
		printf(" %u", share[i]);
	printf("\n");
	prof_close(c);
	return 0;
}

/* ---------------------------------------------------------- idle swarm */

static int register_idle(void)
{
	prof_client *c = connect_or_die();
	struct prof_trigger cpu = PROF_TRIGGER_INIT(.type = PROF_TRIGGER_EXCESSIVE_CPU);
	struct prof_trigger hang = PROF_TRIGGER_INIT(.type = PROF_TRIGGER_HANG, .hang_timeout_ms = 3600000);
	add_or_die(c, &cpu);
	add_or_die(c, &hang);
	prof_close(c);
	return 0;
}

static int oom_idle(void)
{
	prof_client *c = connect_or_die();
	struct prof_trigger t = PROF_TRIGGER_INIT(.type = PROF_TRIGGER_OOM, .memory_percent = 50);
	add_or_die(c, &t);
	printf("ready pid=%d\n", (int)getpid());
	fflush(stdout);
	while (!stop)
		prof_dispatch(c, 1000);
	prof_close(c);
	return 0;
}

/* The children's one-byte reports on fd ('0' failed, '1' connected, '2'
 * connected after retrying), until all of started have reported, ms pass
 * or a signal stops the run. */
static void swarm_collect(int fd, int started, uint64_t ms, int *ok, int *bad, int *retried)
{
	uint64_t end = mono_ms() + ms;
	while (*ok + *bad < started && mono_ms() < end && !stop) {
		char b;
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		if (poll(&pf, 1, 1000) <= 0)
			continue;
		if (read(fd, &b, 1) != 1)
			break;
		if (b == '0') {
			(*bad)++;
			continue;
		}
		(*ok)++;
		*retried += b == '2';
	}
}

static int swarm(int n)
{
	int p[2];
	pid_t *kids = calloc((size_t)n, sizeof(*kids));
	if (!kids || pipe(p) < 0)
		return 1;
	pid_t parent = getpid();
	int started = 0;
	for (int i = 0; i < n; i++) {
		pid_t pid = fork();
		if (pid < 0)
			break;
		if (pid == 0) {
			close(p[0]);
			prctl(PR_SET_PDEATHSIG, SIGTERM);
			if (getppid() != parent)
				_exit(0);
			/* A burst of connects can overflow the daemon's listen
			 * backlog (prof_connect does not retry): retry here, and
			 * say so, so that the steady state has them all. */
			int err = 0, tries = 0;
			prof_client *c = NULL;
			while (!c && tries++ < 100 && !stop) {
				c = prof_connect(NULL, &err);
				if (!c && tries == 1)
					fprintf(stderr, "swarm: connect: %s (retrying)\n", strerror(-err));
				if (!c)
					sleep_ms(20);
			}
			char ok = !c ? '0' : tries > 1 ? '2' : '1';
			if (c)
				prof_heartbeat();
			if (write(p[1], &ok, 1) != 1)
				_exit(1);
			close(p[1]);
			while (!stop)
				pause();
			if (c)
				prof_close(c);
			_exit(0);
		}
		kids[started++] = pid;
	}
	close(p[1]);
	int ok = 0, bad = 0, retried = 0;
	swarm_collect(p[0], started, 60000, &ok, &bad, &retried);
	printf("swarm ready: %d forked, %d connected (%d only after retrying), %d failed to "
	       "connect\n", started, ok, retried, bad);
	fflush(stdout);
	while (!stop)
		pause();
	for (int i = 0; i < started; i++)
		kill(kids[i], SIGTERM);
	for (int i = 0; i < started; i++)
		waitpid(kids[i], NULL, 0);
	return 0;
}

/*
 * Child i of oom_swarm: into its cgroup, to uid, connected, OOM trigger
 * added. '1' (registered), '2' (after retrying a refused connect) or '0'.
 */
static char swarm_child(int i, unsigned uid, const char *cgpfx, prof_client **out)
{
	char path[512];
	snprintf(path, sizeof(path), "%s%d/cgroup.procs", cgpfx, i);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	/* "0": the writing process itself */
	if (fd < 0 || write(fd, "0", 1) != 1) {
		fprintf(stderr, "oom-swarm: %s: %s\n", path, strerror(errno));
		return '0';
	}
	close(fd);
	if (setgroups(0, NULL) < 0 || setgid(uid) < 0 || setuid(uid) < 0) {
		fprintf(stderr, "oom-swarm: uid %u: %s\n", uid, strerror(errno));
		return '0';
	}
	int err = 0, tries = 0;
	prof_client *c = NULL;
	while (!c && tries++ < 100 && !stop) {
		c = prof_connect(NULL, &err);
		if (!c)
			sleep_ms(20);
	}
	if (!c) {
		fprintf(stderr, "oom-swarm: connect: %s\n", strerror(-err));
		return '0';
	}
	struct prof_trigger t = PROF_TRIGGER_INIT(.type = PROF_TRIGGER_OOM, .memory_percent = 50);
	int r = prof_add_trigger(c, &t);
	if (r < 0) {
		fprintf(stderr, "oom-swarm: add trigger: %s\n", prof_strerror(r));
		prof_close(c);
		return '0';
	}
	*out = c;
	return tries > 1 ? '2' : '1';
}

/*
 * The idle side of bench/oom_v2_bench.sh: N watched processes without N
 * execs (under TCG each exec and dynamic link costs tens of milliseconds),
 * each in its own cgroup, spread over NUIDS users because the daemon caps
 * connections and v2 cgroups per uid (max_clients_per_uid, MEM_MAX_CG_UID).
 */
static int oom_swarm(int n, unsigned uid0, unsigned nuids, const char *cgpfx)
{
	int p[2];
	pid_t *kids = calloc((size_t)(n > 0 ? n : 1), sizeof(*kids));
	if (!kids || !nuids || pipe(p) < 0)
		return 1;
	pid_t parent = getpid();
	int started = 0;
	for (int i = 1; i <= n; i++) {
		pid_t pid = fork();
		if (pid < 0)
			break;
		if (pid == 0) {
			close(p[0]);
			prctl(PR_SET_PDEATHSIG, SIGTERM);
			if (getppid() != parent)
				_exit(0);
			prof_client *c = NULL;
			char ok = swarm_child(i, uid0 + (unsigned)i % nuids, cgpfx, &c);
			if (write(p[1], &ok, 1) != 1)
				_exit(1);
			close(p[1]);
			while (!stop && ok != '0')
				prof_dispatch(c, 1000);
			if (ok != '0')
				prof_close(c);
			_exit(0);
		}
		kids[started++] = pid;
	}
	close(p[1]);
	int ok = 0, bad = 0, retried = 0;
	swarm_collect(p[0], started, 300000, &ok, &bad, &retried);
	printf("oom-swarm ready: %d forked, %d registered (%d only after retrying a connect), "
	       "%d failed, over %u uids\n", started, ok, retried, bad, nuids);
	fflush(stdout);
	while (!stop)
		pause();
	for (int i = 0; i < started; i++)
		kill(kids[i], SIGTERM);
	for (int i = 0; i < started; i++)
		waitpid(kids[i], NULL, 0);
	free(kids);
	return 0;
}

int main(int argc, char **argv)
{
	const char *m = argc > 1 ? argv[1] : "";
	struct sigaction sa = { .sa_handler = on_term };
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	if (!strcmp(m, "register-cold") && argc > 2)
		return register_cold((unsigned)atoi(argv[2]));
	if (!strcmp(m, "idle") && argc > 2) {
		sleep_ms((unsigned)atoi(argv[2]));
		return 0;
	}
	if (!strcmp(m, "exec-loop") && argc > 4)
		return exec_loop(atoi(argv[2]), argv[3], argv[4]);
	if (!strcmp(m, "oom") && argc > 2)
		return oom(argv[2]);
	if (!strcmp(m, "spin") && argc > 3)
		return spin((unsigned)atoi(argv[2]), (unsigned)atoi(argv[3]));
	if (!strcmp(m, "register-idle"))
		return register_idle();
	if (!strcmp(m, "oom-idle"))
		return oom_idle();
	if (!strcmp(m, "swarm") && argc > 2)
		return swarm(atoi(argv[2]));
	if (!strcmp(m, "oom-swarm") && argc > 5)
		return oom_swarm(atoi(argv[2]), (unsigned)atoi(argv[3]), (unsigned)atoi(argv[4]),
				 argv[5]);
	fprintf(stderr, "usage: trg_bench_app register-cold MS | idle MS | exec-loop N MS LOG | "
		"oom CGDIR | spin IDLE_MS MAX_MS | register-idle | oom-idle | swarm N | "
		"oom-swarm N UID0 NUIDS CGPFX\n");
	return 2;
}

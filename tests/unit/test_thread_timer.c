/*
 * common/thread_timer.h on the real kernel: which signals the handler
 * takes as samples and with which index, on this thread and on another;
 * weights that sum to the thread's CPU time through long kernel stretches
 * (one signal for many periods); the fallback to POSIX timers at the fd
 * cap; the fds kept above FD_SETSIZE; an fd the app closed and reused,
 * left alone at disarm and not answering for our next event; timers under
 * a seccomp filter; and the same as an unprivileged uid
 * (perf_event_paranoid 2: user mode only).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <pthread.h>
#include <sys/mman.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "thread_timer.h"
#include "util.h"

static _Atomic int got, bad, last_index;
static _Atomic int counting; /* a signal of none of ours is bad only while set */
static _Atomic uint64_t wsum;
static struct tt_timer *weigh; /* the armed timer whose weights are summed */
static struct rlimit saved_nofile;

static void on_prof(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	int ix = tt_index(si);
	if (ix < 0) {
		if (atomic_load(&counting))
			atomic_fetch_add(&bad, 1);
	} else
		atomic_store(&last_index, ix);
	atomic_fetch_add(&wsum, tt_sample(si, weigh, 1000000));
	atomic_fetch_add(&got, 1);
}

/* A test that lowers RLIMIT_NOFILE and fails midway must not leave it low. */
static int save_nofile(void **state)
{
	(void)state;
	return getrlimit(RLIMIT_NOFILE, &saved_nofile);
}

static int restore_nofile(void **state)
{
	(void)state;
	weigh = NULL;
	return setrlimit(RLIMIT_NOFILE, &saved_nofile);
}

static void handle_prof(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_prof;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigaction(SIGPROF, &sa, NULL);
	atomic_store(&got, 0);
	atomic_store(&bad, 0);
	atomic_store(&last_index, -1);
	atomic_store(&wsum, 0);
	atomic_store(&counting, 1);
}

/*
 * Disarm t, from here on not counting strays as bad: a signal raised just
 * before the disarm may arrive after its slot is freed, and is then rightly
 * no sample (thread_timer.h). another_threads_samples met one in a
 * clean-clone suite run.
 */
static void quiet_disarm(struct tt_timer *t)
{
	atomic_store(&counting, 0);
	tt_disarm(t);
}

/* tt_choose, and skip the test (saying why) where perf events are not had. */
static void need_perf(void)
{
	char why[256];
	int src = tt_choose();
	tt_describe(why, sizeof(why));
	if (src != TT_PERF) {
		printf("skipped: no perf events here (%s)\n", why);
		skip();
	}
}

static pid_t tid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* Burn ms of this thread's CPU time in user mode. */
static void burn(int ms)
{
	struct timespec t0, t;
	volatile uint64_t x = 1;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
	do {
		for (int i = 0; i < 20000; i++)
			x = x * 6364136223846793005ull + 1;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
}

static void forged_siginfo_is_no_sample(void **state)
{
	(void)state;
	siginfo_t si;
	assert_int_equal(tt_index(NULL), -1);
	int codes[] = { SI_USER, SI_TKILL, SI_QUEUE, SI_KERNEL };
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		memset(&si, 0, sizeof(si));
		si.si_signo = SIGPROF;
		si.si_code = codes[i];
		si.si_value.sival_int = 3;
		assert_int_equal(tt_index(&si), -1);
	}
	/* A timer's negative index, an event's fd that is none of ours. */
	memset(&si, 0, sizeof(si));
	si.si_code = SI_TIMER;
	si.si_value.sival_int = -5;
	assert_int_equal(tt_index(&si), -1);
	memset(&si, 0, sizeof(si));
	si.si_code = POLL_IN;
	si.si_fd = 0;
	assert_int_equal(tt_index(&si), -1);
	si.si_fd = -1; /* fd + 1 == 0 is an empty slot's key */
	assert_int_equal(tt_index(&si), -1);
	/* Weights: 1 + the overrun for a timer, capped; 1 without a timer. */
	memset(&si, 0, sizeof(si));
	si.si_code = SI_TIMER;
	si.si_overrun = 3;
	assert_int_equal(tt_sample(&si, NULL, 1000), 4);
	si.si_overrun = 5000;
	assert_int_equal(tt_sample(&si, NULL, 1000), 1000);
	si.si_code = POLL_IN;
	assert_int_equal(tt_sample(&si, NULL, 1000), 1);
}

/* Signals on this thread's CPU time carry the index given to tt_arm. */
static int sample_self(int source_wanted, bool wall, int index)
{
	struct tt_timer t;
	handle_prof();
	if (tt_arm(&t, tid(), SIGPROF, 1000000, wall, index) < 0)
		return -1;
	if (t.source != source_wanted) {
		quiet_disarm(&t);
		return -2;
	}
	burn(60);
	quiet_disarm(&t);
	return 0;
}

static void cpu_samples_carry_their_index(void **state)
{
	(void)state;
	char why[256];
	int src = tt_choose();
	tt_describe(why, sizeof(why));
	printf("source: %s\n", why);
	if (src != TT_PERF) {
		printf("skipped: no perf events here (%s)\n", why);
		skip();
	}
	assert_int_equal(sample_self(TT_PERF, false, 42), 0);
	assert_true(atomic_load(&got) > 0);
	assert_int_equal(atomic_load(&bad), 0);
	assert_int_equal(atomic_load(&last_index), 42);
}

/*
 * Long page-faulting mmaps (MAP_POPULATE): the signal waits for the return
 * to user mode and a second one raised meanwhile is lost, so the weights,
 * not the signals, must add up to the thread's CPU time. With a weight of
 * 1 per signal this read 0.02 of it.
 */
static void weights_sum_to_cpu_through_kernel_stretches(void **state)
{
	(void)state;
	need_perf();
	struct tt_timer t;
	handle_prof();
	weigh = &t;
	uint64_t c0 = util_now_ns(CLOCK_THREAD_CPUTIME_ID);
	assert_int_equal(tt_arm(&t, tid(), SIGPROF, 1000000, false, 3), 0);
	assert_int_equal(t.source, TT_PERF);
	while (util_now_ns(CLOCK_THREAD_CPUTIME_ID) - c0 < 300000000u) {
		size_t len = 64u << 20;
		void *m = mmap(NULL, len, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		assert_true(m != MAP_FAILED);
		munmap(m, len);
	}
	quiet_disarm(&t);
	weigh = NULL;
	double cpu = (double)(util_now_ns(CLOCK_THREAD_CPUTIME_ID) - c0), sum = (double)atomic_load(&wsum) * 1e6;
	printf("kernel stretches: %d signals, weights %.0f ms, thread CPU %.0f ms\n",
	       atomic_load(&got), sum / 1e6, cpu / 1e6);
	assert_int_equal(atomic_load(&bad), 0);
	assert_true(sum >= 0.8 * cpu && sum <= 1.2 * cpu);
}

struct burner {
	_Atomic pid_t tid;
	_Atomic int stop;
	uint64_t cpu;
};

static void *burner_main(void *arg)
{
	struct burner *b = arg;
	uint64_t c0 = util_now_ns(CLOCK_THREAD_CPUTIME_ID);
	atomic_store(&b->tid, tid());
	volatile uint64_t x = 1;
	while (!atomic_load(&b->stop))
		for (int i = 0; i < 20000; i++)
			x = x * 6364136223846793005ull + 1;
	b->cpu = util_now_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
	return NULL;
}

/* Armed from this thread for another, as the samplers do: the signals go
 * to that thread, carry its index, and weigh what it used. */
static void another_threads_samples(void **state)
{
	(void)state;
	need_perf();
	struct burner b = { 0 };
	pthread_t th;
	handle_prof();
	assert_int_equal(pthread_create(&th, NULL, burner_main, &b), 0);
	while (!atomic_load(&b.tid))
		sched_yield();
	struct tt_timer t;
	weigh = &t;
	assert_int_equal(tt_arm(&t, atomic_load(&b.tid), SIGPROF, 1000000, false, 5), 0);
	assert_int_equal(t.source, TT_PERF);
	struct timespec ts = { 0, 200000000 };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	quiet_disarm(&t);
	atomic_store(&b.stop, 1);
	pthread_join(th, NULL);
	weigh = NULL;
	printf("another thread: %d signals, weights %llu ms of its %.0f ms\n", atomic_load(&got),
	       (unsigned long long)atomic_load(&wsum), (double)b.cpu / 1e6);
	assert_true(atomic_load(&got) > 0);
	assert_int_equal(atomic_load(&bad), 0);
	assert_int_equal(atomic_load(&last_index), 5);
	assert_true((double)atomic_load(&wsum) * 1e6 <= 1.2 * (double)b.cpu);
}

static void wall_clock_is_a_timer(void **state)
{
	(void)state;
	tt_choose();
	handle_prof();
	struct tt_timer t;
	assert_int_equal(tt_arm(&t, tid(), SIGPROF, 1000000, true, 7), 0);
	assert_int_equal(t.source, TT_TIMER);
	struct timespec ts = { 0, 30000000 };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	quiet_disarm(&t);
	assert_true(atomic_load(&got) > 0);
	assert_int_equal(atomic_load(&bad), 0);
	assert_int_equal(atomic_load(&last_index), 7);
}

/* RLIMIT_NOFILE's soft limit at cur (at most the hard one); the teardown
 * puts it back. Then need_perf. */
static rlim_t nofile_then_perf(rlim_t cur)
{
	struct rlimit rl = saved_nofile;
	rl.rlim_cur = cur < rl.rlim_max ? cur : rl.rlim_max;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
	need_perf();
	return rl.rlim_cur;
}

/* Past an eighth of RLIMIT_NOFILE, threads get timers, and still samples. */
static void fd_cap_falls_back_to_timers(void **state)
{
	(void)state;
	nofile_then_perf(64);
	struct tt_timer t[10];
	int perf = 0, timers = 0;
	char why[256];
	tt_describe(why, sizeof(why));
	assert_null(strstr(why, "threads on CPU-clock timers"));
	for (int i = 0; i < 10; i++) {
		assert_int_equal(tt_arm(&t[i], tid(), SIGPROF, 100000000, false, i), 0);
		if (t[i].source == TT_PERF)
			perf++;
		else
			timers++;
	}
	for (int i = 0; i < 10; i++)
		tt_disarm(&t[i]);
	assert_int_equal(perf, 8);
	assert_int_equal(timers, 2);
	tt_describe(why, sizeof(why)); /* for the profile's comment */
	assert_non_null(strstr(why, "; 2 threads on CPU-clock timers"));
}

/* With room in the limit, the events' fds leave 0..1023 to the app. */
static void fds_above_fd_setsize(void **state)
{
	(void)state;
	if (nofile_then_perf(8192) < 4096) {
		printf("skipped: a hard RLIMIT_NOFILE under 4096\n");
		skip();
	}
	struct tt_timer t;
	assert_int_equal(tt_arm(&t, tid(), SIGPROF, 100000000, false, 0), 0);
	assert_int_equal(t.source, TT_PERF);
	assert_true(t.fd >= 1024);
	tt_disarm(&t);
}

/*
 * The app closed the event's fd and opened a file on the same number:
 * disarming must not close the app's file.
 */
static void disarm_leaves_a_reused_fd(void **state)
{
	(void)state;
	need_perf();
	struct tt_timer t;
	assert_int_equal(tt_arm(&t, tid(), SIGPROF, 100000000, false, 0), 0);
	assert_int_equal(t.source, TT_PERF);
	int n = t.fd;
	int f = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_true(f >= 0);
	assert_int_equal(dup2(f, n), n); /* closes the event, puts the file there */
	close(f);
	tt_disarm(&t);
	assert_int_not_equal(fcntl(n, F_GETFD), -1);
	/* Again, and this time our next event gets the closed one's number:
	 * its signals carry its own index, not the closed one's. */
	struct tt_timer t1, t2;
	assert_int_equal(tt_arm(&t1, tid(), SIGPROF, 1000000, false, 11), 0);
	assert_int_equal(t1.source, TT_PERF);
	int m = t1.fd;
	close(m); /* the app closes it */
	handle_prof();
	assert_int_equal(tt_arm(&t2, tid(), SIGPROF, 1000000, false, 22), 0);
	assert_int_equal(t2.source, TT_PERF);
	assert_int_equal(t2.fd, m);
	burn(30);
	assert_true(atomic_load(&got) > 0);
	assert_int_equal(atomic_load(&last_index), 22);
	/* The stale one disarmed first: it closes nothing and leaves t2's
	 * slot, so t2 still samples. */
	tt_disarm(&t1);
	assert_int_not_equal(fcntl(m, F_GETFD), -1);
	handle_prof();
	burn(30);
	assert_true(atomic_load(&got) > 0);
	assert_int_equal(atomic_load(&bad), 0);
	assert_int_equal(atomic_load(&last_index), 22);
	tt_disarm(&t2);
	close(n);
}

/*
 * Under a seccomp filter (here one that allows everything) no
 * perf_event_open is tried: a filter that kills on unknown calls would
 * kill the app. In a child, as a filter cannot be taken off.
 */
static void seccomp_filter_means_timers(void **state)
{
	(void)state;
	pid_t c = fork();
	assert_true(c >= 0);
	if (c == 0) {
		struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
		struct sock_fprog prog = { .len = 1, .filter = &allow };
		char why[256];
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
		    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
			_exit(2);
		int src = tt_choose();
		tt_describe(why, sizeof(why));
		_exit(src == TT_TIMER && strstr(why, "seccomp") ? 0 : 1);
	}
	int st;
	assert_int_equal(waitpid(c, &st, 0), c);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* An unprivileged uid: perf_event_paranoid decides; either way it samples. */
static void unprivileged_uid_samples(void **state)
{
	(void)state;
	if (geteuid() != 0) {
		printf("skipped: needs root to become another uid\n");
		skip();
	}
	int p[2];
	assert_int_equal(pipe(p), 0);
	pid_t c = fork();
	assert_true(c >= 0);
	if (c == 0) {
		char msg[256];
		char why[256] = "setuid failed";
		int ok = 0;
		close(p[0]);
		if (setgid(65534) == 0 && setuid(65534) == 0) {
			int src = tt_choose();
			tt_describe(why, sizeof(why));
			ok = sample_self(src, false, 9) == 0 && atomic_load(&got) > 0 &&
			     atomic_load(&bad) == 0 && atomic_load(&last_index) == 9;
		}
		int n = snprintf(msg, sizeof(msg), "%d %s", ok, why);
		if (write(p[1], msg, (size_t)n) < 0)
			_exit(2);
		_exit(0);
	}
	close(p[1]);
	char buf[256] = { 0 };
	ssize_t n = read(p[0], buf, sizeof(buf) - 1);
	close(p[0]);
	int st;
	waitpid(c, &st, 0);
	assert_true(n > 0);
	printf("uid 65534: %s\n", buf + 2);
	assert_int_equal(buf[0], '1');
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(forged_siginfo_is_no_sample, save_nofile, restore_nofile),
		cmocka_unit_test_setup_teardown(cpu_samples_carry_their_index, save_nofile, restore_nofile),
		cmocka_unit_test_setup_teardown(weights_sum_to_cpu_through_kernel_stretches, save_nofile,
						restore_nofile),
		cmocka_unit_test_setup_teardown(another_threads_samples, save_nofile, restore_nofile),
		cmocka_unit_test_setup_teardown(wall_clock_is_a_timer, save_nofile, restore_nofile),
		cmocka_unit_test_setup_teardown(fd_cap_falls_back_to_timers, save_nofile, restore_nofile),
		cmocka_unit_test_setup_teardown(fds_above_fd_setsize, save_nofile, restore_nofile),
		cmocka_unit_test_setup_teardown(disarm_leaves_a_reused_fd, save_nofile, restore_nofile),
		cmocka_unit_test_setup_teardown(seccomp_filter_means_timers, save_nofile, restore_nofile),
		cmocka_unit_test_setup_teardown(unprivileged_uid_samples, save_nofile, restore_nofile),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

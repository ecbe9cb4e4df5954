/*
 * hostile_pidtable: fill the trigger watchers' shared tables (docs/SECURITY.md).
 *
 *   hostile_pidtable register
 *     Registers an EXCESSIVE_CPU trigger for this executable: from now on
 *     every process of this uid that execs it is the app's and is watched.
 *   hostile_pidtable spawn N
 *     Starts N copies of itself (fork + exec) that sleep until killed, all
 *     in a process group of their own; prints "spawned K pgid G" once they
 *     run, then sleeps until killed itself (kill -KILL -- -G ends them all).
 *   hostile_pidtable churn SECONDS
 *     Execs short-lived copies of itself, one after the other, for
 *     SECONDS; prints "execs N".
 *   hostile_pidtable victim [SECONDS]
 *     The other uid's app: registers EXCESSIVE_CPU (5 % over 1 s, so a
 *     loaded machine still crosses it) and spins four threads until a
 *     result of the trigger with a capture comes (one with an error is
 *     printed and waited past); prints its path, exit 0. SECONDS (150 by
 *     default) only catches a hang: the time to the result is not what
 *     is tested (see pid_table.sh), so it is printed on stderr, with the
 *     time each step took, never asserted.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <profiling/profiling.h>

#include "util.h"

static int reg(void)
{
	int err;
	setenv("PROFILING_NO_AGENT", "1", 1);
	prof_client *c = prof_connect(NULL, &err);
	if (!c) {
		fprintf(stderr, "hostile_pidtable: connect: %d\n", err);
		return 1;
	}
	struct prof_trigger t = PROF_TRIGGER_INIT(.type = PROF_TRIGGER_EXCESSIVE_CPU, .cpu_percent = 100,
				  .cpu_window_ms = 600000);
	int r = prof_add_trigger(c, &t);
	prof_close(c);
	if (r < 0) {
		fprintf(stderr, "hostile_pidtable: add trigger: %s\n", prof_strerror(r));
		return 1;
	}
	printf("registered\n");
	return 0;
}

static pid_t start(const char *self, const char *mode)
{
	pid_t p = fork();
	if (p == 0) {
		execl(self, self, mode, (char *)NULL);
		_exit(127);
	}
	return p;
}

__attribute__((noreturn)) static void spawn(const char *self, int n)
{
	int k = 0;
	setpgid(0, 0);
	for (int i = 0; i < n; i++) {
		if (start(self, "sleep") > 0)
			k++;
		/* Paced, so that the daemon sees every exec: a burst faster than
		 * it reads overruns the proc connector and fills nothing. */
		if (i % 25 == 24)
			usleep(50000);
	}
	/* Let the last ones reach their exec. */
	usleep(500000);
	printf("spawned %d pgid %d\n", k, (int)getpgrp());
	fflush(stdout);
	for (;;)
		pause();
}

static int churn(const char *self, int seconds)
{
	long n = 0;
	uint64_t end = util_mono_ms() + (uint64_t)seconds * 1000;
	while (util_mono_ms() < end) {
		pid_t p = start(self, "exit");
		if (p > 0 && waitpid(p, NULL, 0) == p)
			n++;
	}
	printf("execs %ld\n", n);
	return 0;
}

static atomic_int stop, got, got_error, nerrors;
static char got_path[4096];
static volatile uint64_t sink;

/*
 * A result with an error still means the trigger fired: under a heavy
 * load this app's own runtime, which shares the CPU with its four
 * spinners, can miss the capture's deadline (PROF_E_TIMEOUT). The
 * spinners go on, the trigger fires again, and the wait goes on for a
 * result with a capture in it: that is what the test asks for.
 */
static void on_result(const struct prof_result *r, void *ud)
{
	(void)ud;
	if (r->error) {
		atomic_store(&got_error, r->error);
		atomic_fetch_add(&nerrors, 1);
		fprintf(stderr, "hostile_pidtable: a result with error %d (%s): waiting for the next\n",
			r->error, prof_strerror(r->error));
		return;
	}
	snprintf(got_path, sizeof(got_path), "%s", r->path);
	atomic_store(&got, 1);
}

static void *spin(void *arg)
{
	uint64_t x = 1;
	while (!atomic_load(&stop))
		for (int i = 0; i < 100000; i++)
			x = x * 6364136223846793005ull + 1;
	sink = x;
	return NULL;
}

static int victim(unsigned bound_s)
{
	int err;
	uint64_t t0 = util_mono_ms();
	/* The pid the daemon's lines name, for pid_table.sh to look for. */
	fprintf(stderr, "hostile_pidtable: victim pid %d\n", (int)getpid());
	prof_client *c = prof_connect(NULL, &err);
	if (!c) {
		fprintf(stderr, "hostile_pidtable: connect: %d\n", err);
		return 1;
	}
	prof_set_result_listener(c, on_result, NULL);
	/* Wall-clock samples: the capture has samples however little CPU the
	 * spinners get on a loaded machine. */
	struct prof_trigger t = PROF_TRIGGER_INIT(.type = PROF_TRIGGER_EXCESSIVE_CPU, .cpu_percent = 5,
				  .cpu_window_ms = 1000,
				  .params = &(const struct prof_params)PROF_PARAMS_INIT(
					  .duration_ms = 500, .clock = 1));
	int r = prof_add_trigger(c, &t);
	if (r < 0) {
		fprintf(stderr, "hostile_pidtable: add trigger: %s\n", prof_strerror(r));
		return 1;
	}
	uint64_t t1 = util_mono_ms();
	fprintf(stderr, "hostile_pidtable: connected and registered in %llu ms\n",
		(unsigned long long)(t1 - t0));
	pthread_t th[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, spin, NULL);
	uint64_t end = t1 + (uint64_t)bound_s * 1000;
	while (!atomic_load(&got) && util_mono_ms() < end)
		prof_dispatch(c, 100);
	if (atomic_load(&got))
		fprintf(stderr, "hostile_pidtable: result %llu ms after the registration\n",
			(unsigned long long)(util_mono_ms() - t1));
	atomic_store(&stop, 1);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	prof_clear_triggers(c);
	prof_close(c);
	if (!atomic_load(&got)) {
		fprintf(stderr, "hostile_pidtable: no excessive-cpu result in %u s "
			"(%d with an error, the last %d)\n", bound_s, atomic_load(&nerrors),
			atomic_load(&got_error));
		return 1;
	}
	printf("%s\n", got_path);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "sleep")) {
		for (;;)
			pause();
	}
	if (argc == 2 && !strcmp(argv[1], "exit"))
		return 0;
	if (argc == 2 && !strcmp(argv[1], "register"))
		return reg();
	if (argc == 2 && !strcmp(argv[1], "victim"))
		return victim(150);
	if (argc == 3 && !strcmp(argv[1], "victim") && atoi(argv[2]) > 0)
		return victim((unsigned)atoi(argv[2]));
	if (argc == 3 && !strcmp(argv[1], "spawn"))
		spawn("/proc/self/exe", atoi(argv[2]));
	if (argc == 3 && !strcmp(argv[1], "churn"))
		return churn("/proc/self/exe", atoi(argv[2]));
	fprintf(stderr, "usage: hostile_pidtable register | spawn N | churn SECONDS | victim [SECONDS]\n");
	return 2;
}

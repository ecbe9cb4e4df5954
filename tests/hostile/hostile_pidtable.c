/*
 * hostile_pidtable: fill the trigger watchers' shared tables (docs/SECURITY.md).
 *
 *   hostile_pidtable register
 *     Registers an EXCESSIVE_CPU trigger for this executable: from now on
 *     every process of this uid that execs it is the app's and is watched.
 *   hostile_pidtable spawn N
 *     Starts N copies of itself (fork + exec) that sleep until killed;
 *     prints "spawned K" once they run, then sleeps until killed itself.
 *   hostile_pidtable churn SECONDS
 *     Execs short-lived copies of itself, one after the other, for
 *     SECONDS; prints "execs N".
 */
#include <errno.h>
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
	struct prof_trigger t = { .type = PROF_TRIGGER_EXCESSIVE_CPU, .cpu_percent = 100,
				  .cpu_window_ms = 600000 };
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
	for (int i = 0; i < n; i++) {
		if (start(self, "sleep") > 0)
			k++;
		/* Paced, so that the daemon sees every exec: a burst faster than
		 * it reads overruns the proc connector and fills nothing. */
		if (i % 50 == 49)
			usleep(50000);
	}
	/* Let the last ones reach their exec. */
	usleep(500000);
	printf("spawned %d\n", k);
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
	if (argc == 3 && !strcmp(argv[1], "spawn"))
		spawn("/proc/self/exe", atoi(argv[2]));
	if (argc == 3 && !strcmp(argv[1], "churn"))
		return churn("/proc/self/exe", atoi(argv[2]));
	fprintf(stderr, "usage: hostile_pidtable register | spawn N | churn SECONDS\n");
	return 2;
}

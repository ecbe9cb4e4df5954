/*
 * bench/ident_check: what the identity re-check costs (svc_ident_check,
 * made before every capture start, trigger fire and runtime match; issue
 * 14 asks for under 5 us per capture). It binds a live child process the
 * way the daemon binds a peer and times the check on this kernel's path
 * (a pidfd, PIDFD_GET_INFO on Linux >= 6.13), then on the fallback of
 * kernels without pidfds (pid + start time, two /proc reads). Prints;
 * asserts nothing.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "svc_ident.h"

#define CHECKS 200000
#define LIMIT_US 5.0

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* ns per check of id, or a negative value when a check failed. */
static double time_checks(const struct svc_ident *id, int n)
{
	double t0 = now_ns();
	for (int i = 0; i < n; i++)
		if (svc_ident_check(id) != 0)
			return -1;
	return (now_ns() - t0) / n;
}

int main(void)
{
	struct svc_ident id, slow;
	pid_t kid = fork();
	if (kid < 0)
		return 1;
	if (kid == 0) {
		pause();
		_exit(0);
	}
	int r = svc_ident_of_pid(&id, kid, 0);
	if (r == 0)
		r = svc_ident_dup(&slow, &id);
	if (r < 0) {
		fprintf(stderr, "ident_check: cannot bind pid %d: %d\n", (int)kid, r);
		kill(kid, SIGKILL);
		return 1;
	}
	/* The fallback: no pidfd, the start time stands for the process. */
	if (slow.pidfd >= 0)
		close(slow.pidfd);
	slow.pidfd = -1;
	time_checks(&id, 1000); /* warm up */
	double fast = time_checks(&id, CHECKS);
	double old = time_checks(&slow, CHECKS / 10);
	kill(kid, SIGKILL);
	waitpid(kid, NULL, 0);
	if (fast < 0 || old < 0) {
		fprintf(stderr, "ident_check: a check of the live child failed\n");
		return 1;
	}
	printf("ident_check: svc_ident_check() of a live process, %d checks\n", CHECKS);
	printf("  %-24s %7.2f us/check  (limit %.0f us: %s)\n", svc_ident_method(&id), fast / 1000,
	       LIMIT_US, fast / 1000 < LIMIT_US ? "under" : "OVER");
	printf("  %-24s %7.2f us/check  (kernels without pidfds, %d checks)\n",
	       svc_ident_method(&slow), old / 1000, CHECKS / 10);
	svc_ident_fini(&id);
	svc_ident_fini(&slow);
	return 0;
}

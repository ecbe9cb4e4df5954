/*
 * pingpong: a sched-heavy load for bench/bg_trace_cost.sh. Two processes
 * pass one byte back and forth over two pipes ROUNDS times: each round is
 * two wakeups and at least two context switches, so nearly all of its time
 * is the scheduler's, which is where tracepoints cost. Prints
 *   rounds=N wall_ms=W usr_ms=U sys_ms=S
 * with the CPU time of both processes (getrusage of self and the child).
 *   usage: pingpong [ROUNDS]   (default 200000)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double tv_ms(struct timeval tv)
{
	return tv.tv_sec * 1e3 + tv.tv_usec / 1e3;
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? strtol(argv[1], NULL, 10) : 200000;
	int ab[2], ba[2];
	char c = 0;
	struct timespec t0, t1;

	if (rounds <= 0 || pipe(ab) < 0 || pipe(ba) < 0) {
		fprintf(stderr, "usage: pingpong [ROUNDS > 0]\n");
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (pid == 0) {
		for (long i = 0; i < rounds; i++)
			if (read(ab[0], &c, 1) != 1 || write(ba[1], &c, 1) != 1)
				_exit(1);
		_exit(0);
	}
	for (long i = 0; i < rounds; i++) {
		if (write(ab[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1) {
			fprintf(stderr, "pingpong: pipe: %d\n", errno);
			return 1;
		}
	}
	int st;
	waitpid(pid, &st, 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	struct rusage self, kids;
	getrusage(RUSAGE_SELF, &self);
	getrusage(RUSAGE_CHILDREN, &kids);
	printf("rounds=%ld wall_ms=%.1f usr_ms=%.1f sys_ms=%.1f\n", rounds,
	       (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6,
	       tv_ms(self.ru_utime) + tv_ms(kids.ru_utime),
	       tv_ms(self.ru_stime) + tv_ms(kids.ru_stime));
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

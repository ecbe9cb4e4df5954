/*
 * bench/trace_cost: the cost of prof_trace_begin/end with no capture
 * running (the flight recorder always records), in ns per pair, on one
 * thread and on two at once. Prints; asserts nothing.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <profiling/profiling.h>

#define PAIRS 10000000L

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void *run(void *arg)
{
	double *out = arg, t0 = now_ns();
	for (long i = 0; i < PAIRS; i++) {
		prof_trace_begin("bench-slice");
		prof_trace_end();
	}
	*out = (now_ns() - t0) / PAIRS;
	return NULL;
}

int main(void)
{
	double one, two[2];
	pthread_t th[2];
	run(&one);
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, run, &two[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	printf("trace_cost: prof_trace_begin+end, %ld pairs, no capture running\n", PAIRS);
	printf("  1 thread   %.1f ns/pair\n", one);
	printf("  2 threads  %.1f / %.1f ns/pair (per-thread rings, no shared writes)\n", two[0], two[1]);
	return 0;
}

/*
 * method_target N M [GO_FILE [LINGER_S [PACE_US]]]: a native target for method events
 * (docs/METHOD_EVENTS.md). Waits for GO_FILE to exist (the probes are in
 * by then), then calls target_fn N times, from two call sites at 3:1, among
 * M calls of other_fn, prints "sum S" (the same with or without probes:
 * a probe must change nothing the program computes) and waits LINGER_S
 * seconds (1 by default), so a capture can end before it does. PACE_US
 * spaces the target's calls, so that a slow helper (a sanitizer build, a
 * loaded machine) records every hit instead of losing a burst from its ring.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static __attribute__((noinline)) int target_fn(int x)
{
	__asm__ volatile("" ::: "memory"); /* not folded into its callers */
	return x * 3 + 1;
}

static __attribute__((noinline)) int other_fn(int x)
{
	__asm__ volatile("" ::: "memory");
	return x * 5 + 2;
}

/* Two call sites, kept as frames (no tail call): the stacks tell them apart. */
static __attribute__((noinline)) int site_a(int i)
{
	int r = target_fn(i);
	__asm__ volatile("" ::: "memory");
	return r + 1;
}

static __attribute__((noinline)) int site_b(int i)
{
	int r = target_fn(i + 1);
	__asm__ volatile("" ::: "memory");
	return r + 2;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 400, m = argc > 2 ? atol(argv[2]) : 100000;
	const char *go = argc > 3 ? argv[3] : NULL;
	unsigned linger = argc > 4 ? (unsigned)atoi(argv[4]) : 1;
	long pace = argc > 5 ? atol(argv[5]) : 0;
	for (int i = 0; go && access(go, F_OK) != 0 && i < 6000; i++)
		usleep(10000);
	long long sum = 0;
	long per = n ? m / n : 0;
	for (long i = 0; i < n; i++) {
		sum += (i % 4 == 3) ? site_b((int)i) : site_a((int)i);
		if (pace > 0)
			usleep((useconds_t)pace);
		for (long k = 0; k < per; k++)
			sum += other_fn((int)k);
	}
	for (long k = per * n; k < m; k++)
		sum += other_fn((int)k);
	printf("sum %lld\n", sum);
	fflush(stdout);
	sleep(linger);
	return 0;
}

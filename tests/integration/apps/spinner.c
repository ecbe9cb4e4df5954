/*
 * spinner: an unmodified program for the agentless sampler's test. It links
 * nothing of profilingd and is built without frame pointers
 * (-O2 -fomit-frame-pointer), so only DWARF CFI unwinds it. It spins in
 * spin_here(), reached from main through two other functions, for argv[1]
 * seconds (default 5).
 */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static volatile uint64_t sink;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The work lives here; the callers add frames but no time. */
__attribute__((noinline)) static uint64_t spin_here(uint64_t x)
{
	for (int i = 0; i < 1000000; i++)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	return x;
}

__attribute__((noinline)) static uint64_t spin_inner(uint64_t x, double until)
{
	while (now_s() < until)
		x = spin_here(x);
	return x;
}

__attribute__((noinline)) static uint64_t spin_outer(uint64_t x, double until)
{
	/* The extra work after the call keeps this from becoming a tail call. */
	x = spin_inner(x, until);
	return x ^ (x >> 7);
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 5;
	sink = spin_outer((uint64_t)(uintptr_t)&secs, now_s() + secs);
	return 0;
}

/*
 * method_bench GO_FILE HITS WORK: the workload of bench/method_events.
 * Waits for GO_FILE (the probes are in by then), then times, on its own
 * CPU clock (the probe's trap is the thread's time too, the helper's
 * unwinding is not), WORK calls of a function nobody probes and HITS
 * calls of the probed one, and prints "work_ns=W hit_ns=H".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#ifdef PD_BENCH_DISTRO
static __attribute__((noinline)) int bench_leaf(int x)
{
	__asm__ volatile("" ::: "memory");
	return x + 1;
}

/* Exported, as a library's API is: -fcf-protection then starts it with
 * endbr64 (a static function whose address is not taken gets none). It
 * calls another, as most do, so frame pointers give it a frame:
 * endbr64; push %rbp; mov %rsp,%rbp. */
int bench_target(int x);
__attribute__((noinline)) int bench_target(int x)
{
	int r = bench_leaf(x);
	__asm__ volatile("" ::: "memory");
	return r + 1;
}
#else
/* A leaf: it starts lea 0x1(%rdi),%eax, which the kernel single-steps. */
static __attribute__((noinline)) int bench_target(int x)
{
	__asm__ volatile("" ::: "memory");
	return x + 1;
}
#endif

static __attribute__((noinline)) int bench_other(int x)
{
	__asm__ volatile("" ::: "memory");
	return x * 3 + 1;
}

static uint64_t cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: method_bench GO_FILE HITS WORK\n");
		return 2;
	}
	long hits = atol(argv[2]), work = atol(argv[3]);
	for (int i = 0; access(argv[1], F_OK) != 0 && i < 6000; i++)
		usleep(10000);
	volatile long sink = 0;
	uint64_t t0 = cpu_ns();
	for (long i = 0; i < work; i++)
		sink += bench_other((int)i);
	uint64_t t1 = cpu_ns();
	for (long i = 0; i < hits; i++)
		sink += bench_target((int)i);
	uint64_t t2 = cpu_ns();
	printf("work_ns=%llu hit_ns=%llu\n", (unsigned long long)(t1 - t0),
	       (unsigned long long)(t2 - t1));
	return sink == 42; /* keeps sink alive */
}

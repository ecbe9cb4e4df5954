/*
 * malloc_bench: a malloc-heavy workload for bench/heap_overhead. Each
 * thread keeps a window of live blocks and, per operation, frees a random
 * one and allocates a replacement, writing its first bytes. Sizes: 70 %
 * 16..127 B, 25 % 128..1023 B, 5 % 1..16 KiB (mean about 610 B); a tenth of
 * the allocations are calloc or realloc. It links nothing but libc, so it
 * is the "unmodified app" of LD_PRELOAD runs.
 *   usage: malloc_bench [--threads N] [--ops M] [--window W]
 * Prints ops_per_s=<all threads> and seconds=<wall time> on stdout.
 */
#include <getopt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct worker {
	pthread_t th;
	unsigned id;
	uint64_t ops;
	unsigned window;
	uint64_t sink;
};

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static size_t pick_size(uint64_t r)
{
	unsigned c = (unsigned)(r % 100);
	r >>= 8;
	if (c < 70)
		return 16 + r % 112;
	if (c < 95)
		return 128 + r % 896;
	return 1024 + r % (15 * 1024);
}

/* Kept out of line so the allocations have a caller of their own in a profile. */
__attribute__((noinline)) static void *bench_alloc(uint64_t r, void *old)
{
	size_t n = pick_size(r);
	unsigned kind = (unsigned)((r >> 40) % 20);

	if (kind == 0) {
		free(old);
		return calloc(1, n);
	}
	if (kind == 1)
		return realloc(old, n);
	free(old);
	char *p = malloc(n);
	if (p)
		memset(p, (int)kind, n < 64 ? n : 64);
	return p;
}

static void *run(void *arg)
{
	struct worker *w = arg;
	uint64_t s = 0x9e3779b97f4a7c15ull * (w->id + 1);
	void **slots = calloc(w->window, sizeof(*slots));

	if (!slots)
		return NULL;
	for (uint64_t i = 0; i < w->ops; i++) {
		uint64_t r = xorshift(&s);
		unsigned k = (unsigned)((r >> 20) % w->window);
		slots[k] = bench_alloc(r, slots[k]);
		if (slots[k])
			w->sink += *(unsigned char *)slots[k];
	}
	for (unsigned k = 0; k < w->window; k++)
		free(slots[k]);
	free(slots);
	return NULL;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "threads", required_argument, NULL, 't' },
		{ "ops", required_argument, NULL, 'n' },
		{ "window", required_argument, NULL, 'w' },
		{ 0 }
	};
	unsigned threads = 1, window = 4096;
	uint64_t ops = 20000000;
	int c;

	while ((c = getopt_long(argc, argv, "t:n:w:", opts, NULL)) != -1) {
		switch (c) {
		case 't': threads = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'n': ops = strtoull(optarg, NULL, 10); break;
		case 'w': window = (unsigned)strtoul(optarg, NULL, 10); break;
		default:
			fprintf(stderr, "usage: malloc_bench [--threads N] [--ops M] [--window W]\n");
			return 2;
		}
	}
	if (threads < 1 || threads > 256 || window < 1) {
		fprintf(stderr, "malloc_bench: --threads 1..256, --window >= 1\n");
		return 2;
	}
	struct worker *w = calloc(threads, sizeof(*w));
	if (!w)
		return 1;
	double t0 = now_s();
	for (unsigned i = 0; i < threads; i++) {
		w[i].id = i;
		w[i].ops = ops;
		w[i].window = window;
		if (pthread_create(&w[i].th, NULL, run, &w[i]) != 0)
			return 1;
	}
	uint64_t sink = 0;
	for (unsigned i = 0; i < threads; i++) {
		pthread_join(w[i].th, NULL);
		sink += w[i].sink;
	}
	double dt = now_s() - t0;
	printf("ops_per_s=%.0f\nseconds=%.3f\nsink=%llu\n", (double)ops * threads / dt, dt,
	       (unsigned long long)sink);
	free(w);
	return 0;
}

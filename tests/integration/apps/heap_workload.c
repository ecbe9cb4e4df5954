/*
 * heap_workload: a known heap for tests/integration/heap.sh.
 *   alloc_live_a  allocates 64 MiB (mixed sizes) and keeps it
 *   churn_b       allocates 16 MiB (mixed sizes), freeing as it goes
 *
 * Linked mode (default): asks profilingd for a heap profile of itself,
 * runs both once the capture is under way, keeps the 64 MiB until the
 * result is in, and prints the delivered result's path on stdout.
 *
 * --unmodified SECONDS: no libprofiling at all (built as heap_workload_plain
 * with -DHEAP_WORKLOAD_PLAIN); alloc_live_a once, prints "ready", then
 * churn_b over and over for SECONDS, for runs under LD_PRELOAD of
 * libprofiling_preload.so.
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef HEAP_WORKLOAD_PLAIN
#include <profiling/profiling.h>
#endif

#define MiB (1024u * 1024u)
#define LIVE_BYTES (64u * MiB)
#define CHURN_BYTES (16u * MiB)
#define MAX_LIVE (1u << 18)

/* Not malloc'd: the bookkeeping must not count for any function. */
static void *live[MAX_LIVE];
static unsigned nlive;
static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Half the bytes in 16..4095 B pieces (sampled by the countdown), half in large ones. */
static size_t piece_size(size_t left)
{
	uint64_t r = next_rand();
	size_t n = (r & 1) ? 16 + (size_t)(r >> 8) % 4080 : 4096 + (size_t)(r >> 8) % (256 * 1024);
	return n < left ? n : left;
}

__attribute__((noinline)) static int alloc_live_a(void)
{
	size_t left = LIVE_BYTES;

	while (left > 0) {
		size_t n = piece_size(left);
		char *p = malloc(n);
		if (!p || nlive >= MAX_LIVE)
			return -ENOMEM;
		p[0] = (char)n; /* touch it: the block is really used */
		live[nlive++] = p;
		left -= n;
	}
	return 0;
}

__attribute__((noinline)) static int churn_b(void)
{
	void *window[16] = { 0 };
	size_t left = CHURN_BYTES;
	unsigned i = 0;

	/* A short window of blocks in flight, all freed by the end. */
	while (left > 0) {
		size_t n = piece_size(left);
		free(window[i % 16]);
		char *p = malloc(n);
		if (!p)
			return -ENOMEM;
		p[0] = (char)n;
		window[i++ % 16] = p;
		left -= n;
	}
	for (unsigned k = 0; k < 16; k++)
		free(window[k]);
	return 0;
}

static void free_live(void)
{
	for (unsigned i = 0; i < nlive; i++)
		free(live[i]);
	nlive = 0;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int run_unmodified(unsigned seconds)
{
	if (alloc_live_a() < 0) {
		fprintf(stderr, "heap_workload: out of memory\n");
		return 1;
	}
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	uint64_t end = mono_ms() + seconds * 1000ull;
	unsigned rounds = 0;
	while (mono_ms() < end) {
		if (churn_b() < 0)
			return 1;
		rounds++;
		usleep(20000);
	}
	free_live();
	fprintf(stderr, "heap_workload: %u churn rounds\n", rounds);
	return 0;
}

#ifndef HEAP_WORKLOAD_PLAIN
struct outcome {
	int done, error;
	char path[4096];
	char message[256];
};

static void on_result(const struct prof_result *r, void *ud)
{
	struct outcome *o = ud;
	o->done = 1;
	o->error = r->error;
	snprintf(o->path, sizeof(o->path), "%s", r->path);
	snprintf(o->message, sizeof(o->message), "%s", r->error_message);
}

static int run_linked(uint32_t duration_ms, uint32_t delay_ms, uint32_t interval)
{
	struct prof_params params = PROF_PARAMS_INIT(.duration_ms = duration_ms,
				      .sampling_interval_bytes = interval);
	struct outcome o = { 0 };
	int err, r;

	prof_client *c = prof_connect(NULL, &err);
	if (!c) {
		fprintf(stderr, "heap_workload: cannot connect: %s\n", strerror(-err));
		return 1;
	}
	r = prof_request(c, PROF_HEAP_PROFILE, &params, "heap", on_result, &o, NULL);
	if (r < 0) {
		fprintf(stderr, "heap_workload: request refused: %s\n", prof_strerror(r));
		prof_close(c);
		return 1;
	}
	/* The capture starts when the daemon reaches our agent: give it a head start. */
	usleep(delay_ms * 1000u);
	if (alloc_live_a() < 0 || churn_b() < 0) {
		fprintf(stderr, "heap_workload: out of memory\n");
		prof_close(c);
		return 1;
	}
	uint64_t deadline = mono_ms() + duration_ms + 30000u;
	while (!o.done && mono_ms() < deadline) {
		r = prof_dispatch(c, 500);
		if (r < 0 && r != -PROF_E_TIMEOUT) {
			fprintf(stderr, "heap_workload: dispatch: %s\n", prof_strerror(r));
			break;
		}
	}
	prof_close(c);
	free_live();
	if (!o.done) {
		fprintf(stderr, "heap_workload: no result\n");
		return 1;
	}
	if (o.error) {
		fprintf(stderr, "heap_workload: capture failed: %s: %s\n",
			prof_strerror(o.error), o.message);
		return 1;
	}
	printf("%s\n", o.path);
	return 0;
}
#endif

static void usage(FILE *f)
{
	fprintf(f,
		"usage: heap_workload [--duration-ms MS] [--delay-ms MS] [--interval BYTES]\n"
		"       heap_workload --unmodified SECONDS\n"
		"alloc_live_a keeps 64 MiB, churn_b allocates and frees 16 MiB.\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "duration-ms", required_argument, NULL, 'd' },
		{ "delay-ms", required_argument, NULL, 'w' },
		{ "interval", required_argument, NULL, 'i' },
		{ "unmodified", required_argument, NULL, 'u' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	uint32_t duration_ms = 1500, delay_ms = 300, interval = 0;
	int unmodified = -1, c;

	while ((c = getopt_long(argc, argv, "d:w:i:u:h", opts, NULL)) != -1) {
		switch (c) {
		case 'd': duration_ms = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'w': delay_ms = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'i': interval = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'u': unmodified = atoi(optarg); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (unmodified >= 0)
		return run_unmodified((unsigned)unmodified);
#ifdef HEAP_WORKLOAD_PLAIN
	(void)duration_ms;
	(void)delay_ms;
	(void)interval;
	usage(stderr);
	return 2;
#else
	return run_linked(duration_ms, delay_ms, interval);
#endif
}

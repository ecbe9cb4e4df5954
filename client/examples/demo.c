/*
 * profiling-demo: the bundled demo app. Worker threads burn CPU in
 * hot_function and cold_function at a 3:1 ratio; the app asks profilingd for
 * a stack sample of itself and prints the delivered result's path on stdout.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <profiling/profiling.h>

#define UNIT_ITERS 200000

static atomic_int stop;
static atomic_ullong units; /* hot+cold rounds done, for bench/stack_overhead */
static volatile uint64_t sink;

/* Same work per iteration; different constants keep the two functions apart. */
__attribute__((noinline)) static uint64_t hot_function(uint64_t x)
{
	for (int i = 0; i < 3 * UNIT_ITERS; i++)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	return x;
}

__attribute__((noinline)) static uint64_t cold_function(uint64_t x)
{
	for (int i = 0; i < UNIT_ITERS; i++)
		x = x * 2862933555777941757ull + 3037000493ull;
	return x;
}

static void *worker(void *arg)
{
	char name[16];
	uint64_t x = (uintptr_t)arg;

	snprintf(name, sizeof(name), "demo-worker-%d", (int)(uintptr_t)arg);
	pthread_setname_np(pthread_self(), name);
	while (!atomic_load(&stop)) {
		x = hot_function(x);
		x = cold_function(x);
		atomic_fetch_add_explicit(&units, 1, memory_order_relaxed);
	}
	sink = x;
	return NULL;
}

struct outcome {
	int done;
	int error;
	char path[4096];
	char message[256];
	unsigned long long size;
};

static void on_result(const struct prof_result *r, void *ud)
{
	struct outcome *o = ud;
	o->done = 1;
	o->error = r->error;
	o->size = (unsigned long long)r->size;
	snprintf(o->path, sizeof(o->path), "%s", r->path);
	snprintf(o->message, sizeof(o->message), "%s", r->error_message);
}

/* The whole process's CPU time (workers, agent thread, handlers), in s. */
static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: profiling-demo [options]\n"
		"Burns CPU in hot_function and cold_function (3:1) on worker threads,\n"
		"asks profilingd for a stack sample of itself and prints the result path.\n\n"
		"  -s, --socket PATH     client socket (default: $PROFILINGD_SOCKET or the built-in)\n"
		"  -t, --threads N       worker threads, 1..64 (default 2)\n"
		"  -d, --duration-ms MS  capture length (default 2000)\n"
		"  -f, --frequency HZ    sampling frequency (default 100)\n"
		"  -n, --no-request      burn CPU for the duration without profiling (benchmarks)\n"
		"  -r, --rate            print work_rate=<rounds/s> and cpu_rate=<rounds per\n"
		"                        CPU second of the whole process> on stderr at the end\n"
		"  -h, --help            this text\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "threads", required_argument, NULL, 't' },
		{ "duration-ms", required_argument, NULL, 'd' },
		{ "frequency", required_argument, NULL, 'f' },
		{ "no-request", no_argument, NULL, 'n' },
		{ "rate", no_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	const char *sock = NULL;
	int nthreads = 2, no_request = 0, rate = 0, c, err;
	struct prof_params params = PROF_PARAMS_INIT(.duration_ms = 2000, .frequency_hz = 100);
	pthread_t th[64];

	while ((c = getopt_long(argc, argv, "s:t:d:f:nrh", opts, NULL)) != -1) {
		switch (c) {
		case 's': sock = optarg; break;
		case 't': nthreads = atoi(optarg); break;
		case 'd': params.duration_ms = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'f': params.frequency_hz = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'n': no_request = 1; break;
		case 'r': rate = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (nthreads < 1 || nthreads > 64) {
		fprintf(stderr, "profiling-demo: --threads must be 1..64\n");
		return 2;
	}
	struct timespec t0, t1;
	for (int i = 0; i < nthreads; i++)
		pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)(i + 1));
	if (no_request) {
		clock_gettime(CLOCK_MONOTONIC, &t0);
		double c0 = cpu_s();
		unsigned long long n0 = atomic_load(&units);
		usleep(params.duration_ms * 1000u);
		unsigned long long n1 = atomic_load(&units);
		double c1 = cpu_s();
		atomic_store(&stop, 1);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		for (int i = 0; i < nthreads; i++)
			pthread_join(th[i], NULL);
		if (rate) {
			fprintf(stderr, "work_rate=%.1f\n", (double)n1 /
				((double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9));
			fprintf(stderr, "cpu_rate=%.1f\n", (double)(n1 - n0) / (c1 - c0));
		}
		return 0;
	}

	prof_client *pc = prof_connect(sock, &err);
	if (!pc) {
		fprintf(stderr, "profiling-demo: cannot connect to profilingd: %s\n", strerror(-err));
		return 1;
	}
	struct outcome o = { 0 };
	uint64_t id;
	unsigned long long u0 = atomic_load(&units);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	double c0 = cpu_s();
	int r = prof_request(pc, PROF_STACK_SAMPLING, &params, "demo", on_result, &o, &id);
	if (r < 0) {
		fprintf(stderr, "profiling-demo: request refused: %s\n", prof_strerror(r));
		prof_close(pc);
		return 1;
	}
	fprintf(stderr, "profiling-demo: request %llu accepted, sampling %u ms at %u Hz on %d threads\n",
		(unsigned long long)id, params.duration_ms, params.frequency_hz, nthreads);
	while (!o.done) {
		r = prof_dispatch(pc, 1000);
		if (r < 0) {
			fprintf(stderr, "profiling-demo: lost the daemon: %s\n", prof_strerror(r));
			prof_close(pc);
			return 1;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	unsigned long long u1 = atomic_load(&units);
	double c1 = cpu_s();
	atomic_store(&stop, 1);
	for (int i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	prof_close(pc);
	if (rate) {
		fprintf(stderr, "work_rate=%.1f\n", (double)(u1 - u0) /
			((double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9));
		/* From the request to the result: sampling and the agent's
		 * symbolisation and compression are all in it. */
		fprintf(stderr, "cpu_rate=%.1f\n", (double)(u1 - u0) / (c1 - c0));
	}
	if (o.error) {
		fprintf(stderr, "profiling-demo: capture failed: %s: %s\n",
			prof_strerror(o.error), o.message);
		return 1;
	}
	fprintf(stderr, "profiling-demo: delivered %llu bytes\n", o.size);
	printf("%s\n", o.path);
	return 0;
}

/*
 * trace_fill: overfills its own flight recorder during a system trace of
 * itself, for trace_fill.sh (buffer_fill_policy of the recorder).
 *
 *   trace_fill discard|ring DURATION_MS
 *
 * One thread ("fill-w") writes instants named "n<k>", k = 0, 1, 2, ..., in
 * bursts of BURST with a 2 ms sleep between them, from before the request
 * until the result is in: far more than one ring (TFMT_RING_EVENTS, 4096)
 * in any window. Printed, one per line:
 *   "<A> <B> <L> <U>"  A: events written before the request was sent;
 *                      B: events written when the result came;
 *                      L: events whose burst ended before the capture's
 *                         start (prof_result.start_ns), so written before
 *                         the recorder's window could open;
 *                      U: events whose burst ended before start_ns +
 *                         DURATION_MS, so written before the window closed
 *                         (the agent waits the duration after opening it);
 *   the result's path;
 *   the result's note ("" when none).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <profiling/profiling.h>

#define BURST 1024
#define MAX_BURSTS 65536 /* bursts remembered; later ones are written, not timed */

static atomic_int stop;
static _Atomic uint64_t written;
/* burst b: events [b * BURST, (b + 1) * BURST), its last written at ended[b] */
static uint64_t ended[MAX_BURSTS];
static _Atomic uint32_t nbursts;

static uint64_t now_real(void)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void *writer(void *arg)
{
	char name[32];
	(void)arg;
	pthread_setname_np(pthread_self(), "fill-w");
	for (uint64_t k = 0; !atomic_load(&stop);) {
		for (int i = 0; i < BURST; i++, k++) {
			snprintf(name, sizeof(name), "n%llu", (unsigned long long)k);
			prof_trace_instant(name);
			atomic_store(&written, k + 1);
		}
		uint32_t b = atomic_load(&nbursts);
		if (b < MAX_BURSTS) {
			ended[b] = now_real();
			atomic_store(&nbursts, b + 1);
		}
		usleep(2000);
	}
	return NULL;
}

struct outcome {
	int done, error;
	uint64_t start_ns;
	char path[4096], msg[256], note[256];
};

static void on_result(const struct prof_result *r, void *ud)
{
	struct outcome *o = ud;
	o->done = 1;
	o->error = r->error;
	o->start_ns = r->start_ns;
	snprintf(o->path, sizeof(o->path), "%s", r->path);
	snprintf(o->msg, sizeof(o->msg), "%s", r->error_message);
	snprintf(o->note, sizeof(o->note), "%s", r->note);
}

/* Events of the bursts that ended before t. */
static uint64_t written_before(uint64_t t)
{
	uint32_t n = atomic_load(&nbursts);
	uint64_t k = 0;
	for (uint32_t b = 0; b < n && ended[b] < t; b++)
		k = (uint64_t)(b + 1) * BURST;
	return k;
}

int main(int argc, char **argv)
{
	if (argc != 3 || (strcmp(argv[1], "discard") && strcmp(argv[1], "ring"))) {
		fprintf(stderr, "usage: trace_fill discard|ring DURATION_MS\n");
		return 2;
	}
	uint32_t dur = (uint32_t)strtoul(argv[2], NULL, 10);
	int err;
	prof_client *c = prof_connect(NULL, &err);
	if (!c) {
		fprintf(stderr, "trace_fill: connect: %s\n", strerror(-err));
		return 1;
	}
	pthread_t th;
	pthread_create(&th, NULL, writer, NULL);
	/* Two rings' worth first: in ring mode they are what a quiet window
	 * would show; in a discard window they must not appear. */
	while (atomic_load(&written) < 2 * 4096)
		usleep(1000);
	struct outcome o = { 0 };
	struct prof_params p = PROF_PARAMS_INIT(.duration_ms = dur,
		.buffer_fill_policy = !strcmp(argv[1], "discard") ? PROF_FILL_DISCARD
								   : PROF_FILL_RING_BUFFER);
	uint64_t a = atomic_load(&written);
	int r = prof_request(c, PROF_SYSTEM_TRACE, &p, "fill", on_result, &o, NULL);
	if (r < 0) {
		fprintf(stderr, "trace_fill: refused: %s\n", prof_strerror(r));
		return 1;
	}
	while (!o.done && prof_dispatch(c, 1000) >= 0)
		;
	uint64_t b = atomic_load(&written);
	atomic_store(&stop, 1);
	pthread_join(th, NULL);
	prof_close(c);
	if (!o.done || o.error) {
		fprintf(stderr, "trace_fill: capture failed: %s: %s\n", prof_strerror(o.error), o.msg);
		return 1;
	}
	printf("%llu %llu %llu %llu\n%s\n%s\n", (unsigned long long)a, (unsigned long long)b,
	       (unsigned long long)written_before(o.start_ns),
	       (unsigned long long)written_before(o.start_ns + (uint64_t)dur * 1000000u), o.path,
	       o.note);
	return 0;
}

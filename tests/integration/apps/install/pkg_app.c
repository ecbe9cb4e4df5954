/*
 * The smallest real libprofiling app, built by the packaging test against an
 * installed tree only (pkg-config, or find_package in consumer/): it registers
 * the README's OOM trigger, asks for a 500 ms stack sample of itself while
 * burning CPU, and checks the delivered result is a gzip'd file it can read.
 * Prints the result's path; exit 0 on a delivered result.
 */
#define _POSIX_C_SOURCE 200809L /* pread in -std=c11 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <profiling/profiling.h>

struct outcome {
	int done, error;
	unsigned char magic[2];
	char path[4096], msg[256];
};

static void on_result(const struct prof_result *r, void *ud)
{
	struct outcome *o = ud;
	o->done = 1;
	o->error = r->error;
	snprintf(o->msg, sizeof(o->msg), "%s", r->error_message);
	snprintf(o->path, sizeof(o->path), "%s", r->path);
	if (!r->error && pread(r->fd, o->magic, 2, 0) != 2)
		o->error = -1;
}

static volatile double sink;

static void burn(void)
{
	for (int i = 0; i < 200000; i++)
		sink += i * 0.5;
}

int main(void)
{
	int err;
	struct outcome o = { 0 };
	prof_client *c = prof_connect(NULL, &err);
	if (!c) {
		fprintf(stderr, "pkg_app: connect: %s\n", strerror(-err));
		return 1;
	}
	struct prof_trigger t = PROF_TRIGGER_INIT(
		.type = PROF_TRIGGER_OOM,
		.memory_percent = 80,
		.rate_limit_period_s = 3600);
	/* No memory cgroup to watch is a refusal, not a failure of this test. */
	int r = prof_add_trigger(c, &t);
	fprintf(stderr, "pkg_app: OOM trigger: %s\n", r < 0 ? prof_strerror(r) : "registered");
	struct prof_params p = PROF_PARAMS_INIT(.duration_ms = 500, .frequency_hz = 200);
	r = prof_request(c, PROF_STACK_SAMPLING, &p, "pkg", on_result, &o, NULL);
	if (r < 0) {
		fprintf(stderr, "pkg_app: refused: %s\n", prof_strerror(r));
		return 1;
	}
	/* A generous bound: a hung daemon fails the test instead of hanging it. */
	time_t end = time(NULL) + 120;
	while (!o.done && time(NULL) < end && prof_dispatch(c, 0) >= 0)
		burn();
	prof_close(c);
	if (!o.done) {
		fprintf(stderr, "pkg_app: no result within 120 s\n");
		return 1;
	}
	if (o.error) {
		fprintf(stderr, "pkg_app: capture failed: %s: %s\n", prof_strerror(o.error), o.msg);
		return 1;
	}
	if (o.magic[0] != 0x1f || o.magic[1] != 0x8b) {
		fprintf(stderr, "pkg_app: %s is not gzip'd\n", o.path);
		return 1;
	}
	printf("%s\n", o.path);
	return 0;
}

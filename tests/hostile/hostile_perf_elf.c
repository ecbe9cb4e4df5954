/*
 * hostile_perf_elf: the attacker of ht_perf_elf. An unprivileged program
 * without an agent asks profilingd for a stack sample of itself, which the
 * daemon takes agentless with profilingd-perf. The test runs it from a path
 * that, seen from the daemon's mount namespace, is a symlink the attacker
 * planted to a root-only ELF: if the helper opens the target's modules as
 * root and follows links, that file's symbols and build id reach the
 * attacker's profile.
 *
 * Built twice from this file: as the attacker (HOT_FN spin_attacker_hot__)
 * and as the root-only file (HOT_FN zz_root_only_secret). The names have the
 * same length and nothing else differs, so the code has the same layout
 * and a pc in one names the other's function.
 *
 * Prints the delivered result's path; exit 0 when delivered, 3 when the
 * capture failed (the error on stderr), 1 on a local error.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <profiling/profiling.h>

#ifndef HOT_FN
#error "HOT_FN names the spinning function"
#endif

static volatile uint64_t sink;

struct outcome {
	int done, error;
	char path[4096], msg[256];
};

static void on_result(const struct prof_result *r, void *ud)
{
	struct outcome *o = ud;
	o->done = 1;
	o->error = r->error;
	snprintf(o->path, sizeof(o->path), "%s", r->path);
	snprintf(o->msg, sizeof(o->msg), "%s", r->error_message);
}

__attribute__((noinline)) static uint64_t HOT_FN(uint64_t x)
{
	for (int i = 0; i < 200000; i++)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	return x;
}

int main(void)
{
	struct prof_params p = PROF_PARAMS_INIT(.duration_ms = 1500, .frequency_hz = 99);
	struct outcome o = { 0 };
	int err;

	setenv("PROFILING_NO_AGENT", "1", 1); /* the daemon must go agentless */
	prof_client *cl = prof_connect(NULL, &err);
	if (!cl) {
		fprintf(stderr, "hostile_perf_elf: connect: %d\n", err);
		return 1;
	}
	int r = prof_request(cl, PROF_STACK_SAMPLING, &p, "hostile", on_result, &o, NULL);
	if (r < 0) {
		fprintf(stderr, "hostile_perf_elf: refused: %s\n", prof_strerror(r));
		prof_close(cl);
		return 3;
	}
	uint64_t x = (uint64_t)(uintptr_t)&p;
	time_t until = time(NULL) + 60;
	while (!o.done && time(NULL) < until) {
		x = HOT_FN(x);
		if (prof_dispatch(cl, 0) < 0)
			break;
	}
	sink = x;
	prof_close(cl);
	if (!o.done || o.error) {
		fprintf(stderr, "hostile_perf_elf: capture failed: %s: %s\n",
			o.done ? prof_strerror(o.error) : "no result", o.msg);
		return 3;
	}
	printf("%s\n", o.path);
	return 0;
}

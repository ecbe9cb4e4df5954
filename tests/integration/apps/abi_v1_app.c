/*
 * abi_v1_app: a program as it was written and built against the first
 * header (tests/abi/v1/profiling.h: no size fields, unversioned symbols),
 * run by abi.sh against today's libprofiling.so.1. Every call below must
 * behave as it did: in-range parameters give a capture, out-of-range ones
 * the daemon's refusal, which shows each field is read at its old offset.
 * Prints the delivered path; exits 1 on the first difference.
 */
#include <stdio.h>
#include <string.h>

#include "profiling.h" /* tests/abi/v1, not client/include */

static int done, error;
static char path[4096];

static void on_result(const struct prof_result *r, void *ud)
{
	(void)ud;
	done = 1;
	error = r->error;
	snprintf(path, sizeof(path), "%s", r->path);
}

static int want(const char *what, int got, int expect)
{
	if (got == expect)
		return 0;
	fprintf(stderr, "abi_v1_app: %s: got %d (%s), want %d\n", what, got, prof_strerror(got),
		expect);
	return 1;
}

int main(void)
{
	int err, bad = 0;
	prof_client *c = prof_connect(NULL, &err);
	if (!c) {
		fprintf(stderr, "abi_v1_app: connect: %s\n", strerror(-err));
		return 1;
	}
	/* The first field, a middle one and the last one of the old layout. */
	struct prof_params shortp = { .duration_ms = 50 };
	bad |= want("duration_ms 50", prof_request(c, PROF_STACK_SAMPLING, &shortp, NULL, NULL, NULL,
						   NULL), -PROF_E_INVALID_REQUEST);
	struct prof_params smallbuf = { .duration_ms = 200, .buffer_kb = 10 };
	bad |= want("buffer_kb 10", prof_request(c, PROF_SYSTEM_TRACE, &smallbuf, NULL, NULL, NULL,
						 NULL), -PROF_E_INVALID_REQUEST);
	struct prof_params badclock = { .duration_ms = 200, .clock = 7 };
	bad |= want("clock 7", prof_request(c, PROF_STACK_SAMPLING, &badclock, NULL, NULL, NULL,
					    NULL), -PROF_E_INVALID_REQUEST);

	/* Trigger fields after the embedded params and the 64-bit one. */
	struct prof_trigger hang = { .type = PROF_TRIGGER_HANG, .hang_timeout_ms = 50 };
	bad |= want("hang_timeout_ms 50", prof_add_trigger(c, &hang), -PROF_E_INVALID_REQUEST);
	struct prof_trigger psi = { .type = PROF_TRIGGER_PRESSURE_STALL, .psi_window_ms = 100 };
	bad |= want("psi_window_ms 100", prof_add_trigger(c, &psi), -PROF_E_INVALID_REQUEST);
	struct prof_trigger ok = { .type = PROF_TRIGGER_HANG, .hang_timeout_ms = 3600000,
				   .params = { .duration_ms = 500 } };
	bad |= want("hang trigger", prof_add_trigger(c, &ok), 0);
	bad |= want("remove trigger", prof_remove_trigger(c, PROF_TRIGGER_HANG), 0);

	struct prof_params p = { .duration_ms = 300, .frequency_hz = 211, .clock = 1 };
	uint64_t id = 0;
	bad |= want("request", prof_request(c, PROF_STACK_SAMPLING, &p, "abi-v1", on_result, NULL,
					    &id), 0);
	while (!bad && !done && prof_dispatch(c, 1000) >= 0)
		;
	prof_close(c);
	if (bad)
		return 1;
	if (!done || error) {
		fprintf(stderr, "abi_v1_app: no result (%s)\n", prof_strerror(error));
		return 1;
	}
	printf("%s\n", path);
	return 0;
}

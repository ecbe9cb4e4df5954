/*
 * abi_v2_app: the size field of today's header, run by abi.sh. A struct
 * without its size is refused; one from a newer header (larger size) is
 * taken when the fields this library lacks are zero and refused when one
 * is set; an older, shorter one reads its missing fields as defaults.
 * Then one capture with the Android-parity parameters set. Prints its path.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <profiling/profiling.h>

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
	fprintf(stderr, "abi_v2_app: %s: got %d (%s), want %d\n", what, got, prof_strerror(got),
		expect);
	return 1;
}

/* Today's struct followed by a field a later header may add. */
struct newer_params {
	struct prof_params p;
	uint32_t later;
};

int main(void)
{
	int err, bad = 0;
	prof_client *c = prof_connect(NULL, &err);
	if (!c) {
		fprintf(stderr, "abi_v2_app: connect: %s\n", strerror(-err));
		return 1;
	}
	struct prof_params nosize = { .duration_ms = 200 };
	bad |= want("size 0", prof_request(c, PROF_STACK_SAMPLING, &nosize, NULL, NULL, NULL, NULL),
		    -PROF_E_INVALID_REQUEST);
	/* A shorter struct (size short of clock): duration_ms is read... */
	struct prof_params older = PROF_PARAMS_INIT(.duration_ms = 50, .frequency_hz = 200,
						    .clock = 7);
	older.size = offsetof(struct prof_params, clock);
	bad |= want("older size, duration read", prof_request(c, PROF_STACK_SAMPLING, &older, NULL,
							      NULL, NULL, NULL),
		    -PROF_E_INVALID_REQUEST);
	struct newer_params n = { .p = PROF_PARAMS_INIT(.duration_ms = 50) };
	n.p.size = sizeof(n);
	bad |= want("newer size, zero tail", prof_request(c, PROF_STACK_SAMPLING, &n.p, NULL, NULL,
							  NULL, NULL),
		    -PROF_E_INVALID_REQUEST); /* reached the daemon: duration 50 */
	n.later = 1;
	n.p.duration_ms = 200;
	bad |= want("newer size, tail set", prof_request(c, PROF_STACK_SAMPLING, &n.p, NULL, NULL,
							 NULL, NULL),
		    -PROF_E_INVALID_REQUEST);
	struct prof_trigger t0 = { .type = PROF_TRIGGER_HANG };
	bad |= want("trigger size 0", prof_add_trigger(c, &t0), -PROF_E_INVALID_REQUEST);
	struct prof_params tp = PROF_PARAMS_INIT(.duration_ms = 500, .clock = 1);
	struct prof_trigger t = PROF_TRIGGER_INIT(.type = PROF_TRIGGER_HANG, .params = &tp,
						  .hang_timeout_ms = 3600000);
	bad |= want("trigger", prof_add_trigger(c, &t), 0);
	bad |= want("remove trigger", prof_remove_trigger(c, PROF_TRIGGER_HANG), 0);
	struct prof_params badfill = PROF_PARAMS_INIT(.duration_ms = 200, .buffer_fill_policy = 9);
	bad |= want("fill policy 9", prof_request(c, PROF_SYSTEM_TRACE, &badfill, NULL, NULL, NULL,
						  NULL), -PROF_E_INVALID_REQUEST);
	struct prof_params badjava = PROF_PARAMS_INIT(.duration_ms = 200,
						      .track_java_allocations = 3);
	bad |= want("track java 3", prof_request(c, PROF_HEAP_PROFILE, &badjava, NULL, NULL, NULL,
						 NULL), -PROF_E_INVALID_REQUEST);

	/* ...and clock 7, which the daemon refuses, is past its size: unread. */
	older.duration_ms = 300;
	bad |= want("older size, request", prof_request(c, PROF_STACK_SAMPLING, &older, "abi-v2",
							on_result, NULL, NULL), 0);
	while (!bad && !done && prof_dispatch(c, 1000) >= 0)
		;
	prof_close(c);
	if (bad)
		return 1;
	if (!done || error) {
		fprintf(stderr, "abi_v2_app: no result (%s)\n", prof_strerror(error));
		return 1;
	}
	printf("%s\n", path);
	return 0;
}

/*
 * it_request --pid N --type stack|heap|trace|heapdump [--duration-ms MS] [--hz H]
 * [--interval B] [--clock wall] [--fill ring|discard] [--java-allocs on|off]
 * [--format perfetto] [--method /PATH:SYMBOL ... [--every N] [--max-hits M] [--budget-us B]]
 * (--type methods)
 * [--cancel-file PATH] (cancel the capture once PATH exists):
 * as root, ask profilingd for a capture of another process
 * (the target_pid request) and print the delivered result's path (and its
 * note, if any, as "it_request: note: ..." on stderr).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <profiling/profiling.h>

#include "names.h"

struct outcome {
	int done, error;
	char path[4096], msg[256], note[256];
};

static void on_result(const struct prof_result *r, void *ud)
{
	struct outcome *o = ud;
	o->done = 1;
	o->error = r->error;
	snprintf(o->path, sizeof(o->path), "%s", r->path);
	snprintf(o->msg, sizeof(o->msg), "%s", r->error_message);
	snprintf(o->note, sizeof(o->note), "%s", r->note);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "type", required_argument, NULL, 't' },
		{ "duration-ms", required_argument, NULL, 'd' },
		{ "hz", required_argument, NULL, 'f' },
		{ "interval", required_argument, NULL, 'i' },
		{ "clock", required_argument, NULL, 'c' },
		{ "fill", required_argument, NULL, 'F' },
		{ "java-allocs", required_argument, NULL, 'J' },
		{ "format", required_argument, NULL, 'R' }, /* heap formats (issue #20) */
		{ "method", required_argument, NULL, 'm' },
		{ "every", required_argument, NULL, 'e' },
		{ "max-hits", required_argument, NULL, 'M' },
		{ "budget-us", required_argument, NULL, 'B' },
		{ "cancel-file", required_argument, NULL, 'C' },
		{ 0 }
	};
	/* Method events: more than the daemon takes, to test its refusal. */
	static const char *methods[80];
	struct prof_params p = PROF_PARAMS_INIT(.duration_ms = 1000);
	enum prof_type type = PROF_STACK_SAMPLING;
	const char *cancel_file = NULL;
	int c, err;
	while ((c = getopt_long(argc, argv, "p:t:d:f:i:c:F:J:R:m:e:M:C:", opts, NULL)) != -1) {
		switch (c) {
		case 'p': p.target_pid = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'd': p.duration_ms = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'f': p.frequency_hz = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'i': p.sampling_interval_bytes = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'c': p.clock = !strcmp(optarg, "wall"); break;
		case 'F':
			p.buffer_fill_policy = !strcmp(optarg, "discard") ? PROF_FILL_DISCARD
					       : PROF_FILL_RING_BUFFER;
			break;
		case 'J':
			p.track_java_allocations = !strcmp(optarg, "off") ? PROF_SWITCH_OFF
						   : PROF_SWITCH_ON;
			break;
		case 'R': p.format = (uint32_t)names_format_parse(optarg); break;
		case 'm':
			if (p.n_method_targets < 80)
				methods[p.n_method_targets++] = optarg;
			p.method_targets = methods;
			break;
		case 'e': p.method_every = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'M': p.method_max_hits = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'B': p.method_budget_us = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'C': cancel_file = optarg; break;
		case 't': {
			/* Any spelling of names.h: the config's heap and heapdump too. */
			int t = names_type_parse(optarg);
			type = t < 0 ? 0 : (enum prof_type)t;
			break;
		}
		default:
			return 2;
		}
	}
	if (!p.target_pid || !type) {
		fprintf(stderr, "usage: it_request --pid N --type stack|heap|trace|heapdump [...]\n");
		return 2;
	}
	setenv("PROFILING_NO_AGENT", "1", 1);
	prof_client *cl = prof_connect(NULL, &err);
	if (!cl) {
		fprintf(stderr, "it_request: connect: %s\n", strerror(-err));
		return 1;
	}
	struct outcome o = { 0 };
	uint64_t id = 0;
	int r = prof_request(cl, type, &p, "it", on_result, &o, &id);
	if (r < 0) {
		fprintf(stderr, "it_request: refused: %s\n", prof_strerror(r));
		prof_close(cl);
		return 1;
	}
	while (!o.done && prof_dispatch(cl, cancel_file ? 50 : 1000) >= 0) {
		if (cancel_file && access(cancel_file, F_OK) == 0) {
			prof_cancel(cl, id);
			cancel_file = NULL;
		}
	}
	prof_close(cl);
	if (!o.done || o.error) {
		fprintf(stderr, "it_request: capture failed: %s: %s\n", prof_strerror(o.error), o.msg);
		return 1;
	}
	if (o.note[0])
		fprintf(stderr, "it_request: note: %s\n", o.note);
	printf("%s\n", o.path);
	return 0;
}

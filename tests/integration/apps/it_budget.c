/*
 * it_budget UID ACTION...: as app UID (one process, one connection), run
 * the actions in order and print one line each:
 *   q  prof_get_budget(stack): "budget E waits=0|1 cost=C app_left=L
 *      system_left=S windows=N triggers=T cooling=K ahead_ms=D", where L
 *      and S are the tightest window's, waits says whether an admission
 *      time is known and D is admit_ms - now_ms (0 when admitted now)
 *   r  prof_request(stack, 100 ms): "request E"
 *   t  add an ANOMALY trigger (stack, 100 ms, cooldown 3600 s): "trigger E"
 *   a  prof_report_anomaly, then wait up to 30 s for the capture's result
 *      on the listener: "anomaly E" (the result's error; -1: none came)
 *   s  prof_report_anomaly and go on: "signal"
 *   uN (as root) switch every uid and gid to N, keeping the connection:
 *      "uid N" (the process is no longer the one that connected)
 * E is a PROF_E_* (0: admitted). Exit 0 unless a call could not be made.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <unistd.h>

#include <profiling/profiling.h>

#include "util.h"

struct seen {
	int done, error;
	enum prof_trigger_type trigger;
};

static void on_result(const struct prof_result *r, void *ud)
{
	struct seen *s = ud;
	if (r->trigger == PROF_TRIGGER_ANOMALY) {
		s->done = 1;
		s->error = r->error;
	}
}

static int query(prof_client *c)
{
	struct prof_budget b;
	int r = prof_get_budget(c, PROF_STACK_SAMPLING, NULL, &b, sizeof(b));
	if (r < 0) {
		fprintf(stderr, "it_budget: prof_get_budget: %s\n", prof_strerror(r));
		return -1;
	}
	uint32_t app_left = UINT32_MAX, sys_left = UINT32_MAX;
	for (uint32_t i = 0; i < b.nwindows; i++) {
		if (b.windows[i].app_left < app_left)
			app_left = b.windows[i].app_left;
		if (b.windows[i].system_left < sys_left)
			sys_left = b.windows[i].system_left;
	}
	unsigned cooling = 0;
	for (uint32_t i = 0; i < b.ntriggers; i++)
		cooling += b.triggers[i].ready_ms > b.now_ms;
	printf("budget %d waits=%d cost=%u app_left=%d system_left=%d windows=%u triggers=%u "
	       "cooling=%u ahead_ms=%lld\n", b.error, b.admit_ms != 0, b.cost,
	       b.nwindows ? (int)app_left : -1, b.nwindows ? (int)sys_left : -1, b.nwindows,
	       b.ntriggers, cooling,
	       b.admit_ms ? (long long)b.admit_ms - (long long)b.now_ms : 0);
	if (b.error)
		fprintf(stderr, "it_budget: budget: %s: %s\n", prof_strerror(b.error), b.message);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: it_budget UID q|r|t|a...\n");
		return 2;
	}
	uid_t uid = (uid_t)strtoul(argv[1], NULL, 10);
	if (setgid(uid) < 0 || setuid(uid) < 0)
		return 3;
	int err = 0;
	prof_client *c = prof_connect(NULL, &err);
	if (!c) {
		fprintf(stderr, "it_budget: connect: %d\n", err);
		return 3;
	}
	struct seen s = { 0 };
	if (prof_set_result_listener(c, on_result, &s) < 0)
		return 3;
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "q")) {
			if (query(c) < 0)
				return 4;
		} else if (!strcmp(argv[i], "r")) {
			struct prof_params p = PROF_PARAMS_INIT(.duration_ms = 100);
			int r = prof_request(c, PROF_STACK_SAMPLING, &p, "budget", NULL, NULL, NULL);
			if (r == -PROF_E_UNKNOWN)
				return 4;
			printf("request %d\n", -r);
		} else if (!strcmp(argv[i], "t")) {
			struct prof_params tp = PROF_PARAMS_INIT(.duration_ms = 100);
			struct prof_trigger t = PROF_TRIGGER_INIT(.type = PROF_TRIGGER_ANOMALY,
								  .capture = PROF_STACK_SAMPLING,
								  .params = &tp,
								  .rate_limit_period_s = 3600);
			printf("trigger %d\n", -prof_add_trigger(c, &t));
		} else if (!strcmp(argv[i], "a")) {
			s.done = 0;
			prof_report_anomaly("budget");
			uint64_t end = util_mono_ms() + 30000;
			while (!s.done && util_mono_ms() < end)
				if (prof_dispatch(c, 200) < 0)
					return 4;
			printf("anomaly %d\n", s.done ? s.error : -1);
		} else if (!strcmp(argv[i], "s")) {
			prof_report_anomaly("budget");
			printf("signal\n");
		} else if (argv[i][0] == 'u' && argv[i][1]) {
			unsigned n = (unsigned)strtoul(argv[i] + 1, NULL, 10);
			if (setgroups(0, NULL) < 0 || setresgid(n, n, n) < 0 || setresuid(n, n, n) < 0)
				return 3;
			printf("uid %u\n", n);
		} else {
			return 2;
		}
		fflush(stdout);
	}
	prof_close(c);
	return 0;
}

/* svc_config: errors with their line, the printed config re-parses to the
 * same values, and reload applies only the keys of the reload class. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "profiling/profiling.h"
#include "svc_config.h"

/* Write text to a temp file; returns its path (static buffer). */
static const char *conf_file(const char *text)
{
	static char path[64];
	snprintf(path, sizeof(path), "/tmp/pd-conf.XXXXXX");
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

static int load(struct svc_config *c, const char *text, int *line, char *msg, size_t n)
{
	const char *p = conf_file(text);
	svc_config_defaults(c);
	int r = svc_config_load_msg(c, p, line, msg, n);
	unlink(p);
	return r;
}

static char *print(const struct svc_config *c)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	assert_non_null(f);
	assert_int_equal(svc_config_print(c, f), 0);
	fclose(f);
	return buf;
}

static void test_errors_name_line_and_key(void **state)
{
	struct svc_config c;
	char msg[256];
	int line;

	assert_int_equal(load(&c, "[limits]\nmax_sessions = 2\n\nmax_clients = 0\n", &line, msg,
			      sizeof(msg)), -ERANGE);
	assert_int_equal(line, 4);
	assert_string_equal(msg, "[limits] max_clients = 0: out of range (1..65536)");
	svc_config_free(&c);

	assert_int_equal(load(&c, "[capture]\nspeed = 3\n", &line, msg, sizeof(msg)), -EINVAL);
	assert_int_equal(line, 2);
	assert_string_equal(msg, "unknown key [capture] speed");
	svc_config_free(&c);

	assert_true(load(&c, "[daemon]\nno equals sign\n", &line, msg, sizeof(msg)) < 0);
	assert_int_equal(line, 2);
	assert_non_null(strstr(msg, "syntax error"));
	svc_config_free(&c);

	/* Only the first error is reported, with its own line. */
	assert_true(load(&c, "[x]\na = 1\nb = 2\n", &line, msg, sizeof(msg)) < 0);
	assert_int_equal(line, 2);
	assert_string_equal(msg, "unknown key [x] a");
	svc_config_free(&c);
}

/* [trace]: off by default; on/off spelled as the docs do; ranges checked. */
static void test_trace_section(void **state)
{
	struct svc_config c;
	char msg[256];
	int line;

	assert_int_equal(load(&c, "", &line, msg, sizeof(msg)), 0);
	assert_false(c.trace_bg);
	assert_int_equal(c.trace_bg_buffer_kb, 4096);
	assert_int_equal(c.trace_bg_max_s, 30);
	svc_config_free(&c);
	assert_int_equal(load(&c, "[trace]\nbackground = on\nbackground_buffer_kb = 8192\n"
			      "background_max_s = 60\n", &line, msg, sizeof(msg)), 0);
	assert_true(c.trace_bg);
	assert_int_equal(c.trace_bg_buffer_kb, 8192);
	assert_int_equal(c.trace_bg_max_s, 60);
	char *out = print(&c);
	assert_non_null(strstr(out, "[trace]\nbackground = true\n"));
	free(out);
	svc_config_free(&c);
	assert_int_equal(load(&c, "[trace]\nbackground = off\n", &line, msg, sizeof(msg)), 0);
	assert_false(c.trace_bg);
	svc_config_free(&c);
	assert_int_equal(load(&c, "[trace]\nbackground_buffer_kb = 32\n", &line, msg, sizeof(msg)),
			 -ERANGE);
	assert_string_equal(msg, "[trace] background_buffer_kb = 32: out of range (64..65536)");
	svc_config_free(&c);
	assert_int_equal(load(&c, "[trace]\nbackground_max_s = 3601\n", &line, msg, sizeof(msg)),
			 -ERANGE);
	svc_config_free(&c);
	assert_true(load(&c, "[trace]\nbackground = maybe\n", &line, msg, sizeof(msg)) < 0);
	svc_config_free(&c);
	/* A system trigger's share of it, printed back when set. */
	assert_int_equal(load(&c, "[trigger.t]\ntype = crash\nexe = /bin/true\ncapture = trace\n"
			      "background_ms = 5000\n", &line, msg, sizeof(msg)), 0);
	assert_int_equal(c.systrig[0].background_ms, 5000);
	out = print(&c);
	assert_non_null(strstr(out, "background_ms = 5000\n"));
	free(out);
	svc_config_free(&c);
	assert_true(load(&c, "[trigger.t]\ntype = crash\nexe = /bin/true\n"
			 "background_ms = 3600001\n", &line, msg, sizeof(msg)) < 0);
	svc_config_free(&c);
}

/* [trigger.NAME] buffer_fill_policy and track_java_allocations (issue #21):
 * parsed, printed back so that they re-parse, and a bad value names the
 * line and what is valid. */
static void test_trigger_parity(void **state)
{
	struct svc_config a, b;
	char msg[256];
	int line;
	(void)state;
	assert_int_equal(load(&a, "[trigger.t]\ntype = cold-start\nexe = /bin/a\ncapture = trace\n"
			      "buffer_fill_policy = discard\n[trigger.j]\ntype = cold-start\n"
			      "java_main = Leak\ncapture = heap\ntrack_java_allocations = off\n"
			      "[trigger.r]\ntype = crash\nexe = /bin/r\nbuffer_fill_policy = ring_buffer\n"
			      "track_java_allocations = yes\n[trigger.d]\ntype = crash\nexe = /bin/d\n",
			      &line, msg, sizeof(msg)), 0);
	assert_int_equal(a.systrig[0].fill_policy, PROF_FILL_DISCARD);
	assert_int_equal(a.systrig[0].java_allocs, PROF_SWITCH_DEFAULT);
	assert_int_equal(a.systrig[1].java_allocs, PROF_SWITCH_OFF);
	assert_int_equal(a.systrig[1].fill_policy, PROF_FILL_DEFAULT);
	assert_int_equal(a.systrig[2].fill_policy, PROF_FILL_RING_BUFFER);
	assert_int_equal(a.systrig[2].java_allocs, PROF_SWITCH_ON);
	assert_int_equal(a.systrig[3].fill_policy, PROF_FILL_DEFAULT);
	char *out = print(&a);
	assert_non_null(strstr(out, "buffer_fill_policy = discard\n"));
	assert_non_null(strstr(out, "track_java_allocations = off\n"));
	assert_non_null(strstr(out, "buffer_fill_policy = ring\ntrack_java_allocations = on\n"));
	/* A default is left out, as background_ms is. */
	assert_non_null(strstr(out, "[trigger.d]\n"));
	assert_null(strstr(strstr(out, "[trigger.d]\n"), "buffer_fill_policy"));
	assert_int_equal(load(&b, out, &line, msg, sizeof(msg)), 0);
	for (unsigned i = 0; i < 4; i++) {
		assert_int_equal(a.systrig[i].fill_policy, b.systrig[i].fill_policy);
		assert_int_equal(a.systrig[i].java_allocs, b.systrig[i].java_allocs);
	}
	free(out);
	svc_config_free(&a);
	svc_config_free(&b);
	assert_int_equal(load(&a, "[trigger.t]\ntype = crash\nexe = /bin/true\n"
			      "buffer_fill_policy = overwrite\n", &line, msg, sizeof(msg)), -EINVAL);
	assert_int_equal(line, 4);
	assert_string_equal(msg, "[trigger.t] buffer_fill_policy = overwrite: not one of "
			    "discard, ring");
	svc_config_free(&a);
	assert_int_equal(load(&a, "[trigger.t]\ntype = crash\ntrack_java_allocations = 2\n",
			      &line, msg, sizeof(msg)), -EINVAL);
	assert_int_equal(line, 3);
	assert_string_equal(msg, "[trigger.t] track_java_allocations = 2: not one of on, off "
			    "(or true, false)");
	svc_config_free(&a);
}

/* [methods.ID]: parsed, checked, printed back, and its bounds refused. */
static void test_methods_sections(void **state)
{
	struct svc_config a, b;
	char msg[256];
	int line;

	assert_int_equal(load(&a, "[methods.reg]\nexe = /bin/app\nmethod = /lib/x.so:f\n"
			      "method = buildid:abcd:+0x10\ncanary_percent = 10\nexpiry_s = 7200\n",
			      &line, msg, sizeof(msg)), 0);
	assert_int_equal(svc_config_check(&a, msg, sizeof(msg)), 0);
	assert_int_equal(a.nmethods, 1);
	assert_int_equal(a.methods[0].ntargets, 2);
	assert_int_equal(a.methods[0].canary_percent, 10);
	char *out1 = print(&a);
	assert_non_null(strstr(out1, "[methods.reg]\nexe = /bin/app\nmethod = /lib/x.so:f\n"
				     "method = buildid:abcd:+0x10\n"));
	assert_int_equal(load(&b, out1, &line, msg, sizeof(msg)), 0);
	char *out2 = print(&b);
	assert_string_equal(out1, out2);
	free(out1);
	free(out2);
	svc_config_free(&a);
	svc_config_free(&b);
	/* A canary over 100, an expiry over 24 h, a relative exe, a ninth method. */
	const char *bad[] = {
		"[methods.x]\ncanary_percent = 101\n", "[methods.x]\nexpiry_s = 86401\n",
		"[methods.x]\nexe = bin/app\n",
		/* One string over two lines: the parentheses say so to clang. */
		("[methods.x]\nmethod = /a:f\nmethod = /a:f\nmethod = /a:f\nmethod = /a:f\n"
		 "method = /a:f\nmethod = /a:f\nmethod = /a:f\nmethod = /a:f\nmethod = /a:f\n"),
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_not_equal(load(&a, bad[i], &line, msg, sizeof(msg)), 0);
		assert_non_null(strstr(msg, "[methods.x]"));
		svc_config_free(&a);
	}
	/* No exe or no method: refused by the check. */
	assert_int_equal(load(&a, "[methods.y]\nmethod = /a:f\n", &line, msg, sizeof(msg)), 0);
	assert_int_not_equal(svc_config_check(&a, msg, sizeof(msg)), 0);
	assert_non_null(strstr(msg, "[methods.y] needs an exe"));
	svc_config_free(&a);
}

static void test_print_round_trip(void **state)
{
	struct svc_config a, b;
	char msg[256];
	int line;

	assert_int_equal(load(&a, "[daemon]\nlog_level = warn\n[ratelimit]\nweek_app_cap = 7\n"
			      "exempt_app = uid:5\n[dlp]\npattern = a+b\npattern = x{2}\n"
			      "[apps]\n/bin/a = app.a\n[trigger.t1]\ntype = hang\nexe = /bin/b\n"
			      "timeout_ms = 900\n", &line, msg, sizeof(msg)), 0);
	assert_int_equal(svc_config_check(&a, msg, sizeof(msg)), 0);
	char *out1 = print(&a);
	assert_non_null(strstr(out1, "log_level = warn\n"));
	assert_non_null(strstr(out1, "pattern = x{2}\n"));
	assert_non_null(strstr(out1, "[trigger.t1]\ntype = hang\nexe = /bin/b\n"));
	assert_int_equal(load(&b, out1, &line, msg, sizeof(msg)), 0);
	char *out2 = print(&b);
	assert_string_equal(out1, out2);
	assert_int_equal(b.rl.win[2].app_cap, 7);
	assert_int_equal(b.napps, 1);
	assert_int_equal(b.systrig[0].timeout_ms, 900);
	free(out1);
	free(out2);
	svc_config_free(&a);
	svc_config_free(&b);
}

/* [trigger.NAME] type and capture take the API's spellings and profctl's
 * (common/names.h); the printed config keeps the config's own. */
static void test_trigger_spellings(void **state)
{
	struct svc_config c;
	char msg[256];
	int line;

	assert_int_equal(load(&c, "[trigger.a]\ntype = PROF_TRIGGER_OOM\ncapture = HEAP_PROFILE\n"
			      "exe = /bin/a\n[trigger.b]\ntype = app_fully_drawn\n"
			      "capture = heap-dump\nexe = /bin/b\n[trigger.c]\ntype = Hang\n"
			      "capture = stack_sampling\nexe = /bin/c\n", &line, msg, sizeof(msg)), 0);
	assert_int_equal(c.nsystrig, 3);
	assert_int_equal(c.systrig[0].type, PROF_TRIGGER_OOM);
	assert_int_equal(c.systrig[0].capture, PROF_HEAP_PROFILE);
	assert_int_equal(c.systrig[1].type, PROF_TRIGGER_APP_FULLY_DRAWN);
	assert_int_equal(c.systrig[1].capture, PROF_HEAP_DUMP);
	assert_int_equal(c.systrig[2].type, PROF_TRIGGER_HANG);
	assert_int_equal(c.systrig[2].capture, PROF_STACK_SAMPLING);
	char *out = print(&c);
	assert_non_null(strstr(out, "[trigger.a]\ntype = oom\ncapture = heap\n"));
	assert_non_null(strstr(out, "[trigger.b]\ntype = fully-drawn\ncapture = heapdump\n"));
	assert_non_null(strstr(out, "[trigger.c]\ntype = hang\ncapture = stack\n"));
	free(out);
	svc_config_free(&c);

	assert_int_equal(load(&c, "[trigger.x]\ntype = oom\ncapture = heapx\n", &line, msg,
			      sizeof(msg)), -EINVAL);
	assert_int_equal(line, 3);
	assert_string_equal(msg, "[trigger.x] capture = heapx: not one of heap-dump, heap-profile, "
			    "stack, trace");
	svc_config_free(&c);
	assert_int_equal(load(&c, "[trigger.x]\ntype = none\n", &line, msg, sizeof(msg)), -EINVAL);
	assert_int_equal(line, 2);
	svc_config_free(&c);
}

static void test_reload_classes(void **state)
{
	struct svc_config live, next;
	char msg[256];
	int line;
	unsigned refused = 99;

	assert_int_equal(load(&live, "[ratelimit]\nhour_app_cap = 10\n", &line, msg, sizeof(msg)), 0);
	assert_int_equal(load(&next, "[daemon]\nstate_dir = /elsewhere\nlog_level = debug\n"
			      "[limits]\nmax_queued_msgs = 8\nmax_sessions = 3\n"
			      "[ratelimit]\nhour_app_cap = 1000\nsync_full = true\n"
			      "[dlp]\npattern = tok[0-9]+\n[apps]\n/bin/x = x\n",
			      &line, msg, sizeof(msg)), 0);
	/* Applied: log_level, max_sessions, hour_app_cap, the dlp patterns. */
	assert_int_equal(svc_config_reload(&live, &next, &refused), 4);
	/* Refused: state_dir, max_queued_msgs, sync_full, [apps]. */
	assert_int_equal(refused, 4);
	assert_int_equal(live.rl.win[0].app_cap, 1000);
	assert_int_equal(live.max_sessions, 3);
	assert_int_equal(live.log_level, 7);
	assert_int_equal(live.ndlp, 1);
	assert_string_equal(live.dlp[0], "tok[0-9]+");
	assert_string_equal(live.state_dir, "/var/lib/profilingd");
	assert_int_equal(live.max_queued_msgs, 64);
	assert_false(live.rl.sync_full);
	assert_int_equal(live.napps, 0);
	/* Reloading the same values again changes nothing. */
	svc_config_free(&next);
	assert_int_equal(load(&next, "[ratelimit]\nhour_app_cap = 1000\n[limits]\nmax_sessions = 3\n"
			      "[daemon]\nlog_level = debug\n[dlp]\npattern = tok[0-9]+\n",
			      &line, msg, sizeof(msg)), 0);
	assert_int_equal(svc_config_reload(&live, &next, &refused), 0);
	assert_int_equal(refused, 0);
	svc_config_free(&next);
	svc_config_free(&live);
}

/* Durations take ms, s, m, h (common/duration.h); a bare number keeps the
 * key's unit (ms for _ms keys, s for rate_limit_period_s). */
static void test_duration_units(void **state)
{
	struct svc_config c;
	char msg[256];
	int line;

	assert_int_equal(load(&c, "[capture]\ndefault_duration_ms = 2s\ndeadline_grace_ms = 1.5s\n"
			      "runtime_wait_ms = 750\n[redact]\ntimeout_ms = 2m\n[jvm]\n"
			      "attach_timeout_ms = 1h\n[limits]\nhello_timeout_ms = 250ms\n"
			      "[trigger.t]\ntype = hang\nexe = /bin/t\ntimeout_ms = 0.5s\n"
			      "duration_ms = 3s\ncpu_window_ms = 1m\nrate_limit_period_s = 2m\n"
			      "[trigger.u]\ntype = oom\nexe = /bin/u\nrate_limit_period_s = 90\n",
			      &line, msg, sizeof(msg)), 0);
	assert_int_equal(c.default_duration_ms, 2000);
	assert_int_equal(c.deadline_grace_ms, 1500);
	assert_int_equal(c.runtime_wait_ms, 750);
	assert_int_equal(c.redact_timeout_ms, 120000);
	assert_int_equal(c.jvm_attach_timeout_ms, 3600000);
	assert_int_equal(c.hello_timeout_ms, 250);
	assert_int_equal(c.systrig[0].timeout_ms, 500);
	assert_int_equal(c.systrig[0].duration_ms, 3000);
	assert_int_equal(c.systrig[0].cpu_window_ms, 60000);
	assert_int_equal(c.systrig[0].period_s, 120);
	assert_int_equal(c.systrig[1].period_s, 90);
	/* Printed in the bare unit, so it reads back the same. */
	char *out = print(&c);
	assert_non_null(strstr(out, "default_duration_ms = 2000\n"));
	assert_non_null(strstr(out, "rate_limit_period_s = 120\n"));
	free(out);
	svc_config_free(&c);

	assert_int_equal(load(&c, "[capture]\ndefault_duration_ms = 5 s\n", &line, msg,
			      sizeof(msg)), -EINVAL);
	assert_string_equal(msg, "[capture] default_duration_ms = 5 s: not a duration "
			    "(100ms..120000ms; units ms, s, m, h; a bare number is ms)");
	svc_config_free(&c);
	assert_int_equal(load(&c, "[capture]\ndefault_duration_ms = 3m\n", &line, msg,
			      sizeof(msg)), -ERANGE);
	assert_non_null(strstr(msg, "out of range (100ms..120000ms"));
	svc_config_free(&c);
	const char *bad[] = { "1d", "-5s", "s", "1.2345s", "0.5ms", "1..5s", "5.", "1e3" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char text[128];
		snprintf(text, sizeof(text), "[redact]\ntimeout_ms = %s\n", bad[i]);
		assert_true(load(&c, text, &line, msg, sizeof(msg)) < 0);
		svc_config_free(&c);
	}
	/* A period must be whole seconds. */
	assert_int_equal(load(&c, "[trigger.t]\ntype = hang\nexe = /bin/t\n"
			      "rate_limit_period_s = 1500ms\n", &line, msg, sizeof(msg)), -EINVAL);
	svc_config_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_errors_name_line_and_key),
		cmocka_unit_test(test_trace_section),
		cmocka_unit_test(test_print_round_trip),
		cmocka_unit_test(test_methods_sections),
		cmocka_unit_test(test_trigger_spellings),
		cmocka_unit_test(test_trigger_parity),
		cmocka_unit_test(test_reload_classes),
		cmocka_unit_test(test_duration_units),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

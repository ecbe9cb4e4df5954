/*
 * The admission rule order (svc_admit_decide): each rule alone, then, with
 * several refusing at once, that the first in DESIGN §2's order wins.
 * svc_admit.c is linked alone, with the result index stubbed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "profiling/profiling.h"
#include "names.h"
#include "svc_config.h"
#include "svc_admit.h"

/* A request that every rule admits: a stack capture of pid 42, whose
 * runtime offers stack sampling, nothing else running. */
static struct svc_admit_in clear(void)
{
	struct svc_admit_in in = {
		.type = PROF_STACK_SAMPLING,
		.params = NULL,
		.type_cap = NAMES_CAP_STACK_SAMPLING,
		.pid = 42,
		.runtime = true,
		.runtime_caps = NAMES_CAP_STACK_SAMPLING,
		.default_duration_ms = 5000,
		.default_frequency_hz = 99,
		.max_sessions = 4,
		.rate_why = "budget used up",
		.disk_why = "disk full",
	};
	return in;
}

/* Every rule refuses at once (the process's rules too). */
static struct svc_admit_in all_refuse(Pd__Params *p)
{
	struct svc_admit_in in = clear();
	in.params = p;
	in.runtime_caps = 0;
	in.rate = PROF_E_RATE_LIMIT_PROCESS;
	in.busy = 7;
	in.nsessions = 4;
	in.disk = PROF_E_NO_DISK_SPACE;
	return in;
}

static int decide(const struct svc_admit_in *in, struct svc_admit_out *out, char *msg)
{
	memset(out, 0xa5, sizeof(*out));
	strcpy(msg, "untouched");
	return svc_admit_decide(in, out, msg, 256);
}

static void test_admits_with_defaults(void **state)
{
	struct svc_admit_in in = clear();
	struct svc_admit_out out;
	char msg[256];
	assert_int_equal(decide(&in, &out, msg), 0);
	assert_int_equal(out.duration_ms, 5000);
	assert_int_equal(out.frequency_hz, 99);

	Pd__Params p = PD__PARAMS__INIT;
	p.has_duration_ms = 1;
	p.duration_ms = SVC_DURATION_MIN_MS;
	p.has_frequency_hz = 1;
	p.frequency_hz = SVC_HZ_MAX;
	in.params = &p;
	assert_int_equal(decide(&in, &out, msg), 0);
	assert_int_equal(out.duration_ms, SVC_DURATION_MIN_MS);
	assert_int_equal(out.frequency_hz, SVC_HZ_MAX);
	/* 0 means "the default", not out of range. */
	p.duration_ms = 0;
	assert_int_equal(decide(&in, &out, msg), 0);
	assert_int_equal(out.duration_ms, 5000);
}

/* Rule 1 first: an unknown type beats every other refusal. */
static void test_type_first(void **state)
{
	struct svc_admit_in in = all_refuse(NULL);
	struct svc_admit_out out;
	char msg[256];
	in.type = 0;
	assert_int_equal(decide(&in, &out, msg), PROF_E_INVALID_REQUEST);
	assert_string_equal(msg, "unknown capture type 0");
	in.type = PROF_SYSTEM_TRACE + 1;
	assert_int_equal(decide(&in, &out, msg), PROF_E_INVALID_REQUEST);
	assert_non_null(strstr(msg, "unknown capture type"));
}

/* Within rule 1: duration, frequency, interval, buffer, in that order. */
static void test_params_in_order(void **state)
{
	Pd__Params p = PD__PARAMS__INIT;
	struct svc_admit_in in = all_refuse(&p);
	struct svc_admit_out out;
	char msg[256];

	p.has_duration_ms = 1;
	p.duration_ms = SVC_DURATION_MAX_MS + 1;
	p.has_frequency_hz = 1;
	p.frequency_hz = SVC_HZ_MAX + 1;
	p.has_sampling_interval_bytes = 1;
	p.sampling_interval_bytes = SVC_INTERVAL_MAX + 1;
	p.has_buffer_kb = 1;
	p.buffer_kb = SVC_BUFFER_KB_MIN - 1;
	assert_int_equal(decide(&in, &out, msg), PROF_E_INVALID_REQUEST);
	assert_non_null(strstr(msg, "duration_ms"));
	p.duration_ms = SVC_DURATION_MIN_MS - 1;
	assert_int_equal(decide(&in, &out, msg), PROF_E_INVALID_REQUEST);
	assert_non_null(strstr(msg, "duration_ms"));
	p.duration_ms = 1000;
	assert_int_equal(decide(&in, &out, msg), PROF_E_INVALID_REQUEST);
	assert_non_null(strstr(msg, "frequency_hz"));
	p.frequency_hz = 100;
	assert_int_equal(decide(&in, &out, msg), PROF_E_INVALID_REQUEST);
	assert_non_null(strstr(msg, "sampling_interval_bytes"));
	p.sampling_interval_bytes = SVC_INTERVAL_MAX;
	assert_int_equal(decide(&in, &out, msg), PROF_E_INVALID_REQUEST);
	assert_non_null(strstr(msg, "buffer_kb"));
	p.buffer_kb = SVC_BUFFER_KB_MAX + 1;
	assert_int_equal(decide(&in, &out, msg), PROF_E_INVALID_REQUEST);
	assert_non_null(strstr(msg, "buffer_kb"));
	/* Heap formats (issue #20): Perfetto only where names.c has a row. */
	p.buffer_kb = 0;
	p.has_format = 1;
	p.format = PROF_FORMAT_PERFETTO;
	in.type = PROF_STACK_SAMPLING;
	assert_int_equal(decide(&in, &out, msg), PROF_E_INVALID_REQUEST);
	assert_non_null(strstr(msg, "format"));
	p.format = 2;
	in.type = PROF_HEAP_DUMP;
	assert_int_equal(decide(&in, &out, msg), PROF_E_INVALID_REQUEST);
	assert_non_null(strstr(msg, "format"));
	p.format = PROF_FORMAT_PERFETTO;
	assert_int_equal(decide(&in, &out, msg), PROF_E_INVALID_REQUEST);
	assert_null(strstr(msg, "format"));
	p.has_format = 0;
	in.type = PROF_STACK_SAMPLING;
	/* Valid parameters: the runtime rule is next. */
	assert_int_equal(decide(&in, &out, msg), PROF_E_INVALID_REQUEST);
	assert_non_null(strstr(msg, "cannot take that capture type"));
}

/* background_ms: up to the configured cap, whether the ring runs or not. */
static void test_background_cap(void **state)
{
	Pd__Params p = PD__PARAMS__INIT;
	struct svc_admit_in in = clear();
	struct svc_admit_out out;
	char msg[256];

	in.params = &p;
	in.background_max_ms = 30000;
	p.has_background_ms = 1;
	p.background_ms = 30000;
	assert_int_equal(decide(&in, &out, msg), 0);
	p.background_ms = 30001;
	assert_int_equal(decide(&in, &out, msg), PROF_E_INVALID_REQUEST);
	assert_non_null(strstr(msg, "background_ms must be 0..30000"));
	/* A zero cap refuses any N but 0. */
	in.background_max_ms = 0;
	p.background_ms = 1;
	assert_int_equal(decide(&in, &out, msg), PROF_E_INVALID_REQUEST);
	p.background_ms = 0;
	assert_int_equal(decide(&in, &out, msg), 0);
}

/* Rule 2: the runtime's capabilities, before the costs and sessions. */
static void test_runtime_rule(void **state)
{
	struct svc_admit_in in = all_refuse(NULL);
	struct svc_admit_out out;
	char msg[256];

	assert_int_equal(decide(&in, &out, msg), PROF_E_INVALID_REQUEST);
	assert_string_equal(msg, "the runtime of this process cannot take that capture type");

	/* A heap dump from a runtime without one: refused unless a JVM. */
	in.type = PROF_HEAP_DUMP;
	in.type_cap = NAMES_CAP_HEAP_DUMP;
	in.runtime_caps = NAMES_CAP_HEAP_PROFILE;
	assert_int_equal(decide(&in, &out, msg), PROF_E_INVALID_REQUEST);
	assert_non_null(strstr(msg, "no heap dump"));
	in.jvm = true;
	assert_int_equal(decide(&in, &out, msg), PROF_E_RATE_LIMIT_PROCESS);

	/* No runtime at all: a heap dump needs a JVM; other types wait for one. */
	in.runtime = false;
	in.runtime_caps = 0;
	in.jvm = false;
	assert_int_equal(decide(&in, &out, msg), PROF_E_INVALID_REQUEST);
	assert_non_null(strstr(msg, "pid 42 is not a JVM"));
	in.jvm = true;
	assert_int_equal(decide(&in, &out, msg), PROF_E_RATE_LIMIT_PROCESS);
	in.type = PROF_STACK_SAMPLING;
	in.jvm = false;
	assert_int_equal(decide(&in, &out, msg), PROF_E_RATE_LIMIT_PROCESS);
}

/* Rule 3: the cost windows, before one-per-process, max_sessions, disk. */
static void test_rate_before_sessions(void **state)
{
	struct svc_admit_in in = all_refuse(NULL);
	struct svc_admit_out out;
	char msg[256];
	in.runtime_caps = NAMES_CAP_STACK_SAMPLING;
	in.rate = PROF_E_RATE_LIMIT_SYSTEM;
	in.rate_why = "system-wide capture budget used up";
	assert_int_equal(decide(&in, &out, msg), PROF_E_RATE_LIMIT_SYSTEM);
	assert_string_equal(msg, "system-wide capture budget used up");
}

/* Rule 4: one session per process, then max_sessions, before the disk. */
static void test_sessions_before_disk(void **state)
{
	struct svc_admit_in in = all_refuse(NULL);
	struct svc_admit_out out;
	char msg[256];
	in.runtime_caps = NAMES_CAP_STACK_SAMPLING;
	in.rate = 0;
	assert_int_equal(decide(&in, &out, msg), PROF_E_PROFILING_IN_PROGRESS);
	assert_string_equal(msg, "session 7 is already capturing pid 42");
	in.busy = 0;
	assert_int_equal(decide(&in, &out, msg), PROF_E_PROFILING_IN_PROGRESS);
	assert_string_equal(msg, "4 captures running system-wide (max_sessions)");
	in.nsessions = 3;
	assert_int_equal(decide(&in, &out, msg), PROF_E_NO_DISK_SPACE);
	assert_string_equal(msg, "disk full");
	in.disk = 0;
	assert_int_equal(decide(&in, &out, msg), 0);
}

/* A dead process's dump: its process rules do not apply, the costs and
 * the disk do, and validity still comes first. */
static void test_gone_costs_only(void **state)
{
	struct svc_admit_in in = all_refuse(NULL);
	struct svc_admit_out out;
	char msg[256];
	in.gone = true;
	in.type = PROF_HEAP_DUMP; /* no runtime, not a JVM: rule 2 would refuse */
	in.runtime = false;
	assert_int_equal(decide(&in, &out, msg), PROF_E_RATE_LIMIT_PROCESS);
	in.rate = 0;
	assert_int_equal(decide(&in, &out, msg), PROF_E_NO_DISK_SPACE);
	in.disk = 0;
	assert_int_equal(decide(&in, &out, msg), 0);
	in.type = 9;
	assert_int_equal(decide(&in, &out, msg), PROF_E_INVALID_REQUEST);
}

/* An app's budget with no process (profctl budget): the process's rules
 * (runtime, one per process) are not asked; max_sessions, costs and disk
 * are, in order. */
static void test_app_only(void **state)
{
	struct svc_admit_in in = all_refuse(NULL);
	struct svc_admit_out out;
	char msg[256];
	in.app_only = true;
	in.runtime = false;
	in.type = PROF_HEAP_DUMP; /* no runtime, not a JVM: rule 2 would refuse */
	assert_int_equal(decide(&in, &out, msg), PROF_E_RATE_LIMIT_PROCESS);
	in.rate = 0;
	/* busy is the process's rule; max_sessions (4 of 4) still refuses */
	assert_int_equal(decide(&in, &out, msg), PROF_E_PROFILING_IN_PROGRESS);
	assert_non_null(strstr(msg, "max_sessions"));
	in.nsessions = 3;
	assert_int_equal(decide(&in, &out, msg), PROF_E_NO_DISK_SPACE);
	in.disk = 0;
	assert_int_equal(decide(&in, &out, msg), 0);
}

/* The budget query: the same answer as svc_admit_decide, and "waits" only
 * when nothing but the cost windows refuses. */
static void test_query(void **state)
{
	struct svc_admit_in in = clear();
	struct svc_admit_out out;
	char msg[256], qmsg[256];
	bool waits = false;
	assert_int_equal(svc_admit_query(&in, qmsg, sizeof(qmsg), &waits), 0);
	assert_true(waits);

	in.rate = PROF_E_RATE_LIMIT_SYSTEM;
	assert_int_equal(svc_admit_query(&in, qmsg, sizeof(qmsg), &waits), PROF_E_RATE_LIMIT_SYSTEM);
	assert_true(waits);
	assert_string_equal(qmsg, "budget used up");

	/* A later rule refuses too: the windows freeing up would not do. */
	in.disk = PROF_E_NO_DISK_SPACE;
	assert_int_equal(svc_admit_query(&in, qmsg, sizeof(qmsg), &waits), PROF_E_RATE_LIMIT_SYSTEM);
	assert_false(waits);
	in.rate = 0;
	assert_int_equal(svc_admit_query(&in, qmsg, sizeof(qmsg), &waits), PROF_E_NO_DISK_SPACE);
	assert_false(waits);

	/* Every state of all_refuse, rule by rule: the query agrees with decide. */
	in = all_refuse(NULL);
	for (int step = 0; step < 5; step++) {
		int e = decide(&in, &out, msg);
		assert_int_equal(svc_admit_query(&in, qmsg, sizeof(qmsg), &waits), e);
		assert_string_equal(qmsg, e ? msg : qmsg);
		switch (step) {
		case 0: in.runtime_caps = NAMES_CAP_STACK_SAMPLING; break;
		case 1: assert_false(waits); in.busy = 0; in.nsessions = 0; break;
		case 2: assert_false(waits); in.disk = 0; break;
		case 3: assert_true(waits); in.rate = 0; break;
		default: assert_int_equal(e, 0); assert_true(waits); break;
		}
	}
}

/* A long reason is cut to the caller's buffer, never past it. */
/* Method events: their targets are rule 1's; no runtime rule applies. */
static void test_method_events(void **state)
{
	struct svc_admit_in in = clear();
	struct svc_admit_out out;
	char msg[256];
	char *t[SVC_METHOD_TARGETS_MAX + 1];
	char longt[SVC_METHOD_TARGET_LEN + 8];
	Pd__Params p = PD__PARAMS__INIT;

	in.type = PROF_METHOD_EVENTS;
	in.type_cap = NAMES_CAP_METHOD_EVENTS;
	in.params = &p;
	/* No targets. */
	assert_int_equal(decide(&in, &out, msg), PROF_E_INVALID_REQUEST);
	assert_string_equal(msg, "method events need 1..8 method_targets, got 0");
	/* A good one, with a runtime that offers no method events: admitted. */
	t[0] = "/usr/lib/libfoo.so:foo";
	p.method_targets = t;
	p.n_method_targets = 1;
	assert_int_equal(decide(&in, &out, msg), 0);
	t[0] = "/usr/lib/libfoo.so:+0x1130";
	assert_int_equal(decide(&in, &out, msg), 0);
	t[0] = "buildid:84dc53a866062ca38195c481c5e7bfba34dd6a43:+0x1370";
	assert_int_equal(decide(&in, &out, msg), 0);
	const char *badid[] = { "buildid:abc:+0x1", "buildid:xyz:+0x1", "buildid:abcd:0x1",
				"buildid:abcd:+", "buildid::+0x1" };
	for (size_t i = 0; i < sizeof(badid) / sizeof(badid[0]); i++) {
		t[0] = (char *)badid[i];
		assert_int_equal(decide(&in, &out, msg), PROF_E_INVALID_REQUEST);
		assert_non_null(strstr(msg, "expected buildid:HEX:+0xOFFSET"));
	}
	t[0] = "/usr/lib/libfoo.so:foo";
	/* A method event may run until its config's expiry: 24 h. */
	p.has_duration_ms = 1;
	p.duration_ms = SVC_METHOD_DURATION_MAX_MS;
	assert_int_equal(decide(&in, &out, msg), 0);
	assert_int_equal(out.duration_ms, SVC_METHOD_DURATION_MAX_MS);
	p.duration_ms = SVC_METHOD_DURATION_MAX_MS + 1;
	assert_int_equal(decide(&in, &out, msg), PROF_E_INVALID_REQUEST);
	p.duration_ms = 0;
	/* Nine. */
	for (int i = 0; i <= SVC_METHOD_TARGETS_MAX; i++)
		t[i] = "/x:f";
	p.n_method_targets = SVC_METHOD_TARGETS_MAX + 1;
	assert_int_equal(decide(&in, &out, msg), PROF_E_INVALID_REQUEST);
	assert_string_equal(msg, "method events need 1..8 method_targets, got 9");
	p.n_method_targets = 1;
	/* Neither kind, malformed, control characters, too long. */
	t[0] = "com.example.Target.register";
	assert_int_equal(decide(&in, &out, msg), PROF_E_INVALID_REQUEST);
	assert_non_null(strstr(msg, "java:CLASS.METHOD"));
	/* JVM targets (common/jtarget.h): admitted, one kind a request. */
	t[0] = "java:com.example.Target.register(Ljava/lang/Object;)V";
	assert_int_equal(decide(&in, &out, msg), 0);
	t[0] = "java:java.lang.String.length";
	assert_int_equal(decide(&in, &out, msg), PROF_E_INVALID_REQUEST);
	assert_non_null(strstr(msg, "java.*"));
	t[0] = "java:Target.register(Lfoo)V";
	assert_int_equal(decide(&in, &out, msg), PROF_E_INVALID_REQUEST);
	assert_non_null(strstr(msg, "bad descriptor"));
	t[0] = "java:Target.register";
	t[1] = "/x:f";
	p.n_method_targets = 2;
	assert_int_equal(decide(&in, &out, msg), PROF_E_INVALID_REQUEST);
	assert_non_null(strstr(msg, "mix JVM"));
	p.n_method_targets = 1;
	const char *bad[] = { "/x", "/x:", "/x:a/b", "/x:f\n" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		t[0] = (char *)bad[i];
		assert_int_equal(decide(&in, &out, msg), PROF_E_INVALID_REQUEST);
	}
	memset(longt, 'a', sizeof(longt) - 1);
	longt[0] = '/';
	longt[sizeof(longt) - 1] = '\0';
	t[0] = longt;
	assert_int_equal(decide(&in, &out, msg), PROF_E_INVALID_REQUEST);
	assert_non_null(strstr(msg, "longer than"));
	/* every and max_hits in range. */
	t[0] = "/x:f";
	p.has_method_every = 1;
	p.method_every = SVC_METHOD_EVERY_MAX + 1;
	assert_int_equal(decide(&in, &out, msg), PROF_E_INVALID_REQUEST);
	p.method_every = SVC_METHOD_EVERY_MAX;
	p.has_method_max_hits = 1;
	p.method_max_hits = SVC_METHOD_MAX_HITS + 1;
	assert_int_equal(decide(&in, &out, msg), PROF_E_INVALID_REQUEST);
	p.method_max_hits = SVC_METHOD_MAX_HITS;
	assert_int_equal(decide(&in, &out, msg), 0);
	/* The kill switch's config key. */
	in.methods_off = true;
	assert_int_equal(decide(&in, &out, msg), PROF_E_INVALID_REQUEST);
	assert_non_null(strstr(msg, "switched off"));
	/* Targets on another type. */
	in = clear();
	in.params = &p;
	assert_int_equal(decide(&in, &out, msg), PROF_E_INVALID_REQUEST);
	assert_non_null(strstr(msg, "PROF_METHOD_EVENTS only"));
}

/*
 * The free space is read once per loop turn (svc_admit_turn_begin/end) and
 * afresh outside one. A min_free_bytes no disk has refuses every real
 * read; an unreadable state directory (moved away) reads as unlimited, so
 * a refusal after the move can only come from the turn's first read.
 */
static void test_free_space_per_turn(void **state)
{
	(void)state;
	static struct svc_config c;
	char dir[] = "/tmp/pd-admit.XXXXXX", away[sizeof(dir) + 8], why[160];
	assert_non_null(mkdtemp(dir));
	snprintf(away, sizeof(away), "%s.away", dir);
	snprintf(c.state_dir, sizeof(c.state_dir), "%s", dir);
	rl_config_defaults(&c.rl);
	c.min_free_bytes = UINT64_MAX - 1;
	c.max_total_result_bytes = UINT64_MAX;
	c.max_app_result_bytes = UINT64_MAX;
	assert_int_equal(svc_admit_init(&c), 0);

	/* Outside a turn: each check reads. */
	assert_int_equal(svc_admit_disk_check("a", why, sizeof(why)), PROF_E_NO_DISK_SPACE);
	assert_int_equal(rename(dir, away), 0);
	assert_int_equal(svc_admit_disk_check("a", why, sizeof(why)), 0);
	assert_int_equal(rename(away, dir), 0);

	/* In a turn: the first read holds until the turn ends. */
	svc_admit_turn_begin();
	assert_int_equal(svc_admit_disk_check("a", why, sizeof(why)), PROF_E_NO_DISK_SPACE);
	assert_int_equal(rename(dir, away), 0);
	assert_int_equal(svc_admit_disk_check("a", why, sizeof(why)), PROF_E_NO_DISK_SPACE);
	svc_admit_turn_end();
	assert_int_equal(svc_admit_disk_check("a", why, sizeof(why)), 0);
	assert_int_equal(rename(away, dir), 0);

	svc_admit_fini();
	char db[sizeof(dir) + 32];
	static const char *const files[] = { "ratelimit.db", "ratelimit.db-wal", "ratelimit.db-shm" };
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(db, sizeof(db), "%s/%s", dir, files[i]);
		unlink(db);
	}
	rmdir(dir);
}

static void test_message_bounded(void **state)
{
	struct svc_admit_in in = clear();
	struct svc_admit_out out;
	char msg[8];
	memset(msg, 'x', sizeof(msg));
	in.disk = PROF_E_NO_DISK_SPACE;
	in.disk_why = "a reason far longer than eight bytes";
	assert_int_equal(svc_admit_decide(&in, &out, msg, sizeof(msg)), PROF_E_NO_DISK_SPACE);
	assert_int_equal(msg[sizeof(msg) - 1], '\0');
	assert_int_equal(strncmp(msg, "a reaso", 7), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_admits_with_defaults),
		cmocka_unit_test(test_type_first),
		cmocka_unit_test(test_params_in_order),
		cmocka_unit_test(test_background_cap),
		cmocka_unit_test(test_runtime_rule),
		cmocka_unit_test(test_rate_before_sessions),
		cmocka_unit_test(test_sessions_before_disk),
		cmocka_unit_test(test_gone_costs_only),
		cmocka_unit_test(test_message_bounded),
		cmocka_unit_test(test_app_only),
		cmocka_unit_test(test_query),
		cmocka_unit_test(test_method_events),
		cmocka_unit_test(test_free_space_per_turn),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

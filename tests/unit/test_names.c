/*
 * common/names.c: every enum value round-trips through its spellings,
 * every alias parses, unknown ones are refused, and the exit-code and
 * errno tables give what the daemon and the helpers rely on.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sysexits.h>

#include <cmocka.h>

#include "names.h"

static const uint32_t all_types[] = { PROF_HEAP_DUMP, PROF_HEAP_PROFILE, PROF_STACK_SAMPLING,
				      PROF_SYSTEM_TRACE };

static void test_type_round_trip(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(all_types) / sizeof(all_types[0]); i++) {
		uint32_t t = all_types[i];
		assert_true(names_type_valid(t));
		assert_int_equal(names_type_parse(names_type_str(t)), (int)t);
		assert_int_equal(names_type_parse(names_type_conf(t)), (int)t);
		assert_int_equal(names_type_parse(names_type_file(t)), (int)t);
		assert_non_null(names_type_ext(t));
		assert_non_null(names_type_format(t));
		/* The canonical names are what the list offers. */
		assert_non_null(strstr(names_type_list(), names_type_str(t)));
	}
}

/* Today's spellings, kept exactly: profctl's, the config's, the file names'. */
static void test_type_spellings(void **state)
{
	(void)state;
	assert_string_equal(names_type_str(PROF_HEAP_DUMP), "heap-dump");
	assert_string_equal(names_type_str(PROF_HEAP_PROFILE), "heap-profile");
	assert_string_equal(names_type_str(PROF_STACK_SAMPLING), "stack");
	assert_string_equal(names_type_str(PROF_SYSTEM_TRACE), "trace");
	assert_string_equal(names_type_conf(PROF_HEAP_DUMP), "heapdump");
	assert_string_equal(names_type_conf(PROF_HEAP_PROFILE), "heap");
	assert_string_equal(names_type_conf(PROF_STACK_SAMPLING), "stack");
	assert_string_equal(names_type_conf(PROF_SYSTEM_TRACE), "trace");
	assert_string_equal(names_type_file(PROF_HEAP_DUMP), "heapdump");
	assert_string_equal(names_type_file(PROF_HEAP_PROFILE), "heapprofile");
	assert_string_equal(names_type_file(PROF_STACK_SAMPLING), "stack");
	assert_string_equal(names_type_file(PROF_SYSTEM_TRACE), "trace");
	assert_string_equal(names_type_ext(PROF_HEAP_DUMP), "hprof");
	assert_string_equal(names_type_ext(PROF_HEAP_PROFILE), "pb.gz");
	assert_string_equal(names_type_ext(PROF_STACK_SAMPLING), "pb.gz");
	assert_string_equal(names_type_ext(PROF_SYSTEM_TRACE), "perfetto-trace");
	assert_string_equal(names_type_format(PROF_HEAP_DUMP), "hprof");
	assert_string_equal(names_type_format(PROF_HEAP_PROFILE), "pprof");
	assert_string_equal(names_type_format(PROF_STACK_SAMPLING), "pprof");
	assert_string_equal(names_type_format(PROF_SYSTEM_TRACE), "perfetto");
}

static void test_type_aliases(void **state)
{
	(void)state;
	static const struct {
		const char *s;
		int type;
	} ok[] = {
		{ "heap-dump", PROF_HEAP_DUMP },       { "heapdump", PROF_HEAP_DUMP },
		{ "heap_dump", PROF_HEAP_DUMP },       { "HEAP_DUMP", PROF_HEAP_DUMP },
		{ "PROF_HEAP_DUMP", PROF_HEAP_DUMP },  { "Heap-Dump", PROF_HEAP_DUMP },
		{ "heap-profile", PROF_HEAP_PROFILE }, { "heap", PROF_HEAP_PROFILE },
		{ "heapprofile", PROF_HEAP_PROFILE },  { "heap_profile", PROF_HEAP_PROFILE },
		{ "HEAP_PROFILE", PROF_HEAP_PROFILE }, { "PROF_HEAP_PROFILE", PROF_HEAP_PROFILE },
		{ "stack", PROF_STACK_SAMPLING },      { "stack-sampling", PROF_STACK_SAMPLING },
		{ "stack_sampling", PROF_STACK_SAMPLING },
		{ "STACK_SAMPLING", PROF_STACK_SAMPLING },
		{ "PROF_STACK_SAMPLING", PROF_STACK_SAMPLING },
		{ "trace", PROF_SYSTEM_TRACE },        { "system-trace", PROF_SYSTEM_TRACE },
		{ "SYSTEM_TRACE", PROF_SYSTEM_TRACE }, { "PROF_SYSTEM_TRACE", PROF_SYSTEM_TRACE },
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		if (names_type_parse(ok[i].s) != ok[i].type)
			fail_msg("'%s' parsed to %d, want %d", ok[i].s, names_type_parse(ok[i].s),
				 ok[i].type);
	}
}

static void test_type_unknown(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"", "heap-", "heapx", "stacks", "prof-", "PROF_", "trace_ring", "perfetto",
		"pprof", "hprof", "heap dump", "PROF_TRIGGER_OOM", "1", "cpu",
		"heap-profile-heap-profile-heap-profile-heap-profile",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (names_type_parse(bad[i]) != -EINVAL)
			fail_msg("'%s' was accepted as type %d", bad[i], names_type_parse(bad[i]));
	assert_int_equal(names_type_parse(NULL), -EINVAL);
	for (uint32_t t = 0; t < 64; t++) {
		if (t >= PROF_HEAP_DUMP && t <= PROF_SYSTEM_TRACE)
			continue;
		assert_false(names_type_valid(t));
		assert_string_equal(names_type_str(t), "?");
		assert_null(names_type_conf(t));
		assert_null(names_type_file(t));
		assert_null(names_type_ext(t));
		assert_null(names_type_format(t));
		assert_int_equal(names_cap_bit(t), 0);
	}
	assert_string_equal(names_type_str(UINT32_MAX), "?");
}

/* Heap formats (issue #20): the (type, format) rows. */
static void test_formats(void **state)
{
	(void)state;
	for (uint32_t t = PROF_HEAP_DUMP; t <= PROF_SYSTEM_TRACE; t++) {
		assert_true(names_format_valid(t, PROF_FORMAT_DEFAULT));
		assert_string_equal(names_format_str(t, 0), names_type_format(t));
		assert_string_equal(names_format_redact(t, 0), names_type_format(t));
		assert_string_equal(names_format_ext(t, 0), names_type_ext(t));
	}
	assert_string_equal(names_format_redact(PROF_HEAP_DUMP, PROF_FORMAT_PERFETTO), "heapgraph");
	assert_string_equal(names_format_redact(PROF_HEAP_PROFILE, PROF_FORMAT_PERFETTO),
			    "heapprofile");
	assert_string_equal(names_format_redact(PROF_SYSTEM_TRACE, PROF_FORMAT_PERFETTO),
			    "perfetto");
	assert_string_equal(names_format_str(PROF_HEAP_DUMP, PROF_FORMAT_PERFETTO), "perfetto");
	assert_string_equal(names_format_ext(PROF_HEAP_PROFILE, PROF_FORMAT_PERFETTO),
			    "perfetto-trace");
	/* Refused: stacks in Perfetto, unknown formats and types. */
	assert_false(names_format_valid(PROF_STACK_SAMPLING, PROF_FORMAT_PERFETTO));
	/* Method events' row is not an index of the dense table (0x100). */
	assert_true(names_format_valid(PROF_METHOD_EVENTS, PROF_FORMAT_DEFAULT));
	assert_string_equal(names_format_redact(PROF_METHOD_EVENTS, 0), "pprof");
	assert_string_equal(names_format_ext(PROF_METHOD_EVENTS, 0), "pb.gz");
	assert_string_equal(names_format_str(PROF_METHOD_EVENTS, 0), "pprof");
	assert_false(names_format_valid(PROF_HEAP_DUMP, 2));
	assert_false(names_format_valid(0, PROF_FORMAT_DEFAULT));
	assert_null(names_format_str(PROF_STACK_SAMPLING, PROF_FORMAT_PERFETTO));
	assert_null(names_format_redact(PROF_HEAP_DUMP, 7));
	assert_null(names_format_ext(9, 0));
	assert_int_equal(names_format_parse("perfetto"), PROF_FORMAT_PERFETTO);
	assert_int_equal(names_format_parse("PERFETTO"), PROF_FORMAT_PERFETTO);
	assert_int_equal(names_format_parse("hprof"), PROF_FORMAT_DEFAULT);
	assert_int_equal(names_format_parse("pprof"), PROF_FORMAT_DEFAULT);
	assert_int_equal(names_format_parse("default"), PROF_FORMAT_DEFAULT);
	assert_int_equal(names_format_parse("json"), -EINVAL);
	assert_int_equal(names_format_parse(NULL), -EINVAL);
}

static void test_trigger_round_trip(void **state)
{
	(void)state;
	static const char *const want[] = {
		[PROF_TRIGGER_COLD_START] = "cold-start",
		[PROF_TRIGGER_APP_FULLY_DRAWN] = "fully-drawn",
		[PROF_TRIGGER_OOM] = "oom",
		[PROF_TRIGGER_EXCESSIVE_CPU] = "excessive-cpu",
		[PROF_TRIGGER_HANG] = "hang",
		[PROF_TRIGGER_CRASH] = "crash",
		[PROF_TRIGGER_ANOMALY] = "anomaly",
		[PROF_TRIGGER_PRESSURE_STALL] = "pressure-stall",
	};
	for (uint32_t t = PROF_TRIGGER_COLD_START; t <= PROF_TRIGGER_PRESSURE_STALL; t++) {
		assert_true(names_trigger_valid(t));
		assert_string_equal(names_trigger_str(t), want[t]);
		assert_int_equal(names_trigger_parse(names_trigger_str(t)), (int)t);
		assert_non_null(strstr(names_trigger_list(), want[t]));
	}
	assert_string_equal(names_trigger_str(PROF_TRIGGER_NONE), "none");
	assert_false(names_trigger_valid(PROF_TRIGGER_NONE));
	assert_false(names_trigger_valid(PROF_TRIGGER_PRESSURE_STALL + 1));
	assert_string_equal(names_trigger_str(PROF_TRIGGER_PRESSURE_STALL + 1), "?");
	assert_string_equal(names_trigger_str(UINT32_MAX), "?");
}

static void test_trigger_aliases(void **state)
{
	(void)state;
	static const struct {
		const char *s;
		int t;
	} ok[] = {
		{ "COLD_START", PROF_TRIGGER_COLD_START },
		{ "PROF_TRIGGER_COLD_START", PROF_TRIGGER_COLD_START },
		{ "app-fully-drawn", PROF_TRIGGER_APP_FULLY_DRAWN },
		{ "APP_FULLY_DRAWN", PROF_TRIGGER_APP_FULLY_DRAWN },
		{ "PROF_TRIGGER_APP_FULLY_DRAWN", PROF_TRIGGER_APP_FULLY_DRAWN },
		{ "fully_drawn", PROF_TRIGGER_APP_FULLY_DRAWN },
		{ "OOM", PROF_TRIGGER_OOM },
		{ "excessive_cpu", PROF_TRIGGER_EXCESSIVE_CPU },
		{ "PROF_TRIGGER_EXCESSIVE_CPU", PROF_TRIGGER_EXCESSIVE_CPU },
		{ "HANG", PROF_TRIGGER_HANG },
		{ "PROF_TRIGGER_CRASH", PROF_TRIGGER_CRASH },
		{ "Anomaly", PROF_TRIGGER_ANOMALY },
		{ "PRESSURE_STALL", PROF_TRIGGER_PRESSURE_STALL },
		{ "PROF_TRIGGER_PRESSURE_STALL", PROF_TRIGGER_PRESSURE_STALL },
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (names_trigger_parse(ok[i].s) != ok[i].t)
			fail_msg("'%s' parsed to %d, want %d", ok[i].s, names_trigger_parse(ok[i].s),
				 ok[i].t);
}

static void test_trigger_unknown(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"", "none", "NONE", "PROF_TRIGGER_NONE", "sometimes", "cold", "cold-start-",
		"oomx", "PROF_TRIGGER_", "stack", "drawn",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (names_trigger_parse(bad[i]) != -EINVAL)
			fail_msg("'%s' was accepted as trigger %d", bad[i], names_trigger_parse(bad[i]));
	assert_int_equal(names_trigger_parse(NULL), -EINVAL);
}

static void test_capabilities(void **state)
{
	(void)state;
	/* The bits the daemon kept before the names module, unchanged. */
	assert_int_equal(NAMES_CAP_HEAP_DUMP, 1u << 0);
	assert_int_equal(NAMES_CAP_HEAP_PROFILE, 1u << 1);
	assert_int_equal(NAMES_CAP_STACK_SAMPLING, 1u << 2);
	assert_int_equal(NAMES_CAP_TRACE_RING, 1u << 3);
	assert_int_equal(names_cap_bit(PROF_HEAP_DUMP), NAMES_CAP_HEAP_DUMP);
	assert_int_equal(names_cap_bit(PROF_HEAP_PROFILE), NAMES_CAP_HEAP_PROFILE);
	assert_int_equal(names_cap_bit(PROF_STACK_SAMPLING), NAMES_CAP_STACK_SAMPLING);
	assert_int_equal(names_cap_bit(PROF_SYSTEM_TRACE), NAMES_CAP_TRACE_RING);
	assert_string_equal(names_cap_str(NAMES_CAP_HEAP_DUMP), "heap_dump");
	assert_string_equal(names_cap_str(NAMES_CAP_HEAP_PROFILE), "heap_profile");
	assert_string_equal(names_cap_str(NAMES_CAP_STACK_SAMPLING), "stack_sampling");
	assert_string_equal(names_cap_str(NAMES_CAP_TRACE_RING), "trace_ring");
	uint32_t seen = 0;
	for (uint32_t b = 1; b & NAMES_CAP_ALL; b <<= 1) {
		assert_int_equal(names_cap_parse(names_cap_str(b)), b);
		seen |= b;
	}
	assert_int_equal(seen, NAMES_CAP_ALL);
	/* Wire names are exact: no folding, no aliases. */
	assert_int_equal(names_cap_parse("HEAP_DUMP"), 0);
	assert_int_equal(names_cap_parse("heap-dump"), 0);
	assert_int_equal(names_cap_parse("trace"), 0);
	assert_int_equal(names_cap_parse(""), 0);
	assert_int_equal(names_cap_parse(NULL), 0);
	assert_null(names_cap_str(0));
	assert_null(names_cap_str(NAMES_CAP_HEAP_DUMP | NAMES_CAP_TRACE_RING));
	assert_null(names_cap_str(1u << 5));
	/* Method events: 0x100, no index, the capability bit after the four. */
	assert_int_equal(names_cap_bit(PROF_METHOD_EVENTS), NAMES_CAP_METHOD_EVENTS);
	assert_int_equal(NAMES_CAP_METHOD_EVENTS & NAMES_CAP_ALL, 0);
	assert_string_equal(names_cap_str(NAMES_CAP_METHOD_EVENTS), "method_events");
	assert_int_equal(names_cap_parse("method_events"), NAMES_CAP_METHOD_EVENTS);
}

static void test_method_events(void **state)
{
	(void)state;
	assert_true(names_type_valid(PROF_METHOD_EVENTS));
	assert_false(names_type_valid(PROF_METHOD_EVENTS - 1));
	assert_false(names_type_valid(PROF_METHOD_EVENTS + 1));
	assert_string_equal(names_type_str(PROF_METHOD_EVENTS), "methods");
	assert_string_equal(names_type_file(PROF_METHOD_EVENTS), "methods");
	assert_string_equal(names_type_ext(PROF_METHOD_EVENTS), "pb.gz");
	assert_string_equal(names_type_format(PROF_METHOD_EVENTS), "pprof");
	assert_int_equal(names_type_parse("methods"), PROF_METHOD_EVENTS);
	assert_int_equal(names_type_parse("PROF_METHOD_EVENTS"), PROF_METHOD_EVENTS);
	assert_int_equal(names_type_parse("method-events"), PROF_METHOD_EVENTS);
	/* Not a trigger's or profctl's capture: they carry no targets. */
	assert_null(strstr(names_type_list(), "method"));
}

static void test_exit_codes(void **state)
{
	(void)state;
	/* The numbers the helpers and the docs have always used. */
	assert_int_equal(EX_DATAERR, 65);
	assert_int_equal(EX_NOINPUT, 66);
	assert_int_equal(EX_UNAVAILABLE, 69);
	assert_int_equal(EX_SOFTWARE, 70);
	assert_int_equal(EX_CANTCREAT, 73);

	assert_int_equal(names_exit_error(0, PROF_E_EXECUTING), PROF_E_NONE);
	assert_int_equal(names_exit_error(EX_CANTCREAT, PROF_E_EXECUTING), PROF_E_NO_DISK_SPACE);
	assert_int_equal(names_exit_error(EX_CANTCREAT, PROF_E_POST_PROCESSING),
			 PROF_E_NO_DISK_SPACE);
	assert_int_equal(names_exit_error(EX_UNAVAILABLE, PROF_E_EXECUTING),
			 PROF_E_RUNTIME_UNAVAILABLE);
	static const int other[] = { EX_DATAERR, EX_NOINPUT, EX_SOFTWARE, EX_OSERR, EX_OSFILE,
				     EX_IOERR, EX_NOPERM, 1, 255, 256, 257, -1 };
	for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
		assert_int_equal(names_exit_error(other[i], PROF_E_EXECUTING), PROF_E_EXECUTING);
		assert_int_equal(names_exit_error(other[i], PROF_E_POST_PROCESSING),
				 PROF_E_POST_PROCESSING);
	}
	/* Every code a helper or the spawner exits with has its own words. */
	static const int known[] = { 0, EX_DATAERR, EX_NOINPUT, EX_UNAVAILABLE, EX_SOFTWARE,
				     EX_OSERR, EX_OSFILE, EX_CANTCREAT, EX_IOERR, EX_NOPERM };
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		const char *w = names_exit_str(known[i]);
		assert_string_not_equal(w, names_exit_str(1));
		for (size_t j = 0; j < i; j++)
			assert_string_not_equal(w, names_exit_str(known[j]));
	}
	assert_string_equal(names_exit_str(1), "exit code outside the table");

	assert_int_equal(names_errno_exit(-EBADMSG), EX_DATAERR);
	assert_int_equal(names_errno_exit(-ENODATA), EX_DATAERR);
	assert_int_equal(names_errno_exit(-E2BIG), EX_NOINPUT);
	assert_int_equal(names_errno_exit(-ENOSPC), EX_CANTCREAT);
	assert_int_equal(names_errno_exit(EDQUOT), EX_CANTCREAT);
	assert_int_equal(names_errno_exit(-EIO), EX_SOFTWARE);
	assert_int_equal(names_errno_exit(0), EX_SOFTWARE);
	/* A helper's full disk reaches the app as NO_DISK_SPACE. */
	assert_int_equal(names_exit_error(names_errno_exit(-ENOSPC), PROF_E_EXECUTING),
			 PROF_E_NO_DISK_SPACE);
}

static void test_errno_mapping(void **state)
{
	(void)state;
	static const struct {
		int err, want;
	} rows[] = {
		{ -ENOSPC, PROF_E_NO_DISK_SPACE }, { ENOSPC, PROF_E_NO_DISK_SPACE },
		{ -EDQUOT, PROF_E_NO_DISK_SPACE }, { EDQUOT, PROF_E_NO_DISK_SPACE },
		{ -EIO, PROF_E_UNKNOWN },          { -EFBIG, PROF_E_UNKNOWN },
		{ -EPERM, PROF_E_UNKNOWN },        { -ENOMEM, PROF_E_UNKNOWN },
		{ 0, PROF_E_UNKNOWN },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		assert_int_equal(names_errno_error(rows[i].err, PROF_E_UNKNOWN), rows[i].want);
		int other = rows[i].want == PROF_E_UNKNOWN ? PROF_E_EXECUTING : rows[i].want;
		assert_int_equal(names_errno_error(rows[i].err, PROF_E_EXECUTING), other);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_type_round_trip),
		cmocka_unit_test(test_type_spellings),
		cmocka_unit_test(test_type_aliases),
		cmocka_unit_test(test_type_unknown),
		cmocka_unit_test(test_formats),
		cmocka_unit_test(test_trigger_round_trip),
		cmocka_unit_test(test_trigger_aliases),
		cmocka_unit_test(test_trigger_unknown),
		cmocka_unit_test(test_capabilities),
		cmocka_unit_test(test_method_events),
		cmocka_unit_test(test_exit_codes),
		cmocka_unit_test(test_errno_mapping),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* client/abi.c: the size rule of docs/ABI.md and the first header's
 * layouts, field by field, with the real structs. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "abi.h"

static void test_size_rule(void **state)
{
	struct prof_params out;
	(void)state;

	/* No macro: refused. */
	struct prof_params none = { .duration_ms = 500 };
	assert_int_equal(pabi_params(&out, &none), -PROF_E_INVALID_REQUEST);
	assert_int_equal(pabi_params(&out, NULL), -PROF_E_INVALID_REQUEST);

	/* Equal: read as is. */
	struct prof_params p = PROF_PARAMS_INIT(.duration_ms = 500, .clock = 1,
						.buffer_fill_policy = PROF_FILL_DISCARD);
	assert_int_equal(pabi_params(&out, &p), 0);
	assert_int_equal(out.duration_ms, 500);
	assert_int_equal(out.clock, 1);
	assert_int_equal(out.buffer_fill_policy, PROF_FILL_DISCARD);
	assert_int_equal(out.size, sizeof(out));

	/* Shorter (an older header): fields past size are the default. */
	p.size = offsetof(struct prof_params, clock);
	assert_int_equal(pabi_params(&out, &p), 0);
	assert_int_equal(out.duration_ms, 500);
	assert_int_equal(out.clock, 0);
	assert_int_equal(out.buffer_fill_policy, 0);
	p.size = sizeof(uint32_t); /* only the size itself: all defaults */
	assert_int_equal(pabi_params(&out, &p), 0);
	assert_int_equal(out.duration_ms, 0);

	/* Longer (a newer header): a zero tail is taken, a set one refused. */
	struct {
		struct prof_params p;
		uint32_t later[3];
	} n;
	memset(&n, 0, sizeof(n));
	n.p.size = sizeof(n);
	n.p.frequency_hz = 99;
	assert_int_equal(pabi_params(&out, &n.p), 0);
	assert_int_equal(out.frequency_hz, 99);
	n.later[2] = 1;
	assert_int_equal(pabi_params(&out, &n.p), -PROF_E_INVALID_REQUEST);

	/* Past the cap: refused before reading the tail. */
	n.p.size = PABI_MAX_SIZE + 1;
	assert_int_equal(pabi_params(&out, &n.p), -PROF_E_INVALID_REQUEST);
}

static void test_trigger_size(void **state)
{
	struct prof_trigger out;
	(void)state;

	struct prof_trigger none = { .type = PROF_TRIGGER_HANG };
	assert_int_equal(pabi_trigger(&out, &none), -PROF_E_INVALID_REQUEST);
	struct prof_params tp = PROF_PARAMS_INIT(.duration_ms = 700);
	struct prof_trigger t = PROF_TRIGGER_INIT(.type = PROF_TRIGGER_PRESSURE_STALL,
						  .params = &tp, .psi_window_ms = 2000);
	assert_int_equal(pabi_trigger(&out, &t), 0);
	assert_ptr_equal(out.params, &tp);
	assert_int_equal(out.psi_window_ms, 2000);
	t.size = offsetof(struct prof_trigger, psi_window_ms);
	assert_int_equal(pabi_trigger(&out, &t), 0);
	assert_int_equal(out.psi_window_ms, 0);
	assert_int_equal(out.type, PROF_TRIGGER_PRESSURE_STALL);
}

/* The old structs' offsets are those of tests/abi/v1/profiling.h (24, 32,
 * 48, 76 and 80 there too, x86_64 and aarch64 LP64): every
 * field set to a distinct value arrives in the field of the same name. */
static void test_v1_layouts(void **state)
{
	struct prof_params out;
	struct prof_trigger tout;
	(void)state;

	assert_int_equal(sizeof(struct pabi_params_v1), 24);
	assert_int_equal(offsetof(struct pabi_trigger_v1, rate_limit_period_s), 32);
	assert_int_equal(offsetof(struct pabi_trigger_v1, memory_bytes), 48);
	assert_int_equal(offsetof(struct pabi_trigger_v1, psi_window_ms), 76);
	assert_int_equal(sizeof(struct pabi_trigger_v1), 80);

	struct pabi_params_v1 v = { 1, 2, 3, 4, 5, 6 };
	pabi_params_v1(&out, &v);
	assert_int_equal(out.size, sizeof(out));
	assert_int_equal(out.duration_ms, 1);
	assert_int_equal(out.frequency_hz, 2);
	assert_int_equal(out.sampling_interval_bytes, 3);
	assert_int_equal(out.buffer_kb, 4);
	assert_int_equal(out.target_pid, 5);
	assert_int_equal(out.clock, 6);
	assert_int_equal(out.buffer_fill_policy, 0);
	assert_int_equal(out.track_java_allocations, 0);

	struct pabi_trigger_v1 t = {
		.type = PROF_TRIGGER_HANG, .capture = PROF_STACK_SAMPLING,
		.params = { .duration_ms = 11, .clock = 12 },
		.rate_limit_period_s = 13, .cpu_percent = 14, .cpu_window_ms = 15,
		.memory_bytes = 1ull << 40, .memory_percent = 16, .hang_timeout_ms = 17,
		.timeout_ms = 18, .psi_resource = PROF_PSI_IO, .psi_stall_us = 19,
		.psi_window_ms = 20,
	};
	pabi_trigger_v1(&tout, &out, &t);
	assert_ptr_equal(tout.params, &out);
	assert_int_equal(out.duration_ms, 11);
	assert_int_equal(out.clock, 12);
	assert_int_equal(tout.type, PROF_TRIGGER_HANG);
	assert_int_equal(tout.capture, PROF_STACK_SAMPLING);
	assert_int_equal(tout.rate_limit_period_s, 13);
	assert_int_equal(tout.cpu_percent, 14);
	assert_int_equal(tout.cpu_window_ms, 15);
	assert_true(tout.memory_bytes == 1ull << 40);
	assert_int_equal(tout.memory_percent, 16);
	assert_int_equal(tout.hang_timeout_ms, 17);
	assert_int_equal(tout.timeout_ms, 18);
	assert_int_equal(tout.psi_resource, PROF_PSI_IO);
	assert_int_equal(tout.psi_stall_us, 19);
	assert_int_equal(tout.psi_window_ms, 20);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_size_rule),
		cmocka_unit_test(test_trigger_size),
		cmocka_unit_test(test_v1_layouts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

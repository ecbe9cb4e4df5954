/*
 * The trigger state machine: svc_trigger.c and svc_trigreg.c linked with
 * stubs of their neighbours (stubs/trigger_stubs.c). The test plays the
 * watchers (the trg_ops svc_trigger registered) and svc_session (the end
 * observer it subscribed): a fire starts a capture and makes the trigger
 * active, fires while active are coalesced, the session's end clears it,
 * refusals are counted, a hang's stack capture is followed by a trace.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <event2/event.h>
#include <string.h>
#include <unistd.h>

#include "profiling/profiling.h"
#include "stubs/trigger_stubs.h"
#include "svc_config.h"
#include "svc_trigger.h"
#include "util.h"

static struct event_base *base;
static struct svc_config cfg;
static struct svc_conn app;

static int setup(void **state)
{
	stub_reset();
	memset(&cfg, 0, sizeof(cfg));
	cfg.max_pids_per_uid = 16;
	cfg.max_runtimes = 4;
	cfg.runtime_wait_ms = 1234;
	base = event_base_new();
	if (!base || svc_trigger_init(base, &cfg) < 0)
		return -1;
	/* The app: this process, a connected client. */
	memset(&app, 0, sizeof(app));
	app.pid = getpid();
	app.uid = 1000;
	app.gid = 1000;
	util_strlcpy(app.app, "uid:1000", sizeof(app.app));
	app.ident.pid = app.pid;
	if (util_proc_start_time((int)app.pid, &app.ident.start) < 0)
		return -1;
	svc_trigger_client_up(&app);
	return 0;
}

static int teardown(void **state)
{
	svc_trigger_fini();
	event_base_free(base);
	return 0;
}

static int add(uint32_t type)
{
	Pd__Trigger t = PD__TRIGGER__INIT;
	char why[128];
	t.type = type;
	return svc_trigger_add(&app, &t, why, sizeof(why));
}

struct find {
	uint32_t type;
	struct svc_trigger_info info;
	int n;
};

static void find_one(const struct svc_trigger_info *t, void *ud)
{
	struct find *f = ud;
	if (t->type == f->type) {
		f->info = *t;
		f->n++;
	}
}

static struct svc_trigger_info info(uint32_t type)
{
	struct find f = { .type = type };
	svc_trigger_foreach(find_one, &f);
	assert_int_equal(f.n, 1);
	return f.info;
}

static void end(uint64_t id, uint32_t trigger, uint32_t type)
{
	struct svc_session_end e = { .id = id, .app = app.app, .pid = app.pid, .type = type,
				     .trigger = trigger };
	assert_non_null(stub_end_fn);
	stub_end_fn(&e, stub_end_ud);
}

static void test_fire_coalesce_end(void **state)
{
	assert_int_equal(add(PROF_TRIGGER_EXCESSIVE_CPU), 0);
	/* The client's process is tracked, so the CPU watcher watches it. */
	assert_int_equal(stub_cpu_watched, app.pid);

	stub_ops->cpu(app.pid, 95);
	assert_int_equal(stub_requests, 1);
	assert_int_equal(stub_last.pid, app.pid);
	assert_int_equal(stub_last.uid, 1000);
	assert_int_equal(stub_last.type, PROF_STACK_SAMPLING);
	assert_int_equal(stub_last.trigger, PROF_TRIGGER_EXCESSIVE_CPU);
	assert_int_equal(stub_last.wait_ms, 1234);
	assert_string_equal(stub_last.tag, "excessive-cpu");
	assert_int_equal(stub_cooldown_records, 1);
	struct svc_trigger_info ti = info(PROF_TRIGGER_EXCESSIVE_CPU);
	assert_int_equal(ti.fired, 1);
	assert_int_equal(ti.active, 500);

	/* Active: another fire is counted, not stacked. */
	stub_ops->cpu(app.pid, 99);
	assert_int_equal(stub_requests, 1);
	ti = info(PROF_TRIGGER_EXCESSIVE_CPU);
	assert_int_equal(ti.coalesced, 1);
	assert_int_equal(ti.fired, 1);

	/* Another session's end, or one without a trigger: still active. */
	end(499, PROF_TRIGGER_EXCESSIVE_CPU, PROF_STACK_SAMPLING);
	end(500, PROF_TRIGGER_NONE, PROF_STACK_SAMPLING);
	assert_int_equal(info(PROF_TRIGGER_EXCESSIVE_CPU).active, 500);
	/* Its own session's end: idle, and the next fire captures again. */
	end(500, PROF_TRIGGER_EXCESSIVE_CPU, PROF_STACK_SAMPLING);
	assert_int_equal(info(PROF_TRIGGER_EXCESSIVE_CPU).active, 0);
	stub_ops->cpu(app.pid, 95);
	assert_int_equal(stub_requests, 2);
	ti = info(PROF_TRIGGER_EXCESSIVE_CPU);
	assert_int_equal(ti.fired, 2);
	assert_int_equal(ti.active, 501);

	/* A process the app does not have fires nothing. */
	stub_ops->cpu(app.pid + 1, 95);
	assert_int_equal(stub_requests, 2);
}

static void test_refusals(void **state)
{
	assert_int_equal(add(PROF_TRIGGER_EXCESSIVE_CPU), 0);
	/* The cooldown first: no capture is asked for. */
	stub_cooldown_ret = PROF_E_TRIGGER_COOLDOWN;
	stub_ops->cpu(app.pid, 95);
	assert_int_equal(stub_requests, 0);
	assert_int_equal(info(PROF_TRIGGER_EXCESSIVE_CPU).refused, 1);
	/* Then admission: refused, not active, no cooldown recorded. */
	stub_cooldown_ret = 0;
	stub_request_ret = PROF_E_PROFILING_IN_PROGRESS;
	stub_ops->cpu(app.pid, 95);
	assert_int_equal(stub_requests, 1);
	struct svc_trigger_info ti = info(PROF_TRIGGER_EXCESSIVE_CPU);
	assert_int_equal(ti.refused, 2);
	assert_int_equal(ti.active, 0);
	assert_int_equal(ti.fired, 0);
	assert_int_equal(stub_cooldown_records, 0);
}

/* A hang: wall-clock stacks, then, once that session ended, a trace. */
static void test_hang_followup(void **state)
{
	assert_int_equal(add(PROF_TRIGGER_HANG), 0);
	stub_ops->hang(app.pid);
	assert_int_equal(stub_requests, 1);
	assert_int_equal(stub_last.type, PROF_STACK_SAMPLING);
	assert_true(stub_last.params.has_clock);
	assert_int_equal(stub_last.params.clock, 1);
	uint64_t id = info(PROF_TRIGGER_HANG).active;
	assert_int_not_equal(id, 0);

	end(id, PROF_TRIGGER_HANG, PROF_STACK_SAMPLING);
	/* Not from inside the end: the session is still in the table then. */
	assert_int_equal(stub_requests, 1);
	event_base_loop(base, EVLOOP_NONBLOCK);
	assert_int_equal(stub_requests, 2);
	assert_int_equal(stub_last.type, PROF_SYSTEM_TRACE);
	assert_int_equal(stub_last.trigger, PROF_TRIGGER_HANG);
	assert_string_equal(stub_last.tag, "hang-trace");
	assert_int_equal(stub_last.params.duration_ms, SVC_DURATION_MIN_MS);

	/* The trace's own end is not followed by anything. */
	end(id + 1, PROF_TRIGGER_HANG, PROF_SYSTEM_TRACE);
	event_base_loop(base, EVLOOP_NONBLOCK);
	assert_int_equal(stub_requests, 2);
}

static void test_signals(void **state)
{
	Pd__AppSignal sg = PD__APP_SIGNAL__INIT;
	assert_int_equal(add(PROF_TRIGGER_APP_FULLY_DRAWN), 0);
	/* Fully drawn: a cold start's capture ends, the trigger fires. */
	sg.kind = 1;
	svc_trigger_signal(&app, &sg);
	assert_int_equal(stub_stops, 1);
	assert_int_equal(stub_requests, 1);
	assert_int_equal(stub_last.type, PROF_SYSTEM_TRACE);
	assert_string_equal(stub_last.tag, "fully-drawn");
	/* An anomaly without a registration fires nothing. */
	sg.kind = 2;
	svc_trigger_signal(&app, &sg);
	assert_int_equal(stub_requests, 1);
}

/* A runtime holding its thread for an OOM nobody captures is let go. */
static void test_oom_hold_released(void **state)
{
	Pd__RuntimeEvent ev = PD__RUNTIME_EVENT__INIT;
	ev.kind = 1;
	ev.has_hold = 1;
	ev.hold = 1;
	svc_trigger_runtime_event(&app, &ev);
	assert_int_equal(stub_event_done, PROF_E_INVALID_REQUEST);
	/* With a trigger, its capture holds the thread until it ends. */
	assert_int_equal(add(PROF_TRIGGER_OOM), 0);
	stub_event_done = -1;
	ev.has_tid = 1;
	ev.tid = 4321;
	svc_trigger_runtime_event(&app, &ev);
	assert_int_equal(stub_requests, 1);
	assert_int_equal(stub_last.type, PROF_HEAP_PROFILE);
	assert_string_equal(stub_last.tag, "oom-malloc");
	assert_int_equal(stub_event_done, -1);
	/* The failing thread goes to the capture it started (issue #20)... */
	assert_int_equal(stub_oom_tid, 4321);
	assert_true(stub_oom_session != 0);
	/* ... and not to one it did not: a second OOM while it runs. */
	stub_oom_tid = 0;
	svc_trigger_runtime_event(&app, &ev);
	assert_int_equal(stub_requests, 1);
	assert_int_equal(stub_oom_tid, 0);
}

static void test_remove_and_fini(void **state)
{
	assert_int_equal(add(PROF_TRIGGER_EXCESSIVE_CPU), 0);
	assert_int_equal(add(PROF_TRIGGER_HANG), 0);
	assert_int_equal(svc_trigger_remove(&app, PROF_TRIGGER_EXCESSIVE_CPU), 0);
	assert_int_equal(stub_cpu_watched, 0);
	struct find f = { .type = PROF_TRIGGER_EXCESSIVE_CPU };
	svc_trigger_foreach(find_one, &f);
	assert_int_equal(f.n, 0);
	info(PROF_TRIGGER_HANG);
	/* The end subscription goes with the module. */
	assert_non_null(stub_end_fn);
	svc_trigger_fini();
	assert_null(stub_end_fn);
	assert_int_equal(svc_trigger_init(base, &cfg), 0); /* for teardown */
	assert_non_null(stub_end_fn);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_fire_coalesce_end, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hang_followup, setup, teardown),
		cmocka_unit_test_setup_teardown(test_signals, setup, teardown),
		cmocka_unit_test_setup_teardown(test_oom_hold_released, setup, teardown),
		cmocka_unit_test_setup_teardown(test_remove_and_fini, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * The session state machine: svc_session.c (table, lifecycle, end
 * observers) and svc_capture.c (WAIT_RUNTIME -> CAPTURING -> delivery, and
 * every way to fail), linked with stubs of their neighbours
 * (stubs/session_stubs.c): connections, helpers, the sink, the store, the
 * database and svc_deliver.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "names.h"
#include "profiling/profiling.h"
#include "stubs/session_stubs.h"
#include "svc_capture.h"
#include "svc_session.h"

static struct event_base *base;
static struct svc_config cfg;
static uint64_t next_id = 100;
static char last_phase[32];
static int phases;

struct ends {
	int n;
	struct svc_session_end last;
	char app[RL_APP_MAX];   /* e->app lives only during the call */
};

static void on_end(const struct svc_session_end *e, void *ud)
{
	struct ends *en = ud;
	en->n++;
	en->last = *e;
	snprintf(en->app, sizeof(en->app), "%s", e->app);
	en->last.app = en->app;
}

static void on_phase(const struct svc_session_info *si)
{
	snprintf(last_phase, sizeof(last_phase), "%s", si->phase);
	phases++;
}

static int setup(void **state)
{
	stub_reset();
	memset(&cfg, 0, sizeof(cfg));
	snprintf(cfg.state_dir, sizeof(cfg.state_dir), "/tmp/pd-session.XXXXXX");
	if (!mkdtemp(cfg.state_dir))
		return -1;
	cfg.deadline_grace_ms = 1000;
	cfg.runtime_wait_ms = 1000;
	cfg.max_result_bytes = 1 << 20;
	base = event_base_new();
	last_phase[0] = '\0';
	phases = 0;
	svc_session_set_observer(on_phase);
	return base && svc_session_init(base, &cfg) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[SVC_PATH_MAX + 16];
	svc_session_fini();
	svc_session_set_observer(NULL);
	event_base_free(base);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", cfg.state_dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* A session of pid (start time start) waiting for its runtime. */
static struct session *waiting(pid_t pid, uint64_t start, uint32_t type)
{
	struct session *s = svc_session_alloc(svc_capture_timer);
	assert_non_null(s);
	s->id = next_id++;
	s->pid = pid;
	s->uid = 1000;
	s->ident.pid = pid;
	s->ident.start = start;
	s->type = type;
	s->duration_ms = 1000;
	s->hz = 99;
	snprintf(s->app, sizeof(s->app), "uid:1000");
	s->state = S_WAIT_RUNTIME;
	svc_session_add(s);
	return s;
}

static struct svc_conn runtime(pid_t pid, uint64_t start, uint32_t caps)
{
	struct svc_conn c = { .id = 9, .pid = pid, .caps = caps };
	c.ident.pid = pid;
	c.ident.start = start;
	return c;
}

/* Run what the event loop has due now (timers armed at 0 ms). */
static void turn(void)
{
	event_base_loop(base, EVLOOP_NONBLOCK);
}

static void test_table_and_end_observers(void **state)
{
	struct ends a = { 0 }, b = { 0 }, c = { 0 }, d = { 0 }, e = { 0 };
	assert_int_equal(svc_session_subscribe_end(on_end, &a), 0);
	assert_int_equal(svc_session_subscribe_end(on_end, &a), -EEXIST);
	assert_int_equal(svc_session_subscribe_end(on_end, &b), 0);
	assert_int_equal(svc_session_subscribe_end(on_end, &c), 0);
	assert_int_equal(svc_session_subscribe_end(on_end, &d), 0);
	/* The cap: SVC_SESSION_END_OBSERVERS. */
	assert_int_equal(svc_session_subscribe_end(on_end, &e), -ENOSPC);
	svc_session_unsubscribe_end(on_end, &c);
	svc_session_unsubscribe_end(on_end, &d);

	struct session *s1 = waiting(200, 1, PROF_STACK_SAMPLING);
	struct session *s2 = waiting(201, 1, PROF_SYSTEM_TRACE);
	s2->trigger = PROF_TRIGGER_HANG;
	assert_int_equal(svc_session_count(), 2);
	assert_ptr_equal(svc_session_find(s1->id), s1);
	assert_ptr_equal(svc_session_of_pid(201), s2);
	assert_null(svc_session_of_pid(202));

	uint64_t id2 = s2->id;
	svc_session_free(s2);
	assert_int_equal(svc_session_count(), 1);
	assert_null(svc_session_find(id2));
	assert_int_equal(a.n, 1);
	assert_int_equal(b.n, 1);
	assert_int_equal(c.n, 0);
	assert_int_equal(a.last.id, id2);
	assert_int_equal(a.last.pid, 201);
	assert_int_equal(a.last.trigger, PROF_TRIGGER_HANG);
	assert_int_equal(a.last.type, PROF_SYSTEM_TRACE);
	assert_string_equal(a.last.app, "uid:1000");

	/* Unsubscribed: no more ends; a subscription may take the slot again. */
	svc_session_unsubscribe_end(on_end, &b);
	assert_int_equal(svc_session_subscribe_end(on_end, &e), 0);
	svc_session_free(s1);
	assert_int_equal(a.n, 2);
	assert_int_equal(b.n, 1);
	assert_int_equal(e.n, 1);
	svc_session_unsubscribe_end(on_end, &a);
	svc_session_unsubscribe_end(on_end, &e);
}

/* WAIT_RUNTIME -> CAPTURING on the hello of the session's own process. */
static void test_hello_starts_capture(void **state)
{
	struct session *s = waiting(300, 5, PROF_STACK_SAMPLING);
	uint64_t id = s->id;
	char raw[SVC_PATH_MAX + 32];

	/* Another process that has the pid now: not this session's. */
	struct svc_conn other = runtime(300, 6, NAMES_CAP_STACK_SAMPLING);
	stub_runtime = &other;
	svc_capture_runtime_up(&other);
	assert_int_equal(s->state, S_WAIT_RUNTIME);
	assert_int_equal(stub_sent, 0);

	struct svc_conn rt = runtime(300, 5, NAMES_CAP_STACK_SAMPLING);
	stub_runtime = &rt;
	svc_capture_runtime_up(&rt);
	assert_int_equal(s->state, S_CAPTURING);
	assert_ptr_equal(s->rt, &rt);
	assert_int_equal(stub_sent_case, PD__DAEMON_TO_RUNTIME__MSG_CAPTURE);
	assert_int_equal(stub_sent_fds, 1); /* the pipe's write end */
	assert_string_equal(last_phase, "capturing");
	assert_int_equal(stub_fails, 0);
	/* The raw file is the daemon's own, 0600. */
	struct stat st;
	snprintf(raw, sizeof(raw), "%s/%llu.raw", cfg.state_dir, (unsigned long long)id);
	assert_int_equal(stat(raw, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);

	/* The end removes it. */
	svc_capture_runtime_down(&rt);
	assert_int_equal(stub_failed, PROF_E_EXECUTING);
	assert_string_equal(stub_fail_msg, "the runtime disconnected mid-capture");
	assert_null(svc_session_find(id));
	assert_int_not_equal(stat(raw, &st), 0);
}

static void test_runtime_without_capability(void **state)
{
	waiting(301, 5, PROF_SYSTEM_TRACE);
	struct svc_conn rt = runtime(301, 5, NAMES_CAP_STACK_SAMPLING);
	stub_runtime = &rt;
	svc_capture_runtime_up(&rt);
	assert_int_equal(stub_failed, PROF_E_INVALID_REQUEST);
	assert_non_null(strstr(stub_fail_msg, "cannot take a trace capture"));
	assert_int_equal(svc_session_count(), 0);
}

/* The target changed since admission: PERMISSION, nothing sent. */
static void test_recheck_fails(void **state)
{
	waiting(302, 5, PROF_STACK_SAMPLING);
	struct svc_conn rt = runtime(302, 5, NAMES_CAP_STACK_SAMPLING);
	stub_runtime = &rt;
	stub_ident_check = -EPERM;
	svc_capture_runtime_up(&rt);
	assert_int_equal(stub_failed, PROF_E_PERMISSION);
	assert_non_null(strstr(stub_fail_msg, "changed its ids"));
	assert_int_equal(stub_sent, 0);
}

static struct session *capturing(pid_t pid, struct svc_conn *rt)
{
	struct session *s = waiting(pid, 5, PROF_STACK_SAMPLING);
	*rt = runtime(pid, 5, NAMES_CAP_STACK_SAMPLING);
	stub_runtime = rt;
	svc_capture_runtime_up(rt);
	assert_int_equal(s->state, S_CAPTURING);
	return s;
}

static void test_capture_done(void **state)
{
	struct svc_conn rt, rt2;
	Pd__CaptureDone d = PD__CAPTURE_DONE__INIT;

	/* Late or foreign answers change nothing. */
	struct session *s = capturing(400, &rt);
	d.session_id = s->id + 1000;
	assert_int_equal(svc_capture_done(&rt, &d), 0);
	d.session_id = s->id;
	rt2 = rt;
	assert_int_equal(svc_capture_done(&rt2, &d), 0);
	assert_int_equal(s->state, S_CAPTURING);
	assert_int_equal(stub_fails, 0);

	/* All declared bytes drained: on to delivery. */
	d.has_bytes = 1;
	d.bytes = 10;
	d.samples = 3;
	stub_sink_expect = 1;
	stub_sink_bytes = 10;
	assert_int_equal(svc_capture_done(&rt, &d), 0);
	assert_int_equal(stub_delivered, 1);
	assert_true(s->capture_done);
	assert_null(s->rt);
	assert_int_equal(s->samples, 3);
	svc_session_free(s);

	/* Declared bytes not yet drained: wait (the deadline still runs). */
	s = capturing(401, &rt);
	d.session_id = s->id;
	stub_sink_expect = 0;
	assert_int_equal(svc_capture_done(&rt, &d), 0);
	assert_true(s->done_msg);
	assert_false(s->capture_done);
	assert_int_equal(stub_delivered, 1);
	svc_session_free(s);

	/* More written than declared. */
	s = capturing(402, &rt);
	d.session_id = s->id;
	stub_sink_expect = -EPROTO;
	stub_sink_bytes = 12;
	assert_int_equal(svc_capture_done(&rt, &d), 0);
	assert_int_equal(stub_failed, PROF_E_POST_PROCESSING);
	assert_string_equal(stub_fail_msg, "the runtime declared 10 bytes but wrote 12");

	/* A runtime's failure: its status when it is one of the API's
	 * errors a runtime may report, else EXECUTING. */
	s = capturing(403, &rt);
	d.session_id = s->id;
	d.status = PROF_E_RUNTIME_UNAVAILABLE;
	d.message = "no heap";
	assert_int_equal(svc_capture_done(&rt, &d), 0);
	assert_int_equal(stub_failed, PROF_E_RUNTIME_UNAVAILABLE);
	assert_string_equal(stub_fail_msg, "no heap");
	s = capturing(404, &rt);
	d.session_id = s->id;
	d.status = 999;
	assert_int_equal(svc_capture_done(&rt, &d), 0);
	assert_int_equal(stub_failed, PROF_E_EXECUTING);
	assert_int_equal(svc_session_count(), 0);
}

/* No runtime by the end of the wait. */
static void test_wait_ends(void **state)
{
	struct session *s = waiting(500, 5, PROF_SYSTEM_TRACE);
	svc_session_arm(s, 0);
	turn();
	assert_int_equal(stub_failed, PROF_E_RUNTIME_UNAVAILABLE);
	assert_non_null(strstr(stub_fail_msg, "no runtime agent connected for pid 500"));

	/* A stack capture is taken without an agent when profilingd-perf runs. */
	s = waiting(501, 5, PROF_STACK_SAMPLING);
	stub_fails = 0;
	stub_perf_start = 0;
	svc_session_arm(s, 0);
	turn();
	assert_int_equal(stub_fails, 0);
	assert_int_equal(s->state, S_CAPTURING);
	assert_string_equal(last_phase, "capturing");
	svc_session_free(s);

	/* ... and fails as unavailable when it cannot. */
	s = waiting(502, 5, PROF_STACK_SAMPLING);
	stub_perf_start = -ENOENT;
	svc_session_arm(s, 0);
	turn();
	assert_int_equal(stub_failed, PROF_E_RUNTIME_UNAVAILABLE);
}

/* CAPTURING past its deadline: TIMEOUT, and the runtime is told. */
static void test_deadline(void **state)
{
	struct svc_conn rt;
	struct session *s = capturing(600, &rt);
	stub_sent_case = 0;
	svc_capture_timer(s);
	assert_int_equal(stub_failed, PROF_E_TIMEOUT);
	assert_int_equal(stub_sent_case, PD__DAEMON_TO_RUNTIME__MSG_CANCEL);
	assert_non_null(strstr(stub_fail_msg, "missed its deadline of 2000 ms"));
}

/* CaptureStop only for the trigger's own running capture. */
static void test_stop(void **state)
{
	struct svc_conn rt;
	struct session *s = capturing(700, &rt);
	s->trigger = PROF_TRIGGER_COLD_START;
	assert_int_equal(svc_capture_stop(700, PROF_TRIGGER_HANG), -ENOENT);
	assert_int_equal(svc_capture_stop(701, PROF_TRIGGER_COLD_START), -ENOENT);
	assert_int_equal(svc_capture_stop(700, PROF_TRIGGER_COLD_START), 0);
	assert_int_equal(stub_sent_case, PD__DAEMON_TO_RUNTIME__MSG_STOP);
	assert_int_equal(s->state, S_CAPTURING);
	/* A session still waiting is not cancelled at its runtime. */
	struct session *w = waiting(702, 5, PROF_STACK_SAMPLING);
	stub_sent = 0;
	svc_capture_cancel(w);
	assert_int_equal(stub_sent, 0);
}

/* Stopping the daemon: what runs is abandoned, each end observed once. */
static void test_fini_abandons(void **state)
{
	struct ends a = { 0 };
	struct svc_conn rt;
	assert_int_equal(svc_session_subscribe_end(on_end, &a), 0);
	waiting(800, 5, PROF_STACK_SAMPLING);
	capturing(801, &rt);
	svc_session_fini();
	assert_int_equal(stub_abandoned, 2);
	assert_int_equal(a.n, 2);
	assert_int_equal(svc_session_count(), 0);
	svc_session_unsubscribe_end(on_end, &a);
	assert_int_equal(svc_session_init(base, &cfg), 0); /* for teardown */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_table_and_end_observers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hello_starts_capture, setup, teardown),
		cmocka_unit_test_setup_teardown(test_runtime_without_capability, setup, teardown),
		cmocka_unit_test_setup_teardown(test_recheck_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_capture_done, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wait_ends, setup, teardown),
		cmocka_unit_test_setup_teardown(test_deadline, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stop, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fini_abandons, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * trigger_app MODE: an app that registers a trigger and makes its
 * condition true for real. Prints the path of the trigger's result.
 *   anomaly-register / anomaly-fire   ANOMALY, across a daemon restart
 *   cooldown    two anomalies inside rate_limit_period_s: one capture
 *   cpu         a short burst (no fire), then spin_hot() at 100 %
 *   hang        heartbeats stop while the main thread sits in blocked_here()
 *   cold-register / cold-run   COLD_START on the next exec, ends at fully drawn
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <profiling/profiling.h>

#include "util.h"

static prof_client *c;
static atomic_int results;
static char path[4096], first_path[4096];
static int trig, err_code;
static atomic_int stop;
static volatile uint64_t sink;

/* The trigger whose results this run counts, -1 for every one; and, when
 * the capture must fire after this run connects, the time it connected
 * (CLOCK_REALTIME ns, as prof_result.start_ns), else 0. */
static int want_trigger = -1;
static uint64_t since_ns;

static void on_result(const struct prof_result *r, void *ud)
{
	/* Results are the app's (its uid's), not this process's: one that an
	 * earlier run left queued, such as "profilingd stopped during the
	 * capture" when a step stopped the daemon mid-capture, is redelivered
	 * on connect, and may be of the same trigger (a cpu trigger that fired
	 * again as its app exited). It is shown, and not taken for this run's. */
	if ((want_trigger >= 0 && (int)r->trigger != want_trigger) ||
	    (since_ns && r->start_ns < since_ns)) {
		fprintf(stderr, "trigger_app: not this run's: trigger=%d error=%d tag=%s %s\n",
			r->trigger, r->error, r->tag, r->error_message);
		return;
	}
	if (!atomic_load(&results))
		snprintf(first_path, sizeof(first_path), "%s", r->path);
	snprintf(path, sizeof(path), "%s", r->path);
	trig = r->trigger;
	err_code = r->error;
	fprintf(stderr, "trigger_app: result trigger=%d error=%d tag=%s %s %s (%.0f ms)\n",
		r->trigger, r->error, r->tag, r->path, r->error_message,
		(double)(r->end_ns - r->start_ns) / 1e6);
	atomic_fetch_add(&results, 1);
}

static void die(const char *what, int r)
{
	fprintf(stderr, "trigger_app: %s: %s\n", what, prof_strerror(r));
	exit(1);
}

static void connect_listen(int want, int fresh)
{
	int err;
	want_trigger = want;
	since_ns = fresh ? util_now_ns(CLOCK_REALTIME) : 0;
	c = prof_connect(NULL, &err);
	if (!c)
		die("connect", -PROF_E_UNKNOWN);
	prof_set_result_listener(c, on_result, NULL);
}

static void add(enum prof_trigger_type type, struct prof_trigger *t)
{
	t->type = type;
	int r = prof_add_trigger(c, t);
	if (r < 0)
		die("add trigger", r);
}

/* Dispatch until n results arrived or ms passed. */
static int wait_results(int n, int ms)
{
	uint64_t end = util_mono_ms() + (uint64_t)ms;
	while (atomic_load(&results) < n && util_mono_ms() < end)
		prof_dispatch(c, 100);
	return atomic_load(&results) >= n;
}

static int finish(enum prof_trigger_type want)
{
	if (trig != (int)want || err_code) {
		fprintf(stderr, "trigger_app: want trigger %d ok, got %d error %d\n", want, trig, err_code);
		return 1;
	}
	printf("%s\n", path);
	prof_close(c);
	return 0;
}

__attribute__((noinline)) static void spin_hot(int ms)
{
	uint64_t end = util_mono_ms() + (uint64_t)ms;
	uint64_t x = 1;
	while (util_mono_ms() < end && !atomic_load(&stop))
		for (int i = 0; i < 100000; i++)
			x = x * 6364136223846793005ull + 1;
	sink = x;
}

static void *spinner(void *arg)
{
	spin_hot((int)(long)arg);
	return NULL;
}

__attribute__((noinline)) static void blocked_here(int ms)
{
	/* A hung main thread: blocked, using no CPU. */
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0)
		;
}

static void *dispatcher(void *arg)
{
	wait_results(2, (int)(long)arg);
	return NULL;
}

int main(int argc, char **argv)
{
	struct prof_params tp = PROF_PARAMS_INIT();
	struct prof_trigger t = PROF_TRIGGER_INIT(.params = &tp);
	const char *m = argc > 1 ? argv[1] : "";

	if (!strcmp(m, "anomaly-register")) {
		connect_listen(-1, 0);
		add(PROF_TRIGGER_ANOMALY, &t);
		prof_close(c);
		return 0;
	}
	/* A busy app: the anomaly's stack sample has something to show. */
	pthread_t busy;
	if (!strcmp(m, "anomaly-fire") || !strcmp(m, "cooldown"))
		pthread_create(&busy, NULL, spinner, (void *)20000L);
	if (!strcmp(m, "anomaly-fire")) {
		connect_listen(PROF_TRIGGER_ANOMALY, 1);
		prof_report_anomaly("slow-frame");
		if (!wait_results(1, 10000))
			die("no anomaly result", -PROF_E_TIMEOUT);
		return finish(PROF_TRIGGER_ANOMALY);
	}
	if (!strcmp(m, "cooldown")) {
		connect_listen(PROF_TRIGGER_ANOMALY, 1);
		t.rate_limit_period_s = 3600;
		add(PROF_TRIGGER_ANOMALY, &t);
		prof_report_anomaly("first");
		if (!wait_results(1, 10000))
			die("no first result", -PROF_E_TIMEOUT);
		prof_report_anomaly("second");
		wait_results(2, 3000);
		if (atomic_load(&results) != 1) {
			fprintf(stderr, "trigger_app: %d results inside the cooldown\n", results);
			return 1;
		}
		return finish(PROF_TRIGGER_ANOMALY);
	}
	if (!strcmp(m, "cpu")) {
		connect_listen(PROF_TRIGGER_EXCESSIVE_CPU, 1);
		/* Well under one core, so a loaded test machine still crosses it. */
		t.cpu_percent = 30;
		t.cpu_window_ms = 1500;
		tp.duration_ms = 1000;
		add(PROF_TRIGGER_EXCESSIVE_CPU, &t);
		/* A burst shorter than the window must not fire. */
		spin_hot(700);
		if (wait_results(1, 2000)) {
			fprintf(stderr, "trigger_app: a 700 ms burst fired a 1500 ms window\n");
			return 1;
		}
		pthread_t th;
		pthread_create(&th, NULL, spinner, (void *)8000L);
		int ok = wait_results(1, 8000);
		atomic_store(&stop, 1);
		pthread_join(th, NULL);
		if (!ok)
			die("no excessive-cpu result", -PROF_E_TIMEOUT);
		return finish(PROF_TRIGGER_EXCESSIVE_CPU);
	}
	if (!strcmp(m, "hang")) {
		connect_listen(PROF_TRIGGER_HANG, 1);
		t.hang_timeout_ms = 800;
		tp.duration_ms = 1000;
		add(PROF_TRIGGER_HANG, &t);
		for (int i = 0; i < 5; i++) {
			prof_heartbeat();
			usleep(200000);
		}
		/* The main thread hangs; another thread takes the results: the
		 * stack samples, then the trace-ring snapshot. */
		prof_trace_begin("before-hang");
		pthread_t th;
		pthread_create(&th, NULL, dispatcher, (void *)8000L);
		blocked_here(4500);
		pthread_join(th, NULL);
		if (atomic_load(&results) < 2)
			die("no hang stack + trace results", -PROF_E_TIMEOUT);
		printf("%s\n", first_path);
		return finish(PROF_TRIGGER_HANG);
	}
	if (!strcmp(m, "cold-register")) {
		connect_listen(-1, 0);
		t.timeout_ms = 4000;
		add(PROF_TRIGGER_COLD_START, &t);
		prof_close(c);
		return 0;
	}
	if (!strcmp(m, "cold-run")) {
		/* Start-up work, then fully drawn: the capture ends here. */
		connect_listen(PROF_TRIGGER_COLD_START, 0);
		spin_hot(600);
		prof_report_fully_drawn();
		if (!wait_results(1, 8000))
			die("no cold-start result", -PROF_E_TIMEOUT);
		return finish(PROF_TRIGGER_COLD_START);
	}
	if (!strcmp(m, "pressure")) {
		/* CPU pressure made for real: more spinners than cores. */
		connect_listen(PROF_TRIGGER_PRESSURE_STALL, 1);
		t.psi_resource = PROF_PSI_CPU;
		t.psi_stall_us = 50000;
		t.psi_window_ms = 1000;
		tp.duration_ms = 500;
		add(PROF_TRIGGER_PRESSURE_STALL, &t);
		pthread_t th[6];
		for (int i = 0; i < 6; i++)
			pthread_create(&th[i], NULL, spinner, (void *)6000L);
		int ok = wait_results(1, 8000);
		atomic_store(&stop, 1);
		for (int i = 0; i < 6; i++)
			pthread_join(th[i], NULL);
		if (!ok)
			die("no pressure-stall result", -PROF_E_TIMEOUT);
		return finish(PROF_TRIGGER_PRESSURE_STALL);
	}
	if (!strcmp(m, "clear")) {
		connect_listen(-1, 0);
		int r = prof_clear_triggers(c);
		prof_close(c);
		return r < 0;
	}
	if (!strcmp(m, "crash")) {
		connect_listen(-1, 0);
		add(PROF_TRIGGER_CRASH, &t);
		prof_trace_begin("before-crash");
		prof_trace_instant("about-to-fault");
		usleep(300000); /* the daemon's crash fd reaches the agent */
		volatile int *null = NULL;
		*null = 1;
		return 3;
	}
	if (!strcmp(m, "crash-collect")) {
		connect_listen(PROF_TRIGGER_CRASH, 0);
		if (!wait_results(1, 5000))
			die("no crash result", -PROF_E_TIMEOUT);
		return finish(PROF_TRIGGER_CRASH);
	}
	fprintf(stderr, "usage: trigger_app anomaly-register|anomaly-fire|cooldown|cpu|hang|"
		"cold-register|cold-run\n");
	return 2;
}

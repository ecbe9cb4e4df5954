/*
 * Starting captures (a runtime's, agentless, a JVM's heap dump or agent
 * load, the kernel half of a system trace) and their completions
 * (svc_capture.h has the contract).
 *
 * The runtime writes the artifact into the write end of a pipe; the daemon
 * drains the read end (svc_sink, capped at max_result_bytes) into
 * <state>/raw/<id>.raw, a root-owned file no app ever holds an fd to, so
 * no app can read back what the daemon adds or grow the daemon's disk.
 *
 * A runtime is matched only when its own process is the session's (same
 * pid and start time), and helpers get the start time to re-check on
 * their side.
 */
#include "svc_conn.h"
#include "svc_helper.h"
#include "svc_store.h"
#include "svc_session_priv.h"
#include "svc_capture.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "jtarget.h"
#include "log.h"
#include "names.h"
#include "profiling/profiling.h"
#include "svc_sink.h"
#include "util.h"

static void start_capture(struct session *s, struct svc_conn *rt);
static bool start_agentless(struct session *s);
static void start_jvm_dump(struct session *s);
static bool start_agent_load(struct session *s);

void svc_capture_cancel(struct session *s)
{
	Pd__DaemonToRuntime out = PD__DAEMON_TO_RUNTIME__INIT;
	Pd__CaptureCancel cc = PD__CAPTURE_CANCEL__INIT;

	if (s->state != S_CAPTURING || !s->rt)
		return;
	cc.session_id = s->id;
	out.msg_case = PD__DAEMON_TO_RUNTIME__MSG_CANCEL;
	out.cancel = &cc;
	svc_conn_send(s->rt, &out.base, -1);
}

/*
 * Is the target still the process admitted, with the same ids? If not the
 * session fails (PROF_E_PERMISSION), the requester's connection is closed
 * when it was that process's, and -ESRCH or -EPERM comes back.
 */
static int recheck(struct session *s)
{
	char msg[160];
	if (s->ident.pid <= 0)
		return 0;
	int r = svc_ident_check(&s->ident);
	/* The heap formats name the process (issue #20): read it now, while
	 * it is still the process admitted (an OOM'd JVM exits after). */
	if (r == 0 && s->format == PROF_FORMAT_PERFETTO &&
	    (s->type == PROF_HEAP_DUMP || s->type == PROF_HEAP_PROFILE))
		svc_redact_proc_read(&s->proc, s->pid, s->ident.start);
	if (r == 0)
		return 0;
	util_fmt(msg, sizeof(msg), r == -EPERM
		 ? "pid %d changed its ids since the request (a setuid exec?): not capturable"
		 : "pid %d is gone or is another process now", (int)s->pid);
	uint64_t client_id = s->client_id;
	svc_deliver_fail(s, PROF_E_PERMISSION, msg);
	struct svc_conn *c = svc_conn_by_id(client_id);
	if (c)
		svc_conn_check(c);
	return r;
}

/* [jvm] heap_dump_via_agent, and pid's agent is connected and offers it. */
static bool dump_by_agent(const struct session *s)
{
	const struct svc_config *cfg = svc_session_config();
	struct svc_conn *rt = cfg->jvm_dump_via_agent ? svc_session_runtime_of(s) : NULL;
	return rt && (svc_conn_runtime_caps(rt) & NAMES_CAP_HEAP_DUMP);
}

/* The wait for a runtime is over, or the deadline has come. */
void svc_capture_timer(struct session *s)
{
	const struct svc_config *cfg = svc_session_config();
	char msg[192];

	if (s->state == S_WAIT_RUNTIME) {
		/* Native method events: uprobes by profilingd-perf, runtime or not.
		 * JVM ones (java: targets) are the JVMTI agent's, as below. */
		if (s->type == PROF_METHOD_EVENTS && !(s->nmethods && jt_is_java(s->methods[0]))) {
			if (!start_agentless(s)) {
				util_fmt(msg, sizeof(msg), "method events of pid %d cannot start: "
					 "profilingd-perf is not available", (int)s->pid);
				svc_deliver_fail(s, PROF_E_RUNTIME_UNAVAILABLE, msg);
			}
			return;
		}
		/* JVM method events need the JVMTI agent: a JVM's, loaded if need be. */
		if (s->type == PROF_METHOD_EVENTS && !s->jvm && !svc_session_runtime_of(s)) {
			util_fmt(msg, sizeof(msg), "java: method targets need a JVM: pid %d is not "
				 "one", (int)s->pid);
			svc_deliver_fail(s, PROF_E_INVALID_REQUEST, msg);
			return;
		}
		/* A JVM's heap dump is the VM's own, through the attach protocol
		 * (or its agent's, when configured and connected). */
		if (s->jvm && s->type == PROF_HEAP_DUMP && !dump_by_agent(s)) {
			start_jvm_dump(s);
			return;
		}
		struct svc_conn *rt = svc_session_runtime_of(s);
		if (rt) {
			start_capture(s, rt);
			return;
		}
		/* A JVM without our agent: load it, then wait for its hello. */
		if (s->jvm && !s->agent_tried && start_agent_load(s))
			return;
		if (s->ja)
			return; /* the load is still running; its end decides */
		/* No agent: stack samples the daemon can take itself. */
		if (s->type == PROF_STACK_SAMPLING && start_agentless(s))
			return;
		util_fmt(msg, sizeof(msg), "no runtime agent connected for pid %d within %u ms",
			 (int)s->pid, s->wait_ms);
		svc_deliver_fail(s, PROF_E_RUNTIME_UNAVAILABLE, msg);
		return;
	}
	if (s->done_msg)
		util_fmt(msg, sizeof(msg), "the runtime declared %llu bytes but wrote %llu by its "
			 "deadline of %u ms", (unsigned long long)s->declared,
			 (unsigned long long)svc_sink_bytes(s->sink),
			 s->duration_ms + cfg->deadline_grace_ms);
	else
		util_fmt(msg, sizeof(msg), "runtime missed its deadline of %u ms",
			 s->duration_ms + cfg->deadline_grace_ms);
	svc_capture_cancel(s);
	svc_deliver_fail(s, PROF_E_TIMEOUT, msg);
}

/* profilingd-ftrace finished: the kernel half of a system trace. */
static void ftrace_done(void *ud, int code, const char *msg)
{
	struct session *s = ud;
	s->ft = NULL;
	s->ft_running = false;
	if (code != 0) {
		LOG_W("session %llu: no kernel sched data in the trace: %s", (unsigned long long)s->id,
		      msg);
		if (s->ft_fd >= 0)
			close(s->ft_fd);
		s->ft_fd = -1;
	} else {
		/* Its figures, the background part's among them. */
		LOG_I("session %llu: kernel sched data: %s", (unsigned long long)s->id, msg);
		/* The ring holds what fits (docs/PERFETTO.md): say when that was
		 * less than asked, or that there was no ring at all. */
		const char *sh = strstr(msg, " bg_short_ms=");
		unsigned long long short_ms = sh ? strtoull(sh + 13, NULL, 10) : 0;
		if (short_ms)
			util_fmt(s->note, sizeof(s->note), "the background trace did not reach back "
				 "%u ms on every CPU: %llu ms at its start are missing (ring too "
				 "small for the load)", s->background_ms, short_ms);
		else if (strstr(msg, " background=absent"))
			util_fmt(s->note, sizeof(s->note), "the background trace was not running: "
				 "the trace starts at the capture");
	}
	if (s->capture_done)
		svc_deliver_start(s);
}

/* dur: the live part after the background part, ms (1..). */
static void start_ftrace(struct session *s, uint32_t dur)
{
	if (svc_session_files(s) < 0 ||
	    util_fmt(s->files->ft_path, sizeof(s->files->ft_path), "%s/%llu.ftrace",
		     svc_store_raw_dir(), (unsigned long long)s->id) < 0)
		return;
	s->ft_fd = open(s->files->ft_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (s->ft_fd < 0) {
		s->files->ft_path[0] = '\0';
		return;
	}
	/* Without the ring the trace starts at the capture; the app is told,
	 * rather than refused, so one request fits every device's config. */
	const struct svc_config *cfg = svc_session_config();
	if (s->background_ms && !cfg->trace_bg)
		util_fmt(s->note, sizeof(s->note), "the background trace is off ([trace] "
			 "background): the trace starts at the capture, not %u ms before it",
			 s->background_ms);
	/* From the admission (a trigger's fire, a request's arrival), not from
	 * now: the wait for the runtime must not eat into the time asked for. */
	uint64_t from = 0;
	bool lead = true;
	if (cfg->trace_bg && s->background_ms) {
		from = s->admitted_boot_ns > (uint64_t)s->background_ms * 1000000u
			? s->admitted_boot_ns - (uint64_t)s->background_ms * 1000000u : 1;
		/*
		 * Not before the target process began: until then its pid may
		 * have been another process's (pid_max is 32768 on small
		 * machines and wraps in seconds under a build), and the
		 * redactor keeps every event of the app's pid as the app's.
		 * start is in clock ticks after boot, CLOCK_BOOTTIME's origin.
		 */
		long hz = sysconf(_SC_CLK_TCK);
		uint64_t tick = hz > 0 ? 1000000000ull / (uint64_t)hz : 0;
		uint64_t began = tick ? s->ident.start * tick : 0;
		if (began > from) {
			/* start is rounded down to a tick: one more is after the
			 * fork; and no lead switch, which may predate it. */
			from = began + tick;
			lead = false;
			LOG_I("session %llu: the background part starts when pid %d began, %llu ms "
			      "before the admission", (unsigned long long)s->id, (int)s->pid,
			      (unsigned long long)(s->admitted_boot_ns > began
						   ? (s->admitted_boot_ns - began) / 1000000 : 0));
		}
	}
	int r = svc_ftrace_start(s->id, dur, s->buffer_kb,
				 s->fill_policy == PROF_FILL_DISCARD, from, lead, s->ft_fd, ftrace_done, s,
				 &s->ft);
	if (r < 0) {
		LOG_W("session %llu: no kernel sched data: %s", (unsigned long long)s->id,
		      r == -ENOENT ? "profilingd-ftrace is not installed" : strerror(-r));
		close(s->ft_fd);
		s->ft_fd = -1;
		return;
	}
	s->ft_running = true;
}

/*
 * Kernel context for a heap capture (issue #20): a heap dump or heap
 * profile in Perfetto format with background_ms gets the background ring's
 * sched data from background_ms before its admission, redacted by the
 * trace rules and appended to the heap packets in one file
 * (docs/PERFETTO.md, "Heap formats"). Only with the ring: without it
 * there is no past to add, and the app is told so.
 */
static bool heap_context(struct session *s)
{
	if (s->format != PROF_FORMAT_PERFETTO || !s->background_ms ||
	    (s->type != PROF_HEAP_DUMP && s->type != PROF_HEAP_PROFILE))
		return false;
	if (!svc_session_config()->trace_bg) {
		util_fmt(s->note, sizeof(s->note), "the background trace is off ([trace] "
			 "background): the heap capture has no kernel context");
		return false;
	}
	return true;
}

int svc_capture_open_raw(struct session *s)
{
	int r = svc_session_files(s);
	if (r < 0)
		return r;
	char *path = s->files->raw_path;
	if (util_fmt(path, sizeof(s->files->raw_path), "%s/%llu.raw", svc_store_raw_dir(),
		     (unsigned long long)s->id) < 0) {
		path[0] = '\0';
		return -ENAMETOOLONG;
	}
	s->raw_fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (s->raw_fd < 0) {
		int e = -errno;
		path[0] = '\0';
		return e;
	}
	return 0;
}

static void perf_done(void *ud, int code, const char *msg)
{
	struct session *s = ud;
	char m[300];
	s->perf = NULL;
	/* A process that changed its ids while it was sampled (a setuid exec)
	 * was not the requester's to sample all along: nothing is kept. */
	if (recheck(s) < 0)
		return;
	if (code != 0) {
		util_fmt(m, sizeof(m), "%s failed: %s", s->type == PROF_METHOD_EVENTS
			 ? "method events" : "agentless sampling", msg && *msg ? msg : "?");
		svc_deliver_fail(s, names_exit_error(code, PROF_E_EXECUTING), m);
		return;
	}
	LOG_I("session %llu: agentless samples: %s", (unsigned long long)s->id, msg);
	/* profilingd-perf saw our agent library in the target: say why it
	 * was sampled without it. */
	const char *lib = msg ? strstr(msg, " unregistered_agent=") : NULL;
	/* Method events over their overhead budget: the probes were removed. */
	const char *ob = msg ? strstr(msg, " over_budget=") : NULL;
	unsigned long long ob_ns = 0, ob_budget = 0;
	if (ob && sscanf(ob, " over_budget=%llu/%llu", &ob_ns, &ob_budget) == 2) {
		util_fmt(s->note, sizeof(s->note), "method events disabled over budget: %llu ns "
			 "per recorded hit on average, the budget is %llu us (the request's "
			 "method_budget_us, else [capture]'s); the probes were removed", ob_ns, ob_budget / 1000);
		LOG_N("session %llu: %s", (unsigned long long)s->id, s->note);
	}
	if (lib)
		util_fmt(s->note, sizeof(s->note), "sampled agentless: %s is loaded in pid %d but "
			 "its agent did not register (check PROFILINGD_SOCKET; PROFILING_DEBUG=1 "
			 "says why)", lib + strlen(" unregistered_agent="), (int)s->pid);
	s->capture_done = true;
	evtimer_del(s->timer);
	svc_deliver_start(s);
}

/* Sample pid with profilingd-perf. false when that cannot start. */
static bool start_agentless(struct session *s)
{
	if (recheck(s) < 0)
		return true; /* the session has failed: nothing else to try */
	int r = svc_capture_open_raw(s);
	if (r == 0 && s->type == PROF_METHOD_EVENTS) {
		const char *m[SVC_METHOD_TARGETS_MAX];
		for (unsigned i = 0; i < s->nmethods; i++)
			m[i] = s->methods[i];
		r = svc_perf_methods_start(s->pid, s->ident.start, m, s->nmethods, s->method_every,
					   s->method_max_hits, s->format == PROF_FORMAT_PERFETTO,
					   s->method_budget_us ? s->method_budget_us
							       : svc_session_config()->method_budget_us,
					   s->duration_ms,
					   s->raw_fd, perf_done, s, &s->perf);
	} else if (r == 0) {
		r = svc_perf_start(s->pid, s->ident.start, s->hz, s->duration_ms, s->raw_fd,
				   perf_done, s, &s->perf);
	}
	if (r < 0) {
		LOG_I("session %llu: pid %d has no agent and cannot be sampled without one: %s",
		      (unsigned long long)s->id, (int)s->pid,
		      r == -ENOENT ? "profilingd-perf is not installed" : strerror(-r));
		if (s->raw_fd >= 0)
			close(s->raw_fd);
		s->raw_fd = -1;
		if (s->files && s->files->raw_path[0])
			unlink(s->files->raw_path);
		if (s->files)
			s->files->raw_path[0] = '\0';
		return false;
	}
	s->state = S_CAPTURING;
	s->start_ns = util_now_ns(CLOCK_REALTIME);
	svc_session_notify(s, "capturing", 0, NULL, 0, NULL);
	if (s->type == PROF_METHOD_EVENTS)
		LOG_I("session %llu: method events of pid %d: %u uprobe target(s) for %u ms",
		      (unsigned long long)s->id, (int)s->pid, s->nmethods, s->duration_ms);
	else
		LOG_I("session %llu: no agent in pid %d: sampling it with perf_event_open at %u Hz "
		      "for %u ms", (unsigned long long)s->id, (int)s->pid, s->hz, s->duration_ms);
	return true;
}

/* profilingd-jattach wrote the JVM's heap dump (with its threads) into raw. */
static void jvm_dump_done(void *ud, int code, const char *msg)
{
	struct session *s = ud;
	char m[300];
	s->ja = NULL;
	if (code != 0) {
		util_fmt(m, sizeof(m), "JVM heap dump failed: %s", msg && *msg ? msg : "?");
		svc_deliver_fail(s, names_exit_error(code, PROF_E_EXECUTING), m);
		return;
	}
	LOG_I("session %llu: JVM heap dump of pid %d: %s", (unsigned long long)s->id, (int)s->pid,
	      msg);
	s->capture_done = true;
	svc_session_release_hold(s, 0);
	/* With kernel context, the last of the two to finish delivers. */
	if (!s->ft_running)
		svc_deliver_start(s);
}

static void start_jvm_dump(struct session *s)
{
	const struct svc_config *cfg = svc_session_config();
	char msg[160];
	if (recheck(s) < 0)
		return;
	int r = svc_capture_open_raw(s);
	if (r == 0)
		r = svc_jattach_start(s->pid, s->ident.start, SVC_JATTACH_HEAPDUMP,
				      cfg->jvm_attach_timeout_ms, s->raw_fd, jvm_dump_done, s, &s->ja);
	if (r < 0) {
		util_fmt(msg, sizeof(msg), "cannot take a JVM heap dump: %s",
			 r == -ENOENT ? "profilingd-jattach is not installed" : strerror(-r));
		svc_deliver_fail(s, names_errno_error(r, PROF_E_RUNTIME_UNAVAILABLE), msg);
		return;
	}
	s->state = S_CAPTURING;
	s->start_ns = util_now_ns(CLOCK_REALTIME);
	LOG_I("session %llu: heap dump of JVM pid %d through the attach protocol",
	      (unsigned long long)s->id, (int)s->pid);
	/* A dump is an instant: the context is the past, plus 1 ms. */
	if (heap_context(s))
		start_ftrace(s, 1);
}

static void agent_load_done(void *ud, int code, const char *msg)
{
	const struct svc_config *cfg = svc_session_config();
	struct session *s = ud;
	s->ja = NULL;
	if (s->state != S_WAIT_RUNTIME) {
		/* Its hello came before the helper's exit: the capture runs already. */
		LOG_I("session %llu: JVMTI agent loaded into pid %d (it said hello already)",
		      (unsigned long long)s->id, (int)s->pid);
		return;
	}
	if (code != 0) {
		LOG_I("session %llu: the JVMTI agent could not be loaded into pid %d: %s",
		      (unsigned long long)s->id, (int)s->pid, msg && *msg ? msg : "?");
		svc_session_arm(s, 0); /* decide now: agentless samples, or unavailable */
		return;
	}
	LOG_I("session %llu: JVMTI agent loaded into pid %d; waiting for its hello",
	      (unsigned long long)s->id, (int)s->pid);
	/* A hello starts the capture (svc_capture_runtime_up); this is the limit. */
	svc_session_arm(s, s->wait_ms > cfg->runtime_wait_ms ? s->wait_ms : cfg->runtime_wait_ms);
}

/* Ask the JVM to load the profilingd agent. false when that cannot start. */
static bool start_agent_load(struct session *s)
{
	const struct svc_config *cfg = svc_session_config();
	s->agent_tried = true;
	if (!svc_jvm_agent_available())
		return false;
	if (recheck(s) < 0)
		return true; /* the session has failed */
	int r = svc_jattach_start(s->pid, s->ident.start, SVC_JATTACH_LOAD,
				  cfg->jvm_attach_timeout_ms, -1, agent_load_done, s, &s->ja);
	if (r < 0) {
		LOG_I("session %llu: cannot load the JVMTI agent: %s", (unsigned long long)s->id,
		      strerror(-r));
		return false;
	}
	return true;
}

static void capture_drained(struct session *s);

/* The runtime's pipe ended: EOF, its declared bytes, the cap, or an error. */
static void sink_cb(void *ud, int status)
{
	const struct svc_config *cfg = svc_session_config();
	struct session *s = ud;
	char msg[160];

	if (status == 0) {
		/* EOF before CaptureDone: the deadline timer still runs. */
		if (s->done_msg)
			capture_drained(s);
		return;
	}
	svc_capture_cancel(s);
	if (status == -EFBIG) {
		util_fmt(msg, sizeof(msg), "artifact exceeds max_result_bytes (%llu)",
			 (unsigned long long)cfg->max_result_bytes);
		svc_deliver_fail(s, PROF_E_POST_PROCESSING, msg);
	} else if (status == -EPROTO) {
		util_fmt(msg, sizeof(msg), "the runtime wrote more than the %llu bytes it declared",
			 (unsigned long long)s->declared);
		svc_deliver_fail(s, PROF_E_POST_PROCESSING, msg);
	} else {
		util_fmt(msg, sizeof(msg), "cannot store the capture: %s", strerror(-status));
		svc_deliver_fail(s, names_errno_error(status, PROF_E_UNKNOWN), msg);
	}
}

/* CaptureDone came and the sink has all of it: check, then redact. */
static void capture_drained(struct session *s)
{
	char msg[160];
	uint64_t got = svc_sink_bytes(s->sink);

	evtimer_del(s->timer);
	svc_sink_free(s->sink); /* the read end goes: a late writer gets EPIPE */
	s->sink = NULL;
	if (s->declared != UINT64_MAX && got != s->declared) {
		util_fmt(msg, sizeof(msg), "the runtime declared %llu bytes but wrote %llu",
			 (unsigned long long)s->declared, (unsigned long long)got);
		svc_deliver_fail(s, PROF_E_POST_PROCESSING, msg);
		return;
	}
	s->capture_done = true;
	/* A system trace waits for its kernel half, which ends on its own. */
	if (!s->ft_running)
		svc_deliver_start(s);
}

/*
 * The runtime's end of the capture: the write end of a pipe whose read end
 * the sink drains into the raw file. Returns the write end, or -errno.
 */
static int open_sink(struct session *s)
{
	const struct svc_config *cfg = svc_session_config();
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	int r = svc_sink_start(svc_session_base(), p[0], s->raw_fd, cfg->max_result_bytes, sink_cb, s, &s->sink);
	if (r < 0) {
		close(p[0]);
		close(p[1]);
		return r;
	}
	return p[1];
}

static void start_capture(struct session *s, struct svc_conn *rt)
{
	const struct svc_config *cfg = svc_session_config();
	Pd__DaemonToRuntime out = PD__DAEMON_TO_RUNTIME__INIT;
	Pd__CaptureRequest cr = PD__CAPTURE_REQUEST__INIT;
	Pd__Params p = PD__PARAMS__INIT;
	char msg[128];
	int wfd = -1;

	/* The target, and the runtime's own process, still what they were. */
	if (recheck(s) < 0)
		return;
	if (svc_conn_ident(rt)->start != s->ident.start) {
		svc_deliver_fail(s, PROF_E_PERMISSION, "the runtime is not the target process's");
		return;
	}
	if (!(svc_conn_runtime_caps(rt) & names_cap_bit(s->type))) {
		util_fmt(msg, sizeof(msg), "the runtime of pid %d cannot take a %s capture",
			 (int)s->pid, names_type_str(s->type));
		svc_deliver_fail(s, PROF_E_INVALID_REQUEST, msg);
		return;
	}
	int r = svc_capture_open_raw(s);
	if (r == 0 && (wfd = open_sink(s)) < 0)
		r = wfd;
	if (r < 0) {
		util_fmt(msg, sizeof(msg), "cannot create the capture file: %s", strerror(-r));
		svc_deliver_fail(s, names_errno_error(r, PROF_E_UNKNOWN), msg);
		return;
	}
	if (s->type == PROF_SYSTEM_TRACE || heap_context(s))
		start_ftrace(s, s->duration_ms);
	p.has_duration_ms = 1;
	p.duration_ms = s->duration_ms;
	p.has_frequency_hz = 1;
	p.frequency_hz = s->hz;
	p.has_clock = s->clock != 0;
	p.clock = s->clock;
	p.has_sampling_interval_bytes = s->interval != 0;
	p.sampling_interval_bytes = s->interval;
	/* Android-parity parameters, for the runtime's own buffers (the
	 * flight recorder, the JVMTI allocation sampler): absent = default. */
	p.has_buffer_fill_policy = s->fill_policy != 0;
	p.buffer_fill_policy = s->fill_policy;
	p.has_track_java_allocations = s->java_allocs != 0;
	p.track_java_allocations = s->java_allocs;
	/* JVM method events: the targets, as admitted (svc_admit_methods). */
	char *mt[SVC_METHOD_TARGETS_MAX];
	if (s->type == PROF_METHOD_EVENTS) {
		for (unsigned i = 0; i < s->nmethods && i < SVC_METHOD_TARGETS_MAX; i++)
			mt[i] = s->methods[i];
		p.method_targets = mt;
		p.n_method_targets = s->nmethods;
		p.has_method_every = s->method_every != 0;
		p.method_every = s->method_every;
		p.has_method_max_hits = s->method_max_hits != 0;
		p.method_max_hits = s->method_max_hits;
		p.has_format = s->format != 0; /* the agent writes a trace itself */
		p.format = s->format;
		/* Always sent: 0 (from the config) is a budget too. */
		p.has_method_budget_us = 1;
		p.method_budget_us = s->method_budget_us ? s->method_budget_us
							 : svc_session_config()->method_budget_us;
	}
	cr.session_id = s->id;
	cr.type = s->type;
	cr.params = &p;
	cr.deadline_ms = s->duration_ms + cfg->deadline_grace_ms;
	out.msg_case = PD__DAEMON_TO_RUNTIME__MSG_CAPTURE;
	out.capture = &cr;
	s->rt = rt;
	s->state = S_CAPTURING;
	s->start_ns = util_now_ns(CLOCK_REALTIME);
	r = svc_conn_send(rt, &out.base, wfd);
	/* Our copy goes now (the queue keeps its own until sent): EOF then
	 * means the runtime, and whoever it gave the fd to, closed theirs. */
	close(wfd);
	if (r < 0) {
		svc_deliver_fail(s, PROF_E_EXECUTING, "cannot reach the runtime");
		return;
	}
	svc_session_arm(s, cr.deadline_ms);
	svc_session_notify(s, "capturing", 0, NULL, 0, NULL);
	LOG_I("session %llu: %s capture of pid %d for %u ms at %u Hz",
	      (unsigned long long)s->id, names_type_str(s->type), (int)s->pid,
	      s->duration_ms, s->hz);
}

int svc_capture_done(struct svc_conn *rt, const Pd__CaptureDone *d)
{
	struct session *s = svc_session_find(d->session_id);

	/* Late answers to sessions that already timed out or were cancelled. */
	if (!s || s->rt != rt || s->state != S_CAPTURING)
		return 0;
	if (d->status != PROF_E_NONE) {
		int e = d->status <= PROF_E_UNKNOWN ||
			(d->status >= PROF_E_RUNTIME_UNAVAILABLE && d->status <= PROF_E_PERMISSION)
			? (int)d->status : PROF_E_EXECUTING;
		svc_deliver_fail(s, e, d->message ? d->message : "the runtime reported a failure");
		return 0;
	}
	s->samples = d->samples;
	s->dropped = d->dropped;
	/* JVM method events: the agent says why it removed its hooks early
	 * (the overhead budget). The runtime's words, for the result's note
	 * only, after what is there, cut at the note's size. */
	if (s->type == PROF_METHOD_EVENTS && d->message && *d->message) {
		size_t l = strlen(s->note);
		util_fmt(s->note + l, sizeof(s->note) - l, "%s%s", l ? "; " : "", d->message);
		/* The runtime is the app: no control bytes for a reader's terminal. */
		for (char *c = s->note + l; *c; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f)
				*c = '?';
	}
	/* Discard (client/trace.h): the runtime's count is of the events its
	 * full flight recorder did not keep; the app is told with the result,
	 * after any note already there (the background trace's). A JVM's
	 * agent has no such recorder: its GC ring's count is of overwritten
	 * events, whatever the policy. */
	if (s->type == PROF_SYSTEM_TRACE && s->fill_policy == PROF_FILL_DISCARD && !s->jvm &&
	    d->dropped) {
		size_t l = strlen(s->note);
		util_fmt(s->note + l, sizeof(s->note) - l, "%sflight recorder full "
			 "(buffer_fill_policy discard): %llu events dropped", l ? "; " : "",
			 (unsigned long long)d->dropped);
	}
	s->rt = NULL;
	s->done_msg = true;
	/*
	 * Done once the sink has what the runtime declared (or EOF when it
	 * declared nothing); the deadline timer keeps running until then, so
	 * a runtime that holds its write end open and stops short times out.
	 */
	s->declared = d->has_bytes ? d->bytes : UINT64_MAX;
	int r = s->declared == UINT64_MAX ? (svc_sink_ended(s->sink) ? 1 : 0)
					  : svc_sink_expect(s->sink, s->declared);
	if (r == -EPROTO) {
		char msg[160];
		util_fmt(msg, sizeof(msg), "the runtime declared %llu bytes but wrote %llu",
			 (unsigned long long)s->declared,
			 (unsigned long long)svc_sink_bytes(s->sink));
		svc_deliver_fail(s, PROF_E_POST_PROCESSING, msg);
	} else if (r == 1) {
		capture_drained(s);
	}
	return 0;
}

int svc_capture_stop(pid_t pid, uint32_t trigger)
{
	for (struct session *s = svc_session_first(); s; s = s->next) {
		if (s->pid != pid || s->trigger != trigger || s->state != S_CAPTURING || !s->rt)
			continue;
		Pd__DaemonToRuntime out = PD__DAEMON_TO_RUNTIME__INIT;
		Pd__CaptureStop cs = PD__CAPTURE_STOP__INIT;
		cs.session_id = s->id;
		out.msg_case = PD__DAEMON_TO_RUNTIME__MSG_STOP;
		out.stop = &cs;
		svc_conn_send(s->rt, &out.base, -1);
		return 0;
	}
	return -ENOENT;
}

void svc_capture_runtime_up(struct svc_conn *rt)
{
	pid_t pid = svc_conn_pid(rt);
	uint64_t start = svc_conn_ident(rt)->start;
	for (struct session *s = svc_session_first(), *next; s; s = next) {
		next = s->next;
		/* The session's own process, not another that has its pid now. */
		if (s->state == S_WAIT_RUNTIME && s->pid == pid && s->ident.start == start &&
		    !(s->jvm && s->type == PROF_HEAP_DUMP && !dump_by_agent(s))) {
			evtimer_del(s->timer);
			start_capture(s, rt);
		}
	}
}

void svc_capture_runtime_down(struct svc_conn *rt)
{
	for (struct session *s = svc_session_first(), *next; s; s = next) {
		next = s->next;
		if (s->rt == rt && s->state == S_CAPTURING) {
			s->rt = NULL;
			svc_deliver_fail(s, PROF_E_EXECUTING, "the runtime disconnected mid-capture");
		}
	}
}

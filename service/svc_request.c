/*
 * Requests, trigger fires, crash dumps and cancels (svc_request.h has the
 * contract): who the target is, the admission snapshot for
 * svc_admit_decide, the charge, and the new session armed to start from
 * the event loop.
 */
#include "svc_db.h"
#include "svc_conn.h"
#include "svc_jvm.h"
#include "svc_session_priv.h"
#include "svc_admit.h"
#include "svc_capture.h"
#include "svc_request.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "names.h"
#include "profiling/profiling.h"
#include "util.h"

/* Whose capture a request is: the caller, or (root only) another process. */
struct target {
	pid_t pid;
	uid_t uid;
	gid_t gid;
	bool system;   /* asked by root for another process: a system capture */
	bool gone;     /* the process is dead: its crash dump only */
	char app[RL_APP_MAX];
	struct svc_ident ident; /* the process; create_session takes it over */
};

/* t's process may be captured for t->uid (svc_ident_capturable). */
static int target_capturable(const struct target *t, char *msg, size_t n)
{
	if (svc_ident_capturable(&t->ident, t->uid))
		return 0;
	util_fmt(msg, n, "pid %d runs with ids other than uid %u's alone (a setuid or setgid "
		 "program): only root may capture it", (int)t->pid, (unsigned)t->uid);
	return PROF_E_PERMISSION;
}

/* Fills t (its ident too, which the caller finishes). */
static int resolve_target(struct svc_conn *client, const Pd__Request *rq, struct target *t,
			  char *msg, size_t n)
{
	t->pid = svc_conn_pid(client);
	t->uid = svc_conn_uid(client);
	t->gid = svc_conn_gid(client);
	t->system = false;
	util_strlcpy(t->app, svc_conn_app(client), sizeof(t->app));
	if (!rq->has_target_pid || rq->target_pid == 0 || (pid_t)rq->target_pid == t->pid) {
		/* The caller itself: the process its connection is bound to. */
		if (svc_ident_dup(&t->ident, svc_conn_ident(client)) < 0) {
			util_fmt(msg, n, "out of file descriptors");
			return PROF_E_UNKNOWN;
		}
		return target_capturable(t, msg, n);
	}
	if (t->uid != 0) {
		util_fmt(msg, n, "only root may capture another process");
		return PROF_E_PERMISSION;
	}
	if (rq->target_pid > INT32_MAX ||
	    svc_ident_of_pid(&t->ident, (pid_t)rq->target_pid, 0) < 0) {
		util_fmt(msg, n, "no process %u", rq->target_pid);
		return PROF_E_INVALID_REQUEST;
	}
	t->pid = (pid_t)rq->target_pid;
	t->system = true;
	/*
	 * The result belongs to the target's app, unless the target runs with
	 * mixed ids (setuid): then it stays with root, who asked, and never
	 * goes to the real uid that started the setuid program.
	 */
	if (!svc_ident_mixed(&t->ident)) {
		t->uid = t->ident.uid[0];
		t->gid = t->ident.gid[0];
		svc_app_key(svc_session_config(), t->pid, t->uid, t->app, sizeof(t->app));
	}
	return 0;
}

/*
 * Take the snapshot the rules look at, run them (svc_admit_decide), and
 * charge the cost when all passed. 0 or a positive PROF_E_* with msg.
 */
static int admit(struct target *t, const Pd__Request *rq, struct svc_admit_out *out, char *msg,
		 size_t n)
{
	const struct svc_config *cfg = svc_session_config();
	bool known = names_type_valid(rq->type);
	char rate_why[160], disk_why[160];
	struct svc_admit_in in = {
		.type = rq->type,
		.params = rq->params,
		.type_cap = known ? names_cap_bit(rq->type) : 0,
		.pid = t->pid,
		.gone = t->gone,
		.default_duration_ms = cfg->default_duration_ms,
		.default_frequency_hz = cfg->default_frequency_hz,
		.max_sessions = cfg->max_sessions,
		.nsessions = svc_session_count(),
		.rate_why = rate_why,
		.disk_why = disk_why,
		.methods_off = !cfg->method_events,
	};
	if (!t->gone) {
		struct svc_conn *rt = svc_conn_runtime_for(t->pid);
		struct session *busy = svc_session_of_pid(t->pid);
		in.runtime = rt != NULL;
		in.runtime_caps = rt ? svc_conn_runtime_caps(rt) : 0;
		/* Only a heap dump's rules ask: spare the /proc reads otherwise. */
		in.jvm = rq->type == PROF_HEAP_DUMP && svc_jvm_detect(t->pid);
		in.busy = busy ? busy->id : 0;
	}
	/*
	 * The cost windows know the four Android types only; rule 1 refuses
	 * others. Method events cost what a stack capture costs: both are
	 * perf events on the target for the capture's duration.
	 */
	uint32_t cost_type = rq->type == PROF_METHOD_EVENTS ? PROF_STACK_SAMPLING : rq->type;
	if (known)
		in.rate = svc_admit_rate_check(t->app, cost_type, t->system, rate_why,
					       sizeof(rate_why));
	in.disk = svc_admit_disk_check(t->app, disk_why, sizeof(disk_why));
	int e = svc_admit_decide(&in, out, msg, n);
	return e ? e : svc_admit_charge(t->app, cost_type, t->system, msg, n);
}

/* Create and arm an admitted session. 0 or a positive PROF_E_* with *why. */
static int create_session(struct target *t, const Pd__Request *rq,
			  const struct svc_admit_out *ad, uint64_t client_id, uint32_t trigger,
			  uint32_t wait_ms, struct session **out, const char **why)
{
	uint64_t now = util_now_ns(CLOCK_REALTIME);
	int r = 0;
	struct session *s = svc_session_alloc(svc_capture_timer);
	if (!s) {
		*why = "out of memory";
		return PROF_E_UNKNOWN;
	}
	s->uid = t->uid;
	s->gid = t->gid;
	s->pid = t->pid;
	s->type = rq->type;
	s->duration_ms = ad->duration_ms;
	s->hz = ad->frequency_hz;
	s->clock = rq->params && rq->params->has_clock ? rq->params->clock : 0;
	s->interval = rq->params && rq->params->has_sampling_interval_bytes
		? rq->params->sampling_interval_bytes : 0;
	s->trigger = trigger;
	s->buffer_kb = rq->params && rq->params->has_buffer_kb && rq->params->buffer_kb
		? rq->params->buffer_kb : 4096;
	s->client_id = client_id;
	s->start_ns = now;
	if (rq->type == PROF_METHOD_EVENTS && rq->params) {
		/* svc_admit_methods checked count (1..8) and lengths. */
		s->methods = calloc(SVC_METHOD_TARGETS_MAX, sizeof(*s->methods));
		if (!s->methods) {
			svc_session_discard(s);
			*why = "out of memory";
			return PROF_E_UNKNOWN;
		}
		for (size_t i = 0; i < rq->params->n_method_targets && i < SVC_METHOD_TARGETS_MAX; i++)
			util_strlcpy(s->methods[s->nmethods++], rq->params->method_targets[i],
				     sizeof(s->methods[0]));
		s->method_every = rq->params->has_method_every ? rq->params->method_every : 0;
		s->method_max_hits = rq->params->has_method_max_hits
			? rq->params->method_max_hits : 0;
	}
	util_strlcpy(s->tag, rq->tag ? rq->tag : "", sizeof(s->tag));
	util_strlcpy(s->app, t->app, sizeof(s->app));
	if (svc_db_alloc_id(&s->id) < 0 ||
	    (r = svc_db_session_new(s->id, s->app, s->uid, s->pid, s->type, s->trigger, s->tag,
				    now)) < 0) {
		svc_session_discard(s);
		int e = names_errno_error(r, PROF_E_UNKNOWN);
		*why = e == PROF_E_NO_DISK_SPACE ? "no disk space to record the session"
		       : "cannot record the session";
		return e;
	}
	s->wait_ms = wait_ms;
	/* The session owns the target's ident (and its pidfd) from here. */
	s->ident = t->ident;
	svc_ident_init(&t->ident);
	s->jvm = !t->gone && svc_jvm_detect(s->pid);
	svc_session_add(s);
	s->state = S_WAIT_RUNTIME;
	*out = s;
	/*
	 * Start from the event loop, after the synchronous reply is queued:
	 * at once when the runtime is here, else when it says hello. Method
	 * events are the daemon's own probes: nothing to wait for.
	 */
	if (!t->gone)
		svc_session_arm(s, svc_session_runtime_of(s) || s->jvm ||
				s->type == PROF_METHOD_EVENTS ? 0 : wait_ms);
	return 0;
}

struct conn_probe {
	const struct svc_ident *of;
	bool found;
};

static void probe_conn(struct svc_conn *c, void *ud)
{
	struct conn_probe *p = ud;
	const struct svc_ident *id = svc_conn_ident(c);
	if (id && id->pid == p->of->pid && id->start == p->of->start)
		p->found = true;
}

/*
 * Can a runtime still come for the process? Only one with libprofiling or
 * the preload agent in it, and those connect to the daemon (a client, or a
 * runtime before its hello). A process with no connection at all will not
 * say hello: waiting runtime_wait_ms for it only delays an agentless
 * capture. Triggers keep the wait: they fire at exec, before a preloaded
 * agent has had the time to connect.
 */
static bool runtime_may_come(const struct svc_ident *t)
{
	struct conn_probe p = { .of = t };
	svc_conn_foreach(probe_conn, &p);
	return p.found;
}

int svc_request_client(struct svc_conn *client, const Pd__Request *rq, uint64_t *id,
		       const char **why)
{
	static char msg[256];
	struct svc_admit_out ad;
	struct session *s;
	struct target t = { 0 };

	*why = NULL;
	*id = 0;
	svc_ident_init(&t.ident);
	int e = resolve_target(client, rq, &t, msg, sizeof(msg));
	if (!e)
		e = admit(&t, rq, &ad, msg, sizeof(msg));
	if (e) {
		svc_ident_fini(&t.ident);
		*why = msg;
		/* Refusals get an id too, so the listener's copy can be matched. */
		if (svc_db_alloc_id(id) < 0)
			*id = 0;
		return e;
	}
	uint32_t wait_ms = svc_session_config()->runtime_wait_ms;
	if (rq->type == PROF_STACK_SAMPLING && wait_ms && !runtime_may_come(&t.ident)) {
		LOG_I("pid %d has no connection to the daemon, so no runtime: not waiting %u ms "
		      "for one", (int)t.pid, wait_ms);
		wait_ms = 0;
	}
	e = create_session(&t, rq, &ad, svc_conn_id(client), PROF_TRIGGER_NONE, wait_ms, &s, why);
	if (!e)
		*id = s->id;
	svc_ident_fini(&t.ident);
	return e;
}

int svc_request_trigger(pid_t pid, uint64_t start, uid_t uid, gid_t gid, const char *app,
			uint32_t type, const Pd__Params *params, uint32_t trigger, const char *tag,
			uint32_t wait_ms, uint64_t *id, char *msg, size_t n)
{
	struct target t = { .pid = pid, .uid = uid, .gid = gid, .system = true };
	Pd__Request rq = PD__REQUEST__INIT;
	struct svc_admit_out ad;
	const char *why = NULL;
	struct session *s;

	util_strlcpy(t.app, app, sizeof(t.app));
	rq.type = type;
	rq.params = (Pd__Params *)params;
	rq.tag = (char *)tag;
	/* The process the trigger saw, still there, and the app's to capture. */
	if (svc_ident_of_pid(&t.ident, pid, start) < 0) {
		util_fmt(msg, n, "pid %d is gone or is another process now", (int)pid);
		return PROF_E_PERMISSION;
	}
	int e = target_capturable(&t, msg, n);
	if (!e)
		e = admit(&t, &rq, &ad, msg, n);
	if (!e) {
		e = create_session(&t, &rq, &ad, 0, trigger, wait_ms, &s, &why);
		if (e)
			util_fmt(msg, n, "%s", why);
		else
			*id = s->id;
	}
	svc_ident_fini(&t.ident);
	return e;
}

int svc_request_adopt(pid_t pid, uid_t uid, gid_t gid, const char *app, const char *path,
		      const char *format, uint32_t trigger, const char *tag, char *msg, size_t n)
{
	struct target t = { .pid = pid, .uid = uid, .gid = gid, .system = true, .gone = true };
	Pd__Request rq = PD__REQUEST__INIT;
	Pd__Params prm = PD__PARAMS__INIT;
	struct svc_admit_out ad;
	const char *why = NULL;
	struct session *s = NULL;

	svc_ident_init(&t.ident); /* the process is gone: its dump only */
	util_strlcpy(t.app, app, sizeof(t.app));
	rq.type = PROF_SYSTEM_TRACE;
	rq.params = &prm;
	rq.tag = (char *)tag;
	/* The dump is a moment, not a span: the shortest duration the rules allow. */
	prm.has_duration_ms = 1;
	prm.duration_ms = SVC_DURATION_MIN_MS;
	prm.has_frequency_hz = 1;
	prm.frequency_hz = SVC_HZ_MIN;
	int e = admit(&t, &rq, &ad, msg, n);
	if (!e)
		e = create_session(&t, &rq, &ad, 0, trigger, 0, &s, &why);
	if (e) {
		if (why)
			util_fmt(msg, n, "%s", why);
		unlink(path);
		return e;
	}
	if (svc_capture_open_raw(s) < 0 || rename(path, s->raw_path) < 0) {
		unlink(path);
		svc_deliver_fail(s, PROF_E_UNKNOWN, "cannot take over the crash dump");
		return 0;
	}
	/* The renamed dump replaces the empty raw file svc_capture_open_raw made. */
	close(s->raw_fd);
	s->raw_fd = open(s->raw_path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	s->redact_format = format;
	s->state = S_CAPTURING;
	s->capture_done = true;
	svc_deliver_start(s);
	return 0;
}

int svc_request_stop(uint64_t id, const char *why)
{
	struct session *s = svc_session_find(id);
	if (!s)
		return -ENOENT;
	svc_capture_cancel(s);
	/* Freeing the session kills its helper: the probes go with its fds. */
	svc_deliver_fail(s, PROF_E_CANCELLED, why);
	return 0;
}

int svc_request_stop_type(uint32_t type, const char *why)
{
	int n = 0;
	struct session *s = svc_session_first();
	while (s) {
		struct session *next = s->next; /* s is freed by the stop */
		if (s->type == type && svc_request_stop(s->id, why) == 0)
			n++;
		s = next;
	}
	return n;
}

int svc_request_cancel(struct svc_conn *client, uint64_t id)
{
	struct session *s = svc_session_find(id);
	if (!s || s->uid != svc_conn_uid(client))
		return -ENOENT;
	svc_capture_cancel(s);
	svc_deliver_fail(s, PROF_E_CANCELLED, "cancelled by the app");
	return 0;
}

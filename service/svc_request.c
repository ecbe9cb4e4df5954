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
#include "wire.h"

/* Whose capture a request is: the caller, or (root only) another process. */
struct target {
	pid_t pid;
	uid_t uid;
	gid_t gid;
	bool system;   /* asked by root for another process: a system capture */
	bool gone;     /* the process is dead: its crash dump only */
	char app[RL_APP_MAX];
	struct svc_ident ident; /* the process; create_session takes it over */
	/*
	 * The caller's own process: ident is a copy of its connection's
	 * without the pidfd, which admit dups only once the rules passed.
	 * Most refusals (a busy target) so cost no dup and close.
	 */
	const struct svc_ident *borrowed;
};

/*
 * Group commit. The admissions of one event-loop turn share one
 * transaction per database (ratelimit.db's charges, profilingd.db's
 * session rows and id blocks): the first opens the batch, holds every
 * peer's outgoing messages (svc_conn_hold) and activates ev_batch, which
 * libevent runs after the callbacks already active in this turn; it
 * commits ratelimit.db, then profilingd.db, then answers the admitted
 * requests (svc_request_client returned SVC_REQUEST_LATER; the reply
 * function sends) and releases the held messages. So a reply that says
 * "admitted" leaves only once both commits returned, and a kill -9 loses
 * nothing admitted (it_ratelimit's kill under a flood). ratelimit.db first: a kill between the two commits
 * leaves a charge without its session (the app never heard back), never
 * a session that was not charged.
 * Cap: BATCH_MAX sessions a batch; at the cap the batch is committed at
 * once (its replies go) and a new one opens. A failed commit rolls its
 * database back; the batch's app requests are then refused in their
 * reply with the commit's error (NO_DISK_SPACE for a full disk) and their
 * sessions removed; a trigger's capture ends with a failure result.
 * Why (bench/admission.sh, 32 clients, perf record -g on the daemon):
 * two commits per admission, each a WAL append of a few pages, were
 * 19 % of the daemon's time (pwrite; checkpoints' fdatasync 5 % more),
 * 2.5 % after. docs/RATELIMIT.md has the figures.
 */
#define BATCH_MAX 256
static struct event *ev_batch;
static bool batch_open;
/* batch_commit is running (its undo ends sessions), or svc_request_fini
 * ran: a session's end then commits alone (group_open). */
static bool committing, closed;
/* A session of the batch; conn != 0: an app's request, answered at commit. */
static struct batch_ent {
	uint64_t id, conn, token;
	uint32_t type;
	char tag[WIRE_MAX_TAG + 1];
} batch[BATCH_MAX];
static unsigned batch_n;
static svc_request_reply_fn reply_fn;

/*
 * One loop turn's snapshots share their read of the free space
 * (svc_admit_turn_begin), batch or not: a turn of refusals only (a busy
 * target, spent budgets) opened no batch and read it once per request.
 * ev_turn, activated by the turn's first snapshot, runs after the
 * callbacks already active in this turn and ends it. Without the event
 * (no memory) every check reads, as before.
 */
static struct event *ev_turn;
static bool turn_open;

static void turn_end_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	turn_open = false;
	svc_admit_turn_end();
}

static void turn_join(void)
{
	if (turn_open || !svc_session_base())
		return;
	if (!ev_turn && !(ev_turn = event_new(svc_session_base(), -1, 0, turn_end_cb, NULL)))
		return;
	svc_admit_turn_begin();
	turn_open = true;
	event_active(ev_turn, EV_TIMEOUT, 0);
}

static int group_open(void);

void svc_request_set_reply(svc_request_reply_fn fn)
{
	reply_fn = fn;
	/* From here to the client's fini, sessions' ends join the turn's batch. */
	svc_db_set_group(fn && !closed ? group_open : NULL);
}

/* The batch's commit failed: its sessions end without a trace on disk. */
static void batch_undo(const struct batch_ent *b, int e, const char *why)
{
	struct session *s = svc_session_find(b->id);
	struct svc_conn *c = b->conn ? svc_conn_by_id(b->conn) : NULL;
	if (!b->conn) {
		/* A trigger's capture: its app learns it through its listener. */
		if (s)
			svc_deliver_fail(s, e, why);
		return;
	}
	if (s) {
		/* The app has not heard of it: no failure result, the reply refuses. */
		svc_db_session_end(s->id, "failed", e, why, util_now_ns(CLOCK_REALTIME));
		svc_session_release_files(s);
		svc_session_free(s);
	}
	if (c && reply_fn)
		reply_fn(c, &(struct svc_request_answer){ .token = b->token, .id = b->id,
			 .type = b->type, .tag = b->tag, .error = e, .why = why });
}

static void batch_commit(void)
{
	if (!batch_open)
		return;
	batch_open = false;
	committing = true;
	int r = svc_admit_batch_commit();
	int d = svc_db_batch_commit();
	if (r == 0)
		r = d;
	int e = r < 0 ? names_errno_error(r, PROF_E_UNKNOWN) : 0;
	if (e)
		LOG_E("a batch of %u admission(s) could not be committed (%s): each is refused with %s",
		      batch_n, strerror(-r), prof_strerror(e));
	for (unsigned i = 0; i < batch_n; i++) {
		const struct batch_ent *b = &batch[i];
		struct svc_conn *c = b->conn ? svc_conn_by_id(b->conn) : NULL;
		if (e)
			batch_undo(b, e, "the admission could not be recorded");
		else if (c && reply_fn)
			reply_fn(c, &(struct svc_request_answer){ .token = b->token, .id = b->id,
				 .type = b->type, .tag = b->tag });
	}
	batch_n = 0;
	svc_conn_release();
	committing = false;
}

static void batch_commit_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	batch_commit();
}

/* Join this turn's batch, opening it. Without one (no memory for the
 * event) every write commits on its own, as before: -ENOMEM. */
static int batch_join(void)
{
	if (batch_open && batch_n == BATCH_MAX)
		batch_commit();
	if (batch_open)
		return 0;
	if (!ev_batch && !(ev_batch = event_new(svc_session_base(), -1, 0, batch_commit_cb, NULL)))
		return -ENOMEM;
	svc_admit_batch_begin();
	svc_db_batch_begin();
	svc_conn_hold();
	batch_open = true;
	event_active(ev_batch, EV_TIMEOUT, 0);
	return 0;
}

/*
 * svc_db's group opener: a session's end (a failed capture, mostly) joins
 * this turn's batch, opened without an admission. It does not count
 * toward BATCH_MAX and never commits a full batch from here: the caller
 * is in the middle of ending a session.
 */
static int group_open(void)
{
	if (committing || closed || !svc_session_base())
		return -EBUSY;
	if (batch_open)
		return 0;
	return batch_join();
}

void svc_request_fini(void)
{
	batch_commit();
	closed = true;
	svc_db_set_group(NULL);
	if (ev_batch)
		event_free(ev_batch);
	ev_batch = NULL;
	if (ev_turn)
		event_free(ev_turn);
	ev_turn = NULL;
	if (turn_open)
		svc_admit_turn_end();
	turn_open = false;
}

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
		t->borrowed = svc_conn_ident(client);
		t->ident = *t->borrowed;
		t->ident.pidfd = -1;
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

/* Why-buffers a snapshot points into: they live as long as it does. */
struct why {
	char rate[160], disk[160];
};

/*
 * The cost windows know the four Android types only; rule 1 refuses
 * others. Method events cost what a stack capture costs: both are perf
 * events on the target for the capture's duration.
 */
static uint32_t cost_type(uint32_t type)
{
	return type == PROF_METHOD_EVENTS ? PROF_STACK_SAMPLING : type;
}

/*
 * Take the snapshot the rules look at (svc_admit_decide): the request,
 * the target's process (none for an app-only query), and the reads of the
 * cost windows (a dry run) and the disk.
 */
static void snapshot(const struct target *t, const Pd__Request *rq, bool app_only,
		     struct svc_admit_in *in, struct why *w)
{
	const struct svc_config *cfg = svc_session_config();
	bool known = names_type_valid(rq->type);
	*in = (struct svc_admit_in){
		.type = rq->type,
		.params = rq->params,
		.type_cap = known ? names_cap_bit(rq->type) : 0,
		.pid = t->pid,
		.gone = t->gone,
		.app_only = app_only,
		.default_duration_ms = cfg->default_duration_ms,
		.default_frequency_hz = cfg->default_frequency_hz,
		.max_sessions = cfg->max_sessions,
		.background_max_ms = cfg->trace_bg_max_s * 1000,
		.nsessions = svc_session_count(),
		.rate_why = w->rate,
		.disk_why = w->disk,
		.methods_off = !cfg->method_events,
	};
	if (!t->gone && !app_only) {
		struct svc_conn *rt = svc_conn_runtime_for(t->pid);
		struct session *busy = svc_session_of_pid(t->pid);
		in->runtime = rt != NULL;
		in->runtime_caps = rt ? svc_conn_runtime_caps(rt) : 0;
		/* Only a heap dump's rules ask: spare the /proc reads otherwise. */
		in->jvm = rq->type == PROF_HEAP_DUMP && svc_jvm_detect(t->pid, t->ident.start);
		in->busy = busy ? busy->id : 0;
	}
	if (known)
		in->rate = svc_admit_rate_check(t->app, cost_type(rq->type), t->system, w->rate,
						sizeof(w->rate));
	turn_join();
	in->disk = svc_admit_disk_check(t->app, w->disk, sizeof(w->disk));
}

/*
 * Run the rules over the snapshot and charge the cost when all passed.
 * 0 or a positive PROF_E_* with msg.
 */
static int admit(struct target *t, const Pd__Request *rq, struct svc_admit_out *out, char *msg,
		 size_t n)
{
	struct svc_admit_in in;
	struct why w;
	snapshot(t, rq, false, &in, &w);
	int e = svc_admit_decide(&in, out, msg, n);
	if (e)
		return e;
	/* Admitted: the session will own a pidfd of its own (before the charge,
	 * so that running out of fds costs the app nothing). */
	if (t->borrowed) {
		if (svc_ident_dup(&t->ident, t->borrowed) < 0) {
			util_fmt(msg, n, "out of file descriptors");
			return PROF_E_UNKNOWN;
		}
		t->borrowed = NULL;
	}
	batch_join();
	return svc_admit_charge(t->app, cost_type(rq->type), t->system, msg, n);
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
	s->format = rq->params && rq->params->has_format ? rq->params->format : 0;
	s->interval = rq->params && rq->params->has_sampling_interval_bytes
		? rq->params->sampling_interval_bytes : 0;
	s->trigger = trigger;
	s->buffer_kb = rq->params && rq->params->has_buffer_kb && rq->params->buffer_kb
		? rq->params->buffer_kb : 4096;
	s->fill_policy = rq->params && rq->params->has_buffer_fill_policy
		? rq->params->buffer_fill_policy : PROF_FILL_DEFAULT;
	s->java_allocs = rq->params && rq->params->has_track_java_allocations
		? rq->params->track_java_allocations : PROF_SWITCH_DEFAULT;
	s->background_ms = rq->params && rq->params->has_background_ms
		? rq->params->background_ms : 0;
	s->admitted_boot_ns = util_now_ns(CLOCK_BOOTTIME);
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
		s->method_budget_us = rq->params->has_method_budget_us
			? rq->params->method_budget_us : 0;
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
	if (batch_open) {
		batch[batch_n] = (struct batch_ent){ .id = s->id, .type = s->type };
		util_strlcpy(batch[batch_n].tag, s->tag, sizeof(batch[batch_n].tag));
		batch_n++;
	}
	s->wait_ms = wait_ms;
	/* The session owns the target's ident (and its pidfd) from here. */
	s->ident = t->ident;
	svc_ident_init(&t->ident);
	s->jvm = !t->gone && svc_jvm_detect(s->pid, s->ident.start);
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
	if (!e) {
		*id = s->id;
		/* In a batch (the last entry is this session): answered at its commit. */
		if (batch_open && reply_fn && batch_n && batch[batch_n - 1].id == s->id) {
			batch[batch_n - 1].conn = svc_conn_id(client);
			batch[batch_n - 1].token = rq->token;
			e = SVC_REQUEST_LATER;
		}
	}
	svc_ident_fini(&t.ident);
	return e;
}

int svc_request_dry_run(struct svc_conn *client, const Pd__Request *rq,
			struct svc_request_dry *dry, char *msg, size_t n)
{
	struct target t = { 0 };
	struct svc_admit_in in;
	struct why w;

	svc_ident_init(&t.ident);
	dry->waits = false;
	/* The target exactly as svc_request_client resolves it. */
	int e = resolve_target(client, rq, &t, msg, n);
	util_strlcpy(dry->app, t.app, sizeof(dry->app));
	dry->system = t.system;
	if (!e) {
		snapshot(&t, rq, false, &in, &w);
		e = svc_admit_query(&in, msg, n, &dry->waits);
	}
	svc_ident_fini(&t.ident);
	return e;
}

int svc_request_dry_run_app(const char *app, const Pd__Request *rq, struct svc_request_dry *dry,
			    char *msg, size_t n)
{
	struct target t = { 0 };
	struct svc_admit_in in;
	struct why w;

	util_strlcpy(t.app, app, sizeof(t.app));
	util_strlcpy(dry->app, app, sizeof(dry->app));
	dry->system = false;
	snapshot(&t, rq, true, &in, &w);
	return svc_admit_query(&in, msg, n, &dry->waits);
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
	if (svc_capture_open_raw(s) < 0 || rename(path, s->files->raw_path) < 0) {
		unlink(path);
		svc_deliver_fail(s, PROF_E_UNKNOWN, "cannot take over the crash dump");
		return 0;
	}
	/* The renamed dump replaces the empty raw file svc_capture_open_raw made. */
	close(s->raw_fd);
	s->raw_fd = open(s->files->raw_path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
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

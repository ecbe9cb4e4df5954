/*
 * The control role (svc_ctl.h): profctl's requests on control.sock,
 * answered from the session, trigger, admission and database modules.
 * The transport (svc_conn.c) accepts, caps, reads and queues; this file
 * decodes, checks the version and the peer's process, starts captures
 * for `request` and reports their phases to peers that wait. The
 * read-only answers are svc_ctl_view.c's.
 *
 * Why any uid may ask: an app's developer can run `profctl results`
 * without sudo while the file mode stays simple; a root-only 0600 socket
 * would need the same checks anyway the day it is opened up.
 */
#include "svc_config.h"
#include "svc_session.h"
#include "svc_request.h"
#include "svc_ctl.h"
#include "svc_methods.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "control.pb-c.h"
#include "log.h"
#include "profiling/profiling.h"
#include "svc_conn.h"
#include "svc_ctl_view.h"
#include "svc_ident.h"
#include "util.h"
#include "wire.h"

/*
 * A peer waiting for a session's phases (request --wait), by connection
 * id: one per connection, so at most max_control_clients. It goes with
 * the session's last phase or with its connection (the closed op).
 */
struct watch {
	uint64_t conn, session;
	struct watch *next;
};

static const struct svc_config *cfg;
static struct watch *watches;

/* ------------------------------------------------------------ decoding */

static int str_ok(const char *s, size_t cap)
{
	return !s || strnlen(s, cap + 1) <= cap;
}

Pdctl__CtlRequest *svc_ctl_decode(const uint8_t *buf, size_t len, const char **why)
{
	Pdctl__CtlRequest *m;

	if (len > CTL_MAX_REQ) {
		*why = "message over the size cap";
		return NULL;
	}
	m = pdctl__ctl_request__unpack(NULL, len, buf);
	if (!m) {
		*why = "undecodable or missing required field";
		return NULL;
	}
	*why = NULL;
	switch (m->cmd_case) {
	case PDCTL__CTL_REQUEST__CMD_STATUS:
	case PDCTL__CTL_REQUEST__CMD_APPS:
	case PDCTL__CTL_REQUEST__CMD_SHOW:
	case PDCTL__CTL_REQUEST__CMD_OPEN:
		break;
	case PDCTL__CTL_REQUEST__CMD_TRIGGERS:
	case PDCTL__CTL_REQUEST__CMD_RATELIMIT:
	case PDCTL__CTL_REQUEST__CMD_RESULTS: {
		const Pdctl__AppFilter *f = m->cmd_case == PDCTL__CTL_REQUEST__CMD_TRIGGERS
			? m->triggers : m->cmd_case == PDCTL__CTL_REQUEST__CMD_RATELIMIT
			? m->ratelimit : m->results;
		if (!str_ok(f->app, RL_APP_MAX - 1))
			*why = "app key too long";
		break;
	}
	case PDCTL__CTL_REQUEST__CMD_BUDGET:
		if (!str_ok(m->budget->app, RL_APP_MAX - 1))
			*why = "app key too long";
		break;
	case PDCTL__CTL_REQUEST__CMD_REQUEST:
		if (!str_ok(m->request->tag, WIRE_MAX_TAG))
			*why = "tag too long";
		break;
	/* Method events: the packet cap (4 KiB) bounds them; do_methods checks each. */
	case PDCTL__CTL_REQUEST__CMD_METHODS_LIST:
	case PDCTL__CTL_REQUEST__CMD_METHODS_DISABLE:
		break;
	case PDCTL__CTL_REQUEST__CMD_METHODS_ADD:
		if (m->methods_add->n_targets > SVC_METHOD_TARGETS_WIRE_MAX)
			*why = "too many method targets";
		break;
	default:
		*why = "no command set";
		break;
	}
	if (*why) {
		pdctl__ctl_request__free_unpacked(m, NULL);
		return NULL;
	}
	return m;
}

/* ------------------------------------------------------------ watches */

static struct watch **watch_find(uint64_t conn)
{
	struct watch **pp = &watches;
	while (*pp && (*pp)->conn != conn)
		pp = &(*pp)->next;
	return pp;
}

static void watch_del(uint64_t conn)
{
	struct watch **pp = watch_find(conn), *w = *pp;
	if (w) {
		*pp = w->next;
		free(w);
	}
}

/* ------------------------------------------------------------ request */

static void fill_progress(Pdctl__Progress *p, const struct svc_session_info *si)
{
	bool final = !strcmp(si->phase, "done") || !strcmp(si->phase, "failed");
	pdctl__progress__init(p);
	p->session_id = si->id;
	p->phase = (char *)si->phase;
	p->has_elapsed_ms = 1;
	p->elapsed_ms = si->elapsed_ms;
	p->has_duration_ms = 1;
	p->duration_ms = si->duration_ms;
	p->has_final = 1;
	p->final = final;
	p->has_error = si->error != 0;
	p->error = (uint32_t)si->error;
	p->message = (char *)si->message;
	p->has_result_id = si->result_id != 0;
	p->result_id = si->result_id;
	p->path = (char *)si->path;
}

static void observe(const struct svc_session_info *si)
{
	Pdctl__CtlReply rep = PDCTL__CTL_REPLY__INIT;
	Pdctl__Progress p;

	fill_progress(&p, si);
	rep.error = p.final ? (uint32_t)si->error : 0;
	rep.body_case = PDCTL__CTL_REPLY__BODY_PROGRESS;
	rep.progress = &p;
	for (struct watch **pp = &watches, *w; (w = *pp);) {
		if (w->session != si->id) {
			pp = &w->next;
			continue;
		}
		struct svc_conn *c = svc_conn_by_id(w->conn);
		if (p.final) {
			*pp = w->next;
			free(w);
		} else {
			pp = &w->next;
		}
		if (c)
			svc_ctl_send(c, &rep, -1);
	}
}

static void find_session(const struct svc_session_info *s, void *ud)
{
	struct svc_session_info *want = ud;
	if (s->id == want->id)
		want->duration_ms = s->duration_ms;
}

static int do_request(struct svc_conn *c, const Pdctl__Capture *cp)
{
	Pdctl__CtlReply rep = PDCTL__CTL_REPLY__INIT;
	Pdctl__Progress p;
	Pd__Params prm = PD__PARAMS__INIT;
	char app[RL_APP_MAX], msg[256];
	struct svc_ident target;
	uid_t uid;
	gid_t gid;
	uint64_t id = 0;

	if (svc_conn_uid(c) != 0)
		return svc_ctl_error(c, PROF_E_PERMISSION,
				  "request is root-only: run profctl as root (an app asks for "
				  "captures of itself through libprofiling)");
	if (*watch_find(svc_conn_id(c)))
		return svc_ctl_error(c, PROF_E_INVALID_REQUEST,
				  "this connection already waits for a capture");
	if (cp->type < PROF_HEAP_DUMP || cp->type > PROF_SYSTEM_TRACE)
		return svc_ctl_error(c, PROF_E_INVALID_REQUEST, "unknown capture type");
	if (cp->pid == 0 || cp->pid > INT32_MAX ||
	    svc_ident_of_pid(&target, (pid_t)cp->pid, 0) < 0) {
		util_fmt(msg, sizeof(msg), "no process %u", cp->pid);
		return svc_ctl_error(c, PROF_E_INVALID_REQUEST, msg);
	}
	/* A setuid process (mixed ids) is root's to capture, and its result
	 * root's: never delivered to the real uid that started it. */
	uid = svc_ident_mixed(&target) ? 0 : target.uid[0];
	gid = svc_ident_mixed(&target) ? 0 : target.gid[0];
	uint64_t start = target.start;
	svc_ident_fini(&target);
	prm.has_duration_ms = cp->has_duration_ms;
	prm.duration_ms = cp->duration_ms;
	prm.has_frequency_hz = cp->has_frequency_hz;
	prm.frequency_hz = cp->frequency_hz;
	prm.has_buffer_fill_policy = cp->has_buffer_fill_policy;
	prm.buffer_fill_policy = cp->buffer_fill_policy;
	prm.has_track_java_allocations = cp->has_track_java_allocations;
	prm.track_java_allocations = cp->track_java_allocations;
	prm.has_background_ms = cp->has_background_ms;
	prm.background_ms = cp->background_ms;
	prm.has_format = cp->has_format; /* heap formats (issue #20) */
	prm.format = cp->format;
	svc_app_key(cfg, (pid_t)cp->pid, (uid_t)uid, app, sizeof(app));
	/* Root asking for another process: a system capture of that process's
	 * app, as prof_request with target_pid is; the result goes to the app. */
	int e = svc_request_trigger((pid_t)cp->pid, start, uid, gid, app, cp->type, &prm,
				    PROF_TRIGGER_NONE, cp->tag && *cp->tag ? cp->tag : "profctl",
				    cfg->runtime_wait_ms, &id, msg, sizeof(msg));
	if (e)
		return svc_ctl_error(c, e, msg);
	LOG_I("profctl (pid %d) asked for session %llu: type %u of pid %u", (int)svc_conn_pid(c),
	      (unsigned long long)id, cp->type, cp->pid);
	struct svc_session_info si = { .id = id, .pid = (pid_t)cp->pid, .uid = uid,
				       .phase = "waiting-for-runtime" };
	/* The session's own duration, defaults applied. */
	svc_session_foreach(find_session, &si);
	fill_progress(&p, &si);
	p.final = !cp->wait;
	rep.body_case = PDCTL__CTL_REPLY__BODY_PROGRESS;
	rep.progress = &p;
	if (cp->wait) {
		struct watch *w = calloc(1, sizeof(*w));
		if (!w)
			return svc_ctl_error(c, PROF_E_UNKNOWN, "out of memory");
		w->conn = svc_conn_id(c);
		w->session = id;
		w->next = watches;
		watches = w;
	}
	return svc_ctl_send(c, &rep, -1);
}

/* ------------------------------------------------------------ methods (issue #19) */

/* The list for a reply: at most SVC_METHODS_MAX configs, each small. */
struct methods_list {
	Pdctl__MethodsConfig cfg[SVC_METHODS_MAX];
	Pdctl__MethodsConfig *ptr[SVC_METHODS_MAX];
	char *targets[SVC_METHODS_MAX][SVC_METHOD_TARGETS_MAX];
	uint64_t sessions[SVC_METHODS_MAX][SVC_METHODS_PROCS];
	size_t n;
};

static void list_one(const struct svc_methods_info *in, void *ud)
{
	struct methods_list *l = ud;
	if (l->n >= SVC_METHODS_MAX)
		return;
	Pdctl__MethodsConfig *m = &l->cfg[l->n];
	pdctl__methods_config__init(m);
	m->id = (char *)in->cfg->id;
	m->has_version = 1;
	m->version = in->cfg->version;
	m->exe = (char *)in->cfg->exe;
	for (unsigned i = 0; i < in->cfg->ntargets; i++)
		l->targets[l->n][i] = (char *)in->cfg->targets[i];
	m->n_targets = in->cfg->ntargets;
	m->targets = l->targets[l->n];
	m->has_canary_percent = 1;
	m->canary_percent = in->cfg->canary_percent;
	m->has_expires_unix_ms = 1;
	m->expires_unix_ms = in->expires_ms;
	m->has_disabled = 1;
	m->disabled = in->disabled;
	m->has_budget_us = in->cfg->budget_us != 0;
	m->budget_us = in->cfg->budget_us;
	m->has_matched = m->has_selected = m->has_hooked = 1;
	m->matched = in->matched;
	m->selected = in->selected;
	m->hooked = in->started;
	memcpy(l->sessions[l->n], in->sessions, in->nsessions * sizeof(uint64_t));
	m->n_sessions = in->nsessions;
	m->sessions = l->sessions[l->n];
	l->ptr[l->n] = m;
	l->n++;
}

/* methods list|add|disable: root only (the configs hook any user's processes). */
static void do_methods(struct svc_conn *c, const Pdctl__CtlRequest *m)
{
	Pdctl__CtlReply rep = PDCTL__CTL_REPLY__INIT;
	Pdctl__MethodsList ml = PDCTL__METHODS_LIST__INIT;
	char msg[256];
	int stopped = -1;

	if (svc_conn_uid(c) != 0) {
		svc_ctl_error(c, PROF_E_PERMISSION, "methods is root-only: its configs hook other "
			      "users' processes (an app asks for its own with prof_request)");
		return;
	}
	if (m->cmd_case == PDCTL__CTL_REQUEST__CMD_METHODS_ADD) {
		const Pdctl__MethodsAdd *a = m->methods_add;
		struct svc_methods_cfg *mc = calloc(1, sizeof(*mc));
		if (!mc) {
			svc_ctl_error(c, PROF_E_UNKNOWN, "out of memory");
			return;
		}
		int e = 0;
		if (strlen(a->id) > SVC_METHODS_ID_MAX || strlen(a->exe) >= sizeof(mc->exe) ||
		    a->n_targets > SVC_METHOD_TARGETS_MAX) {
			util_fmt(msg, sizeof(msg), "id, exe or targets too long (at most %d targets)",
				 SVC_METHOD_TARGETS_MAX);
			e = PROF_E_INVALID_REQUEST;
		}
		for (size_t i = 0; !e && i < a->n_targets; i++)
			if (strlen(a->targets[i]) >= SVC_METHOD_TARGET_LEN) {
				util_fmt(msg, sizeof(msg), "target %zu too long", i);
				e = PROF_E_INVALID_REQUEST;
			}
		if (!e) {
			util_strlcpy(mc->id, a->id, sizeof(mc->id));
			util_strlcpy(mc->exe, a->exe, sizeof(mc->exe));
			for (size_t i = 0; i < a->n_targets; i++)
				util_strlcpy(mc->targets[i], a->targets[i], sizeof(mc->targets[i]));
			mc->ntargets = (unsigned)a->n_targets;
			mc->version = a->has_version ? a->version : 1;
			mc->every = a->has_every ? a->every : 0;
			mc->max_hits = a->has_max_hits ? a->max_hits : 0;
			mc->expiry_s = a->has_expiry_s ? a->expiry_s : 0;
			mc->canary_percent = a->has_canary_percent ? a->canary_percent : 0;
			mc->budget_us = a->has_budget_us ? a->budget_us : 0;
			e = svc_methods_add(mc, msg, sizeof(msg));
		}
		free(mc);
		if (e) {
			svc_ctl_error(c, e, msg);
			return;
		}
	} else if (m->cmd_case == PDCTL__CTL_REQUEST__CMD_METHODS_DISABLE) {
		stopped = svc_methods_disable(m->methods_disable->id);
		if (stopped < 0) {
			util_fmt(msg, sizeof(msg), "no method-event config '%.64s'",
				 m->methods_disable->id);
			svc_ctl_error(c, PROF_E_INVALID_REQUEST, msg);
			return;
		}
	}
	struct methods_list *l = calloc(1, sizeof(*l));
	if (!l) {
		svc_ctl_error(c, PROF_E_UNKNOWN, "out of memory");
		return;
	}
	svc_methods_foreach(list_one, l);
	ml.n_configs = l->n;
	ml.configs = l->ptr;
	ml.has_stopped = stopped >= 0;
	ml.stopped = stopped >= 0 ? (uint32_t)stopped : 0;
	rep.body_case = PDCTL__CTL_REPLY__BODY_METHODS;
	rep.methods = &ml;
	svc_ctl_send(c, &rep, -1);
	free(l);
}

/* ------------------------------------------------------------ dispatch */

/* Every command: the version and the peer's process are checked first. */
static int ctl_request(struct svc_conn *c, const void *msg)
{
	const Pdctl__CtlRequest *m = msg;
	char text[128];

	/* Authorised by the uid of the process that connected, while it is that
	 * process with those ids (not one it passed its socket to, nor a setuid
	 * exec of it, nor a root process that has dropped its privileges). */
	if (svc_conn_check(c) < 0)
		return 0;
	if (m->version != CTL_VERSION) {
		util_fmt(text, sizeof(text), "control protocol version %u, this profilingd speaks %u: "
			 "use the profctl of the same release", m->version, CTL_VERSION);
		svc_ctl_error(c, PROF_E_INVALID_REQUEST, text);
		return 0;
	}
	if (m->cmd_case == PDCTL__CTL_REQUEST__CMD_REQUEST)
		do_request(c, m->request);
	else if (m->cmd_case == PDCTL__CTL_REQUEST__CMD_METHODS_LIST ||
		 m->cmd_case == PDCTL__CTL_REQUEST__CMD_METHODS_ADD ||
		 m->cmd_case == PDCTL__CTL_REQUEST__CMD_METHODS_DISABLE)
		do_methods(c, m);
	else
		svc_ctl_view(c, m);
	return 0;
}

/* svc_ctl_decode has checked the command: one handler takes them all. */
static const struct svc_conn_handler handlers[] = {
	{ SVC_CONN_ANY, false, ctl_request },
};

static ProtobufCMessage *decode(const uint8_t *buf, size_t len, const char **why)
{
	Pdctl__CtlRequest *m = svc_ctl_decode(buf, len, why);
	return m ? &m->base : NULL;
}

static void closed(struct svc_conn *c)
{
	watch_del(svc_conn_id(c));
}

static const struct svc_conn_role_ops ops = {
	.max_in = CTL_MAX_REQ,
	.max_out = CTL_MAX_REPLY,
	.decode = decode,
	.handlers = handlers,
	.nhandlers = 1,
	.closed = closed,
};

int svc_ctl_init(const struct svc_config *c)
{
	cfg = c;
	svc_ctl_view_init();
	svc_session_set_observer(observe);
	return svc_conn_role_register(SVC_ROLE_CONTROL, &ops);
}

void svc_ctl_fini(void)
{
	svc_session_set_observer(NULL);
	svc_conn_role_unregister(SVC_ROLE_CONTROL);
	while (watches)
		watch_del(watches->conn);
}


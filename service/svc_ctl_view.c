/*
 * The read-only answers of control.sock (svc_ctl_view.h): status, apps,
 * triggers, ratelimit, results, show and open, each cut to the peer's
 * uid. Apart from svc_ctl.c so that the role (dispatch, request --wait)
 * reads on its own and each file stays one job.
 */
#include "svc_db_result.h"
#include "svc_admit.h"
#include "svc_budget.h"
#include "svc_session.h"
#include "svc_trigger.h"
#include "svc_ctl_view.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "control.pb-c.h"
#include "names.h"
#include "profiling/profiling.h"
#include "svc_conn.h"
#include "svc_ctl.h"
#include "util.h"

#define CTL_MAX_RESULTS 200
#define CTL_MAX_APPS 512

static uint64_t start_ms;

/* ------------------------------------------------------------ arena */

/* Everything a reply points to, freed once it is packed. */
struct arena {
	void **p;
	size_t n, cap;
	bool oom;
};

static void *a_keep(struct arena *a, void *p)
{
	if (!p) {
		a->oom = true;
		return NULL;
	}
	if (a->n == a->cap) {
		size_t nc = a->cap ? a->cap * 2 : 64;
		void **np = realloc(a->p, nc * sizeof(*np));
		if (!np) {
			free(p);
			a->oom = true;
			return NULL;
		}
		a->p = np;
		a->cap = nc;
	}
	a->p[a->n++] = p;
	return p;
}

static void *a_new(struct arena *a, size_t size)
{
	return a_keep(a, calloc(1, size));
}

static char *a_dup(struct arena *a, const char *s)
{
	return a_keep(a, strdup(s ? s : ""));
}

static void a_free(struct arena *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->p[i]);
	free(a->p);
	memset(a, 0, sizeof(*a));
}

/* Grow a protobuf-c repeated field of pointers by one; NULL when out of memory. */
static void *a_push(struct arena *a, void ***arr, size_t *n, size_t *cap, size_t elem)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		void **np = a_new(a, nc * sizeof(*np));
		if (!np)
			return NULL;
		if (*n)
			memcpy(np, *arr, *n * sizeof(*np));
		*arr = np;
		*cap = nc;
	}
	void *e = a_new(a, elem);
	if (e)
		(*arr)[(*n)++] = e;
	return e;
}

/* ------------------------------------------------------------ sending */

int svc_ctl_send(struct svc_conn *c, const Pdctl__CtlReply *m, int fd)
{
	return svc_conn_send(c, &m->base, fd);
}

int svc_ctl_error(struct svc_conn *c, int error, const char *msg)
{
	Pdctl__CtlReply rep = PDCTL__CTL_REPLY__INIT;
	rep.error = (uint32_t)error;
	rep.message = (char *)msg;
	return svc_ctl_send(c, &rep, -1);
}

/* ------------------------------------------------------------ authorisation */

static bool sees_uid(const struct svc_conn *c, uid_t uid)
{
	return svc_conn_uid(c) == 0 || svc_conn_uid(c) == uid;
}

/* The uid an app key names ("uid:<n>" or "uid:<n>/<id>"); -1 for others ("sys:"). */
static long app_uid(const char *app)
{
	char *end;
	if (strncmp(app, "uid:", 4) != 0 || app[4] < '0' || app[4] > '9')
		return -1;
	unsigned long u = strtoul(app + 4, &end, 10);
	if ((*end != '\0' && *end != '/') || u > 0xffffffffu)
		return -1;
	return (long)u;
}

static bool sees_app(const struct svc_conn *c, const char *app)
{
	long u = app_uid(app);
	return svc_conn_uid(c) == 0 || (u >= 0 && (uid_t)u == svc_conn_uid(c));
}

/* ------------------------------------------------------------ apps */

struct app_acc {
	char app[RL_APP_MAX];
	uid_t uid;
	uint32_t clients, triggers, results;
	uint64_t bytes;
};

struct apps_ctx {
	const struct svc_conn *c;
	struct app_acc *v;
	size_t n;
	bool truncated;
};

static struct app_acc *app_get(struct apps_ctx *ax, const char *app, uid_t uid)
{
	if (!sees_app(ax->c, app))
		return NULL;
	for (size_t i = 0; i < ax->n; i++)
		if (!strcmp(ax->v[i].app, app))
			return &ax->v[i];
	if (ax->n == CTL_MAX_APPS) {
		ax->truncated = true;
		return NULL;
	}
	struct app_acc *a = &ax->v[ax->n++];
	memset(a, 0, sizeof(*a));
	util_strlcpy(a->app, app, sizeof(a->app));
	a->uid = uid;
	return a;
}

static void apps_conn(struct svc_conn *sc, void *ud)
{
	struct apps_ctx *ax = ud;
	if (svc_conn_role(sc) != SVC_ROLE_CLIENT || !svc_conn_hello_done(sc))
		return;
	struct app_acc *a = app_get(ax, svc_conn_app(sc), svc_conn_uid(sc));
	if (a)
		a->clients++;
}

static void apps_trigger(const struct svc_trigger_info *t, void *ud)
{
	struct apps_ctx *ax = ud;
	struct app_acc *a = app_get(ax, t->app, t->uid);
	if (a)
		a->triggers++;
}

static void apps_result(const char *app, uid_t uid, uint32_t n, uint64_t bytes, void *ud)
{
	struct apps_ctx *ax = ud;
	struct app_acc *a = app_get(ax, app, uid);
	if (a) {
		a->results += n;
		a->bytes += bytes;
	}
}

static int cmp_app(const void *x, const void *y)
{
	return strcmp(((const struct app_acc *)x)->app, ((const struct app_acc *)y)->app);
}

/* The apps c may see: connected, with triggers, or with stored results. */
static int collect_apps(const struct svc_conn *c, struct apps_ctx *ax)
{
	memset(ax, 0, sizeof(*ax));
	ax->c = c;
	ax->v = calloc(CTL_MAX_APPS, sizeof(*ax->v));
	if (!ax->v)
		return -ENOMEM;
	svc_conn_foreach(apps_conn, ax);
	svc_trigger_foreach(apps_trigger, ax);
	svc_db_apps(apps_result, ax);
	qsort(ax->v, ax->n, sizeof(*ax->v), cmp_app);
	return 0;
}

/* ------------------------------------------------------------ budgets */

static Pdctl__Budget *budget(struct arena *a, const char *app)
{
	struct rl_usage u[RL_NWIN];
	Pdctl__Budget *b = a_new(a, sizeof(*b));
	if (!b)
		return NULL;
	pdctl__budget__init(b);
	if (app)
		b->app = a_dup(a, app);
	if (svc_admit_usage(app, u) < 0) {
		b->error = "the rate-limit store is unreadable and fails closed "
			   "(see profilingd --reset-ratelimit)";
		return b;
	}
	b->window = a_new(a, RL_NWIN * sizeof(*b->window));
	if (!b->window)
		return NULL;
	for (int i = 0; i < RL_NWIN; i++) {
		Pdctl__Window *w = a_new(a, sizeof(*w));
		if (!w)
			return NULL;
		pdctl__window__init(w);
		w->length_ms = (uint64_t)u[i].length_ms;
		w->used = app ? u[i].app_used : u[i].system_used;
		w->cap = app ? u[i].app_cap : u[i].system_cap;
		b->window[b->n_window++] = w;
	}
	return b;
}

/* Cut a list until the reply fits; says whether it cut. */
static bool fit(const Pdctl__CtlReply *rep, size_t *n)
{
	bool cut = false;
	while (*n > 0 && pdctl__ctl_reply__get_packed_size(rep) > CTL_MAX_REPLY) {
		*n = *n / 2;
		cut = true;
	}
	return cut;
}

/* ------------------------------------------------------------ status */

struct status_ctx {
	struct svc_conn *c;
	struct arena *a;
	Pdctl__Status *st;
	size_t cap_w, cap_r, cap_s;
	uint32_t clients;
};

static void st_watcher(const char *name, const char *status, void *ud)
{
	struct status_ctx *sx = ud;
	Pdctl__Watcher *w = a_push(sx->a, (void ***)&sx->st->watcher, &sx->st->n_watcher, &sx->cap_w,
				   sizeof(*w));
	if (!w)
		return;
	pdctl__watcher__init(w);
	w->name = a_dup(sx->a, name);
	w->status = a_dup(sx->a, status);
}

static void st_conn(struct svc_conn *sc, void *ud)
{
	struct status_ctx *sx = ud;
	if (svc_conn_role(sc) == SVC_ROLE_CLIENT) {
		if (sees_uid(sx->c, svc_conn_uid(sc)))
			sx->clients++;
		return;
	}
	if (svc_conn_role(sc) != SVC_ROLE_RUNTIME || !svc_conn_hello_done(sc) || !sees_uid(sx->c, svc_conn_uid(sc)))
		return;
	Pdctl__Runtime *r = a_push(sx->a, (void ***)&sx->st->runtime, &sx->st->n_runtime, &sx->cap_r,
				   sizeof(*r));
	if (!r)
		return;
	pdctl__runtime__init(r);
	r->pid = (uint32_t)svc_conn_pid(sc);
	r->uid = (uint32_t)svc_conn_uid(sc);
	r->kind = a_dup(sx->a, svc_conn_kind(sc));
	uint32_t caps = svc_conn_runtime_caps(sc);
	r->caps = a_new(sx->a, 4 * sizeof(char *));
	for (uint32_t bit = 1; r->caps && (bit & NAMES_CAP_ALL); bit <<= 1)
		if (caps & bit)
			r->caps[r->n_caps++] = (char *)names_cap_str(bit);
}

static void fill_session(struct arena *a, Pdctl__Session *s, const struct svc_session_info *si)
{
	pdctl__session__init(s);
	s->id = si->id;
	s->pid = (uint32_t)si->pid;
	s->uid = (uint32_t)si->uid;
	s->app = a_dup(a, si->app);
	s->type = si->type;
	s->phase = a_dup(a, si->phase);
	s->elapsed_ms = si->elapsed_ms;
	s->has_duration_ms = 1;
	s->duration_ms = si->duration_ms;
	s->has_trigger = si->trigger != 0;
	s->trigger = si->trigger;
	if (si->tag && *si->tag)
		s->tag = a_dup(a, si->tag);
}

static void st_session(const struct svc_session_info *si, void *ud)
{
	struct status_ctx *sx = ud;
	if (!sees_uid(sx->c, si->uid))
		return;
	Pdctl__Session *s = a_push(sx->a, (void ***)&sx->st->session, &sx->st->n_session,
				   &sx->cap_s, sizeof(*s));
	if (s)
		fill_session(sx->a, s, si);
}

static int do_status(struct svc_conn *c, struct arena *a)
{
	Pdctl__CtlReply rep = PDCTL__CTL_REPLY__INIT;
	Pdctl__Status st = PDCTL__STATUS__INIT;
	struct status_ctx sx = { .c = c, .a = a, .st = &st };
	struct apps_ctx ax;

	st.version = PROFILINGD_VERSION;
	st.uptime_ms = util_mono_ms() - start_ms;
	st.daemon_pid = (uint32_t)getpid();
	svc_trigger_status(st_watcher, &sx);
	svc_conn_foreach(st_conn, &sx);
	svc_session_foreach(st_session, &sx);
	st.has_clients = 1;
	st.clients = sx.clients;
	if (collect_apps(c, &ax) < 0)
		return svc_ctl_error(c, PROF_E_UNKNOWN, "out of memory");
	st.budget = a_new(a, (ax.n + 1) * sizeof(*st.budget));
	if (st.budget) {
		/* The system-wide budget is everyone's business: it decides refusals. */
		if ((st.budget[st.n_budget] = budget(a, NULL)))
			st.n_budget++;
		for (size_t i = 0; i < ax.n; i++)
			if (strncmp(ax.v[i].app, "sys:", 4) != 0 &&
			    (st.budget[st.n_budget] = budget(a, ax.v[i].app)))
				st.n_budget++;
	}
	free(ax.v);
	if (a->oom)
		return svc_ctl_error(c, PROF_E_UNKNOWN, "out of memory");
	rep.body_case = PDCTL__CTL_REPLY__BODY_STATUS;
	rep.status = &st;
	/* Per-app budgets go first, then runtimes, then sessions. */
	bool cut = fit(&rep, &st.n_budget);
	cut = fit(&rep, &st.n_runtime) || cut;
	cut = fit(&rep, &st.n_session) || cut;
	st.has_truncated = cut || ax.truncated;
	st.truncated = st.has_truncated;
	return svc_ctl_send(c, &rep, -1);
}

/* ------------------------------------------------------------ apps */

static int do_apps(struct svc_conn *c, struct arena *a)
{
	Pdctl__CtlReply rep = PDCTL__CTL_REPLY__INIT;
	Pdctl__AppList al = PDCTL__APP_LIST__INIT;
	struct apps_ctx ax;

	if (collect_apps(c, &ax) < 0)
		return svc_ctl_error(c, PROF_E_UNKNOWN, "out of memory");
	al.app = a_new(a, (ax.n + 1) * sizeof(*al.app));
	for (size_t i = 0; al.app && i < ax.n; i++) {
		Pdctl__App *p = a_new(a, sizeof(*p));
		if (!p)
			break;
		pdctl__app__init(p);
		p->app = a_dup(a, ax.v[i].app);
		p->uid = (uint32_t)ax.v[i].uid;
		p->has_clients = p->has_triggers = p->has_results = p->has_result_bytes = 1;
		p->clients = ax.v[i].clients;
		p->triggers = ax.v[i].triggers;
		p->results = ax.v[i].results;
		p->result_bytes = ax.v[i].bytes;
		al.app[al.n_app++] = p;
	}
	bool trunc = ax.truncated;
	free(ax.v);
	if (a->oom)
		return svc_ctl_error(c, PROF_E_UNKNOWN, "out of memory");
	rep.body_case = PDCTL__CTL_REPLY__BODY_APPS;
	rep.apps = &al;
	al.truncated = fit(&rep, &al.n_app) || trunc;
	al.has_truncated = al.truncated;
	return svc_ctl_send(c, &rep, -1);
}

/* ------------------------------------------------------------ triggers */

/* An app filter the peer may use: 0, or a refusal already sent. */
static int check_filter(struct svc_conn *c, const char *app)
{
	char msg[RL_APP_MAX + 96];
	if (!app || sees_app(c, app))
		return 0;
	util_fmt(msg, sizeof(msg), "uid %u may only see its own apps (uid:%u...), not %s",
		 (unsigned)svc_conn_uid(c), (unsigned)svc_conn_uid(c), app);
	svc_ctl_error(c, PROF_E_PERMISSION, msg);
	return -EPERM;
}

struct trig_ctx {
	struct svc_conn *c;
	struct arena *a;
	const char *app;
	Pdctl__TriggerList *tl;
	size_t cap;
};

static void tr_one(const struct svc_trigger_info *t, void *ud)
{
	struct trig_ctx *tx = ud;
	if (!sees_app(tx->c, t->app) || (tx->app && strcmp(tx->app, t->app) != 0))
		return;
	Pdctl__TriggerInfo *ti = a_push(tx->a, (void ***)&tx->tl->trigger, &tx->tl->n_trigger,
					&tx->cap, sizeof(*ti));
	if (!ti)
		return;
	pdctl__trigger_info__init(ti);
	ti->app = a_dup(tx->a, t->app);
	ti->uid = (uint32_t)t->uid;
	ti->type = t->type;
	ti->capture = t->capture;
#define OPT(f, v) do { ti->has_##f = 1; ti->f = (v); } while (0)
	OPT(period_s, t->period_s);
	OPT(fired, t->fired);
	OPT(coalesced, t->coalesced);
	OPT(refused, t->refused);
	OPT(last_ns, t->last_ns);
	OPT(active_session, t->active);
#undef OPT
	if (t->system_name)
		ti->system_name = a_dup(tx->a, t->system_name);
	if (t->detail[0])
		ti->detail = a_dup(tx->a, t->detail);
}

static int do_triggers(struct svc_conn *c, struct arena *a, const Pdctl__AppFilter *f)
{
	Pdctl__CtlReply rep = PDCTL__CTL_REPLY__INIT;
	Pdctl__TriggerList tl = PDCTL__TRIGGER_LIST__INIT;
	struct trig_ctx tx = { .c = c, .a = a, .app = f->app, .tl = &tl };

	if (check_filter(c, f->app) < 0)
		return 0;
	svc_trigger_foreach(tr_one, &tx);
	if (a->oom)
		return svc_ctl_error(c, PROF_E_UNKNOWN, "out of memory");
	rep.body_case = PDCTL__CTL_REPLY__BODY_TRIGGERS;
	rep.triggers = &tl;
	tl.truncated = fit(&rep, &tl.n_trigger);
	tl.has_truncated = tl.truncated;
	return svc_ctl_send(c, &rep, -1);
}

/* ------------------------------------------------------------ ratelimit */

static int do_ratelimit(struct svc_conn *c, struct arena *a, const Pdctl__AppFilter *f)
{
	Pdctl__CtlReply rep = PDCTL__CTL_REPLY__INIT;
	Pdctl__RateLimit rl = PDCTL__RATE_LIMIT__INIT;
	struct apps_ctx ax = { 0 };

	if (check_filter(c, f->app) < 0)
		return 0;
	if (!f->app && collect_apps(c, &ax) < 0)
		return svc_ctl_error(c, PROF_E_UNKNOWN, "out of memory");
	rl.budget = a_new(a, (ax.n + 2) * sizeof(*rl.budget));
	if (rl.budget) {
		if ((rl.budget[rl.n_budget] = budget(a, NULL)))
			rl.n_budget++;
		if (f->app && (rl.budget[rl.n_budget] = budget(a, f->app)))
			rl.n_budget++;
		for (size_t i = 0; i < ax.n; i++)
			if (strncmp(ax.v[i].app, "sys:", 4) != 0 &&
			    (rl.budget[rl.n_budget] = budget(a, ax.v[i].app)))
				rl.n_budget++;
	}
	free(ax.v);
	if (a->oom)
		return svc_ctl_error(c, PROF_E_UNKNOWN, "out of memory");
	rep.body_case = PDCTL__CTL_REPLY__BODY_RATELIMIT;
	rep.ratelimit = &rl;
	fit(&rep, &rl.n_budget);
	return svc_ctl_send(c, &rep, -1);
}

/* ------------------------------------------------------------ budget */

/* profctl budget (issue #21): an app's request of a type, dry run. */
static int do_budget(struct svc_conn *c, struct arena *a, const Pdctl__BudgetAsk *q)
{
	Pdctl__CtlReply rep = PDCTL__CTL_REPLY__INIT;
	Pdctl__BudgetAnswer ba = PDCTL__BUDGET_ANSWER__INIT;
	Pdctl__BudgetCooldown tv[SVC_BUDGET_MAX_TRIGGERS], *tp[SVC_BUDGET_MAX_TRIGGERS];
	Pdctl__Budget *bp[2];
	static struct svc_budget b; /* 5 KiB: off the stack; one loop thread */
	char own[32];

	if (check_filter(c, q->app) < 0)
		return 0;
	util_fmt(own, sizeof(own), "uid:%u", (unsigned)svc_conn_uid(c));
	svc_budget_app(q->app ? q->app : own, q->type, &b);
	ba.app = b.app;
	ba.type = q->type;
	ba.error = (uint32_t)b.error;
	ba.message = b.error ? b.msg : NULL;
	ba.has_cost = b.cost >= 0;
	ba.cost = b.cost >= 0 ? (uint32_t)b.cost : 0;
	ba.has_admit_ms = b.has_admit;
	ba.admit_ms = (uint64_t)b.admit_ms;
	ba.now_ms = (uint64_t)b.now_ms;
	/* The same windows as profctl ratelimit: the app's, then the system's. */
	if (b.windows && (bp[0] = budget(a, b.app)) && (bp[1] = budget(a, NULL))) {
		ba.budget = bp;
		ba.n_budget = 2;
	}
	for (unsigned i = 0; i < b.ntrig; i++) {
		pdctl__budget_cooldown__init(&tv[i]);
		tv[i].type = b.trig[i].type;
		tv[i].capture = b.trig[i].capture;
		tv[i].has_period_s = 1;
		tv[i].period_s = b.trig[i].period_s;
		tv[i].has_ready_ms = b.trig[i].ready_ms != 0;
		tv[i].ready_ms = (uint64_t)b.trig[i].ready_ms;
		tp[ba.n_trigger++] = &tv[i];
	}
	ba.trigger = tp;
	if (a->oom)
		return svc_ctl_error(c, PROF_E_UNKNOWN, "out of memory");
	rep.body_case = PDCTL__CTL_REPLY__BODY_BUDGET;
	rep.budget = &ba;
	return svc_ctl_send(c, &rep, -1);
}

/* ------------------------------------------------------------ results */

static void fill_result(struct arena *a, Pdctl__ResultInfo *ri, const struct svc_db_row *r)
{
	pdctl__result_info__init(ri);
	ri->id = r->id;
	ri->session_id = r->session_id;
	ri->app = a_dup(a, r->app);
	ri->uid = (uint32_t)r->uid;
	ri->type = r->type;
	ri->has_trigger = 1;
	ri->trigger = r->trigger;
	ri->path = a_dup(a, r->path);
	ri->size = r->size;
	ri->format = a_dup(a, r->format);
#define OPT(f, v) do { ri->has_##f = 1; ri->f = (v); } while (0)
	OPT(start_ns, r->start_ns);
	OPT(end_ns, r->end_ns);
	OPT(delivered, r->delivered);
	OPT(attempts, r->attempts);
	OPT(pid, r->pid);
#undef OPT
	if (r->tag[0])
		ri->tag = a_dup(a, r->tag);
	if (r->note[0])
		ri->note = a_dup(a, r->note);
}

struct res_ctx {
	struct arena *a;
	Pdctl__ResultList *rl;
};

static void res_one(const struct svc_db_row *r, void *ud)
{
	struct res_ctx *rx = ud;
	Pdctl__ResultInfo *ri = a_new(rx->a, sizeof(*ri));
	if (!ri)
		return;
	fill_result(rx->a, ri, r);
	rx->rl->result[rx->rl->n_result++] = ri;
}

static int do_results(struct svc_conn *c, struct arena *a, const Pdctl__AppFilter *f)
{
	Pdctl__CtlReply rep = PDCTL__CTL_REPLY__INIT;
	Pdctl__ResultList rl = PDCTL__RESULT_LIST__INIT;
	struct res_ctx rx = { .a = a, .rl = &rl };

	if (check_filter(c, f->app) < 0)
		return 0;
	rl.result = a_new(a, CTL_MAX_RESULTS * sizeof(*rl.result));
	if (!rl.result)
		return svc_ctl_error(c, PROF_E_UNKNOWN, "out of memory");
	uid_t uid = svc_conn_uid(c);
	int total = svc_db_results_list(uid == 0, uid, f->app, CTL_MAX_RESULTS, res_one, &rx);
	if (total < 0)
		return svc_ctl_error(c, PROF_E_UNKNOWN, "cannot read the result index");
	if (a->oom)
		return svc_ctl_error(c, PROF_E_UNKNOWN, "out of memory");
	rep.body_case = PDCTL__CTL_REPLY__BODY_RESULTS;
	rep.results = &rl;
	rl.has_total = 1;
	rl.total = (uint32_t)total;
	rl.truncated = fit(&rep, &rl.n_result) || (size_t)total > rl.n_result;
	rl.has_truncated = rl.truncated;
	return svc_ctl_send(c, &rep, -1);
}

static int do_show(struct svc_conn *c, struct arena *a, uint64_t id, bool open_it)
{
	Pdctl__CtlReply rep = PDCTL__CTL_REPLY__INIT;
	Pdctl__ResultInfo ri;
	struct svc_db_row *r = a_new(a, sizeof(*r));
	char msg[SVC_PATH_MAX + 128];
	int fd = -1;

	if (!r)
		return svc_ctl_error(c, PROF_E_UNKNOWN, "out of memory");
	int e = svc_db_result_get(id, r);
	if (e == -ENOENT || (e == 0 && !sees_uid(c, r->uid))) {
		/* Another uid's result looks like a missing one: ids are not secrets,
		 * but its existence is none of this uid's business. */
		util_fmt(msg, sizeof(msg), "no result %llu%s (see profctl results)",
			 (unsigned long long)id, svc_conn_uid(c) ? " of this uid" : "");
		return svc_ctl_error(c, PROF_E_INVALID_REQUEST, msg);
	}
	if (e < 0)
		return svc_ctl_error(c, PROF_E_UNKNOWN, "cannot read the result index");
	if (open_it) {
		/* The app owns its result directory and may have put anything at
		 * the path: the same checks as a delivery to the app. */
		char what[96];
		fd = svc_store_open(r->path, (uid_t)r->uid, what, sizeof(what));
		if (fd < 0) {
			util_fmt(msg, sizeof(msg), "result %llu: cannot open %s: %s",
				 (unsigned long long)id, r->path, what);
			return svc_ctl_error(c, PROF_E_UNKNOWN, msg);
		}
	}
	fill_result(a, &ri, r);
	rep.body_case = PDCTL__CTL_REPLY__BODY_RESULT;
	rep.result = &ri;
	int rc = a->oom ? svc_ctl_error(c, PROF_E_UNKNOWN, "out of memory") : svc_ctl_send(c, &rep, fd);
	if (fd >= 0)
		close(fd);
	return rc;
}

/* ------------------------------------------------------------ entry */

void svc_ctl_view_init(void)
{
	start_ms = util_mono_ms();
}

int svc_ctl_view(struct svc_conn *c, const Pdctl__CtlRequest *m)
{
	struct arena a = { 0 };
	int r = 0;

	switch (m->cmd_case) {
	case PDCTL__CTL_REQUEST__CMD_STATUS: r = do_status(c, &a); break;
	case PDCTL__CTL_REQUEST__CMD_APPS: r = do_apps(c, &a); break;
	case PDCTL__CTL_REQUEST__CMD_TRIGGERS: r = do_triggers(c, &a, m->triggers); break;
	case PDCTL__CTL_REQUEST__CMD_RATELIMIT: r = do_ratelimit(c, &a, m->ratelimit); break;
	case PDCTL__CTL_REQUEST__CMD_BUDGET: r = do_budget(c, &a, m->budget); break;
	case PDCTL__CTL_REQUEST__CMD_RESULTS: r = do_results(c, &a, m->results); break;
	case PDCTL__CTL_REQUEST__CMD_SHOW: r = do_show(c, &a, m->show->id, false); break;
	case PDCTL__CTL_REQUEST__CMD_OPEN: r = do_show(c, &a, m->open->id, true); break;
	default: r = -EINVAL; break;
	}
	a_free(&a);
	return r;
}

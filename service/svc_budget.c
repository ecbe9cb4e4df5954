/*
 * The budget query (svc_budget.h has the contract): svc_request's dry run
 * for the decision, svc_admit's books for what is left and when, and the
 * app's triggers for their cooldowns.
 */
#include "svc_admit.h"
#include "svc_request.h"
#include "svc_trigger.h"
#include "svc_budget.h"

#include <string.h>

#include "util.h"

static void one_trigger(const struct svc_trigger_info *t, void *ud)
{
	struct svc_budget *b = ud;
	/* One registration per (app, type): the cap is never met, but checked. */
	if (strcmp(t->app, b->app) != 0 || b->ntrig >= SVC_BUDGET_MAX_TRIGGERS)
		return;
	struct svc_budget_trigger *bt = &b->trig[b->ntrig++];
	bt->type = t->type;
	bt->capture = t->capture;
	bt->period_s = t->period_s;
	if (svc_admit_cooldown_ready(b->app, t->type, t->period_s, &bt->ready_ms) < 0)
		bt->ready_ms = 0; /* a store that fails closed: the error says so */
}

/* Everything but the decision, for b->app once the dry run has named it. */
static void books(struct svc_budget *b, uint32_t type, bool system, bool waits)
{
	int64_t at;

	b->now_ms = svc_admit_now_ms();
	b->cost = svc_admit_cost(b->app, type, system);
	b->windows = svc_admit_usage(b->app, b->win) == 0;
	if (b->error == 0) {
		b->has_admit = true;
		b->admit_ms = b->now_ms;
	} else if (waits && svc_admit_next(b->app, type, system, &at) == 0 && at != INT64_MAX) {
		b->has_admit = true;
		b->admit_ms = at;
	}
	svc_trigger_foreach(one_trigger, b);
}

void svc_budget_client(struct svc_conn *c, const Pd__Request *rq, struct svc_budget *b)
{
	struct svc_request_dry dry;
	memset(b, 0, sizeof(*b));
	b->error = svc_request_dry_run(c, rq, &dry, b->msg, sizeof(b->msg));
	if (!b->error)
		b->msg[0] = '\0';
	util_strlcpy(b->app, dry.app, sizeof(b->app));
	books(b, rq->type, dry.system, dry.waits);
}

void svc_budget_app(const char *app, uint32_t type, struct svc_budget *b)
{
	Pd__Request rq = PD__REQUEST__INIT;
	struct svc_request_dry dry;
	memset(b, 0, sizeof(*b));
	rq.type = type;
	b->error = svc_request_dry_run_app(app, &rq, &dry, b->msg, sizeof(b->msg));
	if (!b->error)
		b->msg[0] = '\0';
	util_strlcpy(b->app, dry.app, sizeof(b->app));
	books(b, type, dry.system, dry.waits);
}

/*
 * svc_budget: the budget query (issue #21; prof_get_budget, profctl
 * budget). What a request of a type would get now, and what is left.
 *
 * Contract:
 * - The decision is svc_request's dry run: the snapshot a real request
 *   takes and svc_admit_decide's rule order over it, so the answer is the
 *   one the next request would get unless something changes in between.
 * - It spends nothing: no charge, no request id, no session row, no
 *   write to either database. Its reads are those of a request plus a
 *   walk of the cost entries inside the windows (svc_admit_next).
 * - The earliest admission is known when only the cost windows refuse
 *   (or nothing does): the time they have room again, if nothing else is
 *   admitted meanwhile. Another rule's refusal (a capture running, the
 *   disk, a store that fails closed) has no time in it: unknown.
 * - Triggers: the app's own registrations (at most one per type, so at
 *   most SVC_BUDGET_MAX_TRIGGERS), each with the time its cooldown ends.
 *   System triggers ([trigger.NAME]) are the operator's, not listed.
 * Called by the roles (svc_client, svc_ctl); calls svc_request,
 * svc_admit and svc_trigger, none of which call it.
 */
#ifndef PD_SVC_BUDGET_H
#define PD_SVC_BUDGET_H

#include <stdbool.h>
#include <stdint.h>

#include "profilingd.pb-c.h"
#include "rl.h"

struct svc_conn;

#define SVC_BUDGET_MAX_TRIGGERS RL_TRIGGER_MAX

struct svc_budget_trigger {
	uint32_t type, capture, period_s;
	int64_t ready_ms;               /* CLOCK_REALTIME ms it may fire again; 0: now */
};

struct svc_budget {
	int error;                      /* what the request would get: 0 or PROF_E_* ... */
	char msg[256];                  /* ... and why */
	char app[RL_APP_MAX];           /* whose budget */
	int cost;                       /* what it would charge each window; < 0 unknown */
	bool windows;                   /* win is filled (the store is readable) */
	struct rl_usage win[RL_NWIN];   /* the app's and the system's use, per window */
	bool has_admit;
	int64_t admit_ms;               /* earliest admission, CLOCK_REALTIME ms */
	int64_t now_ms;
	unsigned ntrig;
	struct svc_budget_trigger trig[SVC_BUDGET_MAX_TRIGGERS];
};

/* A client's query: rq as it would come in a Request from c. Fills b. */
void svc_budget_client(struct svc_conn *c, const Pd__Request *rq, struct svc_budget *b);
/* An app's request of type, with no process in view (profctl budget). */
void svc_budget_app(const char *app, uint32_t type, struct svc_budget *b);

#endif

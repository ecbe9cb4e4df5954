/*
 * The client role (svc_client.h): client.sock's messages, handed from the
 * transport (svc_conn.c) to the session and trigger modules.
 */
#include "svc_budget.h"
#include "svc_config.h"
#include "svc_deliver.h"
#include "svc_request.h"
#include "svc_trigger.h"
#include "svc_client.h"

#include <errno.h>
#include <string.h>

#include "log.h"
#include "profiling/profiling.h"
#include "svc_conn.h"
#include "svc_ident.h"
#include "svc_proto.h"
#include "wire.h"

static const struct svc_config *cfg;

static int reply(struct svc_conn *c, uint64_t token, int error, const char *why)
{
	Pd__DaemonMsg out = PD__DAEMON_MSG__INIT;
	Pd__RequestReply rep = PD__REQUEST_REPLY__INIT;
	rep.token = token;
	rep.error = (uint32_t)error;
	rep.message = (char *)why;
	out.msg_case = PD__DAEMON_MSG__MSG_REPLY;
	out.reply = &rep;
	return svc_conn_send(c, &out.base, -1);
}

/*
 * Before a message that acts for the peer's process: is it still the one
 * that connected? If not, the refusal (when answer) and the connection
 * closed. 0 or a negative errno (then the handler stops, and returns 0:
 * the drop is already under way).
 */
static int recheck(struct svc_conn *c, uint64_t token, bool answer)
{
	int r = svc_ident_check(svc_conn_ident(c));
	if (r == 0)
		return 0;
	if (answer)
		reply(c, token, PROF_E_PERMISSION, svc_conn_ident_why(r));
	svc_conn_drop(c, svc_conn_ident_why(r));
	return r;
}

static int client_hello(struct svc_conn *c, const void *msg)
{
	Pd__DaemonMsg out = PD__DAEMON_MSG__INIT;
	Pd__Welcome w = PD__WELCOME__INIT;

	(void)msg;
	if (svc_conn_hello_done(c))
		return -EPROTO;
	svc_conn_hello(c);
	w.version = PROF_API_VERSION;
	w.runtime_socket = (char *)cfg->runtime_socket;
	w.uid = (uint32_t)svc_conn_uid(c);
	w.has_max_message_bytes = 1;
	w.max_message_bytes = WIRE_CLIENT_MAX_MSG;
	out.msg_case = PD__DAEMON_MSG__MSG_WELCOME;
	out.welcome = &w;
	svc_trigger_client_up(c);
	return svc_conn_send(c, &out.base, -1);
}

static int client_request(struct svc_conn *c, const void *msg)
{
	const Pd__ClientMsg *m = msg;
	Pd__DaemonMsg out = PD__DAEMON_MSG__INIT;
	Pd__RequestReply rep = PD__REQUEST_REPLY__INIT;
	const char *why = NULL;
	uint64_t id = 0;

	if (recheck(c, m->request->token, true) < 0)
		return 0;
	int e = svc_request_client(c, m->request, &id, &why);
	if (e == SVC_REQUEST_LATER)
		return 0; /* admitted: client_answer replies once it is on disk */
	rep.token = m->request->token;
	rep.request_id = id;
	rep.error = (uint32_t)e;
	rep.message = (char *)why;
	out.msg_case = PD__DAEMON_MSG__MSG_REPLY;
	out.reply = &rep;
	/*
	 * A busy target is the everyday refusal (the app is told in this
	 * reply, and the running session has its own lines): DEBUG. Root is
	 * not rate-limited, and at INFO this line was a write(2) per refusal,
	 * 5 % of the daemon's time under bench/admission.sh.
	 */
	if (e)
		LOG_PEER(svc_conn_uid(c), e == PROF_E_PROFILING_IN_PROGRESS ? LOG_DEBUG : LOG_INFO,
			 "refused request from pid %d (%s): %s: %s", (int)svc_conn_pid(c),
			 svc_conn_app(c), prof_strerror(e), why ? why : "");
	int r = svc_conn_send(c, &out.base, -1);
	if (r == 0 && e)
		svc_deliver_refused(c, id, m->request, e, why);
	return r;
}

static int client_cancel(struct svc_conn *c, const void *msg)
{
	const Pd__ClientMsg *m = msg;
	svc_request_cancel(c, m->cancel->request_id);
	return 0;
}

static int client_set_listener(struct svc_conn *c, const void *msg)
{
	const Pd__SetListener *sl = ((const Pd__ClientMsg *)msg)->set_listener;
	svc_conn_set_listener(c, !sl->has_enable || sl->enable);
	if (svc_conn_is_listener(c))
		svc_deliver_redeliver(c);
	return 0;
}

static int client_ack(struct svc_conn *c, const void *msg)
{
	const Pd__ClientMsg *m = msg;
	svc_deliver_ack(c, m->ack->result_id);
	return 0;
}

static int client_add_trigger(struct svc_conn *c, const void *msg)
{
	const Pd__AddTrigger *at = ((const Pd__ClientMsg *)msg)->add_trigger;
	char why[160] = "";
	if (recheck(c, at->token, true) < 0)
		return 0;
	int e = svc_trigger_add(c, at->trigger, why, sizeof(why));
	return reply(c, at->token, e, e ? why : NULL);
}

static int client_remove_trigger(struct svc_conn *c, const void *msg)
{
	const Pd__RemoveTrigger *rt = ((const Pd__ClientMsg *)msg)->remove_trigger;
	int e = svc_trigger_remove(c, rt->has_type ? (int)rt->type : -1) < 0 ? PROF_E_UNKNOWN : 0;
	return reply(c, rt->token, e, NULL);
}

static int client_signal(struct svc_conn *c, const void *msg)
{
	const Pd__ClientMsg *m = msg;
	if (recheck(c, 0, false) < 0)
		return 0;
	svc_trigger_signal(c, m->signal);
	return 0;
}

/*
 * The budget query: what a Request with these fields would get now, from
 * the same dry run, spending nothing (svc_budget.h). The reply holds at
 * most RL_NWIN windows and SVC_BUDGET_MAX_TRIGGERS triggers: it fits.
 */
static int client_budget(struct svc_conn *c, const void *msg)
{
	const Pd__BudgetQuery *q = ((const Pd__ClientMsg *)msg)->budget_query;
	Pd__DaemonMsg out = PD__DAEMON_MSG__INIT;
	Pd__BudgetReply rep = PD__BUDGET_REPLY__INIT;
	Pd__Request rq = PD__REQUEST__INIT;
	Pd__BudgetWindow wv[RL_NWIN], *wp[RL_NWIN];
	Pd__BudgetTrigger tv[SVC_BUDGET_MAX_TRIGGERS], *tp[SVC_BUDGET_MAX_TRIGGERS];
	static struct svc_budget b; /* 5 KiB: off the stack; one loop thread */

	/* An answer for a process that is no longer the one that connected
	 * would be the wrong one: refused and closed, as a Request is. */
	if (recheck(c, q->token, true) < 0)
		return 0;
	rq.type = q->type;
	rq.params = q->params;
	rq.has_target_pid = q->has_target_pid;
	rq.target_pid = q->target_pid;
	svc_budget_client(c, &rq, &b);
	rep.token = q->token;
	rep.error = (uint32_t)b.error;
	rep.message = b.error ? b.msg : NULL;
	rep.has_cost = b.cost >= 0;
	rep.cost = b.cost >= 0 ? (uint32_t)b.cost : 0;
	rep.has_admit_ms = b.has_admit;
	rep.admit_ms = (uint64_t)b.admit_ms;
	rep.now_ms = (uint64_t)b.now_ms;
	for (int i = 0; b.windows && i < RL_NWIN; i++) {
		const struct rl_usage *u = &b.win[i];
		pd__budget_window__init(&wv[i]);
		wv[i].length_ms = (uint64_t)u->length_ms;
		wv[i].app_cap = u->app_cap;
		wv[i].app_left = u->app_used < u->app_cap ? u->app_cap - (uint32_t)u->app_used : 0;
		wv[i].system_cap = u->system_cap;
		wv[i].system_left = u->system_used < u->system_cap
			? u->system_cap - (uint32_t)u->system_used : 0;
		wp[rep.n_window++] = &wv[i];
	}
	rep.window = wp;
	for (unsigned i = 0; i < b.ntrig; i++) {
		pd__budget_trigger__init(&tv[i]);
		tv[i].type = b.trig[i].type;
		tv[i].capture = b.trig[i].capture;
		tv[i].has_period_s = 1;
		tv[i].period_s = b.trig[i].period_s;
		tv[i].has_ready_ms = b.trig[i].ready_ms != 0;
		tv[i].ready_ms = (uint64_t)b.trig[i].ready_ms;
		tp[rep.n_trigger++] = &tv[i];
	}
	rep.trigger = tp;
	out.msg_case = PD__DAEMON_MSG__MSG_BUDGET_REPLY;
	out.budget_reply = &rep;
	return svc_conn_send(c, &out.base, -1);
}

static const struct svc_conn_handler handlers[] = {
	{ PD__CLIENT_MSG__MSG_HELLO, false, client_hello },
	{ PD__CLIENT_MSG__MSG_REQUEST, true, client_request },
	{ PD__CLIENT_MSG__MSG_CANCEL, true, client_cancel },
	{ PD__CLIENT_MSG__MSG_SET_LISTENER, true, client_set_listener },
	{ PD__CLIENT_MSG__MSG_ACK, true, client_ack },
	{ PD__CLIENT_MSG__MSG_ADD_TRIGGER, true, client_add_trigger },
	{ PD__CLIENT_MSG__MSG_REMOVE_TRIGGER, true, client_remove_trigger },
	{ PD__CLIENT_MSG__MSG_SIGNAL, true, client_signal },
	{ PD__CLIENT_MSG__MSG_BUDGET_QUERY, true, client_budget },
};

static const struct svc_conn_role_ops ops = {
	.max_in = WIRE_CLIENT_MAX_MSG,
	.max_out = WIRE_CLIENT_MAX_MSG,
	.decode = svc_proto_client,
	.handlers = handlers,
	.nhandlers = sizeof(handlers) / sizeof(handlers[0]),
	.closed = svc_trigger_client_down,
};

/* The reply to a request admitted into a batch, sent after its commit
 * (svc_request.h); a refusal also goes to the app's listener. */
static void client_answer(struct svc_conn *c, const struct svc_request_answer *a)
{
	Pd__DaemonMsg out = PD__DAEMON_MSG__INIT;
	Pd__RequestReply rep = PD__REQUEST_REPLY__INIT;
	Pd__Request rq = PD__REQUEST__INIT;
	rep.token = a->token;
	rep.request_id = a->id;
	rep.error = (uint32_t)a->error;
	rep.message = (char *)a->why;
	out.msg_case = PD__DAEMON_MSG__MSG_REPLY;
	out.reply = &rep;
	if (svc_conn_send(c, &out.base, -1) == 0 && a->error) {
		rq.type = a->type;
		rq.tag = (char *)a->tag;
		svc_deliver_refused(c, a->id, &rq, a->error, a->why);
	}
}

int svc_client_init(const struct svc_config *c)
{
	cfg = c;
	svc_request_set_reply(client_answer);
	return svc_conn_role_register(SVC_ROLE_CLIENT, &ops);
}

void svc_client_fini(void)
{
	svc_request_set_reply(NULL);
	svc_conn_role_unregister(SVC_ROLE_CLIENT);
}

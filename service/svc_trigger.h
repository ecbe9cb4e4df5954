/*
 * svc_trigger: the apps' triggers (DESIGN §3, §5) and the glue from the
 * watchers in triggers/ to captures.
 *
 * Contract:
 * - A registration is one per (app, type), persisted in SQLite (and
 *   [trigger.NAME] system triggers from the config), at most
 *   SVC_MAX_TRIGGERS (past it: RATE_LIMIT_SYSTEM).
 * - A fired trigger goes through its cooldown (rate_limit_period_s), then
 *   svc_request_trigger's admission; its result goes to the app's result
 *   listener. While its capture runs a trigger is "active": a fire then is
 *   counted (coalesced), not stacked. It learns that the capture ended
 *   from svc_session's end observers, to which it subscribes.
 * - The processes an app's triggers watch: its connected clients' and
 *   those that exec the executable it registered from, under its uid; at
 *   most SVC_MAX_APP_PIDS in all and max_pids_per_uid per uid (past
 *   either the newest is not tracked, one line through the uid's log
 *   budget).
 * Above svc_request and svc_session; svc_conn's handlers and svc_ctl call it.
 */
#ifndef PD_SVC_TRIGGER_H
#define PD_SVC_TRIGGER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "profilingd.pb-c.h"

struct event_base;
struct svc_config;
struct svc_conn;

#define SVC_MAX_TRIGGERS 4096
#define SVC_MAX_APP_PIDS 4096

int svc_trigger_init(struct event_base *base, const struct svc_config *cfg);
void svc_trigger_fini(void);
/* An app registers (or replaces) a trigger. 0 or a positive PROF_E_*. */
int svc_trigger_add(struct svc_conn *c, const Pd__Trigger *t, char *why, size_t n);
/* type < 0: all of the app's. */
int svc_trigger_remove(struct svc_conn *c, int type);
void svc_trigger_signal(struct svc_conn *c, const Pd__AppSignal *sg);
/* A client of an app connected / went away: its pid is watched or not. */
void svc_trigger_client_up(struct svc_conn *c);
void svc_trigger_client_down(struct svc_conn *c);
/* A runtime said hello: arm what its app's triggers need (heap sampling). */
void svc_trigger_runtime_up(struct svc_conn *rt);
/* The runtime reported an event (an allocation failure). */
void svc_trigger_runtime_event(struct svc_conn *rt, const Pd__RuntimeEvent *ev);
/* One line per watcher: what runs and what fell back (status, logs). */
void svc_trigger_status(void (*fn)(const char *name, const char *status, void *ud), void *ud);
/* A registered trigger, for profctl triggers. */
struct svc_trigger_info {
	const char *app;
	uid_t uid;
	uint32_t type, capture, period_s;
	const char *system_name;        /* [trigger.NAME], or NULL for an app's */
	uint64_t fired, coalesced, refused, last_ns, active;
	char detail[128];               /* thresholds, readable */
};
void svc_trigger_foreach(void (*fn)(const struct svc_trigger_info *t, void *ud), void *ud);

#endif

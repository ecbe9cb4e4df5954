/*
 * svc_request: what starts a session, and what cancels one.
 *
 * Contract:
 * - An app's Request, a trigger's fire, a dead process's crash dump
 *   (adopt), and profctl's capture become a session here, after the
 *   admission rules (svc_admit_decide) have passed and the cost has been
 *   charged; a refusal is synchronous and costs nothing.
 * - Whose capture it is: the caller's own process, or (root only) another
 *   process, a system capture whose result goes to that process's app
 *   unless it runs with mixed ids (a setuid program): then to root.
 * - A process that is gone or replaced, or that the uid may not capture
 *   (svc_ident_capturable), is refused with PROF_E_PERMISSION.
 * - An admitted request is on disk (its charge in ratelimit.db, its
 *   session in profilingd.db) before any reply leaves the daemon: the
 *   turn's admissions are committed together at the end of the turn.
 * - Every entry point returns 0 or a positive PROF_E_* with a message;
 *   refusals of app requests get a request id too, so the app's result
 *   listener can match its copy (svc_deliver_refused).
 * The top of the pipeline: it calls svc_admit, svc_session, svc_capture
 * and svc_deliver; svc_conn's handlers, svc_trigger and svc_ctl call it.
 */
#ifndef PD_SVC_REQUEST_H
#define PD_SVC_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "profilingd.pb-c.h"
#include "rl.h"

struct svc_conn;

/*
 * Admissions taken in one event-loop turn are committed together, and
 * every peer's replies are held until then (group commit, see
 * svc_request.c). fini commits a batch still open and frees its event;
 * main.c calls it before svc_session_fini.
 */
void svc_request_fini(void);

/*
 * The answer to an app's request whose reply waited for its batch's
 * commit: error 0 (admitted, id is on disk) or the commit's PROF_E_*
 * with why (then the session is gone and nothing was charged on disk).
 * svc_client registers the function that sends it (a lower module
 * reporting up); called with the client still connected only.
 */
struct svc_request_answer {
	uint64_t token, id;
	uint32_t type;
	const char *tag;
	int error;
	const char *why;
};
typedef void (*svc_request_reply_fn)(struct svc_conn *client,
				     const struct svc_request_answer *a);
/* NULL: no one answers later; every request is then answered at once. */
void svc_request_set_reply(svc_request_reply_fn fn);

/* svc_request_client's "admitted, the answer comes through the reply
 * function after the commit": outside the PROF_E_* range. */
#define SVC_REQUEST_LATER 1000

/*
 * An app's request. Returns 0 and the new id, or a positive PROF_E_* with
 * *why for the synchronous refusal (and *id, 0 when none could be taken),
 * or SVC_REQUEST_LATER (and *id): admitted into this turn's batch, the
 * caller sends nothing; the reply function answers once it is committed.
 */
int svc_request_client(struct svc_conn *client, const Pd__Request *rq, uint64_t *id,
		       const char **why);
/*
 * The budget query (issue #21): the answer svc_request_client would give
 * rq now, from the same snapshot and the same rules, spending nothing (no
 * charge, no request id, no session). 0 or a positive PROF_E_* with msg;
 * dry says whose budget it is and whether the cost windows alone stand in
 * the way (svc_admit_query).
 */
struct svc_request_dry {
	char app[RL_APP_MAX];           /* the app the cost would be charged to */
	bool system;                    /* a system capture (root, another process) */
	bool waits;                     /* only the cost windows refuse, or nothing does */
};
int svc_request_dry_run(struct svc_conn *client, const Pd__Request *rq,
			struct svc_request_dry *dry, char *msg, size_t n);
/* The same for an app's request with no process in view (profctl budget):
 * the process's rules (svc_admit_in.app_only) are not asked. */
int svc_request_dry_run_app(const char *app, const Pd__Request *rq, struct svc_request_dry *dry,
			    char *msg, size_t n);
/* The app cancels its request id: CANCELLED. 0 or -ENOENT (not its own, or over). */
int svc_request_cancel(struct svc_conn *client, uint64_t id);
/*
 * The daemon stops session id (method events' kill switch): CANCELLED
 * with why. 0 or -ENOENT (over already).
 */
int svc_request_stop(uint64_t id, const char *why);
/* Stop every session of capture type `type` the same way; how many. */
int svc_request_stop_type(uint32_t type, const char *why);
/*
 * A trigger's capture of pid for app (a system capture), results to the
 * app's listener. wait_ms: how long to wait for its runtime's hello.
 * start: the start time the process had when the trigger saw it (0: the
 * process that has pid now). 0 or a positive PROF_E_* with msg.
 */
int svc_request_trigger(pid_t pid, uint64_t start, uid_t uid, gid_t gid, const char *app,
			uint32_t type, const Pd__Params *params, uint32_t trigger, const char *tag,
			uint32_t wait_ms, uint64_t *id, char *msg, size_t n);
/*
 * Make a result of an artifact a dead process left at path (a crash ring
 * dump), redacted as format. Takes path over (removed on refusal). 0 or a
 * positive PROF_E_*.
 */
int svc_request_adopt(pid_t pid, uid_t uid, gid_t gid, const char *app, const char *path,
		      const char *format, uint32_t trigger, const char *tag, char *msg, size_t n);

#endif

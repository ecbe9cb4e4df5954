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
 * - Every entry point returns 0 or a positive PROF_E_* with a message;
 *   refusals of app requests get a request id too, so the app's result
 *   listener can match its copy (svc_deliver_refused).
 * The top of the pipeline: it calls svc_admit, svc_session, svc_capture
 * and svc_deliver; svc_conn's handlers, svc_trigger and svc_ctl call it.
 */
#ifndef PD_SVC_REQUEST_H
#define PD_SVC_REQUEST_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "profilingd.pb-c.h"

struct svc_conn;

/*
 * An app's request. Returns 0 and the new id, or a positive PROF_E_* with
 * *why for the synchronous refusal (and *id, 0 when none could be taken).
 */
int svc_request_client(struct svc_conn *client, const Pd__Request *rq, uint64_t *id,
		       const char **why);
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

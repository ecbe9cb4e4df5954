/*
 * svc_deliver: a session's way to the app, once its capture is over.
 *
 * Contract:
 * - svc_deliver_start (svc_session_priv.h) checks the raw artifact (size,
 *   format), runs the redactor (svc_redact) into a root-owned .tmp-<id> in
 *   the app's directory, then commits: quota, fsync, chown, rename to the
 *   result name (svc_store), and the index row with the session's "done"
 *   in one transaction. Only then is the Result with its fd offered: to
 *   the requesting connection, else to a result listener of the app; each
 *   send counts an attempt. An app that is not connected gets it from
 *   svc_deliver_redeliver when its listener is back, until acked, out of
 *   attempts (delivery_attempts) or too old (delivery_max_age_days).
 * - svc_deliver_fail ends a session with a failure Result (PROF_E_*),
 *   recorded first; every failed session ends through it.
 * - Nothing of a session is left on disk once its result is out: raw
 *   files are removed before the app hears the end (kept only with
 *   keep_failed_raw).
 * Above svc_session and svc_store; below svc_capture and svc_request.
 */
#ifndef PD_SVC_DELIVER_H
#define PD_SVC_DELIVER_H

#include <stdint.h>

#include "profilingd.pb-c.h"

struct svc_conn;

/* After the refusal's reply: give the app's result listener its copy. */
void svc_deliver_refused(struct svc_conn *client, uint64_t id, const Pd__Request *rq,
			 int error, const char *why);
/* The app's listener connected: send it what was not delivered yet (at
 * most min(16, max_queued_msgs / 2) now; the rest on its next call). */
void svc_deliver_redeliver(struct svc_conn *client);
/* The app acknowledged a delivered result (root: any app's). */
void svc_deliver_ack(struct svc_conn *client, uint64_t result_id);

#endif

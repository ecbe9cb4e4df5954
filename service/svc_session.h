/*
 * svc_session: the table of running captures and their lifecycle.
 *
 * Contract:
 * - A session is one capture of one process for one app, from admission
 *   (svc_request) to its end: a result committed and offered (svc_deliver)
 *   or a failure result. At most max_sessions run, one per process
 *   (svc_admit's rules; this module only counts).
 * - Phase changes go to one phase observer (svc_ctl's progress replies):
 *   waiting-for-runtime, capturing, redacting, delivering, then done or
 *   failed.
 * - Every session end, whatever ended it (done, failed, the daemon
 *   stopping), goes to each subscribed end observer once, before the
 *   session is freed. Modules above (svc_trigger) subscribe instead of
 *   being called, so this module calls nothing above it. At most
 *   SVC_SESSION_END_OBSERVERS; a subscription past it is refused with
 *   -ENOSPC (the daemon has a fixed few, none a peer can add).
 * - svc_session_fini ends what still runs as abandoned (the app gets a
 *   failure result when it is back) and stops the store (svc_store).
 */
#ifndef PD_SVC_SESSION_H
#define PD_SVC_SESSION_H

#include <stdint.h>
#include <sys/types.h>

#include "svc_store.h" /* NAMES_CAP_*, for the runtimes' capabilities */

struct event_base;
struct svc_config;

int svc_session_init(struct event_base *base, const struct svc_config *cfg);
void svc_session_fini(void);

/* The OOM trigger's capture id of pid was started by the runtime's OOM
 * event, which named tid as the thread whose allocation failed: the heap
 * graph marks that thread's stack (issue #20). Kept only when tid is one of
 * pid's threads now and session id is still pid's. 0, -ESRCH or -EINVAL. */
int svc_session_set_oom_tid(uint64_t id, pid_t pid, uint32_t tid);

/* Tell pid's runtime that what its held event started is over (EventDone). */
void svc_session_event_done(pid_t pid, uint32_t kind, int status);

/* A running capture, for profctl status and request --wait. */
struct svc_session_info {
	uint64_t id;
	pid_t pid;
	uid_t uid;
	const char *app, *tag;
	uint32_t type, trigger, duration_ms;
	const char *phase;              /* waiting-for-runtime capturing redacting delivering
					 * done failed */
	uint64_t elapsed_ms;            /* since the capture (or the wait) started */
	int error;                      /* failed: PROF_E_*, with message */
	const char *message;
	uint64_t result_id;             /* done */
	const char *path;
};
void svc_session_foreach(void (*fn)(const struct svc_session_info *s, void *ud), void *ud);
/* One observer of phase changes (svc_ctl): called as each session moves on,
 * the last time with phase "done" or "failed". NULL removes it. */
typedef void (*svc_session_observer)(const struct svc_session_info *s);
void svc_session_set_observer(svc_session_observer fn);

/* A session's end, for its end observers; app points into the session
 * and lives only during the call. */
struct svc_session_end {
	uint64_t id;
	const char *app;
	pid_t pid;
	uint32_t type, trigger;         /* trigger: PROF_TRIGGER_*, 0 for a request */
};
#define SVC_SESSION_END_OBSERVERS 4
typedef void (*svc_session_end_fn)(const struct svc_session_end *e, void *ud);
/* 0, -EEXIST (fn, ud subscribed already) or -ENOSPC. */
int svc_session_subscribe_end(svc_session_end_fn fn, void *ud);
/* Remove (fn, ud); nothing when it is not subscribed. */
void svc_session_unsubscribe_end(svc_session_end_fn fn, void *ud);

#endif

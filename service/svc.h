/*
 * profilingd's service modules (svc_*). Each has an _init/_fini pair where it
 * holds state; main.c starts them lower modules first and stops them in the
 * reverse order (docs/ARCHITECTURE.md, "Helpers, the spawner and the state
 * database"). Modules with a header of their own are included from here
 * until svc.h goes (issue #16).
 */
#ifndef PD_SVC_H
#define PD_SVC_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <sys/un.h>

#include "profilingd.pb-c.h"
#include "rl.h"

struct event_base;

/* SVC_PATH_MAX, SVC_SUN_MAX, SVC_MAX_DLP, SVC_MAX_SYSTRIG and the request
 * parameter ranges (SVC_DURATION_*, SVC_HZ_*, ...): svc_config.h. */
#include "svc_config.h"

#include "svc_db.h"
#include "svc_db_result.h"

/* Moved to their own headers (issue 16); svc.h goes once every slice is in. */
#include "svc_proto.h"
#include "svc_outq.h"
#include "svc_listen.h"
#include "svc_conn.h"
#include "svc_client.h"
#include "svc_runtime.h"

/* ----------------------------------------------------------- svc_admit.c */

/*
 * Admission rules other than the session ones: the cost windows (rl) and
 * the disk quota. Each check returns 0 or a positive PROF_E_* with a
 * message in why[n].
 */
int svc_admit_init(const struct svc_config *cfg);
void svc_admit_fini(void);
/* Config reload: new caps and costs for the next admissions. */
int svc_admit_reconfigure(const struct rl_config *rc);
int svc_admit_rate_check(const char *app, uint32_t type, bool system, char *why, size_t n);
int svc_admit_disk_check(const char *app, char *why, size_t n);
/* Charge the cost (records it). 0 or a positive PROF_E_*. */
int svc_admit_charge(const char *app, uint32_t type, bool system, char *why, size_t n);
/* Reserve quota for a new result of size bytes; refused if it would not fit. */
int svc_admit_result_reserve(const char *app, uint64_t size, char *why, size_t n);
/* A trigger's cooldown, checked before its costs; then recorded once fired. */
int svc_admit_cooldown_check(const char *app, uint32_t trigger, uint32_t period_s, char *why,
			     size_t n);
void svc_admit_cooldown_record(const char *app, uint32_t trigger);
/* Stored results changed outside admission (retention): recount. */
int svc_admit_recount(void);
/* Fill usage for status and tests. */
int svc_admit_usage(const char *app, struct rl_usage out[RL_NWIN]);

#include "svc_helper.h"
#include "svc_redact.h"
#include "svc_spawn.h"
#include "svc_sandbox.h"

/* --------------------------------------------------------- svc_trigger.c */

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
/* The state dir's raw/ (crash dumps are made there). */
const char *svc_session_raw_dir(void);
/* A runtime said hello: arm what its app's triggers need (heap sampling). */
void svc_trigger_runtime_up(struct svc_conn *rt);
/* The runtime reported an event (an allocation failure). */
void svc_trigger_runtime_event(struct svc_conn *rt, const Pd__RuntimeEvent *ev);
/* A trigger's session ended. */
void svc_trigger_session_end(const char *app, uint32_t trigger, uint64_t session_id, pid_t pid,
			     uint32_t type);
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

/* ------------------------------------------------------------- svc_jvm.c */

/* pid runs a HotSpot JVM (a java launcher, or its hsperfdata file exists). */
bool svc_jvm_detect(pid_t pid);
/* The JVM's main class, -jar file or -m module/class. 0 or -errno. */
int svc_jvm_main(pid_t pid, char *out, size_t n);
/* main is want, or a jar path whose file name is want. */
bool svc_jvm_main_matches(const char *main, const char *want);

/* --------------------------------------------------------- svc_session.c */

int svc_session_init(struct event_base *base, const struct svc_config *cfg);
void svc_session_fini(void);
/*
 * An app's request. Returns 0 and the new id, or a positive PROF_E_* with
 * *why for the synchronous refusal.
 */
int svc_session_request(struct svc_conn *client, const Pd__Request *rq,
			uint64_t *id, const char **why);
int svc_session_cancel(struct svc_conn *client, uint64_t id);
/*
 * A trigger's capture of pid for app (a system capture), results to the
 * app's listener. wait_ms: how long to wait for its runtime's hello.
 * start: the start time the process had when the trigger saw it (0: the
 * process that has pid now); a process that is gone or replaced, or that
 * uid may not capture (svc_ident_capturable), is refused with
 * PROF_E_PERMISSION. 0 or a positive PROF_E_* with msg.
 */
int svc_session_trigger(pid_t pid, uint64_t start, uid_t uid, gid_t gid, const char *app,
			uint32_t type, const Pd__Params *params, uint32_t trigger, const char *tag,
			uint32_t wait_ms, uint64_t *id, char *msg, size_t n);
/*
 * Make a result of an artifact a dead process left at path (a crash ring
 * dump), redacted as format. Takes path over. 0 or a positive PROF_E_*.
 */
int svc_session_adopt(pid_t pid, uid_t uid, gid_t gid, const char *app, const char *path,
		      const char *format, uint32_t trigger, const char *tag, char *msg, size_t n);
/* End pid's running capture of trigger early (fully drawn). */
int svc_session_stop(pid_t pid, uint32_t trigger);
/* After the refusal's reply: give the app's result listener its copy. */
void svc_session_refused(struct svc_conn *client, uint64_t id, const Pd__Request *rq,
			 int error, const char *why);
/* The app's listener connected: send it what was not delivered yet. */
void svc_session_redeliver(struct svc_conn *client);
/* The app acknowledged a delivered result. */
void svc_session_ack(struct svc_conn *client, uint64_t result_id);
/* Retention: delete expired results and the oldest over a quota. now_ns is
 * injectable for tests. Returns how many were removed. */
int svc_store_prune(const struct svc_config *cfg, uint64_t now_ns);
/*
 * Open a stored result for delivery to uid (to the app, or to profctl).
 * The file sits in the app's own directory, where the app may have put
 * anything by now, and the daemon opens it with CAP_DAC_OVERRIDE: so no
 * link is followed and no FIFO waited on (O_NOFOLLOW|O_NONBLOCK), and the
 * file must be a regular file owned by uid with exactly one link (not a
 * hard link to a file of someone else's). Returns the fd or -errno:
 * -ENOENT gone, -ELOOP a symlink, -EINVAL not a regular file, -EPERM
 * another owner, -EMLINK more than one link. what (may be NULL) gets a
 * reason for the log.
 */
int svc_store_open(const char *path, uid_t uid, char *what, size_t n);
/* A runtime said hello: start what waits for it. */
void svc_session_runtime_up(struct svc_conn *rt);
/* A runtime connection is closing: fail what it was capturing. */
void svc_session_runtime_down(struct svc_conn *rt);
/* CaptureDone from a runtime. A negative return closes the runtime. */
int svc_session_capture_done(struct svc_conn *rt, const Pd__CaptureDone *d);
unsigned svc_session_active(void);
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

#include "svc_ctl.h"

#endif

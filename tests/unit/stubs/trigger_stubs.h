/*
 * Stubs of the neighbours of svc_trigger.c and svc_trigreg.c for
 * test_trigger: the watchers (triggers/) keep the ops they were given so
 * the test can play a watcher; captures, cooldowns and the session end
 * subscription are recorded.
 */
#ifndef PD_TRIGGER_STUBS_H
#define PD_TRIGGER_STUBS_H

#include "profilingd.pb-c.h"
#include "svc_ident.h"
#include "svc_session.h"
#include "trg.h"

struct svc_conn {
	pid_t pid;
	uid_t uid;
	gid_t gid;
	char app[64];
	struct svc_ident ident;
	uint32_t caps;
};

/* What trg_proc_init was given. */
extern const struct trg_ops *stub_ops;
/* The end observer svc_trigger subscribed (NULL: none). */
extern svc_session_end_fn stub_end_fn;
extern void *stub_end_ud;
/* svc_request_trigger: calls, its answer, the id it gives, and the last call. */
extern int stub_requests, stub_request_ret;
extern uint64_t stub_next_id;
extern struct stub_request {
	pid_t pid;
	uid_t uid;
	uint32_t type, trigger, wait_ms;
	char tag[64];
	Pd__Params params;
} stub_last;
/* svc_admit_cooldown_check's answer; cooldowns recorded. */
extern int stub_cooldown_ret, stub_cooldown_records;
/* svc_capture_stop calls (pid, trigger) and svc_session_event_done's status. */
extern int stub_stops, stub_event_done;
extern uint64_t stub_oom_session;
extern uint32_t stub_oom_tid;
extern pid_t stub_cpu_watched;

void stub_reset(void);

#endif

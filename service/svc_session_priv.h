/*
 * The session record, shared by the pipeline's modules only: svc_session
 * (table, lifecycle), svc_request (creates sessions), svc_capture (starts
 * and completes captures), svc_deliver (redaction, commit, delivery, the
 * failure result). Nothing outside service/svc_{session,request,capture,
 * deliver}.c includes it.
 *
 *   request --(runtime hello'd?)--> WAIT_RUNTIME --hello--> CAPTURING
 *   CAPTURING --CaptureDone, drained--> REDACTING --> commit --> deliver
 *   any state --cancel / deadline / runtime gone / error--> failed Result
 */
#ifndef PD_SVC_SESSION_PRIV_H
#define PD_SVC_SESSION_PRIV_H

#include "svc_config.h"
#include "svc_ident.h"
#include "svc_redact.h"
#include "wire.h"

enum sess_state { S_WAIT_RUNTIME, S_CAPTURING, S_REDACTING };

/*
 * The paths of a session's files, 12 KiB of the record's 14 (issue #18:
 * zeroing them was 1.8 % of the daemon per admission). Allocated by
 * svc_session_files() when a capture first makes a file (the raw file,
 * the kernel trace, the redactor's output), freed with the session: a
 * request refused, cancelled or failed before its capture starts never
 * has one. "" in a path: that file does not exist.
 */
struct sess_files {
	char raw_path[SVC_PATH_MAX];
	char out_path[SVC_PATH_MAX + 32];
	char ft_path[SVC_PATH_MAX + 32];
};

struct session {
	uint64_t id;
	uid_t uid;
	gid_t gid;
	pid_t pid;
	struct svc_ident ident;          /* the target process (pid 0: none, a dead one's dump) */
	uint32_t type;
	uint32_t duration_ms, hz, clock;
	uint32_t format;                 /* enum prof_format, admitted (issue #20) */
	uint32_t trigger;                /* PROF_TRIGGER_*, 0 for a direct request */
	char tag[WIRE_MAX_TAG + 1];
	char app[RL_APP_MAX];
	uint64_t client_id;
	struct svc_conn *rt;
	enum sess_state state;
	int raw_fd;
	struct sess_files *files;        /* NULL: no file made yet */
	struct svc_sink *sink;           /* the runtime's pipe, drained into raw_fd */
	bool done_msg;                   /* CaptureDone came; waiting for the drain */
	uint64_t declared;               /* its bytes; UINT64_MAX: not declared */
	int out_fd;                      /* the redactor's output, in the app's dir */
	struct svc_helper *rd;
	uint64_t samples, dropped;       /* from the runtime, for the log */
	char note[192];                  /* for the app with its result, or "" */
	/* System traces: kernel sched data recorded beside the runtime's ring. */
	struct svc_helper *ft;
	struct svc_helper *perf;         /* agentless stack sampling */
	struct svc_helper *ja;           /* JVM: attach heap dump or agent load */
	bool jvm;                        /* a HotSpot VM (svc_jvm_detect) */
	bool agent_tried;                /* the JVMTI agent load was attempted */
	bool released;                   /* EventDone sent to a runtime holding for us */
	int ft_fd;
	bool ft_running, capture_done;
	uint32_t buffer_kb;
	uint32_t fill_policy;            /* enum prof_fill_policy (system trace) */
	uint32_t java_allocs;            /* enum prof_switch (JVM heap profile) */
	uint32_t background_ms;          /* of the running background trace, before ... */
	uint64_t admitted_boot_ns;       /* ... this: its admission, CLOCK_BOOTTIME */
	uint32_t wait_ms;                /* for a runtime to say hello */
	uint32_t interval;               /* heap profile sampling interval, bytes */
	/* PROF_METHOD_EVENTS: the targets as admitted (allocated for that type
	 * only, freed with the session), every Nth stack, the hit cap. */
	char (*methods)[SVC_METHOD_TARGET_LEN];
	unsigned nmethods;
	uint32_t method_every, method_max_hits;
	uint32_t method_budget_us;     /* 0: [capture] method_budget_us */
	const char *redact_format;       /* NULL: the type's format */
	/* Heap formats (issue #20): the process as read at capture start,
	 * and the OOM thread the runtime named. */
	struct svc_redact_proc proc;
	struct event *timer;
	void (*on_timer)(struct session *s);
	uint64_t start_ns;
	struct session *next;
};

/* What svc_session_init was given, for the modules of the pipeline, which
 * have no init of their own. */
const struct svc_config *svc_session_config(void);
struct event_base *svc_session_base(void);

/* The table (svc_session.c). */
struct session *svc_session_first(void);       /* then s->next */
struct session *svc_session_find(uint64_t id);
/* The session capturing pid, or NULL. */
struct session *svc_session_of_pid(pid_t pid);
unsigned svc_session_count(void);
/* A blank record (no fds, ident empty), not in the table, whose timer
 * calls on_timer; NULL: no memory. */
struct session *svc_session_alloc(void (*on_timer)(struct session *s));
/* s->files, allocated (all paths "") if it was not: 0 or -ENOMEM. */
int svc_session_files(struct session *s);
/* A record never added: freed, without an end. */
void svc_session_discard(struct session *s);
/* Put s in the table: it runs from now on. */
void svc_session_add(struct session *s);
/* The end: end observers, then the record and all it holds go (s may be
 * in the table or not). */
void svc_session_free(struct session *s);
/* Close and remove the session's files and stop its helpers; done before
 * the app hears the end, so nothing of it is left once the result is out. */
void svc_session_release_files(struct session *s);
/* An OOM capture is written (or failed): a runtime holding its OOM thread
 * for it may let the process go on (EventDone with status). Once. */
void svc_session_release_hold(struct session *s, int status);
/* Phase change to the phase observer (phase NULL: the state's name). */
void svc_session_notify(struct session *s, const char *phase, int error, const char *msg,
			uint64_t result_id, const char *path);
/* The runtime of the session's own process (same pid and start time), or NULL. */
struct svc_conn *svc_session_runtime_of(const struct session *s);
/* (Re)start the session's timer: ms from now. */
void svc_session_arm(struct session *s, uint32_t ms);

/* svc_capture.c: the session's timer (the wait for a runtime, then the
 * deadline); the raw file raw/<id>.raw, created for s (0 or -errno); a
 * CaptureCancel to the runtime of a capturing session. */
void svc_capture_timer(struct session *s);
int svc_capture_open_raw(struct session *s);
void svc_capture_cancel(struct session *s);

/* svc_deliver.c: the capture is in raw_fd: redact, commit, deliver. */
void svc_deliver_start(struct session *s);
/* End s with an error: record it, remove its files, tell the app, free it. */
void svc_deliver_fail(struct session *s, int error, const char *msg);

#endif

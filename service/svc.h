/*
 * profilingd's service modules (svc_*). Each has an _init/_fini pair where it
 * holds state; main.c starts them in dependency order:
 *   config -> db -> session -> conn (listeners) -> event loop.
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

#define SVC_PATH_MAX 4096
#define SVC_MAX_DLP  32
#define SVC_MAX_SYSTRIG 32
#define SVC_SUN_MAX  sizeof(((struct sockaddr_un *)0)->sun_path)

/* Request parameter ranges (profiling.h documents them for apps). */
#define SVC_DURATION_MIN_MS 100
#define SVC_DURATION_MAX_MS 120000
#define SVC_HZ_MIN 1
#define SVC_HZ_MAX 1000
#define SVC_INTERVAL_MAX (1u << 30) /* heap profile sampling interval, bytes */
#define SVC_BUFFER_KB_MIN 64     /* per-CPU kernel trace buffer of a system trace */
#define SVC_BUFFER_KB_MAX 65536

/* ---------------------------------------------------------- svc_config.c */

/*
 * The redactor's own system user: a uid no other program runs as, so none
 * can ptrace or signal a redactor holding another app's data. Created by
 * the .deb's postinst and by quickstart.sh; the daemon refuses to start
 * without it ([redact] user names another).
 */
#define SVC_REDACT_USER "profilingd-redact"

struct svc_config {
	char state_dir[SVC_PATH_MAX];
	char client_socket[SVC_SUN_MAX];
	char runtime_socket[SVC_SUN_MAX];
	int log_level;
	uint32_t max_clients;          /* all client.sock connections */
	uint32_t max_clients_per_uid;
	uint32_t max_runtimes;         /* runtime.sock connections */
	uint32_t max_runtimes_per_uid;
	uint32_t hello_timeout_ms;     /* a client or runtime silent this long is closed */
	uint32_t max_pids_per_uid;     /* processes the trigger watchers track per uid */
	uint32_t max_queued_msgs;      /* per peer; a peer that lets more pile up is closed */
	uint32_t max_sessions;         /* concurrent captures, system-wide */
	uint32_t default_duration_ms;
	uint32_t default_frequency_hz;
	uint32_t deadline_grace_ms;    /* runtime deadline = duration + grace */
	uint32_t runtime_wait_ms;      /* how long a request waits for a runtime hello */
	uint64_t max_result_bytes;     /* a bigger artifact fails with POST_PROCESSING */
	uint64_t max_app_result_bytes; /* stored results per app */
	uint64_t max_total_result_bytes;
	uint64_t min_free_bytes;       /* free space the state filesystem keeps */
	struct rl_config rl;           /* [ratelimit] */
	/* [redact] */
	char redactor[SVC_PATH_MAX];   /* "" = beside the daemon, then libexec */
	char redact_user[64];          /* default SVC_REDACT_USER */
	uint32_t redact_timeout_ms;
	uint64_t redact_max_memory;
	bool keep_failed_raw;          /* debug: keep artifacts that failed to redact */
	/* [dlp] */
	bool dlp_builtin;
	char dlp[SVC_MAX_DLP][256];
	unsigned ndlp;
	/* [jvm] */
	char jvm_agent[SVC_PATH_MAX];  /* "" = beside the daemon, then the library dir */
	uint32_t jvm_attach_timeout_ms;
	bool jvm_dump_via_agent;       /* heap dumps by a connected agent, not by attach */
	/* [memory]: OOM warnings from the whole machine's memory */
	uint32_t mem_available_percent; /* MemAvailable under this share of MemTotal; 0 off */
	uint32_t mem_stall_percent;     /* /proc/pressure/memory "some" share of 1 s; 0 off */
	/* [results] */
	uint32_t retention_days;
	uint32_t delivery_attempts;
	uint32_t delivery_max_age_days;
	/* [trigger.NAME]: system triggers for programs that do not link libprofiling. */
	struct svc_systrig {
		char name[32];
		char exe[SVC_PATH_MAX];  /* match by executable path ... */
		char cgroup[256];        /* ... and/or by a substring of /proc/<pid>/cgroup */
		char java_main[256];     /* ... and/or a JVM's main class or jar */
		uint32_t type, capture, period_s, cpu_percent, cpu_window_ms, memory_percent;
		uint32_t timeout_ms, duration_ms;
		uint64_t memory_bytes;
	} systrig[SVC_MAX_SYSTRIG];
	unsigned nsystrig;
	/* [apps]: executable path -> app id, for several apps under one uid. */
	struct svc_app_map {
		char exe[SVC_PATH_MAX];
		char id[128];
	} *apps;
	unsigned napps;
	/* control.sock (profctl); "" = <state_dir>/control.sock. */
	char control_socket[SVC_SUN_MAX];
	uint32_t max_ctl_clients;      /* control connections, in total and per uid */
	uint32_t max_ctl_per_uid;
	/* [sandbox] seccomp = enforce | debug | off (debugging only) */
	int seccomp_mode;              /* enum svc_seccomp_mode */
};

#define SVC_MAX_APP_MAP 256

void svc_config_defaults(struct svc_config *cfg);
void svc_config_free(struct svc_config *cfg);
/* The app id the [apps] map gives exe, or NULL. */
const char *svc_config_app_id(const struct svc_config *cfg, const char *exe);
/* Parse an INI file over the current values. 0, or -errno with *line set. */
int svc_config_load(struct svc_config *cfg, const char *path, int *line);
/* As svc_config_load, with the first error's text (file and line not
 * included) in msg[n] instead of the log. */
int svc_config_load_msg(struct svc_config *cfg, const char *path, int *line, char *msg, size_t n);
/* Resolve paths relative to the state dir; check ranges. 0 or -EINVAL. */
int svc_config_finish(struct svc_config *cfg);
/* svc_config_finish with the error in msg[n] instead of the log. */
int svc_config_check(struct svc_config *cfg, char *msg, size_t n);
/* Every effective value as a config file that parses back to the same
 * values (profilingd --check-config). 0 or -EIO. */
int svc_config_print(const struct svc_config *cfg, FILE *f);
/*
 * SIGHUP: copy next's reloadable keys ([dlp] patterns included) into live,
 * logging each change; a changed restart-only key, [apps] or [trigger.*] is
 * logged and keeps its running value (*refused counts those). Returns how
 * many changes were applied. The caller pushes rate-limit and log-level
 * changes to their modules.
 */
int svc_config_reload(struct svc_config *live, const struct svc_config *next, unsigned *refused);

/* -------------------------------------------------------------- svc_db.c */

#define SVC_DB_SCHEMA_VERSION 6

/*
 * Open (create) the state database. A corrupt file gives -EUCLEAN and one
 * held by another process -EBUSY, each logged with the file and the fix.
 */
int svc_db_init(const char *path);
void svc_db_fini(void);
/*
 * --reset-db: move path aside (<path>.broken-<unix time>, moved names it),
 * drop its -wal/-shm and create an empty database whose ids start above
 * those in the result file names under results_dir. The daemon must be stopped.
 */
int svc_db_reset(const char *path, const char *results_dir, char *moved, size_t n);
/*
 * Sessions left "active" by a previous run are marked failed, each with a
 * failure result (no file, PROF_E_UNKNOWN, "profilingd restarted during
 * the capture") queued for its app's listener. Returns how many.
 */
int svc_db_recover(void);
/* The sessions the last svc_db_recover() failed (once; then forgotten). */
int svc_db_recovered(void (*fn)(uint64_t id, uid_t uid, void *ud), void *ud);
/* Fail an active session the app was not told about, with a queued failure result. */
int svc_db_session_abandon(uint64_t id, const char *message);
/* A request id, unique across restarts; refusals take one too. */
int svc_db_alloc_id(uint64_t *id);
/* Record an admitted session as active. */
int svc_db_session_new(uint64_t id, const char *app, uid_t uid, pid_t pid, uint32_t type,
		       uint32_t trigger, const char *tag, uint64_t now_ns);
int svc_db_session_end(uint64_t id, const char *state, int error,
		       const char *message, uint64_t now_ns);
int svc_db_result_add(uint64_t session_id, const char *app, uid_t uid, uint32_t type,
		      uint32_t trigger, const char *path, uint64_t size, const char *format,
		      uint64_t start_ns, uint64_t end_ns, uint64_t *result_id);
/* The result row and the session's "done", in one transaction (-ENOSPC: disk full). */
int svc_db_result_commit(uint64_t session_id, const char *app, uid_t uid, uint32_t type,
			 uint32_t trigger, const char *path, uint64_t size, const char *format,
			 uint64_t start_ns, uint64_t end_ns, uint64_t *result_id);
/* Bytes of stored results of app, or of all apps when app is NULL. */
int svc_db_result_bytes(const char *app, uint64_t *bytes);
/* A delivery attempt was made (the Result with its fd is queued). */
int svc_db_result_attempt(uint64_t result_id);
/* The app acknowledged result_id (app NULL: any app, for root). -ENOENT if
 * it is not app's or already acked. */
int svc_db_result_delivered(uint64_t result_id, const char *app);

struct svc_db_result {
	uint64_t id, session_id, size, start_ns;
	uint32_t type, trigger;
	char path[SVC_PATH_MAX];
	char tag[72];
	char note[160];
	int error;          /* a failure result (path ""): PROF_E_* and message */
	char message[256];
	uid_t uid;          /* the app's uid, owner of the file (svc_db_pending only) */
};
typedef void (*svc_db_result_fn)(const struct svc_db_result *r, void *ud);
/* Undelivered results of app (attempts < max, ended >= min_end_ns), oldest
 * first, at most limit (<= 16). Returns how many fn saw, or -EIO. */
int svc_db_pending(const char *app, uint32_t max_attempts, uint64_t min_end_ns, unsigned limit,
		   svc_db_result_fn fn, void *ud);
int svc_db_result_delete(uint64_t result_id);
/* Offer session_id's result again (attempts reset), with a note. -ENOENT if none. */
int svc_db_result_requeue(uint64_t session_id, const char *note);
/* Results that ended before before_ns (fn may delete them). */
int svc_db_expired(uint64_t before_ns, svc_db_result_fn fn, void *ud);
/* For each app over max_app_bytes, its oldest results until it would fit. */
int svc_db_over_quota(uint64_t max_app_bytes, svc_db_result_fn fn, void *ud);
/* Registered triggers, one row per (app, type); spec is a packed pd.Trigger. */
int svc_db_trigger_put(const char *app, uint32_t type, uid_t uid, gid_t gid, const char *exe,
		       const void *spec, size_t len);
/* type < 0: all of app's. */
int svc_db_trigger_del(const char *app, int type);
typedef void (*svc_db_trigger_fn)(const char *app, uint32_t type, uid_t uid, gid_t gid,
				  const char *exe, const void *spec, size_t len, void *ud);
int svc_db_trigger_load(svc_db_trigger_fn fn, void *ud);
/* A result row with its session, for profctl results/show. */
struct svc_db_row {
	uint64_t id, session_id, size, start_ns, end_ns;
	uint32_t type, trigger, attempts, pid;
	uid_t uid;
	bool delivered;
	char app[RL_APP_MAX];
	char path[SVC_PATH_MAX];
	char format[16];
	char tag[72];
	char note[160];
};
/* Results newest first, of uid (or any uid when all_uids) and of app (NULL:
 * any), at most limit rows to fn. Returns how many match in all, or -EIO. */
int svc_db_results_list(bool all_uids, uid_t uid, const char *app, unsigned limit,
			void (*fn)(const struct svc_db_row *r, void *ud), void *ud);
/* One result by id. 0, -ENOENT or -EIO. */
int svc_db_result_get(uint64_t id, struct svc_db_row *out);
/* Per app with stored results: its uid, count and bytes. Returns how many, or -EIO. */
int svc_db_apps(void (*fn)(const char *app, uid_t uid, uint32_t n, uint64_t bytes, void *ud),
		void *ud);

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

/* ---------------------------------------------------------- svc_redact.c */

#define SVC_REDACT_TIDS_MAX 1024
/* Redactor outcomes besides its exit status (0, 65 malformed, 66 cap, 70). */
#define SVC_REDACT_NOSPACE 73  /* its output did not fit (ENOSPC/EDQUOT) */
#define SVC_REDACT_TIMEOUT 256
#define SVC_REDACT_CRASHED 257

struct svc_redact;
typedef void (*svc_redact_cb)(void *ud, int code, const char *message);

int svc_redact_init(struct event_base *base, const struct svc_config *cfg);
void svc_redact_fini(void);
/*
 * Start redacting in_fd (rewound) into out_fd for app_pid. cb runs once.
 * kernel_fd: a trace's kernel stream (profilingd-ftrace's file, read from
 * its start), which the redactor gets on fd 3 as the only source of
 * kernel data; -1 for none.
 * app_start: the app process's start time (svc_ident); its threads are
 * named to the redactor only while app_pid is still that process (0: it is
 * gone, no threads).
 */
int svc_redact_start(int in_fd, int kernel_fd, int out_fd, const char *format, pid_t app_pid,
		     uint64_t app_start, svc_redact_cb cb, void *ud, struct svc_redact **h);
/*
 * Record kernel sched data for a system trace with profilingd-ftrace into
 * out_fd. -ENOENT when the helper is not installed. cb runs once.
 */
int svc_ftrace_start(uint64_t session_id, uint32_t duration_ms, uint32_t buffer_kb, int out_fd,
		     svc_redact_cb cb, void *ud, struct svc_redact **h);
/*
 * Sample a process that has no runtime agent with profilingd-perf
 * (perf_event_open, DWARF unwinding) into out_fd. start: the process's
 * start time (svc_ident), which the helper re-checks once its events are
 * open (a replaced process fails it). -ENOENT when missing, -EINVAL
 * without a start time.
 */
int svc_perf_start(pid_t pid, uint64_t start, uint32_t hz, uint32_t duration_ms, int out_fd,
		   svc_redact_cb cb, void *ud, struct svc_redact **h);
/*
 * Speak the HotSpot attach protocol to JVM pid with profilingd-jattach
 * (as the JVM's user): a heap dump with its threads' stacks into out_fd,
 * loading the profilingd JVMTI agent, or only starting the VM's attach
 * listener (ahead of an OOM, when it could not start). -ENOENT when the helper (or, for
 * a load, the agent) is not installed. cb runs once; code 69: no attach
 * listener answered.
 */
enum svc_jattach_op { SVC_JATTACH_HEAPDUMP, SVC_JATTACH_LOAD, SVC_JATTACH_LISTEN };
/* start: as for svc_perf_start; the helper re-checks it once attached. */
int svc_jattach_start(pid_t pid, uint64_t start, enum svc_jattach_op op, uint32_t timeout_ms,
		      int out_fd, svc_redact_cb cb, void *ud, struct svc_redact **h);
bool svc_jvm_agent_available(void);
/* Kill a running helper (redactor, ftrace, perf, jattach); its cb does not run. */
void svc_redact_abort(struct svc_redact *h);

/* ----------------------------------------------------------- svc_spawn.c */

/*
 * The spawner process (privsep): it starts helpers for the sandboxed
 * daemon from a fixed table. Caps: SVC_SPAWN_HELPERS_MAX table entries;
 * requests carry at most SVC_SPAWN_ARGS_MAX arguments of at most
 * SVC_SPAWN_ARG_LEN_MAX bytes in a packet of at most SVC_SPAWN_MSG_MAX;
 * at most SVC_SPAWN_CHILDREN_MAX helpers run at once (past it a spawn is
 * refused with -EAGAIN). docs/SANDBOX.md has the protocol.
 */
#define SVC_SPAWN_HELPERS_MAX 8
#define SVC_SPAWN_ARGS_MAX 128
#define SVC_SPAWN_ARG_LEN_MAX 16384
#define SVC_SPAWN_MSG_MAX 65536
#define SVC_SPAWN_CHILDREN_MAX 256
#define SVC_SPAWN_F_REDACT 1u /* drop to the redact user, rlimits, no_new_privs */
#define SVC_SPAWN_F_STDIN  2u /* an input fd comes first (else /dev/null) */
#define SVC_SPAWN_F_FD3    4u /* one more fd comes last: the helper's fd 3 */

enum svc_spawn_type { SVC_SPAWN_REQ = 1, SVC_SPAWN_KILL, SVC_SPAWN_REPLY, SVC_SPAWN_EXITED };

struct svc_spawn_msg {
	uint32_t type;
	uint64_t id;      /* the daemon's handle for the helper */
	uint32_t helper;  /* REQ: index into the spawner's table */
	uint32_t flags;   /* REQ: SVC_SPAWN_F_* */
	int32_t value;    /* REPLY: pid or -errno; EXITED: wait status */
	uint32_t argc;
	const char *argv[SVC_SPAWN_ARGS_MAX + 1];
};

/* What the spawner is forked with; it never takes a path from the daemon. */
struct svc_spawn_setup {
	const char *helpers[SVC_SPAWN_HELPERS_MAX]; /* index -> path; NULL or "" = none */
	unsigned nhelpers;
	bool drop_privs;        /* F_REDACT helpers run as uid/gid */
	uid_t uid;
	gid_t gid;
	uint64_t redact_as_bytes;
	uint64_t redact_cpu_s;
};

/* Wire codec of the spawner's socketpairs. decode: argv point into buf. */
int svc_spawn_encode(const struct svc_spawn_msg *m, uint8_t *buf, size_t cap, size_t *len);
int svc_spawn_decode(const uint8_t *buf, size_t len, struct svc_spawn_msg *m);
/* The spawner's loop on its two sockets; returns at EOF (helpers killed). */
int svc_spawner_serve(int req_fd, int evt_fd, const struct svc_spawn_setup *s);

typedef void (*svc_spawn_exit_fn)(uint64_t id, int status);
/* Fork the spawner (before the sandbox). fn gets every helper's exit. */
int svc_spawn_init(struct event_base *base, const struct svc_spawn_setup *s, svc_spawn_exit_fn fn);
void svc_spawn_fini(void);
/*
 * Start helper with argv and fds (in_fd < 0: /dev/null; fd3 < 0: none, else
 * the helper's fd 3, e.g. the redactor's kernel stream). 0 and *pid, or -errno.
 */
int svc_spawn_start(unsigned helper, char *const argv[], int in_fd, int out_fd, int err_fd,
		    int fd3, uint32_t flags, uint64_t id, pid_t *pid);
/* SIGKILL helper id; its exit is reported as usual. */
int svc_spawn_kill(uint64_t id);
pid_t svc_spawn_pid(void);
/* The spawner died or broke its protocol: the daemon stops (non-zero exit). */
bool svc_spawn_lost(void);

/* --------------------------------------------------------- svc_sandbox.c */

enum svc_seccomp_mode { SVC_SECCOMP_ENFORCE, SVC_SECCOMP_DEBUG, SVC_SECCOMP_OFF };

/*
 * The daemon's own sandbox, applied last in init: capabilities dropped to
 * the runtime set (docs/SANDBOX.md), no_new_privs, then the seccomp filter
 * of policy/seccomp/daemon.policy. 0 or -errno; failure is fatal.
 */
int svc_sandbox_apply(enum svc_seccomp_mode mode);

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

/* Capability bits a runtime announces in its hello. */
#define SVC_CAP_HEAP_DUMP      (1u << 0)
#define SVC_CAP_HEAP_PROFILE   (1u << 1)
#define SVC_CAP_STACK_SAMPLING (1u << 2)
#define SVC_CAP_TRACE_RING     (1u << 3)

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

/*
 * profilingd's service modules (svc_*). Each has an _init/_fini pair where it
 * holds state; main.c starts them in dependency order:
 *   config -> db -> session -> conn (listeners) -> event loop.
 * Being split into one header per module (issue #16): the modules whose
 * header is included below declare themselves there.
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

/* ----------------------------------------------------------- svc_proto.c */

/*
 * Decode and validate one packet (size cap already enforced). On failure
 * returns NULL and *why names the reason for the log. Unknown fields are
 * ignored; required ones, string lengths and repeated counts are checked.
 */
Pd__ClientMsg *svc_decode_client(const uint8_t *buf, size_t len, const char **why);
Pd__RuntimeMsg *svc_decode_runtime(const uint8_t *buf, size_t len, const char **why);

/* ------------------------------------------------------------ svc_outq.c */

/*
 * A peer's bounded outgoing queue (svc_conn.c, svc_ctl.c). Cap and what
 * happens at it: svc_outq_push() refuses with -ENOBUFS and the caller
 * closes the peer, which does not read its messages.
 */
struct svc_outq_msg;
struct svc_outq {
	struct svc_outq_msg *msg;
	uint32_t cap, head, len;
};

/* cap messages at most; 0 or -ENOMEM (cap 0 is -ENOMEM too). */
int svc_outq_init(struct svc_outq *q, uint32_t cap);
/* Frees what is queued, closing its fds. NULL and a failed init are fine. */
void svc_outq_fini(struct svc_outq *q);
/* Pack m and queue it with a duplicate of fd (-1: none); nothing is sent.
 * -EMSGSIZE over max bytes, -ENOBUFS at the cap, -ENOMEM, -errno of dup. */
int svc_outq_push(struct svc_outq *q, const ProtobufCMessage *m, size_t max, int fd);
/* Send in order until the socket would block: 0 all sent, 1 would block
 * (wait for EV_WRITE), -errno when sending failed (the message is gone). */
int svc_outq_flush(struct svc_outq *q, int sock);

/* ---------------------------------------------------------- svc_listen.c */

/*
 * The accept step of every listener (client, runtime, control). Out of fds
 * or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM) the listener pauses for
 * SVC_ACCEPT_PAUSE_MS, one log line per pause, instead of spinning.
 */
#define SVC_ACCEPT_PAUSE_MS 100
/* Fds a peer's binding needs beyond its socket: its pidfd and one /proc
 * file at a time (svc_ident_bind). */
#define SVC_ACCEPT_SPARE_FDS 2
struct event;
struct svc_acceptor {
	int fd;                 /* the listening socket (not owned) */
	const char *path;       /* for the log; must outlive the acceptor */
	struct event *ev;       /* readable: cb(fd, what, arg) */
	struct event *resume;   /* ends a pause */
};
/* Watch fd with cb. 0 or -ENOMEM. */
int svc_acceptor_start(struct svc_acceptor *a, struct event_base *base, int fd,
		       const char *path, void (*cb)(int fd, short what, void *arg), void *arg);
/* accept4 (non-blocking, close-on-exec): the new fd, or -errno (-EAGAIN:
 * none waiting; fd or memory exhaustion has paused the listener). */
int svc_acceptor_accept(struct svc_acceptor *a);
/* Pause the listener when err (-errno) is fd or memory exhaustion, which
 * also struck after accept (the peer's pidfd): 0 paused, else -EINVAL and
 * nothing done. what names the step in the log line. */
int svc_acceptor_pause(struct svc_acceptor *a, const char *what, int err);
/* Free the events (the fd stays open). NULL is fine. */
void svc_acceptor_stop(struct svc_acceptor *a);

/* ------------------------------------------------------------ svc_conn.c */

enum svc_role { SVC_ROLE_CLIENT, SVC_ROLE_RUNTIME };

struct svc_conn;

int svc_conn_init(struct event_base *base, const struct svc_config *cfg);
void svc_conn_fini(void);
/* Queue a message (and optionally an fd, which is dup'd) to the peer. */
int svc_conn_send(struct svc_conn *c, const ProtobufCMessage *m, int fd);
/* Close the peer after the current handler returns. */
void svc_conn_drop(struct svc_conn *c, const char *why);
uint64_t svc_conn_id(const struct svc_conn *c);
/* The listening control.sock systemd passed (FileDescriptorName "control",
 * or bound at control_socket), readied (CLOEXEC, O_NONBLOCK), for
 * svc_ctl_init() to adopt, with its bound path in path; -1 when none was
 * passed. Call after svc_conn_init(); the fd is the caller's then. */
int svc_conn_take_control_fd(char *path, size_t n);
struct svc_conn *svc_conn_by_id(uint64_t id);
uid_t svc_conn_uid(const struct svc_conn *c);
gid_t svc_conn_gid(const struct svc_conn *c);
pid_t svc_conn_pid(const struct svc_conn *c);
/* The process the peer connected from, bound at accept (svc_ident.h). */
struct svc_ident;
const struct svc_ident *svc_conn_ident(const struct svc_conn *c);
/* svc_ident_check() of the peer's process; on -ESRCH (gone, replaced) or
 * -EPERM (ids changed) the connection is closed. 0 or that error. */
int svc_conn_check(struct svc_conn *c);
/* The app key: "uid:<uid>" or "uid:<uid>/<id>" when [apps] maps the exe. */
const char *svc_conn_app(const struct svc_conn *c);
void svc_app_key(const struct svc_config *cfg, pid_t pid, uid_t uid, char *out, size_t n);
void svc_conn_set_listener(struct svc_conn *c, bool on);
bool svc_conn_is_listener(const struct svc_conn *c);
/* A connected client of uid with a result listener, or NULL. */
struct svc_conn *svc_conn_listener_for(uid_t uid);
/* Runtime bookkeeping: the hello'd runtime of the process that has pid now,
 * or NULL; a runtime whose own process is gone or changed is closed, never
 * returned. A session also compares the start time (svc_conn_ident). */
struct svc_conn *svc_conn_runtime_for(pid_t pid);
void svc_conn_set_runtime(struct svc_conn *c, uint32_t caps);
uint32_t svc_conn_runtime_caps(const struct svc_conn *c);
/* Every live connection (status); fn must not close any. */
void svc_conn_foreach(void (*fn)(struct svc_conn *c, void *ud), void *ud);
enum svc_role svc_conn_role(const struct svc_conn *c);
/* Client: ClientHello seen; runtime: RuntimeHello accepted. */
bool svc_conn_hello_done(const struct svc_conn *c);
/* A runtime's kind from its hello ("native", "jvm"), "" before it. */
const char *svc_conn_kind(const struct svc_conn *c);

/* ----------------------------------------------------------- svc_admit.c */

#include "svc_admit.h"

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

/* ----------------------------------------- the capture pipeline, triggers */

#include "svc_store.h"
#include "svc_session.h"
#include "svc_deliver.h"
#include "svc_capture.h"
#include "svc_request.h"
#include "svc_trigger.h"
#include "svc_jvm.h"

/*
 * Old names of the pipeline's entry points, for the files that still use
 * them; they go with this header (svc_conn.c, svc_ctl.c call them).
 */
#define svc_session_request svc_request_client
#define svc_session_cancel svc_request_cancel
#define svc_session_trigger svc_request_trigger
#define svc_session_adopt svc_request_adopt
#define svc_session_refused svc_deliver_refused
#define svc_session_redeliver svc_deliver_redeliver
#define svc_session_ack svc_deliver_ack
#define svc_session_runtime_up svc_capture_runtime_up
#define svc_session_runtime_down svc_capture_runtime_down
#define svc_session_capture_done svc_capture_done
#define svc_session_stop svc_capture_stop
#define svc_session_raw_dir svc_store_raw_dir

/* ------------------------------------------------------------- svc_ctl.c */

/* control.sock for profctl (proto/control.proto, docs/PROTOCOL.md). */
#define CTL_VERSION 1
#define CTL_MAX_REQ 4096          /* profctl -> daemon packet */
#define CTL_MAX_REPLY (64 * 1024) /* daemon -> profctl packet */

struct Pdctl__CtlRequest;
int svc_ctl_init(struct event_base *base, const struct svc_config *cfg);
void svc_ctl_fini(void);
/* Decode and check one control packet (size cap, string caps); NULL with
 * *why on failure. Fuzzed by tests/fuzz/fuzz_ctl_msg.c. */
struct Pdctl__CtlRequest *svc_ctl_decode(const uint8_t *buf, size_t len, const char **why);

#endif

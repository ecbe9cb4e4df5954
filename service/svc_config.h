/*
 * svc_config: the daemon's configuration, an INI file (libinih) over
 * built-in defaults, then the command line. A table of keys in
 * svc_config.c is the schema: it drives parsing, range checks, printing
 * and what a reload (SIGHUP) may change. Every key is documented in
 * policy/profilingd.conf. Caps: SVC_MAX_DLP [dlp] patterns,
 * SVC_MAX_SYSTRIG [trigger.NAME] sections, SVC_MAX_APP_MAP [apps]
 * entries; one more is a parse error on its line.
 */
#ifndef PD_SVC_CONFIG_H
#define PD_SVC_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <sys/un.h>

#include "rl.h"

#define SVC_PATH_MAX 4096
#define SVC_MAX_DLP  32
#define SVC_MAX_SYSTRIG 32
#define SVC_SUN_MAX  sizeof(((struct sockaddr_un *)0)->sun_path)

/* Request parameter ranges (profiling.h documents them for apps); the
 * config's defaults must lie within them, so they are defined here. */
#define SVC_DURATION_MIN_MS 100
#define SVC_DURATION_MAX_MS 120000
#define SVC_HZ_MIN 1
#define SVC_HZ_MAX 1000
#define SVC_INTERVAL_MAX (1u << 30) /* heap profile sampling interval, bytes */
#define SVC_BUFFER_KB_MIN 64     /* per-CPU kernel trace buffer of a system trace */
#define SVC_BUFFER_KB_MAX 65536
#define SVC_TRACE_BG_MAX_S 3600  /* [trace] background_max_s at most */
/* PROF_METHOD_EVENTS (docs/METHOD_EVENTS.md): targets per request and
 * their length with the NUL; profilingd-perf takes the same 8. */
#define SVC_METHOD_TARGETS_MAX 8
#define SVC_METHOD_TARGETS_WIRE_MAX 64 /* decoded; past 8 refused with a reason */
#define SVC_METHOD_TARGET_LEN 1024
#define SVC_METHOD_EVERY_MAX 1000000
#define SVC_METHOD_MAX_HITS 200000
#define SVC_METHOD_BUDGET_MAX_US 1000000 /* method_budget_us, request and config */
#define SVC_METHOD_DURATION_MAX_MS 86400000u /* a config's longest expiry, 24 h */
#define SVC_MAX_METHODS_CONF 8          /* [methods.ID] sections */
#define SVC_METHOD_CONF_TARGET_LEN 256  /* a target in the config file, NUL included */

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
	bool method_events;            /* [capture] method_events: off is the kill switch */
	uint32_t method_budget_us;     /* [capture] method_budget_us: native hits' overhead budget */
	/* [memory]: OOM warnings from the whole machine's memory */
	uint32_t mem_available_percent; /* MemAvailable under this share of MemTotal; 0 off */
	uint32_t mem_stall_percent;     /* /proc/pressure/memory "some" share of 1 s; 0 off */
	/* [cpu]: the EXCESSIVE_CPU watcher */
	bool cpu_perf_events;           /* task-clock counters; false: poll /proc (trg_cpu.c) */
	/* [results] */
	uint32_t retention_days;
	uint32_t delivery_attempts;
	uint32_t delivery_max_age_days;
	/* [trace]: the running background system trace (docs/PERFETTO.md) */
	bool trace_bg;                 /* a ring in tracefs instances/profilingd-bg */
	uint32_t trace_bg_buffer_kb;   /* its size per CPU */
	uint32_t trace_bg_max_s;       /* the most of it a request may ask for */
	/* [trigger.NAME]: system triggers for programs that do not link libprofiling. */
	struct svc_systrig {
		char name[32];
		char exe[SVC_PATH_MAX];  /* match by executable path ... */
		char cgroup[256];        /* ... and/or by a substring of /proc/<pid>/cgroup */
		char java_main[256];     /* ... and/or a JVM's main class or jar */
		uint32_t type, capture, period_s, cpu_percent, cpu_window_ms, memory_percent;
		uint32_t timeout_ms, duration_ms;
		uint64_t memory_bytes;
		uint32_t background_ms;  /* a system trace's running background part */
		uint32_t fill_policy;    /* enum prof_fill_policy; 0 = the request default */
		uint32_t java_allocs;    /* enum prof_switch; 0 = the request default */
		uint32_t format;         /* enum prof_format (issue #20) */
	} systrig[SVC_MAX_SYSTRIG];
	unsigned nsystrig;
	/*
	 * [methods.ID]: method-event configs of the system config
	 * (docs/METHOD_EVENTS.md), added at start as `profctl methods add`
	 * would; `method = ` once per target. A change needs a restart.
	 */
	struct svc_methods_conf {
		char id[33];
		char exe[SVC_PATH_MAX];
		char targets[SVC_METHOD_TARGETS_MAX][SVC_METHOD_CONF_TARGET_LEN];
		unsigned ntargets;
		uint32_t version, canary_percent, expiry_s, every, max_hits;
		uint32_t budget_us;    /* 0: [capture] method_budget_us */
	} methods[SVC_MAX_METHODS_CONF];
	unsigned nmethods;
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

#endif

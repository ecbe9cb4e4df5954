/*
 * svc_trigreg: svc_trigger's tables, private to it (only svc_trigger.c and
 * svc_trigreg.c include this).
 *
 * Contract:
 * - Registrations: SVC_MAX_TRIGGERS slots, one per (app, type), taken
 *   lowest first; scans stop at svc_trigreg_hi() (the table is about
 *   5 KiB a slot and a scan of all of it would fault in every page).
 * - Tracked processes: SVC_MAX_APP_PIDS in all, max_pids_per_uid per uid;
 *   past either svc_trigreg_add_pid refuses the newest (NULL), with one
 *   line through the uid's log budget. Every CPU, memory and heartbeat
 *   watch is of a tracked process; dropping one ends its watches.
 * - Crash rings: one sealed memfd per tracked process with a CRASH
 *   trigger and a runtime, at most max_runtimes held (past it the process
 *   gets none, one log line).
 */
#ifndef PD_SVC_TRIGREG_H
#define PD_SVC_TRIGREG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "profilingd.pb-c.h"
#include "svc_config.h"

struct svc_reg {
	bool used;
	bool sys;                     /* from [trigger.NAME]: matches by exe or cgroup, any uid */
	char cgroup[256];
	char java_main[256];          /* system triggers: a JVM's main class or jar */
	char app[RL_APP_MAX];
	uid_t uid;
	gid_t gid;
	char exe[SVC_PATH_MAX];
	uint32_t type, capture, period_s;
	uint32_t cpu_percent, cpu_window_ms, hang_timeout_ms, timeout_ms;
	Pd__Params params;
	uint32_t memory_percent;
	uint64_t memory_bytes;
	uint32_t psi_resource, psi_stall_us, psi_window_ms;
	uint64_t active;              /* the session of the capture running, or 0 */
	uint64_t last_session;        /* the last capture it made (OOM: linked to a kill) */
	uint64_t last_ns;
	uint64_t fired, coalesced, refused;
};

/* A process known to belong to an app. */
struct svc_app_pid {
	pid_t pid;
	uint64_t start;               /* its start time: captures are of this process only */
	char app[RL_APP_MAX];
	uid_t uid;
	gid_t gid;
	int clients;                  /* connected clients of this pid */
	int sys_reg;                  /* the system trigger that claimed it, or -1 */
	int crash_fd;                 /* its crash ring memfd (svc_trigreg_give_crash), or -1 */
	/* Its own last OOM-trigger capture: a kill links to this process's
	 * capture, not to the registration's latest, which may be another
	 * process's (a system trigger, or an app with several processes). */
	uint64_t oom_session;
	uint64_t oom_ns;
};


int svc_trigreg_init(const struct svc_config *cfg);
/* Frees both tables and closes the crash rings. */
void svc_trigreg_fini(void);

/* Registrations: slot i (< svc_trigreg_hi()) when used, else NULL. */
size_t svc_trigreg_hi(void);
struct svc_reg *svc_trigreg_at(size_t i);
/* A registration's slot, its key for the PSI watcher. */
int svc_trigreg_index(const struct svc_reg *r);
struct svc_reg *svc_trigreg_find(const char *app, uint32_t type);
/* The registration of type for a process: its app's, else its system trigger. */
struct svc_reg *svc_trigreg_for(const struct svc_app_pid *p, uint32_t type);
/* app's slot of type, else a free one (raising svc_trigreg_hi); NULL when full. */
struct svc_reg *svc_trigreg_slot(const char *app, uint32_t type);
/* Validate t and fill r (defaults, ranges). 0 or a positive PROF_E_* with why. */
int svc_trigreg_fill(struct svc_reg *r, const Pd__Trigger *t, char *why, size_t n);

/* Tracked processes. */
size_t svc_trigreg_npids(void);
struct svc_app_pid *svc_trigreg_pid_at(size_t i);
struct svc_app_pid *svc_trigreg_pid(pid_t pid);
/* Track pid (start 0: read it now) for app; an entry left by an earlier
 * process with this pid is replaced. NULL past a cap. */
struct svc_app_pid *svc_trigreg_add_pid(pid_t pid, uint64_t start, const char *app, uid_t uid,
					gid_t gid);
/* Forget pid: its crash ring and its CPU, memory and heartbeat watches. */
void svc_trigreg_drop_pid(pid_t pid);
/* Start watching p for its registrations that watch processes (CPU, memory). */
void svc_trigreg_watch(const struct svc_app_pid *p);
/* An OOM trigger wants the heap sampled from now on (HeapArm to rt). */
void svc_trigreg_arm_heap(struct svc_conn *rt, const struct svc_reg *r);
/* A CRASH trigger: give rt a fresh crash ring for p. */
void svc_trigreg_give_crash(struct svc_conn *rt, struct svc_app_pid *p);
/* Copy what p's dying agent wrote into its crash ring to a root-only file
 * in raw/ (path[n] gets its name). The bytes copied (0: nothing) or -errno. */
ssize_t svc_trigreg_save_crash(const struct svc_app_pid *p, char *path, size_t n);

#endif

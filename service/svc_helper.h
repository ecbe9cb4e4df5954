/*
 * svc_helper: the daemon's four helper programs and each run of one.
 * - profilingd-redact (SVC_HELPER_REDACT, svc_redact.h builds its
 *   arguments): the sandboxed one, run as [redact] user with no groups,
 *   rlimits and no_new_privs;
 * - profilingd-ftrace (system traces), profilingd-perf (processes with no
 *   agent), profilingd-jattach (HotSpot JVMs): they stay root, each for
 *   the privilege it needs (docs/SANDBOX.md).
 * At init it finds them (the configured path, beside the daemon, the build
 * tree, libexec), resolves the redact user and forks the spawner
 * (svc_spawn.h) with that fixed table. Each run gets its output on fd 1, a
 * pipe on fd 2 for its one status line, an empty environment and a time
 * cap, past which it is killed. Caps: at most SVC_SPAWN_CHILDREN_MAX runs
 * at once (the spawner refuses more with -EAGAIN); a status line is read
 * up to 255 bytes.
 */
#ifndef PD_SVC_HELPER_H
#define PD_SVC_HELPER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct event_base;
struct svc_config;

enum svc_helper_id {
	SVC_HELPER_REDACT,
	SVC_HELPER_FTRACE,
	SVC_HELPER_PERF,
	SVC_HELPER_JATTACH,
	SVC_HELPER_COUNT
};

/*
 * The code a run ends with: its exit status (0 success; the redactor's
 * 65 malformed or nothing of the app, 66 a cap, 70 internal; 69 from
 * profilingd-jattach: no attach listener answered; 73 its output did not
 * fit: names.h maps them), or one of the two outcomes that are not exits.
 */
#define SVC_HELPER_TIMEOUT 256 /* killed at its time cap */
#define SVC_HELPER_CRASHED 257 /* died of a signal (seccomp, rlimits) */

struct svc_helper;
/* Runs once per started helper, unless it was aborted; message is its
 * status line or what killed it. */
typedef void (*svc_helper_cb)(void *ud, int code, const char *message);

/*
 * Find the helpers, resolve the redact user, fork the spawner. 0 or
 * -errno (-ENOENT: no redactor or no redact user; fatal). Then the running
 * background trace ([trace] background): profilingd-ftrace sets up its
 * ring (on), or removes one that a run with it on left behind (off); its
 * failure is logged, not fatal. The ring outlives the daemon: the helpers
 * die with it, so none can take the ring down at exit.
 */
int svc_helper_init(struct event_base *base, const struct svc_config *cfg);
/* Release the handles (their callbacks do not run) and end the spawner,
 * which kills what still runs. */
void svc_helper_fini(void);
/*
 * Start helper which with argv (argv[0] its name) and fds (in_fd < 0:
 * /dev/null; fd3 < 0: none). cb runs once with its code, unless the run
 * is aborted. -ENOENT when that helper is not installed.
 */
int svc_helper_run(enum svc_helper_id which, char **argv, int in_fd, int out_fd, int fd3,
		   uint32_t timeout_ms, svc_helper_cb cb, void *ud, struct svc_helper **h);
/* Kill a running helper; its cb does not run. NULL is fine. */
void svc_helper_abort(struct svc_helper *h);
/* The redactor keeps the daemon's uid (the daemon is not root). */
bool svc_helper_redact_as_daemon(void);

/*
 * Record kernel sched data for a system trace with profilingd-ftrace into
 * out_fd, preceded by the running background trace's events since
 * background_from (CLOCK_BOOTTIME ns; 0: none; where there is no ring the
 * helper's status line says "background=absent"), each CPU led by its last
 * switch before that when lead. discard: stop recording when the buffer is
 * full instead of overwriting the oldest (PROF_FILL_DISCARD). -ENOENT when
 * the helper is not installed. cb runs once.
 */
int svc_ftrace_start(uint64_t session_id, uint32_t duration_ms, uint32_t buffer_kb, bool discard,
		     uint64_t background_from, bool lead, int out_fd, svc_helper_cb cb, void *ud,
		     struct svc_helper **h);
/*
 * Sample a process that has no runtime agent with profilingd-perf
 * (perf_event_open, DWARF unwinding) into out_fd. start: the process's
 * start time (svc_ident), which the helper re-checks once its events are
 * open (a replaced process fails it). -ENOENT when missing, -EINVAL
 * without a start time.
 */
int svc_perf_start(pid_t pid, uint64_t start, uint32_t hz, uint32_t duration_ms, int out_fd,
		   svc_helper_cb cb, void *ud, struct svc_helper **h);
/*
 * Method events (docs/METHOD_EVENTS.md): profilingd-perf --method for
 * each of the n (1..8) targets on pid for duration_ms, the stack of every
 * `every`th hit (0: each), stopping after max_hits (0: the helper's cap);
 * a Perfetto trace of the hits if perfetto, else pprof; the probes go
 * once the helper's mean time per recorded hit is over budget_us (its
 * status then says over_budget=). As svc_perf_start otherwise.
 */
int svc_perf_methods_start(pid_t pid, uint64_t start, const char *const *methods, unsigned n,
			   uint32_t every, uint32_t max_hits, bool perfetto, uint32_t budget_us,
			   uint32_t duration_ms,
			   int out_fd,
			   svc_helper_cb cb, void *ud, struct svc_helper **h);
/*
 * Speak the HotSpot attach protocol to JVM pid with profilingd-jattach
 * (as the JVM's user): a heap dump with its threads' stacks into out_fd,
 * loading the profilingd JVMTI agent, or only starting the VM's attach
 * listener (ahead of an OOM, when it could not start). -ENOENT when the
 * helper (or, for a load, the agent) is not installed. cb runs once; code
 * 69: no attach listener answered.
 */
enum svc_jattach_op { SVC_JATTACH_HEAPDUMP, SVC_JATTACH_LOAD, SVC_JATTACH_LISTEN };
/* start: as for svc_perf_start; the helper re-checks it once attached. */
int svc_jattach_start(pid_t pid, uint64_t start, enum svc_jattach_op op, uint32_t timeout_ms,
		      int out_fd, svc_helper_cb cb, void *ud, struct svc_helper **h);
/* profilingd-jattach and the JVMTI agent are both installed. */
bool svc_jvm_agent_available(void);

#endif

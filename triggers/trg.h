/*
 * The watchers (trg_*): each turns a kernel signal into a callback on the
 * daemon's event loop, event-driven where the kernel allows it. Every
 * watcher says in trg_*_status() what it runs on and what it fell back to.
 *
 * Caps: TRG_MAX_PIDS watched processes per watcher; past it a watch is
 * refused with -ENOSPC (logged by the caller).
 */
#ifndef PD_TRG_H
#define PD_TRG_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct event_base;

#define TRG_MAX_PIDS 4096

struct trg_ops {
	void (*exec)(pid_t pid);                 /* a process exec'd a new image */
	void (*exit)(pid_t pid, int wstatus);    /* a process ended; -1 when unknown */
	void (*cpu)(pid_t pid, unsigned percent); /* over its threshold a whole window */
	void (*hang)(pid_t pid);                 /* no heartbeat within its timeout */
	void (*mem_warn)(pid_t pid);             /* memory crossed the OOM warning line */
	/* The OOM killer ended pid; how names the killer (for the result's note). */
	void (*mem_kill)(pid_t pid, const char *how);
	void (*psi)(int key);                    /* a pressure-stall trigger crossed */
	/* Process events were lost (the connector's buffer overran, or a
	 * datagram came cut): any exec may have gone unreported. */
	void (*lost)(void);
};

/* Process events: the netlink proc connector, else a /proc scan. */
int trg_proc_init(struct event_base *base, const struct trg_ops *ops);
void trg_proc_fini(void);
const char *trg_proc_status(void);
/*
 * Every exec the kernel has reported so far has reached ops->exec: the
 * connector is in use, nothing waits in its socket (nor an overrun), and
 * no batch is being handed out. False on the /proc scan, before init and
 * after fini. One poll(2) of the socket, far cheaper than a /proc look;
 * what a cache of per-process answers keyed on the image checks before
 * trusting that an exec would have dropped it.
 */
bool trg_proc_current(void);
/* The processes whose exits are wanted (the tracked ones; copied): the
 * socket filter drops every other exit. Past its cap, or never called,
 * every exit reaches ops->exit. */
void trg_proc_exits(const pid_t *pids, size_t n);

/* Per-process CPU% over a sliding window: task-clock perf counters whose
 * overflow wakes the daemon (use_perf), else /proc/<pid>/stat polled every
 * 250 ms; trg_cpu_status() says which, for how many. Before the seccomp
 * filter (the signalfd is made here). */
int trg_cpu_init(struct event_base *base, const struct trg_ops *ops, bool use_perf);
void trg_cpu_fini(void);
/* pid is uid's: a uid's processes hold at most TRG_CPU_FDS_PER_UID
 * counters (of the TRG_MAX_PIDS fds the watcher may hold in all); past
 * it, its new watches are polled. */
#define TRG_CPU_FDS_PER_UID 1024
int trg_cpu_watch(pid_t pid, uid_t uid, unsigned percent, unsigned window_ms);
void trg_cpu_unwatch(pid_t pid);
const char *trg_cpu_status(void);

/* Heartbeats: a process that stops beating for timeout_ms has hung. One
 * timer, set for the earliest deadline only. */
int trg_hang_init(struct event_base *base, const struct trg_ops *ops);
void trg_hang_fini(void);
int trg_hang_beat(pid_t pid, unsigned timeout_ms);
void trg_hang_forget(pid_t pid);
const char *trg_hang_status(void);

/* OOM warning signs and kills: cgroup v1 thresholds and oom_control; cgroup
 * v2 memory.max/high with memory.events, per-cgroup PSI and memory.current;
 * else RSS. */
int trg_mem_init(struct event_base *base, const struct trg_ops *ops);
void trg_mem_fini(void);
/* Warn at bytes, or at percent of the cgroup limit (of RAM without one). */
int trg_mem_watch(pid_t pid, unsigned percent, uint64_t bytes);
/* Stop watching; a kill the kernel counted but not yet notified is reported first. */
void trg_mem_unwatch(pid_t pid);
/* True when the kernel's own word covers pid's OOM kill (v1 oom_control,
 * v2 memory.events, else the kernel log): its mem_kill, at the latest from
 * trg_mem_unwatch, is the word on an OOM kill, no guess needed. */
bool trg_mem_counts_kills(pid_t pid);
/* The whole machine: when MemAvailable falls under avail_percent of
 * MemTotal, or tasks stall on memory stall_percent of a second
 * (/proc/pressure/memory), warn the watched process the OOM killer would
 * take first (highest /proc/<pid>/oom_score), once per episode. 0: off.
 * After trg_mem_init, before the seccomp filter (the PSI trigger is set up
 * here). */
int trg_mem_global(unsigned avail_percent, unsigned stall_percent);
/* What the watcher runs on (TRG_MEM_*), set by trg_mem_init. */
#define TRG_MEM_V1 0x1          /* v1 usage thresholds and oom_control eventfds */
#define TRG_MEM_V2 0x2          /* a v2 hierarchy with the memory controller */
#define TRG_MEM_V2_EVENTS 0x4   /* inotify on memory.events(.local) */
#define TRG_MEM_V2_PSI 0x8      /* per-cgroup PSI triggers on memory.pressure */
#define TRG_MEM_V2_POLL 0x10    /* memory.current reads, sooner near the line */
#define TRG_MEM_AVAIL 0x20      /* MemAvailable against its share */
#define TRG_MEM_SYS_PSI 0x40    /* a PSI trigger on /proc/pressure/memory */
#define TRG_MEM_KMSG 0x80       /* OOM kills from /dev/kmsg */
unsigned trg_mem_features(void);
const char *trg_mem_status(void);

/* Pressure stalls: PSI triggers, resource 0 memory, 1 cpu, 2 io. */
int trg_psi_init(struct event_base *base, const struct trg_ops *ops);
void trg_psi_fini(void);
/* One trigger per key (a new one replaces it). -ENOTSUP without PSI. */
int trg_psi_watch(int key, unsigned resource, unsigned stall_us, unsigned window_ms);
void trg_psi_unwatch(int key);
const char *trg_psi_status(void);

#endif

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
	void (*mem_kill)(pid_t pid);             /* the OOM killer struck pid's cgroup */
	void (*psi)(int key);                    /* a pressure-stall trigger crossed */
};

/* Process events: the netlink proc connector, else a /proc scan. */
int trg_proc_init(struct event_base *base, const struct trg_ops *ops);
void trg_proc_fini(void);
const char *trg_proc_status(void);

/* Per-process CPU% over a sliding window, one timer for all. */
int trg_cpu_init(struct event_base *base, const struct trg_ops *ops);
void trg_cpu_fini(void);
int trg_cpu_watch(pid_t pid, unsigned percent, unsigned window_ms);
void trg_cpu_unwatch(pid_t pid);
const char *trg_cpu_status(void);

/* Heartbeats: a process that stops beating for timeout_ms has hung. */
int trg_hang_init(struct event_base *base, const struct trg_ops *ops);
void trg_hang_fini(void);
int trg_hang_beat(pid_t pid, unsigned timeout_ms);
void trg_hang_forget(pid_t pid);
const char *trg_hang_status(void);

/* OOM warning signs: cgroup v1 thresholds and oom_control, else RSS. */
int trg_mem_init(struct event_base *base, const struct trg_ops *ops);
void trg_mem_fini(void);
/* Warn at bytes, or at percent of the cgroup limit (of RAM without one). */
int trg_mem_watch(pid_t pid, unsigned percent, uint64_t bytes);
void trg_mem_unwatch(pid_t pid);
const char *trg_mem_status(void);

/* Pressure stalls: PSI triggers, resource 0 memory, 1 cpu, 2 io. */
int trg_psi_init(struct event_base *base, const struct trg_ops *ops);
void trg_psi_fini(void);
/* One trigger per key (a new one replaces it). -ENOTSUP without PSI. */
int trg_psi_watch(int key, unsigned resource, unsigned stall_us, unsigned window_ms);
void trg_psi_unwatch(int key);
const char *trg_psi_status(void);

#endif

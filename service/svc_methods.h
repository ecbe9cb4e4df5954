/*
 * svc_methods: the method-event configs root adds (profctl methods,
 * docs/METHOD_EVENTS.md, "Production controls"). A config names an
 * executable and 1..8 native targets; adding it starts a
 * PROF_METHOD_EVENTS capture of each running process of that executable
 * that its canary share selects, until its expiry. Disabling it (or
 * "all": the kill switch) stops those captures, which kills their
 * profilingd-perf and so removes every probe at once.
 *
 * Caps: SVC_METHODS_MAX configs (root only adds them, so one table for
 * all), SVC_METHODS_PROCS processes started per config. At a cap: the
 * add is refused / later processes are counted as not hooked.
 * profctl's configs are also saved in the state database (svc_db, at
 * most SVC_DB_METHODS_MAX rows) and come back at the next start with the
 * expiry time they were given; expired ones are dropped then, and a
 * disabled one is deleted (the kill switch holds across a restart). The
 * canary's choice does not change across restarts: it is a hash of the
 * process, not a draw.
 */
#ifndef PD_SVC_METHODS_H
#define PD_SVC_METHODS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "svc_config.h"

#define SVC_METHODS_MAX 32
#define SVC_METHODS_PROCS 64
#define SVC_METHODS_ID_MAX 32
#define SVC_METHODS_EXPIRY_DEFAULT_S 3600
#define SVC_METHODS_EXPIRY_MAX_S 86400

struct svc_methods_cfg {
	char id[SVC_METHODS_ID_MAX + 1];  /* [a-z0-9_.-], 1..32 */
	uint32_t version;
	char exe[SVC_PATH_MAX];           /* absolute: the processes it applies to */
	char targets[SVC_METHOD_TARGETS_MAX][SVC_METHOD_TARGET_LEN];
	unsigned ntargets;
	uint32_t every, max_hits;
	uint32_t expiry_s;                /* 0: 1 h; at most 24 h */
	uint32_t canary_percent;          /* 0: 100 */
	uint32_t budget_us;               /* 0: [capture] method_budget_us */
};

/* The state of one config, for listings. */
struct svc_methods_info {
	const struct svc_methods_cfg *cfg;
	int64_t expires_ms;               /* CLOCK_REALTIME */
	bool disabled;
	unsigned matched, selected, started;
	const uint64_t *sessions;         /* the captures it started */
	unsigned nsessions;
};

/*
 * Whether the canary share picks process (pid, start) for config id: a
 * 64-bit FNV-1a of the id, the pid and the start time (clock ticks since
 * boot, /proc/<pid>/stat field 22), modulo 100, below percent. The same
 * process gets the same answer in every run of the daemon.
 */
bool svc_methods_canary(const char *id, pid_t pid, uint64_t start, uint32_t percent);

/*
 * Add (or, with the same id and a higher version, replace) a config and
 * start its captures. 0 or a positive PROF_E_* with msg: a bad field,
 * the table full, an id already there with a version not higher.
 */
int svc_methods_add(const struct svc_methods_cfg *c, char *msg, size_t n);
/*
 * The kill switch: disable config id, or every one for "all", stopping
 * their captures now (CANCELLED, "method events disabled"). The number of
 * captures stopped, or -ENOENT for an unknown id.
 */
int svc_methods_disable(const char *id);
/*
 * [capture] method_events turned false (a reload): every config disabled
 * and every method-event capture stopped, apps' own requests too. How
 * many captures were stopped.
 */
int svc_methods_switch_off(void);
/*
 * pid has just exec'd exe (the proc connector, through svc_trigger): each
 * enabled, unexpired config of exe whose canary picks pid hooks it.
 */
void svc_methods_exec(pid_t pid, const char *exe);
/* Any config in the table: an exec is then worth the /proc/<pid>/exe read. */
bool svc_methods_any(void);
/*
 * The config's [methods.ID] sections, added as profctl would (at start),
 * then profctl's configs saved by an earlier run (a saved one with the id
 * of a section and a version not higher is refused: the file wins). A
 * refused one is logged with its reason and skipped.
 */
void svc_methods_load(const struct svc_config *cfg);
void svc_methods_foreach(void (*fn)(const struct svc_methods_info *i, void *ud), void *ud);
/* Forget every config (the daemon's stop; captures end with their sessions). */
void svc_methods_fini(void);

#endif

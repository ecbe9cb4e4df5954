/*
 * svc_admit: whether a capture may start, and what it costs.
 *
 * Contract:
 * - svc_admit_decide holds the whole rule order (DESIGN §2), in one
 *   place, as a pure function over a snapshot of what the rules look at:
 *     1. validity: the type, then duration_ms, frequency_hz,
 *        sampling_interval_bytes, buffer_kb and background_ms in range
 *        (INVALID_REQUEST);
 *     2. the target's runtime can take the type (a JVM's heap dump needs
 *        none), and a heap dump is of a JVM (INVALID_REQUEST);
 *     3. the cost windows, a dry run (RATE_LIMIT_*);
 *     4. one session per process, then max_sessions
 *        (PROFILING_IN_PROGRESS);
 *     5. the disk quota and free space (NO_DISK_SPACE).
 *   The first rule that refuses wins. A dead process's artifact (a crash
 *   dump, `gone`) meets only the costs and quotas (1, 3, 5). An app's
 *   budget asked with no process (`app_only`, profctl budget) meets all
 *   but the rules about the process: 2 and 4's one per process.
 * - svc_admit_query is the budget query's dry run (issue #21): the same
 *   decision, and whether the cost windows are all that stand in the way
 *   (then the time they free up is when it would be admitted). Nothing is
 *   charged: the caller charges (svc_admit_charge) only when all passed,
 *   so a refused request costs nothing.
 * - The rest gathers what the snapshot holds and keeps the books: the
 *   cost windows (ratelimit/, <state>/ratelimit.db, failing closed:
 *   RATE_LIMIT_SYSTEM until `profilingd --reset-ratelimit`), trigger
 *   cooldowns, and the bytes of stored results. Checks return 0 or a
 *   positive PROF_E_* with a message in why[n].
 */
#ifndef PD_SVC_ADMIT_H
#define PD_SVC_ADMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "profilingd.pb-c.h"
#include "rl.h"

struct svc_config;

/* What the admission rules look at, gathered just before they run. */
struct svc_admit_in {
	/* the request */
	uint32_t type;                  /* PROF_* */
	const Pd__Params *params;       /* NULL: all defaults */
	uint32_t type_cap;              /* the NAMES_CAP_* a runtime needs for type */
	/* the target */
	pid_t pid;
	bool gone;                      /* a dead process's artifact: costs and quotas only */
	bool app_only;                  /* an app's budget, no process: rules 2 and 4a skipped */
	bool runtime;                   /* its runtime is connected ... */
	uint32_t runtime_caps;          /* ... and offers these */
	bool jvm;                       /* it is a HotSpot JVM (read for heap dumps only) */
	bool methods_off;               /* [capture] method_events = false: the kill switch */
	/* the config */
	uint32_t default_duration_ms, default_frequency_hz, max_sessions;
	uint32_t background_max_ms;     /* [trace] background_max_s, in ms */
	/* the state */
	int rate;                       /* the cost windows' dry run: 0 or PROF_E_* ... */
	const char *rate_why;           /* ... and why */
	uint64_t busy;                  /* the session capturing pid, 0: none */
	unsigned nsessions;             /* running */
	int disk;                       /* the disk check: 0 or PROF_E_* ... */
	const char *disk_why;           /* ... and why */
};
/* The request's parameters, defaults filled in. */
struct svc_admit_out {
	uint32_t duration_ms, frequency_hz;
};
/* 0 (admitted, out filled), or the first refusing rule's positive
 * PROF_E_* with msg[n]. No side effects. */
/*
 * PROF_METHOD_EVENTS parameters (rule 1's part for them): 1..8 native
 * targets "/PATH:SYMBOL" or "/PATH:+0xOFFSET" without control characters,
 * or 1..8 JVM targets "java:CLASS.METHOD[(DESC)][@LOADER]" (common/jtarget.h;
 * never both kinds in one request), method_every and method_max_hits in
 * range. 0 or PROF_E_INVALID_REQUEST with msg. Whether the file and the
 * symbol exist is profilingd-perf's answer, as the target's user; whether
 * the class and method exist is the JVM agent's.
 */
int svc_admit_methods(const Pd__Params *p, char *msg, size_t n);
int svc_admit_decide(const struct svc_admit_in *in, struct svc_admit_out *out, char *msg,
		     size_t n);

/*
 * The budget query: svc_admit_decide's answer, and in *waits whether it
 * would be 0 with the cost windows' dry run passing (so only time stands
 * in the way, or nothing does). No side effects.
 */
int svc_admit_query(const struct svc_admit_in *in, char *msg, size_t n, bool *waits);

int svc_admit_init(const struct svc_config *cfg);
void svc_admit_fini(void);
/* Config reload: new caps and costs for the next admissions. */
int svc_admit_reconfigure(const struct rl_config *rc);
int svc_admit_rate_check(const char *app, uint32_t type, bool system, char *why, size_t n);
int svc_admit_disk_check(const char *app, char *why, size_t n);
/* Charge the cost (records it). 0 or a positive PROF_E_*. */
int svc_admit_charge(const char *app, uint32_t type, bool system, char *why, size_t n);
/* Group commit of the charges (rl_batch_begin/rl_batch_commit): charges
 * join one transaction until svc_admit_batch_commit, 0 or -errno. */
int svc_admit_batch_begin(void);
int svc_admit_batch_commit(void);
/* One event-loop turn's admissions (svc_request opens and ends it): the
 * free space svc_admit_disk_check reads holds from its first read until
 * the turn or a batch ends, as within a batch (issue #18). */
void svc_admit_turn_begin(void);
void svc_admit_turn_end(void);
/* Reserve quota for a new result of size bytes; refused if it would not fit. */
int svc_admit_result_reserve(const char *app, uint64_t size, char *why, size_t n);
/* A trigger's cooldown, checked before its costs; then recorded once fired. */
int svc_admit_cooldown_check(const char *app, uint32_t trigger, uint32_t period_s, char *why,
			     size_t n);
void svc_admit_cooldown_record(const char *app, uint32_t trigger);
/* Stored results changed outside admission (retention): recount. */
int svc_admit_recount(void);
/*
 * The budget query's reads (issue #21), none of which records anything.
 * cost: what an admission of type charges app (0: free or exempt), or a
 * negative errno. next: when the cost windows admit type for app
 * (CLOCK_REALTIME ms; INT64_MAX: never, the cost exceeds a cap), -EIO when
 * the store fails closed. cooldown_ready: when (app, trigger) may fire
 * again, 0 when it may now. now_ms: the clock all of these read.
 */
int svc_admit_cost(const char *app, uint32_t type, bool system);
int svc_admit_next(const char *app, uint32_t type, bool system, int64_t *at_ms);
int svc_admit_cooldown_ready(const char *app, uint32_t trigger, uint32_t period_s,
			     int64_t *ready_ms);
int64_t svc_admit_now_ms(void);
/* Fill usage for status and tests. */
int svc_admit_usage(const char *app, struct rl_usage out[RL_NWIN]);

#endif

/*
 * rl: the rate limiter (docs/DESIGN.md §5, docs/RATELIMIT.md).
 *
 * Every capture has a cost (per capture type, app request or system
 * trigger). Three sliding windows (1 h, 24 h, 7 d by default) each have a
 * system-wide cap and a per-app cap. A capture is admitted only if every
 * window has room for its cost, for the system and for the app; it is then
 * recorded once and counts in a window of length W while now - t < W.
 * Per (app, trigger) cooldowns are kept beside the windows.
 *
 * State is a SQLite file of its own, held with an exclusive lock: one rl
 * handle per file, and the handle is not usable across fork(). A handle is
 * used from one thread at a time.
 *
 * Apps are opaque strings built by the daemon ("uid:1000",
 * "uid:1000/com.example"), at most RL_APP_MAX - 1 bytes.
 *
 * Time: every now_ms is CLOCK_REALTIME in milliseconds, from the caller, so
 * windows survive reboots. A clock that steps back makes entries "in the
 * future" count in every window (it fails closed), never the other way.
 *
 * Return values. PROF_E_RATE_LIMIT_SYSTEM (1) and _PROCESS (2) collide
 * with EPERM and ENOENT, so the two admission calls return only PROF_E_*
 * codes, and the rest only errno codes:
 *   rl_admit, rl_check, rl_trigger_check: 0 or a negative PROF_E_* (a refusal);
 *   every other int function:   0 or a negative errno.
 */
#ifndef PD_RL_H
#define PD_RL_H

#include <stdbool.h>
#include <stdint.h>

#define RL_NWIN 3
#define RL_TYPE_MAX 4           /* capture types 1..4, enum prof_type */
#define RL_TRIGGER_MAX 8        /* trigger types 1..8, enum prof_trigger_type */
#define RL_APP_MAX 256          /* app key size, NUL included */
#define RL_MAX_APPS 4096        /* distinct apps held in memory */
#define RL_MAX_ENTRIES (1u << 20) /* cost entries held in memory */
/* Cooldown records are kept this long, so longer periods act as 30 d. */
#define RL_TRIGGER_KEEP_MS (30LL * 24 * 3600 * 1000)
#define RL_SCHEMA_VERSION 1

struct rl_window_cfg {
	int64_t length_ms;      /* > 0 */
	uint32_t system_cap;    /* cost units */
	uint32_t app_cap;
};

struct rl_config {
	/* Checked in this order; the first that fails picks the error. */
	struct rl_window_cfg win[RL_NWIN];
	/* Indexed by enum prof_type; [0] is unused. A cost of 0 is free
	 * and not recorded. */
	uint32_t app_cost[RL_TYPE_MAX + 1];
	uint32_t system_cost[RL_TYPE_MAX + 1];
	/* One app exempt from cost limits (not from cooldowns), "" for
	 * none. Its captures are neither checked nor recorded. */
	char exempt_app[RL_APP_MAX];
	/* synchronous=FULL: also durable against power loss, at one fsync
	 * per admission. Off: WAL with synchronous=NORMAL, durable against
	 * a crash or kill -9 of the daemon. */
	bool sync_full;
};

struct rl_usage {
	int64_t length_ms;
	uint64_t system_used;
	uint32_t system_cap;
	uint64_t app_used;
	uint32_t app_cap;
};

struct rl;

/* 1 h 20/10, 24 h 50/20, 7 d 150/30; cost 10 (app) and 5 (system). */
void rl_config_defaults(struct rl_config *cfg);

/*
 * Open or create the store at path and load the entries still inside the
 * longest window. cfg NULL means the defaults; it is copied.
 * Returns -EINVAL (bad arguments or config) or -ENOMEM, with *out NULL.
 * A store that cannot be opened, read, locked, or is corrupt or of a future
 * schema version still gives 0 and a handle, in the failed state: see
 * rl_failed(). The failure is logged with the file and the repair.
 */
int rl_open(const char *path, const struct rl_config *cfg, int64_t now_ms,
	    struct rl **out);
void rl_close(struct rl *rl);
/* New caps, costs and exempt app for the next decisions (config reload).
 * Recorded entries are kept. -EBUSY if a window length or sync_full would
 * change (those need a reopen), -EINVAL on a bad config. */
int rl_reconfigure(struct rl *rl, const struct rl_config *cfg);

/* True if the handle fails closed (also for NULL). *why, if given, gets
 * the reason, valid until rl_close(); "" when not failed. */
bool rl_failed(const struct rl *rl, const char **why);

/* The exempt app's key, or NULL when no app is exempt (so the daemon can
 * warn at start-up). */
const char *rl_exempt_app(const struct rl *rl);

/*
 * Admit a capture of type (1..RL_TYPE_MAX) for app, recording it. On 0 the
 * entry is already committed to the store, or, inside a batch, added to
 * the app's row of the batch, which rl_batch_commit writes and commits
 * (stored at the app's latest admission time in the batch, so after a
 * restart its earlier ones count longer by the spread of those times: a
 * loop turn unless the clock stepped; at most 32 apps are summed at
 * once, more write the rows into the transaction early). Refusals:
 *   -PROF_E_RATE_LIMIT_SYSTEM   a system cap is hit first; also in the
 *                               failed state, when the store cannot be
 *                               written, or at RL_MAX_APPS / RL_MAX_ENTRIES
 *   -PROF_E_RATE_LIMIT_PROCESS  the app's cap is hit first
 *   -PROF_E_INVALID_REQUEST     NULL/oversized app or bad type
 */
int rl_admit(struct rl *rl, const char *app, int type, bool system_triggered,
	     int64_t now_ms);

/*
 * Group commit. After rl_batch_begin, rl_admit and rl_trigger_record write
 * into one transaction (opened at the first write; rl_admit's rows are
 * written at the commit, or early past 32 apps), and rl_batch_commit
 * commits it: one WAL append for many admissions. The caller must hold
 * back whatever tells a peer "admitted" until rl_batch_commit returned 0.
 * rl_batch_commit: 0, -EINVAL, or -ENOSPC / -EIO when the commit (or an
 * early write of the batch's rows) failed;
 * then the batch is rolled back from the file but its entries stay
 * counted in memory until the next rl_open (it fails closed: the budget
 * looks more used than it is, never less). rl_close commits an open batch.
 */
int rl_batch_begin(struct rl *rl);
int rl_batch_commit(struct rl *rl);

/*
 * The decision rl_admit would take now, without recording anything, so
 * that the daemon can run its other admission rules before charging the
 * cost. Same return values as rl_admit.
 */
int rl_check(struct rl *rl, const char *app, int type, bool system_triggered,
	     int64_t now_ms);

/*
 * Cooldown check for (app, trigger 1..RL_TRIGGER_MAX): refused while
 * now_ms - last_fire < period_s * 1000. Records nothing. Returns 0,
 * -PROF_E_TRIGGER_COOLDOWN, -PROF_E_RATE_LIMIT_SYSTEM (failed state) or
 * -PROF_E_INVALID_REQUEST.
 */
int rl_trigger_check(struct rl *rl, const char *app, int trigger,
		     uint32_t period_s, int64_t now_ms);

/* Record an admitted trigger fire, committed before return. 0, -EINVAL,
 * -EIO (failed state or write error), -ENOSPC (RL_MAX_APPS reached). */
int rl_trigger_record(struct rl *rl, const char *app, int trigger,
		      int64_t now_ms);

/* Usage for a status command, per window in config order. app may be NULL
 * (app_used 0). -EINVAL, or -EIO in the failed state (out zeroed). */
int rl_usage(struct rl *rl, const char *app, int64_t now_ms,
	     struct rl_usage out[RL_NWIN]);

/*
 * The budget query (issue #21), reads only. rl_cost: what rl_admit of type
 * would charge app (0: free, also for the exempt app; -EINVAL).
 * rl_next_admit: the earliest time >= now_ms at which rl_check would pass
 * if nothing else were admitted meanwhile, in *at_ms; INT64_MAX when the
 * cost exceeds a cap (never). It walks the entries inside the windows:
 * O(entries) at worst. -EINVAL, or -EIO in the failed state.
 * rl_trigger_last: the last recorded fire of (app, trigger) in *fire_ms;
 * -ENOENT if none is kept, -EINVAL, -EIO in the failed state.
 */
int rl_cost(const struct rl *rl, const char *app, int type, bool system_triggered);
int rl_next_admit(struct rl *rl, const char *app, int type, bool system_triggered,
		  int64_t now_ms, int64_t *at_ms);
int rl_trigger_last(const struct rl *rl, const char *app, int trigger, int64_t *fire_ms);

/* Delete entries outside every window and cooldown records older than
 * RL_TRIGGER_KEEP_MS; free idle apps. rl_admit prunes the file itself
 * about once an hour. 0, -EINVAL, or -EIO. */
int rl_prune(struct rl *rl, int64_t now_ms);

/*
 * Repair (profilingd --reset-ratelimit): move path aside to
 * "<path>.broken-<unix seconds of now_ms>", remove <path>-wal and
 * <path>-shm, and create a fresh, empty store. -EBUSY if another process
 * holds the store open; other -errno on failure.
 */
int rl_reset(const char *path, int64_t now_ms);

#endif

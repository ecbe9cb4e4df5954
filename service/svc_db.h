/*
 * svc_db: the daemon's state database, <state>/profilingd.db (SQLite):
 * the file (its mode, checks, schema migrations, --reset-db), request ids,
 * the session log with the recovery of sessions a previous run left
 * active, and the apps' trigger registrations. The result index is
 * svc_db_result.h. Caps: session ends that cannot be written (disk full)
 * wait in memory, 64 at most (the oldest is dropped with a log line: the
 * next start reports that session as cut short); a recovery remembers at
 * most 4096 cut sessions for svc_db_recovered() (the rest are failed in
 * the database all the same).
 */
#ifndef PD_SVC_DB_H
#define PD_SVC_DB_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SVC_DB_SCHEMA_VERSION 8

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
/*
 * Group commit (svc_request's batch of one loop turn): after
 * svc_db_batch_begin, every write joins one transaction, opened at the
 * first new session or id block, and svc_db_batch_commit commits it.
 * Writes that need a transaction of their own (a result's commit, an
 * abandoned session) commit the batch's first. svc_db_batch_commit: 0,
 * or -ENOSPC / -EIO when a commit of the batch failed; the batch is then
 * rolled back (its sessions are not in the file) and the next id block
 * is written again. svc_db_fini commits an open batch.
 */
int svc_db_batch_begin(void);
int svc_db_batch_commit(void);
/*
 * The opener of the loop turn's batch (svc_request registers it; svc_db
 * sits below it): a session's end outside a batch calls it, so that the
 * end joins the turn's transaction instead of committing alone. It opens
 * a batch (svc_db_batch_begin, the peers' messages held until the
 * commit) or returns a negative errno (then the end commits alone). The
 * ends of a batch whose commit failed are written again before the next
 * session write, like those of a full disk.
 */
typedef int (*svc_db_group_fn)(void);
void svc_db_set_group(svc_db_group_fn fn);
/* A request id, unique across restarts; refusals take one too. */
int svc_db_alloc_id(uint64_t *id);
/* Record an admitted session as active. */
int svc_db_session_new(uint64_t id, const char *app, uid_t uid, pid_t pid, uint32_t type,
		       uint32_t trigger, const char *tag, uint64_t now_ns);
int svc_db_session_end(uint64_t id, const char *state, int error,
		       const char *message, uint64_t now_ns);
/* Registered triggers, one row per (app, type); spec is a packed pd.Trigger. */
int svc_db_trigger_put(const char *app, uint32_t type, uid_t uid, gid_t gid, const char *exe,
		       const void *spec, size_t len);
/* type < 0: all of app's. */
int svc_db_trigger_del(const char *app, int type);
typedef void (*svc_db_trigger_fn)(const char *app, uint32_t type, uid_t uid, gid_t gid,
				  const char *exe, const void *spec, size_t len, void *ud);
int svc_db_trigger_load(svc_db_trigger_fn fn, void *ud);

/*
 * Method-event configs added by profctl (svc_methods), so they survive a
 * restart: one row per id, targets joined by '\n' (admission refuses
 * control characters in a target), expires_ms an absolute CLOCK_REALTIME
 * time. At most SVC_DB_METHODS_MAX rows: a put of a new id past it is
 * -ENOSPC (svc_methods' own table is smaller, so it is never reached).
 */
#define SVC_DB_METHODS_MAX 64
struct svc_db_method_row {
	const char *id, *exe, *targets;
	uint32_t version, every, max_hits, canary_percent, budget_us;
	int64_t expires_ms;
};
int svc_db_methods_put(const struct svc_db_method_row *r);
/* id NULL: every row. */
int svc_db_methods_del(const char *id);
/*
 * Rows whose expires_ms is past now_ms are deleted; fn gets each other
 * one. The number handed to fn, or -EIO; *expired (if not NULL) gets how
 * many were deleted.
 */
int svc_db_methods_load(int64_t now_ms, void (*fn)(const struct svc_db_method_row *r, void *ud),
			void *ud, int *expired);

#endif

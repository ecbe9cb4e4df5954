/*
 * Private to the state database's files (svc_db.c, svc_db_result.c): the
 * connection and what both need to use it. Nothing else includes it.
 */
#ifndef PD_SVC_DB_PRIV_H
#define PD_SVC_DB_PRIV_H

#include <sqlite3.h>
#include <stdint.h>

/*
 * Prepared once, reset after each use: preparing costs more than running
 * these one-row statements (bench/admission).
 */
enum { ST_SESSION_NEW, ST_SESSION_END, ST_RESULT_ADD, ST_RESULT_DELIVERED,
       ST_BYTES_APP, ST_BYTES_ALL, ST_ID_LIMIT, ST_RESULT_ATTEMPT, ST_PENDING, ST_BEGIN,
       ST_COMMIT, ST_COUNT };

/* The open connection (NULL before svc_db_init). */
sqlite3 *svc_db_conn(void);
/* Statement which, prepared from sql at its first use; NULL (logged) if not. */
sqlite3_stmt *svc_db_stmt(int which, const char *sql);
/* Run sql; 0, -ENOSPC (SQLITE_FULL) or -EIO, logged. */
int svc_db_exec(const char *sql);
/* SQLITE_FULL is the disk (or quota) running out: -ENOSPC, so that a
 * capture ends with NO_DISK_SPACE rather than UNKNOWN; else -EIO. */
int svc_db_errno(int rc);
/* Step a statement that returns no row, then reset it. 0 or svc_db_errno. */
int svc_db_step_done(sqlite3_stmt *st);
/* Before a transaction of its own: commit the open batch's transaction
 * early (svc_db_batch_begin; a failure is kept for svc_db_batch_commit). */
void svc_db_batch_flush(void);
/* Write the session ends kept while the disk was full. */
void svc_db_backlog_flush(void);
/* Every write that adds or deletes results rows calls this, before or
 * after its statement (svc_db_result.c caches each app's bytes). */
void svc_db_results_changed(void);
/* The generation of the results rows, never 0: it moves at each
 * svc_db_results_changed, at the end (commit or rollback) of a
 * transaction that held one, and when the file closes. */
uint64_t svc_db_results_gen(void);
/* A session's end, written now (no backlog). 0 or svc_db_errno. */
int svc_db_session_end_now(uint64_t id, const char *state, int error, const char *message,
			   uint64_t now_ns);

#endif

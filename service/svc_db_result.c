/*
 * The result index (svc_db_result.h). A result is renamed into place
 * first and indexed second; svc_db_result_commit makes its row and the
 * session's "done" one transaction, the commit point of a capture.
 */
#include "svc_db_result.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "svc_db_priv.h"
#include "util.h"

int svc_db_result_add(uint64_t session_id, const char *app, uid_t uid, uint32_t type,
		      uint32_t trigger, const char *path, uint64_t size, const char *format,
		      uint64_t start_ns, uint64_t end_ns, uint64_t *result_id)
{
	sqlite3_stmt *st = svc_db_stmt(ST_RESULT_ADD, "INSERT INTO results(session_id,uid,type,trigger,"
				"path,size,format,start_ns,end_ns,app) VALUES(?,?,?,?,?,?,?,?,?,?)");
	if (!st)
		return -EIO;
	sqlite3_bind_text(st, 10, app, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 1, (sqlite3_int64)session_id);
	sqlite3_bind_int64(st, 2, uid);
	sqlite3_bind_int64(st, 3, type);
	sqlite3_bind_int64(st, 4, trigger);
	sqlite3_bind_text(st, 5, path, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 6, (sqlite3_int64)size);
	sqlite3_bind_text(st, 7, format, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 8, (sqlite3_int64)start_ns);
	sqlite3_bind_int64(st, 9, (sqlite3_int64)end_ns);
	svc_db_results_changed();
	int r = svc_db_step_done(st);
	if (r == 0)
		*result_id = (uint64_t)sqlite3_last_insert_rowid(svc_db_conn());
	return r;
}

int svc_db_result_commit(uint64_t session_id, const char *app, uid_t uid, uint32_t type,
			 uint32_t trigger, const char *path, uint64_t size, const char *format,
			 uint64_t start_ns, uint64_t end_ns, uint64_t *result_id)
{
	int r;
	svc_db_batch_flush();
	svc_db_backlog_flush();
	if ((r = svc_db_exec("BEGIN IMMEDIATE")) < 0)
		return r;
	if ((r = svc_db_result_add(session_id, app, uid, type, trigger, path, size, format,
				   start_ns, end_ns, result_id)) < 0 ||
	    (r = svc_db_session_end_now(session_id, "done", 0, NULL, end_ns)) < 0 ||
	    (r = svc_db_exec("COMMIT")) < 0) {
		svc_db_exec("ROLLBACK");
		return r;
	}
	return 0;
}

int svc_db_result_attempt(uint64_t result_id)
{
	sqlite3_stmt *st = svc_db_stmt(ST_RESULT_ATTEMPT, "UPDATE results SET attempts=attempts+1"
				" WHERE id=?");
	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)result_id);
	return svc_db_step_done(st);
}

int svc_db_result_delivered(uint64_t result_id, const char *app)
{
	sqlite3_stmt *st = svc_db_stmt(ST_RESULT_DELIVERED, "UPDATE results SET delivered=1"
				" WHERE id=?1 AND (?2 IS NULL OR app=?2) AND delivered=0");
	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)result_id);
	if (app)
		sqlite3_bind_text(st, 2, app, -1, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(st, 2);
	int r = svc_db_step_done(st);
	return r < 0 ? r : sqlite3_changes(svc_db_conn()) ? 0 : -ENOENT;
}

int svc_db_pending(const char *app, uint32_t max_attempts, uint64_t min_end_ns, unsigned limit,
		   svc_db_result_fn fn, void *ud)
{
	sqlite3_stmt *st = svc_db_stmt(ST_PENDING, "SELECT r.id, r.session_id, r.type, r.path, r.size,"
				" r.start_ns, COALESCE(s.tag, ''), r.trigger, r.note, r.error, r.message, r.uid,"
				" COALESCE(r.format, '') FROM results r"
				" LEFT JOIN sessions s ON s.id = r.session_id"
				" WHERE r.app=? AND r.delivered=0 AND r.attempts<? AND r.end_ns>=?"
				" ORDER BY r.id LIMIT ?");
	int n = 0, rc;
	if (!st)
		return -EIO;
	sqlite3_bind_text(st, 1, app, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 2, max_attempts);
	sqlite3_bind_int64(st, 3, (sqlite3_int64)min_end_ns);
	sqlite3_bind_int64(st, 4, limit);
	/* Collect first: fn may write to the database. */
	struct svc_db_result rows[16];
	while (n < (int)(sizeof(rows) / sizeof(rows[0])) && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct svc_db_result *r = &rows[n];
		r->id = (uint64_t)sqlite3_column_int64(st, 0);
		r->session_id = (uint64_t)sqlite3_column_int64(st, 1);
		r->type = (uint32_t)sqlite3_column_int(st, 2);
		util_strlcpy(r->path, (const char *)sqlite3_column_text(st, 3), sizeof(r->path));
		r->size = (uint64_t)sqlite3_column_int64(st, 4);
		r->start_ns = (uint64_t)sqlite3_column_int64(st, 5);
		util_strlcpy(r->tag, (const char *)sqlite3_column_text(st, 6), sizeof(r->tag));
		r->trigger = (uint32_t)sqlite3_column_int(st, 7);
		util_strlcpy(r->note, (const char *)sqlite3_column_text(st, 8), sizeof(r->note));
		r->error = sqlite3_column_int(st, 9);
		util_strlcpy(r->message, (const char *)sqlite3_column_text(st, 10), sizeof(r->message));
		r->uid = (uid_t)sqlite3_column_int64(st, 11);
		/* Heap formats (issue #20): the redelivery says what was stored. */
		util_strlcpy(r->format, (const char *)sqlite3_column_text(st, 12), sizeof(r->format));
		n++;
	}
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	for (int i = 0; i < n; i++)
		fn(&rows[i], ud);
	return n;
}

int svc_db_result_delete(uint64_t result_id)
{
	char sql[96];
	snprintf(sql, sizeof(sql), "DELETE FROM results WHERE id=%llu", (unsigned long long)result_id);
	svc_db_results_changed();
	return svc_db_exec(sql);
}

int svc_db_expired(uint64_t before_ns, svc_db_result_fn fn, void *ud)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(svc_db_conn(), "SELECT id, path, size FROM results WHERE end_ns < ? ORDER BY id",
			       -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)before_ns);
	int n = 0, rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct svc_db_result r = { 0 };
		r.id = (uint64_t)sqlite3_column_int64(st, 0);
		util_strlcpy(r.path, (const char *)sqlite3_column_text(st, 1), sizeof(r.path));
		r.size = (uint64_t)sqlite3_column_int64(st, 2);
		fn(&r, ud);
		n++;
	}
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? n : -EIO;
}

int svc_db_over_quota(uint64_t max_app_bytes, svc_db_result_fn fn, void *ud)
{
	sqlite3_stmt *st;
	/* Oldest first within each app that is over its quota. */
	if (sqlite3_prepare_v2(svc_db_conn(), "SELECT r.id, r.path, r.size, r.app, t.total FROM results r JOIN"
			       " (SELECT app, SUM(size) AS total FROM results GROUP BY app"
			       "  HAVING SUM(size) > ?) t ON t.app = r.app WHERE r.size > 0"
			       " ORDER BY r.app, r.end_ns",
			       -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)max_app_bytes);
	char app[RL_APP_MAX] = "";
	uint64_t total = 0;
	int n = 0, rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct svc_db_result r = { 0 };
		const char *a = (const char *)sqlite3_column_text(st, 3);
		if (strcmp(a, app) != 0) {
			util_strlcpy(app, a, sizeof(app));
			total = (uint64_t)sqlite3_column_int64(st, 4);
		}
		if (total <= max_app_bytes)
			continue;
		r.id = (uint64_t)sqlite3_column_int64(st, 0);
		util_strlcpy(r.path, (const char *)sqlite3_column_text(st, 1), sizeof(r.path));
		r.size = (uint64_t)sqlite3_column_int64(st, 2);
		total -= r.size;
		fn(&r, ud);
		n++;
	}
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? n : -EIO;
}

static int db_sum(int which, const char *sql, const char *app, uint64_t *out)
{
	sqlite3_stmt *st = svc_db_stmt(which, sql);
	*out = 0;
	if (!st)
		return -EIO;
	if (app)
		sqlite3_bind_text(st, 1, app, -1, SQLITE_STATIC);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*out = (uint64_t)sqlite3_column_int64(st, 0);
	sqlite3_reset(st);
	return rc == SQLITE_ROW ? 0 : -EIO;
}

/*
 * Each app's bytes, cached. svc_admit_disk_check asks for the requesting
 * app's on every request, and its SUM (an index walk over the app's rows)
 * was 7.7 % of the daemon's time under bench/admission, where no result
 * is stored between two requests. An entry holds while the generation of
 * the rows (svc_db_results_gen) has not moved since it was read.
 * Updates of delivered, attempts and note leave size and app alone.
 * Direct-mapped, BYTES_SLOTS entries: a miss, or a key too long to keep,
 * is one SUM.
 */
#define BYTES_SLOTS 32
static struct bytes_slot {
	uint64_t gen, bytes; /* gen 0: empty */
	char app[RL_APP_MAX];
} bytes_cache[BYTES_SLOTS];

int svc_db_result_bytes(const char *app, uint64_t *bytes)
{
	if (!app)
		return db_sum(ST_BYTES_ALL, "SELECT COALESCE(SUM(size),0) FROM results", NULL, bytes);
	uint64_t gen = svc_db_results_gen();
	size_t len = strlen(app);
	struct bytes_slot *s =
		len < RL_APP_MAX ? &bytes_cache[util_str_hash(app) % BYTES_SLOTS] : NULL;
	if (s && s->gen == gen && !memcmp(s->app, app, len + 1)) {
		*bytes = s->bytes;
		return 0;
	}
	int r = db_sum(ST_BYTES_APP, "SELECT COALESCE(SUM(size),0) FROM results WHERE app=?", app,
		       bytes);
	if (r == 0 && s) {
		s->gen = gen;
		s->bytes = *bytes;
		memcpy(s->app, app, len + 1);
	}
	return r;
}

int svc_db_result_requeue(uint64_t session_id, const char *note)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(svc_db_conn(), "UPDATE results SET delivered=0, attempts=0, note=?"
			       " WHERE session_id=?", -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_text(st, 1, note, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)session_id);
	int rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? (sqlite3_changes(svc_db_conn()) ? 0 : -ENOENT) : -EIO;
}

/* ------------------------------------------------- profctl queries */

static void row_read(sqlite3_stmt *st, struct svc_db_row *r)
{
	const char *t;
	memset(r, 0, sizeof(*r));
	r->id = (uint64_t)sqlite3_column_int64(st, 0);
	r->session_id = (uint64_t)sqlite3_column_int64(st, 1);
	if ((t = (const char *)sqlite3_column_text(st, 2)))
		util_strlcpy(r->app, t, sizeof(r->app));
	r->uid = (uid_t)sqlite3_column_int64(st, 3);
	r->type = (uint32_t)sqlite3_column_int(st, 4);
	r->trigger = (uint32_t)sqlite3_column_int(st, 5);
	if ((t = (const char *)sqlite3_column_text(st, 6)))
		util_strlcpy(r->path, t, sizeof(r->path));
	r->size = (uint64_t)sqlite3_column_int64(st, 7);
	if ((t = (const char *)sqlite3_column_text(st, 8)))
		util_strlcpy(r->format, t, sizeof(r->format));
	r->start_ns = (uint64_t)sqlite3_column_int64(st, 9);
	r->end_ns = (uint64_t)sqlite3_column_int64(st, 10);
	r->delivered = sqlite3_column_int(st, 11) != 0;
	r->attempts = (uint32_t)sqlite3_column_int(st, 12);
	if ((t = (const char *)sqlite3_column_text(st, 13)))
		util_strlcpy(r->note, t, sizeof(r->note));
	if ((t = (const char *)sqlite3_column_text(st, 14)))
		util_strlcpy(r->tag, t, sizeof(r->tag));
	r->pid = (uint32_t)sqlite3_column_int64(st, 15);
}

#define ROW_COLS "r.id, r.session_id, r.app, r.uid, r.type, r.trigger, r.path, r.size," \
	" r.format, r.start_ns, r.end_ns, r.delivered, r.attempts, r.note," \
	" COALESCE(s.tag, ''), COALESCE(s.pid, 0)"

int svc_db_results_list(bool all_uids, uid_t uid, const char *app, unsigned limit,
			void (*fn)(const struct svc_db_row *r, void *ud), void *ud)
{
	sqlite3_stmt *st;
	int total = 0, rc;
	const char *where = " WHERE (?1 OR r.uid = ?2) AND (?3 IS NULL OR r.app = ?3)";
	char sql[512];

	snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM results r%s", where);
	if (sqlite3_prepare_v2(svc_db_conn(), sql, -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_int(st, 1, all_uids);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)uid);
	if (app)
		sqlite3_bind_text(st, 3, app, -1, SQLITE_TRANSIENT);
	if (sqlite3_step(st) == SQLITE_ROW)
		total = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	snprintf(sql, sizeof(sql), "SELECT " ROW_COLS " FROM results r LEFT JOIN sessions s"
		 " ON s.id = r.session_id%s ORDER BY r.id DESC LIMIT ?4", where);
	if (sqlite3_prepare_v2(svc_db_conn(), sql, -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_int(st, 1, all_uids);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)uid);
	if (app)
		sqlite3_bind_text(st, 3, app, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 4, limit);
	/* One row at a time: the caller only reads. */
	struct svc_db_row *r = malloc(sizeof(*r));
	if (!r) {
		sqlite3_finalize(st);
		return -ENOMEM;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		row_read(st, r);
		fn(r, ud);
	}
	free(r);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? total : -EIO;
}

int svc_db_result_get(uint64_t id, struct svc_db_row *out)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(svc_db_conn(), "SELECT " ROW_COLS " FROM results r LEFT JOIN sessions s"
			       " ON s.id = r.session_id WHERE r.id = ?", -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		row_read(st, out);
	sqlite3_finalize(st);
	return rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? -ENOENT : -EIO;
}

int svc_db_apps(void (*fn)(const char *app, uid_t uid, uint32_t n, uint64_t bytes, void *ud),
		void *ud)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(svc_db_conn(), "SELECT app, MIN(uid), COUNT(*), SUM(size) FROM results"
			       " GROUP BY app ORDER BY app", -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	int rc, n = 0;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		fn((const char *)sqlite3_column_text(st, 0), (uid_t)sqlite3_column_int64(st, 1),
		   (uint32_t)sqlite3_column_int(st, 2), (uint64_t)sqlite3_column_int64(st, 3), ud);
		n++;
	}
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? n : -EIO;
}

/*
 * The daemon's state database (<state>/profilingd.db): sessions and
 * results. WAL mode; PRAGMA user_version is the schema version and
 * migrations[] brings an older file up to date. A file from a newer
 * profilingd is refused rather than guessed at.
 */
#include "svc.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"

static sqlite3 *db;

/*
 * Prepared once, reset after each use: preparing costs more than running
 * these one-row statements (bench/admission).
 */
enum { ST_SESSION_NEW, ST_SESSION_END, ST_RESULT_ADD, ST_RESULT_DELIVERED,
       ST_BYTES_APP, ST_BYTES_ALL, ST_ID_LIMIT, ST_RESULT_ATTEMPT, ST_PENDING, ST_COUNT };
static sqlite3_stmt *stmts[ST_COUNT];

static sqlite3_stmt *stmt(int which, const char *sql)
{
	if (!stmts[which] && sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT,
						&stmts[which], NULL) != SQLITE_OK) {
		LOG_E("%s", sqlite3_errmsg(db));
		return NULL;
	}
	return stmts[which];
}

/* migrations[i] takes the schema from version i to i + 1. */
static const char *const migrations[] = {
	/* 1 (parenthesised: one element of several literals, on purpose) */
	("CREATE TABLE sessions ("
	" id INTEGER PRIMARY KEY AUTOINCREMENT,"
	" uid INTEGER NOT NULL, pid INTEGER NOT NULL, type INTEGER NOT NULL,"
	" trigger INTEGER NOT NULL DEFAULT 0, tag TEXT NOT NULL DEFAULT '',"
	" state TEXT NOT NULL, error INTEGER NOT NULL DEFAULT 0, message TEXT,"
	" created_ns INTEGER NOT NULL, ended_ns INTEGER);"
	"CREATE INDEX sessions_state ON sessions(state);"
	"CREATE TABLE results ("
	" id INTEGER PRIMARY KEY AUTOINCREMENT,"
	" session_id INTEGER NOT NULL REFERENCES sessions(id),"
	" uid INTEGER NOT NULL, type INTEGER NOT NULL, trigger INTEGER NOT NULL DEFAULT 0,"
	" path TEXT NOT NULL, size INTEGER NOT NULL, format TEXT NOT NULL,"
	" start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,"
	" delivered INTEGER NOT NULL DEFAULT 0, attempts INTEGER NOT NULL DEFAULT 0);"
	"CREATE INDEX results_uid ON results(uid, delivered);"),
	/* 2: the app key (uid plus [apps] id) for quotas and listings. */
	("ALTER TABLE sessions ADD COLUMN app TEXT NOT NULL DEFAULT '';"
	"ALTER TABLE results ADD COLUMN app TEXT NOT NULL DEFAULT '';"
	"UPDATE results SET app = 'uid:' || uid;"
	"UPDATE sessions SET app = 'uid:' || uid;"
	"CREATE INDEX results_app ON results(app);"),
	/* 3: request ids are handed out in blocks (svc_db_alloc_id). */
	("CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);"
	"INSERT INTO meta VALUES('id_limit', (SELECT COALESCE(MAX(id), 0) + 1 FROM sessions));"),
	/* 4: registered triggers; spec is the packed pd.Trigger. */
	("CREATE TABLE triggers (app TEXT NOT NULL, type INTEGER NOT NULL,"
	" uid INTEGER NOT NULL, gid INTEGER NOT NULL, exe TEXT NOT NULL, spec BLOB NOT NULL,"
	" PRIMARY KEY (app, type));"),
	/* 5: a note on a result, e.g. the OOM kill that followed it. */
	("ALTER TABLE results ADD COLUMN note TEXT NOT NULL DEFAULT '';"),
};

/*
 * Request ids, refused ones included, come from [next_id, id_limit); the
 * limit is persisted one block ahead, so ids never repeat across restarts
 * and a refusal costs no write.
 */
#define ID_BLOCK 4096
static uint64_t next_id, id_limit;

_Static_assert(sizeof(migrations) / sizeof(migrations[0]) == SVC_DB_SCHEMA_VERSION,
	       "one migration per schema version");

static int db_load_id_limit(void);

static int db_exec(const char *sql)
{
	char *err = NULL;
	if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
		LOG_E("%s", err ? err : sqlite3_errmsg(db));
		sqlite3_free(err);
		return -EIO;
	}
	return 0;
}

static int db_user_version(int *v)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	int r = sqlite3_step(st) == SQLITE_ROW ? 0 : -EIO;
	*v = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return r;
}

static int db_migrate(const char *path)
{
	int v, r;
	char sql[64];

	if ((r = db_user_version(&v)) < 0)
		return r;
	if (v > SVC_DB_SCHEMA_VERSION) {
		LOG_E("%s has schema version %d, newer than this profilingd (%d); "
		      "run the newer profilingd or move the file aside", path, v,
		      SVC_DB_SCHEMA_VERSION);
		return -EPROTO;
	}
	for (; v < SVC_DB_SCHEMA_VERSION; v++) {
		if ((r = db_exec("BEGIN IMMEDIATE")) < 0)
			return r;
		snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", v + 1);
		if ((r = db_exec(migrations[v])) < 0 || (r = db_exec(sql)) < 0) {
			db_exec("ROLLBACK");
			return r;
		}
		if ((r = db_exec("COMMIT")) < 0)
			return r;
		LOG_I("%s: schema migrated to version %d", path, v + 1);
	}
	return 0;
}

int svc_db_init(const char *path)
{
	int r;
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
			    SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
		LOG_E("cannot open %s: %s", path, db ? sqlite3_errmsg(db) : "out of memory");
		svc_db_fini();
		return -EIO;
	}
	sqlite3_busy_timeout(db, 2000);
	/* WAL + NORMAL survives a daemon crash; see docs/ARCHITECTURE.md. */
	/*
	 * WAL + NORMAL survives a daemon crash (see docs/ARCHITECTURE.md).
	 * EXCLUSIVE: the daemon is the only user (profilingd.lock), so skip
	 * the per-transaction file locks and the shared-memory index.
	 * Checkpoints fsync; at the default 1000 pages they were ~15 % of
	 * the daemon's time under load, so they run every 16 MiB of WAL,
	 * which is truncated back to 16 MiB at most.
	 */
	if ((r = db_exec("PRAGMA locking_mode=EXCLUSIVE; PRAGMA journal_mode=WAL;"
			 " PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;"
			 " PRAGMA wal_autocheckpoint=4096; PRAGMA journal_size_limit=16777216")) < 0 ||
	    (r = db_migrate(path)) < 0 || (r = db_load_id_limit()) < 0) {
		svc_db_fini();
		return r;
	}
	return 0;
}

void svc_db_fini(void)
{
	for (int i = 0; i < ST_COUNT; i++) {
		sqlite3_finalize(stmts[i]);
		stmts[i] = NULL;
	}
	if (db)
		sqlite3_close_v2(db);
	db = NULL;
}

int svc_db_recover(void)
{
	if (db_exec("UPDATE sessions SET state='failed', error=8,"
		    " message='daemon restarted during the capture'"
		    " WHERE state='active'") < 0)
		return -EIO;
	return sqlite3_changes(db);
}

static int db_step_done(sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		LOG_E("%s", sqlite3_errmsg(db));
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc == SQLITE_DONE ? 0 : -EIO;
}

static int db_load_id_limit(void)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key='id_limit'", -1, &st,
			       NULL) != SQLITE_OK)
		return -EIO;
	int r = sqlite3_step(st) == SQLITE_ROW ? 0 : -EIO;
	if (r == 0)
		next_id = id_limit = (uint64_t)sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return r;
}

int svc_db_alloc_id(uint64_t *id)
{
	if (next_id >= id_limit) {
		sqlite3_stmt *st = stmt(ST_ID_LIMIT, "UPDATE meta SET value=? WHERE key='id_limit'");
		if (!st)
			return -EIO;
		sqlite3_bind_int64(st, 1, (sqlite3_int64)(next_id + ID_BLOCK));
		if (db_step_done(st) < 0)
			return -EIO;
		id_limit = next_id + ID_BLOCK;
	}
	*id = next_id++;
	return 0;
}

int svc_db_session_new(uint64_t id, const char *app, uid_t uid, pid_t pid, uint32_t type,
		       const char *tag, uint64_t now_ns)
{
	sqlite3_stmt *st = stmt(ST_SESSION_NEW, "INSERT INTO sessions(id,app,uid,pid,type,tag,"
				"state,created_ns) VALUES(?,?,?,?,?,?,'active',?)");
	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
	sqlite3_bind_text(st, 2, app, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 3, uid);
	sqlite3_bind_int64(st, 4, pid);
	sqlite3_bind_int64(st, 5, type);
	sqlite3_bind_text(st, 6, tag ? tag : "", -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 7, (sqlite3_int64)now_ns);
	return db_step_done(st);
}

int svc_db_session_end(uint64_t id, const char *state, int error, const char *message,
		       uint64_t now_ns)
{
	sqlite3_stmt *st = stmt(ST_SESSION_END, "UPDATE sessions SET state=?, error=?, message=?,"
				" ended_ns=? WHERE id=?");
	if (!st)
		return -EIO;
	sqlite3_bind_text(st, 1, state, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 2, error);
	sqlite3_bind_text(st, 3, message ? message : "", -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 4, (sqlite3_int64)now_ns);
	sqlite3_bind_int64(st, 5, (sqlite3_int64)id);
	return db_step_done(st);
}

int svc_db_result_add(uint64_t session_id, const char *app, uid_t uid, uint32_t type,
		      uint32_t trigger, const char *path, uint64_t size, const char *format,
		      uint64_t start_ns, uint64_t end_ns, uint64_t *result_id)
{
	sqlite3_stmt *st = stmt(ST_RESULT_ADD, "INSERT INTO results(session_id,uid,type,trigger,"
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
	int r = db_step_done(st);
	if (r == 0)
		*result_id = (uint64_t)sqlite3_last_insert_rowid(db);
	return r;
}

int svc_db_result_attempt(uint64_t result_id)
{
	sqlite3_stmt *st = stmt(ST_RESULT_ATTEMPT, "UPDATE results SET attempts=attempts+1"
				" WHERE id=?");
	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)result_id);
	return db_step_done(st);
}

int svc_db_result_delivered(uint64_t result_id, const char *app)
{
	sqlite3_stmt *st = stmt(ST_RESULT_DELIVERED, "UPDATE results SET delivered=1"
				" WHERE id=?1 AND (?2 IS NULL OR app=?2) AND delivered=0");
	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)result_id);
	if (app)
		sqlite3_bind_text(st, 2, app, -1, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(st, 2);
	int r = db_step_done(st);
	return r < 0 ? r : sqlite3_changes(db) ? 0 : -ENOENT;
}

int svc_db_pending(const char *app, uint32_t max_attempts, uint64_t min_end_ns, unsigned limit,
		   svc_db_result_fn fn, void *ud)
{
	sqlite3_stmt *st = stmt(ST_PENDING, "SELECT r.id, r.session_id, r.type, r.path, r.size,"
				" r.start_ns, COALESCE(s.tag, ''), r.trigger, r.note FROM results r"
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
	return db_exec(sql);
}

int svc_db_expired(uint64_t before_ns, svc_db_result_fn fn, void *ud)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(db, "SELECT id, path, size FROM results WHERE end_ns < ? ORDER BY id",
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
	if (sqlite3_prepare_v2(db, "SELECT r.id, r.path, r.size, r.app, t.total FROM results r JOIN"
			       " (SELECT app, SUM(size) AS total FROM results GROUP BY app"
			       "  HAVING SUM(size) > ?) t ON t.app = r.app ORDER BY r.app, r.end_ns",
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
	sqlite3_stmt *st = stmt(which, sql);
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

int svc_db_result_bytes(const char *app, uint64_t *bytes)
{
	if (app)
		return db_sum(ST_BYTES_APP, "SELECT COALESCE(SUM(size),0) FROM results WHERE app=?",
			      app, bytes);
	return db_sum(ST_BYTES_ALL, "SELECT COALESCE(SUM(size),0) FROM results", NULL, bytes);
}

int svc_db_trigger_put(const char *app, uint32_t type, uid_t uid, gid_t gid, const char *exe,
		       const void *spec, size_t len)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO triggers VALUES(?,?,?,?,?,?)", -1, &st,
			       NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_text(st, 1, app, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 2, type);
	sqlite3_bind_int64(st, 3, uid);
	sqlite3_bind_int64(st, 4, gid);
	sqlite3_bind_text(st, 5, exe, -1, SQLITE_TRANSIENT);
	sqlite3_bind_blob(st, 6, spec, (int)len, SQLITE_TRANSIENT);
	int rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : -EIO;
}

int svc_db_trigger_del(const char *app, int type)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(db, type < 0 ? "DELETE FROM triggers WHERE app=?1"
			       : "DELETE FROM triggers WHERE app=?1 AND type=?2", -1, &st,
			       NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_text(st, 1, app, -1, SQLITE_TRANSIENT);
	if (type >= 0)
		sqlite3_bind_int64(st, 2, type);
	int rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : -EIO;
}

int svc_db_trigger_load(svc_db_trigger_fn fn, void *ud)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(db, "SELECT app, type, uid, gid, exe, spec FROM triggers", -1, &st,
			       NULL) != SQLITE_OK)
		return -EIO;
	int rc, n = 0;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		fn((const char *)sqlite3_column_text(st, 0), (uint32_t)sqlite3_column_int(st, 1),
		   (uid_t)sqlite3_column_int64(st, 2), (gid_t)sqlite3_column_int64(st, 3),
		   (const char *)sqlite3_column_text(st, 4), sqlite3_column_blob(st, 5),
		   (size_t)sqlite3_column_bytes(st, 5), ud);
		n++;
	}
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? n : -EIO;
}

int svc_db_result_requeue(uint64_t session_id, const char *note)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(db, "UPDATE results SET delivered=0, attempts=0, note=?"
			       " WHERE session_id=?", -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_text(st, 1, note, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)session_id);
	int rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? (sqlite3_changes(db) ? 0 : -ENOENT) : -EIO;
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
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
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
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
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
	if (sqlite3_prepare_v2(db, "SELECT " ROW_COLS " FROM results r LEFT JOIN sessions s"
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
	if (sqlite3_prepare_v2(db, "SELECT app, MIN(uid), COUNT(*), SUM(size) FROM results"
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

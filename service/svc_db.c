/*
 * The daemon's state database (<state>/profilingd.db, svc_db.h): the file,
 * ids, sessions and trigger registrations; the result index is
 * svc_db_result.c, over the same connection (svc_db_priv.h). WAL mode;
 * PRAGMA user_version is the schema version and migrations[] brings an
 * older file up to date. A file from a newer profilingd is refused rather
 * than guessed at.
 */
#include "svc_db.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "profiling/profiling.h"
#include "svc_config.h"
#include "svc_db_priv.h"
#include "util.h"

static sqlite3 *db;

static sqlite3_stmt *stmts[ST_COUNT];

sqlite3 *svc_db_conn(void)
{
	return db;
}

/*
 * The generation of the results rows (svc_db_priv.h). A sum read inside
 * a transaction with such a write must not outlive its rollback: the
 * transaction's end, seen as autocommit mode again, moves it once more.
 */
static uint64_t results_gen = 1;
static bool results_written; /* since the last transaction end was seen */

void svc_db_results_changed(void)
{
	results_gen++;
	results_written = true;
}

uint64_t svc_db_results_gen(void)
{
	if (results_written && (!db || sqlite3_get_autocommit(db))) {
		results_gen++;
		results_written = false;
	}
	return results_gen;
}

sqlite3_stmt *svc_db_stmt(int which, const char *sql)
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
	/* 6: failure results (path ''): a capture the daemon could not finish
	 * and whose app was never told, queued like a result until acked. */
	("ALTER TABLE results ADD COLUMN error INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE results ADD COLUMN message TEXT NOT NULL DEFAULT '';"),
	/* 7: profctl's method-event configs (issue #19), kept across restarts. */
	("CREATE TABLE method_configs (id TEXT PRIMARY KEY, version INTEGER NOT NULL,"
	" exe TEXT NOT NULL, targets TEXT NOT NULL, every INTEGER NOT NULL,"
	" max_hits INTEGER NOT NULL, canary_percent INTEGER NOT NULL,"
	" expires_ms INTEGER NOT NULL, budget_us INTEGER NOT NULL DEFAULT 0);"),
	/*
	 * 8: sessions rebuilt for the cost of a session's two writes, the
	 * INSERT at admission and the UPDATE at its end (issue #18; 17-20 ->
	 * 10-14 us a session in a C loop of the daemon's statements on the
	 * 2-core machine). No AUTOINCREMENT: ids come from svc_db_alloc_id,
	 * never reused, so its sqlite_sequence update per INSERT bought
	 * nothing. The index on state, whose key every end moved from
	 * 'active' to another value among all the ended sessions, becomes a
	 * partial index of the active ones, all that recovery and abandon
	 * look up. Same columns in the same order. db_migrate turns the
	 * foreign keys off around it: results refer to sessions(id).
	 */
	("CREATE TABLE sessions_new ("
	" id INTEGER PRIMARY KEY,"
	" uid INTEGER NOT NULL, pid INTEGER NOT NULL, type INTEGER NOT NULL,"
	" trigger INTEGER NOT NULL DEFAULT 0, tag TEXT NOT NULL DEFAULT '',"
	" state TEXT NOT NULL, error INTEGER NOT NULL DEFAULT 0, message TEXT,"
	" created_ns INTEGER NOT NULL, ended_ns INTEGER, app TEXT NOT NULL DEFAULT '');"
	"INSERT INTO sessions_new (id, uid, pid, type, trigger, tag, state, error, message,"
	" created_ns, ended_ns, app) SELECT id, uid, pid, type, trigger, tag, state, error,"
	" message, created_ns, ended_ns, app FROM sessions;"
	"DROP TABLE sessions;"
	"ALTER TABLE sessions_new RENAME TO sessions;"
	"CREATE INDEX sessions_active ON sessions(id) WHERE state='active';"),
};

/*
 * Request ids, refused ones included, come from [next_id, id_limit); the
 * limit is persisted one block ahead, so ids never repeat across restarts
 * and a refusal costs no write. The block is large because its commit
 * stalls the event loop for milliseconds: with 4096, a uid flooding
 * refused requests (85k/s) made it commit 20 times a second, and another
 * uid's round trip p99 was 5 ms instead of 1 (bench/flood_connect.sh). A
 * restart skips at most one block of a 64-bit space.
 */
#define ID_BLOCK (1u << 20)
static uint64_t next_id, id_limit;

_Static_assert(sizeof(migrations) / sizeof(migrations[0]) == SVC_DB_SCHEMA_VERSION,
	       "one migration per schema version");

/*
 * Session ends that could not be written (the disk was full) are kept and
 * written before the next session write. At the cap the oldest is dropped
 * with a log line: a restart would then report that session failed again.
 */
#define END_BACKLOG 64
static struct end_rec {
	uint64_t id, ns;
	int error;
	char state[8];
	char msg[160];
} backlog[END_BACKLOG];
static unsigned nbacklog;

/*
 * A session's end joins the loop turn's group commit (svc_db_set_group):
 * the ends written in the open batch transaction, kept until it commits;
 * a failed commit puts them in the backlog. At the cap the transaction is
 * committed early (svc_db_batch_flush). Why: bench/admission.sh, where
 * every admitted session ends at once (no runtime): one commit per end
 * was about 7 pwrite calls (WAL frames) per admitted session.
 */
#define END_GROUP_MAX 256
static struct end_rec grouped[END_GROUP_MAX];
static unsigned ngrouped;
static svc_db_group_fn group_fn;

static int db_load_id_limit(void);

/*
 * Group commit: batching from svc_db_batch_begin to svc_db_batch_commit;
 * in_tx while its transaction is open; batch_err, a failed early commit.
 */
static bool batching, in_tx;
static int batch_err;

/*
 * The batch's BEGIN and COMMIT, prepared once: parsing them each loop
 * turn was 1.5 % of the daemon's time under bench/admission, with the
 * rate limiter's pair.
 */
static int db_tx(int which, const char *sql)
{
	sqlite3_stmt *st = svc_db_stmt(which, sql);
	return st ? svc_db_step_done(st) : -EIO;
}

/* Open the batch's transaction at its first write. */
static int db_batch_tx(void)
{
	if (!batching || in_tx)
		return 0;
	int r = db_tx(ST_BEGIN, "BEGIN IMMEDIATE");
	in_tx = r == 0;
	return r;
}

static void backlog_add(const struct end_rec *rec);

/* Commit the open transaction; a failure rolls it back and is kept. */
static int db_batch_end(void)
{
	if (!in_tx)
		return 0;
	in_tx = false;
	int r = db_tx(ST_COMMIT, "COMMIT");
	unsigned ends = ngrouped;
	ngrouped = 0;
	if (r < 0)
		for (unsigned i = 0; i < ends; i++)
			backlog_add(&grouped[i]); /* written again before the next session write */
	if (r < 0) {
		if (!sqlite3_get_autocommit(db))
			svc_db_exec("ROLLBACK");
		/* The id block may have gone with it: write it again at the next id. */
		id_limit = next_id;
		if (!batch_err)
			batch_err = r;
	}
	return r;
}

int svc_db_batch_begin(void)
{
	if (!db)
		return -EINVAL;
	batching = true;
	batch_err = 0;
	return 0;
}

void svc_db_batch_flush(void)
{
	db_batch_end();
}

int svc_db_batch_commit(void)
{
	db_batch_end();
	batching = false;
	int r = batch_err;
	batch_err = 0;
	return r;
}

int svc_db_exec(const char *sql)
{
	char *err = NULL;
	int rc = sqlite3_exec(db, sql, NULL, NULL, &err);
	if (rc != SQLITE_OK) {
		LOG_E("%s", err ? err : sqlite3_errmsg(db));
		sqlite3_free(err);
		return rc == SQLITE_FULL ? -ENOSPC : -EIO;
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

/* No row refers to a missing one (PRAGMA foreign_key_check). */
static int db_fk_check(const char *path)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(db, "PRAGMA foreign_key_check", -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		LOG_E("%s: a row of %s refers to a missing row of %s", path,
		      (const char *)sqlite3_column_text(st, 0), (const char *)sqlite3_column_text(st, 2));
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : rc == SQLITE_ROW ? -EUCLEAN : -EIO;
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
	if (v == SVC_DB_SCHEMA_VERSION)
		return 0;
	/*
	 * A step may rebuild a table that others refer to (8: sessions), and
	 * DROP TABLE under foreign keys deletes its rows first, which the
	 * references refuse. Off for the steps (the pragma is a no-op inside a
	 * transaction), checked before each commit, on again after.
	 */
	if ((r = svc_db_exec("PRAGMA foreign_keys=OFF")) < 0)
		return r;
	for (; v < SVC_DB_SCHEMA_VERSION; v++) {
		if ((r = svc_db_exec("BEGIN IMMEDIATE")) < 0)
			break;
		snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", v + 1);
		if ((r = svc_db_exec(migrations[v])) < 0 || (r = db_fk_check(path)) < 0 ||
		    (r = svc_db_exec(sql)) < 0) {
			svc_db_exec("ROLLBACK");
			break;
		}
		if ((r = svc_db_exec("COMMIT")) < 0)
			break;
		LOG_I("%s: schema migrated to version %d", path, v + 1);
	}
	int on = svc_db_exec("PRAGMA foreign_keys=ON");
	return r < 0 ? r : on;
}

/*
 * The first statements that touch the file tell a corrupt or foreign file
 * and a lock held by another process apart from the rest; each gets a log
 * line that names the file and the way out. -EUCLEAN: corrupt; -EBUSY:
 * locked.
 */
static int db_open_error(const char *path, int rc, const char *what)
{
	int prim = rc & 0xff;
	if (prim == SQLITE_NOTADB || prim == SQLITE_CORRUPT) {
		LOG_E("%s is corrupt (%s): profilingd will not start on it. To repair: stop "
		      "profilingd and run 'profilingd --reset-db' (with the same -c/--state-dir); it "
		      "moves the file aside as %s.broken-<unix time> and starts an empty one "
		      "(stored result files stay; undelivered ones are no longer offered, and apps "
		      "register their triggers again)", path, what, path);
		return -EUCLEAN;
	}
	if (prim == SQLITE_BUSY || prim == SQLITE_LOCKED) {
		LOG_E("%s is locked by another process (%s): profilingd keeps its database to "
		      "itself; stop whatever holds it (fuser %s) and start again", path, what, path);
		return -EBUSY;
	}
	LOG_E("cannot use %s: %s", path, what);
	return rc == SQLITE_FULL ? -ENOSPC : -EIO;
}

static int db_open_exec(const char *path, const char *sql)
{
	char *err = NULL;
	int rc = sqlite3_exec(db, sql, NULL, NULL, &err);
	int r = rc == SQLITE_OK ? 0 : db_open_error(path, rc, err ? err : sqlite3_errmsg(db));
	sqlite3_free(err);
	return r;
}

/* PRAGMA quick_check: a file whose header is fine can still be damaged. */
static int db_quick_check(const char *path)
{
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(db, "PRAGMA quick_check(1)", -1, &st, NULL);
	if (rc != SQLITE_OK)
		return db_open_error(path, rc, sqlite3_errmsg(db));
	rc = sqlite3_step(st);
	int r = 0;
	if (rc != SQLITE_ROW)
		r = db_open_error(path, rc, sqlite3_errmsg(db));
	else if (strcmp((const char *)sqlite3_column_text(st, 0), "ok") != 0) {
		char what[256];
		util_fmt(what, sizeof(what), "quick_check: %s", (const char *)sqlite3_column_text(st, 0));
		r = db_open_error(path, SQLITE_CORRUPT, what);
	}
	sqlite3_finalize(st);
	return r;
}

/*
 * SQLite's process-wide memory, set once before its first connection
 * (this one or ratelimit.db's): the daemon holds two connections for its
 * life, and with SQLite's defaults each one keeps memory it does not use
 * when idle (issue #18, measured with massif and smaps, 500 watched):
 *  - lookaside: 100 slots of 1200 bytes, 120 KiB per connection, all
 *    touched at open when its free list is built. 64 slots of 256 bytes
 *    (16 KiB) serve the daemon's small prepared statements; what does not
 *    fit falls back to malloc. (Debian 12's libsqlite3 is built with
 *    SQLITE_OMIT_LOOKASIDE, PRAGMA compile_options: there this call
 *    changes nothing; it stays for a libsqlite3 that has one.)
 *  - the page cache's bulk allocation of 20 pages (~86 KiB) per
 *    connection on its first read: pages are malloc'ed one by one instead,
 *    so an idle daemon holds only the pages its small databases have.
 * And for speed (issue #18, perf record under bench/admission):
 *  - single-thread mode: the daemon is one thread, yet every SQLite
 *    malloc and free took its memory mutex, and the statistics kept
 *    under it (sqlite3StatusHighwater): with the mutex calls ~2 % of the
 *    daemon's time. A thread that ever uses SQLite in the daemon must
 *    undo this first.
 *  - no memory statistics: nothing reads sqlite3_status() or sets a
 *    soft heap limit.
 * These are memory and speed settings only: no result or durability
 * changes. Later calls (a test that opens a second database) find SQLite
 * initialized and keep what the first call set.
 */
static void db_memory_config(void)
{
	static bool done;
	if (done)
		return;
	done = true;
	if (sqlite3_config(SQLITE_CONFIG_SINGLETHREAD) != SQLITE_OK ||
	    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0) != SQLITE_OK ||
	    sqlite3_config(SQLITE_CONFIG_LOOKASIDE, 256, 64) != SQLITE_OK ||
	    sqlite3_config(SQLITE_CONFIG_PAGECACHE, NULL, 0, 0) != SQLITE_OK)
		LOG_D("SQLite already initialized: its memory settings stay as they are");
}

int svc_db_init(const char *path)
{
	int r;
	db_memory_config();
	/*
	 * Create it ourselves, 0600: SQLite would make it 0644, and gives the
	 * -wal and -shm it creates the main file's mode. The rows name every
	 * app's results, tags, pids and trigger executables.
	 */
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		r = -errno;
		LOG_E("cannot open %s: %s", path, strerror(-r));
		return r;
	}
	close(fd);
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
			    SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
		LOG_E("cannot open %s: %s", path, db ? sqlite3_errmsg(db) : "out of memory");
		svc_db_fini();
		return -EIO;
	}
	sqlite3_busy_timeout(db, 2000);
	/*
	 * WAL + NORMAL survives a daemon crash (see docs/ARCHITECTURE.md).
	 * EXCLUSIVE: the daemon is the only user (profilingd.lock), so skip
	 * the per-transaction file locks and the shared-memory index.
	 * Checkpoints fsync; at the default 1000 pages they were ~15 % of
	 * the daemon's time under load, so they run every 16 MiB of WAL,
	 * which is truncated back to 16 MiB at most.
	 */
	if ((r = db_open_exec(path, "PRAGMA locking_mode=EXCLUSIVE; PRAGMA journal_mode=WAL;"
			      " PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;"
			      " PRAGMA wal_autocheckpoint=4096;"
			      " PRAGMA journal_size_limit=16777216;"
			      /* 512 KiB of pages, not 2 MiB: the cache grows with
			       * the file (results, sessions) and stays grown. */
			      " PRAGMA cache_size=-512")) < 0 ||
	    (r = db_quick_check(path)) < 0 ||
	    /* Take the write lock now, so that nobody else can while we run. */
	    (r = db_open_exec(path, "BEGIN IMMEDIATE; COMMIT")) < 0 ||
	    (r = db_migrate(path)) < 0 || (r = db_load_id_limit()) < 0) {
		svc_db_fini();
		return r;
	}
	return 0;
}

/* The largest session id in result file names under results_dir/<uid>/. */
static uint64_t max_result_id(const char *results_dir)
{
	uint64_t max = 0;
	DIR *d = opendir(results_dir);
	struct dirent *de;
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		int afd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		DIR *a = afd >= 0 ? fdopendir(afd) : NULL;
		struct dirent *fe;
		if (!a) {
			if (afd >= 0)
				close(afd);
			continue;
		}
		while ((fe = readdir(a))) {
			const char *us = strrchr(fe->d_name, '_');
			char *end;
			if (!us)
				continue;
			unsigned long long v = strtoull(us + 1, &end, 10);
			if (end != us + 1 && *end == '.' && v > max)
				max = v;
		}
		closedir(a);
	}
	closedir(d);
	return max;
}

int svc_db_reset(const char *path, const char *results_dir, char *moved, size_t n)
{
	char aside[SVC_PATH_MAX + 64], side[SVC_PATH_MAX + 16];
	long now = (long)time(NULL);
	int r;

	moved[0] = '\0';
	if (access(path, F_OK) == 0) {
		util_fmt(aside, sizeof(aside), "%s.broken-%ld", path, now);
		for (int i = 1; access(aside, F_OK) == 0 && i < 1000; i++)
			util_fmt(aside, sizeof(aside), "%s.broken-%ld.%d", path, now, i);
		if (rename(path, aside) < 0)
			return -errno;
		util_strlcpy(moved, aside, n);
	}
	for (int i = 0; i < 2; i++) {
		util_fmt(side, sizeof(side), "%s%s", path, i ? "-shm" : "-wal");
		if (unlink(side) < 0 && errno != ENOENT)
			return -errno;
	}
	if ((r = svc_db_init(path)) < 0)
		return r;
	/*
	 * Ids must not repeat those of result files already on disk: names
	 * carry the id, and a start-up sweep removes files by id.
	 */
	uint64_t next = max_result_id(results_dir) + 1;
	if (next > id_limit) {
		char sql[96];
		util_fmt(sql, sizeof(sql), "UPDATE meta SET value=%llu WHERE key='id_limit'",
			 (unsigned long long)next);
		r = svc_db_exec(sql);
	}
	svc_db_fini();
	return r;
}

void svc_db_fini(void)
{
	if (db) {
		svc_db_batch_commit();
		svc_db_backlog_flush();
		for (unsigned i = 0; i < nbacklog; i++)
			LOG_W("session %llu: its end could not be written (%s); the next start reports"
			      " it as cut short", (unsigned long long)backlog[i].id, backlog[i].msg);
		nbacklog = 0;
	}
	for (int i = 0; i < ST_COUNT; i++) {
		sqlite3_finalize(stmts[i]);
		stmts[i] = NULL;
	}
	if (db)
		sqlite3_close_v2(db);
	db = NULL;
	svc_db_results_changed(); /* the next file is another */
}

int svc_db_errno(int rc)
{
	return rc == SQLITE_FULL ? -ENOSPC : -EIO;
}

int svc_db_step_done(sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		LOG_E("%s", sqlite3_errmsg(db));
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc == SQLITE_DONE ? 0 : svc_db_errno(rc);
}

/*
 * Captures cut short and never reported to their app (the daemon was
 * killed or stopped mid-capture) become failure results: a results row
 * with no file (path ''), error and message set, queued for the app's
 * result listener like any undelivered result and sent until acked. The
 * row and the session's end are one transaction, so each cut session is
 * reported exactly once. id 0: every session still active.
 */
static int db_abandon(uint64_t id, const char *message)
{
	sqlite3_stmt *ins = NULL, *upd = NULL;
	uint64_t now = util_now_ns(CLOCK_REALTIME);
	int r = -EIO, n = 0;

	if (sqlite3_prepare_v2(db, "INSERT INTO results(session_id, uid, type, trigger, path, size,"
			       " format, start_ns, end_ns, app, error, message)"
			       " SELECT id, uid, type, trigger, '', 0, '', created_ns, ?1, app, ?2, ?3"
			       " FROM sessions WHERE state='active' AND (?4 = 0 OR id = ?4)", -1, &ins,
			       NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "UPDATE sessions SET state='failed', error=?2, message=?3,"
			       " ended_ns=?1 WHERE state='active' AND (?4 = 0 OR id = ?4)", -1, &upd,
			       NULL) != SQLITE_OK)
		goto out;
	for (int i = 0; i < 2; i++) {
		sqlite3_stmt *st = i ? upd : ins;
		sqlite3_bind_int64(st, 1, (sqlite3_int64)now);
		sqlite3_bind_int(st, 2, PROF_E_UNKNOWN);
		sqlite3_bind_text(st, 3, message, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 4, (sqlite3_int64)id);
	}
	svc_db_batch_flush();
	if ((r = svc_db_exec("BEGIN IMMEDIATE")) < 0)
		goto out;
	svc_db_results_changed();
	int rc = sqlite3_step(ins);
	if (rc == SQLITE_DONE) {
		n = sqlite3_changes(db);
		rc = sqlite3_step(upd);
	}
	if (rc != SQLITE_DONE || (r = svc_db_exec("COMMIT")) < 0) {
		if (rc != SQLITE_DONE)
			LOG_E("%s", sqlite3_errmsg(db));
		svc_db_exec("ROLLBACK");
		r = rc != SQLITE_DONE ? svc_db_errno(rc) : r;
		goto out;
	}
	r = n;
out:
	sqlite3_finalize(ins);
	sqlite3_finalize(upd);
	return r;
}

/* Sessions the last recovery failed, for svc_session to sweep their files. */
#define RECOVERED_MAX 4096
static struct { uint64_t id; uid_t uid; } recovered[RECOVERED_MAX];
static unsigned nrecovered;

int svc_db_recover(void)
{
	sqlite3_stmt *st;
	nrecovered = 0;
	if (sqlite3_prepare_v2(db, "SELECT id, uid FROM sessions WHERE state='active' LIMIT ?", -1,
			       &st, NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_int(st, 1, RECOVERED_MAX);
	while (sqlite3_step(st) == SQLITE_ROW) {
		recovered[nrecovered].id = (uint64_t)sqlite3_column_int64(st, 0);
		recovered[nrecovered].uid = (uid_t)sqlite3_column_int64(st, 1);
		nrecovered++;
	}
	sqlite3_finalize(st);
	return db_abandon(0, "profilingd restarted during the capture");
}

int svc_db_recovered(void (*fn)(uint64_t id, uid_t uid, void *ud), void *ud)
{
	unsigned n = nrecovered;
	for (unsigned i = 0; i < n; i++)
		fn(recovered[i].id, recovered[i].uid, ud);
	nrecovered = 0;
	return (int)n;
}

int svc_db_session_abandon(uint64_t id, const char *message)
{
	int r = id ? db_abandon(id, message) : -EINVAL;
	return r < 0 ? r : 0;
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
		if (db_batch_tx() < 0)
			return -EIO;
		sqlite3_stmt *st = svc_db_stmt(ST_ID_LIMIT, "UPDATE meta SET value=? WHERE key='id_limit'");
		if (!st)
			return -EIO;
		sqlite3_bind_int64(st, 1, (sqlite3_int64)(next_id + ID_BLOCK));
		if (svc_db_step_done(st) < 0)
			return -EIO;
		id_limit = next_id + ID_BLOCK;
	}
	*id = next_id++;
	return 0;
}

int svc_db_session_end_now(uint64_t id, const char *state, int error, const char *message,
			   uint64_t now_ns)
{
	sqlite3_stmt *st = svc_db_stmt(ST_SESSION_END, "UPDATE sessions SET state=?, error=?, message=?,"
				" ended_ns=? WHERE id=?");
	if (!st)
		return -EIO;
	sqlite3_bind_text(st, 1, state, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int(st, 2, error);
	sqlite3_bind_text(st, 3, message ? message : "", -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 4, (sqlite3_int64)now_ns);
	sqlite3_bind_int64(st, 5, (sqlite3_int64)id);
	return svc_db_step_done(st);
}

void svc_db_backlog_flush(void)
{
	unsigned done = 0;
	while (done < nbacklog) {
		struct end_rec *e = &backlog[done];
		if (svc_db_session_end_now(e->id, e->state, e->error, e->msg, e->ns) < 0)
			break;
		done++;
	}
	if (done) {
		memmove(backlog, backlog + done, (nbacklog - done) * sizeof(backlog[0]));
		nbacklog -= done;
		LOG_I("wrote %u delayed session end(s)", done);
	}
}

int svc_db_session_new(uint64_t id, const char *app, uid_t uid, pid_t pid, uint32_t type,
		       uint32_t trigger, const char *tag, uint64_t now_ns)
{
	svc_db_backlog_flush();
	int r = db_batch_tx();
	if (r < 0)
		return r;
	sqlite3_stmt *st = svc_db_stmt(ST_SESSION_NEW, "INSERT INTO sessions(id,app,uid,pid,type,tag,"
				"state,created_ns,trigger) VALUES(?,?,?,?,?,?,'active',?,?)");
	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
	sqlite3_bind_text(st, 2, app, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 3, uid);
	sqlite3_bind_int64(st, 4, pid);
	sqlite3_bind_int64(st, 5, type);
	sqlite3_bind_text(st, 6, tag ? tag : "", -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 7, (sqlite3_int64)now_ns);
	sqlite3_bind_int64(st, 8, trigger);
	return svc_db_step_done(st);
}

void svc_db_set_group(svc_db_group_fn fn)
{
	group_fn = fn;
}

static void end_rec_fill(struct end_rec *e, uint64_t id, const char *state, int error,
			 const char *message, uint64_t now_ns)
{
	e->id = id;
	e->ns = now_ns;
	e->error = error;
	util_strlcpy(e->state, state, sizeof(e->state));
	util_strlcpy(e->msg, message ? message : "", sizeof(e->msg));
}

int svc_db_session_end(uint64_t id, const char *state, int error, const char *message,
		       uint64_t now_ns)
{
	struct end_rec rec;
	svc_db_backlog_flush();
	end_rec_fill(&rec, id, state, error, message, now_ns);
	/* Join this turn's group commit, opening it (its owner holds the
	 * peers' messages until it committed: a failure result leaves after
	 * the end it reports is on disk, as with a commit of its own). */
	if (!batching && group_fn)
		group_fn();
	if (batching && ngrouped == END_GROUP_MAX)
		db_batch_end();
	if (batching && db_batch_tx() == 0) {
		int r = svc_db_session_end_now(id, state, error, message, now_ns);
		if (r == 0)
			grouped[ngrouped++] = rec;
		else
			backlog_add(&rec);
		return r;
	}
	int r = svc_db_session_end_now(id, state, error, message, now_ns);
	if (r < 0)
		backlog_add(&rec);
	return r;
}

static void backlog_add(const struct end_rec *rec)
{
	if (nbacklog == END_BACKLOG) {
		LOG_W("session %llu: its end was never recorded (disk full too long)",
		      (unsigned long long)backlog[0].id);
		memmove(backlog, backlog + 1, (END_BACKLOG - 1) * sizeof(backlog[0]));
		nbacklog--;
	}
	backlog[nbacklog++] = *rec;
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

int svc_db_methods_put(const struct svc_db_method_row *r)
{
	sqlite3_stmt *st;
	if (!r || !r->id || !r->exe || !r->targets)
		return -EINVAL;
	/* The cap: a new id only while fewer than SVC_DB_METHODS_MAX rows. */
	if (sqlite3_prepare_v2(db, "SELECT COUNT(*), SUM(id = ?1) FROM method_configs", -1, &st,
			       NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_text(st, 1, r->id, -1, SQLITE_TRANSIENT);
	int rc = sqlite3_step(st);
	int64_t rows = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
	int64_t same = rc == SQLITE_ROW ? sqlite3_column_int64(st, 1) : 0;
	sqlite3_finalize(st);
	if (rows < 0)
		return -EIO;
	if (!same && rows >= SVC_DB_METHODS_MAX)
		return -ENOSPC;
	if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO method_configs VALUES(?,?,?,?,?,?,?,?,?)",
			       -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_text(st, 1, r->id, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 2, r->version);
	sqlite3_bind_text(st, 3, r->exe, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 4, r->targets, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 5, r->every);
	sqlite3_bind_int64(st, 6, r->max_hits);
	sqlite3_bind_int64(st, 7, r->canary_percent);
	sqlite3_bind_int64(st, 8, r->expires_ms);
	sqlite3_bind_int64(st, 9, r->budget_us);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : -EIO;
}

int svc_db_methods_del(const char *id)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(db, id ? "DELETE FROM method_configs WHERE id=?1"
			       : "DELETE FROM method_configs", -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	if (id)
		sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
	int rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : -EIO;
}

int svc_db_methods_load(int64_t now_ms, void (*fn)(const struct svc_db_method_row *r, void *ud),
			void *ud, int *expired)
{
	sqlite3_stmt *st;
	if (expired)
		*expired = 0;
	if (!fn)
		return -EINVAL;
	if (sqlite3_prepare_v2(db, "DELETE FROM method_configs WHERE expires_ms <= ?1", -1, &st,
			       NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_int64(st, 1, now_ms);
	int rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return -EIO;
	if (expired)
		*expired = sqlite3_changes(db);
	if (sqlite3_prepare_v2(db, "SELECT id, version, exe, targets, every, max_hits,"
			       " canary_percent, expires_ms, budget_us FROM method_configs LIMIT ?1", -1, &st,
			       NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_int64(st, 1, SVC_DB_METHODS_MAX);
	int n = 0;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct svc_db_method_row r = {
			.id = (const char *)sqlite3_column_text(st, 0),
			.version = (uint32_t)sqlite3_column_int64(st, 1),
			.exe = (const char *)sqlite3_column_text(st, 2),
			.targets = (const char *)sqlite3_column_text(st, 3),
			.every = (uint32_t)sqlite3_column_int64(st, 4),
			.max_hits = (uint32_t)sqlite3_column_int64(st, 5),
			.canary_percent = (uint32_t)sqlite3_column_int64(st, 6),
			.expires_ms = sqlite3_column_int64(st, 7),
			.budget_us = (uint32_t)sqlite3_column_int64(st, 8),
		};
		if (!r.id || !r.exe || !r.targets)
			continue;
		fn(&r, ud);
		n++;
	}
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? n : -EIO;
}

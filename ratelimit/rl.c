/*
 * Rate limiter: cost windows and trigger cooldowns over a SQLite store.
 *
 * Memory holds every entry still inside the longest window, sorted by time,
 * with running sums per window (system-wide and per app). A cursor per
 * window marks its first entry; entries before it have aged out. Advancing
 * the clock moves the cursors, so a decision is O(1) amortised and the only
 * per-admission I/O is one prepared INSERT (its own transaction), or,
 * inside a batch, a share of one row per app written at its commit.
 */
#include "rl.h"

#include "log.h"
#include "profiling/profiling.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define HOUR_MS (3600LL * 1000)
#define PRUNE_EVERY_MS HOUR_MS
#define RL_PEND_MAX 32 /* apps summed per batch; more writes the rows early */
#define LOG_EVERY_MS (60LL * 1000)
#define NBUCKET 8192 /* power of two, twice RL_MAX_APPS: probes stay short */
#define REPAIR_RESET "run 'profilingd --reset-ratelimit'"
#define REPAIR_LOCKED "stop the other process using it (do not reset)"

_Static_assert(NBUCKET >= 2 * RL_MAX_APPS, "hash table must stay half empty");
_Static_assert(RL_MAX_APPS < UINT16_MAX, "bucket holds slot + 1 in 16 bits");
_Static_assert(RL_TRIGGER_MAX < 32, "fired is a 32-bit mask");

struct entry {
	int64_t t;
	uint32_t cost;
	uint32_t app;
};

/*
 * An app's admissions in the open batch, summed: one row at the commit
 * instead of one per admission (issue #18: the INSERT was about a tenth
 * of the daemon's CPU per decision when one app floods). The row takes
 * the latest admission's time, so after a restart the batch's earlier
 * ones age out of their windows late by the spread of the row's times:
 * a loop turn, unless the clock stepped inside it. The budget looks more
 * used, never less. An app gets a second row when the 32 were written
 * early or its sum would pass UINT32_MAX. The key is copied: reclaim()
 * may move the apps before the commit.
 */
struct pend {
	char key[RL_APP_MAX];
	uint32_t cost;
	int64_t t;
};

struct app {
	char key[RL_APP_MAX];
	uint64_t sum[RL_NWIN];
	uint32_t nentries;      /* entries in memory that are this app's */
	uint32_t fired;         /* bit n: fire_ms[n] is valid */
	int64_t fire_ms[RL_TRIGGER_MAX + 1];
};

struct rl {
	struct rl_config cfg;
	char *path;
	sqlite3 *db;
	sqlite3_stmt *ins_entry, *del_entries, *put_trigger, *del_triggers;
	sqlite3_stmt *begin, *commit; /* a batch's: parsed each time, 0.8 % of the daemon */
	bool failed;
	/* Group commit (rl_batch_begin): writes go into one transaction,
	 * opened at the first and committed by rl_batch_commit. */
	bool batch, in_tx;
	/* A batch's admissions, one row per app: written at its commit. */
	struct pend pend[RL_PEND_MAX];
	unsigned npend;
	int pend_err;           /* an SQLite code: the batch lost rows */
	char why[256];
	const char *repair;     /* how to leave the failed state */
	int longest;            /* index of the longest window */
	int64_t pruned_ms;
	int64_t logged_ms;
	bool logged;

	struct entry *ent;      /* [head, n) live, sorted by t */
	size_t head, n, cap;
	size_t cur[RL_NWIN];    /* first entry inside each window */
	uint64_t sum[RL_NWIN];  /* system-wide */

	struct app *apps;       /* [0, napps), all in use */
	uint32_t napps, apps_cap;
	uint16_t bucket[NBUCKET]; /* slot + 1; 0 is empty */
};

/* One migration per schema version; entry i goes from version i to i + 1. */
static const char *const migrations[] = {
	"CREATE TABLE entries (id INTEGER PRIMARY KEY, app TEXT NOT NULL,"
	" cost INTEGER NOT NULL, t_ms INTEGER NOT NULL);"
	"CREATE INDEX entries_t ON entries (t_ms);"
	"CREATE TABLE triggers (app TEXT NOT NULL, trigger_type INTEGER NOT NULL,"
	" t_ms INTEGER NOT NULL, PRIMARY KEY (app, trigger_type)) WITHOUT ROWID;",
};
_Static_assert(sizeof(migrations) / sizeof(migrations[0]) == RL_SCHEMA_VERSION,
	       "one migration per schema version");

void rl_config_defaults(struct rl_config *cfg)
{
	static const struct rl_window_cfg win[RL_NWIN] = {
		{ HOUR_MS, 20, 10 },
		{ 24 * HOUR_MS, 50, 20 },
		{ 7 * 24 * HOUR_MS, 150, 30 },
	};

	if (!cfg)
		return;
	memset(cfg, 0, sizeof(*cfg));
	memcpy(cfg->win, win, sizeof(win));
	for (int t = 1; t <= RL_TYPE_MAX; t++) {
		cfg->app_cost[t] = 10;
		cfg->system_cost[t] = 5;
	}
}

static int64_t sub_sat(int64_t a, int64_t b)
{
	int64_t r;

	if (__builtin_sub_overflow(a, b, &r))
		return b > 0 ? INT64_MIN : INT64_MAX;
	return r;
}

static bool app_ok(const char *app)
{
	return app && *app && strnlen(app, RL_APP_MAX) < RL_APP_MAX;
}

/* Refusal log lines are rate-limited: a peer must not be able to flood
 * the log by asking again. */
static bool log_due(struct rl *rl, int64_t now)
{
	if (rl->logged && now >= rl->logged_ms && now - rl->logged_ms < LOG_EVERY_MS)
		return false;
	rl->logged = true;
	rl->logged_ms = now;
	return true;
}

static void close_db(struct rl *rl)
{
	sqlite3_finalize(rl->ins_entry);
	sqlite3_finalize(rl->del_entries);
	sqlite3_finalize(rl->put_trigger);
	sqlite3_finalize(rl->del_triggers);
	sqlite3_finalize(rl->begin);
	sqlite3_finalize(rl->commit);
	rl->ins_entry = rl->del_entries = rl->put_trigger = rl->del_triggers = NULL;
	rl->begin = rl->commit = NULL;
	sqlite3_close(rl->db);
	rl->db = NULL;
	/* An open batch's writes went with it: its commit must fail. */
	if (rl->in_tx && rl->pend_err == SQLITE_OK)
		rl->pend_err = SQLITE_ABORT;
	rl->in_tx = false;
}

/* Enter the failed state. The store is closed so that its lock is released
 * and rl_reset() can move it aside. */
__attribute__((format(printf, 3, 4)))
static void store_fail(struct rl *rl, bool locked, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(rl->why, sizeof(rl->why), fmt, ap);
	va_end(ap);
	rl->failed = true;
	rl->repair = locked ? REPAIR_LOCKED : REPAIR_RESET;
	close_db(rl);
	LOG_E("rate-limit store %s is %s: refusing every capture with "
	      "RATE_LIMIT_SYSTEM until repaired; to repair, %s",
	      rl->path, rl->why, rl->repair);
}

/* Map a SQLite error met while opening or loading to the failed state. */
static int open_error(struct rl *rl, int rc)
{
	const char *msg = rl->db ? sqlite3_errmsg(rl->db) : sqlite3_errstr(rc);

	switch (rc & 0xff) {
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		store_fail(rl, true, "locked by another process");
		break;
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB:
	case SQLITE_FORMAT:
		store_fail(rl, false, "corrupt (%s)", msg);
		break;
	case SQLITE_CANTOPEN:
	case SQLITE_PERM:
	case SQLITE_READONLY:
	case SQLITE_AUTH:
	case SQLITE_IOERR:
		store_fail(rl, false, "unreadable (%s)", msg);
		break;
	default:
		store_fail(rl, false, "unusable (%s)", msg);
		break;
	}
	return 0;
}

/* A write failed. Corruption fails closed from now on; anything else (disk
 * full, I/O error) refuses only this call, and a later one may succeed. */
static void write_error(struct rl *rl, int rc, int64_t now, const char *what)
{
	int prim = rc & 0xff;

	if (prim == SQLITE_CORRUPT || prim == SQLITE_NOTADB) {
		store_fail(rl, false, "corrupt (%s: %s)", what, sqlite3_errmsg(rl->db));
		return;
	}
	if (log_due(rl, now))
		LOG_E("rate-limit store %s: %s failed (%s); refusing",
		      rl->path, what, sqlite3_errmsg(rl->db));
}

static void bucket_put(struct rl *rl, uint32_t slot)
{
	uint32_t i = util_str_hash(rl->apps[slot].key) & (NBUCKET - 1);

	while (rl->bucket[i])
		i = (i + 1) & (NBUCKET - 1);
	rl->bucket[i] = (uint16_t)(slot + 1);
}

static int app_find(const struct rl *rl, const char *key)
{
	for (uint32_t i = util_str_hash(key) & (NBUCKET - 1);; i = (i + 1) & (NBUCKET - 1)) {
		uint16_t b = rl->bucket[i];
		if (!b)
			return -1;
		if (strcmp(rl->apps[b - 1].key, key) == 0)
			return b - 1;
	}
}

/* Returns the new slot, -ENOSPC at RL_MAX_APPS or -ENOMEM. */
static int app_add(struct rl *rl, const char *key)
{
	if (rl->napps >= RL_MAX_APPS)
		return -ENOSPC;
	if (rl->napps == rl->apps_cap) {
		uint32_t ncap = rl->apps_cap ? rl->apps_cap * 2 : 16;
		if (ncap > RL_MAX_APPS)
			ncap = RL_MAX_APPS;
		struct app *na = realloc(rl->apps, ncap * sizeof(*na));
		if (!na)
			return -ENOMEM;
		rl->apps = na;
		rl->apps_cap = ncap;
	}
	uint32_t slot = rl->napps++;
	struct app *a = &rl->apps[slot];
	memset(a, 0, sizeof(*a));
	memcpy(a->key, key, strlen(key) + 1);
	bucket_put(rl, slot);
	return (int)slot;
}

/* Forget apps with no entry and no cooldown left: compact the slots, then
 * renumber the entries and rebuild the hash table. */
static void reclaim(struct rl *rl)
{
	uint16_t map[RL_MAX_APPS];
	uint32_t k = 0;

	for (uint32_t i = 0; i < rl->napps; i++) {
		if (!rl->apps[i].nentries && !rl->apps[i].fired)
			continue;
		if (k != i)
			rl->apps[k] = rl->apps[i];
		map[i] = (uint16_t)k++;
	}
	if (k == rl->napps)
		return;
	for (size_t e = rl->head; e < rl->n; e++)
		rl->ent[e].app = map[rl->ent[e].app];
	rl->napps = k;
	memset(rl->bucket, 0, sizeof(rl->bucket));
	for (uint32_t i = 0; i < k; i++)
		bucket_put(rl, i);
}

static void win_add(struct rl *rl, int w, const struct entry *e)
{
	rl->sum[w] += e->cost;
	rl->apps[e->app].sum[w] += e->cost;
}

static void win_sub(struct rl *rl, int w, const struct entry *e)
{
	rl->sum[w] -= e->cost;
	rl->apps[e->app].sum[w] -= e->cost;
}

/*
 * Bring every window to time now: an entry is inside while t > now - length.
 * Cursors also move back when the clock steps back, as far as the entries
 * still held in memory.
 */
static void advance(struct rl *rl, int64_t now)
{
	for (int w = 0; w < RL_NWIN; w++) {
		int64_t edge = sub_sat(now, rl->cfg.win[w].length_ms);
		size_t c = rl->cur[w];
		while (c < rl->n && rl->ent[c].t <= edge)
			win_sub(rl, w, &rl->ent[c++]);
		while (c > rl->head && rl->ent[c - 1].t > edge)
			win_add(rl, w, &rl->ent[--c]);
		rl->cur[w] = c;
	}
}

/* Make room for one more entry: compact when half the array is dead, else
 * grow. 0, -ENOSPC at RL_MAX_ENTRIES live, or -ENOMEM. */
static int ent_room(struct rl *rl)
{
	if (rl->n - rl->head >= RL_MAX_ENTRIES)
		return -ENOSPC;
	if (rl->n < rl->cap)
		return 0;
	if (rl->head && (rl->head >= rl->cap / 2 || rl->cap >= RL_MAX_ENTRIES)) {
		memmove(rl->ent, rl->ent + rl->head, (rl->n - rl->head) * sizeof(*rl->ent));
		for (int w = 0; w < RL_NWIN; w++)
			rl->cur[w] -= rl->head;
		rl->n -= rl->head;
		rl->head = 0;
		return 0;
	}
	size_t ncap = rl->cap ? rl->cap * 2 : 64;
	if (ncap > RL_MAX_ENTRIES)
		ncap = RL_MAX_ENTRIES;
	struct entry *ne = realloc(rl->ent, ncap * sizeof(*ne));
	if (!ne)
		return -ENOMEM;
	rl->ent = ne;
	rl->cap = ncap;
	return 0;
}

/*
 * Insert an entry stamped now, after advance(now). Every entry before a
 * cursor has t <= now - length < now, so the insertion point is at or after
 * every cursor and the new entry is inside every window.
 */
static void ent_insert(struct rl *rl, int64_t now, uint32_t cost, uint32_t app)
{
	size_t p = rl->n;

	if (p > rl->head && rl->ent[p - 1].t > now) {
		/* The clock stepped back: find the first later entry. */
		size_t lo = rl->head, hi = rl->n;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (rl->ent[mid].t > now)
				hi = mid;
			else
				lo = mid + 1;
		}
		p = lo;
		memmove(rl->ent + p + 1, rl->ent + p, (rl->n - p) * sizeof(*rl->ent));
	}
	rl->ent[p] = (struct entry){ .t = now, .cost = cost, .app = app };
	rl->n++;
	rl->apps[app].nentries++;
	for (int w = 0; w < RL_NWIN; w++)
		win_add(rl, w, &rl->ent[p]);
}

/* Step a prepared statement that returns no row; an SQLite code. */
static int run(sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int step_i64(sqlite3_stmt *st, int64_t v)
{
	sqlite3_bind_int64(st, 1, v);
	return run(st);
}

/*
 * Delete what is outside every window and cooldown records older than
 * RL_TRIGGER_KEEP_MS, from the file and then from memory. reclaim also frees
 * idle app slots, which renumbers them.
 */
static int prune(struct rl *rl, int64_t now, bool reclaim_apps)
{
	int64_t tedge = sub_sat(now, RL_TRIGGER_KEEP_MS);
	int rc;

	advance(rl, now);
	rc = step_i64(rl->del_entries, sub_sat(now, rl->cfg.win[rl->longest].length_ms));
	if (rc == SQLITE_OK)
		rc = step_i64(rl->del_triggers, tedge);
	if (rc != SQLITE_OK) {
		write_error(rl, rc, now, "prune");
		return -EIO;
	}
	for (size_t e = rl->head; e < rl->cur[rl->longest]; e++)
		rl->apps[rl->ent[e].app].nentries--;
	rl->head = rl->cur[rl->longest];
	for (uint32_t i = 0; i < rl->napps; i++) {
		struct app *a = &rl->apps[i];
		for (int t = 1; t <= RL_TRIGGER_MAX; t++)
			if ((a->fired & (1u << t)) && a->fire_ms[t] <= tedge)
				a->fired &= ~(1u << t);
	}
	if (reclaim_apps)
		reclaim(rl);
	rl->pruned_ms = now;
	return 0;
}

/* Find app, or add it, freeing idle slots first when the table is full. */
static int app_get(struct rl *rl, const char *key, int64_t now)
{
	int a = app_find(rl, key);

	if (a >= 0)
		return a;
	a = app_add(rl, key);
	if (a == -ENOSPC && prune(rl, now, true) == 0)
		a = app_add(rl, key);
	return a;
}

static int exec(sqlite3 *db, const char *sql)
{
	return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

/* Run a one-row PRAGMA and copy its first column as text. */
static int pragma_text(sqlite3 *db, const char *sql, char *out, size_t size)
{
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);

	if (rc != SQLITE_OK)
		return rc;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		const unsigned char *v = sqlite3_column_text(st, 0);
		snprintf(out, size, "%s", v ? (const char *)v : "");
		rc = SQLITE_OK;
	} else if (rc == SQLITE_DONE) {
		rc = SQLITE_CORRUPT;
	}
	sqlite3_finalize(st);
	return rc;
}

/* Read one row of entries or triggers, checking every column's type so
 * that a tampered file fails closed instead of counting garbage. */
static bool row_ok(sqlite3_stmt *st, const char **app, int64_t *v, int64_t *t)
{
	if (sqlite3_column_type(st, 0) != SQLITE_TEXT ||
	    sqlite3_column_type(st, 1) != SQLITE_INTEGER ||
	    sqlite3_column_type(st, 2) != SQLITE_INTEGER)
		return false;
	*app = (const char *)sqlite3_column_text(st, 0);
	*v = sqlite3_column_int64(st, 1);
	*t = sqlite3_column_int64(st, 2);
	return app_ok(*app);
}

/* Load the live entries and cooldowns. 0 (perhaps now failed) or -ENOMEM. */
static int load(struct rl *rl, int64_t now)
{
	static const char *const sql[2] = {
		"SELECT app, cost, t_ms FROM entries WHERE t_ms > ?1 ORDER BY t_ms, id",
		"SELECT app, trigger_type, t_ms FROM triggers WHERE t_ms > ?1",
	};
	int64_t edge[2] = {
		sub_sat(now, rl->cfg.win[rl->longest].length_ms),
		sub_sat(now, RL_TRIGGER_KEEP_MS),
	};
	sqlite3_stmt *st = NULL;
	const char *bad = NULL;
	int r = 0, rc = SQLITE_OK;

	for (int q = 0; q < 2 && !bad && !r && rc == SQLITE_OK; q++) {
		rc = sqlite3_prepare_v2(rl->db, sql[q], -1, &st, NULL);
		if (rc != SQLITE_OK)
			break;
		sqlite3_bind_int64(st, 1, edge[q]);
		while (!bad && !r && (rc = sqlite3_step(st)) == SQLITE_ROW) {
			const char *key;
			int64_t v, t;
			if (!row_ok(st, &key, &v, &t)) {
				bad = "malformed row";
				break;
			}
			int a = app_find(rl, key);
			if (a < 0 && (a = app_add(rl, key)) < 0) {
				if (a == -ENOSPC)
					bad = "more apps than RL_MAX_APPS";
				r = a;
				break;
			}
			if (q == 1) {
				if (v < 1 || v > RL_TRIGGER_MAX) {
					bad = "malformed trigger row";
					break;
				}
				rl->apps[a].fire_ms[v] = t;
				rl->apps[a].fired |= 1u << v;
				continue;
			}
			if (v < 0 || v > UINT32_MAX) {
				bad = "malformed entry row";
				break;
			}
			if ((r = ent_room(rl)) < 0) {
				if (r == -ENOSPC)
					bad = "more entries than RL_MAX_ENTRIES";
				break;
			}
			/* Sorted by the query; the windows are summed below. */
			rl->ent[rl->n++] = (struct entry){ .t = t, .cost = (uint32_t)v,
							   .app = (uint32_t)a };
			rl->apps[a].nentries++;
		}
		if (rc == SQLITE_DONE)
			rc = SQLITE_OK;
		sqlite3_finalize(st);
		st = NULL;
	}
	if (bad)
		store_fail(rl, false, "corrupt (%s)", bad);
	else if (r == -ENOMEM)
		return r;
	else if (rc != SQLITE_OK)
		return open_error(rl, rc);
	if (rl->failed)
		return 0;
	/* Start every window empty at the end, and let advance() walk back
	 * over what is inside. */
	for (int w = 0; w < RL_NWIN; w++)
		rl->cur[w] = rl->n;
	advance(rl, now);
	return 0;
}

/* Open, migrate and load the store. 0 (perhaps in the failed state) or
 * -ENOMEM. */
static int store_open(struct rl *rl, int64_t now)
{
	char buf[64];
	int version, rc;

	/* Create it ourselves: SQLite would make it 0644. */
	int fd = open(rl->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		store_fail(rl, false, "unreadable (%s)", strerror(errno));
		return 0;
	}
	close(fd);

	rc = sqlite3_open_v2(rl->path, &rl->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK)
		return open_error(rl, rc);
	sqlite3_busy_timeout(rl->db, 200);
	/*
	 * Exclusive locking: the in-memory sums assume that no one else writes
	 * the file, and the WAL index then lives in heap memory (no -shm).
	 * synchronous=NORMAL in WAL mode: a commit is in the kernel when it
	 * returns, so it survives kill -9; only power loss can drop the last
	 * commits (docs/RATELIMIT.md).
	 */
	rc = exec(rl->db, "PRAGMA locking_mode=EXCLUSIVE");
	if (rc == SQLITE_OK)
		rc = pragma_text(rl->db, "PRAGMA journal_mode=WAL", buf, sizeof(buf));
	if (rc != SQLITE_OK)
		return open_error(rl, rc);
	if (strcmp(buf, "wal") != 0) {
		store_fail(rl, false, "unusable (cannot enter WAL mode: %s)", buf);
		return 0;
	}
	rc = exec(rl->db, rl->cfg.sync_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL");
	/* The write lock is taken here and held until rl_close(). */
	if (rc == SQLITE_OK)
		rc = exec(rl->db, "BEGIN IMMEDIATE");
	if (rc == SQLITE_OK)
		rc = pragma_text(rl->db, "PRAGMA user_version", buf, sizeof(buf));
	if (rc != SQLITE_OK)
		return open_error(rl, rc);
	version = atoi(buf);
	if (version > RL_SCHEMA_VERSION) {
		store_fail(rl, false, "of schema version %d, newer than this build's %d",
			   version, RL_SCHEMA_VERSION);
		return 0;
	}
	if (version < 0) {
		store_fail(rl, false, "corrupt (schema version %d)", version);
		return 0;
	}
	rc = pragma_text(rl->db, "PRAGMA quick_check", buf, sizeof(buf));
	if (rc != SQLITE_OK)
		return open_error(rl, rc);
	if (strcmp(buf, "ok") != 0) {
		store_fail(rl, false, "corrupt (quick_check: %s)", buf);
		return 0;
	}
	for (int v = version; v < RL_SCHEMA_VERSION && rc == SQLITE_OK; v++)
		rc = exec(rl->db, migrations[v]);
	if (rc == SQLITE_OK && version < RL_SCHEMA_VERSION) {
		snprintf(buf, sizeof(buf), "PRAGMA user_version=%d", RL_SCHEMA_VERSION);
		rc = exec(rl->db, buf);
	}
	if (rc == SQLITE_OK)
		rc = exec(rl->db, "COMMIT");
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v3(rl->db, "INSERT INTO entries (app, cost, t_ms) VALUES (?1, ?2, ?3)",
					-1, SQLITE_PREPARE_PERSISTENT, &rl->ins_entry, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v3(rl->db, "DELETE FROM entries WHERE t_ms <= ?1",
					-1, SQLITE_PREPARE_PERSISTENT, &rl->del_entries, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v3(rl->db, "INSERT INTO triggers (app, trigger_type, t_ms)"
					" VALUES (?1, ?2, ?3) ON CONFLICT (app, trigger_type)"
					" DO UPDATE SET t_ms = excluded.t_ms",
					-1, SQLITE_PREPARE_PERSISTENT, &rl->put_trigger, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v3(rl->db, "DELETE FROM triggers WHERE t_ms <= ?1",
					-1, SQLITE_PREPARE_PERSISTENT, &rl->del_triggers, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v3(rl->db, "BEGIN IMMEDIATE", -1, SQLITE_PREPARE_PERSISTENT,
					&rl->begin, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v3(rl->db, "COMMIT", -1, SQLITE_PREPARE_PERSISTENT, &rl->commit,
					NULL);
	if (rc != SQLITE_OK)
		return open_error(rl, rc);
	int r = load(rl, now);
	if (r < 0 || rl->failed)
		return r;
	prune(rl, now, false);
	return 0;
}

static bool cfg_ok(const struct rl_config *cfg)
{
	for (int w = 0; w < RL_NWIN; w++)
		if (cfg->win[w].length_ms <= 0)
			return false;
	return memchr(cfg->exempt_app, '\0', sizeof(cfg->exempt_app)) != NULL;
}

int rl_open(const char *path, const struct rl_config *cfg, int64_t now_ms,
	    struct rl **out)
{
	struct rl *rl;
	int r;

	if (out)
		*out = NULL;
	if (!path || !*path || !out || (cfg && !cfg_ok(cfg)))
		return -EINVAL;
	rl = calloc(1, sizeof(*rl));
	if (!rl)
		return -ENOMEM;
	if (cfg)
		rl->cfg = *cfg;
	else
		rl_config_defaults(&rl->cfg);
	for (int w = 1; w < RL_NWIN; w++)
		if (rl->cfg.win[w].length_ms > rl->cfg.win[rl->longest].length_ms)
			rl->longest = w;
	rl->path = strdup(path);
	if (!rl->path) {
		rl_close(rl);
		return -ENOMEM;
	}
	r = store_open(rl, now_ms);
	if (r < 0) {
		rl_close(rl);
		return r;
	}
	*out = rl;
	return 0;
}

int rl_reconfigure(struct rl *rl, const struct rl_config *cfg)
{
	if (!rl || !cfg || !cfg_ok(cfg))
		return -EINVAL;
	/* Window lengths decide what is kept in memory and in the store, and
	 * sync_full was applied to the open database: those need a reopen. */
	for (int w = 0; w < RL_NWIN; w++)
		if (cfg->win[w].length_ms != rl->cfg.win[w].length_ms)
			return -EBUSY;
	if (cfg->sync_full != rl->cfg.sync_full)
		return -EBUSY;
	rl->cfg = *cfg;
	return 0;
}

void rl_close(struct rl *rl)
{
	if (!rl)
		return;
	/* A batch still open is committed: its replies may be on their way. */
	rl_batch_commit(rl);
	close_db(rl);
	free(rl->ent);
	free(rl->apps);
	free(rl->path);
	free(rl);
}

bool rl_failed(const struct rl *rl, const char **why)
{
	if (why)
		*why = rl ? rl->why : "no rate limiter";
	return !rl || rl->failed;
}

const char *rl_exempt_app(const struct rl *rl)
{
	return rl && rl->cfg.exempt_app[0] ? rl->cfg.exempt_app : NULL;
}

static int refuse_failed(struct rl *rl, int64_t now)
{
	if (log_due(rl, now))
		LOG_E("rate-limit store %s is %s: refusing (RATE_LIMIT_SYSTEM); to repair, %s",
		      rl->path, rl->why, rl->repair);
	return -PROF_E_RATE_LIMIT_SYSTEM;
}

/* The admission decision without recording; *cost_out 0 means "free". */
static int check(struct rl *rl, const char *app, int type, bool system_triggered,
		 int64_t now_ms, uint32_t *cost_out)
{
	*cost_out = 0;
	if (!rl || !app_ok(app) || type < 1 || type > RL_TYPE_MAX)
		return -PROF_E_INVALID_REQUEST;
	if (rl->failed)
		return refuse_failed(rl, now_ms);
	if (rl->cfg.exempt_app[0] && strcmp(app, rl->cfg.exempt_app) == 0)
		return 0;
	uint32_t cost = system_triggered ? rl->cfg.system_cost[type] : rl->cfg.app_cost[type];
	if (!cost)
		return 0;

	advance(rl, now_ms);
	int a = app_find(rl, app);
	for (int w = 0; w < RL_NWIN; w++) {
		const struct rl_window_cfg *wc = &rl->cfg.win[w];
		if (rl->sum[w] + cost > wc->system_cap)
			return -PROF_E_RATE_LIMIT_SYSTEM;
		if ((a >= 0 ? rl->apps[a].sum[w] : 0) + cost > wc->app_cap)
			return -PROF_E_RATE_LIMIT_PROCESS;
	}
	*cost_out = cost;
	return 0;
}

int rl_check(struct rl *rl, const char *app, int type, bool system_triggered,
	     int64_t now_ms)
{
	uint32_t cost;
	return check(rl, app, type, system_triggered, now_ms, &cost);
}

/* Inside a batch, the transaction its writes join (opened at the first). */
static int batch_tx(struct rl *rl)
{
	if (!rl->batch)
		return SQLITE_OK;
	if (!rl->db)
		return SQLITE_MISUSE;
	if (rl->in_tx) {
		if (!sqlite3_get_autocommit(rl->db))
			return SQLITE_OK;
		/* SQLite rolled the transaction back after a failed statement
		 * (FULL, IOERR): the batch's earlier writes are gone, and the
		 * next ones must not commit on their own. */
		rl->in_tx = false;
		if (rl->pend_err == SQLITE_OK)
			rl->pend_err = SQLITE_ABORT;
		return SQLITE_ABORT;
	}
	int rc = run(rl->begin);
	rl->in_tx = rc == SQLITE_OK;
	return rc;
}

static int insert_entry(struct rl *rl, const char *app, uint32_t cost, int64_t t)
{
	sqlite3_bind_text(rl->ins_entry, 1, app, -1, SQLITE_STATIC);
	sqlite3_bind_int64(rl->ins_entry, 2, cost);
	sqlite3_bind_int64(rl->ins_entry, 3, t);
	return run(rl->ins_entry);
}

/*
 * Write the batch's summed rows into its transaction. A failure fails the
 * whole batch (pend_err), whose earlier admissions are in those rows.
 */
static int pend_write(struct rl *rl)
{
	int rc = batch_tx(rl);
	for (unsigned i = 0; i < rl->npend && rc == SQLITE_OK; i++)
		rc = insert_entry(rl, rl->pend[i].key, rl->pend[i].cost, rl->pend[i].t);
	rl->npend = 0;
	if (rc != SQLITE_OK && rl->pend_err == SQLITE_OK)
		rl->pend_err = rc;
	return rc;
}

/* Add an admission to its app's row in the open batch. */
static int pend_add(struct rl *rl, const char *app, uint32_t cost, int64_t t)
{
	unsigned i;
	for (i = 0; i < rl->npend && strcmp(rl->pend[i].key, app); i++)
		;
	if (i < rl->npend && cost <= UINT32_MAX - rl->pend[i].cost) {
		rl->pend[i].cost += cost;
		if (t > rl->pend[i].t)
			rl->pend[i].t = t;
		return SQLITE_OK;
	}
	int rc = rl->pend_err;
	/* Full, or the sum would not fit in a row's cost: write them now. */
	if (rc == SQLITE_OK && (i < rl->npend || rl->npend == RL_PEND_MAX))
		rc = pend_write(rl);
	if (rc != SQLITE_OK)
		return rc;
	struct pend *p = &rl->pend[rl->npend++];
	util_strlcpy(p->key, app, sizeof(p->key));
	p->cost = cost;
	p->t = t;
	return SQLITE_OK;
}

int rl_batch_begin(struct rl *rl)
{
	if (!rl)
		return -EINVAL;
	rl->batch = true;
	return 0;
}

int rl_batch_commit(struct rl *rl)
{
	if (!rl)
		return -EINVAL;
	int rc = rl->pend_err;
	if (rc == SQLITE_OK && rl->npend)
		rc = pend_write(rl);
	rl->npend = 0;
	rl->pend_err = SQLITE_OK;
	/* in_tx only with a store: close_db clears it. */
	if (rc == SQLITE_OK && rl->in_tx)
		rc = run(rl->commit);
	rl->batch = rl->in_tx = false;
	if (rc == SQLITE_OK)
		return 0;
	if (!rl->db) /* failed (closed) since: nothing of the batch is kept */
		return -EIO;
	int64_t now = (int64_t)time(NULL) * 1000;
	write_error(rl, rc, now, "committing a batch of admissions");
	/* A failed COMMIT may leave the transaction open; end it. (A corrupt
	 * store has been closed by write_error.) */
	if (rl->db && !sqlite3_get_autocommit(rl->db))
		exec(rl->db, "ROLLBACK");
	return (rc & 0xff) == SQLITE_FULL ? -ENOSPC : -EIO;
}

int rl_admit(struct rl *rl, const char *app, int type, bool system_triggered,
	     int64_t now_ms)
{
	uint32_t cost;
	int a, r, rc;

	if ((r = check(rl, app, type, system_triggered, now_ms, &cost)) < 0 || !cost)
		return r;
	a = app_find(rl, app);

	/* Admitted. Pruning here neither reclaims (a stays valid) nor runs
	 * more than about once an hour. */
	if (sub_sat(now_ms, rl->pruned_ms) >= PRUNE_EVERY_MS || now_ms < rl->pruned_ms)
		prune(rl, now_ms, false);
	r = ent_room(rl);
	if (r == -ENOSPC && !rl->failed && prune(rl, now_ms, false) == 0)
		r = ent_room(rl);
	if (rl->failed)
		return refuse_failed(rl, now_ms);
	if (r < 0) {
		if (log_due(rl, now_ms))
			LOG_E("rate-limit: cannot hold another entry (%s); refusing",
			      strerror(-r));
		return -PROF_E_RATE_LIMIT_SYSTEM;
	}
	if (a < 0 && (a = app_get(rl, app, now_ms)) < 0) {
		if (rl->failed)
			return refuse_failed(rl, now_ms);
		if (log_due(rl, now_ms))
			LOG_E("rate-limit: cannot track app %s (%s; at most %d apps); refusing",
			      app, strerror(-a), RL_MAX_APPS);
		return -PROF_E_RATE_LIMIT_SYSTEM;
	}

	rc = rl->batch ? pend_add(rl, app, cost, now_ms) : insert_entry(rl, app, cost, now_ms);
	if (rc != SQLITE_OK) {
		write_error(rl, rc, now_ms, "recording an admission");
		/* A full disk is not the budget's fault: say which it is. */
		return (rc & 0xff) == SQLITE_FULL ? -PROF_E_NO_DISK_SPACE : -PROF_E_RATE_LIMIT_SYSTEM;
	}
	ent_insert(rl, now_ms, cost, (uint32_t)a);
	return 0;
}

int rl_trigger_check(struct rl *rl, const char *app, int trigger,
		     uint32_t period_s, int64_t now_ms)
{
	if (!rl || !app_ok(app) || trigger < 1 || trigger > RL_TRIGGER_MAX)
		return -PROF_E_INVALID_REQUEST;
	if (rl->failed)
		return refuse_failed(rl, now_ms);
	int a = app_find(rl, app);
	if (a < 0 || !period_s || !(rl->apps[a].fired & (1u << trigger)))
		return 0;
	/* now - last < period, without overflow; a fire "in the future"
	 * (clock stepped back) is still cooling down. */
	if (rl->apps[a].fire_ms[trigger] > sub_sat(now_ms, (int64_t)period_s * 1000))
		return -PROF_E_TRIGGER_COOLDOWN;
	return 0;
}

int rl_trigger_record(struct rl *rl, const char *app, int trigger,
		      int64_t now_ms)
{
	int a, rc;

	if (!rl || !app_ok(app) || trigger < 1 || trigger > RL_TRIGGER_MAX)
		return -EINVAL;
	if (rl->failed)
		return -EIO;
	a = app_get(rl, app, now_ms);
	if (a < 0)
		return rl->failed ? -EIO : a;
	if ((rc = batch_tx(rl)) != SQLITE_OK) {
		write_error(rl, rc, now_ms, "opening the batch's transaction");
		return -EIO;
	}
	sqlite3_bind_text(rl->put_trigger, 1, app, -1, SQLITE_STATIC);
	sqlite3_bind_int(rl->put_trigger, 2, trigger);
	sqlite3_bind_int64(rl->put_trigger, 3, now_ms);
	if ((rc = run(rl->put_trigger)) != SQLITE_OK) {
		write_error(rl, rc, now_ms, "recording a trigger");
		return -EIO;
	}
	rl->apps[a].fire_ms[trigger] = now_ms;
	rl->apps[a].fired |= 1u << trigger;
	return 0;
}

int rl_usage(struct rl *rl, const char *app, int64_t now_ms,
	     struct rl_usage out[RL_NWIN])
{
	if (!out)
		return -EINVAL;
	memset(out, 0, RL_NWIN * sizeof(*out));
	if (!rl || (app && !app_ok(app)))
		return -EINVAL;
	if (rl->failed)
		return -EIO;
	advance(rl, now_ms);
	int a = app ? app_find(rl, app) : -1;
	for (int w = 0; w < RL_NWIN; w++) {
		out[w].length_ms = rl->cfg.win[w].length_ms;
		out[w].system_used = rl->sum[w];
		out[w].system_cap = rl->cfg.win[w].system_cap;
		out[w].app_used = a >= 0 ? rl->apps[a].sum[w] : 0;
		out[w].app_cap = rl->cfg.win[w].app_cap;
	}
	return 0;
}

int rl_cost(const struct rl *rl, const char *app, int type, bool system_triggered)
{
	if (!rl || !app_ok(app) || type < 1 || type > RL_TYPE_MAX)
		return -EINVAL;
	if (rl->cfg.exempt_app[0] && strcmp(app, rl->cfg.exempt_app) == 0)
		return 0;
	return (int)(system_triggered ? rl->cfg.system_cost[type] : rl->cfg.app_cost[type]);
}

/*
 * When window w has room for cost: walk its entries oldest first (app < 0:
 * all of them, else only that app's) until what is left plus cost fits.
 * An entry leaves the window at t + length (it is inside while
 * t > now - length).
 */
static int64_t room_at(const struct rl *rl, int w, int app, uint64_t sum, uint32_t cap,
		       uint32_t cost, int64_t now)
{
	if (cost > cap)
		return INT64_MAX;
	int64_t at = now;
	for (size_t i = rl->cur[w]; i < rl->n && sum + cost > cap; i++) {
		const struct entry *e = &rl->ent[i];
		if (app >= 0 && e->app != (uint32_t)app)
			continue;
		sum -= e->cost;
		at = e->t > INT64_MAX - rl->cfg.win[w].length_ms ? INT64_MAX
			: e->t + rl->cfg.win[w].length_ms;
	}
	return at < now ? now : at;
}

int rl_next_admit(struct rl *rl, const char *app, int type, bool system_triggered,
		  int64_t now_ms, int64_t *at_ms)
{
	int cost = rl_cost(rl, app, type, system_triggered);
	if (cost < 0 || !at_ms)
		return -EINVAL;
	if (rl->failed)
		return -EIO;
	*at_ms = now_ms;
	if (!cost)
		return 0;
	advance(rl, now_ms);
	int a = app_find(rl, app);
	for (int w = 0; w < RL_NWIN; w++) {
		const struct rl_window_cfg *wc = &rl->cfg.win[w];
		int64_t s = room_at(rl, w, -1, rl->sum[w], wc->system_cap, (uint32_t)cost, now_ms);
		int64_t p = room_at(rl, w, a, a >= 0 ? rl->apps[a].sum[w] : 0, wc->app_cap,
				    (uint32_t)cost, now_ms);
		if (s > *at_ms)
			*at_ms = s;
		if (p > *at_ms)
			*at_ms = p;
	}
	return 0;
}

int rl_trigger_last(const struct rl *rl, const char *app, int trigger, int64_t *fire_ms)
{
	if (!rl || !app_ok(app) || trigger < 1 || trigger > RL_TRIGGER_MAX || !fire_ms)
		return -EINVAL;
	if (rl->failed)
		return -EIO;
	int a = app_find(rl, app);
	if (a < 0 || !(rl->apps[a].fired & (1u << trigger)))
		return -ENOENT;
	*fire_ms = rl->apps[a].fire_ms[trigger];
	return 0;
}

int rl_prune(struct rl *rl, int64_t now_ms)
{
	if (!rl)
		return -EINVAL;
	if (rl->failed)
		return -EIO;
	return prune(rl, now_ms, true);
}

/* -EBUSY if some connection, in this process or another, holds the store.
 * A file SQLite cannot read is not held by anyone. */
static int probe_unlocked(const char *path)
{
	sqlite3 *db = NULL;
	int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);

	if (rc == SQLITE_OK)
		rc = exec(db, "PRAGMA locking_mode=EXCLUSIVE; BEGIN IMMEDIATE; ROLLBACK");
	sqlite3_close(db);
	rc &= 0xff;
	return rc == SQLITE_BUSY || rc == SQLITE_LOCKED ? -EBUSY : 0;
}

static int move_aside(const char *path, int64_t now_ms)
{
	char dst[PATH_MAX];
	long long secs = (long long)(now_ms / 1000);

	for (int i = 0; i < 100; i++) {
		int n = i ? snprintf(dst, sizeof(dst), "%s.broken-%lld.%d", path, secs, i)
			  : snprintf(dst, sizeof(dst), "%s.broken-%lld", path, secs);
		if (n < 0 || (size_t)n >= sizeof(dst))
			return -ENAMETOOLONG;
		if (renameat2(AT_FDCWD, path, AT_FDCWD, dst, RENAME_NOREPLACE) == 0) {
			LOG_N("moved %s to %s", path, dst);
			return 0;
		}
		if (errno == EEXIST)
			continue;
		if (errno != EINVAL && errno != ENOSYS)
			return -errno;
		/* No RENAME_NOREPLACE on this file system. */
		if (access(dst, F_OK) == 0)
			continue;
		if (rename(path, dst) == 0) {
			LOG_N("moved %s to %s", path, dst);
			return 0;
		}
		return -errno;
	}
	return -EEXIST;
}

static int unlink_suffix(const char *path, const char *suffix)
{
	char p[PATH_MAX];
	int n = snprintf(p, sizeof(p), "%s%s", path, suffix);

	if (n < 0 || (size_t)n >= sizeof(p))
		return -ENAMETOOLONG;
	if (unlink(p) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

/* Make the rename durable before the fresh store appears. */
static void sync_dir(const char *path)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	size_t len = slash ? (size_t)(slash - path) : 1;

	if (len >= sizeof(dir))
		return;
	if (!slash)
		memcpy(dir, ".", 2);
	else if (len == 0)
		memcpy(dir, "/", 2);
	else {
		memcpy(dir, path, len);
		dir[len] = '\0';
	}
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
}

int rl_reset(const char *path, int64_t now_ms)
{
	struct stat st;
	struct rl *rl;
	int r;

	if (!path || !*path)
		return -EINVAL;
	r = probe_unlocked(path);
	if (r < 0)
		return r;
	if (lstat(path, &st) == 0)
		r = move_aside(path, now_ms);
	else if (errno != ENOENT)
		r = -errno;
	if (r == 0)
		r = unlink_suffix(path, "-wal");
	if (r == 0)
		r = unlink_suffix(path, "-shm");
	if (r < 0)
		return r;
	sync_dir(path);
	r = rl_open(path, NULL, now_ms, &rl);
	if (r < 0)
		return r;
	r = rl_failed(rl, NULL) ? -EIO : 0;
	rl_close(rl);
	return r;
}

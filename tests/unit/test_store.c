/* Retention and quota pruning of stored results (svc_store.c), clock injected. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "svc_db.h"
#include "svc_db_priv.h"
#include "svc_db_result.h"
#include "svc_store.h"

#define DAY_NS (86400ull * 1000000000ull)
#define NOW (20000 * DAY_NS)

static char dir[64];

static int setup(void **state)
{
	char db[128];
	snprintf(dir, sizeof(dir), "/tmp/pd-store.XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(db, sizeof(db), "%s/profilingd.db", dir);
	assert_int_equal(svc_db_init(db), 0);
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];
	svc_db_fini();
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* A result file of size bytes for app, ended age_days before NOW. */
static uint64_t add(const char *app, const char *name, size_t size, double age_days)
{
	char path[256];
	uint64_t sid, rid;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	close(fd);
	uint64_t end = NOW - (uint64_t)(age_days * (double)DAY_NS);
	assert_int_equal(svc_db_alloc_id(&sid), 0);
	assert_int_equal(svc_db_session_new(sid, app, 1000, 1, 3, 0, "t", end), 0);
	assert_int_equal(svc_db_result_add(sid, app, 1000, 3, 0, path, size, "pprof", end - 1, end,
					   &rid), 0);
	return rid;
}

static int exists(const char *name)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return access(path, F_OK) == 0;
}

static void test_retention_age(void **state)
{
	struct svc_config cfg;
	uint64_t bytes;
	svc_config_defaults(&cfg);
	cfg.retention_days = 14;
	add("uid:1", "old", 100, 14.01);
	add("uid:1", "edge", 100, 13.99);
	add("uid:2", "new", 100, 1);
	assert_int_equal(svc_store_prune(&cfg, NOW), 1);
	assert_false(exists("old"));
	assert_true(exists("edge"));
	assert_true(exists("new"));
	assert_int_equal(svc_db_result_bytes(NULL, &bytes), 0);
	assert_int_equal(bytes, 200);
	/* A day later the edge result ages out too; nothing twice. */
	assert_int_equal(svc_store_prune(&cfg, NOW + DAY_NS / 10), 1);
	assert_false(exists("edge"));
	assert_int_equal(svc_store_prune(&cfg, NOW + DAY_NS / 10), 0);
}

static void test_quota_oldest_first(void **state)
{
	struct svc_config cfg;
	uint64_t bytes;
	svc_config_defaults(&cfg);
	cfg.max_app_result_bytes = 250;
	add("uid:1", "a1", 100, 3);
	add("uid:1", "a2", 100, 2);
	add("uid:1", "a3", 100, 1);
	add("uid:2", "b1", 200, 5); /* under its own quota: untouched */
	assert_int_equal(svc_store_prune(&cfg, NOW), 1);
	assert_false(exists("a1"));
	assert_true(exists("a2"));
	assert_true(exists("a3"));
	assert_true(exists("b1"));
	assert_int_equal(svc_db_result_bytes("uid:1", &bytes), 0);
	assert_int_equal(bytes, 200);
	/* Exactly at the quota is fine. */
	cfg.max_app_result_bytes = 200;
	assert_int_equal(svc_store_prune(&cfg, NOW), 0);
}

static uint64_t app_bytes(const char *app)
{
	uint64_t b = ~0ull;
	assert_int_equal(svc_db_result_bytes(app, &b), 0);
	return b;
}

/*
 * An app's bytes are cached (svc_db_result.c): every add and delete, and
 * the rollback of a transaction that held one, must show in the next
 * answer, or a quota check would let an app past max_app_result_bytes.
 * 40 apps: more than the cache's slots, so some share one.
 */
static void test_bytes_cached_but_true(void **state)
{
	char app[40][16];
	uint64_t rid[40];
	for (int i = 0; i < 40; i++) {
		snprintf(app[i], sizeof(app[i]), "uid:%d", 100 + i);
		assert_int_equal(app_bytes(app[i]), 0);
		rid[i] = add(app[i], app[i], 10 + (size_t)i, 1);
	}
	for (int round = 0; round < 2; round++) /* the second round mostly hits */
		for (int i = 0; i < 40; i++)
			assert_int_equal(app_bytes(app[i]), 10 + i);
	add(app[7], "more", 1000, 1);
	assert_int_equal(app_bytes(app[7]), 1017);
	assert_int_equal(svc_db_result_delete(rid[7]), 0);
	assert_int_equal(app_bytes(app[7]), 1000);
	/* Read inside a transaction that then rolls back. */
	assert_int_equal(svc_db_exec("BEGIN IMMEDIATE"), 0);
	uint64_t sid, r;
	assert_int_equal(svc_db_alloc_id(&sid), 0);
	assert_int_equal(svc_db_session_new(sid, app[3], 1000, 1, 3, 0, "t", NOW), 0);
	assert_int_equal(svc_db_result_add(sid, app[3], 1000, 3, 0, "/nonexistent/x", 500, "pprof",
					   NOW - 1, NOW, &r), 0);
	assert_int_equal(app_bytes(app[3]), 513);
	assert_int_equal(svc_db_exec("ROLLBACK"), 0);
	assert_int_equal(app_bytes(app[3]), 13);
	/* Rolled back by a route that does not pass svc_db_exec, as SQLite's
	 * own rollback after a failed step would: the sum read while the row
	 * was there goes with it. */
	assert_int_equal(svc_db_exec("BEGIN IMMEDIATE"), 0);
	assert_int_equal(svc_db_session_new(sid, app[4], 1000, 1, 3, 0, "t", NOW), 0);
	assert_int_equal(svc_db_result_add(sid, app[4], 1000, 3, 0, "/nonexistent/y", 7, "pprof",
					   NOW - 1, NOW, &r), 0);
	assert_int_equal(app_bytes(app[4]), 21);
	assert_int_equal(sqlite3_exec(svc_db_conn(), "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
	assert_int_equal(app_bytes(app[4]), 14);
	/* A new file is a new cache. */
	assert_int_equal(app_bytes(app[7]), 1000);
	svc_db_fini();
	char db[128];
	snprintf(db, sizeof(db), "%s/other.db", dir);
	assert_int_equal(svc_db_init(db), 0);
	assert_int_equal(app_bytes(app[7]), 0);
}

static void count(const struct svc_db_result *r, void *ud)
{
	(*(int *)ud)++;
}

static void test_pending_and_ack(void **state)
{
	uint64_t r1 = add("uid:1", "p1", 10, 1);
	uint64_t r2 = add("uid:1", "p2", 10, 8); /* older than the 7-day queue */
	(void)r2;
	int n = 0;
	assert_int_equal(svc_db_pending("uid:1", 3, NOW - 7 * DAY_NS, 16, count, &n), 1);
	/* Three attempts, then it is no longer offered. */
	for (int i = 0; i < 3; i++)
		assert_int_equal(svc_db_result_attempt(r1), 0);
	assert_int_equal(svc_db_pending("uid:1", 3, NOW - 7 * DAY_NS, 16, count, &n), 0);
	/* An ack only counts from the owning app, once. */
	assert_int_equal(svc_db_result_delivered(r1, "uid:2"), -ENOENT);
	assert_int_equal(svc_db_result_delivered(r1, "uid:1"), 0);
	assert_int_equal(svc_db_result_delivered(r1, "uid:1"), -ENOENT);
}

struct seen {
	int n, error;
	uint64_t session;
	char message[256], path[4096];
};

static void take(const struct svc_db_result *r, void *ud)
{
	struct seen *s = ud;
	s->n++;
	s->error = r->error;
	s->session = r->session_id;
	snprintf(s->message, sizeof(s->message), "%s", r->message);
	snprintf(s->path, sizeof(s->path), "%s", r->path);
}

static void one_recovered(uint64_t id, uid_t uid, void *ud)
{
	assert_int_equal(uid, 1000);
	*(uint64_t *)ud = id;
}

/* A session left active by a killed daemon becomes one failure result. */
static void test_recover_failure_result(void **state)
{
	uint64_t done_sid, done_id, cut, got = 0, rid;
	/* A finished capture: its row and "done" commit together. */
	assert_int_equal(svc_db_alloc_id(&done_sid), 0);
	assert_int_equal(svc_db_session_new(done_sid, "uid:1", 1000, 41, 3, 0, "d", NOW), 0);
	assert_int_equal(svc_db_result_commit(done_sid, "uid:1", 1000, 3, 0, "/nonexistent/d1", 10,
					      "pprof", NOW - 1, NOW, &done_id), 0);
	assert_int_equal(svc_db_result_delivered(done_id, "uid:1"), 0);
	assert_int_equal(svc_db_alloc_id(&cut), 0);
	assert_int_equal(svc_db_session_new(cut, "uid:1", 1000, 42, 3, 4, "cut", NOW), 0);
	assert_int_equal(svc_db_recover(), 1);
	assert_int_equal(svc_db_recovered(one_recovered, &got), 1);
	assert_int_equal(got, cut);
	assert_int_equal(svc_db_recovered(one_recovered, &got), 0);
	/* Exactly once: a second recovery finds nothing active. */
	assert_int_equal(svc_db_recover(), 0);
	struct seen s = { 0 };
	assert_int_equal(svc_db_pending("uid:1", 3, 0, 16, take, &s), 1);
	assert_int_equal(s.session, cut);
	assert_int_equal(s.error, 8 /* PROF_E_UNKNOWN */);
	assert_string_equal(s.message, "profilingd restarted during the capture");
	assert_string_equal(s.path, "");
	/* It takes no quota and is not pruned for one. */
	struct svc_config cfg;
	svc_config_defaults(&cfg);
	cfg.max_app_result_bytes = 10; /* d1 fits exactly */
	assert_int_equal(svc_store_prune(&cfg, NOW), 0);
	/* A clean stop abandons one session the same way. */
	assert_int_equal(svc_db_alloc_id(&rid), 0);
	assert_int_equal(svc_db_session_new(rid, "uid:1", 1000, 43, 3, 0, "", NOW), 0);
	assert_int_equal(svc_db_session_abandon(rid, "profilingd stopped during the capture"), 0);
	memset(&s, 0, sizeof(s));
	assert_int_equal(svc_db_pending("uid:1", 3, 0, 16, take, &s), 2);
	assert_int_equal(s.session, rid);
	assert_int_equal(svc_db_recover(), 0);
}

/* The schema of version 7, as profilingd wrote it before migration 8. */
static const char v7_schema[] =
	"CREATE TABLE sessions ( id INTEGER PRIMARY KEY AUTOINCREMENT, uid INTEGER NOT NULL,"
	" pid INTEGER NOT NULL, type INTEGER NOT NULL, trigger INTEGER NOT NULL DEFAULT 0,"
	" tag TEXT NOT NULL DEFAULT '', state TEXT NOT NULL, error INTEGER NOT NULL DEFAULT 0,"
	" message TEXT, created_ns INTEGER NOT NULL, ended_ns INTEGER,"
	" app TEXT NOT NULL DEFAULT '');"
	"CREATE INDEX sessions_state ON sessions(state);"
	"CREATE TABLE results ( id INTEGER PRIMARY KEY AUTOINCREMENT,"
	" session_id INTEGER NOT NULL REFERENCES sessions(id), uid INTEGER NOT NULL,"
	" type INTEGER NOT NULL, trigger INTEGER NOT NULL DEFAULT 0, path TEXT NOT NULL,"
	" size INTEGER NOT NULL, format TEXT NOT NULL, start_ns INTEGER NOT NULL,"
	" end_ns INTEGER NOT NULL, delivered INTEGER NOT NULL DEFAULT 0,"
	" attempts INTEGER NOT NULL DEFAULT 0, app TEXT NOT NULL DEFAULT '',"
	" note TEXT NOT NULL DEFAULT '', error INTEGER NOT NULL DEFAULT 0,"
	" message TEXT NOT NULL DEFAULT '');"
	"CREATE INDEX results_uid ON results(uid, delivered);"
	"CREATE INDEX results_app ON results(app);"
	"CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);"
	"CREATE TABLE triggers (app TEXT NOT NULL, type INTEGER NOT NULL, uid INTEGER NOT NULL,"
	" gid INTEGER NOT NULL, exe TEXT NOT NULL, spec BLOB NOT NULL, PRIMARY KEY (app, type));"
	"CREATE TABLE method_configs (id TEXT PRIMARY KEY, version INTEGER NOT NULL,"
	" exe TEXT NOT NULL, targets TEXT NOT NULL, every INTEGER NOT NULL,"
	" max_hits INTEGER NOT NULL, canary_percent INTEGER NOT NULL,"
	" expires_ms INTEGER NOT NULL, budget_us INTEGER NOT NULL DEFAULT 0);"
	"INSERT INTO meta VALUES('id_limit', 100);"
	"INSERT INTO sessions(id, uid, pid, type, tag, state, created_ns, app)"
	" VALUES(7, 1000, 41, 3, 'old', 'done', 5, 'uid:1000');"
	"INSERT INTO sessions(id, uid, pid, type, tag, state, created_ns, app)"
	" VALUES(9, 1000, 42, 3, 'cut', 'active', 6, 'uid:1000');"
	"INSERT INTO results(session_id, uid, type, path, size, format, start_ns, end_ns, app)"
	" VALUES(7, 1000, 3, '/nonexistent/r7', 64, 'pprof', 4, 5, 'uid:1000');"
	"PRAGMA user_version = 7;";

static int64_t one_int(const char *sql)
{
	sqlite3_stmt *st;
	assert_int_equal(sqlite3_prepare_v2(svc_db_conn(), sql, -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	int64_t v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

/*
 * Migration 8 rebuilds sessions, which results refer to: a file of
 * version 7 keeps its rows and links, loses AUTOINCREMENT and the state
 * index, gains the partial index that recovery uses, and leaves the
 * foreign keys on.
 */
static void test_migrate_v7_sessions(void **state)
{
	char path[128];
	sqlite3 *raw;
	svc_db_fini();
	snprintf(path, sizeof(path), "%s/v7.db", dir);
	assert_int_equal(sqlite3_open(path, &raw), SQLITE_OK);
	assert_int_equal(sqlite3_exec(raw, v7_schema, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(raw);
	assert_int_equal(svc_db_init(path), 0);
	assert_int_equal(one_int("PRAGMA user_version"), 8);
	assert_int_equal(one_int("PRAGMA foreign_keys"), 1);
	assert_int_equal(one_int("SELECT COUNT(*) FROM sessions"), 2);
	assert_int_equal(one_int("SELECT COUNT(*) FROM results r JOIN sessions s ON s.id ="
				 " r.session_id WHERE s.tag = 'old' AND r.size = 64"), 1);
	assert_int_equal(one_int("SELECT COUNT(*) FROM sqlite_master WHERE name = 'sessions'"
				 " AND sql LIKE '%AUTOINCREMENT%'"), 0);
	assert_int_equal(one_int("SELECT COUNT(*) FROM sqlite_master WHERE name ="
				 " 'sessions_state'"), 0);
	assert_int_equal(one_int("SELECT COUNT(*) FROM sqlite_sequence WHERE name = 'sessions'"),
			 0);
	/* Recovery finds the active one through the partial index. */
	sqlite3_stmt *st;
	assert_int_equal(sqlite3_prepare_v2(svc_db_conn(), "EXPLAIN QUERY PLAN SELECT id, uid FROM"
					    " sessions WHERE state='active' LIMIT 5", -1, &st, NULL),
			 SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_non_null(strstr((const char *)sqlite3_column_text(st, 3), "sessions_active"));
	sqlite3_finalize(st);
	assert_int_equal(svc_db_recover(), 1);
	assert_int_equal(one_int("SELECT COUNT(*) FROM sessions WHERE state='active'"), 0);
	/* The references still hold: a result of a missing session is refused. */
	uint64_t rid, sid;
	assert_int_not_equal(svc_db_result_add(12345, "uid:1000", 1000, 3, 0, "/nonexistent/x", 1,
					       "pprof", 1, 2, &rid), 0);
	/* New sessions take ids above the old ones, as before. */
	assert_int_equal(svc_db_alloc_id(&sid), 0);
	assert_true(sid >= 100);
	assert_int_equal(svc_db_session_new(sid, "uid:1000", 1000, 43, 3, 0, "new", NOW), 0);
	assert_int_equal(svc_db_result_add(sid, "uid:1000", 1000, 3, 0, "/nonexistent/y", 1,
					   "pprof", 1, 2, &rid), 0);
	assert_true(rid > 1);
}

/* svc_db's method_configs (profctl's method-event configs, issue #19):
 * the row cap, replacement by id, expiry at load, delete one and all. */
struct mc_seen {
	int n;
	char ids[SVC_DB_METHODS_MAX + 1][40];
	uint32_t budget[SVC_DB_METHODS_MAX + 1];
	char targets[80];
};

static void mc_one(const struct svc_db_method_row *r, void *ud)
{
	struct mc_seen *s = ud;
	if (s->n <= SVC_DB_METHODS_MAX) {
		snprintf(s->ids[s->n], sizeof(s->ids[0]), "%s", r->id);
		s->budget[s->n] = r->budget_us;
		if (!strcmp(r->id, "c0"))
			snprintf(s->targets, sizeof(s->targets), "%s", r->targets);
	}
	s->n++;
}

static void test_method_configs(void **state)
{
	(void)state;
	char id[16];
	struct svc_db_method_row r = { .exe = "/usr/bin/app", .targets = "/a:f\n/b:+0x10",
				       .version = 1, .budget_us = 5 };
	for (int i = 0; i < SVC_DB_METHODS_MAX; i++) {
		snprintf(id, sizeof(id), "c%d", i);
		r.id = id;
		/* Half expire at 1000, half at 3000. */
		r.expires_ms = i % 2 ? 3000 : 1000;
		assert_int_equal(svc_db_methods_put(&r), 0);
	}
	/* At the cap: a new id is refused, an existing one replaced. */
	r.id = "one-more";
	assert_int_equal(svc_db_methods_put(&r), -ENOSPC);
	r.id = "c1";
	r.version = 2;
	r.budget_us = 9;
	assert_int_equal(svc_db_methods_put(&r), 0);
	assert_int_equal(svc_db_methods_put(NULL), -EINVAL);

	struct mc_seen *s = calloc(1, sizeof(*s));
	assert_non_null(s);
	int expired = -1;
	assert_int_equal(svc_db_methods_load(500, mc_one, s, &expired), SVC_DB_METHODS_MAX);
	assert_int_equal(expired, 0);
	assert_string_equal(s->targets, "/a:f\n/b:+0x10");
	/* Past 1000: the even ones go, deleted for good. */
	memset(s, 0, sizeof(*s));
	assert_int_equal(svc_db_methods_load(1000, mc_one, s, &expired), SVC_DB_METHODS_MAX / 2);
	assert_int_equal(expired, SVC_DB_METHODS_MAX / 2);
	for (int i = 0; i < s->n; i++) {
		assert_true(atoi(s->ids[i] + 1) % 2 == 1);
		assert_int_equal(s->budget[i], strcmp(s->ids[i], "c1") ? 5 : 9);
	}
	memset(s, 0, sizeof(*s));
	assert_int_equal(svc_db_methods_load(500, mc_one, s, &expired), SVC_DB_METHODS_MAX / 2);
	assert_int_equal(expired, 0);
	/* Room again under the cap. */
	r.id = "one-more";
	assert_int_equal(svc_db_methods_put(&r), 0);
	assert_int_equal(svc_db_methods_del("c1"), 0);
	memset(s, 0, sizeof(*s));
	assert_int_equal(svc_db_methods_load(500, mc_one, s, NULL), SVC_DB_METHODS_MAX / 2);
	assert_int_equal(svc_db_methods_del(NULL), 0);
	memset(s, 0, sizeof(*s));
	assert_int_equal(svc_db_methods_load(500, mc_one, s, &expired), 0);
	assert_int_equal(svc_db_methods_load(500, NULL, s, NULL), -EINVAL);
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_retention_age, setup, teardown),
		cmocka_unit_test_setup_teardown(test_quota_oldest_first, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bytes_cached_but_true, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pending_and_ack, setup, teardown),
		cmocka_unit_test_setup_teardown(test_recover_failure_result, setup, teardown),
		cmocka_unit_test_setup_teardown(test_method_configs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_migrate_v7_sessions, setup, teardown),
	};
	return cmocka_run_group_tests_name("store", tests, NULL, NULL);
}

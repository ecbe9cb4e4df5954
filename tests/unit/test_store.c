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
	};
	return cmocka_run_group_tests_name("store", tests, NULL, NULL);
}

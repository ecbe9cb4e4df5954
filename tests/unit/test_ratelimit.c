/* Unit tests for ratelimit/rl.c: every admission rule at its boundaries,
 * cooldowns, persistence across a clean close and a crash, and failing
 * closed on a bad store. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "log.h"
#include "profiling/profiling.h"
#include "rl.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define H (3600LL * 1000)
#define D (24 * H)
#define T0 1700000000000LL

#define SYS (-PROF_E_RATE_LIMIT_SYSTEM)
#define PROC (-PROF_E_RATE_LIMIT_PROCESS)
#define COOL (-PROF_E_TRIGGER_COOLDOWN)

struct fx {
	char dir[64];
	char path[128];
};

static int fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	strcpy(f->dir, "/tmp/rltest.XXXXXX");
	if (!mkdtemp(f->dir)) {
		free(f);
		return -1;
	}
	snprintf(f->path, sizeof(f->path), "%s/ratelimit.db", f->dir);
	*state = f;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;
	DIR *d = opendir(f->dir);
	struct dirent *de;
	char p[512];

	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", f->dir, de->d_name);
		unlink(p);
	}
	if (d)
		closedir(d);
	rmdir(f->dir);
	free(f);
	return 0;
}

/*
 * Fault injection for the store's error paths: the next step of a
 * statement whose SQL starts with fault_sql fails with fault_rc instead
 * of running; with fault_rollback the open transaction is rolled back
 * first, as SQLite does itself after some FULL and IOERR failures. rl.c's
 * calls reach this one: the executable's definition wins over the
 * library's.
 */
static const char *fault_sql;
static int fault_rc;
static bool fault_rollback;

static void fault(const char *sql, int rc, bool rollback)
{
	fault_sql = sql;
	fault_rc = rc;
	fault_rollback = rollback;
}

int sqlite3_step(sqlite3_stmt *st)
{
	static int (*real)(sqlite3_stmt *);
	const char *sql = fault_sql ? sqlite3_sql(st) : NULL;

	if (sql && strncmp(sql, fault_sql, strlen(fault_sql)) == 0) {
		fault_sql = NULL;
		if (fault_rollback)
			sqlite3_exec(sqlite3_db_handle(st), "ROLLBACK", NULL, NULL, NULL);
		return fault_rc;
	}
	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "sqlite3_step");
	return real(st);
}

/* The default config with caps no test reaches. */
static void no_caps(struct rl_config *c)
{
	rl_config_defaults(c);
	for (int w = 0; w < RL_NWIN; w++)
		c->win[w].system_cap = c->win[w].app_cap = UINT32_MAX;
}

static struct rl *open_ok(const char *path, const struct rl_config *cfg, int64_t now)
{
	struct rl *rl = NULL;
	const char *why;

	assert_int_equal(rl_open(path, cfg, now, &rl), 0);
	assert_non_null(rl);
	if (rl_failed(rl, &why))
		fail_msg("store failed: %s", why);
	return rl;
}

static struct rl *open_failed(const char *path, int64_t now, const char *why_has)
{
	struct rl *rl = NULL;
	const char *why;

	assert_int_equal(rl_open(path, NULL, now, &rl), 0);
	assert_non_null(rl);
	assert_true(rl_failed(rl, &why));
	if (!strstr(why, why_has))
		fail_msg("why is \"%s\", wanted \"%s\"", why, why_has);
	return rl;
}

static void usage_at(struct rl *rl, const char *app, int64_t now, struct rl_usage u[RL_NWIN])
{
	assert_int_equal(rl_usage(rl, app, now, u), 0);
}

static int64_t rows(const char *path, const char *table)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	char sql[64];
	int64_t n = -1;

	snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM %s", table);
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return n;
}

static bool exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

static void write_file(const char *path, const void *buf, size_t len, off_t off)
{
	int fd = open(path, O_WRONLY | O_CREAT, 0600);

	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, buf, len, off), (ssize_t)len);
	close(fd);
}

static void test_defaults(void **state)
{
	struct rl_config c;

	rl_config_defaults(&c);
	assert_int_equal(c.win[0].length_ms, H);
	assert_int_equal(c.win[1].length_ms, D);
	assert_int_equal(c.win[2].length_ms, 7 * D);
	assert_int_equal(c.win[0].system_cap, 20);
	assert_int_equal(c.win[0].app_cap, 10);
	assert_int_equal(c.win[1].system_cap, 50);
	assert_int_equal(c.win[1].app_cap, 20);
	assert_int_equal(c.win[2].system_cap, 150);
	assert_int_equal(c.win[2].app_cap, 30);
	for (int t = PROF_HEAP_DUMP; t <= PROF_SYSTEM_TRACE; t++) {
		assert_int_equal(c.app_cost[t], 10);
		assert_int_equal(c.system_cost[t], 5);
	}
	assert_string_equal(c.exempt_app, "");
	assert_false(c.sync_full);
	rl_config_defaults(NULL);
}

static void test_caps_exact(void **state)
{
	struct fx *f = *state;
	struct rl *rl = open_ok(f->path, NULL, T0);
	struct rl_usage u[RL_NWIN];

	/* App cap 10 in 1 h: one app request (10) fits exactly. */
	assert_int_equal(rl_admit(rl, "uid:1", PROF_HEAP_DUMP, false, T0), 0);
	assert_int_equal(rl_admit(rl, "uid:1", PROF_HEAP_DUMP, false, T0), PROC);
	assert_int_equal(rl_admit(rl, "uid:1", PROF_HEAP_DUMP, true, T0), PROC);
	/* System cap 20 in 1 h: a second app reaches it exactly... */
	assert_int_equal(rl_admit(rl, "uid:2", PROF_STACK_SAMPLING, false, T0), 0);
	/* ...and a third, with room of its own, is one over. */
	assert_int_equal(rl_admit(rl, "uid:3", PROF_STACK_SAMPLING, true, T0), SYS);

	usage_at(rl, "uid:1", T0, u);
	assert_int_equal(u[0].length_ms, H);
	assert_int_equal(u[0].system_used, 20);
	assert_int_equal(u[0].system_cap, 20);
	assert_int_equal(u[0].app_used, 10);
	assert_int_equal(u[0].app_cap, 10);
	assert_int_equal(u[2].system_used, 20);
	assert_int_equal(u[2].system_cap, 150);
	/* Refusals recorded nothing. */
	usage_at(rl, "uid:3", T0, u);
	assert_int_equal(u[0].app_used, 0);
	usage_at(rl, NULL, T0, u);
	assert_int_equal(u[0].app_used, 0);
	assert_int_equal(u[0].system_used, 20);
	rl_close(rl);
}

static void test_check_records_nothing(void **state)
{
	struct fx *f = *state;
	struct rl *rl = open_ok(f->path, NULL, T0);
	struct rl_usage u[RL_NWIN];

	/* rl_check gives rl_admit's answer and charges nothing, however often. */
	for (int i = 0; i < 5; i++)
		assert_int_equal(rl_check(rl, "uid:1", PROF_STACK_SAMPLING, false, T0), 0);
	usage_at(rl, "uid:1", T0, u);
	assert_int_equal(u[0].app_used, 0);
	assert_int_equal(rl_admit(rl, "uid:1", PROF_STACK_SAMPLING, false, T0), 0);
	assert_int_equal(rl_check(rl, "uid:1", PROF_STACK_SAMPLING, false, T0), PROC);
	assert_int_equal(rl_admit(rl, "uid:2", PROF_STACK_SAMPLING, false, T0), 0);
	assert_int_equal(rl_check(rl, "uid:3", PROF_STACK_SAMPLING, false, T0), SYS);
	assert_int_equal(rl_check(NULL, "uid:3", PROF_STACK_SAMPLING, false, T0),
			 -PROF_E_INVALID_REQUEST);
	usage_at(rl, NULL, T0, u);
	assert_int_equal(u[0].system_used, 20);
	rl_close(rl);
}

static void test_system_cost_exact(void **state)
{
	struct fx *f = *state;
	struct rl *rl = open_ok(f->path, NULL, T0);

	/* System-triggered captures cost 5: two fit the app cap of 10. */
	assert_int_equal(rl_admit(rl, "uid:1", PROF_HEAP_DUMP, true, T0), 0);
	assert_int_equal(rl_admit(rl, "uid:1", PROF_HEAP_DUMP, true, T0 + 1), 0);
	assert_int_equal(rl_admit(rl, "uid:1", PROF_HEAP_DUMP, true, T0 + 2), PROC);
	rl_close(rl);
}

/* Entries leave a window exactly when now - t == length. */
static void test_window_edges(void **state)
{
	struct fx *f = *state;
	struct rl *rl = open_ok(f->path, NULL, T0);
	struct rl_usage u[RL_NWIN];
	const char *a = "uid:1000/com.example";

	assert_int_equal(rl_admit(rl, a, PROF_HEAP_DUMP, false, T0), 0);
	assert_int_equal(rl_admit(rl, a, PROF_HEAP_DUMP, false, T0 + H - 1), PROC);
	assert_int_equal(rl_admit(rl, a, PROF_HEAP_DUMP, false, T0 + H), 0);
	usage_at(rl, a, T0 + H, u);
	assert_int_equal(u[0].app_used, 10);
	assert_int_equal(u[1].app_used, 20);

	/* 1 h is empty again, but 24 h is full (20): 24 h decides. */
	usage_at(rl, a, T0 + 2 * H, u);
	assert_int_equal(u[0].app_used, 0);
	assert_int_equal(u[1].app_used, 20);
	assert_int_equal(rl_admit(rl, a, PROF_HEAP_DUMP, false, T0 + 2 * H), PROC);
	assert_int_equal(rl_admit(rl, a, PROF_HEAP_DUMP, false, T0 + D - 1), PROC);
	assert_int_equal(rl_admit(rl, a, PROF_HEAP_DUMP, false, T0 + D), 0);
	usage_at(rl, a, T0 + D, u);
	assert_int_equal(u[1].app_used, 20);
	assert_int_equal(u[2].app_used, 30);

	/* 1 h and 24 h have room, 7 d holds 30 of 30 until T0 ages out. */
	usage_at(rl, a, T0 + D + H, u);
	assert_int_equal(u[0].app_used, 0);
	assert_int_equal(u[1].app_used, 10);
	assert_int_equal(rl_admit(rl, a, PROF_HEAP_DUMP, false, T0 + D + H), PROC);
	assert_int_equal(rl_admit(rl, a, PROF_HEAP_DUMP, false, T0 + 7 * D - 1), PROC);
	usage_at(rl, a, T0 + 7 * D - 1, u);
	assert_int_equal(u[2].app_used, 30);
	assert_int_equal(u[2].system_used, 30);
	assert_int_equal(rl_admit(rl, a, PROF_HEAP_DUMP, false, T0 + 7 * D), 0);
	usage_at(rl, a, T0 + 7 * D, u);
	assert_int_equal(u[2].app_used, 30);
	assert_int_equal(u[0].app_used, 10);
	rl_close(rl);
}

/* rl_next_admit (the budget query): the first time rl_admit passes again,
 * exactly: refused 1 ms before, admitted at it; nothing recorded. */
static void test_next_admit(void **state)
{
	struct fx *f = *state;
	struct rl_config cfg;
	const char *a = "uid:1000/com.example";
	int64_t at;

	rl_config_defaults(&cfg);
	struct rl *rl = open_ok(f->path, &cfg, T0);
	assert_int_equal(rl_next_admit(rl, a, PROF_HEAP_DUMP, false, T0, &at), 0);
	assert_int_equal(at, T0);
	assert_int_equal(rl_admit(rl, a, PROF_HEAP_DUMP, false, T0), 0);
	/* 1 h holds 10 of 10: free again when T0 leaves it. */
	assert_int_equal(rl_next_admit(rl, a, PROF_HEAP_DUMP, false, T0 + 5, &at), 0);
	assert_int_equal(at, T0 + H);
	assert_int_equal(rl_next_admit(rl, a, PROF_HEAP_DUMP, false, T0 + 5, &at), 0);
	assert_int_equal(at, T0 + H); /* the query recorded nothing */
	assert_int_equal(rl_admit(rl, a, PROF_HEAP_DUMP, false, at - 1), PROC);
	assert_int_equal(rl_admit(rl, a, PROF_HEAP_DUMP, false, at), 0);
	/* Now 24 h holds 20 of 20: T0 must leave it. */
	assert_int_equal(rl_next_admit(rl, a, PROF_HEAP_DUMP, false, T0 + H + 1, &at), 0);
	assert_int_equal(at, T0 + D);
	assert_int_equal(rl_admit(rl, a, PROF_HEAP_DUMP, false, at - 1), PROC);
	assert_int_equal(rl_admit(rl, a, PROF_HEAP_DUMP, false, at), 0);
	/* Another app: only the system's windows (1 h: 10 of 20 used). */
	assert_int_equal(rl_next_admit(rl, "uid:2", PROF_HEAP_DUMP, false, T0 + D, &at), 0);
	assert_int_equal(at, T0 + D);
	/* A system capture costs 5: the same walk with its own cost. */
	assert_int_equal(rl_cost(rl, a, PROF_HEAP_DUMP, true), 5);
	assert_int_equal(rl_cost(rl, a, PROF_HEAP_DUMP, false), 10);
	assert_int_equal(rl_next_admit(NULL, a, PROF_HEAP_DUMP, false, T0, &at), -EINVAL);
	assert_int_equal(rl_next_admit(rl, a, 0, false, T0, &at), -EINVAL);
	rl_close(rl);

	/* A cost over a cap is never admitted. */
	cfg.app_cost[PROF_HEAP_DUMP] = cfg.win[0].app_cap + 1;
	rl = open_ok(f->path, &cfg, T0);
	assert_int_equal(rl_next_admit(rl, "uid:3", PROF_HEAP_DUMP, false, T0, &at), 0);
	assert_int_equal(at, INT64_MAX);
	rl_close(rl);
}

/* rl_trigger_last: the recorded fire, or -ENOENT. */
static void test_trigger_last(void **state)
{
	struct fx *f = *state;
	struct rl *rl = open_ok(f->path, NULL, T0);
	int64_t t;

	assert_int_equal(rl_trigger_last(rl, "uid:1", PROF_TRIGGER_HANG, &t), -ENOENT);
	assert_int_equal(rl_trigger_record(rl, "uid:1", PROF_TRIGGER_HANG, T0 + 7), 0);
	assert_int_equal(rl_trigger_last(rl, "uid:1", PROF_TRIGGER_HANG, &t), 0);
	assert_int_equal(t, T0 + 7);
	assert_int_equal(rl_trigger_last(rl, "uid:1", PROF_TRIGGER_OOM, &t), -ENOENT);
	assert_int_equal(rl_trigger_last(rl, "uid:1", 0, &t), -EINVAL);
	rl_close(rl);
}

static void test_system_cap_24h(void **state)
{
	struct fx *f = *state;
	struct rl *rl = open_ok(f->path, NULL, T0);
	char app[32];

	/* Two apps per hour keep 1 h at its cap; the fifth app brings 24 h
	 * to 50 exactly, the sixth is one over and 24 h says SYSTEM. */
	for (int i = 0; i < 5; i++) {
		snprintf(app, sizeof(app), "uid:%d", 100 + i);
		assert_int_equal(rl_admit(rl, app, PROF_HEAP_PROFILE, false, T0 + (i / 2) * H), 0);
	}
	assert_int_equal(rl_admit(rl, "uid:200", PROF_HEAP_PROFILE, false, T0 + 3 * H), SYS);
	/* At T0 + 24 h the first two leave 24 h. */
	assert_int_equal(rl_admit(rl, "uid:200", PROF_HEAP_PROFILE, false, T0 + D - 1), SYS);
	assert_int_equal(rl_admit(rl, "uid:200", PROF_HEAP_PROFILE, false, T0 + D), 0);
	rl_close(rl);
}

/* The first failing window decides, not the worst one. */
static void test_deciding_window(void **state)
{
	struct fx *f = *state;
	struct rl_config c;
	struct rl *rl;

	rl_config_defaults(&c);
	c.win[0] = (struct rl_window_cfg){ H, 100, 10 };
	c.win[1] = (struct rl_window_cfg){ D, 10, 100 };
	c.win[2] = (struct rl_window_cfg){ 7 * D, 1000, 1000 };
	rl = open_ok(f->path, &c, T0);
	assert_int_equal(rl_admit(rl, "uid:1", PROF_HEAP_DUMP, false, T0), 0);
	/* uid:1 fails its app cap in 1 h (and the system cap in 24 h). */
	assert_int_equal(rl_admit(rl, "uid:1", PROF_HEAP_DUMP, false, T0), PROC);
	/* uid:2 passes 1 h and fails the system cap in 24 h. */
	assert_int_equal(rl_admit(rl, "uid:2", PROF_HEAP_DUMP, false, T0), SYS);
	rl_close(rl);

	/* A week later the first entries are gone. System fails first in
	 * 1 h, the app would fail in 24 h: SYSTEM. */
	c.win[0] = (struct rl_window_cfg){ H, 10, 100 };
	c.win[1] = (struct rl_window_cfg){ D, 100, 10 };
	rl = open_ok(f->path, &c, T0 + 7 * D);
	assert_int_equal(rl_admit(rl, "uid:1", PROF_HEAP_DUMP, false, T0 + 7 * D), 0);
	assert_int_equal(rl_admit(rl, "uid:1", PROF_HEAP_DUMP, false, T0 + 7 * D), SYS);
	/* Both fail in the same window: SYSTEM. */
	c.win[0] = (struct rl_window_cfg){ H, 10, 10 };
	rl_close(rl);
	rl = open_ok(f->path, &c, T0 + 7 * D);
	assert_int_equal(rl_admit(rl, "uid:1", PROF_HEAP_DUMP, false, T0 + 7 * D), SYS);
	/* The windows are checked in config order, whatever their lengths. */
	c.win[0] = (struct rl_window_cfg){ 7 * D, 1000, 10 };
	c.win[1] = (struct rl_window_cfg){ H, 10, 1000 };
	c.win[2] = (struct rl_window_cfg){ D, 1000, 1000 };
	rl_close(rl);
	rl = open_ok(f->path, &c, T0 + 7 * D);
	assert_int_equal(rl_admit(rl, "uid:1", PROF_HEAP_DUMP, false, T0 + 7 * D), PROC);
	rl_close(rl);
}

static void test_costs_per_type(void **state)
{
	struct fx *f = *state;
	struct rl_config c;
	struct rl_usage u[RL_NWIN];
	struct rl *rl;

	rl_config_defaults(&c);
	c.app_cost[PROF_SYSTEM_TRACE] = 7;
	c.system_cost[PROF_HEAP_PROFILE] = 3;
	c.app_cost[PROF_STACK_SAMPLING] = 0;
	rl = open_ok(f->path, &c, T0);
	assert_int_equal(rl_admit(rl, "uid:1", PROF_SYSTEM_TRACE, false, T0), 0);
	assert_int_equal(rl_admit(rl, "uid:1", PROF_HEAP_PROFILE, true, T0), 0);
	usage_at(rl, "uid:1", T0, u);
	assert_int_equal(u[0].app_used, 10);
	/* 10 + 3 > 10; a free type is always admitted and never counted. */
	assert_int_equal(rl_admit(rl, "uid:1", PROF_HEAP_PROFILE, true, T0), PROC);
	for (int i = 0; i < 50; i++)
		assert_int_equal(rl_admit(rl, "uid:1", PROF_STACK_SAMPLING, false, T0), 0);
	usage_at(rl, "uid:1", T0, u);
	assert_int_equal(u[0].app_used, 10);
	assert_int_equal(u[0].system_used, 10);
	rl_close(rl);
	assert_int_equal(rows(f->path, "entries"), 2);
}

static void test_invalid_args(void **state)
{
	struct fx *f = *state;
	struct rl_config c;
	struct rl_usage u[RL_NWIN];
	struct rl *rl = (struct rl *)&c; /* not NULL: rl_open must clear it */
	char longapp[RL_APP_MAX + 1];
	const char *why;

	assert_int_equal(rl_open(NULL, NULL, T0, &rl), -EINVAL);
	assert_null(rl);
	assert_int_equal(rl_open(f->path, NULL, T0, NULL), -EINVAL);
	rl_config_defaults(&c);
	c.win[1].length_ms = 0;
	assert_int_equal(rl_open(f->path, &c, T0, &rl), -EINVAL);
	rl_config_defaults(&c);
	memset(c.exempt_app, 'x', sizeof(c.exempt_app));
	assert_int_equal(rl_open(f->path, &c, T0, &rl), -EINVAL);
	assert_false(exists(f->path));

	rl_close(NULL);
	assert_true(rl_failed(NULL, &why));
	assert_non_null(why);
	assert_null(rl_exempt_app(NULL));
	assert_int_equal(rl_admit(NULL, "uid:1", 1, false, T0), -PROF_E_INVALID_REQUEST);
	assert_int_equal(rl_usage(NULL, NULL, T0, u), -EINVAL);
	assert_int_equal(rl_prune(NULL, T0), -EINVAL);
	assert_int_equal(rl_reset(NULL, T0), -EINVAL);

	rl = open_ok(f->path, NULL, T0);
	assert_false(rl_failed(rl, &why));
	assert_string_equal(why, "");
	assert_int_equal(rl_admit(rl, "uid:1", 0, false, T0), -PROF_E_INVALID_REQUEST);
	assert_int_equal(rl_admit(rl, "uid:1", RL_TYPE_MAX + 1, false, T0), -PROF_E_INVALID_REQUEST);
	assert_int_equal(rl_admit(rl, NULL, 1, false, T0), -PROF_E_INVALID_REQUEST);
	assert_int_equal(rl_admit(rl, "", 1, false, T0), -PROF_E_INVALID_REQUEST);
	memset(longapp, 'a', sizeof(longapp));
	longapp[RL_APP_MAX] = '\0';
	assert_int_equal(rl_admit(rl, longapp, 1, false, T0), -PROF_E_INVALID_REQUEST);
	assert_int_equal(rl_usage(rl, longapp, T0, u), -EINVAL);
	assert_int_equal(rl_usage(rl, NULL, T0, NULL), -EINVAL);
	assert_int_equal(rl_trigger_check(rl, "uid:1", 0, 1, T0), -PROF_E_INVALID_REQUEST);
	assert_int_equal(rl_trigger_check(rl, "uid:1", RL_TRIGGER_MAX + 1, 1, T0),
			 -PROF_E_INVALID_REQUEST);
	assert_int_equal(rl_trigger_check(rl, NULL, 1, 1, T0), -PROF_E_INVALID_REQUEST);
	assert_int_equal(rl_trigger_record(rl, "uid:1", 0, T0), -EINVAL);
	assert_int_equal(rl_trigger_record(rl, longapp, 1, T0), -EINVAL);
	/* The longest allowed key works. */
	longapp[RL_APP_MAX - 1] = '\0';
	assert_int_equal(rl_admit(rl, longapp, 1, false, T0), 0);
	assert_int_equal(rl_admit(rl, longapp, 1, false, T0), PROC);
	rl_close(rl);
}

static void test_cooldown(void **state)
{
	struct fx *f = *state;
	struct rl *rl = open_ok(f->path, NULL, T0);
	const char *a = "uid:1000";

	assert_int_equal(rl_trigger_check(rl, a, PROF_TRIGGER_OOM, 3600, T0), 0);
	/* Checking records nothing. */
	assert_int_equal(rl_trigger_check(rl, a, PROF_TRIGGER_OOM, 3600, T0), 0);
	assert_int_equal(rl_trigger_record(rl, a, PROF_TRIGGER_OOM, T0), 0);
	assert_int_equal(rl_trigger_check(rl, a, PROF_TRIGGER_OOM, 3600, T0), COOL);
	assert_int_equal(rl_trigger_check(rl, a, PROF_TRIGGER_OOM, 3600, T0 + H - 1), COOL);
	assert_int_equal(rl_trigger_check(rl, a, PROF_TRIGGER_OOM, 3600, T0 + H), 0);
	/* Per (app, trigger); a zero period never cools down. */
	assert_int_equal(rl_trigger_check(rl, a, PROF_TRIGGER_HANG, 3600, T0), 0);
	assert_int_equal(rl_trigger_check(rl, "uid:1001", PROF_TRIGGER_OOM, 3600, T0), 0);
	assert_int_equal(rl_trigger_check(rl, a, PROF_TRIGGER_OOM, 0, T0), 0);
	/* The period is the caller's: a shorter one is already over. */
	assert_int_equal(rl_trigger_check(rl, a, PROF_TRIGGER_OOM, 60, T0 + 60000), 0);
	assert_int_equal(rl_trigger_check(rl, a, PROF_TRIGGER_OOM, 60, T0 + 59999), COOL);
	/* A fire after the clock stepped back is still cooling down, unless
	 * there is no cooldown at all. */
	assert_int_equal(rl_trigger_check(rl, a, PROF_TRIGGER_OOM, 1, T0 - 5000), COOL);
	assert_int_equal(rl_trigger_check(rl, a, PROF_TRIGGER_OOM, 0, T0 - 5000), 0);
	/* A new fire restarts the period. */
	assert_int_equal(rl_trigger_record(rl, a, PROF_TRIGGER_OOM, T0 + 2 * H), 0);
	assert_int_equal(rl_trigger_check(rl, a, PROF_TRIGGER_OOM, 3600, T0 + 3 * H - 1), COOL);
	assert_int_equal(rl_trigger_check(rl, a, PROF_TRIGGER_OOM, 3600, T0 + 3 * H), 0);
	/* Cooldowns do not spend cost. */
	assert_int_equal(rl_admit(rl, a, PROF_HEAP_DUMP, false, T0 + 2 * H), 0);
	rl_close(rl);

	/* They persist. */
	rl = open_ok(f->path, NULL, T0 + 2 * H + 1);
	assert_int_equal(rl_trigger_check(rl, a, PROF_TRIGGER_OOM, 3600, T0 + 3 * H - 1), COOL);
	assert_int_equal(rl_trigger_check(rl, a, PROF_TRIGGER_OOM, 3600, T0 + 3 * H), 0);
	rl_close(rl);
}

static void test_cooldown_keep(void **state)
{
	struct fx *f = *state;
	struct rl *rl = open_ok(f->path, NULL, T0);
	const uint32_t sixty_days = 60 * 24 * 3600;

	assert_int_equal(rl_trigger_record(rl, "uid:1", PROF_TRIGGER_CRASH, T0), 0);
	assert_int_equal(rl_prune(rl, T0 + RL_TRIGGER_KEEP_MS - 1), 0);
	assert_int_equal(rl_trigger_check(rl, "uid:1", PROF_TRIGGER_CRASH, sixty_days,
					  T0 + RL_TRIGGER_KEEP_MS - 1), COOL);
	rl_close(rl);
	assert_int_equal(rows(f->path, "triggers"), 1);
	rl = open_ok(f->path, NULL, T0 + 1);
	assert_int_equal(rl_prune(rl, T0 + RL_TRIGGER_KEEP_MS), 0);
	assert_int_equal(rl_trigger_check(rl, "uid:1", PROF_TRIGGER_CRASH, sixty_days,
					  T0 + RL_TRIGGER_KEEP_MS), 0);
	rl_close(rl);
	assert_int_equal(rows(f->path, "triggers"), 0);
}

static void test_exemption(void **state)
{
	struct fx *f = *state;
	struct rl_config c;
	struct rl_usage u[RL_NWIN];
	struct rl *rl;

	rl = open_ok(f->path, NULL, T0);
	assert_null(rl_exempt_app(rl));
	rl_close(rl);

	rl_config_defaults(&c);
	strcpy(c.exempt_app, "uid:2000/com.example.test");
	rl = open_ok(f->path, &c, T0);
	assert_string_equal(rl_exempt_app(rl), "uid:2000/com.example.test");
	for (int i = 0; i < 100; i++)
		assert_int_equal(rl_admit(rl, "uid:2000/com.example.test", PROF_SYSTEM_TRACE,
					  i & 1, T0), 0);
	usage_at(rl, "uid:2000/com.example.test", T0, u);
	assert_int_equal(u[0].system_used, 0);
	assert_int_equal(u[0].app_used, 0);
	/* Only that key: the same uid without the app id is limited. */
	assert_int_equal(rl_admit(rl, "uid:2000", PROF_SYSTEM_TRACE, false, T0), 0);
	assert_int_equal(rl_admit(rl, "uid:2000", PROF_SYSTEM_TRACE, false, T0), PROC);
	/* Cooldowns still apply. */
	assert_int_equal(rl_trigger_record(rl, "uid:2000/com.example.test", PROF_TRIGGER_HANG, T0), 0);
	assert_int_equal(rl_trigger_check(rl, "uid:2000/com.example.test", PROF_TRIGGER_HANG,
					  10, T0 + 1), COOL);
	rl_close(rl);

	/* A failed store refuses the exempt app too. */
	write_file(f->path, "not a database, not at all", 26, 0);
	assert_int_equal(rl_open(f->path, &c, T0, &rl), 0);
	assert_true(rl_failed(rl, NULL));
	assert_int_equal(rl_admit(rl, "uid:2000/com.example.test", PROF_SYSTEM_TRACE, false, T0),
			 SYS);
	rl_close(rl);
}

static void test_persist_reopen(void **state)
{
	struct fx *f = *state;
	struct rl *rl = open_ok(f->path, NULL, T0);
	struct rl_usage u[RL_NWIN];

	assert_int_equal(rl_admit(rl, "uid:1", PROF_HEAP_DUMP, false, T0), 0);
	assert_int_equal(rl_admit(rl, "uid:2", PROF_HEAP_DUMP, true, T0 + 1), 0);
	rl_close(rl);

	rl = open_ok(f->path, NULL, T0 + 2);
	usage_at(rl, "uid:1", T0 + 2, u);
	assert_int_equal(u[0].system_used, 15);
	assert_int_equal(u[0].app_used, 10);
	assert_int_equal(rl_admit(rl, "uid:1", PROF_HEAP_DUMP, true, T0 + 2), PROC);
	assert_int_equal(rl_admit(rl, "uid:3", PROF_HEAP_DUMP, false, T0 + 2), SYS);
	assert_int_equal(rl_admit(rl, "uid:3", PROF_HEAP_DUMP, true, T0 + 2), 0);
	rl_close(rl);

	/* Reopened later, the entries age out as they would have. */
	rl = open_ok(f->path, NULL, T0 + H + 1);
	usage_at(rl, "uid:1", T0 + H + 1, u);
	assert_int_equal(u[0].system_used, 5);
	assert_int_equal(u[1].system_used, 20);
	assert_int_equal(u[1].app_used, 10);
	rl_close(rl);
}

/* A child admits and dies without rl_close(): how 0 is _exit(0), 1 is
 * SIGKILL right after the admission returns. */
static void crash_after_admit(const char *path, int how)
{
	int status;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		struct rl *rl = NULL;
		if (rl_open(path, NULL, T0, &rl) || rl_failed(rl, NULL) ||
		    rl_admit(rl, "uid:1", PROF_HEAP_DUMP, false, T0) ||
		    rl_admit(rl, "uid:2", PROF_HEAP_DUMP, true, T0) ||
		    rl_trigger_record(rl, "uid:1", PROF_TRIGGER_OOM, T0))
			_exit(3);
		if (how)
			kill(getpid(), SIGKILL);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (how) {
		assert_true(WIFSIGNALED(status));
		assert_int_equal(WTERMSIG(status), SIGKILL);
	} else {
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
	}
}

static void test_crash(void **state)
{
	struct fx *f = *state;
	struct rl_usage u[RL_NWIN];

	for (int how = 0; how < 2; how++) {
		crash_after_admit(f->path, how);
		struct rl *rl = open_ok(f->path, NULL, T0 + 1);
		usage_at(rl, "uid:1", T0 + 1, u);
		assert_int_equal(u[0].system_used, 15);
		assert_int_equal(u[0].app_used, 10);
		usage_at(rl, "uid:2", T0 + 1, u);
		assert_int_equal(u[0].app_used, 5);
		assert_int_equal(rl_trigger_check(rl, "uid:1", PROF_TRIGGER_OOM, 60, T0 + 1), COOL);
		rl_close(rl);
		assert_int_equal(rl_reset(f->path, T0 + how * 1000), 0);
	}
}

/*
 * Group commit: a committed batch survives a SIGKILL, an open one is
 * gone whole; rl_close commits an open batch.
 */
static void test_batch(void **state)
{
	struct fx *f = *state;
	struct rl_usage u[RL_NWIN];
	int status;

	assert_int_equal(rl_batch_begin(NULL), -EINVAL);
	assert_int_equal(rl_batch_commit(NULL), -EINVAL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rl *rl = NULL;
		if (rl_open(f->path, NULL, T0, &rl) || rl_failed(rl, NULL) ||
		    rl_batch_commit(rl) || /* none open: nothing to do */
		    rl_batch_begin(rl) ||
		    rl_admit(rl, "uid:1", PROF_HEAP_DUMP, false, T0) ||
		    rl_admit(rl, "uid:2", PROF_HEAP_DUMP, true, T0) ||
		    rl_trigger_record(rl, "uid:1", PROF_TRIGGER_OOM, T0) ||
		    rl_batch_commit(rl) ||
		    rl_batch_begin(rl) ||
		    rl_admit(rl, "uid:3", PROF_HEAP_DUMP, true, T0) ||
		    rl_trigger_record(rl, "uid:3", PROF_TRIGGER_OOM, T0))
			_exit(3);
		kill(getpid(), SIGKILL);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(rows(f->path, "entries"), 2);
	struct rl *rl = open_ok(f->path, NULL, T0 + 1);
	usage_at(rl, "uid:1", T0 + 1, u);
	assert_int_equal(u[0].system_used, 15);
	assert_int_equal(u[0].app_used, 10);
	usage_at(rl, "uid:3", T0 + 1, u);
	assert_int_equal(u[0].app_used, 0);
	assert_int_equal(rl_trigger_check(rl, "uid:1", PROF_TRIGGER_OOM, 60, T0 + 1), COOL);
	assert_int_equal(rl_trigger_check(rl, "uid:3", PROF_TRIGGER_OOM, 60, T0 + 1), 0);
	/* Left open at close: committed. */
	assert_int_equal(rl_batch_begin(rl), 0);
	assert_int_equal(rl_admit(rl, "uid:4", PROF_HEAP_DUMP, true, T0 + 1), 0);
	rl_close(rl);
	assert_int_equal(rows(f->path, "entries"), 3);
}

/*
 * Inside a batch an app's admissions are one row, the sum of their costs
 * at the latest one's time; past 32 apps the rows are written early, and
 * none is lost. After a reopen the row counts until the latest time ages
 * out (conservative by up to one batch).
 */
static void test_batch_sums(void **state)
{
	struct fx *f = *state;
	struct rl_config c;
	struct rl_usage u[RL_NWIN];
	char app[32];

	no_caps(&c);
	struct rl *rl = open_ok(f->path, &c, T0);
	assert_int_equal(rl_batch_begin(rl), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(rl_admit(rl, "uid:1", PROF_HEAP_DUMP, false, T0 + i), 0);
	/* uid:1 and 31 more fill the batch's rows; the 33rd app writes them. */
	for (int i = 0; i < 40; i++) {
		snprintf(app, sizeof(app), "uid:%d", 100 + i);
		assert_int_equal(rl_admit(rl, app, PROF_HEAP_DUMP, true, T0 + 2), 0);
	}
	assert_int_equal(rl_admit(rl, "uid:1", PROF_HEAP_DUMP, false, T0 + 2), 0);
	assert_int_equal(rl_batch_commit(rl), 0);
	rl_close(rl);
	/* 32 written early, then uid:131..139 and uid:1 again. */
	assert_int_equal(rows(f->path, "entries"), 42);

	rl = open_ok(f->path, &c, T0 + 3);
	usage_at(rl, "uid:1", T0 + 3, u);
	assert_int_equal(u[0].app_used, 40);
	assert_int_equal(u[0].system_used, 40 + 40 * 5);
	usage_at(rl, "uid:1", T0 + 2 + H - 1, u);
	assert_int_equal(u[0].app_used, 40);
	usage_at(rl, "uid:1", T0 + 2 + H, u);
	assert_int_equal(u[0].app_used, 0);
	rl_close(rl);
}

/*
 * A batch whose commit fails (here the file may not grow: RLIMIT_FSIZE)
 * is rolled back whole, the 32 rows written early with the rest, and
 * rl_batch_commit says so; the store keeps what was committed before.
 */
static void test_batch_fails(void **state)
{
	struct fx *f = *state;
	struct rl_config c;
	struct rl_usage u[RL_NWIN];
	int status;

	no_caps(&c);
	struct rl *rl = open_ok(f->path, &c, T0);
	assert_int_equal(rl_admit(rl, "uid:1", PROF_HEAP_DUMP, false, T0), 0);
	rl_close(rl);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rl *r = NULL;
		struct rlimit lim = { 4096, 4096 };
		char app[32];
		signal(SIGXFSZ, SIG_IGN);
		if (rl_open(f->path, &c, T0 + 1, &r) || rl_failed(r, NULL) || rl_batch_begin(r) ||
		    setrlimit(RLIMIT_FSIZE, &lim))
			_exit(3);
		for (int i = 0; i < 40; i++) {
			snprintf(app, sizeof(app), "uid:%d", 100 + i);
			if (rl_admit(r, app, PROF_HEAP_DUMP, true, T0 + 1))
				_exit(4);
		}
		int e = rl_batch_commit(r);
		_exit(e == -EIO || e == -ENOSPC ? 0 : 5);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(rows(f->path, "entries"), 1);
	rl = open_ok(f->path, &c, T0 + 2);
	usage_at(rl, "uid:100", T0 + 2, u);
	assert_int_equal(u[0].app_used, 0);
	assert_int_equal(u[0].system_used, 10);
	rl_close(rl);
}

/* A batch's row meets a corrupt store at the commit: refused, failed
 * closed, and no use of the closed handle (it crashed once). */
static void test_batch_corrupt_row(void **state)
{
	struct fx *f = *state;
	struct rl *rl = open_ok(f->path, NULL, T0);

	assert_int_equal(rl_batch_begin(rl), 0);
	assert_int_equal(rl_admit(rl, "uid:1", PROF_HEAP_DUMP, false, T0), 0);
	fault("INSERT INTO entries", SQLITE_CORRUPT, false);
	assert_int_equal(rl_batch_commit(rl), -EIO);
	assert_true(rl_failed(rl, NULL));
	rl_close(rl);
}

/* The store closes mid-batch (prune meets a corrupt page) after only a
 * cooldown was written: the commit must not say 0. */
static void test_batch_store_closed(void **state)
{
	struct fx *f = *state;
	struct rl *rl = open_ok(f->path, NULL, T0);

	assert_int_equal(rl_batch_begin(rl), 0);
	assert_int_equal(rl_trigger_record(rl, "uid:1", PROF_TRIGGER_OOM, T0), 0);
	fault("DELETE FROM entries", SQLITE_CORRUPT, false);
	assert_int_equal(rl_admit(rl, "uid:2", PROF_HEAP_DUMP, false, T0 + 2 * H), SYS);
	assert_true(rl_failed(rl, NULL));
	assert_int_equal(rl_batch_commit(rl), -EIO);
	rl_close(rl);
}

/* SQLite rolls the batch's transaction back after a failed write: the
 * rows written at the commit must not then commit on their own. */
static void test_batch_rolled_back(void **state)
{
	struct fx *f = *state;
	struct rl *rl = open_ok(f->path, NULL, T0);

	assert_int_equal(rl_batch_begin(rl), 0);
	assert_int_equal(rl_trigger_record(rl, "uid:1", PROF_TRIGGER_OOM, T0), 0);
	fault("INSERT INTO triggers", SQLITE_FULL, true);
	assert_int_equal(rl_trigger_record(rl, "uid:2", PROF_TRIGGER_OOM, T0), -EIO);
	assert_int_equal(rl_admit(rl, "uid:3", PROF_HEAP_DUMP, false, T0), 0);
	assert_int_not_equal(rl_batch_commit(rl), 0);
	assert_false(rl_failed(rl, NULL));
	rl_close(rl);
	assert_int_equal(rows(f->path, "entries"), 0);
	assert_int_equal(rows(f->path, "triggers"), 0);
}

/* Run rl_open with the logger writing into a file; return what it wrote. */
static struct rl *open_logged(struct fx *f, char *log, size_t size)
{
	char lpath[160];
	struct rl *rl = NULL;
	int saved = dup(STDERR_FILENO);
	int fd;

	snprintf(lpath, sizeof(lpath), "%s/log.txt", f->dir);
	fd = open(lpath, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0 && saved >= 0);
	dup2(fd, STDERR_FILENO);
	log_init(LOG_SINK_STDERR, LOG_DEBUG, "test");
	int r = rl_open(f->path, NULL, T0, &rl);
	log_init(LOG_SINK_NONE, LOG_INFO, "");
	dup2(saved, STDERR_FILENO);
	close(saved);
	ssize_t n = pread(fd, log, size - 1, 0);
	close(fd);
	unlink(lpath);
	log[n > 0 ? n : 0] = '\0';
	assert_int_equal(r, 0);
	assert_non_null(rl);
	return rl;
}

static void test_corrupt_garbage(void **state)
{
	struct fx *f = *state;
	char garbage[8192], back[8192], p[256], log[2048];
	struct rl_usage u[RL_NWIN];
	const char *why;
	struct rl *rl;

	for (size_t i = 0; i < sizeof(garbage); i++)
		garbage[i] = (char)(i * 7 + 13);
	write_file(f->path, garbage, sizeof(garbage), 0);
	snprintf(p, sizeof(p), "%s-wal", f->path);
	write_file(p, garbage, 100, 0);
	snprintf(p, sizeof(p), "%s-shm", f->path);
	write_file(p, garbage, 100, 0);

	rl = open_logged(f, log, sizeof(log));
	assert_true(rl_failed(rl, &why));
	assert_non_null(strstr(why, "corrupt"));
	assert_non_null(strstr(log, f->path));
	assert_non_null(strstr(log, "profilingd --reset-ratelimit"));
	assert_int_equal(rl_admit(rl, "uid:1", PROF_HEAP_DUMP, false, T0), SYS);
	assert_int_equal(rl_admit(rl, "uid:1", PROF_HEAP_DUMP, true, T0 + D), SYS);
	assert_int_equal(rl_trigger_check(rl, "uid:1", PROF_TRIGGER_OOM, 0, T0), SYS);
	assert_int_equal(rl_trigger_record(rl, "uid:1", PROF_TRIGGER_OOM, T0), -EIO);
	assert_int_equal(rl_usage(rl, "uid:1", T0, u), -EIO);
	assert_int_equal(rl_prune(rl, T0), -EIO);
	rl_close(rl);

	/* Still failed until repaired; the broken file is kept aside. */
	rl_close(open_failed(f->path, T0, "corrupt"));
	assert_int_equal(rl_reset(f->path, T0 + 1500), 0);
	snprintf(p, sizeof(p), "%s.broken-%lld", f->path, (T0 + 1500) / 1000);
	int fd = open(p, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(read(fd, back, sizeof(back)), (ssize_t)sizeof(back));
	close(fd);
	assert_memory_equal(back, garbage, sizeof(garbage));
	snprintf(p, sizeof(p), "%s-shm", f->path);
	assert_false(exists(p));

	rl = open_ok(f->path, NULL, T0);
	assert_int_equal(rl_admit(rl, "uid:1", PROF_HEAP_DUMP, false, T0), 0);
	rl_close(rl);

	/* A second reset in the same second does not overwrite the first. */
	assert_int_equal(rl_reset(f->path, T0 + 1500), 0);
	snprintf(p, sizeof(p), "%s.broken-%lld.1", f->path, (T0 + 1500) / 1000);
	assert_true(exists(p));
}

static void test_corrupt_page(void **state)
{
	struct fx *f = *state;
	struct rl *rl = open_ok(f->path, NULL, T0);
	char junk[4096];

	for (int i = 0; i < 6; i++) {
		char app[16];
		snprintf(app, sizeof(app), "uid:%d", i);
		rl_admit(rl, app, PROF_HEAP_DUMP, true, T0);
	}
	assert_int_equal(rl_trigger_record(rl, "uid:1", PROF_TRIGGER_OOM, T0), 0);
	rl_close(rl);
	/* Keep the header, break the b-tree pages behind it. */
	memset(junk, 0xa5, sizeof(junk));
	write_file(f->path, junk, sizeof(junk), 4096);
	write_file(f->path, junk, sizeof(junk), 8192);
	rl = open_failed(f->path, T0, "corrupt");
	assert_int_equal(rl_admit(rl, "uid:9", PROF_HEAP_DUMP, false, T0), SYS);
	rl_close(rl);
	assert_int_equal(rl_reset(f->path, T0), 0);
	rl_close(open_ok(f->path, NULL, T0));
}

static void test_malformed_row(void **state)
{
	struct fx *f = *state;
	sqlite3 *db;

	rl_close(open_ok(f->path, NULL, T0));
	assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "INSERT INTO entries (app, cost, t_ms)"
				      " VALUES ('uid:1', 'ten', 1700000000000)",
				      NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	rl_close(open_failed(f->path, T0, "malformed"));
}

static void test_future_version(void **state)
{
	struct fx *f = *state;
	struct rl *rl = open_ok(f->path, NULL, T0);
	sqlite3 *db;

	assert_int_equal(rl_admit(rl, "uid:1", PROF_HEAP_DUMP, false, T0), 0);
	rl_close(rl);
	assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "PRAGMA user_version=99", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);

	rl = open_failed(f->path, T0, "newer");
	assert_int_equal(rl_admit(rl, "uid:2", PROF_HEAP_DUMP, false, T0), SYS);
	rl_close(rl);
	assert_int_equal(rl_reset(f->path, T0), 0);
	rl = open_ok(f->path, NULL, T0);
	assert_int_equal(rl_admit(rl, "uid:2", PROF_HEAP_DUMP, false, T0), 0);
	rl_close(rl);
}

static void test_unreadable(void **state)
{
	struct fx *f = *state;
	char p[256];

	snprintf(p, sizeof(p), "%s/missing/ratelimit.db", f->dir);
	rl_close(open_failed(p, T0, "unreadable"));
	rl_close(open_failed(f->dir, T0, "unreadable"));
}

static void test_locked(void **state)
{
	struct fx *f = *state;
	struct rl *a = open_ok(f->path, NULL, T0);
	int go[2], done[2];
	char c;

	/* A second handle in this process. */
	rl_close(open_failed(f->path, T0, "locked"));
	assert_int_equal(rl_reset(f->path, T0), -EBUSY);
	assert_int_equal(rl_admit(a, "uid:1", PROF_HEAP_DUMP, false, T0), 0);
	rl_close(a);

	/* And in another process. */
	assert_int_equal(pipe(go), 0);
	assert_int_equal(pipe(done), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rl *rl = NULL;
		/* Only the parent's write end: EOF if the parent goes away. */
		close(go[0]);
		close(done[1]);
		c = rl_open(f->path, NULL, T0, &rl) == 0 && !rl_failed(rl, NULL) ? 'y' : 'n';
		if (write(go[1], &c, 1) != 1 || read(done[0], &c, 1) != 1)
			_exit(1);
		_exit(0);
	}
	close(go[1]);
	close(done[0]);
	assert_int_equal(read(go[0], &c, 1), 1);
	assert_int_equal(c, 'y');
	rl_close(open_failed(f->path, T0, "locked"));
	assert_int_equal(rl_reset(f->path, T0), -EBUSY);
	assert_int_equal(write(done[1], "x", 1), 1);
	close(done[1]);
	close(go[0]);
	waitpid(pid, NULL, 0);

	a = open_ok(f->path, NULL, T0);
	assert_int_equal(rl_admit(a, "uid:1", PROF_HEAP_DUMP, false, T0), PROC);
	rl_close(a);
}

static void test_prune(void **state)
{
	struct fx *f = *state;
	struct rl_usage u[RL_NWIN];
	struct rl *rl = open_ok(f->path, NULL, T0);

	assert_int_equal(rl_admit(rl, "uid:1", PROF_HEAP_DUMP, false, T0), 0);
	assert_int_equal(rl_prune(rl, T0 + 7 * D - 1), 0);
	usage_at(rl, "uid:1", T0 + 7 * D - 1, u);
	assert_int_equal(u[2].app_used, 10);
	rl_close(rl);
	assert_int_equal(rows(f->path, "entries"), 1);

	rl = open_ok(f->path, NULL, T0 + 1);
	assert_int_equal(rl_prune(rl, T0 + 7 * D), 0);
	usage_at(rl, "uid:1", T0 + 7 * D, u);
	assert_int_equal(u[2].app_used, 0);
	assert_int_equal(u[2].system_used, 0);
	rl_close(rl);
	assert_int_equal(rows(f->path, "entries"), 0);
}

/* rl_admit prunes the file by itself, at most about once an hour. */
static void test_prune_in_admit(void **state)
{
	struct fx *f = *state;
	struct rl *rl = open_ok(f->path, NULL, T0);

	assert_int_equal(rl_admit(rl, "uid:1", PROF_HEAP_DUMP, false, T0), 0);
	assert_int_equal(rl_admit(rl, "uid:2", PROF_HEAP_DUMP, false, T0 + 30 * 60000), 0);
	assert_int_equal(rl_admit(rl, "uid:3", PROF_HEAP_DUMP, false, T0 + 7 * D), 0);
	rl_close(rl);
	assert_int_equal(rows(f->path, "entries"), 2);

	rl = open_ok(f->path, NULL, T0 + 7 * D);
	assert_int_equal(rl_admit(rl, "uid:4", PROF_HEAP_DUMP, false, T0 + 7 * D + H), 0);
	rl_close(rl);
	assert_int_equal(rows(f->path, "entries"), 2);
}

static void test_app_cap(void **state)
{
	struct fx *f = *state;
	struct rl_config c;
	struct rl_usage u[RL_NWIN];
	char app[32];
	struct rl *rl;

	no_caps(&c);
	rl = open_ok(f->path, &c, T0);
	/* uid:0 and uid:1 spend at T0, the others an hour later. */
	for (int i = 0; i < RL_MAX_APPS; i++) {
		snprintf(app, sizeof(app), "uid:%d", i);
		assert_int_equal(rl_admit(rl, app, PROF_HEAP_DUMP, false, i < 2 ? T0 : T0 + H), 0);
	}
	assert_int_equal(rl_trigger_record(rl, "uid:1", PROF_TRIGGER_HANG, T0), 0);
	assert_int_equal(rl_admit(rl, "uid:new", PROF_HEAP_DUMP, false, T0 + H), SYS);
	assert_int_equal(rl_trigger_record(rl, "uid:new", PROF_TRIGGER_OOM, T0 + H), -ENOSPC);
	assert_int_equal(rl_trigger_check(rl, "uid:new", PROF_TRIGGER_OOM, 60, T0 + H), 0);
	assert_int_equal(rl_admit(rl, "uid:7", PROF_HEAP_DUMP, false, T0 + H), 0);
	usage_at(rl, "uid:7", T0 + H, u);
	assert_int_equal(u[0].app_used, 20);
	assert_int_equal(u[2].system_used, 10ull * (RL_MAX_APPS + 1));

	/* A week on, uid:0 is idle and its slot is freed; uid:1 keeps its
	 * slot for the cooldown; the later apps keep their entries. */
	assert_int_equal(rl_admit(rl, "uid:new", PROF_HEAP_DUMP, false, T0 + 7 * D), 0);
	usage_at(rl, "uid:new", T0 + 7 * D, u);
	assert_int_equal(u[2].app_used, 10);
	assert_int_equal(u[2].system_used, 10ull * RL_MAX_APPS);
	usage_at(rl, "uid:4095", T0 + 7 * D, u);
	assert_int_equal(u[2].app_used, 10);
	usage_at(rl, "uid:7", T0 + 7 * D, u);
	assert_int_equal(u[2].app_used, 20);
	usage_at(rl, "uid:1", T0 + 7 * D, u);
	assert_int_equal(u[2].app_used, 0);
	assert_int_equal(rl_trigger_check(rl, "uid:1", PROF_TRIGGER_HANG, 8 * 24 * 3600, T0 + 7 * D),
			 COOL);
	assert_int_equal(rl_admit(rl, "uid:last", PROF_HEAP_DUMP, false, T0 + 7 * D), SYS);
	assert_int_equal(rl_admit(rl, "uid:4095", PROF_HEAP_DUMP, false, T0 + 7 * D), 0);
	/* Once the rest age out, rl_prune frees them all. */
	assert_int_equal(rl_prune(rl, T0 + 7 * D + H), 0);
	assert_int_equal(rl_admit(rl, "uid:last", PROF_HEAP_DUMP, false, T0 + 7 * D + H), 0);
	usage_at(rl, "uid:4095", T0 + 7 * D + H, u);
	assert_int_equal(u[2].app_used, 10);
	assert_int_equal(u[2].system_used, 30);
	/* The entries that aged out were charged back to their own apps. */
	usage_at(rl, "uid:new", T0 + 7 * D + H, u);
	assert_int_equal(u[2].app_used, 10);
	usage_at(rl, "uid:2", T0 + 7 * D + H, u);
	assert_int_equal(u[2].app_used, 0);
	rl_close(rl);
}

/* A wall clock that steps back keeps counting entries "in the future". */
static void test_clock_back(void **state)
{
	struct fx *f = *state;
	struct rl_usage u[RL_NWIN];
	struct rl *rl = open_ok(f->path, NULL, T0);

	assert_int_equal(rl_admit(rl, "uid:1", PROF_HEAP_DUMP, false, T0 + H), 0);
	assert_int_equal(rl_admit(rl, "uid:2", PROF_HEAP_DUMP, false, T0), 0);
	assert_int_equal(rl_admit(rl, "uid:3", PROF_HEAP_DUMP, true, T0), SYS);
	usage_at(rl, NULL, T0 + H / 2, u);
	assert_int_equal(u[0].system_used, 20);
	usage_at(rl, "uid:2", T0 + H, u);
	assert_int_equal(u[0].system_used, 10);
	assert_int_equal(u[0].app_used, 0);
	usage_at(rl, NULL, T0 + 2 * H, u);
	assert_int_equal(u[0].system_used, 0);
	assert_int_equal(u[1].system_used, 20);
	/* Back again: the aged-out entries count once more. */
	usage_at(rl, "uid:2", T0 + H / 2, u);
	assert_int_equal(u[0].system_used, 20);
	assert_int_equal(u[0].app_used, 10);
	rl_close(rl);

	rl = open_ok(f->path, NULL, T0 + H / 2);
	usage_at(rl, "uid:1", T0 + H / 2, u);
	assert_int_equal(u[0].system_used, 20);
	assert_int_equal(u[0].app_used, 10);
	rl_close(rl);
}

static void test_sync_full(void **state)
{
	struct fx *f = *state;
	struct rl_config c;
	struct rl_usage u[RL_NWIN];
	struct rl *rl;

	rl_config_defaults(&c);
	c.sync_full = true;
	rl = open_ok(f->path, &c, T0);
	assert_int_equal(rl_admit(rl, "uid:1", PROF_HEAP_DUMP, false, T0), 0);
	rl_close(rl);
	rl = open_ok(f->path, &c, T0);
	usage_at(rl, "uid:1", T0, u);
	assert_int_equal(u[0].app_used, 10);
	rl_close(rl);
}

static void test_reset_fresh(void **state)
{
	struct fx *f = *state;
	struct rl_usage u[RL_NWIN];
	char p[256];
	struct rl *rl;

	/* No file yet: a fresh store appears. */
	assert_int_equal(rl_reset(f->path, T0), 0);
	assert_true(exists(f->path));
	snprintf(p, sizeof(p), "%s.broken-%lld", f->path, T0 / 1000);
	assert_false(exists(p));

	/* A healthy store is moved aside too, with its entries. */
	rl = open_ok(f->path, NULL, T0);
	assert_int_equal(rl_admit(rl, "uid:1", PROF_HEAP_DUMP, false, T0), 0);
	rl_close(rl);
	assert_int_equal(rl_reset(f->path, T0), 0);
	assert_int_equal(rows(p, "entries"), 1);
	snprintf(p, sizeof(p), "%s-wal", f->path);
	rl = open_ok(f->path, NULL, T0);
	usage_at(rl, "uid:1", T0, u);
	assert_int_equal(u[0].system_used, 0);
	rl_close(rl);
	assert_false(exists(p));
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		T(test_caps_exact),
		T(test_check_records_nothing),
		T(test_system_cost_exact),
		T(test_window_edges),
		T(test_next_admit),
		T(test_trigger_last),
		T(test_system_cap_24h),
		T(test_deciding_window),
		T(test_costs_per_type),
		T(test_invalid_args),
		T(test_cooldown),
		T(test_cooldown_keep),
		T(test_exemption),
		T(test_persist_reopen),
		T(test_crash),
		T(test_batch),
		T(test_batch_sums),
		T(test_batch_fails),
		T(test_batch_corrupt_row),
		T(test_batch_store_closed),
		T(test_batch_rolled_back),
		T(test_corrupt_garbage),
		T(test_corrupt_page),
		T(test_malformed_row),
		T(test_future_version),
		T(test_unreadable),
		T(test_locked),
		T(test_prune),
		T(test_prune_in_admit),
		T(test_app_cap),
		T(test_clock_back),
		T(test_sync_full),
		T(test_reset_fresh),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

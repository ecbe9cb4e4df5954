/*
 * Method-event configs (svc_methods.h): the table, the canary hash, and
 * the captures each config starts and stops through svc_request.
 */
#include "svc_methods.h"
#include "svc_admit.h"
#include "svc_conn.h"
#include "svc_db.h"
#include "svc_ident.h"
#include "svc_request.h"
#include "svc_session_priv.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "names.h"
#include "profiling/profiling.h"
#include "util.h"

struct entry {
	struct svc_methods_cfg cfg;
	bool used, disabled;
	int64_t expires_ms;
	unsigned matched, selected, started;
	uint64_t sessions[SVC_METHODS_PROCS];
	unsigned nsessions;
};

static struct entry table[SVC_METHODS_MAX];
/* Slots at and past this were never used: every exec on the machine scans
 * the table, and an entry is over 4 KiB (a page touched each). */
static size_t table_hi;

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

bool svc_methods_canary(const char *id, pid_t pid, uint64_t start, uint32_t percent)
{
	if (percent >= 100)
		return true;
	uint64_t h = 0xcbf29ce484222325ull;
	uint32_t p = (uint32_t)pid;
	h = fnv(h, id, strlen(id) + 1);
	h = fnv(h, &p, sizeof(p));
	h = fnv(h, &start, sizeof(start));
	return h % 100 < percent;
}

static struct entry *find(const char *id)
{
	for (size_t i = 0; i < SVC_METHODS_MAX; i++)
		if (table[i].used && !strcmp(table[i].cfg.id, id))
			return &table[i];
	return NULL;
}

static bool id_ok(const char *id)
{
	size_t n = strlen(id);
	if (n == 0 || n > SVC_METHODS_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = id[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
		      c == '.'))
			return false;
	}
	return true;
}

/* Stop e's captures now: the kill switch, a replacement, the stop. */
static int stop_captures(struct entry *e, const char *why)
{
	int stopped = 0;
	for (unsigned i = 0; i < e->nsessions; i++)
		if (svc_request_stop(e->sessions[i], why) == 0)
			stopped++;
	e->nsessions = 0;
	return stopped;
}

/* Start e's capture of pid (the canary chose it). */
static void start_one(struct entry *e, pid_t pid, uint64_t start)
{
	const struct svc_methods_cfg *c = &e->cfg;
	Pd__Params prm = PD__PARAMS__INIT;
	char *targets[SVC_METHOD_TARGETS_MAX];
	char app[RL_APP_MAX], tag[WIRE_MAX_TAG + 1], msg[256];
	struct svc_ident ident;
	uint64_t id = 0;

	if (e->nsessions >= SVC_METHODS_PROCS)
		return; /* counted as selected, not started */
	svc_ident_init(&ident);
	if (svc_ident_of_pid(&ident, pid, start) < 0)
		return; /* gone since the scan */
	/* A setuid process's result stays root's, as for profctl request. */
	uid_t uid = svc_ident_mixed(&ident) ? 0 : ident.uid[0];
	gid_t gid = svc_ident_mixed(&ident) ? 0 : ident.gid[0];
	svc_ident_fini(&ident);
	for (unsigned i = 0; i < c->ntargets; i++)
		targets[i] = (char *)c->targets[i];
	prm.n_method_targets = c->ntargets;
	prm.method_targets = targets;
	prm.has_method_every = c->every != 0;
	prm.method_every = c->every;
	prm.has_method_max_hits = c->max_hits != 0;
	prm.method_max_hits = c->max_hits;
	prm.has_method_budget_us = c->budget_us != 0;
	prm.method_budget_us = c->budget_us;
	prm.has_duration_ms = 1;
	int64_t left = e->expires_ms - (int64_t)(util_now_ns(CLOCK_REALTIME) / 1000000);
	prm.duration_ms = left < SVC_DURATION_MIN_MS ? SVC_DURATION_MIN_MS : (uint32_t)left;
	svc_app_key(svc_session_config(), pid, uid, app, sizeof(app));
	util_fmt(tag, sizeof(tag), "methods-%s", c->id);
	int r = svc_request_trigger(pid, start, uid, gid, app, PROF_METHOD_EVENTS, &prm,
				    PROF_TRIGGER_NONE, tag, 0, &id, msg, sizeof(msg));
	if (r) {
		LOG_W("method events %s v%u: pid %d not hooked: %s", c->id, c->version, (int)pid,
		      msg);
		return;
	}
	e->sessions[e->nsessions++] = id;
	e->started++;
	LOG_I("method events %s v%u: pid %d hooked (session %llu)", c->id, c->version, (int)pid,
	      (unsigned long long)id);
}

/* Every running process of e's executable, through the canary. */
static void apply(struct entry *e)
{
	char path[64], exe[SVC_PATH_MAX];
	DIR *d = opendir("/proc");
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		if (de->d_name[0] < '1' || de->d_name[0] > '9' || *end || pid <= 0 ||
		    pid > INT32_MAX || pid == getpid())
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/exe", pid);
		ssize_t n = readlink(path, exe, sizeof(exe) - 1);
		if (n <= 0)
			continue;
		exe[n] = '\0';
		if (strcmp(exe, e->cfg.exe))
			continue;
		uint64_t start = 0;
		if (util_proc_start_time((int)pid, &start) < 0)
			continue;
		e->matched++;
		if (!svc_methods_canary(e->cfg.id, (pid_t)pid, start, e->cfg.canary_percent))
			continue;
		e->selected++;
		start_one(e, (pid_t)pid, start);
	}
	closedir(d);
}

/* Kept in the state database so that a restart brings it back (a
 * [methods.ID] section comes back from the config file instead). A
 * failed write costs the config its restart, not its captures: logged. */
static void persist(const struct entry *e)
{
	char targets[SVC_METHOD_TARGETS_MAX * SVC_METHOD_TARGET_LEN];
	size_t len = 0;
	targets[0] = '\0';
	for (unsigned i = 0; i < e->cfg.ntargets; i++) {
		int w = snprintf(targets + len, sizeof(targets) - len, "%s%s", i ? "\n" : "",
				 e->cfg.targets[i]);
		if (w < 0 || (size_t)w >= sizeof(targets) - len)
			break;
		len += (size_t)w;
	}
	struct svc_db_method_row r = {
		.id = e->cfg.id, .exe = e->cfg.exe, .targets = targets,
		.version = e->cfg.version, .every = e->cfg.every, .max_hits = e->cfg.max_hits,
		.canary_percent = e->cfg.canary_percent, .expires_ms = e->expires_ms,
		.budget_us = e->cfg.budget_us,
	};
	int rc = svc_db_methods_put(&r);
	if (rc < 0)
		LOG_W("method events %s: not saved in the state database (%s): a restart "
		      "forgets it", e->cfg.id, strerror(-rc));
}

/* expires_ms 0: now + the config's expiry; save: profctl's (persist()). */
static int add(const struct svc_methods_cfg *c, int64_t expires_ms, bool save, char *msg,
	       size_t n)
{
	Pd__Params prm = PD__PARAMS__INIT;
	char *targets[SVC_METHOD_TARGETS_MAX];

	if (!svc_session_config()->method_events) {
		util_fmt(msg, n, "method events are switched off ([capture] method_events = false)");
		return PROF_E_INVALID_REQUEST;
	}
	if (!c || !id_ok(c->id)) {
		util_fmt(msg, n, "config id: 1..%d of [a-z0-9_.-]", SVC_METHODS_ID_MAX);
		return PROF_E_INVALID_REQUEST;
	}
	if (c->exe[0] != '/') {
		util_fmt(msg, n, "exe: an absolute path of the processes to hook");
		return PROF_E_INVALID_REQUEST;
	}
	if (c->expiry_s > SVC_METHODS_EXPIRY_MAX_S || c->canary_percent > 100) {
		util_fmt(msg, n, "expiry at most %d s, canary 0..100 %%", SVC_METHODS_EXPIRY_MAX_S);
		return PROF_E_INVALID_REQUEST;
	}
	for (unsigned i = 0; i < c->ntargets && i < SVC_METHOD_TARGETS_MAX; i++)
		targets[i] = (char *)c->targets[i];
	prm.n_method_targets = c->ntargets;
	prm.method_targets = targets;
	prm.has_method_every = 1;
	prm.method_every = c->every;
	prm.has_method_max_hits = 1;
	prm.method_max_hits = c->max_hits;
	prm.has_method_budget_us = 1;
	prm.method_budget_us = c->budget_us;
	int e = svc_admit_methods(&prm, msg, n);
	if (e)
		return e;
	struct entry *old = find(c->id), *slot = old;
	if (old && c->version <= old->cfg.version) {
		util_fmt(msg, n, "config %s is at version %u: a new one needs a higher version",
			 c->id, old->cfg.version);
		return PROF_E_INVALID_REQUEST;
	}
	for (size_t i = 0; !slot && i < SVC_METHODS_MAX; i++)
		if (!table[i].used)
			slot = &table[i];
	if (!slot) {
		util_fmt(msg, n, "%d method-event configs already: disable one first", SVC_METHODS_MAX);
		return PROF_E_INVALID_REQUEST;
	}
	if (old) {
		int k = stop_captures(old, "method events replaced by a newer version");
		LOG_I("method events %s: v%u replaces v%u (%d captures stopped)", c->id, c->version,
		      old->cfg.version, k);
	}
	memset(slot, 0, sizeof(*slot));
	slot->cfg = *c;
	slot->used = true;
	if ((size_t)(slot - table) >= table_hi)
		table_hi = (size_t)(slot - table) + 1;
	if (!slot->cfg.expiry_s)
		slot->cfg.expiry_s = SVC_METHODS_EXPIRY_DEFAULT_S;
	if (!slot->cfg.canary_percent)
		slot->cfg.canary_percent = 100;
	slot->expires_ms = expires_ms ? expires_ms
				      : (int64_t)(util_now_ns(CLOCK_REALTIME) / 1000000) +
					(int64_t)slot->cfg.expiry_s * 1000;
	if (save)
		persist(slot);
	apply(slot);
	LOG_I("method events %s v%u on %s: %u processes, %u in the %u %% canary, %u hooked, "
	      "expires in %u s", c->id, c->version, c->exe, slot->matched, slot->selected,
	      slot->cfg.canary_percent, slot->started, slot->cfg.expiry_s);
	return 0;
}

int svc_methods_add(const struct svc_methods_cfg *c, char *msg, size_t n)
{
	return add(c, 0, true, msg, n);
}

int svc_methods_disable(const char *id)
{
	int stopped = 0;
	bool found = false, all = id && !strcmp(id, "all");
	for (size_t i = 0; id && i < SVC_METHODS_MAX; i++) {
		struct entry *e = &table[i];
		if (!e->used || (!all && strcmp(e->cfg.id, id)))
			continue;
		found = true;
		e->disabled = true;
		stopped += stop_captures(e, "method events disabled (kill switch)");
	}
	if (!found && !all)
		return -ENOENT;
	/* Disabled stays disabled: a restart must not bring the hooks back. */
	int rc = svc_db_methods_del(all ? NULL : id);
	if (rc < 0)
		LOG_E("method events %s: disabled, but still in the state database (%s): a "
		      "restart would enable it again", id, strerror(-rc));
	LOG_N("method events disabled: %s; %d captures stopped, their probes removed", id,
	      stopped);
	return stopped;
}

void svc_methods_exec(pid_t pid, const char *exe)
{
	int64_t now = (int64_t)(util_now_ns(CLOCK_REALTIME) / 1000000);
	uint64_t start = 0;
	for (size_t i = 0; i < table_hi; i++) {
		struct entry *e = &table[i];
		if (!e->used || e->disabled || now >= e->expires_ms || strcmp(e->cfg.exe, exe))
			continue;
		if (!start && util_proc_start_time((int)pid, &start) < 0)
			return; /* gone already */
		e->matched++;
		if (!svc_methods_canary(e->cfg.id, pid, start, e->cfg.canary_percent))
			continue;
		e->selected++;
		start_one(e, pid, start);
	}
}

bool svc_methods_any(void)
{
	for (size_t i = 0; i < table_hi; i++)
		if (table[i].used && !table[i].disabled)
			return true;
	return false;
}

int svc_methods_switch_off(void)
{
	for (size_t i = 0; i < SVC_METHODS_MAX; i++)
		if (table[i].used) {
			table[i].disabled = true;
			table[i].nsessions = 0;
		}
	/* As the kill switch: none of them comes back at the next start. */
	int rc = svc_db_methods_del(NULL);
	if (rc < 0)
		LOG_E("method events switched off, but the saved configs remain (%s)",
		      strerror(-rc));
	return svc_request_stop_type(PROF_METHOD_EVENTS, "method events switched off "
				     "([capture] method_events = false)");
}

/* One saved profctl config back, with its own expiry time. */
static void restore_one(const struct svc_db_method_row *r, void *ud)
{
	struct svc_methods_cfg *c = ud;
	char msg[256];
	int64_t now = (int64_t)(util_now_ns(CLOCK_REALTIME) / 1000000);
	memset(c, 0, sizeof(*c));
	util_strlcpy(c->id, r->id, sizeof(c->id));
	util_strlcpy(c->exe, r->exe, sizeof(c->exe));
	for (const char *t = r->targets; *t && c->ntargets < SVC_METHOD_TARGETS_MAX;) {
		size_t l = strcspn(t, "\n");
		if (l < SVC_METHOD_TARGET_LEN) {
			memcpy(c->targets[c->ntargets], t, l);
			c->targets[c->ntargets++][l] = '\0';
		}
		t += l + (t[l] == '\n');
	}
	c->version = r->version;
	c->every = r->every;
	c->max_hits = r->max_hits;
	c->canary_percent = r->canary_percent;
	c->budget_us = r->budget_us;
	/* What is left of it; its end stays the one it was given. */
	int64_t left = (r->expires_ms - now + 999) / 1000;
	c->expiry_s = left < 1 ? 1 : left > SVC_METHODS_EXPIRY_MAX_S ? SVC_METHODS_EXPIRY_MAX_S
								    : (uint32_t)left;
	if (add(c, r->expires_ms, false, msg, sizeof(msg)))
		LOG_E("method events %s: saved config not restored: %s", r->id, msg);
	else
		LOG_I("method events %s v%u: restored from the state database", r->id,
		      r->version);
}

/* profctl's configs saved by an earlier run: expired ones dropped. */
static void restore(void)
{
	struct svc_methods_cfg *c = calloc(1, sizeof(*c));
	int expired = 0;
	if (!c) {
		LOG_E("method events: out of memory: saved configs not restored");
		return;
	}
	int n = svc_db_methods_load((int64_t)(util_now_ns(CLOCK_REALTIME) / 1000000), restore_one,
				    c, &expired);
	free(c);
	if (n < 0)
		LOG_E("method events: saved configs not read: %s", strerror(-n));
	else if (n || expired)
		LOG_N("method events: %d saved config(s) restored, %d expired ones dropped", n,
		      expired);
}

void svc_methods_load(const struct svc_config *cfg)
{
	struct svc_methods_cfg *c = calloc(1, sizeof(*c));
	char msg[256];
	if (!c) {
		LOG_E("[methods.*]: out of memory: no method-event config loaded");
		return;
	}
	for (unsigned i = 0; i < cfg->nmethods; i++) {
		const struct svc_methods_conf *m = &cfg->methods[i];
		memset(c, 0, sizeof(*c));
		util_strlcpy(c->id, m->id, sizeof(c->id));
		util_strlcpy(c->exe, m->exe, sizeof(c->exe));
		for (unsigned k = 0; k < m->ntargets; k++)
			util_strlcpy(c->targets[k], m->targets[k], sizeof(c->targets[k]));
		c->ntargets = m->ntargets;
		c->version = m->version ? m->version : 1;
		c->canary_percent = m->canary_percent;
		c->expiry_s = m->expiry_s;
		c->every = m->every;
		c->max_hits = m->max_hits;
		c->budget_us = m->budget_us;
		if (add(c, 0, false, msg, sizeof(msg)))
			LOG_E("[methods.%s] not loaded: %s", m->id, msg);
	}
	free(c);
	restore();
}

void svc_methods_foreach(void (*fn)(const struct svc_methods_info *i, void *ud), void *ud)
{
	for (size_t i = 0; i < SVC_METHODS_MAX; i++) {
		const struct entry *e = &table[i];
		if (!e->used)
			continue;
		struct svc_methods_info in = {
			.cfg = &e->cfg, .expires_ms = e->expires_ms, .disabled = e->disabled,
			.matched = e->matched, .selected = e->selected, .started = e->started,
			.sessions = e->sessions, .nsessions = e->nsessions,
		};
		fn(&in, ud);
	}
}

void svc_methods_fini(void)
{
	memset(table, 0, sizeof(table));
	table_hi = 0;
}

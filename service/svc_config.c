/* INI config (libinih). Every key is documented in policy/profilingd.conf. */
#include "svc_config.h"

#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "duration.h"
#include "log.h"
#include "names.h"
#include "util.h"

/* K_MS: a uint32 duration in ms, "<n>[ms|s|m|h]", a bare number in ms
 * (every such key ends in _ms; common/duration.h). */
enum key_kind { K_STR_PATH, K_STR_SUN, K_STR_APP, K_STR_USER, K_U32, K_U64, K_LEVEL, K_BOOL,
		K_MS };

/*
 * Reload class of a key on SIGHUP. R_LIVE keys are read from the live config
 * at each use (or pushed to their module by svc_config_reload's caller), so a
 * new value takes effect for the next decision. R_RESTART keys shaped state
 * made at start (sockets, the state dir, per-connection queues, the helper
 * paths and users, the SQLite mode): a changed value is refused with a log
 * line and the old one kept.
 */
enum reload { R_RESTART, R_LIVE };

struct key {
	const char *section, *name;
	enum key_kind kind;
	size_t off;
	uint64_t min, max;
	enum reload reload;
};

#define OFF(f) offsetof(struct svc_config, f)

/* The table is the schema: parse, range checks and docs follow it. */
static const struct key keys[] = {
	{ "daemon", "state_dir", K_STR_PATH, OFF(state_dir), 0, 0, R_RESTART },
	{ "daemon", "client_socket", K_STR_SUN, OFF(client_socket), 0, 0, R_RESTART },
	{ "daemon", "runtime_socket", K_STR_SUN, OFF(runtime_socket), 0, 0, R_RESTART },
	{ "daemon", "log_level", K_LEVEL, OFF(log_level), 0, 0, R_LIVE },
	{ "limits", "max_clients", K_U32, OFF(max_clients), 1, 65536, R_LIVE },
	{ "limits", "max_clients_per_uid", K_U32, OFF(max_clients_per_uid), 1, 65536, R_LIVE },
	{ "limits", "max_runtimes", K_U32, OFF(max_runtimes), 1, 65536, R_LIVE },
	{ "limits", "max_runtimes_per_uid", K_U32, OFF(max_runtimes_per_uid), 1, 65536, R_LIVE },
	{ "limits", "hello_timeout_ms", K_MS, OFF(hello_timeout_ms), 100, 600000, R_LIVE },
	{ "limits", "max_pids_per_uid", K_U32, OFF(max_pids_per_uid), 1, 4096, R_LIVE },
	{ "limits", "max_queued_msgs", K_U32, OFF(max_queued_msgs), 4, 4096, R_RESTART },
	{ "limits", "max_sessions", K_U32, OFF(max_sessions), 1, 4096, R_LIVE },
	{ "limits", "max_result_bytes", K_U64, OFF(max_result_bytes), 4096, 1ull << 40, R_LIVE },
	{ "capture", "default_duration_ms", K_MS, OFF(default_duration_ms),
	  SVC_DURATION_MIN_MS, SVC_DURATION_MAX_MS, R_LIVE },
	{ "capture", "default_frequency_hz", K_U32, OFF(default_frequency_hz), SVC_HZ_MIN, SVC_HZ_MAX, R_LIVE },
	{ "capture", "deadline_grace_ms", K_MS, OFF(deadline_grace_ms), 100, 600000, R_LIVE },
	{ "capture", "runtime_wait_ms", K_MS, OFF(runtime_wait_ms), 0, 60000, R_LIVE },
	{ "limits", "max_app_result_bytes", K_U64, OFF(max_app_result_bytes), 0, 1ull << 50, R_LIVE },
	{ "limits", "max_total_result_bytes", K_U64, OFF(max_total_result_bytes), 0, 1ull << 50, R_LIVE },
	{ "limits", "min_free_bytes", K_U64, OFF(min_free_bytes), 0, 1ull << 50, R_LIVE },
	{ "ratelimit", "app_cost_heap_dump", K_U32, OFF(rl.app_cost[1]), 0, 1000000, R_LIVE },
	{ "ratelimit", "app_cost_heap_profile", K_U32, OFF(rl.app_cost[2]), 0, 1000000, R_LIVE },
	{ "ratelimit", "app_cost_stack_sampling", K_U32, OFF(rl.app_cost[3]), 0, 1000000, R_LIVE },
	{ "ratelimit", "app_cost_system_trace", K_U32, OFF(rl.app_cost[4]), 0, 1000000, R_LIVE },
	{ "ratelimit", "system_cost_heap_dump", K_U32, OFF(rl.system_cost[1]), 0, 1000000, R_LIVE },
	{ "ratelimit", "system_cost_heap_profile", K_U32, OFF(rl.system_cost[2]), 0, 1000000, R_LIVE },
	{ "ratelimit", "system_cost_stack_sampling", K_U32, OFF(rl.system_cost[3]), 0, 1000000, R_LIVE },
	{ "ratelimit", "system_cost_system_trace", K_U32, OFF(rl.system_cost[4]), 0, 1000000, R_LIVE },
	{ "ratelimit", "hour_system_cap", K_U32, OFF(rl.win[0].system_cap), 0, 4000000000u, R_LIVE },
	{ "ratelimit", "hour_app_cap", K_U32, OFF(rl.win[0].app_cap), 0, 4000000000u, R_LIVE },
	{ "ratelimit", "day_system_cap", K_U32, OFF(rl.win[1].system_cap), 0, 4000000000u, R_LIVE },
	{ "ratelimit", "day_app_cap", K_U32, OFF(rl.win[1].app_cap), 0, 4000000000u, R_LIVE },
	{ "ratelimit", "week_system_cap", K_U32, OFF(rl.win[2].system_cap), 0, 4000000000u, R_LIVE },
	{ "ratelimit", "week_app_cap", K_U32, OFF(rl.win[2].app_cap), 0, 4000000000u, R_LIVE },
	{ "ratelimit", "exempt_app", K_STR_APP, OFF(rl.exempt_app), 0, 0, R_LIVE },
	{ "ratelimit", "sync_full", K_BOOL, OFF(rl.sync_full), 0, 0, R_RESTART },
	{ "redact", "redactor", K_STR_PATH, OFF(redactor), 0, 0, R_RESTART },
	{ "redact", "user", K_STR_USER, OFF(redact_user), 0, 0, R_RESTART },
	{ "redact", "timeout_ms", K_MS, OFF(redact_timeout_ms), 100, 3600000, R_LIVE },
	{ "redact", "max_memory_bytes", K_U64, OFF(redact_max_memory), 16ull << 20, 1ull << 40, R_LIVE },
	{ "redact", "keep_failed_raw", K_BOOL, OFF(keep_failed_raw), 0, 0, R_LIVE },
	{ "dlp", "builtin", K_BOOL, OFF(dlp_builtin), 0, 0, R_LIVE },
	{ "jvm", "agent", K_STR_PATH, OFF(jvm_agent), 0, 0, R_RESTART },
	{ "jvm", "attach_timeout_ms", K_MS, OFF(jvm_attach_timeout_ms), 1000, 3600000, R_LIVE },
	{ "jvm", "heap_dump_via_agent", K_BOOL, OFF(jvm_dump_via_agent), 0, 0, R_LIVE },
	{ "capture", "method_events", K_BOOL, OFF(method_events), 0, 0, R_LIVE },
	{ "capture", "method_budget_us", K_U32, OFF(method_budget_us), 0, SVC_METHOD_BUDGET_MAX_US,
	  R_LIVE },
	{ "memory", "available_percent", K_U32, OFF(mem_available_percent), 0, 50, R_RESTART },
	{ "memory", "stall_percent", K_U32, OFF(mem_stall_percent), 0, 100, R_RESTART },
	{ "cpu", "perf_events", K_BOOL, OFF(cpu_perf_events), 0, 0, R_RESTART },
	{ "results", "retention_days", K_U32, OFF(retention_days), 1, 3650, R_LIVE },
	{ "results", "delivery_attempts", K_U32, OFF(delivery_attempts), 1, 100, R_LIVE },
	{ "results", "delivery_max_age_days", K_U32, OFF(delivery_max_age_days), 1, 3650, R_LIVE },
	{ "daemon", "control_socket", K_STR_SUN, OFF(control_socket), 0, 0, R_RESTART },
	{ "limits", "max_control_clients", K_U32, OFF(max_ctl_clients), 1, 4096, R_RESTART },
	{ "limits", "max_control_per_uid", K_U32, OFF(max_ctl_per_uid), 1, 4096, R_RESTART },
	/* The ring is set up once at start (svc_helper), so only the share
	 * a request may take changes on a reload. */
	{ "trace", "background", K_BOOL, OFF(trace_bg), 0, 0, R_RESTART },
	{ "trace", "background_buffer_kb", K_U32, OFF(trace_bg_buffer_kb), SVC_BUFFER_KB_MIN,
	  SVC_BUFFER_KB_MAX, R_RESTART },
	{ "trace", "background_max_s", K_U32, OFF(trace_bg_max_s), 1, SVC_TRACE_BG_MAX_S, R_LIVE },
};

void svc_config_defaults(struct svc_config *c)
{
	memset(c, 0, sizeof(*c));
	util_strlcpy(c->state_dir, "/var/lib/profilingd", sizeof(c->state_dir));
	util_strlcpy(c->client_socket, "/run/profilingd/client.sock", sizeof(c->client_socket));
	util_strlcpy(c->runtime_socket, "/run/profilingd/runtime.sock", sizeof(c->runtime_socket));
	c->log_level = LOG_INFO;
	c->max_clients = 1024;
	c->max_clients_per_uid = 64;
	c->max_runtimes = 1024;
	c->max_runtimes_per_uid = 64;
	c->hello_timeout_ms = 5000;
	c->max_pids_per_uid = 256;
	c->max_queued_msgs = 64;
	c->max_sessions = 16;
	c->max_result_bytes = 256ull << 20;
	c->default_duration_ms = 10000;
	c->default_frequency_hz = 100;
	c->deadline_grace_ms = 5000;
	c->runtime_wait_ms = 2000;
	c->method_events = true;
	c->method_budget_us = 50;
	c->max_app_result_bytes = 512ull << 20;
	c->max_total_result_bytes = 2048ull << 20;
	c->min_free_bytes = 64ull << 20;
	rl_config_defaults(&c->rl);
	util_strlcpy(c->redact_user, SVC_REDACT_USER, sizeof(c->redact_user));
	c->redact_timeout_ms = 60000;
	c->jvm_attach_timeout_ms = 120000;
	c->redact_max_memory = 1024ull << 20;
	c->mem_available_percent = 5;
	c->mem_stall_percent = 10;
	c->cpu_perf_events = true;
	c->retention_days = 14;
	c->delivery_attempts = 3;
	c->delivery_max_age_days = 7;
	c->max_ctl_clients = 32;
	c->max_ctl_per_uid = 4;
	c->trace_bg_buffer_kb = 4096;
	c->trace_bg_max_s = 30;
}

void svc_config_free(struct svc_config *c)
{
	if (!c)
		return;
	free(c->apps);
	c->apps = NULL;
	c->napps = 0;
}

const char *svc_config_app_id(const struct svc_config *c, const char *exe)
{
	for (unsigned i = 0; exe && i < c->napps; i++)
		if (strcmp(c->apps[i].exe, exe) == 0)
			return c->apps[i].id;
	return NULL;
}

/* [apps] "<executable> = <id>": ids are [A-Za-z0-9._-], 1..127 bytes. */
static int add_app(struct svc_config *c, const char *exe, const char *id)
{
	size_t n = strlen(id);
	if (exe[0] != '/' || n == 0 || n >= sizeof(c->apps[0].id) ||
	    strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != n)
		return -EINVAL;
	if (c->napps == SVC_MAX_APP_MAP)
		return -ENOSPC;
	if (!c->apps && !(c->apps = calloc(SVC_MAX_APP_MAP, sizeof(*c->apps))))
		return -ENOMEM;
	if (util_strlcpy(c->apps[c->napps].exe, exe, sizeof(c->apps[0].exe)) >= sizeof(c->apps[0].exe))
		return -ENAMETOOLONG;
	util_strlcpy(c->apps[c->napps].id, id, sizeof(c->apps[0].id));
	c->napps++;
	return 0;
}

struct parse_ctx {
	struct svc_config *cfg;
	int err;
	char *msg; /* the first error, for "FILE:LINE: msg" */
	size_t msgn;
};

/* Record the first error only: inih reports the line of the first one. */
__attribute__((format(printf, 3, 4)))
static void perr(struct parse_ctx *pc, int err, const char *fmt, ...)
{
	if (pc->err)
		return;
	pc->err = err;
	if (pc->msg && pc->msgn) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(pc->msg, pc->msgn, fmt, ap);
		va_end(ap);
	}
}

/* The config's booleans: true/yes/on/1, false/no/off/0. 0 or -EINVAL. */
static int parse_bool(const char *v, bool *out)
{
	if (!strcmp(v, "true") || !strcmp(v, "yes") || !strcmp(v, "on") || !strcmp(v, "1"))
		*out = true;
	else if (!strcmp(v, "false") || !strcmp(v, "no") || !strcmp(v, "off") || !strcmp(v, "0"))
		*out = false;
	else
		return -EINVAL;
	return 0;
}

static int set_key(struct svc_config *cfg, const struct key *k, const char *v)
{
	char *p = (char *)cfg + k->off;
	char *end;
	unsigned long long n;

	switch (k->kind) {
	case K_STR_PATH:
		return util_strlcpy(p, v, SVC_PATH_MAX) >= SVC_PATH_MAX ? -ENAMETOOLONG : 0;
	case K_STR_SUN:
		return util_strlcpy(p, v, SVC_SUN_MAX) >= SVC_SUN_MAX ? -ENAMETOOLONG : 0;
	case K_STR_APP:
		return util_strlcpy(p, v, RL_APP_MAX) >= RL_APP_MAX ? -ENAMETOOLONG : 0;
	case K_STR_USER:
		return util_strlcpy(p, v, 64) >= 64 ? -ENAMETOOLONG : 0;
	case K_BOOL:
		return parse_bool(v, (bool *)p);
	case K_LEVEL: {
		int l = log_level_parse(v);
		if (l < 0)
			return -EINVAL;
		*(int *)p = l;
		return 0;
	}
	case K_MS: {
		uint64_t ms;
		int r = dur_parse_ms(v, 1, &ms);
		if (r < 0) /* "-5" was "out of range" before units: it still is */
			return r == -EINVAL && v[0] != '-' ? -EINVAL : -ERANGE;
		if (ms < k->min || ms > k->max)
			return -ERANGE;
		*(uint32_t *)p = (uint32_t)ms;
		return 0;
	}
	case K_U32:
	case K_U64:
		errno = 0;
		n = strtoull(v, &end, 10);
		if (errno || end == v || *end || v[0] == '-' || n < k->min || n > k->max)
			return -ERANGE;
		if (k->kind == K_U32)
			*(uint32_t *)p = (uint32_t)n;
		else
			*(uint64_t *)p = n;
		return 0;
	}
	return -EINVAL;
}

/*
 * The Android-parity request parameters of a [trigger.NAME]: 1 set, 0 a bad
 * value, -1 not one of them. Spelled as profctl's --fill and --java-allocs
 * and read back by svc_config_print; Android's name "ring_buffer" is taken
 * too. A switch takes the config's booleans.
 */
static int systrig_parity(struct svc_systrig *t, const char *key, const char *v)
{
	if (!strcmp(key, "buffer_fill_policy")) {
		t->fill_policy = !strcmp(v, "discard") ? PROF_FILL_DISCARD
				 : !strcmp(v, "ring") || !strcmp(v, "ring_buffer") ? PROF_FILL_RING_BUFFER
				 : 0;
		return t->fill_policy != 0;
	}
	if (!strcmp(key, "track_java_allocations")) {
		bool on = false;
		if (parse_bool(v, &on) < 0)
			return 0;
		t->java_allocs = on ? PROF_SWITCH_ON : PROF_SWITCH_OFF;
		return 1;
	}
	return -1;
}

/* [trigger.NAME] key = value: a system trigger (policy/profilingd.conf). */
static int systrig_kv(struct parse_ctx *pc, const char *tname, const char *key, const char *v)
{
	struct svc_config *c = pc->cfg;
	struct svc_systrig *t = NULL;
	for (unsigned i = 0; i < c->nsystrig; i++)
		if (!strcmp(c->systrig[i].name, tname))
			t = &c->systrig[i];
	if (!t) {
		if (c->nsystrig == SVC_MAX_SYSTRIG || !*tname || strlen(tname) >= sizeof(t->name)) {
			perr(pc, -EINVAL, "[trigger.%s]: at most %d system triggers, names of 1..31 bytes",
			     tname, SVC_MAX_SYSTRIG);
			return 0;
		}
		t = &c->systrig[c->nsystrig++];
		memset(t, 0, sizeof(*t));
		util_strlcpy(t->name, tname, sizeof(t->name));
	}
	int ok = 1;
	char *end;
	unsigned long long n = strtoull(v, &end, 10);
	bool num = *v && !*end && v[0] != '-';
	/* Durations: units as in the daemon's keys; a bare number is in the
	 * key's own unit (_ms or _s). A whole number of seconds for _s. */
	uint64_t ms = 0;
	bool is_ms = strlen(key) > 3 && !strcmp(key + strlen(key) - 3, "_ms");
	bool is_s = !is_ms && strlen(key) > 2 && !strcmp(key + strlen(key) - 2, "_s");
	if (is_ms || is_s) {
		num = dur_parse_ms(v, is_ms ? 1 : 1000, &ms) == 0 && (is_ms || ms % 1000 == 0) &&
		      (is_ms ? ms : ms / 1000) <= UINT32_MAX;
		n = is_ms ? ms : ms / 1000;
	}
	int parity = systrig_parity(t, key, v);
	int named = !strcmp(key, "type") ? names_trigger_parse(v)
		    : !strcmp(key, "capture") ? names_type_parse(v) : 0;
	if (parity >= 0)
		ok = parity;
	else if (!strcmp(key, "type"))
		ok = (t->type = named > 0 ? (uint32_t)named : 0) != 0;
	else if (!strcmp(key, "capture"))
		/* Method events need targets, which a trigger does not carry. */
		ok = (t->capture = named > 0 && named != PROF_METHOD_EVENTS ? (uint32_t)named : 0) != 0;
	else if (!strcmp(key, "exe"))
		ok = v[0] == '/' && util_strlcpy(t->exe, v, sizeof(t->exe)) < sizeof(t->exe);
	else if (!strcmp(key, "cgroup"))
		ok = util_strlcpy(t->cgroup, v, sizeof(t->cgroup)) < sizeof(t->cgroup);
	else if (!strcmp(key, "java_main"))
		ok = v[0] && util_strlcpy(t->java_main, v, sizeof(t->java_main)) < sizeof(t->java_main);
	else if (!strcmp(key, "rate_limit_period_s") && num)
		t->period_s = (uint32_t)n;
	else if (!strcmp(key, "cpu_percent") && num)
		t->cpu_percent = (uint32_t)n;
	else if (!strcmp(key, "cpu_window_ms") && num)
		t->cpu_window_ms = (uint32_t)n;
	else if (!strcmp(key, "memory_percent") && num)
		t->memory_percent = (uint32_t)n;
	else if (!strcmp(key, "memory_bytes") && num)
		t->memory_bytes = n;
	else if (!strcmp(key, "timeout_ms") && num)
		t->timeout_ms = (uint32_t)n;
	else if (!strcmp(key, "duration_ms") && num)
		t->duration_ms = (uint32_t)n;
	else if (!strcmp(key, "background_ms") && num && n <= SVC_TRACE_BG_MAX_S * 1000ull)
		t->background_ms = (uint32_t)n;
	else if (!strcmp(key, "format")) {
		int f = names_format_parse(v);
		ok = f >= 0;
		t->format = ok ? (uint32_t)f : 0;
	} else
		ok = 0;
	if (!ok) {
		const char *one_of = !strcmp(key, "type") ? names_trigger_list()
				     : !strcmp(key, "capture") ? names_type_list()
				     : !strcmp(key, "buffer_fill_policy") ? "discard, ring"
				     : !strcmp(key, "track_java_allocations") ? "on, off (or true, false)"
				     : NULL;
		if (one_of)
			perr(pc, -EINVAL, "[trigger.%s] %s = %s: not one of %s", tname, key, v, one_of);
		else
			perr(pc, -EINVAL, "[trigger.%s] %s = %s: unknown key or bad value", tname, key,
			     v);
		return 0;
	}
	return 1;
}

/* [methods.ID] key = value: a method-event config (docs/METHOD_EVENTS.md). */
static int methods_kv(struct parse_ctx *pc, const char *id, const char *key, const char *v)
{
	struct svc_config *c = pc->cfg;
	struct svc_methods_conf *m = NULL;
	for (unsigned i = 0; i < c->nmethods; i++)
		if (!strcmp(c->methods[i].id, id))
			m = &c->methods[i];
	if (!m) {
		if (c->nmethods == SVC_MAX_METHODS_CONF || !*id || strlen(id) >= sizeof(m->id)) {
			perr(pc, -EINVAL, "[methods.%s]: at most %d method-event configs, ids of "
			     "1..32 bytes", id, SVC_MAX_METHODS_CONF);
			return 0;
		}
		m = &c->methods[c->nmethods++];
		memset(m, 0, sizeof(*m));
		util_strlcpy(m->id, id, sizeof(m->id));
	}
	char *end;
	errno = 0;
	unsigned long long n = strtoull(v, &end, 10);
	bool num = *v && !*end && v[0] != '-' && !errno && n <= UINT32_MAX;
	int ok = 1;
	if (!strcmp(key, "exe"))
		ok = v[0] == '/' && util_strlcpy(m->exe, v, sizeof(m->exe)) < sizeof(m->exe);
	else if (!strcmp(key, "method"))
		ok = m->ntargets < SVC_METHOD_TARGETS_MAX &&
		     util_strlcpy(m->targets[m->ntargets], v, sizeof(m->targets[0])) <
			     sizeof(m->targets[0]) && ++m->ntargets;
	else if (!strcmp(key, "version") && num)
		m->version = (uint32_t)n;
	else if (!strcmp(key, "canary_percent") && num && n <= 100)
		m->canary_percent = (uint32_t)n;
	else if (!strcmp(key, "expiry_s") && num && n <= 86400)
		m->expiry_s = (uint32_t)n;
	else if (!strcmp(key, "every") && num)
		m->every = (uint32_t)n;
	else if (!strcmp(key, "max_hits") && num)
		m->max_hits = (uint32_t)n;
	else if (!strcmp(key, "budget_us") && num && n <= SVC_METHOD_BUDGET_MAX_US)
		m->budget_us = (uint32_t)n;
	else
		ok = 0;
	if (!ok) {
		perr(pc, -EINVAL, "[methods.%s] %s = %s: unknown key or bad value (method: at most "
		     "%d, of at most %d bytes)", id, key, v, SVC_METHOD_TARGETS_MAX,
		     SVC_METHOD_CONF_TARGET_LEN - 1);
		return 0;
	}
	return 1;
}

static int on_kv(void *user, const char *section, const char *name, const char *value)
{
	struct parse_ctx *pc = user;
	if (strcmp(section, "apps") == 0) {
		int r = add_app(pc->cfg, name, value);
		if (r < 0) {
			perr(pc, r, "[apps] %s = %s: %s", name, value, r == -EINVAL
			     ? "want an absolute executable path = an id of [A-Za-z0-9._-]"
			     : strerror(-r));
			return 0;
		}
		return 1;
	}
	if (strncmp(section, "trigger.", 8) == 0)
		return systrig_kv(pc, section + 8, name, value);
	if (strncmp(section, "methods.", 8) == 0)
		return methods_kv(pc, section + 8, name, value);
	if (strcmp(section, "sandbox") == 0 && strcmp(name, "seccomp") == 0) {
		static const char *const modes[] = { "enforce", "debug", "off" };
		for (int m = 0; m < 3; m++) {
			if (strcmp(value, modes[m]) == 0) {
				pc->cfg->seccomp_mode = m; /* enum svc_seccomp_mode order */
				return 1;
			}
		}
		LOG_E("[sandbox] seccomp = %s: want enforce, debug or off", value);
		pc->err = -EINVAL;
		return 0;
	}
	if (strcmp(section, "dlp") == 0 && strcmp(name, "pattern") == 0) {
		/* Repeatable: one line per pattern, checked by regcomp at start. */
		if (pc->cfg->ndlp == SVC_MAX_DLP ||
		    util_strlcpy(pc->cfg->dlp[pc->cfg->ndlp], value, sizeof(pc->cfg->dlp[0])) >=
			    sizeof(pc->cfg->dlp[0])) {
			perr(pc, -E2BIG, "[dlp] pattern: at most %d patterns of 255 bytes", SVC_MAX_DLP);
			return 0;
		}
		regex_t re;
		if (regcomp(&re, value, REG_EXTENDED) != 0) {
			perr(pc, -EINVAL, "[dlp] pattern = %s: not a POSIX extended regex", value);
			return 0;
		}
		regfree(&re);
		pc->cfg->ndlp++;
		return 1;
	}
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		if (strcmp(keys[i].section, section) || strcmp(keys[i].name, name))
			continue;
		int r = set_key(pc->cfg, &keys[i], value);
		if (r < 0) {
			if (r == -ERANGE && (keys[i].kind == K_U32 || keys[i].kind == K_U64))
				perr(pc, r, "[%s] %s = %s: out of range (%llu..%llu)", section, name,
				     value, (unsigned long long)keys[i].min,
				     (unsigned long long)keys[i].max);
			else if (keys[i].kind == K_MS)
				perr(pc, r, "[%s] %s = %s: %s (%llums..%llums; units ms, s, m, h; "
				     "a bare number is ms)", section, name, value,
				     r == -ERANGE ? "out of range" : "not a duration",
				     (unsigned long long)keys[i].min, (unsigned long long)keys[i].max);
			else
				perr(pc, r, "[%s] %s = %s: %s", section, name, value,
				     r == -ENAMETOOLONG ? "too long" : "invalid value");
			return 0;
		}
		return 1;
	}
	perr(pc, -EINVAL, "unknown key [%s] %s", section, name);
	return 0;
}

int svc_config_load_msg(struct svc_config *cfg, const char *path, int *line, char *msg, size_t n)
{
	struct parse_ctx pc = { .cfg = cfg, .msg = msg, .msgn = n };
	if (msg && n)
		msg[0] = '\0';
	if (line)
		*line = 0;
	FILE *f = fopen(path, "re");
	if (!f) {
		int r = -errno;
		if (msg && n)
			snprintf(msg, n, "cannot read: %s", strerror(-r));
		return r;
	}
	int r = ini_parse_file(f, on_kv, &pc);
	fclose(f);
	if (line)
		*line = r > 0 ? r : 0;
	if (r == 0)
		return 0;
	if (msg && n && !msg[0])
		snprintf(msg, n, r < 0 ? "cannot read" : "syntax error: want `key = value` or `[section]`");
	return pc.err ? pc.err : (r < 0 ? -EIO : -EINVAL);
}

int svc_config_load(struct svc_config *cfg, const char *path, int *line)
{
	char msg[512];
	int r = svc_config_load_msg(cfg, path, line, msg, sizeof(msg));
	if (r < 0)
		LOG_E("%s:%d: %s", path, line ? *line : 0, msg);
	return r;
}

int svc_config_check(struct svc_config *cfg, char *msg, size_t n)
{
	if (cfg->state_dir[0] != '/') {
		snprintf(msg, n, "[daemon] state_dir = %s: must be an absolute path", cfg->state_dir);
		return -EINVAL;
	}
	if (!cfg->client_socket[0] || !cfg->runtime_socket[0] ||
	    strcmp(cfg->client_socket, cfg->runtime_socket) == 0) {
		snprintf(msg, n, "[daemon] client_socket and runtime_socket must be two different paths");
		return -EINVAL;
	}
	if (!cfg->control_socket[0] &&
	    util_fmt(cfg->control_socket, sizeof(cfg->control_socket), "%s/control.sock",
		     cfg->state_dir) < 0) {
		LOG_E("state_dir too long for <state_dir>/control.sock; set control_socket");
		return -EINVAL;
	}
	if (!strcmp(cfg->control_socket, cfg->client_socket) ||
	    !strcmp(cfg->control_socket, cfg->runtime_socket)) {
		LOG_E("control_socket must differ from client_socket and runtime_socket");
		return -EINVAL;
	}
	if (cfg->max_ctl_per_uid > cfg->max_ctl_clients)
		cfg->max_ctl_per_uid = cfg->max_ctl_clients;
	if (cfg->max_clients_per_uid > cfg->max_clients)
		cfg->max_clients_per_uid = cfg->max_clients;
	if (cfg->max_runtimes_per_uid > cfg->max_runtimes)
		cfg->max_runtimes_per_uid = cfg->max_runtimes;
	for (unsigned i = 0; i < cfg->nsystrig; i++) {
		const struct svc_systrig *t = &cfg->systrig[i];
		if (!t->type || (!t->exe[0] && !t->cgroup[0] && !t->java_main[0])) {
			snprintf(msg, n, "[trigger.%s] needs a type and an exe, cgroup or java_main to match",
				 t->name);
			return -EINVAL;
		}
	}
	for (unsigned i = 0; i < cfg->nmethods; i++)
		if (!cfg->methods[i].exe[0] || !cfg->methods[i].ntargets) {
			snprintf(msg, n, "[methods.%s] needs an exe and at least one method",
				 cfg->methods[i].id);
			return -EINVAL;
		}
	return 0;
}

int svc_config_finish(struct svc_config *cfg)
{
	char msg[512];
	int r = svc_config_check(cfg, msg, sizeof(msg));
	if (r < 0)
		LOG_E("%s", msg);
	return r;
}

/* A key's value as the config file spells it. */
static void key_value(const struct svc_config *cfg, const struct key *k, char *out, size_t n)
{
	const char *p = (const char *)cfg + k->off;
	switch (k->kind) {
	case K_STR_PATH:
	case K_STR_SUN:
	case K_STR_APP:
	case K_STR_USER:
		snprintf(out, n, "%s", p);
		return;
	case K_BOOL:
		snprintf(out, n, "%s", *(const bool *)p ? "true" : "false");
		return;
	case K_LEVEL:
		snprintf(out, n, "%s", log_level_name(*(const int *)p));
		return;
	case K_U32:
	case K_MS: /* in ms, the unit of a bare number: reads back the same */
		snprintf(out, n, "%u", *(const uint32_t *)p);
		return;
	case K_U64:
		snprintf(out, n, "%llu", (unsigned long long)*(const uint64_t *)p);
		return;
	}
	out[0] = '\0';
}

/* Sections in print order; keys print in table order within each. */
static const char *const sections[] = {
	"daemon", "limits", "capture", "ratelimit", "redact", "dlp", "jvm", "memory", "cpu",
	"results", "trace",
};

int svc_config_print(const struct svc_config *cfg, FILE *f)
{
	char v[SVC_PATH_MAX];
	for (size_t s = 0; s < sizeof(sections) / sizeof(sections[0]); s++) {
		fprintf(f, "%s[%s]\n", s ? "\n" : "", sections[s]);
		for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
			if (strcmp(keys[i].section, sections[s]))
				continue;
			key_value(cfg, &keys[i], v, sizeof(v));
			fprintf(f, "%s = %s\n", keys[i].name, v);
		}
		if (!strcmp(sections[s], "dlp"))
			for (unsigned i = 0; i < cfg->ndlp; i++)
				fprintf(f, "pattern = %s\n", cfg->dlp[i]);
	}
	static const char *const modes[] = { "enforce", "debug", "off" };
	if (cfg->seccomp_mode >= 0 && cfg->seccomp_mode < 3)
		fprintf(f, "\n[sandbox]\nseccomp = %s\n", modes[cfg->seccomp_mode]);
	if (cfg->napps) {
		fprintf(f, "\n[apps]\n");
		for (unsigned i = 0; i < cfg->napps; i++)
			fprintf(f, "%s = %s\n", cfg->apps[i].exe, cfg->apps[i].id);
	}
	for (unsigned i = 0; i < cfg->nsystrig; i++) {
		const struct svc_systrig *t = &cfg->systrig[i];
		fprintf(f, "\n[trigger.%s]\n", t->name);
		/* Empty strings and a default capture are left out: they do not parse. */
		if (names_trigger_valid(t->type))
			fprintf(f, "type = %s\n", names_trigger_str(t->type));
		if (names_type_conf(t->capture))
			fprintf(f, "capture = %s\n", names_type_conf(t->capture));
		if (t->exe[0])
			fprintf(f, "exe = %s\n", t->exe);
		if (t->cgroup[0])
			fprintf(f, "cgroup = %s\n", t->cgroup);
		if (t->java_main[0])
			fprintf(f, "java_main = %s\n", t->java_main);
		fprintf(f, "rate_limit_period_s = %u\ncpu_percent = %u\ncpu_window_ms = %u\n"
			"memory_percent = %u\nmemory_bytes = %llu\ntimeout_ms = %u\nduration_ms = %u\n",
			t->period_s, t->cpu_percent, t->cpu_window_ms, t->memory_percent,
			(unsigned long long)t->memory_bytes, t->timeout_ms, t->duration_ms);
		if (t->background_ms)
			fprintf(f, "background_ms = %u\n", t->background_ms);
		if (t->fill_policy)
			fprintf(f, "buffer_fill_policy = %s\n",
				t->fill_policy == PROF_FILL_DISCARD ? "discard" : "ring");
		if (t->java_allocs)
			fprintf(f, "track_java_allocations = %s\n",
				t->java_allocs == PROF_SWITCH_ON ? "on" : "off");
	}
	for (unsigned i = 0; i < cfg->nmethods; i++) {
		const struct svc_methods_conf *m = &cfg->methods[i];
		fprintf(f, "\n[methods.%s]\nexe = %s\n", m->id, m->exe);
		for (unsigned k = 0; k < m->ntargets; k++)
			fprintf(f, "method = %s\n", m->targets[k]);
		fprintf(f, "version = %u\ncanary_percent = %u\nexpiry_s = %u\nevery = %u\n"
			"max_hits = %u\n", m->version, m->canary_percent, m->expiry_s, m->every,
			m->max_hits);
	}
	return ferror(f) ? -EIO : 0;
}

static bool apps_equal(const struct svc_config *a, const struct svc_config *b)
{
	if (a->napps != b->napps)
		return false;
	for (unsigned i = 0; i < a->napps; i++)
		if (strcmp(a->apps[i].exe, b->apps[i].exe) || strcmp(a->apps[i].id, b->apps[i].id))
			return false;
	return true;
}

static bool systrig_equal(const struct svc_config *a, const struct svc_config *b)
{
	if (a->nsystrig != b->nsystrig)
		return false;
	for (unsigned i = 0; i < a->nsystrig; i++)
		if (memcmp(&a->systrig[i], &b->systrig[i], sizeof(a->systrig[i])))
			return false;
	return true;
}

int svc_config_reload(struct svc_config *live, const struct svc_config *next, unsigned *refused)
{
	char ov[SVC_PATH_MAX], nv[SVC_PATH_MAX];
	int changed = 0;
	unsigned nref = 0;

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const struct key *k = &keys[i];
		key_value(live, k, ov, sizeof(ov));
		key_value(next, k, nv, sizeof(nv));
		if (!strcmp(ov, nv))
			continue;
		if (k->reload == R_RESTART) {
			LOG_W("[%s] %s: %s -> %s needs a restart; keeping %s", k->section, k->name,
			      ov, nv, ov);
			nref++;
			continue;
		}
		size_t sz = k->kind == K_STR_PATH ? SVC_PATH_MAX : k->kind == K_STR_SUN ? SVC_SUN_MAX
			  : k->kind == K_STR_APP ? RL_APP_MAX : k->kind == K_STR_USER ? 64
			  : k->kind == K_BOOL ? sizeof(bool) : k->kind == K_U64 ? sizeof(uint64_t)
			  : k->kind == K_LEVEL ? sizeof(int) : sizeof(uint32_t);
		memcpy((char *)live + k->off, (const char *)next + k->off, sz);
		LOG_N("[%s] %s: %s -> %s", k->section, k->name, ov, nv);
		changed++;
	}
	if (live->ndlp != next->ndlp ||
	    memcmp(live->dlp, next->dlp, sizeof(live->dlp[0]) * next->ndlp)) {
		memcpy(live->dlp, next->dlp, sizeof(live->dlp));
		live->ndlp = next->ndlp;
		LOG_N("[dlp] %u pattern(s) now", live->ndlp);
		changed++;
	}
	if (live->seccomp_mode != next->seccomp_mode) {
		LOG_W("[sandbox] seccomp changed: the filter of a running daemon cannot change; "
		      "needs a restart");
		nref++;
	}
	if (!apps_equal(live, next)) {
		LOG_W("[apps] changed: needs a restart; keeping the %u running entries", live->napps);
		nref++;
	}
	if (live->nmethods != next->nmethods ||
	    memcmp(live->methods, next->methods, live->nmethods * sizeof(live->methods[0]))) {
		LOG_W("[methods.*] changed: needs a restart (profctl methods changes them live)");
		nref++;
	}
	if (!systrig_equal(live, next)) {
		LOG_W("[trigger.*] changed: needs a restart; keeping the %u running system triggers",
		      live->nsystrig);
		nref++;
	}
	if (live->max_clients_per_uid > live->max_clients)
		live->max_clients_per_uid = live->max_clients;
	if (live->max_runtimes_per_uid > live->max_runtimes)
		live->max_runtimes_per_uid = live->max_runtimes;
	if (refused)
		*refused = nref;
	return changed;
}

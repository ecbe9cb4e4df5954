/* INI config (libinih). Every key is documented in policy/profilingd.conf. */
#include "svc.h"

#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"

enum key_kind { K_STR_PATH, K_STR_SUN, K_STR_APP, K_STR_USER, K_U32, K_U64, K_LEVEL, K_BOOL };

struct key {
	const char *section, *name;
	enum key_kind kind;
	size_t off;
	uint64_t min, max;
};

#define OFF(f) offsetof(struct svc_config, f)

/* The table is the schema: parse, range checks and docs follow it. */
static const struct key keys[] = {
	{ "daemon", "state_dir", K_STR_PATH, OFF(state_dir), 0, 0 },
	{ "daemon", "client_socket", K_STR_SUN, OFF(client_socket), 0, 0 },
	{ "daemon", "runtime_socket", K_STR_SUN, OFF(runtime_socket), 0, 0 },
	{ "daemon", "log_level", K_LEVEL, OFF(log_level), 0, 0 },
	{ "limits", "max_clients", K_U32, OFF(max_clients), 1, 65536 },
	{ "limits", "max_clients_per_uid", K_U32, OFF(max_clients_per_uid), 1, 65536 },
	{ "limits", "max_runtimes", K_U32, OFF(max_runtimes), 1, 65536 },
	{ "limits", "max_queued_msgs", K_U32, OFF(max_queued_msgs), 4, 4096 },
	{ "limits", "max_sessions", K_U32, OFF(max_sessions), 1, 4096 },
	{ "limits", "max_result_bytes", K_U64, OFF(max_result_bytes), 4096, 1ull << 40 },
	{ "capture", "default_duration_ms", K_U32, OFF(default_duration_ms),
	  SVC_DURATION_MIN_MS, SVC_DURATION_MAX_MS },
	{ "capture", "default_frequency_hz", K_U32, OFF(default_frequency_hz), SVC_HZ_MIN, SVC_HZ_MAX },
	{ "capture", "deadline_grace_ms", K_U32, OFF(deadline_grace_ms), 100, 600000 },
	{ "capture", "runtime_wait_ms", K_U32, OFF(runtime_wait_ms), 0, 60000 },
	{ "limits", "max_app_result_bytes", K_U64, OFF(max_app_result_bytes), 0, 1ull << 50 },
	{ "limits", "max_total_result_bytes", K_U64, OFF(max_total_result_bytes), 0, 1ull << 50 },
	{ "limits", "min_free_bytes", K_U64, OFF(min_free_bytes), 0, 1ull << 50 },
	{ "ratelimit", "app_cost_heap_dump", K_U32, OFF(rl.app_cost[1]), 0, 1000000 },
	{ "ratelimit", "app_cost_heap_profile", K_U32, OFF(rl.app_cost[2]), 0, 1000000 },
	{ "ratelimit", "app_cost_stack_sampling", K_U32, OFF(rl.app_cost[3]), 0, 1000000 },
	{ "ratelimit", "app_cost_system_trace", K_U32, OFF(rl.app_cost[4]), 0, 1000000 },
	{ "ratelimit", "system_cost_heap_dump", K_U32, OFF(rl.system_cost[1]), 0, 1000000 },
	{ "ratelimit", "system_cost_heap_profile", K_U32, OFF(rl.system_cost[2]), 0, 1000000 },
	{ "ratelimit", "system_cost_stack_sampling", K_U32, OFF(rl.system_cost[3]), 0, 1000000 },
	{ "ratelimit", "system_cost_system_trace", K_U32, OFF(rl.system_cost[4]), 0, 1000000 },
	{ "ratelimit", "hour_system_cap", K_U32, OFF(rl.win[0].system_cap), 0, 4000000000u },
	{ "ratelimit", "hour_app_cap", K_U32, OFF(rl.win[0].app_cap), 0, 4000000000u },
	{ "ratelimit", "day_system_cap", K_U32, OFF(rl.win[1].system_cap), 0, 4000000000u },
	{ "ratelimit", "day_app_cap", K_U32, OFF(rl.win[1].app_cap), 0, 4000000000u },
	{ "ratelimit", "week_system_cap", K_U32, OFF(rl.win[2].system_cap), 0, 4000000000u },
	{ "ratelimit", "week_app_cap", K_U32, OFF(rl.win[2].app_cap), 0, 4000000000u },
	{ "ratelimit", "exempt_app", K_STR_APP, OFF(rl.exempt_app), 0, 0 },
	{ "ratelimit", "sync_full", K_BOOL, OFF(rl.sync_full), 0, 0 },
	{ "redact", "redactor", K_STR_PATH, OFF(redactor), 0, 0 },
	{ "redact", "user", K_STR_USER, OFF(redact_user), 0, 0 },
	{ "redact", "timeout_ms", K_U32, OFF(redact_timeout_ms), 100, 3600000 },
	{ "redact", "max_memory_bytes", K_U64, OFF(redact_max_memory), 16ull << 20, 1ull << 40 },
	{ "redact", "keep_failed_raw", K_BOOL, OFF(keep_failed_raw), 0, 0 },
	{ "dlp", "builtin", K_BOOL, OFF(dlp_builtin), 0, 0 },
	{ "results", "retention_days", K_U32, OFF(retention_days), 1, 3650 },
	{ "results", "delivery_attempts", K_U32, OFF(delivery_attempts), 1, 100 },
	{ "results", "delivery_max_age_days", K_U32, OFF(delivery_max_age_days), 1, 3650 },
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
	c->max_queued_msgs = 64;
	c->max_sessions = 16;
	c->max_result_bytes = 256ull << 20;
	c->default_duration_ms = 10000;
	c->default_frequency_hz = 100;
	c->deadline_grace_ms = 5000;
	c->runtime_wait_ms = 2000;
	c->max_app_result_bytes = 512ull << 20;
	c->max_total_result_bytes = 2048ull << 20;
	c->min_free_bytes = 64ull << 20;
	rl_config_defaults(&c->rl);
	util_strlcpy(c->redact_user, "nobody", sizeof(c->redact_user));
	c->redact_timeout_ms = 60000;
	c->redact_max_memory = 1024ull << 20;
	c->retention_days = 14;
	c->delivery_attempts = 3;
	c->delivery_max_age_days = 7;
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
};

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
		if (!strcmp(v, "true") || !strcmp(v, "yes") || !strcmp(v, "1"))
			*(bool *)p = true;
		else if (!strcmp(v, "false") || !strcmp(v, "no") || !strcmp(v, "0"))
			*(bool *)p = false;
		else
			return -EINVAL;
		return 0;
	case K_LEVEL: {
		int l = log_level_parse(v);
		if (l < 0)
			return -EINVAL;
		*(int *)p = l;
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

static const char *const trig_names[] = {
	"", "cold-start", "fully-drawn", "oom", "excessive-cpu", "hang", "crash", "anomaly",
	"pressure-stall",
};
static const char *const capture_names[] = { "", "heapdump", "heap", "stack", "trace" };

static int name_index(const char *const *names, size_t n, const char *v)
{
	for (size_t i = 1; i < n; i++)
		if (!strcmp(names[i], v))
			return (int)i;
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
			LOG_E("[trigger.%s]: at most %d system triggers, names of 1..31 bytes",
			      tname, SVC_MAX_SYSTRIG);
			pc->err = -EINVAL;
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
	if (!strcmp(key, "type"))
		ok = (int)(t->type = (uint32_t)(name_index(trig_names, 9, v) < 0 ? 0
						 : name_index(trig_names, 9, v))) != 0;
	else if (!strcmp(key, "capture"))
		ok = (int)(t->capture = (uint32_t)(name_index(capture_names, 5, v) < 0 ? 0
						    : name_index(capture_names, 5, v))) != 0;
	else if (!strcmp(key, "exe"))
		ok = v[0] == '/' && util_strlcpy(t->exe, v, sizeof(t->exe)) < sizeof(t->exe);
	else if (!strcmp(key, "cgroup"))
		ok = util_strlcpy(t->cgroup, v, sizeof(t->cgroup)) < sizeof(t->cgroup);
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
	else
		ok = 0;
	if (!ok) {
		LOG_E("[trigger.%s] %s = %s: unknown key or bad value", tname, key, v);
		pc->err = -EINVAL;
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
			LOG_E("[apps] %s = %s: %s", name, value, r == -EINVAL
			      ? "want an absolute executable path = an id of [A-Za-z0-9._-]"
			      : strerror(-r));
			pc->err = r;
			return 0;
		}
		return 1;
	}
	if (strncmp(section, "trigger.", 8) == 0)
		return systrig_kv(pc, section + 8, name, value);
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
			LOG_E("[dlp] pattern: at most %d patterns of 255 bytes", SVC_MAX_DLP);
			pc->err = -E2BIG;
			return 0;
		}
		regex_t re;
		if (regcomp(&re, value, REG_EXTENDED) != 0) {
			LOG_E("[dlp] pattern = %s: not a POSIX extended regex", value);
			pc->err = -EINVAL;
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
			LOG_E("[%s] %s = %s: %s", section, name, value,
			      r == -ERANGE ? "out of range" : strerror(-r));
			pc->err = r;
			return 0;
		}
		return 1;
	}
	LOG_E("unknown key [%s] %s", section, name);
	pc->err = -EINVAL;
	return 0;
}

int svc_config_load(struct svc_config *cfg, const char *path, int *line)
{
	struct parse_ctx pc = { .cfg = cfg };
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	int r = ini_parse_file(f, on_kv, &pc);
	fclose(f);
	if (line)
		*line = r;
	if (r != 0)
		return pc.err ? pc.err : -EINVAL;
	return 0;
}

int svc_config_finish(struct svc_config *cfg)
{
	if (cfg->state_dir[0] != '/') {
		LOG_E("state_dir must be an absolute path: %s", cfg->state_dir);
		return -EINVAL;
	}
	if (!cfg->client_socket[0] || !cfg->runtime_socket[0] ||
	    strcmp(cfg->client_socket, cfg->runtime_socket) == 0) {
		LOG_E("client_socket and runtime_socket must be two different paths");
		return -EINVAL;
	}
	if (cfg->max_clients_per_uid > cfg->max_clients)
		cfg->max_clients_per_uid = cfg->max_clients;
	for (unsigned i = 0; i < cfg->nsystrig; i++) {
		const struct svc_systrig *t = &cfg->systrig[i];
		if (!t->type || (!t->exe[0] && !t->cgroup[0])) {
			LOG_E("[trigger.%s] needs a type and an exe or cgroup to match", t->name);
			return -EINVAL;
		}
	}
	return 0;
}

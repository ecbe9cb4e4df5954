/*
 * Admission: the rule order (svc_admit_decide), the cost windows of
 * ratelimit/ (DESIGN §5) and the disk quota. svc_request gathers the
 * snapshot, asks svc_admit_decide, and charges the cost only once every
 * rule has passed, so a refused request costs nothing. svc_admit.h has
 * the contract.
 *
 * The rate-limit store is <state>/ratelimit.db. One that cannot be read
 * fails closed: every request gets RATE_LIMIT_SYSTEM until
 * `profilingd --reset-ratelimit` repairs it (rl logs the file and the fix).
 */
#include "svc_db_result.h"
#include "svc_admit.h"
#include "svc_config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>

#include "jtarget.h"
#include "log.h"
#include "nargs.h"
#include "names.h"
#include "profiling/profiling.h"
#include "util.h"

/* ------------------------------------------------------ the rule order */

/* A parameter: absent or 0 takes the default, else it must be in lo..hi. */
static int check_param(bool has, uint32_t v, uint32_t def, uint32_t lo, uint32_t hi,
		       uint32_t *out)
{
	if (!has || v == 0) {
		*out = def;
		return 0;
	}
	if (v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

int svc_admit_methods(const Pd__Params *p, char *msg, size_t n)
{
	size_t nt = p ? p->n_method_targets : 0;
	if (nt == 0 || nt > SVC_METHOD_TARGETS_MAX) {
		util_fmt(msg, n, "method events need 1..%d method_targets, got %zu",
			 SVC_METHOD_TARGETS_MAX, nt);
		return PROF_E_INVALID_REQUEST;
	}
	for (size_t i = 0; i < nt; i++) {
		const char *t = p->method_targets[i];
		const char *colon = t ? strrchr(t, ':') : NULL;
		if (!t || strlen(t) >= SVC_METHOD_TARGET_LEN) {
			util_fmt(msg, n, "method target %zu: longer than %d bytes", i,
				 SVC_METHOD_TARGET_LEN - 1);
			return PROF_E_INVALID_REQUEST;
		}
		for (const char *c = t; *c; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f) {
				util_fmt(msg, n, "method target %zu: control characters", i);
				return PROF_E_INVALID_REQUEST;
			}
		/* Native arguments: "#args=TYPES" last (common/nargs.c, which
		 * profilingd-perf applies too). */
		char types[NARGS_MAX + 1], awhy[160];
		size_t sl;
		if (!jt_is_java(t) && nargs_split(t, &sl, types, awhy, sizeof(awhy)) < 0) {
			util_fmt(msg, n, "method target '%.64s': %s", t, awhy);
			return PROF_E_INVALID_REQUEST;
		}
		/* By build id: the file the target maps with it, found by the helper. */
		if (!strncmp(t, "buildid:", 8)) {
			size_t hl = strspn(t + 8, "0123456789abcdefABCDEF");
			if (hl < 2 || hl > 128 || hl % 2 || t[8 + hl] != ':' || t[9 + hl] != '+' ||
			    !t[10 + hl]) {
				util_fmt(msg, n, "method target '%.64s': expected buildid:HEX:+0xOFFSET",
					 t);
				return PROF_E_INVALID_REQUEST;
			}
			continue;
		}
		/* JVM targets go to the process's JVMTI agent, native ones to
		 * profilingd-perf: one request is one or the other. */
		if (jt_is_java(t) != jt_is_java(p->method_targets[0])) {
			util_fmt(msg, n, "method targets mix JVM (java:) and native targets: "
				 "one request takes one kind");
			return PROF_E_INVALID_REQUEST;
		}
		if (jt_is_java(t)) {
			struct jt_target jt;
			char why[160];
			if (jt_parse(t, &jt, why, sizeof(why)) < 0) {
				util_fmt(msg, n, "method target '%.64s': %s", t, why);
				return PROF_E_INVALID_REQUEST;
			}
			continue;
		}
		if (t[0] != '/') {
			util_fmt(msg, n, "method target '%.64s': expected /PATH:SYMBOL, "
				 "/PATH:+0xOFFSET, buildid:HEX:+0xOFFSET or "
				 "java:CLASS.METHOD[(DESCRIPTOR)][@LOADER] (docs/METHOD_EVENTS.md)", t);
			return PROF_E_INVALID_REQUEST;
		}
		if (!colon || !colon[1] || strchr(colon + 1, '/')) {
			util_fmt(msg, n, "method target '%.64s': expected /PATH:SYMBOL or "
				 "/PATH:+0xOFFSET", t);
			return PROF_E_INVALID_REQUEST;
		}
	}
	if (p->has_method_every && p->method_every > SVC_METHOD_EVERY_MAX) {
		util_fmt(msg, n, "method_every must be 0..%d", SVC_METHOD_EVERY_MAX);
		return PROF_E_INVALID_REQUEST;
	}
	if (p->has_method_max_hits && p->method_max_hits > SVC_METHOD_MAX_HITS) {
		util_fmt(msg, n, "method_max_hits must be 0..%d", SVC_METHOD_MAX_HITS);
		return PROF_E_INVALID_REQUEST;
	}
	if (p->has_method_budget_us && p->method_budget_us > SVC_METHOD_BUDGET_MAX_US) {
		util_fmt(msg, n, "method_budget_us must be 0..%d", SVC_METHOD_BUDGET_MAX_US);
		return PROF_E_INVALID_REQUEST;
	}
	return 0;
}

static int rule_valid(const struct svc_admit_in *in, struct svc_admit_out *out, char *msg,
		      size_t n)
{
	const Pd__Params *p = in->params;
	if ((in->type < PROF_HEAP_DUMP || in->type > PROF_SYSTEM_TRACE) &&
	    in->type != PROF_METHOD_EVENTS) {
		util_fmt(msg, n, "unknown capture type %u", in->type);
		return PROF_E_INVALID_REQUEST;
	}
	if (in->type == PROF_METHOD_EVENTS && in->methods_off) {
		util_fmt(msg, n, "method events are switched off ([capture] method_events = false)");
		return PROF_E_INVALID_REQUEST;
	}
	if (in->type == PROF_METHOD_EVENTS) {
		int e = svc_admit_methods(p, msg, n);
		if (e)
			return e;
	} else if (p && p->n_method_targets) {
		util_fmt(msg, n, "method_targets are for PROF_METHOD_EVENTS only");
		return PROF_E_INVALID_REQUEST;
	}
	/* Method events run until their config's expiry: up to 24 h. */
	uint32_t dmax = in->type == PROF_METHOD_EVENTS ? SVC_METHOD_DURATION_MAX_MS
		: SVC_DURATION_MAX_MS;
	if (check_param(p && p->has_duration_ms, p ? p->duration_ms : 0, in->default_duration_ms,
			SVC_DURATION_MIN_MS, dmax, &out->duration_ms) < 0) {
		util_fmt(msg, n, "duration_ms must be %u..%u", SVC_DURATION_MIN_MS, dmax);
		return PROF_E_INVALID_REQUEST;
	}
	if (check_param(p && p->has_frequency_hz, p ? p->frequency_hz : 0,
			in->default_frequency_hz, SVC_HZ_MIN, SVC_HZ_MAX, &out->frequency_hz) < 0) {
		util_fmt(msg, n, "frequency_hz must be %u..%u", SVC_HZ_MIN, SVC_HZ_MAX);
		return PROF_E_INVALID_REQUEST;
	}
	if (p && p->has_sampling_interval_bytes &&
	    p->sampling_interval_bytes > SVC_INTERVAL_MAX) {
		util_fmt(msg, n, "sampling_interval_bytes must be 0..%u", SVC_INTERVAL_MAX);
		return PROF_E_INVALID_REQUEST;
	}
	if (p && p->has_buffer_kb && p->buffer_kb &&
	    (p->buffer_kb < SVC_BUFFER_KB_MIN || p->buffer_kb > SVC_BUFFER_KB_MAX)) {
		util_fmt(msg, n, "buffer_kb must be %u..%u", SVC_BUFFER_KB_MIN, SVC_BUFFER_KB_MAX);
		return PROF_E_INVALID_REQUEST;
	}
	/* Enums of profiling.h: a value this daemon does not know is refused,
	 * not taken as the default (docs/ANDROID.md). */
	if (p && ((p->has_clock && p->clock > 1) ||
		  (p->has_buffer_fill_policy && p->buffer_fill_policy > PROF_FILL_RING_BUFFER) ||
		  (p->has_track_java_allocations && p->track_java_allocations > PROF_SWITCH_OFF))) {
		util_fmt(msg, n, "clock must be 0..1, buffer_fill_policy 0..2, "
			 "track_java_allocations 0..2");
		return PROF_E_INVALID_REQUEST;
	}
	/* Checked whether the ring runs or not, so the answer does not
	 * depend on a device's config beyond the documented cap. */
	if (p && p->has_background_ms && p->background_ms > in->background_max_ms) {
		util_fmt(msg, n, "background_ms must be 0..%u ([trace] background_max_s)",
			 in->background_max_ms);
		return PROF_E_INVALID_REQUEST;
	}
	/* Heap formats (issue #20): only the pairs names.c has a row for. */
	if (p && p->has_format && !names_format_valid(in->type, p->format)) {
		util_fmt(msg, n, "format %u is not one of %s's", p->format,
			 names_type_str(in->type));
		return PROF_E_INVALID_REQUEST;
	}
	return 0;
}

static int rule_runtime(const struct svc_admit_in *in, struct svc_admit_out *out, char *msg,
			size_t n)
{
	if (in->gone || in->app_only)
		return 0;
	/* Native method events are probes the daemon sets itself: no runtime. */
	if (in->type == PROF_METHOD_EVENTS)
		return 0;
	if (in->runtime && !(in->runtime_caps & in->type_cap) &&
	    !(in->type == PROF_HEAP_DUMP && in->jvm)) {
		util_fmt(msg, n, "%s", in->type == PROF_HEAP_DUMP
			 ? "this runtime has no heap dump; use PROF_HEAP_PROFILE for native code"
			 : "the runtime of this process cannot take that capture type");
		return PROF_E_INVALID_REQUEST;
	}
	if (in->type == PROF_HEAP_DUMP && !in->runtime && !in->jvm) {
		util_fmt(msg, n, "pid %d is not a JVM: heap dumps are of Java heaps; "
			 "use PROF_HEAP_PROFILE for native code", (int)in->pid);
		return PROF_E_INVALID_REQUEST;
	}
	return 0;
}

static int rule_rate(const struct svc_admit_in *in, struct svc_admit_out *out, char *msg,
		     size_t n)
{
	if (in->rate)
		util_fmt(msg, n, "%s", in->rate_why ? in->rate_why : "rate limited");
	return in->rate;
}

static int rule_sessions(const struct svc_admit_in *in, struct svc_admit_out *out, char *msg,
			 size_t n)
{
	if (in->gone)
		return 0;
	if (in->busy && !in->app_only) {
		util_fmt(msg, n, "session %llu is already capturing pid %d",
			 (unsigned long long)in->busy, (int)in->pid);
		return PROF_E_PROFILING_IN_PROGRESS;
	}
	if (in->nsessions >= in->max_sessions) {
		util_fmt(msg, n, "%u captures running system-wide (max_sessions)", in->nsessions);
		return PROF_E_PROFILING_IN_PROGRESS;
	}
	return 0;
}

static int rule_disk(const struct svc_admit_in *in, struct svc_admit_out *out, char *msg,
		     size_t n)
{
	if (in->disk)
		util_fmt(msg, n, "%s", in->disk_why ? in->disk_why : "no disk space");
	return in->disk;
}

/* DESIGN §2's order; the first refusal wins. */
static int (*const rules[])(const struct svc_admit_in *, struct svc_admit_out *, char *,
			    size_t) = {
	rule_valid, rule_runtime, rule_rate, rule_sessions, rule_disk,
};

int svc_admit_decide(const struct svc_admit_in *in, struct svc_admit_out *out, char *msg,
		     size_t n)
{
	int e;
	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++)
		if ((e = rules[i](in, out, msg, n)) != 0)
			return e;
	return 0;
}

int svc_admit_query(const struct svc_admit_in *in, char *msg, size_t n, bool *waits)
{
	struct svc_admit_out out;
	char other[8];
	int e = svc_admit_decide(in, &out, msg, n);
	/*
	 * Run the same rules once more with the windows' dry run passing: 0
	 * means every other rule passes, so the request waits on the windows
	 * alone (or on nothing). Any other rule's refusal has no time in it.
	 */
	struct svc_admit_in rest = *in;
	rest.rate = 0;
	*waits = svc_admit_decide(&rest, &out, other, sizeof(other)) == 0;
	return e;
}

/* ------------------------------------------------------------ the books */

static struct rl *rl;
static const struct svc_config *cfg;
static uint64_t total_bytes; /* all stored results, kept in step with svc_db */

static int64_t now_ms(void)
{
	return (int64_t)(util_now_ns(CLOCK_REALTIME) / 1000000ull);
}

int svc_admit_init(const struct svc_config *c)
{
	char path[SVC_PATH_MAX + 32];
	int r;

	cfg = c;
	if (util_fmt(path, sizeof(path), "%s/ratelimit.db", cfg->state_dir) < 0)
		return -ENAMETOOLONG;
	if ((r = rl_open(path, &cfg->rl, now_ms(), &rl)) < 0) {
		LOG_E("rate limiter: %s", strerror(-r));
		return r;
	}
	const char *why;
	if (rl_failed(rl, &why))
		LOG_E("rate limiter FAILS CLOSED (%s): every request is refused with "
		      "RATE_LIMIT_SYSTEM until `profilingd --reset-ratelimit` repairs %s", why, path);
	const char *ex = rl_exempt_app(rl);
	if (ex)
		LOG_W("rate limits are OFF for app %s (ratelimit.exempt_app): test setups only", ex);
	if ((r = svc_db_result_bytes(NULL, &total_bytes)) < 0)
		return r;
	return 0;
}

int svc_admit_reconfigure(const struct rl_config *rc)
{
	int r = rl_reconfigure(rl, rc);
	if (r < 0)
		LOG_W("rate limiter keeps its old settings: %s", strerror(-r));
	else if (rl_exempt_app(rl))
		LOG_W("rate limits are OFF for app %s (ratelimit.exempt_app): test setups only",
		      rl_exempt_app(rl));
	return r;
}

void svc_admit_fini(void)
{
	rl_close(rl);
	rl = NULL;
}

static int rl_error(int r, const char *app, char *why, size_t n)
{
	if (r == -PROF_E_RATE_LIMIT_SYSTEM)
		util_fmt(why, n, "%s", rl_failed(rl, NULL)
			 ? "rate-limit store unusable; the daemon fails closed"
			 : "system-wide capture budget used up");
	else if (r == -PROF_E_RATE_LIMIT_PROCESS)
		util_fmt(why, n, "capture budget of %s used up", app);
	else if (r == -PROF_E_NO_DISK_SPACE)
		util_fmt(why, n, "no disk space to record the capture's cost");
	else
		util_fmt(why, n, "rate limiter refused the request");
	return -r;
}

int svc_admit_rate_check(const char *app, uint32_t type, bool system, char *why, size_t n)
{
	int r = rl_check(rl, app, (int)type, system, now_ms());
	return r ? rl_error(r, app, why, n) : 0;
}

int svc_admit_charge(const char *app, uint32_t type, bool system, char *why, size_t n)
{
	int r = rl_admit(rl, app, (int)type, system, now_ms());
	return r ? rl_error(r, app, why, n) : 0;
}

/*
 * Free space, read once per batch or loop turn rather than once per
 * request: statvfs was 4 % of the daemon's time under bench/admission,
 * and 2.5 % more from the refusals of turns without a batch. Outside
 * both every check reads it.
 */
static bool in_batch, in_turn, free_known;
static uint64_t free_bytes;

int svc_admit_batch_begin(void)
{
	in_batch = true;
	free_known = false;
	return rl_batch_begin(rl);
}

void svc_admit_turn_begin(void)
{
	in_turn = true;
}

void svc_admit_turn_end(void)
{
	in_turn = free_known = false;
}

int svc_admit_batch_commit(void)
{
	in_batch = free_known = false;
	return rl_batch_commit(rl);
}

int svc_admit_disk_check(const char *app, char *why, size_t n)
{
	struct statvfs sv;
	uint64_t app_bytes;

	if (!free_known) {
		/* Unreadable: the quota below still applies, as before. */
		free_bytes = statvfs(cfg->state_dir, &sv) == 0
			? (uint64_t)sv.f_bavail * sv.f_frsize : UINT64_MAX;
		free_known = in_batch || in_turn;
	}
	if (free_bytes < cfg->min_free_bytes) {
		util_fmt(why, n, "%s has %llu bytes free, under min_free_bytes", cfg->state_dir,
			 (unsigned long long)free_bytes);
		return PROF_E_NO_DISK_SPACE;
	}
	if (total_bytes >= cfg->max_total_result_bytes) {
		util_fmt(why, n, "stored results reach max_total_result_bytes");
		return PROF_E_NO_DISK_SPACE;
	}
	if (svc_db_result_bytes(app, &app_bytes) < 0) {
		util_fmt(why, n, "cannot read the result index");
		return PROF_E_UNKNOWN;
	}
	if (app_bytes >= cfg->max_app_result_bytes) {
		util_fmt(why, n, "results of %s reach max_app_result_bytes", app);
		return PROF_E_NO_DISK_SPACE;
	}
	return 0;
}

int svc_admit_result_reserve(const char *app, uint64_t size, char *why, size_t n)
{
	uint64_t app_bytes;
	if (svc_db_result_bytes(app, &app_bytes) < 0) {
		util_fmt(why, n, "cannot read the result index");
		return PROF_E_UNKNOWN;
	}
	if (app_bytes + size > cfg->max_app_result_bytes ||
	    total_bytes + size > cfg->max_total_result_bytes) {
		util_fmt(why, n, "a %llu-byte result would exceed the result quota",
			 (unsigned long long)size);
		return PROF_E_NO_DISK_SPACE;
	}
	total_bytes += size;
	return 0;
}

int svc_admit_recount(void)
{
	return svc_db_result_bytes(NULL, &total_bytes);
}

int svc_admit_cost(const char *app, uint32_t type, bool system)
{
	return rl_cost(rl, app, (int)type, system);
}

int svc_admit_next(const char *app, uint32_t type, bool system, int64_t *at_ms)
{
	return rl_next_admit(rl, app, (int)type, system, now_ms(), at_ms);
}

int svc_admit_cooldown_ready(const char *app, uint32_t trigger, uint32_t period_s,
			     int64_t *ready_ms)
{
	int64_t last;
	*ready_ms = 0;
	int r = rl_trigger_last(rl, app, (int)trigger, &last);
	if (r == -ENOENT || (r == 0 && !period_s))
		return 0;
	if (r < 0)
		return r;
	/* As rl_trigger_check: cooling down while last > now - period. */
	int64_t until = last + (int64_t)period_s * 1000;
	if (until > now_ms())
		*ready_ms = until;
	return 0;
}

int64_t svc_admit_now_ms(void)
{
	return now_ms();
}

int svc_admit_usage(const char *app, struct rl_usage out[RL_NWIN])
{
	return rl_usage(rl, app, now_ms(), out);
}

int svc_admit_cooldown_check(const char *app, uint32_t trigger, uint32_t period_s, char *why,
			     size_t n)
{
	int r = rl_trigger_check(rl, app, (int)trigger, period_s, now_ms());
	if (r == -PROF_E_TRIGGER_COOLDOWN)
		util_fmt(why, n, "inside its rate_limit_period_s of %u s", period_s);
	else if (r)
		return rl_error(r, app, why, n);
	return -r;
}

void svc_admit_cooldown_record(const char *app, uint32_t trigger)
{
	int r = rl_trigger_record(rl, app, (int)trigger, now_ms());
	if (r < 0)
		LOG_W("cooldown of %s not recorded: %s", app, strerror(-r));
}

/* The names of the API's values: see names.h. */
#include "names.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sysexits.h>

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/*
 * One row per capture type, indexed by enum prof_type. The parser folds
 * case and '_' (see same()), so the API's enum names HEAP_DUMP and
 * HEAP_PROFILE are the canonical names already; api holds the API's name
 * where it is not.
 */
static const struct type_row {
	const char *name, *conf, *file, *api, *ext, *format, *cap;
} types[] = {
	[PROF_HEAP_DUMP] = { "heap-dump", "heapdump", "heapdump", NULL, "hprof", "hprof",
			     "heap_dump" },
	[PROF_HEAP_PROFILE] = { "heap-profile", "heap", "heapprofile", NULL, "pb.gz", "pprof",
				"heap_profile" },
	[PROF_STACK_SAMPLING] = { "stack", "stack", "stack", "stack-sampling", "pb.gz", "pprof",
				  "stack_sampling" },
	/* Its capability is the runtime's trace ring: no name of the type. */
	[PROF_SYSTEM_TRACE] = { "trace", "trace", "trace", "system-trace", "perfetto-trace",
				"perfetto", "trace_ring" },
};

/* Heap formats (issue #20): the formats beside a type's own. The input
 * the runtime writes stays the type's; the redactor converts. */
static const struct format_row {
	uint32_t type, format;
	const char *name, *redact, *ext;
} formats[] = {
	{ PROF_HEAP_DUMP, PROF_FORMAT_PERFETTO, "perfetto", "heapgraph", "perfetto-trace" },
	{ PROF_HEAP_PROFILE, PROF_FORMAT_PERFETTO, "perfetto", "heapprofile", "perfetto-trace" },
	{ PROF_SYSTEM_TRACE, PROF_FORMAT_PERFETTO, "perfetto", "perfetto", "perfetto-trace" },
	/* Issue #19: native method events; profilingd-perf writes the trace
	 * itself, so the redactor's trace rules filter it (no conversion). */
	{ PROF_METHOD_EVENTS, PROF_FORMAT_PERFETTO, "perfetto", "perfetto", "perfetto-trace" },
};
/*
 * PROF_METHOD_EVENTS is 0x100, past Android's values, so its row is not
 * an index of types[]: row() finds it. Its capability is
 * NAMES_CAP_METHOD_EVENTS.
 */
static const struct type_row method_row = { "methods", "methods", "methods", "method-events",
					    "pb.gz", "pprof", "method_events" };

static const struct type_row *row(uint32_t type)
{
	return type == PROF_METHOD_EVENTS ? &method_row : &types[type];
}

/* Indexed by enum prof_trigger_type. The API's APP_FULLY_DRAWN is the
 * only one whose enum name is not its spelling. */
static const struct trigger_row {
	const char *name;
	const char *api;
} triggers[] = {
	[PROF_TRIGGER_NONE] = { "none", NULL },
	[PROF_TRIGGER_COLD_START] = { "cold-start", NULL },
	[PROF_TRIGGER_APP_FULLY_DRAWN] = { "fully-drawn", "app-fully-drawn" },
	[PROF_TRIGGER_OOM] = { "oom", NULL },
	[PROF_TRIGGER_EXCESSIVE_CPU] = { "excessive-cpu", NULL },
	[PROF_TRIGGER_HANG] = { "hang", NULL },
	[PROF_TRIGGER_CRASH] = { "crash", NULL },
	[PROF_TRIGGER_ANOMALY] = { "anomaly", NULL },
	[PROF_TRIGGER_PRESSURE_STALL] = { "pressure-stall", NULL },
};

static const struct exit_row {
	int code, error;
	const char *what;
} exits[] = {
	{ EX_OK, PROF_E_NONE, "done" },
	{ EX_DATAERR, -1, "malformed input, or nothing of the app in it" },
	{ EX_NOINPUT, -1, "a format cap was hit" },
	{ EX_UNAVAILABLE, PROF_E_RUNTIME_UNAVAILABLE, "the target cannot be reached" },
	{ EX_SOFTWARE, -1, "helper error" },
	{ EX_OSERR, -1, "the spawner could not set up the helper's files" },
	{ EX_OSFILE, -1, "the spawner could not exec the helper" },
	{ EX_CANTCREAT, PROF_E_NO_DISK_SPACE, "the output did not fit" },
	{ EX_IOERR, -1, "the daemon went away" },
	{ EX_NOPERM, -1, "the spawner could not drop privileges" },
};

/* s is name (lower case, '-') when they match with s's case folded and
 * its '_' read as '-'. */
static bool same(const char *s, const char *name)
{
	size_t i = 0;
	for (; s[i] && name[i]; i++) {
		char c = s[i];
		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (c == '_')
			c = '-';
		if (c != name[i])
			return false;
	}
	return !s[i] && !name[i];
}

/* s without a leading prefix (compared as same() does), else s. */
static const char *skip_prefix(const char *s, const char *prefix)
{
	size_t n = strlen(prefix);
	char head[24];
	if (n >= sizeof(head) || strnlen(s, n) < n)
		return s;
	memcpy(head, s, n);
	head[n] = '\0';
	return same(head, prefix) ? s + n : s;
}

bool names_type_valid(uint32_t type)
{
	return (type >= PROF_HEAP_DUMP && type <= PROF_SYSTEM_TRACE) || type == PROF_METHOD_EVENTS;
}

const char *names_type_str(uint32_t type)
{
	return names_type_valid(type) ? row(type)->name : "?";
}

const char *names_type_conf(uint32_t type)
{
	return names_type_valid(type) ? row(type)->conf : NULL;
}

const char *names_type_file(uint32_t type)
{
	return names_type_valid(type) ? row(type)->file : NULL;
}

const char *names_type_ext(uint32_t type)
{
	return names_type_valid(type) ? row(type)->ext : NULL;
}

const char *names_type_format(uint32_t type)
{
	return names_type_valid(type) ? row(type)->format : NULL;
}

int names_type_parse(const char *s)
{
	if (!s)
		return -EINVAL;
	s = skip_prefix(s, "prof-");
	for (uint32_t t = PROF_HEAP_DUMP; t <= PROF_SYSTEM_TRACE + 1; t++) {
		uint32_t type = t <= PROF_SYSTEM_TRACE ? t : PROF_METHOD_EVENTS;
		const struct type_row *r = row(type);
		if (same(s, r->name) || same(s, r->conf) || same(s, r->file) ||
		    (r->api && same(s, r->api)))
			return (int)type;
	}
	return -EINVAL;
}

const char *names_type_list(void)
{
	/* The types a config trigger or profctl request may name: method
	 * events need targets, which neither carries. */
	return "heap-dump, heap-profile, stack, trace";
}

static const struct format_row *format_row(uint32_t type, uint32_t format)
{
	for (size_t i = 0; i < NELEM(formats); i++)
		if (formats[i].type == type && formats[i].format == format)
			return &formats[i];
	return NULL;
}

bool names_format_valid(uint32_t type, uint32_t format)
{
	return names_type_valid(type) && (format == PROF_FORMAT_DEFAULT || format_row(type, format));
}

const char *names_format_str(uint32_t type, uint32_t format)
{
	if (!names_format_valid(type, format))
		return NULL;
	return format ? format_row(type, format)->name : row(type)->format;
}

const char *names_format_redact(uint32_t type, uint32_t format)
{
	if (!names_format_valid(type, format))
		return NULL;
	return format ? format_row(type, format)->redact : row(type)->format;
}

const char *names_format_ext(uint32_t type, uint32_t format)
{
	if (!names_format_valid(type, format))
		return NULL;
	return format ? format_row(type, format)->ext : row(type)->ext;
}

int names_format_parse(const char *s)
{
	if (!s)
		return -EINVAL;
	if (same(s, "default") || same(s, "hprof") || same(s, "pprof"))
		return PROF_FORMAT_DEFAULT;
	if (same(s, "perfetto"))
		return PROF_FORMAT_PERFETTO;
	return -EINVAL;
}

bool names_trigger_valid(uint32_t trigger)
{
	return trigger >= PROF_TRIGGER_COLD_START && trigger <= PROF_TRIGGER_PRESSURE_STALL;
}

const char *names_trigger_str(uint32_t trigger)
{
	return trigger < NELEM(triggers) ? triggers[trigger].name : "?";
}

int names_trigger_parse(const char *s)
{
	if (!s)
		return -EINVAL;
	s = skip_prefix(skip_prefix(s, "prof-"), "trigger-");
	for (uint32_t t = PROF_TRIGGER_COLD_START; names_trigger_valid(t); t++)
		if (same(s, triggers[t].name) || (triggers[t].api && same(s, triggers[t].api)))
			return (int)t;
	return -EINVAL;
}

const char *names_trigger_list(void)
{
	return "cold-start, fully-drawn, oom, excessive-cpu, hang, crash, anomaly, pressure-stall";
}

uint32_t names_cap_bit(uint32_t type)
{
	if (type == PROF_METHOD_EVENTS)
		return NAMES_CAP_METHOD_EVENTS;
	return names_type_valid(type) ? 1u << (type - 1) : 0;
}

const char *names_cap_str(uint32_t bit)
{
	for (uint32_t t = PROF_HEAP_DUMP; t <= PROF_SYSTEM_TRACE; t++)
		if (bit == names_cap_bit(t))
			return types[t].cap;
	if (bit == names_cap_bit(PROF_METHOD_EVENTS))
		return method_row.cap;
	return NULL;
}

uint32_t names_cap_parse(const char *s)
{
	for (uint32_t t = PROF_HEAP_DUMP; s && t <= PROF_SYSTEM_TRACE; t++)
		if (!strcmp(s, types[t].cap))
			return names_cap_bit(t);
	if (s && !strcmp(s, method_row.cap))
		return names_cap_bit(PROF_METHOD_EVENTS);
	return 0;
}

int names_exit_error(int code, int other)
{
	for (size_t i = 0; i < NELEM(exits); i++)
		if (exits[i].code == code)
			return exits[i].error >= 0 ? exits[i].error : other;
	return other;
}

const char *names_exit_str(int code)
{
	for (size_t i = 0; i < NELEM(exits); i++)
		if (exits[i].code == code)
			return exits[i].what;
	return "exit code outside the table";
}

int names_errno_exit(int err)
{
	switch (err < 0 ? -err : err) {
	case EBADMSG:
	case ENODATA:
		return EX_DATAERR;
	case E2BIG:
		return EX_NOINPUT;
	case ENOSPC:
	case EDQUOT:
		return EX_CANTCREAT;
	default:
		return EX_SOFTWARE;
	}
}

int names_errno_error(int err, int other)
{
	switch (err < 0 ? -err : err) {
	case ENOSPC:
	case EDQUOT:
		return PROF_E_NO_DISK_SPACE;
	default:
		return other;
	}
}

/*
 * names: the one place where the names of the API's values are spelled.
 * The daemon, its helpers, the client library and profctl all read them
 * here, so a spelling changes in one table or not at all:
 *
 *   - capture types (enum prof_type): the canonical spelling, the config
 *     file's, the first word of a result's file name, the runtime
 *     capability each one needs, the result format and file extension;
 *   - trigger types (enum prof_trigger_type);
 *   - runtime capabilities (what a RuntimeHello announces) as bits;
 *   - helper exit codes (<sysexits.h> values, one meaning each, shared by
 *     profilingd-redact, -perf, -jattach, -ftrace and the spawner);
 *   - the errno -> PROF_E_* mapping (a full disk is NO_DISK_SPACE
 *     wherever it strikes).
 *
 * Parsing (names_type_parse, names_trigger_parse) accepts every spelling
 * a user has met: today's (profctl's, the config's, the file names') and
 * the API's (PROF_HEAP_PROFILE, HEAP_PROFILE, heap_profile). Case does not
 * matter, '_' and '-' are the same, and a leading "PROF_" (for triggers
 * also "PROF_TRIGGER_") may be given. Capability names come from peers on
 * the wire and are compared exactly. docs/PROTOCOL.md, "Names", has the
 * table users read.
 *
 * Everything here is a pure function over constant tables: no state, no
 * allocation, safe from any thread and from a helper under seccomp.
 * Strings returned are static.
 */
#ifndef PD_NAMES_H
#define PD_NAMES_H

#include <stdbool.h>
#include <stdint.h>

#include "profiling/profiling.h"

/* ------------------------------------------------------- capture types */

/* PROF_HEAP_DUMP .. PROF_SYSTEM_TRACE. */
bool names_type_valid(uint32_t type);
/* The canonical spelling: "heap-dump", "heap-profile", "stack", "trace"
 * (profctl's columns, the daemon's log lines); "?" for any other value. */
const char *names_type_str(uint32_t type);
/* The config file's spelling, which `profilingd --check-config` prints:
 * "heapdump", "heap", "stack", "trace"; NULL for any other value. */
const char *names_type_conf(uint32_t type);
/* The first word of a result file's name (<word>_<tag>_<utc>_<id>.<ext>):
 * "heapdump", "heapprofile", "stack", "trace". Stored results carry it,
 * so it never changes; NULL for any other value. */
const char *names_type_file(uint32_t type);
/* The file extension: "hprof", "pb.gz", "perfetto-trace"; NULL outside. */
const char *names_type_ext(uint32_t type);
/* The artifact format (Result.format, the redactor's --format): "hprof",
 * "pprof", "perfetto"; NULL outside. */
const char *names_type_format(uint32_t type);
/* Any accepted spelling (above) to its enum prof_type, else -EINVAL. */
int names_type_parse(const char *s);
/* "heap-dump, heap-profile, stack, trace": the canonical spellings, for
 * an error message that lists what is valid. */
const char *names_type_list(void);

/* -------------------------------------------- result formats (issue #20) */

/*
 * prof_params.format: PROF_FORMAT_DEFAULT (0, the type's own format) or
 * PROF_FORMAT_PERFETTO. Each (type, format) pair other than the default is
 * a row: its Result.format word, the redactor's --format, the extension.
 */
/* True if type may be asked for in format: the default always (for a
 * valid type); PERFETTO for PROF_HEAP_DUMP, PROF_HEAP_PROFILE and
 * PROF_SYSTEM_TRACE (which already is one). */
bool names_format_valid(uint32_t type, uint32_t format);
/* "hprof", "pprof" or "perfetto" (Result.format); NULL if not valid. */
const char *names_format_str(uint32_t type, uint32_t format);
/* The redactor's --format: "hprof", "pprof", "perfetto", and for the
 * converters "heapgraph" (HPROF in) and "heapprofile" (pprof in). */
const char *names_format_redact(uint32_t type, uint32_t format);
/* The result file's extension; NULL if not valid. */
const char *names_format_ext(uint32_t type, uint32_t format);
/* "hprof", "pprof", "default" -> PROF_FORMAT_DEFAULT; "perfetto" ->
 * PROF_FORMAT_PERFETTO (case folded); else -EINVAL. */
int names_format_parse(const char *s);

/* ------------------------------------------------------- trigger types */

/* PROF_TRIGGER_COLD_START .. PROF_TRIGGER_PRESSURE_STALL (not NONE). */
bool names_trigger_valid(uint32_t trigger);
/* "cold-start", "fully-drawn", "oom", "excessive-cpu", "hang", "crash",
 * "anomaly", "pressure-stall"; "none" for PROF_TRIGGER_NONE, "?" for any
 * other value. */
const char *names_trigger_str(uint32_t trigger);
/* A trigger's accepted spelling to its enum prof_trigger_type (1..8),
 * else -EINVAL. "none" is refused: it is no trigger one can register. */
int names_trigger_parse(const char *s);
/* The canonical spellings, comma separated, for error messages. */
const char *names_trigger_list(void);

/* --------------------------------------------------------- capabilities */

/*
 * What a runtime announces it can capture. A capture type needs exactly
 * one capability; its bit is 1 << (type - 1), so a set of them fits the
 * bits below.
 */
#define NAMES_CAP_HEAP_DUMP      (1u << (PROF_HEAP_DUMP - 1))
#define NAMES_CAP_HEAP_PROFILE   (1u << (PROF_HEAP_PROFILE - 1))
#define NAMES_CAP_STACK_SAMPLING (1u << (PROF_STACK_SAMPLING - 1))
#define NAMES_CAP_TRACE_RING     (1u << (PROF_SYSTEM_TRACE - 1))
#define NAMES_CAP_ALL            0xfu
/* PROF_METHOD_EVENTS (0x100, no index): the bit after the four above; not
 * in NAMES_CAP_ALL, which is the runtimes' stack-and-heap set. */
#define NAMES_CAP_METHOD_EVENTS  (1u << 4)

/* The capability bit a capture type needs; 0 for an invalid type. */
uint32_t names_cap_bit(uint32_t type);
/* Its name on the wire: "heap_dump", "heap_profile", "stack_sampling",
 * "trace_ring"; NULL for anything but one bit of NAMES_CAP_ALL. */
const char *names_cap_str(uint32_t bit);
/* The bit of a name a runtime sent (exact match); 0 for an unknown name,
 * which the daemon ignores (a newer runtime may announce more). */
uint32_t names_cap_parse(const char *s);

/* ------------------------------------------------- helper exit codes */

/*
 * The helpers exit with <sysexits.h> codes, each with one meaning:
 *   0  EX_OK           done
 *   65 EX_DATAERR      the input is malformed or holds nothing of the app
 *                      (redactor), nothing was sampled (perf)
 *   66 EX_NOINPUT      the redactor hit a format cap
 *   69 EX_UNAVAILABLE  the target cannot be reached: no tracefs, a JVM
 *                      that does not attach
 *   70 EX_SOFTWARE     anything else (usage, sandbox, I/O)
 *   71 EX_OSERR        the spawner could not set up the helper's fds
 *   72 EX_OSFILE       the spawner could not exec the helper
 *   73 EX_CANTCREAT    the output did not fit (ENOSPC, EDQUOT)
 *   74 EX_IOERR        the spawner's parent (the daemon) went away
 *   77 EX_NOPERM       the spawner could not drop the redactor's privileges
 * This header does not include <sysexits.h> (profctl has exit codes of its
 * own under EX_ names); a helper includes it.
 */

/* The PROF_E_* a capture gets for a helper's exit code: EX_CANTCREAT is
 * NO_DISK_SPACE, EX_UNAVAILABLE is RUNTIME_UNAVAILABLE, 0 is PROF_E_NONE;
 * any other code gives other. */
int names_exit_error(int code, int other);
/* The meaning of a helper's exit code in a few words, for log lines;
 * "exit code outside the table" for any other. */
const char *names_exit_str(int code);
/* The exit code a helper gives for an errno (sign ignored): EBADMSG,
 * ENODATA EX_DATAERR; E2BIG EX_NOINPUT; ENOSPC, EDQUOT EX_CANTCREAT;
 * others EX_SOFTWARE. */
int names_errno_exit(int err);

/* ------------------------------------------------------ errno mapping */

/* The PROF_E_* for an errno (sign ignored) that ended a capture: ENOSPC
 * and EDQUOT are PROF_E_NO_DISK_SPACE; any other gives other. */
int names_errno_error(int err, int other);

#endif

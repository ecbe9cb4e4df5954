/*
 * Native method-event arguments (docs/METHOD_EVENTS.md, "Native
 * arguments"): the "#args=TYPES" suffix of a native target's spelling,
 * parsed the same way by the daemon's admission (svc_admit_methods) and by
 * profilingd-perf, and the text rules for a string read from the target.
 *
 * TYPES is 1..NARGS_MAX letters, one per SysV x86-64 integer argument
 * register in order (rdi, rsi, rdx, rcx, r8, r9): 'i' signed 64-bit, 'u'
 * unsigned, 'p' pointer (hex), 's' a NUL-terminated string of the target's
 * memory (at most NARGS_STR_MAX bytes), '-' skipped. No suffix: no
 * arguments (the default).
 */
#ifndef PD_NARGS_H
#define PD_NARGS_H

#include <stddef.h>

#define NARGS_MAX     6
#define NARGS_STR_MAX 64
#define NARGS_SUFFIX  "#args"

/*
 * Split target t at its arguments suffix: *speclen is the length of the
 * target without it (strlen(t) when there is none) and types (>= NARGS_MAX
 * + 1 bytes) the TYPES letters, "" for none. The suffix is the last '#' of
 * t when what follows starts with "args"; a '#' followed by anything else
 * is part of the path. 0, or -EINVAL with the reason in why (a suffix
 * without "=TYPES", an empty, too long or unknown TYPES, a TYPES of only
 * '-').
 */
int nargs_split(const char *t, size_t *speclen, char *types, char *why, size_t whylen);

/*
 * A string argument as written: the bytes up to the first NUL of
 * in[0..n) (n <= NARGS_STR_MAX), with every byte that is not part of valid
 * UTF-8 (RFC 3629: no overlongs, surrogates or code points past U+10FFFF)
 * replaced by '?'. out holds NARGS_STR_MAX + 1 bytes; returns the length.
 */
size_t nargs_clean_str(const char *in, size_t n, char *out);

#endif

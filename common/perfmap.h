/*
 * JIT symbol maps: /tmp/perf-<pid>.map, the file that programs with a JIT
 * publish for perf (Node --perf-basic-prof, Python 3.12+ -X perf, Java
 * with a perf-map agent, .NET DOTNET_PerfMapEnabled). One entry a line:
 *
 *   START SIZE name\n      START and SIZE in hex, with or without 0x
 *
 * The file is the target's word, and /tmp is anyone's: it is untrusted
 * input. pmap_load() opens it without following links and without
 * blocking, and takes it only when it is a regular file owned by the
 * expected uid (whoever else made it there cannot name the target's
 * frames). pmap_parse() is the one parser (the fuzz target calls it).
 *
 * Caps: PMAP_MAX_BYTES read (the rest is ignored, counted in truncated),
 * PMAP_MAX_ENTRIES entries (later lines ignored, counted), names of at most
 * PMAP_MAX_NAME bytes (longer ones cut). A malformed line (bad hex, size 0,
 * an end past 2^64, no name) is skipped and counted in bad.
 *
 * Lookups: an address is named by the entry with the greatest start at or
 * below it that still covers it. Code a JIT re-emits at the same start is
 * named by the last entry for that start (the file is appended to).
 */
#ifndef PD_PERFMAP_H
#define PD_PERFMAP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PMAP_MAX_BYTES   (64u << 20)  /* 64 MiB of map file */
#define PMAP_MAX_ENTRIES (1u << 20)   /* 1M entries */
#define PMAP_MAX_NAME    1024

struct pmap;

struct pmap_stats {
	uint32_t entries;   /* kept, after duplicates of a start are folded */
	uint32_t bad;       /* malformed lines skipped */
	uint32_t dropped;   /* lines past PMAP_MAX_ENTRIES */
	uint32_t truncated; /* 1 if the file was longer than PMAP_MAX_BYTES */
};

/* Parse buf[0..len) (no NUL needed). 0, -ENOMEM, or -E2BIG if len > PMAP_MAX_BYTES. */
int pmap_parse(const char *buf, size_t len, struct pmap **out);
/*
 * Read /tmp/perf-<pid>.map if it is a regular file owned by owner. 0,
 * -ENOENT (none), -EPERM (another owner, or not a regular file), -ENOMEM,
 * or another -errno from open/read.
 */
int pmap_load(pid_t pid, uid_t owner, struct pmap **out);
/* Name of addr, or NULL. *start (may be NULL) gets the entry's start. */
const char *pmap_lookup(const struct pmap *m, uint64_t addr, uint64_t *start);
void pmap_get_stats(const struct pmap *m, struct pmap_stats *st);
void pmap_free(struct pmap *m);

#endif

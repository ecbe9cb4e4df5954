/*
 * profctl's result readers and renderers (pctl_*): a stack profile model
 * read from a pprof result (gzip'd or not) or from a Perfetto trace's
 * slices, and the views of it: a pprof-style top table, Brendan Gregg's
 * collapsed stacks and an interactive SVG flame graph.
 *
 * The readers take untrusted bytes (tests/fuzz/fuzz_pprof_read.c). Caps:
 *   PCTL_MAX_FILE bytes of input, PCTL_MAX_RAW bytes after gunzip: past
 *     either the read fails with -EFBIG;
 *   PCTL_MAX_DEPTH frames per stack: deeper stacks keep their leaf-most
 *     frames and are counted in `truncated`;
 *   PCTL_MAX_NODES flame graph nodes: past it, -E2BIG.
 */
#ifndef PD_PCTL_H
#define PD_PCTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define PCTL_MAX_FILE (256u << 20)
#define PCTL_MAX_RAW  (512u << 20)
#define PCTL_MAX_DEPTH 512
#define PCTL_MAX_NODES (1u << 22)

struct pctl_stack {
	size_t off;           /* into frames[]; root first */
	uint32_t n;
	int64_t value;
};

struct pctl_profile {
	char **names;         /* interned, unique */
	size_t nnames, cap_names;
	uint32_t *hash;       /* open addressing over names, 0 = empty */
	size_t hash_cap;
	uint32_t *frames;
	size_t nframes, cap_frames;
	struct pctl_stack *stacks;
	size_t nstacks, cap_stacks;
	char sample_type[64]; /* e.g. "cpu", "samples", "wall" */
	char unit[32];        /* e.g. "nanoseconds", "count", "bytes" */
	int64_t total;        /* sum of the values (positive ones) */
	uint64_t truncated;   /* stacks cut at PCTL_MAX_DEPTH */
};

void pctl_profile_free(struct pctl_profile *p);
/* Intern a name; returns its index, or -ENOMEM. */
int64_t pctl_intern(struct pctl_profile *p, const char *s, size_t len);
/* Add a stack (root first) with a value. 0 or -ENOMEM. */
int pctl_add_stack(struct pctl_profile *p, const uint32_t *frames, uint32_t n, int64_t value);

/* Read a whole fd (a result), at most PCTL_MAX_FILE. 0 or -errno. */
int pctl_read_fd(int fd, uint8_t **buf, size_t *len);
/*
 * A pprof profile (gzip'd or plain) to stacks of its default sample type
 * (default_sample_type, else the last, as go tool pprof does). 0, or
 * -errno with err[n] naming the problem.
 */
int pctl_pprof_read(const uint8_t *buf, size_t len, struct pctl_profile **out, char *err,
		    size_t n);
/*
 * A Perfetto trace's TrackEvent slices to stacks: each slice's self time
 * (nanoseconds) under its enclosing slices on the same track.
 */
int pctl_trace_read(const uint8_t *buf, size_t len, struct pctl_profile **out, char *err,
		    size_t n);

struct pctl_top_row {
	uint32_t name;
	int64_t flat, cum;
};
/* Per function: flat (leaf) and cum (anywhere in the stack, once per
 * stack), sorted by flat then cum, descending. Caller frees *rows. */
int pctl_top(const struct pctl_profile *p, struct pctl_top_row **rows, size_t *n);
/* "a;b;c N" per distinct stack, in input order. 0 or -errno. */
int pctl_collapsed(const struct pctl_profile *p, FILE *out);
/* A self-contained SVG flame graph (click to zoom, hover for details). */
int pctl_flame_svg(const struct pctl_profile *p, const char *title, FILE *out,
		   size_t *nframes);
/* A value in the profile's unit, readable ("1.25s", "3.2MB", "120"). */
void pctl_fmt_value(const struct pctl_profile *p, int64_t v, char *out, size_t n);

#endif

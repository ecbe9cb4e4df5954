/*
 * Address symbolisation for the agent, after a capture (never in a signal
 * handler): libdw over the process's own modules (.symtab and DWARF lines,
 * so static functions of an executable are named; line numbers only from a
 * module that carries its own .debug_line, never from a separate debug
 * file, whose compressed DWARF cost most of a capture's CPU), dladdr as
 * the fallback,
 * and for code in no mapped file a JIT's /tmp/perf-<pid>.map (common/
 * perfmap.h: read at sym_open, only when the process's own user owns it).
 */
#ifndef PD_SYMBOLIZE_H
#define PD_SYMBOLIZE_H

#include <stdbool.h>
#include <stdint.h>

struct sym_ctx;

struct sym_module {
	uint64_t start, limit;
	const char *file;      /* never NULL */
	const char *build_id;  /* hex, or NULL */
};

struct sym_frame {
	const char *function;  /* NULL when unknown */
	const char *file;      /* source file, or NULL */
	int line;              /* 0 when unknown */
	int module;            /* index for sym_module_get, or -1 */
};

int sym_open(int pid, struct sym_ctx **out);
void sym_close(struct sym_ctx *s);
/* Strings stay valid until sym_close. */
int sym_lookup(struct sym_ctx *s, uint64_t pc, struct sym_frame *out);
int sym_module_count(struct sym_ctx *s);
int sym_module_get(struct sym_ctx *s, int idx, struct sym_module *out);

struct pp_builder;

/*
 * pprof glue shared by the stack sampler and the heap profiler: mapids
 * (SYM_MAX_MODULES entries, zeroed) remembers each module's mapping id.
 */
#define SYM_MAX_MODULES 4096
/* Add module's mapping once. */
int sym_pprof_mapping(struct pp_builder *b, struct sym_ctx *s, uint64_t *mapids, int module,
		      bool has_lines);
/* The location of pc, its function and mapping added on first sight;
 * an unknown function is named by its address. */
int sym_pprof_location(struct pp_builder *b, struct sym_ctx *s, uint64_t *mapids, uint64_t pc,
		       uint64_t *loc);

#endif

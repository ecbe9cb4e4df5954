/*
 * abi: the caller's prof_params / prof_trigger, of whatever size or layout
 * it was built with, into the library's own (docs/ABI.md).
 *
 * Contract: pabi_params and pabi_trigger take a size-prefixed struct of
 * the caller's sizeof, copy the part the library knows into *out and zero
 * the rest (zero is every field's default). They return -PROF_E_INVALID_REQUEST
 * when size is below the size field itself, above PABI_MAX_SIZE, or covers
 * a field this library does not know that is not zero. pabi_*_v1 convert
 * the first header's layouts (no size field), for the PROFILING_1.0
 * entry points. Pure functions: no I/O, no allocation, no state.
 */
#ifndef PD_CLIENT_ABI_H
#define PD_CLIENT_ABI_H

#include <stdint.h>

#include "profiling/profiling.h"

/* A struct claims at most this many bytes: the unknown tail is read to
 * check it is zero, so its length is bounded. */
#define PABI_MAX_SIZE 4096

/* The layouts of the first header (tests/abi/v1/profiling.h). */
struct pabi_params_v1 {
	uint32_t duration_ms;
	uint32_t frequency_hz;
	uint32_t sampling_interval_bytes;
	uint32_t buffer_kb;
	uint32_t target_pid;
	uint32_t clock;
};

struct pabi_trigger_v1 {
	enum prof_trigger_type type;
	enum prof_type capture;
	struct pabi_params_v1 params;
	uint32_t rate_limit_period_s;
	uint32_t cpu_percent;
	uint32_t cpu_window_ms;
	uint64_t memory_bytes;
	uint32_t memory_percent;
	uint32_t hang_timeout_ms;
	uint32_t timeout_ms;
	enum prof_psi_resource psi_resource;
	uint32_t psi_stall_us;
	uint32_t psi_window_ms;
};

int pabi_params(struct prof_params *out, const struct prof_params *in);
/* out->params is left pointing at the caller's params: pass it to
 * pabi_params before reading it. */
int pabi_trigger(struct prof_trigger *out, const struct prof_trigger *in);
void pabi_params_v1(struct prof_params *out, const struct pabi_params_v1 *in);
/* out->params points at *params_out, filled from in->params. */
void pabi_trigger_v1(struct prof_trigger *out, struct prof_params *params_out,
		     const struct pabi_trigger_v1 *in);

#endif

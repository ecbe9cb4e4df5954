/* abi: caller structs of any size into the library's own (abi.h). */
#include "abi.h"

#include <stddef.h>
#include <string.h>

/*
 * Linux's copy_struct_from_user rule: a shorter struct is zero-extended,
 * a longer one must be zero where this library has no field, so a program
 * that sets a newer field is refused instead of silently ignored.
 */
static int pabi_copy(void *out, size_t out_size, const void *in, uint32_t in_size)
{
	const unsigned char *b = in;

	if (in_size < sizeof(uint32_t) || in_size > PABI_MAX_SIZE)
		return -PROF_E_INVALID_REQUEST;
	for (size_t i = out_size; i < in_size; i++)
		if (b[i])
			return -PROF_E_INVALID_REQUEST;
	memset(out, 0, out_size);
	memcpy(out, in, in_size < out_size ? in_size : out_size);
	return 0;
}

int pabi_params(struct prof_params *out, const struct prof_params *in)
{
	if (!out || !in)
		return -PROF_E_INVALID_REQUEST;
	int r = pabi_copy(out, sizeof(*out), in, in->size);
	if (r == 0)
		out->size = sizeof(*out);
	return r;
}

int pabi_trigger(struct prof_trigger *out, const struct prof_trigger *in)
{
	if (!out || !in)
		return -PROF_E_INVALID_REQUEST;
	int r = pabi_copy(out, sizeof(*out), in, in->size);
	if (r == 0)
		out->size = sizeof(*out);
	return r;
}

void pabi_params_v1(struct prof_params *out, const struct pabi_params_v1 *in)
{
	memset(out, 0, sizeof(*out));
	out->size = sizeof(*out);
	if (!in)
		return;
	out->duration_ms = in->duration_ms;
	out->frequency_hz = in->frequency_hz;
	out->sampling_interval_bytes = in->sampling_interval_bytes;
	out->buffer_kb = in->buffer_kb;
	out->target_pid = in->target_pid;
	out->clock = in->clock;
}

void pabi_trigger_v1(struct prof_trigger *out, struct prof_params *params_out,
		     const struct pabi_trigger_v1 *in)
{
	memset(out, 0, sizeof(*out));
	out->size = sizeof(*out);
	pabi_params_v1(params_out, in ? &in->params : NULL);
	out->params = params_out;
	if (!in)
		return;
	out->type = in->type;
	out->capture = in->capture;
	out->rate_limit_period_s = in->rate_limit_period_s;
	out->cpu_percent = in->cpu_percent;
	out->cpu_window_ms = in->cpu_window_ms;
	out->memory_bytes = in->memory_bytes;
	out->memory_percent = in->memory_percent;
	out->hang_timeout_ms = in->hang_timeout_ms;
	out->timeout_ms = in->timeout_ms;
	out->psi_resource = in->psi_resource;
	out->psi_stall_us = in->psi_stall_us;
	out->psi_window_ms = in->psi_window_ms;
}

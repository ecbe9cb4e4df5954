/*
 * libFuzzer: profilingd-perf's reader of a perf ring (runtime/perf/
 * pf_events.c: record walk, PERF_RECORD_SAMPLE parser) and the frame-pointer
 * callchain filter (pf_unwind_fp). The records are the kernel's, but their
 * callchain, registers and stack copy are the sampled process's bytes, and
 * a corrupt ring must not be trusted either.
 *
 * Input: u64 tail (start position, so records wrap), u64 head - tail (not
 * capped: a ring claiming more than it holds is corrupt), then the ring's
 * data, padded with zeros to a power of two.
 */
#include <linux/perf_event.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint8_t sink;

static void on_sample(const struct pf_sample *s, void *arg)
{
	uint64_t frames[PF_MAX_FRAMES];
	size_t *total = arg;
	size_t n = pf_unwind_fp(s, frames, PF_MAX_FRAMES);
	if (n > PF_MAX_FRAMES || n > s->ncallchain)
		abort();
	/* The stack copy is in the record: reading all of it must be safe. */
	for (uint64_t i = 0; i < s->stack_size; i++)
		sink ^= s->stack[i];
	*total += n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct perf_event_mmap_page meta;
	static uint8_t scratch[65536];
	uint64_t tail, avail;

	if (size < 16)
		return 0;
	memcpy(&tail, data, 8);
	memcpy(&avail, data + 8, 8);
	data += 16;
	size -= 16;
	uint64_t rsize = 64;
	while (rsize < size)
		rsize <<= 1;
	uint8_t *ring = calloc(1, rsize);
	if (!ring)
		abort();
	/* The data as the kernel would have laid it out from position tail on. */
	for (size_t i = 0; i < size; i++)
		ring[(tail + i) & (rsize - 1)] = data[i];
	memset(&meta, 0, sizeof(meta));
	meta.data_tail = tail;
	meta.data_head = tail + (avail % (2 * rsize));
	/* Method events' layout (PERF_SAMPLE_IDENTIFIER first) when tail's
	 * top bit is set: both parsers see the same bytes. */
	struct pf_ring r = { .meta = &meta, .data = ring, .size = rsize,
			     .ident = (tail >> 63) != 0 };
	struct pf_ring_stats st = { 0 };
	size_t frames = 0;
	pf_ring_drain(&r, scratch, on_sample, &frames, &st);
	if (meta.data_tail != meta.data_head)
		abort(); /* the reader always consumes everything */
	free(ring);
	return 0;
}

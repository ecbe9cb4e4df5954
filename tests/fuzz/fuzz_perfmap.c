/*
 * libFuzzer: the JIT symbol map parser (common/perfmap.c), which the agent
 * and profilingd-perf run on /tmp/perf-<pid>.map, the target's own file.
 * Every entry kept must be found again by its start, and lookups around it
 * must stay inside the table.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "perfmap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pmap *m;
	struct pmap_stats st;

	if (pmap_parse((const char *)data, size, &m) < 0)
		return 0;
	pmap_get_stats(m, &st);
	if (st.entries > PMAP_MAX_ENTRIES)
		abort();
	/* Probe at the input's own numbers: every 8 bytes read as an address. */
	for (size_t i = 0; i + 8 <= size; i += 8) {
		uint64_t a, start = 0;
		memcpy(&a, data + i, 8);
		const char *n = pmap_lookup(m, a, &start);
		if (n && (start > a || strlen(n) > PMAP_MAX_NAME || !*n))
			abort();
	}
	pmap_free(m);
	return 0;
}

/*
 * libFuzzer: crash ring dumps to Perfetto (redact/rdc_ringdump.c), for an
 * app with pid 100 and the built-in DLP patterns.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "rdc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct rdc_dlp *dlp;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const int32_t pids[] = { 100 };

	if (!dlp && rdc_dlp_compile(rdc_dlp_builtin, rdc_dlp_builtin_count, &dlp))
		abort();
	const struct rdc_policy p = { .pids = pids, .npids = 1, .dlp = dlp };
	int in = fz_memfd("fuzz-ring-in", data, size);
	int out = fz_memfd("fuzz-ring-out", NULL, 0);
	struct rdc_stats st;
	int r = rdc_ringdump(in, out, &p, &st);
	/* What it accepted it wrote in full, and it read no more than there was. */
	if (r == 0 && (st.kept == 0 || st.in_bytes > size ||
		       lseek(out, 0, SEEK_END) != (off_t)st.out_bytes))
		abort();
	close(in);
	close(out);
	return 0;
}

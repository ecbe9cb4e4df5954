/*
 * libFuzzer: the pprof redactor (redact/rdc_pprof.c), for an app with pid
 * 100 (thread 101) and the built-in DLP patterns. What it accepts must
 * redact again to the same samples with nothing to drop or strip: its
 * output is a well-formed profile of the app alone (empty only when the
 * input had no samples: an idle process's capture).
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
	static const int32_t tids[] = { 101 };

	if (!dlp && rdc_dlp_compile(rdc_dlp_builtin, rdc_dlp_builtin_count, &dlp))
		abort();
	const struct rdc_policy p = {
		.pids = pids, .npids = 1, .tids = tids, .ntids = 1, .dlp = dlp,
	};
	int in = fz_memfd("fuzz-pprof-in", data, size);
	int out = fz_memfd("fuzz-pprof-out", NULL, 0);
	struct rdc_stats st, st2;
	int r = rdc_pprof(in, out, &p, &st);
	if (r == 0) {
		/* An empty result only from an input with no samples at all. */
		if (st.in_bytes != size || (st.kept == 0 && st.dropped != 0) ||
		    lseek(out, 0, SEEK_END) != (off_t)st.out_bytes)
			abort();
		int again = fz_memfd("fuzz-pprof-again", NULL, 0);
		/* Nothing left to drop or strip: no foreign sample, label or kernel frame. */
		if (lseek(out, 0, SEEK_SET) != 0 || rdc_pprof(out, again, &p, &st2) != 0 ||
		    st2.kept != st.kept || st2.dropped != 0 || st2.anonymised != 0)
			abort();
		close(again);
	}
	close(in);
	close(out);
	return 0;
}

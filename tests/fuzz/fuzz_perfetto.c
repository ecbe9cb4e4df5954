/* libFuzzer: the Perfetto trace redactor (redact/rdc_perfetto.c), for an
 * app with pid 100 (threads 100 and 101) and the built-in DLP patterns.
 * The input is fed as both of its streams: the kernel's (profilingd-
 * ftrace's, which carries task names any process picks) and the runtime's
 * (the app's word), so each parser sees every input and the seed corpus
 * serves both. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "rdc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct rdc_dlp *dlp;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const int32_t pids[] = { 100 };
	static const int32_t tids[] = { 100, 101 };

	if (!dlp && rdc_dlp_compile(rdc_dlp_builtin, rdc_dlp_builtin_count, &dlp))
		abort();
	int in = fz_memfd("fuzz-in", data, size);
	int kin = fz_memfd("fuzz-kernel", data, size);
	int out = memfd_create("fuzz-out", MFD_CLOEXEC);
	if (out < 0)
		abort();

	struct rdc_policy p = {
		.pids = pids, .npids = 1, .tids = tids, .ntids = 2, .dlp = dlp,
	};
	struct rdc_stats st;
	int r = rdc_perfetto(in, kin, out, &p, &st);
	/* What it accepted it read (both streams) and wrote in full. */
	if (r == 0 && (st.in_bytes != 2 * (uint64_t)size ||
		       lseek(out, 0, SEEK_END) != (off_t)st.out_bytes))
		abort();
	close(in);
	close(kin);
	close(out);
	return 0;
}

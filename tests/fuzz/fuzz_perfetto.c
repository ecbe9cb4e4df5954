/* libFuzzer: the Perfetto trace redactor (redact/rdc_perfetto.c), fed the
 * input as the raw trace, for an app with pid 100 (threads 100 and 101)
 * and the built-in DLP patterns. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rdc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct rdc_dlp *dlp;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const int32_t pids[] = { 100 };
	static const int32_t tids[] = { 100, 101 };

	if (!dlp && rdc_dlp_compile(rdc_dlp_builtin, rdc_dlp_builtin_count, &dlp))
		abort();
	int in = memfd_create("fuzz-in", MFD_CLOEXEC);
	int out = memfd_create("fuzz-out", MFD_CLOEXEC);
	if (in < 0 || out < 0)
		abort();
	for (size_t off = 0; off < size;) {
		ssize_t n = write(in, data + off, size - off);
		if (n <= 0)
			abort();
		off += (size_t)n;
	}
	if (lseek(in, 0, SEEK_SET) != 0)
		abort();

	struct rdc_policy p = {
		.pids = pids, .npids = 1, .tids = tids, .ntids = 2, .dlp = dlp,
	};
	struct rdc_stats st;
	int r = rdc_perfetto(in, out, &p, &st);
	/* What it accepted it wrote in full. */
	if (r == 0 && (st.in_bytes != size || lseek(out, 0, SEEK_END) != (off_t)st.out_bytes))
		abort();
	close(in);
	close(out);
	return 0;
}

/* libFuzzer: the HPROF redactor, input and output on memfds. */
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rdc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const int32_t pid = 1000;
	const struct rdc_policy pol = { .pids = &pid, .npids = 1 };
	struct rdc_stats st;
	int in = memfd_create("fuzz-hprof-in", MFD_CLOEXEC);
	int out = memfd_create("fuzz-hprof-out", MFD_CLOEXEC);
	if (in < 0 || out < 0)
		goto out;
	for (size_t done = 0; done < size;) {
		ssize_t w = write(in, data + done, size - done);
		if (w <= 0)
			goto out;
		done += (size_t)w;
	}
	rdc_hprof(in, out, &pol, &st);
out:
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	return 0;
}

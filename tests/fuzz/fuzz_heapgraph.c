/*
 * libFuzzer: the heap formats' converters (issue #20). The input is fed to
 * rdc_heapgraph_buf as an HPROF (corpus: tests/fuzz/corpus/hprof) and,
 * when it starts like gzip, to rdc_heapprofile as a pprof heap profile.
 * Besides the sanitizers: an accepted HPROF gives output, and the output
 * is a well-formed Trace (every TracePacket's length inside it).
 */
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rdc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_trace(int fd)
{
	off_t n = lseek(fd, 0, SEEK_END);
	uint8_t *d = n > 0 ? malloc((size_t)n) : NULL;
	if (!d || pread(fd, d, (size_t)n, 0) != n) {
		free(d);
		return;
	}
	size_t p = 0;
	while (p < (size_t)n) {
		uint64_t len = 0;
		if (d[p++] != 0x0a) /* Trace.packet, length-delimited */
			abort();
		for (unsigned s = 0;; s += 7) {
			if (p >= (size_t)n || s > 63)
				abort();
			len |= (uint64_t)(d[p] & 0x7f) << s;
			if (!(d[p++] & 0x80))
				break;
		}
		if (len > (size_t)n - p)
			abort();
		p += len;
	}
	free(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const int32_t pid = 1000;
	/* Process metadata on every run, and an OOM tid that names the first
	 * Thread.print thread of the corpus dumps (written by ja_hprof's old
	 * serial base) for some inputs and nothing for others. */
	static const char cmdline[] = "java\0-Xmx32m\0OomFill";
	const struct rdc_proc proc = { .has_uid = true, .uid = 1000, .cmdline = cmdline,
				       .cmdline_len = sizeof(cmdline),
				       .oom_tid = 0x7f000000u + (uint32_t)(size % 4) };
	const struct rdc_policy pol = { .pids = &pid, .npids = 1, .proc = &proc };
	struct rdc_stats st;
	int out = memfd_create("fuzz-hg-out", MFD_CLOEXEC);
	if (out < 0)
		return 0;
	if (rdc_heapgraph_buf(data, size, out, pid, &proc, &st) == 0) {
		if (!st.out_bytes)
			abort();
		check_trace(out);
	}
	if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b) {
		int in = memfd_create("fuzz-hp-in", MFD_CLOEXEC);
		if (in >= 0 && ftruncate(out, 0) == 0 && write(in, data, size) == (ssize_t)size &&
		    lseek(in, 0, SEEK_SET) == 0 && lseek(out, 0, SEEK_SET) == 0 &&
		    rdc_heapprofile(in, out, &pol, &st) == 0)
			check_trace(out);
		if (in >= 0)
			close(in);
	}
	close(out);
	return 0;
}

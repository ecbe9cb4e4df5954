/* libFuzzer: the Perfetto trace redactor (redact/rdc_perfetto.c), for an
 * app with pid 100 (threads 100 and 101) and the built-in DLP patterns.
 * The input is fed as both of its streams: the kernel's (profilingd-
 * ftrace's, which carries task names any process picks) and the runtime's
 * (the app's word), so each parser sees every input and the seed corpus
 * serves both. The kernel's stream is redacted twice: on one thread, and
 * on two in chunks of a few packets (the second thread guessing who the
 * app is); and on one thread with every packet by protobuf-c, none by
 * the wire paths (the kernel's bundles, the runtime's track events). The
 * answers, the counts and the bytes must be the same. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "rdc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct rdc_dlp *dlp;

/* One redaction; the output's bytes in *buf (malloc'd). */
static int redact(const uint8_t *data, size_t size, size_t chunk, bool no_wire,
		  struct rdc_stats *st, uint8_t **buf, size_t *len)
{
	static const int32_t pids[] = { 100 };
	static const int32_t tids[] = { 100, 101 };
	int in = fz_memfd("fuzz-in", data, size);
	int kin = fz_memfd("fuzz-kernel", data, size);
	int out = memfd_create("fuzz-out", MFD_CLOEXEC);
	if (out < 0)
		abort();

	struct rdc_policy p = {
		.pids = pids, .npids = 1, .tids = tids, .ntids = 2, .dlp = dlp, .pf_chunk = chunk,
		.pf_no_wire = no_wire,
	};
	int r = rdc_perfetto(in, kin, out, &p, st);
	off_t end = lseek(out, 0, SEEK_END);
	/* What it accepted it read (both streams) and wrote in full. */
	if (end < 0 || (r == 0 && (st->in_bytes != 2 * (uint64_t)size ||
				   end != (off_t)st->out_bytes)))
		abort();
	*len = (size_t)end;
	if (!(*buf = malloc(*len + 1)) || pread(out, *buf, *len, 0) != (ssize_t)*len)
		abort();
	close(in);
	close(kin);
	close(out);
	return r;
}

/* Two runs' answers and, where they succeeded, counts and bytes. */
static void same(int ra, const struct rdc_stats *a, const uint8_t *ab, size_t al, int rb,
		 const struct rdc_stats *b, const uint8_t *bb, size_t bl)
{
	if (ra != rb)
		abort();
	if (ra == 0 && (al != bl || memcmp(ab, bb, al) || a->kept != b->kept ||
			a->dropped != b->dropped || a->anonymised != b->anonymised ||
			a->scrubbed != b->scrubbed))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!dlp && rdc_dlp_compile(rdc_dlp_builtin, rdc_dlp_builtin_count, &dlp))
		abort();
	struct rdc_stats a, b, g;
	uint8_t *ab, *bb, *gb;
	size_t al, bl, gl;
	int ra = redact(data, size, SIZE_MAX, false, &a, &ab, &al);
	/* A chunk of a packet or few: every pair's guess is tried. */
	int rb = redact(data, size, 1 + size % 64, false, &b, &bb, &bl);
	int rg = redact(data, size, SIZE_MAX, true, &g, &gb, &gl);
	same(ra, &a, ab, al, rb, &b, bb, bl);
	same(ra, &a, ab, al, rg, &g, gb, gl);
	free(ab);
	free(bb);
	free(gb);
	return 0;
}

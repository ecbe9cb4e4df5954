/*
 * libFuzzer: profilingd-ftrace's parser of tracefs text (runtime/ftrace/
 * ft_parse.c), line by line as the helper reads it, events packed the way
 * it writes them. Task names in that text are any process's choice.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ft_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct ft_bundle bundle;
static uint8_t packed[1 << 20];

static void flush(unsigned cpu)
{
	Perfetto__Protos__FtraceEventBundle fb = PERFETTO__PROTOS__FTRACE_EVENT_BUNDLE__INIT;
	for (unsigned i = 0; i < bundle.n; i++)
		bundle.ptrs[i] = &bundle.ev[i];
	fb.has_cpu = 1;
	fb.cpu = cpu;
	fb.n_event = bundle.n;
	fb.event = bundle.ptrs;
	size_t n = perfetto__protos__ftrace_event_bundle__get_packed_size(&fb);
	/* 512 events of two 63-byte strings and a few numbers each fit. */
	if (n > sizeof(packed) || perfetto__protos__ftrace_event_bundle__pack(&fb, packed) != n)
		abort();
	bundle.n = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char line[FT_LINE_MAX];
	unsigned cpu = 0;

	bundle.n = 0;
	/* As fgets(line, FT_LINE_MAX) splits the file. */
	for (size_t off = 0; off < size;) {
		size_t n = 0;
		while (off < size && n < sizeof(line) - 1) {
			char c = (char)data[off++];
			line[n++] = c;
			if (c == '\n')
				break;
		}
		line[n] = '\0';
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		struct ft_line pr;
		if (line[0] == '#' || ft_parse_header(line, &pr) < 0)
			continue;
		if (pr.cpu != cpu && bundle.n)
			flush(cpu);
		cpu = pr.cpu;
		if (ft_parse_event(&bundle, &pr) == 0 && bundle.n == FT_BUNDLE_MAX)
			flush(cpu);
	}
	flush(cpu);
	return 0;
}

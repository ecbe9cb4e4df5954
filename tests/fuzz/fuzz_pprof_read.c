/* libFuzzer: profctl's result readers (pprof, gzip'd or not, and Perfetto
 * slices) and every view built from what they accept. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "pctl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void views(struct pctl_profile *p)
{
	struct pctl_top_row *rows;
	size_t n;
	FILE *f = fopen("/dev/null", "w");
	if (pctl_top(p, &rows, &n) == 0)
		free(rows);
	if (f) {
		pctl_collapsed(p, f);
		pctl_flame_svg(p, "fuzz", f, &n);
		fclose(f);
	}
	pctl_profile_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pctl_profile *p;
	char err[200];
	if (pctl_pprof_read(data, size, &p, err, sizeof(err)) == 0)
		views(p);
	if (pctl_trace_read(data, size, &p, err, sizeof(err)) == 0)
		views(p);
	return 0;
}

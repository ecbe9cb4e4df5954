/*
 * libFuzzer: the JVMTI agent's .symtab reader (runtime/jvmti/jv_symtab.c),
 * which names the native frames of mixed Java stacks from the ELF files
 * the JVM has loaded. Every read must stay inside the image, and every
 * name found must start no later than the address looked up and end
 * inside its string table.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct image {
	const uint8_t *data;
	size_t size;
};

static int read_image(void *ctx, uint64_t off, void *buf, size_t n)
{
	const struct image *im = ctx;
	/* jvy_parse checks against size first; this must never be reached out of range. */
	if (off > im->size || n > im->size - off)
		abort();
	memcpy(buf, im->data + off, n);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct image im = { data, size };
	struct jvy_reader r = { .read = read_image, .ctx = &im, .size = size };
	struct jvy_table *t = NULL;

	if (jvy_parse(&r, &t) < 0) {
		if (t)
			abort();
		return 0;
	}
	/* Look up the input's own numbers: every 8 bytes read as an address. */
	for (size_t i = 0; i + 8 <= size; i += 8) {
		uint64_t a, start = 0;
		memcpy(&a, data + i, 8);
		const char *n = jvy_lookup(t, a, &start);
		if (n && (start > a || strlen(n) >= size))
			abort();
	}
	jvy_free(t);
	return 0;
}

/*
 * libFuzzer: the native "#args=TYPES" suffix (common/nargs.c), which the
 * daemon's admission and profilingd-perf parse from an app's target
 * spelling, and the text rule for a string read from the target's memory.
 * An accepted suffix has 1..6 letters of i, u, p, s, - (not all '-') and
 * the target proper is a prefix; a cleaned string is at most 64 bytes of
 * valid UTF-8 with no NUL.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nargs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The strict UTF-8 check, written apart from nargs.c's on purpose. */
static int valid_utf8(const unsigned char *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		unsigned c = s[i], need, cp, min;
		if (c < 0x80) { i++; continue; }
		if ((c & 0xe0) == 0xc0) { need = 1; cp = c & 0x1f; min = 0x80; }
		else if ((c & 0xf0) == 0xe0) { need = 2; cp = c & 0x0f; min = 0x800; }
		else if ((c & 0xf8) == 0xf0) { need = 3; cp = c & 0x07; min = 0x10000; }
		else return 0;
		if (need >= n - i)
			return 0;
		for (unsigned k = 1; k <= need; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return 0;
			cp = (cp << 6) | (s[i + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		i += need + 1;
	}
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *t = malloc(size + 1), types[NARGS_MAX + 1], why[160], out[NARGS_STR_MAX + 1];
	size_t sl;
	if (!t)
		return 0;
	memcpy(t, data, size);
	t[size] = '\0';
	size_t len = strlen(t);
	if (nargs_split(t, &sl, types, why, sizeof(why)) == 0) {
		size_t n = strlen(types);
		if (sl > len || n > NARGS_MAX || strspn(types, "iups-") != n ||
		    (n && strspn(types, "-") == n))
			abort();
		if (n && (t[sl] != '#' || strcmp(t + sl + 6, types)))
			abort();
		if (!n && sl != len)
			abort();
	} else if (!memchr(why, '\0', sizeof(why))) {
		abort();
	}
	size_t m = nargs_clean_str((const char *)data, size, out);
	if (m > NARGS_STR_MAX || m > size || out[m] != '\0' || strlen(out) != m ||
	    !valid_utf8((const unsigned char *)out, m))
		abort();
	free(t);
	return 0;
}

/*
 * The "#args=TYPES" suffix and the text of a string argument; the
 * contract is in nargs.h. Both run on what an app sent (the suffix) or
 * what its memory held (the string): every length is checked first.
 */
#include "nargs.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int nargs_split(const char *t, size_t *speclen, char *types, char *why, size_t whylen)
{
	types[0] = '\0';
	*speclen = t ? strlen(t) : 0;
	if (!t)
		return 0;
	const char *h = strrchr(t, '#');
	if (!h || strncmp(h + 1, "args", 4))
		return 0;
	*speclen = (size_t)(h - t);
	/* "#args" alone is the JVM form (every parameter): native code has no
	 * signature to tell which registers hold what, so it must say. */
	if (h[5] != '=') {
		snprintf(why, whylen, "native arguments need #args=TYPES (1..%d of i, u, p, s, -)",
			 NARGS_MAX);
		return -EINVAL;
	}
	const char *ty = h + 6;
	size_t n = strlen(ty);
	if (n == 0 || n > NARGS_MAX) {
		snprintf(why, whylen, "#args=TYPES: 1..%d letters (one per argument register), "
			 "got %zu", NARGS_MAX, n);
		return -EINVAL;
	}
	size_t used = 0;
	for (size_t i = 0; i < n; i++) {
		if (!strchr("iups-", ty[i]) || !ty[i]) {
			snprintf(why, whylen, "#args=TYPES: '%c' is not one of i, u, p, s, -",
				 (ty[i] >= 0x20 && ty[i] < 0x7f) ? ty[i] : '?');
			return -EINVAL;
		}
		used += ty[i] != '-';
	}
	if (!used) {
		snprintf(why, whylen, "#args=TYPES: every argument skipped ('-'): leave the "
			 "suffix out instead");
		return -EINVAL;
	}
	memcpy(types, ty, n + 1);
	return 0;
}

/* The length of the valid UTF-8 sequence at s (left bytes), or 0. */
static size_t utf8_seq(const unsigned char *s, size_t left)
{
	unsigned c = s[0];
	size_t len;
	unsigned min, cp;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2; cp = c & 0x1f; min = 0x80;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3; cp = c & 0x0f; min = 0x800;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4; cp = c & 0x07; min = 0x10000;
	} else {
		return 0;
	}
	if (len > left)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

size_t nargs_clean_str(const char *in, size_t n, char *out)
{
	const unsigned char *s = (const unsigned char *)in;
	if (n > NARGS_STR_MAX)
		n = NARGS_STR_MAX;
	const unsigned char *nul = memchr(s, 0, n);
	if (nul)
		n = (size_t)(nul - s);
	size_t i = 0;
	while (i < n) {
		size_t l = utf8_seq(s + i, n - i);
		if (l == 0) {
			out[i++] = '?';
			continue;
		}
		memcpy(out + i, s + i, l);
		i += l;
	}
	out[n] = '\0';
	return n;
}

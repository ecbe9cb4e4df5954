/* duration: "<number>[ms|s|m|h]" into milliseconds (duration.h). */
#include "duration.h"

#include <errno.h>
#include <string.h>

int dur_parse_ms(const char *s, uint64_t bare_ms, uint64_t *out_ms)
{
	/* The value in thousandths of its unit, so that three decimals of
	 * any unit are exact in integer arithmetic. */
	uint64_t milli = 0, unit;
	int ndigits = 0, nfrac = -1;
	const char *p = s;

	if (!s || !out_ms || !bare_ms)
		return -EINVAL;
	for (; *p; p++) {
		if (*p == '.' && nfrac < 0 && ndigits) {
			nfrac = 0;
			continue;
		}
		if (*p < '0' || *p > '9')
			break;
		if (nfrac >= 3)
			return -EINVAL;
		if (milli > (UINT64_MAX - 9) / 10)
			return -ERANGE;
		milli = milli * 10 + (uint64_t)(*p - '0');
		ndigits++;
		if (nfrac >= 0)
			nfrac++;
	}
	if (!ndigits || nfrac == 0)
		return -EINVAL; /* "" or "5." */
	for (int i = nfrac < 0 ? 0 : nfrac; i < 3; i++) {
		if (milli > UINT64_MAX / 10)
			return -ERANGE;
		milli *= 10;
	}
	if (!*p)
		unit = bare_ms;
	else if (!strcmp(p, "ms"))
		unit = 1;
	else if (!strcmp(p, "s"))
		unit = 1000;
	else if (!strcmp(p, "m"))
		unit = 60 * 1000;
	else if (!strcmp(p, "h"))
		unit = 3600 * 1000;
	else
		return -EINVAL;
	if (milli > UINT64_MAX / unit)
		return -ERANGE;
	uint64_t t = milli * unit;
	if (t % 1000)
		return -EINVAL; /* a fraction of a millisecond */
	*out_ms = t / 1000;
	return 0;
}

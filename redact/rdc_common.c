/* Identity checks, thread starts and DLP scrubbing shared by the
 * redactors. */
#include "rdc.h"

#include <errno.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

int rdc_thread_start(pthread_t *t, size_t stack, void *(*fn)(void *), void *arg)
{
	pthread_attr_t a;
	int r = pthread_attr_init(&a);
	if (r)
		return -r;
	r = pthread_attr_setstacksize(&a, stack);
	if (!r)
		r = pthread_create(t, &a, fn, arg);
	pthread_attr_destroy(&a);
	return -r;
}

int rdc_is_app_pid(const struct rdc_policy *p, int32_t pid)
{
	for (size_t i = 0; p && i < p->npids; i++)
		if (p->pids[i] == pid)
			return 1;
	return 0;
}

int rdc_is_app_tid(const struct rdc_policy *p, int32_t tid)
{
	/* A process's main thread has tid == pid. */
	if (rdc_is_app_pid(p, tid))
		return 1;
	for (size_t i = 0; p && i < p->ntids; i++)
		if (p->tids[i] == tid)
			return 1;
	return 0;
}

const char *const rdc_dlp_builtin[] = {
	"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\\.[A-Za-z]{2,}",
	"[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}",
	"[0-9A-Fa-f]{32,}",
};
const size_t rdc_dlp_builtin_count = sizeof(rdc_dlp_builtin) / sizeof(rdc_dlp_builtin[0]);

struct rdc_dlp {
	size_t n;
	regex_t re[RDC_DLP_MAX];
};

int rdc_dlp_compile(const char *const *patterns, size_t n, struct rdc_dlp **out)
{
	if (!out || (n && !patterns) || n > RDC_DLP_MAX)
		return -EINVAL;
	struct rdc_dlp *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (regcomp(&d->re[i], patterns[i], REG_EXTENDED) != 0) {
			rdc_dlp_free(d);
			return -EINVAL;
		}
		d->n++;
	}
	*out = d;
	return 0;
}

void rdc_dlp_free(struct rdc_dlp *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->n; i++)
		regfree(&d->re[i]);
	free(d);
}

/* Append src[0..len) to out at *pos, never past outsz - 1. */
static void put(char *out, size_t outsz, size_t *pos, const char *src, size_t len)
{
	if (*pos + 1 >= outsz)
		return;
	size_t room = outsz - 1 - *pos;
	if (len > room)
		len = room;
	memcpy(out + *pos, src, len);
	*pos += len;
	out[*pos] = '\0';
}

int rdc_dlp_scrub(const struct rdc_dlp *d, const char *in, char *out, size_t outsz,
		  int *changed)
{
	if (!in || !out || !outsz)
		return -EINVAL;
	if (changed)
		*changed = 0;
	size_t len = strlen(in);
	char *cur = malloc(len + 1), *next = NULL;
	if (!cur)
		return -ENOMEM;
	memcpy(cur, in, len + 1);
	/* One pattern at a time over the whole string: later patterns see the
	 * earlier replacements, which contain nothing they match. */
	for (size_t i = 0; d && i < d->n; i++) {
		size_t cap = strlen(cur) * 2 + sizeof(RDC_DLP_REPLACEMENT) + 1, pos = 0;
		next = malloc(cap);
		if (!next) {
			free(cur);
			return -ENOMEM;
		}
		next[0] = '\0';
		const char *s = cur;
		regmatch_t m[1];
		int flags = 0;
		while (*s && regexec(&d->re[i], s, 1, m, flags) == 0) {
			if (m[0].rm_eo == m[0].rm_so) { /* empty match: step one byte */
				put(next, cap, &pos, s, 1);
				s++;
			} else {
				put(next, cap, &pos, s, (size_t)m[0].rm_so);
				put(next, cap, &pos, RDC_DLP_REPLACEMENT, sizeof(RDC_DLP_REPLACEMENT) - 1);
				s += m[0].rm_eo;
				if (changed)
					*changed = 1;
			}
			flags = REG_NOTBOL;
			/* Grow when a long run of short matches fills the buffer. */
			if (pos + sizeof(RDC_DLP_REPLACEMENT) + 2 >= cap) {
				size_t ncap = cap * 2;
				char *g = realloc(next, ncap);
				if (!g) {
					free(next);
					free(cur);
					return -ENOMEM;
				}
				next = g;
				cap = ncap;
			}
		}
		put(next, cap, &pos, s, strlen(s));
		free(cur);
		cur = next;
	}
	size_t pos = 0;
	out[0] = '\0';
	put(out, outsz, &pos, cur, strlen(cur));
	free(cur);
	return 0;
}

/* The converters' protobuf writer: see rdc_pbw.h. */
#include "rdc_pbw.h"
#include "rdc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void rdc_pbw_init(struct rdc_pbw *w, size_t max)
{
	memset(w, 0, sizeof(*w));
	w->max = max;
}

void rdc_pbw_free(struct rdc_pbw *w)
{
	if (!w)
		return;
	free(w->b);
	w->b = NULL;
	w->n = w->cap = 0;
}

void rdc_pbw_reset(struct rdc_pbw *w)
{
	w->n = 0;
}

static int grow(struct rdc_pbw *w, size_t more)
{
	if (w->err)
		return w->err;
	if (more > w->max || w->n > w->max - more)
		return w->err = -E2BIG;
	if (w->n + more <= w->cap)
		return 0;
	size_t cap = w->cap ? w->cap : 4096;
	while (cap < w->n + more)
		cap *= 2;
	if (cap > w->max)
		cap = w->max;
	uint8_t *b = realloc(w->b, cap);
	if (!b)
		return w->err = -ENOMEM;
	w->b = b;
	w->cap = cap;
	return 0;
}

void rdc_pbw_raw(struct rdc_pbw *w, const void *p, size_t n)
{
	if (n && grow(w, n) == 0) {
		memcpy(w->b + w->n, p, n);
		w->n += n;
	}
}

void rdc_pbw_varint(struct rdc_pbw *w, uint64_t v)
{
	uint8_t t[10];
	size_t n = 0;
	do {
		t[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	rdc_pbw_raw(w, t, n);
}

static size_t varint_len(uint64_t v)
{
	size_t n = 1;
	while (v > 0x7f) {
		v >>= 7;
		n++;
	}
	return n;
}

void rdc_pbw_u64(struct rdc_pbw *w, uint32_t f, uint64_t v)
{
	rdc_pbw_varint(w, (uint64_t)f << 3);
	rdc_pbw_varint(w, v);
}

void rdc_pbw_bytes(struct rdc_pbw *w, uint32_t f, const void *p, size_t n)
{
	rdc_pbw_varint(w, (uint64_t)f << 3 | 2);
	rdc_pbw_varint(w, n);
	rdc_pbw_raw(w, p, n);
}

void rdc_pbw_msg(struct rdc_pbw *w, uint32_t f, const struct rdc_pbw *sub)
{
	if (sub->err && !w->err)
		w->err = sub->err;
	rdc_pbw_bytes(w, f, sub->b, sub->n);
}

void rdc_pbw_packed(struct rdc_pbw *w, uint32_t f, const uint64_t *v, size_t n)
{
	size_t len = 0;
	if (!n)
		return;
	for (size_t i = 0; i < n; i++)
		len += varint_len(v[i]);
	rdc_pbw_varint(w, (uint64_t)f << 3 | 2);
	rdc_pbw_varint(w, len);
	for (size_t i = 0; i < n; i++)
		rdc_pbw_varint(w, v[i]);
}

int rdc_pbw_flush(struct rdc_pbw *w, int fd, uint64_t *total)
{
	size_t off = 0;
	if (w->err)
		return w->err;
	while (off < w->n) {
		ssize_t r = write(fd, w->b + off, w->n - off);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -EIO;
		off += (size_t)r;
	}
	if (total)
		*total += w->n;
	w->n = 0;
	return 0;
}

void rdc_pbw_process(struct rdc_pbw *w, int32_t pid, const struct rdc_proc *proc)
{
	rdc_pbw_u64(w, RDC_PF_PTP_PID, (uint64_t)(uint32_t)pid);
	if (!proc)
		return;
	/* The daemon cut it to RDC_CMDLINE_MAX; cut again rather than trust. */
	size_t n = proc->cmdline_len < RDC_CMDLINE_MAX ? proc->cmdline_len : RDC_CMDLINE_MAX;
	for (size_t i = 0; proc->cmdline && i < n;) {
		const char *a = proc->cmdline + i;
		const char *z = memchr(a, '\0', n - i);
		size_t l = z ? (size_t)(z - a) : n - i;
		rdc_pbw_bytes(w, RDC_PF_PTP_CMDLINE, a, l);
		i += l + 1;
	}
	if (proc->has_uid)
		rdc_pbw_u64(w, RDC_PF_PTP_UID, proc->uid);
}

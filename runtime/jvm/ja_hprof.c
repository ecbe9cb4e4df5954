/*
 * The per-thread stacks of Thread.print, appended to a HotSpot heap dump as
 * HPROF records (docs/JVM.md): viewers show them beside the dump's own
 * traces, and the redactor keeps them (STACK FRAME/TRACE, START THREAD and
 * the UTF8 names they use).
 *
 * Our ids live far from HotSpot's (which are addresses): 0x7fd0... with
 * 8-byte ids, 0xfd...... with 4-byte ids. Our trace serials start at
 * 0x7f000000; a thread's serial is its OS tid, or 0x7f000000 + its index
 * when Thread.print gave none.
 */
#include "ja.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

#define TAG_UTF8         0x01
#define TAG_LOAD_CLASS   0x02
#define TAG_STACK_FRAME  0x04
#define TAG_STACK_TRACE  0x05
#define TAG_START_THREAD 0x0a
#define SERIAL_BASE      0x7f000000u
#define MAX_NAMES        (1u << 20) /* distinct strings we write */

/* ------------------------------------------------------------ reading */

struct rd {
	int fd;
	off_t base;        /* file offset of buf[0] */
	size_t n;
	uint8_t buf[1 << 16];
};

/* Make [off, off+len) readable in r->buf; len <= sizeof(buf). */
static int rd_at(struct rd *r, off_t off, size_t len, const uint8_t **p)
{
	if (off >= r->base && off + (off_t)len <= r->base + (off_t)r->n) {
		*p = r->buf + (off - r->base);
		return 0;
	}
	ssize_t got = pread(r->fd, r->buf, sizeof(r->buf), off);
	if (got < 0)
		return -errno;
	r->base = off;
	r->n = (size_t)got;
	if ((size_t)got < len)
		return -EBADMSG;
	*p = r->buf;
	return 0;
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t be_id(const uint8_t *p, unsigned idsz)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < idsz; i++)
		v = v << 8 | p[i];
	return v;
}

/* ------------------------------------------------------------ name tables */

/* A string by (pointer, length), dots and slashes alike when `cls`. */
struct name {
	const char *s;
	uint16_t len;
	bool used;
	uint64_t id;      /* its UTF8 id: ours, or the dump's for a class name */
	uint32_t serial;  /* class names: the dump's LOAD CLASS serial, or 0 */
};

struct table {
	struct name *v;
	uint32_t cap, n;
};

static uint32_t hash(const char *s, size_t len)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < len; i++)
		h = (h ^ (uint8_t)(s[i] == '/' ? '.' : s[i])) * 16777619u;
	return h;
}

static bool same(const char *a, size_t al, const char *b, size_t bl)
{
	if (al != bl)
		return false;
	for (size_t i = 0; i < al; i++) {
		char x = a[i] == '/' ? '.' : a[i], y = b[i] == '/' ? '.' : b[i];
		if (x != y)
			return false;
	}
	return true;
}

static int table_init(struct table *t, uint32_t want)
{
	t->cap = 64;
	while (t->cap < want * 2)
		t->cap *= 2;
	t->n = 0;
	t->v = calloc(t->cap, sizeof(*t->v));
	return t->v ? 0 : -ENOMEM;
}

/* The slot of s, inserted if absent. NULL when the table is full. */
static struct name *table_get(struct table *t, const char *s, size_t len, bool insert)
{
	uint32_t i = hash(s, len) & (t->cap - 1);
	for (uint32_t k = 0; k < t->cap; k++, i = (i + 1) & (t->cap - 1)) {
		struct name *e = &t->v[i];
		if (!e->used) {
			if (!insert || t->n + 1 >= t->cap / 2)
				return NULL;
			e->used = true;
			e->s = s;
			e->len = (uint16_t)len;
			t->n++;
			return e;
		}
		if (same(e->s, e->len, s, len))
			return e;
	}
	return NULL;
}

/* ------------------------------------------------------------ writing */

struct wr {
	int fd;
	size_t n;
	int err;
	unsigned idsz;
	uint8_t buf[1 << 16];
};

static void w_flush(struct wr *w)
{
	if (!w->err && w->n)
		w->err = util_write_all(w->fd, w->buf, w->n);
	w->n = 0;
}

static void w_bytes(struct wr *w, const void *p, size_t len)
{
	const uint8_t *b = p;
	while (len) {
		if (w->n == sizeof(w->buf))
			w_flush(w);
		size_t k = sizeof(w->buf) - w->n < len ? sizeof(w->buf) - w->n : len;
		memcpy(w->buf + w->n, b, k);
		w->n += k;
		b += k;
		len -= k;
	}
}

static void w_u1(struct wr *w, uint8_t v) { w_bytes(w, &v, 1); }

static void w_u4(struct wr *w, uint32_t v)
{
	uint8_t b[4] = { (uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v };
	w_bytes(w, b, 4);
}

static void w_id(struct wr *w, uint64_t v)
{
	uint8_t b[8];
	for (unsigned i = 0; i < w->idsz; i++)
		b[i] = (uint8_t)(v >> (8 * (w->idsz - 1 - i)));
	w_bytes(w, b, w->idsz);
}

static void w_rec(struct wr *w, uint8_t tag, uint32_t len)
{
	w_u1(w, tag);
	w_u4(w, 0); /* microseconds since the header's time */
	w_u4(w, len);
}

struct out {
	struct wr *w;
	struct table strs;
	uint64_t next_id;
	int err;
};

/* The id of a UTF8 record holding s, written on first use. */
static uint64_t str_id(struct out *o, const char *s, size_t len)
{
	if (!s)
		s = "", len = 0;
	struct name *e = table_get(&o->strs, s, len, o->strs.n < MAX_NAMES);
	if (!e) {
		o->err = -E2BIG;
		return 0;
	}
	if (!e->id) {
		e->id = o->next_id++;
		w_rec(o->w, TAG_UTF8, o->w->idsz + (uint32_t)len);
		w_id(o->w, e->id);
		w_bytes(o->w, s, len);
	}
	return e->id;
}

/* ------------------------------------------------------------ main */

static int copy_all(int in_fd, int out_fd, off_t size)
{
	off_t in = 0;
	while (in < size) {
		ssize_t n = copy_file_range(in_fd, &in, out_fd, NULL, (size_t)(size - in), 0);
		if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS ||
			      errno == EOPNOTSUPP || errno == EBADF))
			break; /* not between these files: copy by hand */
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
	}
	while (in < size) {
		char buf[1 << 16];
		ssize_t n = pread(in_fd, buf, sizeof(buf), in);
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		int r = util_write_all(out_fd, buf, (size_t)n);
		if (r < 0)
			return r;
		in += n;
	}
	return 0;
}

static int cmp_id(const void *a, const void *b)
{
	uint64_t x = (*(struct name *const *)a)->id, y = (*(struct name *const *)b)->id;
	return x < y ? -1 : x > y;
}

/*
 * Walk the dump's top-level records twice: UTF8 names of the classes our
 * frames use get their dump id, then LOAD CLASS gives those ids a serial
 * (two walks, since nothing orders the two kinds of record).
 */
static int find_classes(struct rd *r, off_t size, off_t first, unsigned idsz, struct table *cls)
{
	struct name **byid = NULL;
	uint32_t nid = 0;
	int e = 0;
	for (int pass = 0; pass < 2 && e == 0; pass++) {
		if (pass == 1) {
			byid = malloc((cls->n + 1) * sizeof(*byid));
			if (!byid)
				return -ENOMEM;
			for (uint32_t i = 0; i < cls->cap; i++)
				if (cls->v[i].used && cls->v[i].id)
					byid[nid++] = &cls->v[i];
			if (nid == 0)
				break;
			qsort(byid, nid, sizeof(*byid), cmp_id);
		}
		uint32_t nrec = 0;
		for (off_t pos = first; pos < size && e == 0;) {
			const uint8_t *h, *b;
			if ((e = rd_at(r, pos, 9, &h)) < 0)
				break;
			uint8_t tag = h[0];
			uint32_t len = be32(h + 5);
			off_t body = pos + 9;
			if (body + (off_t)len > size || ++nrec > (1u << 26)) {
				e = -EBADMSG;
				break;
			}
			pos = body + len;
			if (pass == 0 && tag == TAG_UTF8 && len >= idsz && len - idsz <= 4096) {
				if ((e = rd_at(r, body, len, &b)) < 0)
					break;
				struct name *n = table_get(cls, (const char *)b + idsz, len - idsz, false);
				if (n)
					n->id = be_id(b, idsz);
			} else if (pass == 1 && tag == TAG_LOAD_CLASS && len == 8 + 2 * idsz) {
				if ((e = rd_at(r, body, len, &b)) < 0)
					break;
				struct name key = { .id = be_id(b + 8 + idsz, idsz) }, *kp = &key;
				struct name **hit = bsearch(&kp, byid, nid, sizeof(*byid), cmp_id);
				if (hit && !(*hit)->serial)
					(*hit)->serial = be32(b);
			}
		}
	}
	free(byid);
	return e;
}

int ja_hprof_with_threads(int in_fd, int out_fd, const struct ja_threads *t)
{
	struct rd *r = malloc(sizeof(*r));
	struct wr *w = malloc(sizeof(*w));
	struct table cls = { 0 };
	struct out o = { 0 };
	int e = -ENOMEM;

	if (!r || !w)
		goto out;
	r->fd = in_fd;
	r->base = 0;
	r->n = 0;
	off_t size = lseek(in_fd, 0, SEEK_END);
	if (size < 0) {
		e = -errno;
		goto out;
	}
	/* "JAVA PROFILE 1.0.2\0", u4 id size, u8 time. */
	const uint8_t *h;
	if ((e = rd_at(r, 0, size < 64 ? (size_t)size : 64, &h)) < 0)
		goto out;
	e = -EBADMSG;
	if (size < 31 || memcmp(h, "JAVA PROFILE 1.0.", 17))
		goto out;
	const uint8_t *nul = memchr(h, '\0', 32);
	if (!nul)
		goto out;
	unsigned idsz = be32(nul + 1);
	if (idsz != 4 && idsz != 8)
		goto out;
	off_t first = (nul - h) + 1 + 4 + 8;

	/* Class serials for the frames' classes. */
	if ((e = table_init(&cls, t->nframes < 65536 ? t->nframes + 1 : 65536)) < 0)
		goto out;
	for (uint32_t i = 0; i < t->nframes; i++)
		if (!table_get(&cls, t->frames[i].cls, t->frames[i].cls_len, true))
			break; /* more distinct classes than the table: those get serial 0 */
	if ((e = find_classes(r, size, first, idsz, &cls)) < 0)
		goto out;
	if ((e = copy_all(in_fd, out_fd, size)) < 0)
		goto out;

	w->fd = out_fd;
	w->n = 0;
	w->err = 0;
	w->idsz = idsz;
	o.w = w;
	o.next_id = idsz == 8 ? 0x7fd0000000000001ull : 0xfd000001ull;
	if ((e = table_init(&o.strs, 1024)) < 0)
		goto out;
	uint64_t group = str_id(&o, "Thread.print", 12);
	uint64_t frame_id = o.next_id + (1ull << (idsz == 8 ? 40 : 20));
	for (uint32_t i = 0; i < t->nthreads && !o.err; i++) {
		const struct ja_thread *th = &t->threads[i];
		uint64_t fids[JA_MAX_FRAMES];
		for (uint32_t k = 0; k < th->nframes && k < JA_MAX_FRAMES; k++) {
			const struct ja_frame *f = &t->frames[th->first + k];
			uint64_t m = str_id(&o, f->method, f->method_len);
			uint64_t sig = str_id(&o, "", 0); /* Thread.print has no signatures */
			uint64_t src = str_id(&o, f->file, f->file_len);
			const struct name *c = table_get(&cls, f->cls, f->cls_len, false);
			fids[k] = frame_id++;
			w_rec(w, TAG_STACK_FRAME, 4 * idsz + 8);
			w_id(w, fids[k]);
			w_id(w, m);
			w_id(w, sig);
			w_id(w, src);
			w_u4(w, c ? c->serial : 0);
			w_u4(w, (uint32_t)f->line);
		}
		uint32_t nf = th->nframes < JA_MAX_FRAMES ? th->nframes : JA_MAX_FRAMES;
		uint64_t name = str_id(&o, th->name, th->name_len);
		uint64_t state = str_id(&o, th->state, th->state_len);
		/* The thread's serial is its OS tid (Thread.print's nid) when it
		 * has one: HPROF has no other place for it, and the redactor
		 * names threads by it and finds the OOM thread by it (docs/JVM.md).
		 * Linux tids stay below 2^22, so they never meet our own serials. */
		uint32_t tserial = th->nid && th->nid < SERIAL_BASE ? (uint32_t)th->nid : SERIAL_BASE + i;
		w_rec(w, TAG_STACK_TRACE, 12 + nf * idsz);
		w_u4(w, SERIAL_BASE + i);
		w_u4(w, tserial);
		w_u4(w, nf);
		for (uint32_t k = 0; k < nf; k++)
			w_id(w, fids[k]);
		/* START THREAD: serial, object (none), trace, name, group, parent group. */
		w_rec(w, TAG_START_THREAD, 8 + 4 * idsz);
		w_u4(w, tserial);
		w_id(w, 0);
		w_u4(w, SERIAL_BASE + i);
		w_id(w, name);
		w_id(w, state);
		w_id(w, group);
	}
	w_flush(w);
	e = o.err ? o.err : w->err;
out:
	free(cls.v);
	free(o.strs.v);
	free(r);
	free(w);
	return e;
}

/*
 * Perfetto trace redaction (docs/DESIGN.md §6, docs/PERFETTO.md).
 *
 * A trace file is a bare sequence of `packet` fields (field 1, length-
 * delimited). We read that framing ourselves, unpack one TracePacket at a
 * time with protobuf-c into a per-packet arena, filter and rewrite it, and
 * write it back with the same framing through a buffered writer. Memory is
 * bounded by the packet cap and the arena budget, not by the trace size.
 *
 * Two inputs, one output: the kernel's stream (profilingd-ftrace's
 * bundles) is read first, then the runtime's. Only the kernel's stream may
 * speak for the kernel: what the app writes never changes who the app is
 * (docs/DESIGN.md §2 and §6), so kernel-origin packets in the runtime's stream
 * are dropped, and forks are learned from the kernel's stream alone.
 *
 * Only read/write/lseek/fstat on the given fds, memory allocation and up
 * to two threads of its own (par_*, rt_*: the streams side by side) happen
 * here, so this runs under the redact child's seccomp filter.
 */
#include "rdc.h"
#include "perfetto_trace.pb-c.h"
#include "util.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A packet bigger than this is refused (-E2BIG). Perfetto's own writers
 * keep packets far smaller; heap graphs and the like, which can be larger,
 * are content we drop anyway. */
#define PF_MAX_PACKET (1u << 20)
/* Nesting of known messages in one packet (DebugAnnotation is recursive,
 * and protobuf-c's unpacker recurses without a limit of its own). */
#define PF_MAX_DEPTH 64
/* Memory protobuf-c may use for one unpacked packet. A packet of tiny
 * sub-messages unpacks to ~40x its size; real ones to ~3x. */
#define PF_UNPACK_BUDGET (64u << 20)
/* Caps on the state kept across packets. */
#define PF_MAX_SEQS (1u << 16)
#define PF_MAX_TRACKS (1u << 18)
#define PF_MAX_LEARNED (1u << 16)
#define PF_MAX_CPU 65535u
/* Foreign tasks on cpu N become tid PF_SYNTH_BASE + N: above Linux's
 * PID_MAX_LIMIT (2^22), so it never names a real task. */
#define PF_SYNTH_BASE 1000000000

#define PF_IOBUF (64u << 10)
/* Reads are larger: a kernel packet wholly in the buffer is rewritten from
 * there, without a copy (bundles are about 20 KiB). */
#define PF_RBUF (256u << 10)
/* Bytes readable past any packet the fast paths see (the read buffer's and
 * c->pkt's tail), and writable past c->out's: spans are copied 16 at a time. */
#define PF_PAD 16
/* The write buffer's bytes the lean path keeps free past its events for
 * a bundle's headers longer than guessed (8 at most) and its trailer (17). */
#define LEAN_TAIL 32
/* The second thread's output of one chunk is held in memory up to this;
 * past it (a DLP replacement longer than the text, many times over) the
 * chunk is redone on the first thread, which writes as it goes. */
#define PF_PAR_OUT (16u << 20)
/* After this many second chunks redone (an app that forks all along), the
 * rest of the kernel's stream is redacted on one thread: the CPU a wrong
 * guess wastes (RLIMIT_CPU counts every thread) stays a few chunks'. */
#define PF_PAR_MISSES 4
/* The second thread's stack: the lean path, protobuf-c's unpacker (its
 * nesting is capped by wire_check at PF_MAX_DEPTH) and the DLP matcher. */
#define PF_PAR_STACK (1u << 20)
#define ARENA_BLK (1u << 20)
#define ARENA_KEEP (4u << 20)

/* Short strings (comms, most names) repeat endlessly; their DLP result is
 * cached so a sched-heavy trace does not run the regexes per event. */
#define DLP_CACHE_N 256
#define DLP_CACHE_STR 32

typedef Perfetto__Protos__TracePacket Packet;
typedef Perfetto__Protos__FtraceEventBundle Bundle;
typedef Perfetto__Protos__FtraceEventBundle__CompactSched Compact;
typedef Perfetto__Protos__FtraceEvent FEvent;
typedef Perfetto__Protos__TrackEvent TEvent;
typedef Perfetto__Protos__TrackDescriptor TDesc;
typedef Perfetto__Protos__DebugAnnotation Annot;

#define SEQ_CLEARED PERFETTO__PROTOS__TRACE_PACKET__SEQUENCE_FLAGS__SEQ_INCREMENTAL_STATE_CLEARED

/* ---- per-packet arena: protobuf-c's allocator, reset after each packet */

struct blk {
	struct blk *next;
	size_t size, used;
};
#define BLK_HDR ((sizeof(struct blk) + 15) & ~(size_t)15)

/* total: the blocks this packet took, against budget; spare: standard
 * blocks kept from earlier packets. A packet's fit so depends on that
 * packet alone, on whichever thread and after whatever came before (the
 * threads of rdc_perfetto: par_, rt_ must fail where one thread does). */
struct arena {
	struct blk *head, *spare;
	size_t total, budget, nspare;
	bool over, nomem;
};

static void *ar_alloc(void *ad, size_t n)
{
	struct arena *a = ad;

	if (n > a->budget) {
		a->over = true;
		return NULL;
	}
	n = (n + 15) & ~(size_t)15;
	if (!n)
		n = 16;
	struct blk *b = a->head;
	if (!b || b->size - b->used < n) {
		size_t sz = n > ARENA_BLK ? n : ARENA_BLK;
		if (a->total + sz > a->budget) {
			a->over = true;
			return NULL;
		}
		if (sz == ARENA_BLK && a->spare) {
			b = a->spare;
			a->spare = b->next;
			a->nspare--;
		} else if (!(b = malloc(BLK_HDR + sz))) {
			a->nomem = true;
			return NULL;
		}
		b->size = sz;
		b->used = 0;
		b->next = a->head;
		a->head = b;
		a->total += sz;
	}
	void *p = (char *)b + BLK_HDR + b->used;
	b->used += n;
	return p;
}

static void ar_free(void *ad, void *p)
{
	/* Everything goes at once in ar_reset(). */
}

/* Keep a few standard blocks for the next packets so steady state does
 * not call malloc; give big one-off blocks back. */
static void ar_reset(struct arena *a)
{
	struct blk *b = a->head;

	while (b) {
		struct blk *next = b->next;
		if (b->size == ARENA_BLK && (a->nspare + 1) * ARENA_BLK <= ARENA_KEEP) {
			b->used = 0;
			b->next = a->spare;
			a->spare = b;
			a->nspare++;
		} else {
			free(b);
		}
		b = next;
	}
	a->head = NULL;
	a->total = 0;
	a->over = a->nomem = false;
}

static void ar_fini(struct arena *a)
{
	a->budget = 0;
	for (struct blk *b = a->head, *next; b; b = next) {
		next = b->next;
		free(b);
	}
	for (struct blk *b = a->spare, *next; b; b = next) {
		next = b->next;
		free(b);
	}
	a->head = a->spare = NULL;
	a->nspare = 0;
}

/* ---- open-addressing map: u64 key -> nonzero u8 value */

struct map {
	uint64_t *key;
	uint8_t *val; /* 0: empty slot */
	size_t cap, n, max;
};

static size_t map_slot(uint64_t k, size_t cap)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	return (size_t)k & (cap - 1);
}

static uint8_t map_get(const struct map *m, uint64_t k)
{
	if (!m->cap)
		return 0;
	for (size_t i = map_slot(k, m->cap);; i = (i + 1) & (m->cap - 1)) {
		if (!m->val[i])
			return 0;
		if (m->key[i] == k)
			return m->val[i];
	}
}

static int map_grow(struct map *m)
{
	size_t cap = m->cap ? m->cap * 2 : 64;
	uint64_t *key = calloc(cap, sizeof(*key));
	uint8_t *val = calloc(cap, 1);
	if (!key || !val) {
		free(key);
		free(val);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->cap; i++) {
		if (!m->val[i])
			continue;
		size_t j = map_slot(m->key[i], cap);
		while (val[j])
			j = (j + 1) & (cap - 1);
		key[j] = m->key[i];
		val[j] = m->val[i];
	}
	free(m->key);
	free(m->val);
	m->key = key;
	m->val = val;
	m->cap = cap;
	return 0;
}

static int map_put(struct map *m, uint64_t k, uint8_t v)
{
	if (m->cap) {
		for (size_t i = map_slot(k, m->cap); m->val[i]; i = (i + 1) & (m->cap - 1)) {
			if (m->key[i] == k) {
				m->val[i] = v;
				return 0;
			}
		}
	}
	if (m->n >= m->max)
		return -E2BIG;
	if ((m->n + 1) * 2 > m->cap) {
		int r = map_grow(m);
		if (r)
			return r;
	}
	size_t i = map_slot(k, m->cap);
	while (m->val[i])
		i = (i + 1) & (m->cap - 1);
	m->key[i] = k;
	m->val[i] = v;
	m->n++;
	return 0;
}

/* d becomes a copy of s (its own arrays). */
static int map_copy(struct map *d, const struct map *s)
{
	if (d->cap != s->cap) {
		uint64_t *key = s->cap ? malloc(s->cap * sizeof(*key)) : NULL;
		uint8_t *val = s->cap ? malloc(s->cap) : NULL;
		if (s->cap && (!key || !val)) {
			free(key);
			free(val);
			return -ENOMEM;
		}
		free(d->key);
		free(d->val);
		d->key = key;
		d->val = val;
		d->cap = s->cap;
	}
	if (s->cap) {
		memcpy(d->key, s->key, s->cap * sizeof(*d->key));
		memcpy(d->val, s->val, s->cap);
	}
	d->n = s->n;
	d->max = s->max;
	return 0;
}

static void map_fini(struct map *m)
{
	free(m->key);
	free(m->val);
	memset(m, 0, sizeof(*m));
}

/* ---- buffered fd I/O */

struct rbuf {
	int fd;
	size_t pos, len;
	uint64_t total;
	uint8_t buf[PF_RBUF + PF_PAD];
};

struct wbuf {
	int fd;             /* -1: flushed into mem (the second thread's) */
	size_t len;
	uint64_t total;
	uint8_t *mem;       /* fd -1: mlen bytes flushed, of mcap */
	size_t mlen, mcap;
	uint8_t buf[PF_IOBUF];
};

/* 1 when bytes are buffered, 0 at end of file, or -errno. */
static int rb_fill(struct rbuf *r)
{
	if (r->pos < r->len)
		return 1;
	for (;;) {
		ssize_t n = read(r->fd, r->buf, PF_RBUF);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		r->pos = 0;
		r->len = (size_t)n;
		r->total += (uint64_t)n;
		return n > 0;
	}
}

/* Exactly n bytes into dst (NULL: skip them); running out is -EBADMSG. */
static int rb_take(struct rbuf *r, uint8_t *dst, uint64_t n)
{
	while (n) {
		int f = rb_fill(r);
		if (f < 0)
			return f;
		if (!f)
			return -EBADMSG;
		size_t k = r->len - r->pos;
		if (k > n)
			k = (size_t)n;
		if (dst) {
			memcpy(dst, r->buf + r->pos, k);
			dst += k;
		}
		r->pos += k;
		n -= k;
	}
	return 0;
}

/* A varint; *eof set (and 0 returned) on a clean end before its first byte. */
static int rb_varint(struct rbuf *r, uint64_t *v, bool *eof)
{
	*v = 0;
	if (eof)
		*eof = false;
	for (unsigned i = 0; i < 10; i++) {
		int f = rb_fill(r);
		if (f < 0)
			return f;
		if (!f) {
			if (i == 0 && eof) {
				*eof = true;
				return 0;
			}
			return -EBADMSG;
		}
		uint8_t b = r->buf[r->pos++];
		*v |= (uint64_t)(b & 0x7f) << (7 * i);
		if (!(b & 0x80))
			return 0;
	}
	return -EBADMSG;
}

/* The buffer out: to the fd, or (fd -1) onto mem. */
static int wb_flush(struct wbuf *w)
{
	if (w->fd < 0 && w->len) {
		if (w->len > PF_PAR_OUT - w->mlen)
			return -E2BIG;
		if (w->mlen + w->len > w->mcap) {
			size_t cap = w->mcap ? w->mcap : PF_IOBUF;
			while (cap < w->mlen + w->len)
				cap *= 2;
			uint8_t *g = realloc(w->mem, cap);
			if (!g)
				return -ENOMEM;
			w->mem = g;
			w->mcap = cap;
		}
		memcpy(w->mem + w->mlen, w->buf, w->len);
		w->mlen += w->len;
	} else {
		int r = util_write_all(w->fd, w->buf, w->len);
		if (r)
			return r;
	}
	w->total += w->len;
	w->len = 0;
	return 0;
}

static int wb_put(struct wbuf *w, const void *p, size_t n)
{
	const uint8_t *s = p;
	while (n) {
		if (w->len == sizeof(w->buf)) {
			int r = wb_flush(w);
			if (r)
				return r;
		}
		size_t k = sizeof(w->buf) - w->len;
		if (k > n)
			k = n;
		memcpy(w->buf + w->len, s, k);
		w->len += k;
		s += k;
		n -= k;
	}
	return 0;
}

/* ---- wire checks before protobuf-c sees a packet */

static int wire_varint(const uint8_t *p, size_t n, size_t *i, uint64_t *v)
{
	*v = 0;
	for (unsigned k = 0; k < 10; k++) {
		if (*i >= n)
			return -EBADMSG;
		uint8_t b = p[(*i)++];
		*v |= (uint64_t)(b & 0x7f) << (7 * k);
		if (!(b & 0x80))
			return 0;
	}
	return -EBADMSG;
}

/* Walk the wire form against the schema: well-formed framing, no groups,
 * known sub-messages nested at most PF_MAX_DEPTH deep. */
static int wire_check(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t n,
		      unsigned depth)
{
	if (depth > PF_MAX_DEPTH)
		return -EBADMSG;
	size_t i = 0;
	while (i < n) {
		uint64_t tag, len;
		if (wire_varint(p, n, &i, &tag) || (tag >> 3) == 0 || (tag >> 3) > 0x1fffffff)
			return -EBADMSG;
		switch (tag & 7) {
		case 0:
			if (wire_varint(p, n, &i, &len))
				return -EBADMSG;
			break;
		case 1:
		case 5: {
			size_t w = (tag & 7) == 1 ? 8 : 4;
			if (n - i < w)
				return -EBADMSG;
			i += w;
			break;
		}
		case 2: {
			if (wire_varint(p, n, &i, &len) || len > n - i)
				return -EBADMSG;
			const ProtobufCFieldDescriptor *f =
				protobuf_c_message_descriptor_get_field(d, (unsigned)(tag >> 3));
			if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
				int r = wire_check(f->descriptor, p + i, (size_t)len, depth + 1);
				if (r)
					return r;
			}
			i += (size_t)len;
			break;
		}
		default:
			return -EBADMSG;
		}
	}
	return 0;
}

/* protobuf-c keeps unknown fields and would write them back: drop them
 * everywhere, so only what the schema models can reach the app. */
static void strip_unknown(ProtobufCMessage *m)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;

	m->n_unknown_fields = 0;
	m->unknown_fields = NULL;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		if (f->type != PROTOBUF_C_TYPE_MESSAGE)
			continue;
		void *member = (char *)m + f->offset;
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = *(size_t *)((char *)m + f->quantifier_offset);
			ProtobufCMessage **a = *(ProtobufCMessage ***)member;
			for (size_t k = 0; k < n; k++)
				strip_unknown(a[k]);
			continue;
		}
		if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
		    *(uint32_t *)((char *)m + f->quantifier_offset) != f->id)
			continue;
		ProtobufCMessage *sub = *(ProtobufCMessage **)member;
		if (sub)
			strip_unknown(sub);
	}
}

/* ---- redaction state */

enum { ID_PID = 1, ID_TID = 2 };            /* ids: from the policy */
enum { LEARN_APP = 1, LEARN_GONE = 2 };     /* learned: forked by the app */
enum { SEQ_APP = 1, SEQ_FOREIGN = 2, SEQ_TRUSTED = 4 };
enum { TRK_APP = 1, TRK_FOREIGN = 2 };

struct dlp_ent {
	bool valid, changed;
	char in[DLP_CACHE_STR];
	char out[DLP_CACHE_STR * (sizeof(RDC_DLP_REPLACEMENT) - 1) + 1];
};

struct pf {
	const struct rdc_policy *p;
	struct rdc_stats *st;
	struct map ids, learned, seqs, tracks;
	struct arena ar;
	ProtobufCAllocator pa;
	uint64_t app_records, packets;
	uint64_t in_total;         /* bytes of the streams already read */
	bool kernel;               /* reading the kernel's stream */
	uint8_t *pkt, *out;
	size_t pktcap, outcap;
	uint8_t *lo;               /* the lean path's output: wb.buf or out */
	size_t locap;
	struct dlp_ent *cache;
	struct fev *fev;           /* the fast path's events, reused */
	size_t fevcap;
	/* The fast path's answers of is_app_tid, by tid's low byte: a switch
	 * names 2-3 tasks and a trace few hundred. Emptied when learn()
	 * changes who the app is. */
	struct { int32_t tid; bool set, app; } tidc[256];
	uint64_t learn_gen;        /* bumped when learned changes */
	struct par *par;           /* the kernel's stream on two threads, or NULL */
	struct probe *probe;       /* the runtime's stream ahead of it, or NULL */
	struct rbuf rb;
	struct wbuf wb;
};

static int ar_err(const struct pf *c)
{
	return c->ar.nomem ? -ENOMEM : -E2BIG;
}

/* The ids a guess took as not forked by the app (rt_*, below). */
struct probe {
	struct map ids;
	bool over; /* more than ids.max: the guess cannot be checked */
};

/* Forked by the app, as the kernel's stream taught (learn()). Ahead of
 * the kernel's stream (c->probe), the answer is a guess, "no", and the id
 * is noted for the check at its end. */
static bool learned_app(const struct pf *c, int32_t id)
{
	if (!c->probe)
		return map_get(&c->learned, (uint32_t)id) == LEARN_APP;
	if (!map_get(&c->probe->ids, (uint32_t)id) && map_put(&c->probe->ids, (uint32_t)id, 1))
		c->probe->over = true;
	return false;
}

static bool is_app_tid(const struct pf *c, int32_t tid)
{
	return map_get(&c->ids, (uint32_t)tid) || learned_app(c, tid);
}

static bool is_app_pid(const struct pf *c, int32_t pid)
{
	return map_get(&c->ids, (uint32_t)pid) == ID_PID || learned_app(c, pid);
}

/* A task the app created is the app's (docs/DESIGN.md §6: the process
 * tree rooted at its pids) until its id is handed out again by someone
 * else. */
static int learn(struct pf *c, int32_t id, bool app)
{
	uint8_t cur = map_get(&c->learned, (uint32_t)id);
	memset(c->tidc, 0, sizeof(c->tidc));
	if (app) {
		if (cur == LEARN_APP || map_get(&c->ids, (uint32_t)id))
			return 0;
		c->learn_gen++;
		return map_put(&c->learned, (uint32_t)id, LEARN_APP);
	}
	if (cur != LEARN_APP)
		return 0;
	c->learn_gen++;
	return map_put(&c->learned, (uint32_t)id, LEARN_GONE);
}

static uint8_t seq_state(const struct pf *c, uint32_t seq)
{
	return seq ? map_get(&c->seqs, seq) & (SEQ_APP | SEQ_FOREIGN) : 0;
}

/* trusted_pid is written by the tracing service, not the producer: when a
 * sequence has it, it alone decides. Two different answers: foreign. */
static int seq_trust(struct pf *c, uint32_t seq, int32_t pid)
{
	uint8_t cur = map_get(&c->seqs, seq);
	uint8_t want = SEQ_TRUSTED | (is_app_pid(c, pid) ? SEQ_APP : SEQ_FOREIGN);
	if (cur == want)
		return 0;
	if (cur & SEQ_TRUSTED)
		want = SEQ_TRUSTED | SEQ_FOREIGN;
	return map_put(&c->seqs, seq, want);
}

/* What a sequence's own packets say about it. Foreign evidence wins. */
static int seq_evidence(struct pf *c, uint32_t seq, uint8_t ev)
{
	if (!seq)
		return 0;
	uint8_t cur = map_get(&c->seqs, seq);
	if (cur & SEQ_TRUSTED)
		return 0;
	if (ev == SEQ_FOREIGN)
		return cur == SEQ_FOREIGN ? 0 : map_put(&c->seqs, seq, SEQ_FOREIGN);
	return cur ? 0 : map_put(&c->seqs, seq, SEQ_APP);
}

/* ---- string rewriting (arena memory, so no frees) */

static char *ar_strndup(struct pf *c, const char *s, size_t n)
{
	char *d = ar_alloc(&c->ar, n + 1);
	if (!d)
		return NULL;
	memcpy(d, s, n);
	d[n] = '\0';
	return d;
}

static int set_str(struct pf *c, char **field, const char *s)
{
	char *d = ar_strndup(c, s, strlen(s));
	if (!d)
		return ar_err(c);
	*field = d;
	return 0;
}

/* DLP scrub one string field in place; count it if it changed. */
static int scrub(struct pf *c, char **s)
{
	if (!c->p->dlp || !*s || !**s)
		return 0;
	size_t len = strlen(*s);
	/* A match consumes at least a byte and becomes one replacement. A hit
	 * takes the arena what a miss does: each thread of rdc_perfetto has a
	 * cache of its own, and a packet must fit (or not) on all alike. */
	size_t cap = len * (sizeof(RDC_DLP_REPLACEMENT) - 1) + 1;
	char *out = ar_alloc(&c->ar, cap);
	if (!out)
		return ar_err(c);
	struct dlp_ent *e = NULL;
	if (len < DLP_CACHE_STR) {
		e = &c->cache[util_str_hash(*s) % DLP_CACHE_N];
		if (e->valid && !strcmp(e->in, *s)) {
			if (!e->changed)
				return 0;
			c->st->scrubbed++;
			memcpy(out, e->out, strlen(e->out) + 1);
			*s = out;
			return 0;
		}
	}
	int changed = 0;
	int r = rdc_dlp_scrub(c->p->dlp, *s, out, cap, &changed);
	if (r)
		return r;
	if (e && strlen(out) < sizeof(e->out)) {
		memcpy(e->in, *s, len + 1);
		memcpy(e->out, out, strlen(out) + 1);
		e->changed = changed;
		e->valid = true;
	}
	if (changed) {
		*s = out;
		c->st->scrubbed++;
	}
	return 0;
}

static int scrub_all(struct pf *c, char **a, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int r = scrub(c, &a[i]);
		if (r)
			return r;
	}
	return 0;
}

/* Interned strings are bytes: scrubbed as text up to a first NUL, and
 * anything after such a NUL is dropped rather than passed unchecked. */
static int scrub_bytes(struct pf *c, ProtobufCBinaryData *b)
{
	if (!c->p->dlp || !b->len || !b->data)
		return 0;
	char *s = ar_strndup(c, (const char *)b->data, b->len);
	if (!s)
		return ar_err(c);
	int r = scrub(c, &s);
	if (r)
		return r;
	b->data = (uint8_t *)s;
	b->len = strlen(s);
	return 0;
}

/* Every annotation's name and string value: method events' recorded
 * arguments (annotations "arg<N>", docs/METHOD_EVENTS.md) included. */
static int scrub_annots(struct pf *c, Annot **a, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int r = 0;
		if (a[i]->name_field_case == PERFETTO__PROTOS__DEBUG_ANNOTATION__NAME_FIELD_NAME)
			r = scrub(c, &a[i]->name);
		if (!r && a[i]->value_case == PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_STRING_VALUE)
			r = scrub(c, &a[i]->string_value);
		if (!r && a[i]->value_case == PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_LEGACY_JSON_VALUE)
			r = scrub(c, &a[i]->legacy_json_value);
		if (!r)
			r = scrub_annots(c, a[i]->dict_entries, a[i]->n_dict_entries);
		if (!r)
			r = scrub_annots(c, a[i]->array_values, a[i]->n_array_values);
		if (r)
			return r;
	}
	return 0;
}

static int scrub_interned(struct pf *c, Perfetto__Protos__InternedData *d)
{
	int r = 0;
	for (size_t i = 0; !r && i < d->n_event_categories; i++)
		r = scrub(c, &d->event_categories[i]->name);
	for (size_t i = 0; !r && i < d->n_event_names; i++)
		r = scrub(c, &d->event_names[i]->name);
	for (size_t i = 0; !r && i < d->n_debug_annotation_names; i++)
		r = scrub(c, &d->debug_annotation_names[i]->name);
	for (size_t i = 0; !r && i < d->n_debug_annotation_string_values; i++)
		r = scrub_bytes(c, &d->debug_annotation_string_values[i]->str);
	return r;
}

/* ---- ftrace */

/* One side of a switch: the app's stays, anyone else's becomes the cpu's
 * synthetic task with no name. The idle task keeps pid 0, so idle time
 * still reads as idle. */
static int switch_side(struct pf *c, char **comm, protobuf_c_boolean has_pid, int32_t *pid,
		       int32_t synth, bool *app)
{
	if (has_pid && is_app_tid(c, *pid)) {
		*app = true;
		return scrub(c, comm);
	}
	*app = false;
	if (has_pid && *pid != 0)
		*pid = synth;
	return set_str(c, comm, "");
}

/* The task that was current when the event fired. */
static void anon_current(struct pf *c, FEvent *e, int32_t synth)
{
	if (e->has_pid && e->pid != 0 && !is_app_tid(c, (int32_t)e->pid))
		e->pid = (uint32_t)synth;
}

/* The three wakeup events share one layout. */
static int wakeup(struct pf *c, char **comm, protobuf_c_boolean has_pid, int32_t pid)
{
	if (!has_pid || !is_app_tid(c, pid))
		return 0;
	int r = scrub(c, comm);
	return r ? r : 1;
}

/* 1: keep (possibly rewritten), 0: drop, or -errno. */
static int ftrace_event(struct pf *c, FEvent *e, int32_t synth)
{
	int32_t cur = e->has_pid ? (int32_t)e->pid : -1;
	int r = 0;

	switch (e->event_case) {
	case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_SWITCH: {
		Perfetto__Protos__SchedSwitchFtraceEvent *s = e->sched_switch;
		bool pa, na;
		r = switch_side(c, &s->prev_comm, s->has_prev_pid, &s->prev_pid, synth, &pa);
		if (!r)
			r = switch_side(c, &s->next_comm, s->has_next_pid, &s->next_pid, synth, &na);
		if (r)
			return r;
		anon_current(c, e, synth);
		if (pa || na)
			c->app_records++;
		if (!pa || !na)
			c->st->anonymised++;
		return 1;
	}
	case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_WAKEUP:
		r = wakeup(c, &e->sched_wakeup->comm, e->sched_wakeup->has_pid, e->sched_wakeup->pid);
		break;
	case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_WAKING:
		r = wakeup(c, &e->sched_waking->comm, e->sched_waking->has_pid, e->sched_waking->pid);
		break;
	case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_WAKEUP_NEW:
		r = wakeup(c, &e->sched_wakeup_new->comm, e->sched_wakeup_new->has_pid,
			   e->sched_wakeup_new->pid);
		break;
	case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_TASK_RENAME: {
		Perfetto__Protos__TaskRenameFtraceEvent *t = e->task_rename;
		if (!t->has_pid || !is_app_tid(c, t->pid))
			return 0;
		r = scrub(c, &t->oldcomm);
		if (!r)
			r = scrub(c, &t->newcomm);
		r = r ? r : 1;
		break;
	}
	case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_TASK_NEWTASK: {
		/* Emitted by the parent: the current task. */
		Perfetto__Protos__TaskNewtaskFtraceEvent *t = e->task_newtask;
		bool app = e->has_pid && is_app_tid(c, cur);
		if (t->has_pid && (r = learn(c, t->pid, app)))
			return r;
		if (!app)
			return 0;
		r = scrub(c, &t->comm);
		r = r ? r : 1;
		break;
	}
	case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_PROCESS_FORK: {
		Perfetto__Protos__SchedProcessForkFtraceEvent *f = e->sched_process_fork;
		bool app = f->has_parent_pid && is_app_tid(c, f->parent_pid);
		if (f->has_child_pid && (r = learn(c, f->child_pid, app)))
			return r;
		if (!app)
			return 0;
		r = scrub(c, &f->parent_comm);
		if (!r)
			r = scrub(c, &f->child_comm);
		r = r ? r : 1;
		break;
	}
	case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_PROCESS_EXEC: {
		Perfetto__Protos__SchedProcessExecFtraceEvent *x = e->sched_process_exec;
		if (!x->has_pid || !is_app_tid(c, x->pid) ||
		    (x->has_old_pid && !is_app_tid(c, x->old_pid)))
			return 0;
		r = scrub(c, &x->filename);
		r = r ? r : 1;
		break;
	}
	case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_PROCESS_EXIT: {
		Perfetto__Protos__SchedProcessExitFtraceEvent *x = e->sched_process_exit;
		if (!x->has_pid || !is_app_tid(c, x->pid) ||
		    (x->has_tgid && !is_app_pid(c, x->tgid)))
			return 0;
		r = scrub(c, &x->comm);
		r = r ? r : 1;
		break;
	}
	case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_MARK_VICTIM:
		r = e->mark_victim->has_pid && is_app_tid(c, e->mark_victim->pid);
		break;
	case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_PRINT:
		/* trace_marker writes (atrace): the writer's own data. */
		if (!e->has_pid || !is_app_tid(c, cur))
			return 0;
		r = scrub(c, &e->print->buf);
		r = r ? r : 1;
		break;
	default:
		/* An event type we do not model: it cannot be checked. */
		return 0;
	}
	if (r > 0) {
		anon_current(c, e, synth);
		c->app_records++;
	}
	return r;
}

static int comm_remap(struct pf *c, Compact *cs, uint32_t *remap, char **tab, size_t *ntab,
		      uint32_t *idx)
{
	if (remap[*idx] == UINT32_MAX) {
		int r = scrub(c, &cs->intern_table[*idx]);
		if (r)
			return r;
		remap[*idx] = (uint32_t)*ntab;
		tab[(*ntab)++] = cs->intern_table[*idx];
	}
	*idx = remap[*idx];
	return 0;
}

/* Columnar sched_switch/sched_waking. A switch records only its next task
 * (the previous one is the last switch's next), so anonymising next_pid
 * covers both sides. The comm table is rebuilt: "" first, then only the
 * comms of app tasks still referenced. Returns the entries kept. */
static int64_t compact_sched(struct pf *c, Compact *cs, int32_t synth)
{
	size_t n = cs->n_switch_timestamp, m = cs->n_waking_timestamp, nt = cs->n_intern_table;
	int r;

	if (cs->n_switch_prev_state != n || cs->n_switch_next_pid != n ||
	    cs->n_switch_next_prio != n || cs->n_switch_next_comm_index != n ||
	    cs->n_waking_pid != m || cs->n_waking_target_cpu != m || cs->n_waking_prio != m ||
	    cs->n_waking_comm_index != m ||
	    (cs->n_waking_common_flags != m && cs->n_waking_common_flags != 0))
		return -EBADMSG;

	uint32_t *remap = ar_alloc(&c->ar, (nt + 1) * sizeof(*remap));
	char **tab = ar_alloc(&c->ar, (nt + 1) * sizeof(*tab));
	char *empty = ar_strndup(c, "", 0);
	if (!remap || !tab || !empty)
		return ar_err(c);
	memset(remap, 0xff, (nt + 1) * sizeof(*remap));
	size_t ntab = 0;
	tab[ntab++] = empty;

	for (size_t i = 0; i < n; i++) {
		if (cs->switch_next_comm_index[i] >= nt)
			return -EBADMSG;
		if (is_app_tid(c, cs->switch_next_pid[i])) {
			r = comm_remap(c, cs, remap, tab, &ntab, &cs->switch_next_comm_index[i]);
			if (r)
				return r;
			c->app_records++;
		} else {
			if (cs->switch_next_pid[i] != 0)
				cs->switch_next_pid[i] = synth;
			cs->switch_next_comm_index[i] = 0;
			c->st->anonymised++;
		}
	}

	/* Wakings of other tasks go; timestamps are deltas, so re-base them. */
	uint64_t abs = 0, last = 0;
	size_t k = 0;
	for (size_t i = 0; i < m; i++) {
		abs += cs->waking_timestamp[i];
		if (cs->waking_comm_index[i] >= nt)
			return -EBADMSG;
		if (!is_app_tid(c, cs->waking_pid[i])) {
			c->st->dropped++;
			continue;
		}
		uint32_t idx = cs->waking_comm_index[i];
		r = comm_remap(c, cs, remap, tab, &ntab, &idx);
		if (r)
			return r;
		cs->waking_timestamp[k] = abs - last;
		last = abs;
		cs->waking_pid[k] = cs->waking_pid[i];
		cs->waking_target_cpu[k] = cs->waking_target_cpu[i];
		cs->waking_prio[k] = cs->waking_prio[i];
		cs->waking_comm_index[k] = idx;
		if (cs->n_waking_common_flags)
			cs->waking_common_flags[k] = cs->waking_common_flags[i];
		k++;
		c->app_records++;
	}
	cs->n_waking_timestamp = cs->n_waking_pid = cs->n_waking_target_cpu = k;
	cs->n_waking_prio = cs->n_waking_comm_index = k;
	if (cs->n_waking_common_flags)
		cs->n_waking_common_flags = k;

	cs->intern_table = tab;
	cs->n_intern_table = (n || k) ? ntab : 0;
	return (int64_t)(n + k);
}

/* 1 if anything is left in the bundle, 0 if not, or -errno. */
static int ftrace_bundle(struct pf *c, Bundle *b)
{
	uint32_t cpu = b->has_cpu ? b->cpu : 0;
	if (cpu > PF_MAX_CPU)
		return -EBADMSG;
	int32_t synth = PF_SYNTH_BASE + (int32_t)cpu;
	size_t k = 0;
	int64_t left = 0;

	for (size_t i = 0; i < b->n_event; i++) {
		int r = ftrace_event(c, b->event[i], synth);
		if (r < 0)
			return r;
		if (r) {
			b->event[k++] = b->event[i];
			c->st->kept++;
		} else {
			c->st->dropped++;
		}
	}
	b->n_event = k;
	left = (int64_t)k;
	if (b->compact_sched) {
		int64_t n = compact_sched(c, b->compact_sched, synth);
		if (n < 0)
			return (int)n;
		c->st->kept += (uint64_t)n;
		left += n;
		if (!n)
			b->compact_sched = NULL;
	}
	return left > 0;
}

/* ---- process list: only the app's processes and threads */

static int process_tree(struct pf *c, Perfetto__Protos__ProcessTree *t)
{
	size_t k = 0;
	int r;

	for (size_t i = 0; i < t->n_processes; i++) {
		Perfetto__Protos__ProcessTree__Process *pr = t->processes[i];
		if (!pr->has_pid || !is_app_pid(c, pr->pid))
			continue;
		/* Usually zygote or init: not the app's to know. */
		if (pr->has_ppid && !is_app_pid(c, pr->ppid))
			pr->has_ppid = 0;
		if ((r = scrub_all(c, pr->cmdline, pr->n_cmdline)))
			return r;
		t->processes[k++] = pr;
	}
	t->n_processes = k;
	k = 0;
	for (size_t i = 0; i < t->n_threads; i++) {
		Perfetto__Protos__ProcessTree__Thread *th = t->threads[i];
		bool app = th->has_tgid ? is_app_pid(c, th->tgid) : (th->has_tid && is_app_tid(c, th->tid));
		if (!app)
			continue;
		if ((r = scrub(c, &th->name)))
			return r;
		t->threads[k++] = th;
	}
	t->n_threads = k;
	c->app_records += t->n_processes + t->n_threads;
	return t->n_processes + t->n_threads > 0;
}

/* ---- track events and their tracks */

static int track_descriptor(struct pf *c, TDesc *d, uint32_t seq)
{
	int isapp; /* 1 app, 0 someone else's, -1 cannot tell from the track */
	int r;

	if (d->process || d->thread) {
		isapp = 1;
		if (d->process && !(d->process->has_pid && is_app_pid(c, d->process->pid)))
			isapp = 0;
		if (d->thread) {
			Perfetto__Protos__ThreadDescriptor *th = d->thread;
			bool ok = th->has_pid ? is_app_pid(c, th->pid) : (th->has_tid && is_app_tid(c, th->tid));
			if (!ok)
				isapp = 0;
		}
		r = seq_evidence(c, seq, isapp ? SEQ_APP : SEQ_FOREIGN);
	} else {
		uint8_t parent = d->has_parent_uuid && d->parent_uuid ?
			map_get(&c->tracks, d->parent_uuid) : 0;
		isapp = parent == TRK_APP ? 1 : parent == TRK_FOREIGN ? 0 : -1;
		r = isapp == 1 ? seq_evidence(c, seq, SEQ_APP) : 0;
	}
	if (r)
		return r;

	uint8_t s = seq_state(c, seq);
	bool keep = s != SEQ_FOREIGN && (isapp == 1 || (isapp == -1 && s == SEQ_APP));
	/* uuid 0 is the implicit global track; nobody owns it. */
	if (d->has_uuid && d->uuid) {
		uint8_t cur = map_get(&c->tracks, d->uuid);
		if (!keep && cur != TRK_FOREIGN)
			r = map_put(&c->tracks, d->uuid, TRK_FOREIGN);
		else if (keep && !cur)
			r = map_put(&c->tracks, d->uuid, TRK_APP);
		if (r)
			return r;
	}
	if (!keep)
		return 0;
	r = scrub(c, &d->name);
	if (!r && d->process)
		r = scrub(c, &d->process->process_name);
	if (!r && d->process)
		r = scrub_all(c, d->process->cmdline, d->process->n_cmdline);
	if (!r && d->thread)
		r = scrub(c, &d->thread->thread_name);
	if (!r && d->counter)
		r = scrub_all(c, d->counter->categories, d->counter->n_categories);
	if (r)
		return r;
	c->app_records++;
	return 1;
}

static int track_event(struct pf *c, TEvent *ev, uint32_t seq)
{
	uint8_t trk = ev->has_track_uuid && ev->track_uuid ? map_get(&c->tracks, ev->track_uuid) : 0;
	int r;

	if (trk == TRK_APP && (r = seq_evidence(c, seq, SEQ_APP)))
		return r;
	uint8_t s = seq_state(c, seq);
	/* On the app's sequences everything but events on someone else's
	 * track; elsewhere (no sequence) only events on the app's tracks. */
	bool keep = s == SEQ_APP ? trk != TRK_FOREIGN : (!seq && trk == TRK_APP);
	if (!keep)
		return 0;
	r = 0;
	if (ev->name_field_case == PERFETTO__PROTOS__TRACK_EVENT__NAME_FIELD_NAME)
		r = scrub(c, &ev->name);
	if (!r)
		r = scrub_all(c, ev->categories, ev->n_categories);
	if (!r)
		r = scrub_annots(c, ev->debug_annotations, ev->n_debug_annotations);
	if (r)
		return r;
	c->app_records++;
	return 1;
}

/* ---- the kernel's bundles on the wire (the fast path)
 *
 * Nearly all of a system trace is the kernel's FtraceEventBundles of
 * sched_switch and wakeup events. Unpacking each with protobuf-c and
 * packing it again was most of this redactor's time, so a bundle made
 * only of those is read and rewritten here on the wire, with the same
 * rules and the same bytes out as the general path below (the order of
 * fields, proto2 presence, int32 sign extension and strings cut at a NUL,
 * as protobuf-c writes them). Anything else in the packet (another event
 * type, an unknown or repeated field, more than PF_FAST_EVENTS events,
 * malformed bytes) sends the whole packet to the general path, and the
 * fast path decides nothing before it knows it can do the whole packet.
 * test_rdc_perfetto's fast_equals_general holds the two equal. */

#define PF_FAST_EVENTS 8192

enum { FK_SWITCH = 4, FK_WAKEUP = 17, FK_WAKING = 20, FK_WAKEUP_NEW = 114 };

/* A comm string: into the packet or the arena. */
struct fstr {
	const char *s;
	size_t len;
};

/* Which optional fields an event has (proto2 presence), one bit each:
 * value slots 0-7, then the rest. */
enum { FH_TS = 1 << 8, FH_PID = 1 << 9, FH_COMM0 = 1 << 10, FH_COMM1 = 1 << 11 };
#define FH_SLOT(i) (1u << (i))
#define FH_COMM(k) (FH_COMM0 << (k))

struct fev {
	uint64_t ts;
	/* sched_switch: prev pid, prio, state in slots 0-2, next pid, prio in
	 * 4-5; wakeups: pid, prio, success, target_cpu in 0-3. */
	int64_t v[8];
	struct fstr comm[2]; /* switch: prev, next; wakeups: comm */
	size_t body, size;   /* the inner event's bytes, the event message's */
	uint32_t pid, kind, has;
	bool keep;
};

static inline __attribute__((always_inline)) int fw_varint(const uint8_t **p, const uint8_t *e, uint64_t *v)
{
	uint64_t x = 0;
	/* Tags, lengths, pids and prios: one byte nearly always. */
	if (*p < e && !(**p & 0x80)) {
		*v = *(*p)++;
		return 0;
	}
	for (unsigned k = 0; k < 10 && *p < e; k++) {
		uint8_t b = *(*p)++;
		x |= (uint64_t)(b & 0x7f) << (7 * k);
		if (!(b & 0x80)) {
			*v = x;
			return 0;
		}
	}
	return -1;
}

/* tag, then the value (varint) or the length (with *d at the bytes). */
static inline __attribute__((always_inline)) int fw_field(const uint8_t **p, const uint8_t *e, uint32_t *num, unsigned *wt,
		    uint64_t *v, const uint8_t **d)
{
	uint64_t tag;
	if (fw_varint(p, e, &tag) || (tag >> 3) == 0 || (tag >> 3) > 0x1fffffff)
		return -1;
	*num = (uint32_t)(tag >> 3);
	*wt = tag & 7;
	if (*wt == 0)
		return fw_varint(p, e, v);
	if (*wt != 2 || fw_varint(p, e, v) || *v > (uint64_t)(e - *p))
		return -1; /* fixed-width fields: none here are */
	*d = *p;
	*p += *v;
	return 0;
}

static inline size_t vsize(uint64_t v)
{
	/* 7 bits a byte: 1 + (index of the top bit) / 7 */
	return 1 + (size_t)(63 - __builtin_clzll(v | 1)) / 7;
}

static uint8_t *vput(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

/* protobuf-c writes an int32 as its int64 sign extension (10 bytes when
 * negative), a uint32 as itself. */
static uint64_t as_int32(int64_t v)
{
	return (uint64_t)(int64_t)(int32_t)v;
}

/* One event's fields; 0 when it is of a shape the fast path takes. */
static int fast_parse_event(struct fev *ev, const uint8_t *p, size_t n)
{
	const uint8_t *e = p + n, *body = NULL;
	uint64_t blen = 0;

	ev->kind = 0;
	ev->has = 0;
	while (p < e) {
		uint32_t num;
		unsigned wt;
		uint64_t v;
		const uint8_t *d = NULL;
		if (fw_field(&p, e, &num, &wt, &v, &d))
			return -1;
		if (num == 1 && wt == 0 && !(ev->has & FH_TS)) {
			ev->ts = v;
			ev->has |= FH_TS;
		} else if (num == 2 && wt == 0 && !(ev->has & FH_PID)) {
			ev->pid = (uint32_t)v;
			ev->has |= FH_PID;
		} else if ((num == FK_SWITCH || num == FK_WAKEUP || num == FK_WAKING ||
			    num == FK_WAKEUP_NEW) && wt == 2 && !ev->kind) {
			ev->kind = num;
			body = d;
			blen = v;
		} else {
			return -1;
		}
	}
	if (!ev->kind)
		return -1;
	p = body;
	e = body + blen;
	while (p < e) {
		uint32_t num;
		unsigned wt;
		uint64_t v;
		const uint8_t *d = NULL;
		if (fw_field(&p, e, &num, &wt, &v, &d))
			return -1;
		int slot = -1, comm = -1;
		if (ev->kind == FK_SWITCH) {
			/* prev_comm 1, prev_pid 2, prev_prio 3, prev_state 4,
			 * next_comm 5, next_pid 6, next_prio 7 */
			if (num == 1 || num == 5)
				comm = num == 5;
			else if (num >= 2 && num <= 4)
				slot = (int)num - 2;
			else if (num == 6 || num == 7)
				slot = (int)num - 2;
		} else {
			/* comm 1, pid 2, prio 3, success 4, target_cpu 5 */
			if (num == 1)
				comm = 0;
			else if (num >= 2 && num <= 5)
				slot = (int)num - 2;
		}
		if (comm >= 0 && wt == 2 && !(ev->has & FH_COMM(comm))) {
			const uint8_t *nul = memchr(d, 0, (size_t)v);
			ev->comm[comm] = (struct fstr){ (const char *)d,
							nul ? (size_t)(nul - d) : (size_t)v };
			ev->has |= FH_COMM(comm);
		} else if (slot >= 0 && wt == 0 && !(ev->has & FH_SLOT(slot))) {
			/* prev_state is an int64, the rest int32 */
			ev->v[slot] = ev->kind == FK_SWITCH && slot == 2 ? (int64_t)v :
				      (int64_t)(int32_t)(uint32_t)v;
			ev->has |= FH_SLOT(slot);
		} else {
			return -1;
		}
	}
	return 0;
}

/* DLP on an event's comm, as scrub() does on a C string. */
static int fast_scrub(struct pf *c, struct fev *ev, int k)
{
	struct fstr *f = &ev->comm[k];
	if (!c->p->dlp || !(ev->has & FH_COMM(k)) || !f->len)
		return 0;
	char *s = ar_strndup(c, f->s, f->len);
	if (!s)
		return ar_err(c);
	int r = scrub(c, &s);
	if (r)
		return r;
	f->s = s;
	f->len = strlen(s);
	return 0;
}

static inline bool fast_app_tid(struct pf *c, int32_t tid)
{
	uint32_t k = (uint32_t)tid & 255;
	if (!c->tidc[k].set || c->tidc[k].tid != tid) {
		c->tidc[k].tid = tid;
		c->tidc[k].set = true;
		c->tidc[k].app = is_app_tid(c, tid);
	}
	return c->tidc[k].app;
}

/* The rules of ftrace_event() for these kinds, on the parsed fields. */
static int fast_judge(struct pf *c, struct fev *ev, int32_t synth)
{
	int r;

	if (ev->kind == FK_SWITCH) {
		bool side[2];
		for (int k = 0; k < 2; k++) {
			int ps = k ? 4 : 0; /* pid slot */
			bool has = ev->has & FH_SLOT(ps);
			side[k] = has && fast_app_tid(c, (int32_t)ev->v[ps]);
			if (side[k]) {
				if ((r = fast_scrub(c, ev, k)))
					return r;
				continue;
			}
			if (has && ev->v[ps] != 0)
				ev->v[ps] = synth;
			ev->comm[k] = (struct fstr){ "", 0 };
			ev->has |= FH_COMM(k);
		}
		if (side[0] || side[1])
			c->app_records++;
		if (!side[0] || !side[1])
			c->st->anonymised++;
		ev->keep = true;
	} else {
		ev->keep = (ev->has & FH_SLOT(0)) && fast_app_tid(c, (int32_t)ev->v[0]);
		if (ev->keep && (r = fast_scrub(c, ev, 0)))
			return r;
		if (ev->keep)
			c->app_records++;
	}
	if (ev->keep && (ev->has & FH_PID) && ev->pid != 0 && !fast_app_tid(c, (int32_t)ev->pid))
		ev->pid = (uint32_t)synth;
	return 0;
}

/* The event message's body size, and the size of its inner event. */
static void fast_size(struct fev *ev)
{
	size_t in = 0;
	for (int k = 0; k < 2; k++)
		if (ev->has & FH_COMM(k))
			in += 1 + vsize(ev->comm[k].len) + ev->comm[k].len;
	for (int s = 0; s < 8; s++) {
		if (!(ev->has & FH_SLOT(s)))
			continue;
		bool i64 = ev->kind == FK_SWITCH && s == 2;
		in += 1 + vsize(i64 ? (uint64_t)ev->v[s] : as_int32(ev->v[s]));
	}
	ev->body = in;
	ev->size = (ev->has & FH_TS ? 1 + vsize(ev->ts) : 0) +
		   (ev->has & FH_PID ? 1 + vsize(ev->pid) : 0) +
		   vsize((uint64_t)ev->kind << 3 | 2) + vsize(in) + in;
}

static uint8_t *fast_put_event(uint8_t *o, const struct fev *ev)
{
	if (ev->has & FH_TS) {
		*o++ = 0x08;
		o = vput(o, ev->ts);
	}
	if (ev->has & FH_PID) {
		*o++ = 0x10;
		o = vput(o, ev->pid);
	}
	o = vput(o, (uint64_t)ev->kind << 3 | 2);
	o = vput(o, ev->body);
	/* Field order: switch 1 prev_comm, 2-4, 5 next_comm, 6-7; wakeups
	 * 1 comm, 2-5. Slot s is field s + 2. */
	for (uint32_t num = 1; num <= 7; num++) {
		int comm = -1, s = -1;
		if (num == 1)
			comm = 0;
		else if (ev->kind == FK_SWITCH && num == 5)
			comm = 1;
		else
			s = (int)num - 2;
		if (comm >= 0 && (ev->has & FH_COMM(comm))) {
			*o++ = (uint8_t)(num << 3 | 2);
			o = vput(o, ev->comm[comm].len);
			memcpy(o, ev->comm[comm].s, ev->comm[comm].len);
			o += ev->comm[comm].len;
		} else if (s >= 0 && s < 8 && (ev->has & FH_SLOT(s))) {
			bool i64 = ev->kind == FK_SWITCH && s == 2;
			*o++ = (uint8_t)(num << 3);
			o = vput(o, i64 ? (uint64_t)ev->v[s] : as_int32(ev->v[s]));
		}
	}
	return o;
}

/* A kernel packet's envelope: its one bundle, and the timestamp and
 * sequence id it may carry. */
struct kenv {
	const uint8_t *bundle;
	uint64_t blen, ts, seq;
	bool has_ts, has_seq;
};

/*
 * Both fast paths take a packet of exactly one bundle, a timestamp, a
 * sequence id and a trusted_pid (dropped: not carried from the kernel's),
 * each at most once: true with k filled, false for any other shape.
 */
static bool kernel_envelope(const uint8_t *p, size_t n, struct kenv *k)
{
	const uint8_t *e = p + n;
	bool has_tpid = false;

	*k = (struct kenv){ 0 };
	while (p < e) {
		uint32_t num;
		unsigned wt;
		uint64_t v;
		const uint8_t *d = NULL;
		if (fw_field(&p, e, &num, &wt, &v, &d))
			return false;
		if (num == 1 && wt == 2 && !k->bundle) {
			k->bundle = d;
			k->blen = v;
		} else if (num == 8 && wt == 0 && !k->has_ts) {
			k->ts = v;
			k->has_ts = true;
		} else if (num == 10 && wt == 0 && !k->has_seq) {
			k->seq = (uint32_t)v;
			k->has_seq = true;
		} else if (num == 79 && wt == 0 && !has_tpid) {
			has_tpid = true;
		} else {
			return false;
		}
	}
	return k->bundle != NULL;
}

/*
 * A kernel packet of one bundle of switch and wakeup events: 1 done
 * (written or dropped), 0 not of that shape (the general path takes it),
 * or -errno.
 */
static int fast_bundle_any(struct pf *c, const uint8_t *p, size_t n)
{
	if (!n)
		return 0; /* an empty packet: p may be NULL */
	struct kenv k;
	uint64_t cpu = 0;
	bool has_cpu = false;
	size_t nev = 0;
	int r;

	if (!kernel_envelope(p, n, &k))
		return 0;
	const uint8_t *e;
	/* Pass 1: every event parsed, nothing decided. */
	for (p = k.bundle, e = k.bundle + k.blen; p < e;) {
		uint32_t num;
		unsigned wt;
		uint64_t v;
		const uint8_t *d = NULL;
		if (fw_field(&p, e, &num, &wt, &v, &d))
			return 0;
		if (num == 1 && wt == 0 && !has_cpu) {
			cpu = (uint32_t)v;
			has_cpu = true;
			continue;
		}
		if (num != 2 || wt != 2 || nev >= PF_FAST_EVENTS)
			return 0;
		if (nev == c->fevcap) {
			size_t ncap = c->fevcap ? c->fevcap * 2 : 512;
			struct fev *g = realloc(c->fev, ncap * sizeof(*g));
			if (!g)
				return -ENOMEM;
			c->fev = g;
			c->fevcap = ncap;
		}
		if (fast_parse_event(&c->fev[nev], d, (size_t)v))
			return 0;
		nev++;
	}
	if (!nev || cpu > PF_MAX_CPU)
		return 0; /* the general path's answer: dropped, or malformed */

	/* Pass 2: the rules, then the sizes. */
	int32_t synth = PF_SYNTH_BASE + (int32_t)cpu;
	size_t kept = 0, bsize = has_cpu ? 1 + vsize(cpu) : 0;
	for (size_t i = 0; i < nev; i++) {
		struct fev *ev = &c->fev[i];
		if ((r = fast_judge(c, ev, synth)))
			return r;
		if (!ev->keep) {
			c->st->dropped++;
			continue;
		}
		c->st->kept++;
		kept++;
		fast_size(ev);
		bsize += 1 + vsize(ev->size) + ev->size;
	}
	if (!kept)
		return 1;
	size_t psize = 1 + vsize(bsize) + bsize + (k.has_ts ? 1 + vsize(k.ts) : 0) +
		       (k.has_seq ? 1 + vsize(k.seq) : 0);
	size_t need = 1 + vsize(psize) + psize;
	/* Written straight into the write buffer when it fits there. */
	bool direct = need <= sizeof(c->wb.buf);
	if (direct && sizeof(c->wb.buf) - c->wb.len < need && (r = wb_flush(&c->wb)))
		return r;
	if (!direct && need > c->outcap) {
		uint8_t *g = realloc(c->out, need);
		if (!g)
			return -ENOMEM;
		c->out = g;
		c->outcap = need;
	}
	/* Pass 3: the bytes, in protobuf-c's field order. */
	uint8_t *start = direct ? c->wb.buf + c->wb.len : c->out, *o = start;
	*o++ = 0x0a; /* Trace.packet */
	o = vput(o, psize);
	*o++ = 0x0a; /* TracePacket.ftrace_events */
	o = vput(o, bsize);
	if (has_cpu) {
		*o++ = 0x08;
		o = vput(o, cpu);
	}
	for (size_t i = 0; i < nev; i++) {
		if (!c->fev[i].keep)
			continue;
		*o++ = 0x12;
		o = vput(o, c->fev[i].size);
		o = fast_put_event(o, &c->fev[i]);
	}
	if (k.has_ts) {
		*o++ = 0x40;
		o = vput(o, k.ts);
	}
	if (k.has_seq) {
		*o++ = 0x50;
		o = vput(o, k.seq);
	}
	if ((size_t)(o - start) != need)
		return -EIO; /* a size and its bytes disagree: a bug, never output */
	if (direct) {
		c->wb.len += need;
		return 1;
	}
	r = wb_put(&c->wb, c->out, need);
	return r ? r : 1;
}

/* ---- the kernel's bundles as protobuf-c writes them (the lean path)
 *
 * perf record -g of the bench's large trace (200 MB, 3.9 M sched_switch)
 * on main put 78 % of the time in the fast path above, spread evenly over
 * its three passes: parsing every field into struct fev, sizing and
 * re-encoding each one. Yet a canonical switch (fields in number order,
 * minimal varints, non-negative int32s, as protobuf-c and profilingd-ftrace
 * write them) comes out as its own bytes but for at most five fields: the
 * current pid and the two sides' pids and comms. So a bundle whose cpu
 * comes first is read once here, each canonical switch judged with
 * fast_judge()'s rules and written as its input spans with those fields
 * replaced; any other event (a wakeup, a negative prio, a padded varint)
 * goes through fast_parse_event()/fast_put_event() in place, and a bundle
 * of another shape through fast_bundle_any(). After (same input): this
 * path 72 % of a CPU time cut from ~0.45 s to ~0.29 s, protobuf-c on the
 * runtime's packets 11 %, the read copy 4 %. Equal bytes out:
 * test_rdc_perfetto's fast_equals_general, lean_noncanonical, lean_grows. */

/* A varint as protobuf-c writes it, of at most max bytes: -1 for a padded
 * (non-minimal), longer or truncated one. */
static inline __attribute__((always_inline)) int lv(const uint8_t **p, const uint8_t *e,
						    unsigned max, uint64_t *v)
{
	const uint8_t *q = *p;
	if (q < e && !(*q & 0x80)) {
		*v = *q;
		*p = q + 1;
		return 0;
	}
	uint64_t x = 0;
	for (unsigned k = 0; k < max && q < e; k++) {
		uint8_t b = *q++;
		x |= (uint64_t)(b & 0x7f) << (7 * k);
		if (!(b & 0x80)) {
			if (!b)
				return -1;
			*v = x;
			*p = q;
			return 0;
		}
	}
	return -1;
}

/* n bytes of a packet: up to 16 are copied as 16 (PF_PAD on both sides). */
static inline __attribute__((always_inline)) uint8_t *lcpy(uint8_t *o, const uint8_t *s, size_t n)
{
	if (n <= 16)
		memcpy(o, s, 16);
	else
		memcpy(o, s, n);
	return o + n;
}

static int out_room(struct pf *c, size_t need)
{
	if (need <= c->outcap)
		return 0;
	size_t cap = c->outcap ? c->outcap : 64u << 10;
	while (cap < need)
		cap *= 2;
	uint8_t *g = realloc(c->out, cap + PF_PAD);
	if (!g)
		return -ENOMEM;
	c->out = g;
	c->outcap = cap;
	return 0;
}

/* Room for need bytes at c->lo: in the write buffer while they fit there,
 * else in c->out, the used bytes moved along. */
static int lo_room(struct pf *c, size_t need, size_t used)
{
	if (need <= c->locap)
		return 0;
	bool inwb = c->lo != c->out; /* before out_room() moves c->out */
	int r = out_room(c, need);
	if (r)
		return r;
	if (inwb)
		memcpy(c->out, c->lo, used);
	c->lo = c->out;
	c->locap = c->outcap;
	return 0;
}

/* A comm that replaces the input's, when set: "" for another task's, or
 * the app's after DLP changed it. */
struct lrep {
	const char *s;
	size_t len;
	bool set;
};

/* The cpu's synthetic tid (PF_SYNTH_BASE + cpu) and its varint (5 bytes:
 * it is below 2^31). */
struct lsynth {
	int32_t tid;
	size_t len;
	uint8_t enc[8];
};

/* A string field, tag first. */
static inline __attribute__((always_inline)) uint8_t *lstr(uint8_t *o, uint8_t tag,
							  const struct lrep *s)
{
	*o++ = tag;
	o = vput(o, s->len);
	memcpy(o, s->s, s->len);
	return o + s->len;
}

/* A pid field holding the synthetic tid: 9 bytes stored, inside PF_PAD. */
static inline __attribute__((always_inline)) uint8_t *lsyn(uint8_t *o, uint8_t tag,
							  const struct lsynth *y)
{
	*o = tag;
	memcpy(o + 1, y->enc, sizeof(y->enc));
	return o + 1 + y->len;
}

/*
 * One FtraceEvent message [p, p + n), if it is a canonical sched_switch:
 * judged, and written at c->lo + *used as a bundle's event field.
 * 1 written, 0 not canonical (nothing decided, nothing written), -errno.
 */
static int lean_switch(struct pf *c, const uint8_t *p, size_t n, const struct lsynth *y,
		       size_t *used)
{
	static const uint8_t tag[8] = { 0, 0x0a, 0x10, 0x18, 0x20, 0x2a, 0x30, 0x38 };
	const uint8_t *q = p, *e = p + n, *pidf, *kind;
	const uint8_t *a[8]; /* where the body's field k ends (a[k - 1]: absent) */
	uint64_t v, blen, cur = 0, val[8] = { 0 };

	if (q < e && *q == 0x08 && (++q, lv(&q, e, 9, &v)))
		return 0; /* timestamp: 9 bytes hold any value below 2^63 */
	pidf = q;
	if (q < e && *q == 0x10 && (++q, lv(&q, e, 5, &cur) || cur > UINT32_MAX))
		return 0;
	bool hascur = q != pidf;
	kind = q;
	if (q >= e || *q++ != 0x22 || lv(&q, e, 5, &blen) || blen != (uint64_t)(e - q))
		return 0; /* a field after the switch: not canonical */
	a[0] = q;
#pragma GCC unroll 8
	for (unsigned k = 1; k <= 7; k++) {
		if (q < e && *q == tag[k]) {
			q++;
			if (k == 1 || k == 5) {
				if (lv(&q, e, 5, &v) || v > (uint64_t)(e - q))
					return 0;
				q += v;
			} else if (lv(&q, e, k == 4 ? 9 : 5, &v) || (k != 4 && v > INT32_MAX)) {
				return 0; /* a negative int32 is 10 bytes: fast_put_event's */
			}
			val[k] = v;
		}
		a[k] = q;
	}
	if (q != e)
		return 0;

	/* The rules of fast_judge(), side by side: prev (fields 1, 2), next (5, 6). */
	struct lrep comm[2] = { { "", 0, true }, { "", 0, true } };
	bool app[2], newpid[2];
	for (int k = 0; k < 2; k++) {
		unsigned cf = k ? 5 : 1, pf = cf + 1;
		bool has = a[pf] != a[pf - 1];
		app[k] = has && fast_app_tid(c, (int32_t)val[pf]);
		newpid[k] = !app[k] && has && val[pf] != 0;
		if (!app[k])
			continue;
		comm[k].set = false;
		if (a[cf] == a[cf - 1])
			continue;
		const uint8_t *s = a[cf] - val[cf];
		for (size_t i = 0; i < val[cf]; i++)
			if (!s[i])
				return 0; /* cut at the NUL: fast_scrub's */
		if (!c->p->dlp || !val[cf])
			continue;
		char *d = ar_strndup(c, (const char *)s, (size_t)val[cf]), *o = d;
		if (!d)
			return ar_err(c);
		int r = scrub(c, &d);
		if (r)
			return r;
		if (d != o || strlen(d) != val[cf])
			comm[k] = (struct lrep){ d, strlen(d), true };
	}
	bool newcur = hascur && cur != 0 && !fast_app_tid(c, (int32_t)cur);
	if (app[0] || app[1])
		c->app_records++;
	if (!app[0] || !app[1])
		c->st->anonymised++;

	/* Sizes, from the input's and the replacements'. */
	size_t sp = 1 + y->len, body = (size_t)blen;
	for (int k = 0; k < 2; k++) {
		unsigned cf = k ? 5 : 1, pf = cf + 1;
		if (comm[k].set)
			body = body - (size_t)(a[cf] - a[cf - 1]) + 1 + vsize(comm[k].len) +
			       comm[k].len;
		if (newpid[k])
			body = body - (size_t)(a[pf] - a[pf - 1]) + sp;
	}
	size_t evsz = (newcur ? (size_t)(pidf - p) + sp : (size_t)(kind - p)) + 1 + vsize(body) + body;
	int r = lo_room(c, *used + 1 + vsize(evsz) + evsz + PF_PAD, *used);
	if (r)
		return r;

	uint8_t *o = c->lo + *used;
	*o++ = 0x12;
	o = vput(o, evsz);
	if (newcur)
		o = lsyn(lcpy(o, p, (size_t)(pidf - p)), 0x10, y);
	else
		o = lcpy(o, p, (size_t)(kind - p));
	*o++ = 0x22;
	o = vput(o, body);
	o = comm[0].set ? lstr(o, 0x0a, &comm[0]) : lcpy(o, a[0], (size_t)(a[1] - a[0]));
	o = newpid[0] ? lsyn(o, 0x10, y) : lcpy(o, a[1], (size_t)(a[2] - a[1]));
	o = lcpy(o, a[2], (size_t)(a[4] - a[2]));
	o = comm[1].set ? lstr(o, 0x2a, &comm[1]) : lcpy(o, a[4], (size_t)(a[5] - a[4]));
	o = newpid[1] ? lsyn(o, 0x30, y) : lcpy(o, a[5], (size_t)(a[6] - a[5]));
	o = lcpy(o, a[6], (size_t)(a[7] - a[6]));
	*used = (size_t)(o - c->lo);
	return 1;
}

/*
 * A kernel packet of one bundle whose cpu comes first: 1 done (written or
 * dropped), 0 not of that shape (fast_bundle_any() takes it, and nothing
 * counted here stays counted), or -errno.
 */
static int lean_bundle(struct pf *c, const uint8_t *p, size_t n)
{
	struct kenv k;
	uint64_t cpu;
	int r;

	if (!kernel_envelope(p, n, &k))
		return 0;
	const uint8_t *e = k.bundle + k.blen;
	p = k.bundle;
	if (p >= e || *p++ != 0x08 || lv(&p, e, 5, &cpu) || cpu > PF_MAX_CPU)
		return 0;

	/* Counted as we go; given back if the bundle turns out not ours. */
	struct rdc_stats st0 = *c->st;
	uint64_t app0 = c->app_records;
	int32_t synth = PF_SYNTH_BASE + (int32_t)cpu;
	struct lsynth y = { .tid = synth };
	y.len = (size_t)(vput(y.enc, (uint32_t)synth) - y.enc);
	size_t used = 0, nev = 0, kept = 0;
	/* Written in the write buffer past room for the headers, guessed from
	 * the input's (the same varint sizes nearly always), while it fits. */
	size_t guess = 2 + vsize(n) + vsize(k.blen);
	if (sizeof(c->wb.buf) - c->wb.len < guess + n + LEAN_TAIL && c->wb.len &&
	    (r = wb_flush(&c->wb)))
		return r;
	size_t room = sizeof(c->wb.buf) - c->wb.len;
	c->lo = c->out;
	c->locap = c->outcap;
	if (room >= guess + LEAN_TAIL + 64) {
		c->lo = c->wb.buf + c->wb.len + guess;
		c->locap = room - guess - LEAN_TAIL;
	}
	if ((r = lo_room(c, 16, 0)))
		return r;
	c->lo[used++] = 0x08;
	used = (size_t)(vput(c->lo + used, cpu) - c->lo);
	while (p < e) {
		uint64_t len;
		if (*p != 0x12 || (++p, lv(&p, e, 5, &len)) || len > (uint64_t)(e - p) ||
		    ++nev > PF_FAST_EVENTS)
			goto other;
		const uint8_t *d = p;
		p += len;
		r = lean_switch(c, d, (size_t)len, &y, &used);
		if (r < 0)
			return r;
		if (r) {
			c->st->kept++;
			kept++;
			continue;
		}
		/* Not a canonical switch: the fast path's way, this event alone. */
		struct fev ev;
		if (fast_parse_event(&ev, d, (size_t)len))
			goto other;
		if ((r = fast_judge(c, &ev, synth)))
			return r;
		if (!ev.keep) {
			c->st->dropped++;
			continue;
		}
		c->st->kept++;
		kept++;
		fast_size(&ev);
		if ((r = lo_room(c, used + 1 + vsize(ev.size) + ev.size, used)))
			return r;
		uint8_t *o = c->lo + used;
		*o++ = 0x12;
		o = vput(o, ev.size);
		used = (size_t)(fast_put_event(o, &ev) - c->lo);
	}
	if (!nev)
		goto other; /* the general path's answer: dropped */
	if (!kept)
		return 1;

	size_t psize = 1 + vsize(used) + used + (k.has_ts ? 1 + vsize(k.ts) : 0) +
		       (k.has_seq ? 1 + vsize(k.seq) : 0);
	uint8_t hd[24], tl[24], *h = hd, *t = tl;
	*h++ = 0x0a; /* Trace.packet */
	h = vput(h, psize);
	*h++ = 0x0a; /* TracePacket.ftrace_events */
	h = vput(h, used);
	if (k.has_ts) {
		*t++ = 0x40;
		t = vput(t, k.ts);
	}
	if (k.has_seq) {
		*t++ = 0x50;
		t = vput(t, k.seq);
	}
	size_t hn = (size_t)(h - hd), tn = (size_t)(t - tl);
	if (c->lo != c->out) {
		/* hn - guess <= 8 and tn <= 17: inside LEAN_TAIL */
		uint8_t *start = c->wb.buf + c->wb.len;
		if (hn != guess)
			memmove(start + hn, c->lo, used);
		memcpy(start, hd, hn);
		memcpy(start + hn + used, tl, tn);
		c->wb.len += hn + used + tn;
		return 1;
	}
	if ((r = wb_put(&c->wb, hd, hn)) || (r = wb_put(&c->wb, c->out, used)) ||
	    (r = wb_put(&c->wb, tl, tn)))
		return r;
	return 1;
other:
	*c->st = st0;
	c->app_records = app0;
	return 0;
}

/* The kernel's packet by the lean path, else the fast path: 1 done, 0 the
 * general path's, or -errno. */
static int fast_bundle(struct pf *c, const uint8_t *p, size_t n)
{
	if (!n)
		return 0; /* an empty packet: p may be NULL */
	int r = lean_bundle(c, p, n);
	return r ? r : fast_bundle_any(c, p, n);
}

/* ---- the runtime's track events on the wire (the lean track path)
 *
 * Why: a runtime's stream is nearly all slices, TracePacket{timestamp,
 * sequence, track_event{type, track_uuid, name}}, and protobuf-c's
 * unpack, pack and wire_check of them took ~20 % of the bench trace's CPU
 * (0.15 s of 0.68 s on one thread) for 2.4 % of its bytes. A packet of
 * that shape, written as protobuf-c writes it (fields in number order,
 * each once, minimal varints, strings without a NUL), is judged by
 * track_event() itself, on a TrackEvent built here from the wire, and
 * written back as its own bytes: without trusted_pid (79, which comes
 * last), and with what DLP changed re-encoded. Any other packet (another
 * field, debug annotations, interned data, sequence flags) goes to the
 * general path, which writes the same bytes for the packets taken here
 * (test_rdc_perfetto's track_lean_equals_general). It decides nothing
 * before it knows it can do the whole packet.
 */

#define LT_CATS 8 /* categories of one event; more: the general path */

/* A string field's bytes [at, at + len): no NUL (protobuf-c's copy would
 * end there, and so would what it writes back). */
static inline bool lt_str(const uint8_t **q, const uint8_t *e, const uint8_t **at, size_t *len)
{
	uint64_t n;
	if (lv(q, e, 5, &n) || n > (uint64_t)(e - *q) || memchr(*q, 0, (size_t)n))
		return false;
	*at = *q;
	*len = (size_t)n;
	*q += n;
	return true;
}

/* A string field, tag (22 or 23, two bytes) first, into the write buffer. */
static int lt_put(struct pf *c, uint8_t num, const char *s)
{
	uint8_t h[12] = { (uint8_t)(num << 3 | 2), 0x01 };
	size_t n = strlen(s), k = (size_t)(vput(h + 2, n) - h);
	int r = wb_put(&c->wb, h, k);
	return r ? r : wb_put(&c->wb, s, n);
}

/* A runtime packet: 1 done (written or dropped), 0 the general path's,
 * or -errno. */
static int lean_track(struct pf *c, const uint8_t *p, size_t n)
{
	const uint8_t *q = p, *e = p + n, *tag, *te, *tee, *strs, *name = NULL;
	const uint8_t *cat[LT_CATS];
	size_t catn[LT_CATS], ncat = 0, namen = 0;
	uint64_t v, seq = 0, tpid = 0;
	bool has_tpid = false;
	int r;

	if (q < e && *q == 0x40 && (++q, lv(&q, e, 9, &v)))
		return 0; /* timestamp */
	if (q < e && *q == 0x50 && (++q, lv(&q, e, 5, &seq) || seq > UINT32_MAX))
		return 0; /* trusted_packet_sequence_id */
	tag = q;
	if (q >= e || *q++ != 0x5a || lv(&q, e, 5, &v) || v > (uint64_t)(e - q))
		return 0; /* track_event */
	te = q;
	tee = q = q + v;
	if (q < e) {
		/* trusted_pid: an int32, so a negative one is 10 bytes */
		if (e - q < 2 || q[0] != 0xf8 || q[1] != 0x04)
			return 0;
		q += 2;
		if (lv(&q, e, 5, &tpid) || tpid > INT32_MAX || q != e)
			return 0;
		has_tpid = true;
	}

	TEvent ev = PERFETTO__PROTOS__TRACK_EVENT__INIT;
	q = te;
	if (q < tee && *q == 0x48 && (++q, lv(&q, tee, 5, &v) || v > INT32_MAX))
		return 0; /* type: read by nobody here, copied */
	if (q < tee && *q == 0x50) {
		if (++q, lv(&q, tee, 9, &v))
			return 0;
		ev.name_field_case = PERFETTO__PROTOS__TRACK_EVENT__NAME_FIELD_NAME_IID;
		ev.name_iid = v;
	}
	if (q < tee && *q == 0x58) {
		if (++q, lv(&q, tee, 9, &v))
			return 0;
		ev.has_track_uuid = 1;
		ev.track_uuid = v;
	}
	strs = q;
	while (tee - q >= 2 && q[0] == 0xb2 && q[1] == 0x01) {
		q += 2;
		if (ncat == LT_CATS || !lt_str(&q, tee, &cat[ncat], &catn[ncat]))
			return 0;
		ncat++;
	}
	if (tee - q >= 2 && q[0] == 0xba && q[1] == 0x01) {
		q += 2;
		/* name and name_iid are one oneof: the last would win */
		if (ev.name_field_case || !lt_str(&q, tee, &name, &namen))
			return 0;
	}
	if (q != tee)
		return 0;

	/* As the general path has them: arena copies, NUL-terminated. */
	char *cats[LT_CATS], *was[LT_CATS + 1];
	for (size_t i = 0; i < ncat; i++) {
		if (!(cats[i] = was[i] = ar_strndup(c, (const char *)cat[i], catn[i])))
			return ar_err(c);
	}
	ev.n_categories = ncat;
	ev.categories = cats;
	was[ncat] = NULL;
	if (name) {
		ev.name_field_case = PERFETTO__PROTOS__TRACK_EVENT__NAME_FIELD_NAME;
		if (!(ev.name = was[ncat] = ar_strndup(c, (const char *)name, namen)))
			return ar_err(c);
	}

	/* packet()'s steps for a track event with nothing else beside it. */
	uint32_t s = (uint32_t)seq;
	if (s && has_tpid && (r = seq_trust(c, s, (int32_t)tpid)))
		return r;
	if ((r = track_event(c, &ev, s)) < 0)
		return r;
	if (!r) {
		c->st->dropped++;
		return 1;
	}
	c->st->kept++;

	bool same = !name || ev.name == was[ncat];
	for (size_t i = 0; i < ncat; i++)
		same = same && cats[i] == was[i];
	uint8_t h[24], *o = h;
	size_t before = (size_t)(tag - p);
	*o++ = 0x0a; /* Trace.packet */
	if (same) {
		/* trusted_pid, if any, is the tail: cut off */
		size_t body = (size_t)(tee - p);
		o = vput(o, body);
		if ((r = wb_put(&c->wb, h, (size_t)(o - h))) || (r = wb_put(&c->wb, p, body)))
			return r;
		return 1;
	}
	size_t evlen = (size_t)(strs - te);
	for (size_t i = 0; i < ncat; i++) {
		size_t l = strlen(cats[i]);
		evlen += 2 + vsize(l) + l;
	}
	if (name) {
		size_t l = strlen(ev.name);
		evlen += 2 + vsize(l) + l;
	}
	o = vput(o, before + 1 + vsize(evlen) + evlen);
	size_t hn = (size_t)(o - h);
	*o++ = 0x5a;
	o = vput(o, evlen);
	if ((r = wb_put(&c->wb, h, hn)) || (r = wb_put(&c->wb, p, before)) ||
	    (r = wb_put(&c->wb, h + hn, (size_t)(o - h) - hn)) ||
	    (r = wb_put(&c->wb, te, (size_t)(strs - te))))
		return r;
	for (size_t i = 0; i < ncat; i++)
		if ((r = lt_put(c, 22, cats[i])))
			return r;
	if (name && (r = lt_put(c, 23, ev.name)))
		return r;
	return 1;
}

/* ---- one packet */

static int write_packet(struct pf *c, const Packet *pkt)
{
	size_t sz = perfetto__protos__trace_packet__get_packed_size(pkt);
	if (sz > c->outcap) {
		uint8_t *o = realloc(c->out, sz);
		if (!o)
			return -ENOMEM;
		c->out = o;
		c->outcap = sz;
	}
	perfetto__protos__trace_packet__pack(pkt, c->out);
	uint8_t hdr[11];
	size_t h = 0;
	hdr[h++] = 0x0a; /* Trace.packet: field 1, length-delimited */
	for (uint64_t v = sz; ; v >>= 7) {
		hdr[h++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		if (v <= 0x7f)
			break;
	}
	int r = wb_put(&c->wb, hdr, h);
	return r ? r : wb_put(&c->wb, c->out, sz);
}

/* A packet of the kernel's stream: scheduling data and the process list,
 * which are the only source of forks, exits and renames; clock snapshots.
 * Nothing else is expected from profilingd-ftrace, so nothing else passes,
 * and no per-sequence state (interning, defaults) travels with it. */
static int kernel_packet(struct pf *c, Packet *pkt)
{
	int r;
	switch (pkt->data_case) {
	case PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS:
		/* kept/dropped are counted per ftrace record */
		if ((r = ftrace_bundle(c, pkt->ftrace_events)) <= 0)
			return r;
		break;
	case PERFETTO__PROTOS__TRACE_PACKET__DATA_PROCESS_TREE:
		if ((r = process_tree(c, pkt->process_tree)) < 0)
			return r;
		c->st->kept += r > 0;
		c->st->dropped += r == 0;
		if (!r)
			return 0;
		break;
	case PERFETTO__PROTOS__TRACE_PACKET__DATA_CLOCK_SNAPSHOT:
		c->st->kept++;
		break;
	default:
		c->st->dropped++;
		return 0;
	}
	pkt->interned_data = NULL;
	pkt->trace_packet_defaults = NULL;
	pkt->has_sequence_flags = 0;
	pkt->has_incremental_state_cleared = 0;
	pkt->has_trusted_pid = 0;
	return write_packet(c, pkt);
}

/* A packet by its stream's wire path: the kernel's bundles, the runtime's
 * track events. 1 done, 0 the general path's, or -errno. */
static int wire_packet(struct pf *c, const uint8_t *buf, size_t len)
{
	if (!len || c->p->pf_no_wire)
		return 0; /* an empty packet: buf may be NULL */
	return c->kernel ? fast_bundle(c, buf, len) : lean_track(c, buf, len);
}

/* fast: a wire path may take it (not yet tried on it). */
static int packet(struct pf *c, const uint8_t *buf, size_t len, bool fast)
{
	ar_reset(&c->ar);
	int r;
	if (fast && (r = wire_packet(c, buf, len)))
		return r < 0 ? r : 0;
	r = wire_check(&perfetto__protos__trace_packet__descriptor, buf, len, 0);
	if (r)
		return r;
	Packet *pkt = perfetto__protos__trace_packet__unpack(&c->pa, len, buf);
	if (!pkt)
		return c->ar.nomem ? -ENOMEM : c->ar.over ? -E2BIG : -EBADMSG;
	strip_unknown(&pkt->base);

	if (c->kernel)
		return kernel_packet(c, pkt);

	uint32_t seq = pkt->has_trusted_packet_sequence_id ? pkt->trusted_packet_sequence_id : 0;
	if (seq && pkt->has_trusted_pid && (r = seq_trust(c, seq, pkt->trusted_pid)))
		return r;

	switch (pkt->data_case) {
	case PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS:
	case PERFETTO__PROTOS__TRACE_PACKET__DATA_PROCESS_TREE:
		/* The runtime speaking for the kernel, whatever its sequence:
		 * a forged fork would claim someone else's task for the app,
		 * a forged process list would name it. Only the kernel's
		 * stream carries these. */
		r = 0;
		break;
	case PERFETTO__PROTOS__TRACE_PACKET__DATA_CLOCK_SNAPSHOT:
		r = 1; /* clocks only: needed to place everything else in time */
		break;
	case PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_EVENT:
		r = track_event(c, pkt->track_event, seq);
		break;
	case PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_DESCRIPTOR:
		r = track_descriptor(c, pkt->track_descriptor, seq);
		break;
	default:
		/* No content, or content of a type we do not model (stripped). */
		r = 0;
		break;
	}
	if (r < 0)
		return r;
	bool keep = r > 0;

	/* Interning, defaults and their reset flags are per sequence: they
	 * travel only on the app's sequences. */
	if (seq_state(c, seq) == SEQ_APP) {
		if (pkt->interned_data && (r = scrub_interned(c, pkt->interned_data)))
			return r;
		bool cleared = (pkt->has_sequence_flags && (pkt->sequence_flags & SEQ_CLEARED)) ||
			       (pkt->has_incremental_state_cleared && pkt->incremental_state_cleared);
		/* Content dropped, but later packets may need this state. */
		if (!keep && (pkt->interned_data || pkt->trace_packet_defaults || cleared)) {
			pkt->data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA__NOT_SET;
			keep = true;
		}
	} else {
		pkt->interned_data = NULL;
		pkt->trace_packet_defaults = NULL;
		pkt->has_sequence_flags = 0;
		pkt->has_incremental_state_cleared = 0;
	}
	if (keep)
		c->st->kept++;
	else
		c->st->dropped++;
	if (!keep)
		return 0;
	pkt->has_trusted_pid = 0;
	return write_packet(c, pkt);
}

/* ---- a redaction context: the caller's, and each thread's of its own */

/* out_fd -1: output held in memory (another thread's, taken by
 * pf_take()). ids are filled by the caller. */
static int pf_setup(struct pf *c, const struct rdc_policy *p, struct rdc_stats *st, int out_fd)
{
	c->p = p;
	c->st = st;
	c->wb.fd = out_fd;
	c->ids.max = p->npids + p->ntids;
	c->learned.max = PF_MAX_LEARNED;
	c->seqs.max = PF_MAX_SEQS;
	c->tracks.max = PF_MAX_TRACKS;
	c->ar.budget = PF_UNPACK_BUDGET;
	c->pa.alloc = ar_alloc;
	c->pa.free = ar_free;
	c->pa.allocator_data = &c->ar;
	if (p->dlp && !(c->cache = calloc(DLP_CACHE_N, sizeof(*c->cache))))
		return -ENOMEM;
	return 0;
}

/* What pf_setup() and the redaction allocated; c itself stays. */
static void pf_release(struct pf *c)
{
	ar_fini(&c->ar);
	map_fini(&c->ids);
	map_fini(&c->learned);
	map_fini(&c->seqs);
	map_fini(&c->tracks);
	free(c->cache);
	free(c->fev);
	free(c->pkt);
	free(c->out);
	free(c->wb.mem);
}

/* Another thread's output (held in memory) after ours, and its counts. */
static int pf_take(struct pf *c, const struct pf *from)
{
	int r = wb_flush(&c->wb);
	if (!r)
		r = util_write_all(c->wb.fd, from->wb.mem, from->wb.mlen);
	if (r)
		return r;
	c->wb.total += from->wb.mlen;
	c->st->kept += from->st->kept;
	c->st->dropped += from->st->dropped;
	c->st->anonymised += from->st->anonymised;
	c->st->scrubbed += from->st->scrubbed;
	c->app_records += from->app_records;
	c->packets += from->packets;
	return 0;
}

/* ---- the kernel's stream on two threads
 *
 * Why: a sched-heavy trace is nearly all kernel bundles, and their lean
 * path (above) has no hotspot left: one core redacted the bench's 200 MB
 * at ~290 MB/s on a slow day (issue #18 asks > 400).
 * How: the kernel's stream is read straight into chunks of whole packets
 * (policy->pf_chunk bytes or a packet more), and chunks go in pairs. This
 * thread reads the first of a pair and redacts it while a second thread
 * reads the second and redacts it from a copy of who the app was at the
 * pair's start: a guess that the first chunk does not change it (learn():
 * a fork by the app, an exit). When the first chunk left c->learned as it
 * was and the second
 * thread finished, the second's output (held in memory) follows the
 * first's, and its counts and learned tasks are taken; otherwise it is
 * thrown away and the chunk redone here. Everything else the kernel's
 * packets read is the policy (fixed) or a cache of a pure function (tidc,
 * the DLP cache), so the bytes out are the one-thread pass's
 * (test_rdc_perfetto's par_equals_serial). A failure on the second thread
 * decides nothing: the chunk is redone here, and that run's answer is the
 * answer. After PF_PAR_MISSES chunks redone, the rest is one thread's.
 * Reads stay in stream order: the second thread says when it has read its
 * chunk (rdone), and this thread, done with the first, then reads the
 * next pair's first while the second is redacted (par_next()).
 * Memory: two chunks (each at most pf_chunk + a packet + a field's
 * header) and one chunk's output (PF_PAR_OUT at most). On an error only
 * the answer is one thread's: the counts of bytes read ahead differ.
 */

struct pchunk {
	uint8_t *buf; /* [0, len): whole packet fields; [len, len + raw): read, not yet framed */
	size_t len, raw, cap;
};

struct par {
	struct pf w;           /* the second thread's context */
	struct rdc_stats wst;
	struct pchunk ch[2];
	size_t chunk;
	int fd;
	uint64_t skip;         /* bytes of a skipped field still to be read */
	bool synced;           /* w.learned equals the first thread's */
	unsigned misses;       /* second chunks redone here */
	/* The second chunk's: par_fill()'s answer and bytes read; the
	 * second thread's answer (0, or -errno: the chunk is redone). */
	int wfill, wret;
	uint64_t wread;
	/* The second thread has read its chunk (rdone, under mu): this
	 * thread may read the next pair's first while that one is redacted. */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool rdone, sync_ok;
};

/* A varint in [*p, e): 1 read, 0 cut short (more to read), -EBADMSG past
 * 10 bytes (rb_varint's rules). */
static int mem_varint(const uint8_t **p, const uint8_t *e, uint64_t *v)
{
	const uint8_t *q = *p;
	*v = 0;
	for (unsigned i = 0; i < 10; i++) {
		if (q == e)
			return 0;
		uint8_t b = *q++;
		*v |= (uint64_t)(b & 0x7f) << (7 * i);
		if (!(b & 0x80)) {
			*p = q;
			return 1;
		}
	}
	return -EBADMSG;
}

/* The packets of a chunk, each as stream_read() takes a kernel packet
 * wholly in its buffer. The framing was checked when it was read. */
static int chunk_run(struct pf *c, const struct pchunk *ch)
{
	const uint8_t *p = ch->buf, *e = ch->buf + ch->len;
	while (p < e) {
		uint64_t tag, len;
		/* A tag of value 0x0a (in any of its encodings): nothing else
		 * is kept. */
		if (mem_varint(&p, e, &tag) != 1 || tag != 0x0a || mem_varint(&p, e, &len) != 1 ||
		    len > (uint64_t)(e - p))
			return -EIO; /* par_frame() kept a field it should not have */
		c->packets++;
		ar_reset(&c->ar);
		int r = wire_packet(c, p, (size_t)len);
		if (r < 0)
			return r;
		if (!r && (r = packet(c, p, (size_t)len, false)))
			return r;
		p += len;
	}
	return 0;
}

/*
 * Frames what was read into ch: whole packets stay, any other field is
 * dropped (as stream_read() skips it), and what is cut short waits for
 * the next read. Stops at a full chunk: the rest is the next one's.
 * 0, or -errno as stream_read() would answer at that byte.
 */
static int par_frame(struct par *q, struct pchunk *ch)
{
	while (ch->len < q->chunk) {
		uint8_t *start = ch->buf + ch->len, *e = start + ch->raw;
		const uint8_t *p = start;
		uint64_t tag, len = 0;
		int k = mem_varint(&p, e, &tag);
		if (k <= 0)
			return k;
		if ((tag >> 3) == 0)
			return -EBADMSG;
		if (tag == 0x0a) {
			if ((k = mem_varint(&p, e, &len)) <= 0)
				return k;
			if (len > PF_MAX_PACKET)
				return -E2BIG;
			if (len > (uint64_t)(e - p))
				return 0;
			size_t n = (size_t)(p - start) + (size_t)len;
			ch->len += n;
			ch->raw -= n;
			continue;
		}
		/* Not a packet: skipped, as protobuf would. */
		switch (tag & 7) {
		case 0:
			k = mem_varint(&p, e, &len);
			len = 0;
			break;
		case 1:
			len = 8;
			break;
		case 5:
			len = 4;
			break;
		case 2:
			k = mem_varint(&p, e, &len);
			break;
		default:
			return -EBADMSG;
		}
		if (k <= 0)
			return k;
		uint64_t have = (uint64_t)(e - p);
		if (len > have) {
			q->skip = len - have;
			ch->raw = 0;
			return 0;
		}
		size_t n = (size_t)(p - start) + (size_t)len;
		memmove(start, start + n, ch->raw - n);
		ch->raw -= n;
	}
	return 0;
}

/*
 * Reads into ch until it holds a chunk of whole packets: 0 full, 1 the
 * end of the stream, or -errno (what was whole before it stays in ch, to
 * be redacted first). Then zeroes PF_PAD bytes past what was read: the
 * fast paths read that far past a packet.
 */
static int par_fill(struct par *q, struct pchunk *ch, uint64_t *nread)
{
	int r;
	for (;;) {
		if ((r = par_frame(q, ch)) || ch->len >= q->chunk)
			break;
		/* Below a chunk, what is not framed is less than a field: the
		 * read has room (par_init sized the chunks). */
		size_t at = ch->len + ch->raw, room = ch->cap - PF_PAD - at;
		if (q->skip && room > q->skip)
			room = (size_t)q->skip;
		ssize_t n = read(q->fd, ch->buf + at, room);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			break;
		}
		*nread += (uint64_t)n;
		if (n == 0) {
			/* A field cut short by the end: stream_read's -EBADMSG. */
			r = ch->raw || q->skip ? -EBADMSG : 1;
			break;
		}
		if (q->skip)
			q->skip -= (uint64_t)n;
		else
			ch->raw += (size_t)n;
	}
	memset(ch->buf + ch->len + ch->raw, 0, PF_PAD);
	return r;
}

/* The second thread: reads the pair's second chunk, says so, then
 * redacts it. */
static void *par_worker(void *arg)
{
	struct par *q = arg;
	q->wfill = par_fill(q, &q->ch[1], &q->wread);
	pthread_mutex_lock(&q->mu);
	q->rdone = true;
	pthread_cond_signal(&q->cv);
	pthread_mutex_unlock(&q->mu);
	int r = chunk_run(&q->w, &q->ch[1]);
	q->wret = r ? r : wb_flush(&q->w.wb);
	return NULL;
}

/* d takes s's learned tasks. */
static int learned_copy(struct pf *d, const struct pf *s)
{
	memset(d->tidc, 0, sizeof(d->tidc));
	return map_copy(&d->learned, &s->learned);
}

/* from's unframed bytes begin to (from keeps its packets). */
static void par_carry(struct pchunk *to, struct pchunk *from)
{
	memcpy(to->buf, from->buf + from->len, from->raw);
	to->len = 0;
	to->raw = from->raw;
	from->raw = 0;
}

/* The next pair's first chunk: the rest of b, and what follows. */
static int par_next(struct pf *c)
{
	struct par *q = c->par;
	par_carry(&q->ch[0], &q->ch[1]);
	return par_fill(q, &q->ch[0], &c->rb.total);
}

/*
 * A full first chunk, redacted here while the second thread reads the
 * second and redacts it (or, without that thread, both here). *fill:
 * par_fill()'s answer for the second; when that is 0 (a full chunk),
 * *next is par_fill()'s answer for the next pair's first, read here while
 * the second thread redacts (the reads stay in stream order: the second
 * thread has read its chunk first).
 */
static int par_pair(struct pf *c, int *fill, int *next)
{
	struct par *q = c->par;
	struct pf *w = &q->w;
	pthread_t t;

	if (!q->synced && learned_copy(w, c) == 0)
		q->synced = true;
	uint64_t gen = c->learn_gen, wgen = w->learn_gen;
	memset(&q->wst, 0, sizeof(q->wst));
	w->app_records = w->packets = 0;
	w->wb.len = w->wb.mlen = 0;
	q->wread = 0;
	q->wret = -EAGAIN;
	q->rdone = false;
	bool started = q->synced && q->misses < PF_PAR_MISSES && q->sync_ok &&
		       rdc_thread_start(&t, PF_PAR_STACK, par_worker, q) == 0;
	if (!started)
		q->wfill = par_fill(q, &q->ch[1], &q->wread);
	int r = chunk_run(c, &q->ch[0]);
	if (started) {
		if (!r) {
			pthread_mutex_lock(&q->mu);
			while (!q->rdone)
				pthread_cond_wait(&q->cv, &q->mu);
			pthread_mutex_unlock(&q->mu);
			if (q->wfill == 0)
				*next = par_next(c);
		}
		pthread_join(t, NULL);
	}
	c->rb.total += q->wread;
	*fill = q->wfill;
	if (r)
		return r;
	/* Without a second thread the next first chunk is read here (with
	 * one, it was read above, as r is 0). */
	if (!started && q->wfill == 0)
		*next = par_next(c);
	/* Its learned ids first: a copy that fails leaves ours as they were
	 * (map_copy), and the chunk is redone here. */
	if (started && q->wret == 0 && c->learn_gen == gen &&
	    (w->learn_gen == wgen || learned_copy(c, w) == 0))
		return pf_take(c, w);
	/* The guess was wrong, or the thread failed: redo it here. */
	if (started) {
		q->synced = false;
		q->misses++;
	}
	return chunk_run(c, &q->ch[1]);
}

/* The kernel's stream, to its end, read into the chunks. */
static int par_stream(struct pf *c, int fd)
{
	struct par *q = c->par;
	struct pchunk *a = &q->ch[0], *b = &q->ch[1];
	q->fd = fd;
	int fa = par_fill(q, a, &c->rb.total), fb, r;
	for (;;) {
		if (fa) {
			/* The end, or an error after what is whole in a: that
			 * error is the one a thread reading as it redacts meets
			 * first. */
			r = chunk_run(c, a);
			return r ? r : fa < 0 ? fa : 0;
		}
		par_carry(b, a);
		if ((r = par_pair(c, &fb, &fa)))
			return r;
		if (fb)
			return fb < 0 ? fb : 0;
	}
}

static int par_init(struct pf *c, size_t chunk)
{
	struct par *q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	c->par = q;
	struct pf *w = &q->w;
	q->chunk = chunk;
	w->kernel = true;
	/* Without them the second thread is never started. */
	q->sync_ok = pthread_mutex_init(&q->mu, NULL) == 0;
	if (q->sync_ok && pthread_cond_init(&q->cv, NULL)) {
		pthread_mutex_destroy(&q->mu);
		q->sync_ok = false;
	}
	int r = pf_setup(w, c->p, &q->wst, -1);
	if (!r)
		r = map_copy(&w->ids, &c->ids);
	/* Room for a chunk, the packet that ends it and a field's header:
	 * below a chunk, what is not framed is less than one field, so a
	 * read always has room. */
	for (unsigned i = 0; !r && i < 2; i++) {
		q->ch[i].cap = chunk + PF_MAX_PACKET + 32 + PF_PAD;
		if (!(q->ch[i].buf = malloc(q->ch[i].cap)))
			r = -ENOMEM;
	}
	return r;
}

static void par_fini(struct par *q)
{
	if (!q)
		return;
	pf_release(&q->w);
	free(q->ch[0].buf);
	free(q->ch[1].buf);
	if (q->sync_ok) {
		pthread_cond_destroy(&q->cv);
		pthread_mutex_destroy(&q->mu);
	}
	free(q);
}

/* ---- the runtime's stream beside the kernel's
 *
 * Why: the runtime's packets took protobuf-c's path, ~40 MB/s; after the
 * kernel's stream on two threads they were the longest part left on one
 * (bench/redact_throughput: 4.7 of 200 MB, a fifth of the time). Since
 * lean_track() they take ~0.02 s there, but a runtime stream of other
 * packets (descriptors, annotations, interned data) still takes the
 * general path.
 * How: judging them needs only what the kernel's stream teaches (learned,
 * read through learned_app()), never changes it, and shares no other
 * state with it. So a third thread redacts the runtime's stream while the
 * kernel's is read, guessing that no task it asks about was forked by the
 * app, and notes every task it asked about (struct probe). At the kernel
 * stream's end the guess is checked against c->learned: when it held, the
 * runtime's output (held in memory) follows the kernel's, as one thread
 * would have written it; otherwise, or when the thread failed, its output
 * is thrown away and the stream read again from where it began (lseek:
 * the daemon hands over files) on this thread, whose answer is the
 * answer. Memory: the output, PF_PAR_OUT at most.
 */

static int stream(struct pf *c, int fd, bool kernel);

struct rt {
	struct pf r;
	struct rdc_stats st;
	struct probe probe;
	off_t start;
	int fd, ret;
};

static void *rt_worker(void *arg)
{
	struct rt *t = arg;
	int r = stream(&t->r, t->fd, false);
	t->ret = r ? r : wb_flush(&t->r.wb);
	return NULL;
}

static void rt_fini(struct rt *t)
{
	if (!t)
		return;
	pf_release(&t->r);
	map_fini(&t->probe.ids);
	free(t);
}

/* The runtime's stream on a thread of its own, or NULL: not a file of its
 * own to read again (one file for both streams would share an offset),
 * or no memory. */
static struct rt *rt_start(struct pf *c, int in_fd, int kernel_fd, pthread_t *th)
{
	struct stat a, b;
	if (fstat(in_fd, &a) || fstat(kernel_fd, &b) || !S_ISREG(a.st_mode) ||
	    (a.st_dev == b.st_dev && a.st_ino == b.st_ino))
		return NULL;
	struct rt *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	struct pf *r = &t->r;
	t->fd = in_fd;
	t->start = lseek(in_fd, 0, SEEK_CUR);
	t->probe.ids.max = PF_MAX_LEARNED;
	r->probe = &t->probe;
	if (t->start < 0 || pf_setup(r, c->p, &t->st, -1) || map_copy(&r->ids, &c->ids) ||
	    rdc_thread_start(th, PF_PAR_STACK, rt_worker, t)) {
		rt_fini(t);
		return NULL;
	}
	return t;
}

/* After the kernel's stream: the thread's output when its guess held,
 * else the stream again on this thread. */
static int rt_end(struct pf *c, struct rt *t)
{
	struct pf *r = &t->r;
	bool held = t->ret == 0 && !t->probe.over;
	for (size_t i = 0; held && i < t->probe.ids.cap; i++)
		if (t->probe.ids.val[i] && map_get(&c->learned, t->probe.ids.key[i]) == LEARN_APP)
			held = false;
	if (!held) {
		if (lseek(t->fd, t->start, SEEK_SET) < 0)
			return -errno;
		return stream(c, t->fd, false);
	}
	int e = pf_take(c, r);
	if (e)
		return e;
	/* The bytes read, as stream() would have counted them. */
	c->in_total += c->rb.total;
	c->rb.total = r->rb.total;
	return 0;
}

/* ---- the trace */

static int policy_ids(struct pf *c)
{
	int r;
	for (size_t i = 0; i < c->p->npids; i++)
		if ((r = map_put(&c->ids, (uint32_t)c->p->pids[i], ID_PID)))
			return r;
	for (size_t i = 0; i < c->p->ntids; i++)
		if (map_get(&c->ids, (uint32_t)c->p->tids[i]) != ID_PID &&
		    (r = map_put(&c->ids, (uint32_t)c->p->tids[i], ID_TID)))
			return r;
	return 0;
}

/* One input stream's packets, to its end, from the read buffer. */
static int stream_read(struct pf *c, bool kernel)
{
	int r;
	for (;;) {
		uint64_t tag, len;
		bool eof;
		if ((r = rb_varint(&c->rb, &tag, &eof)))
			return r;
		if (eof)
			break;
		if ((tag >> 3) == 0)
			return -EBADMSG;
		if (tag != 0x0a) {
			/* A Trace has nothing but packets; skip what a newer
			 * writer might add, as protobuf would. */
			switch (tag & 7) {
			case 0:
				r = rb_varint(&c->rb, &len, NULL);
				break;
			case 1:
				r = rb_take(&c->rb, NULL, 8);
				break;
			case 5:
				r = rb_take(&c->rb, NULL, 4);
				break;
			case 2:
				r = rb_varint(&c->rb, &len, NULL);
				if (!r)
					r = rb_take(&c->rb, NULL, len);
				break;
			default:
				r = -EBADMSG;
			}
			if (r)
				return r;
			continue;
		}
		if ((r = rb_varint(&c->rb, &len, NULL)))
			return r;
		if (len > PF_MAX_PACKET)
			return -E2BIG;
		bool fast = true;
		if (len && c->rb.len - c->rb.pos >= len) {
			c->packets++;
			ar_reset(&c->ar);
			if ((r = wire_packet(c, c->rb.buf + c->rb.pos, (size_t)len)) < 0)
				return r;
			if (r) {
				c->rb.pos += (size_t)len;
				continue;
			}
			c->packets--; /* counted again below */
			fast = false; /* tried: the general path's */
		}
		if (len > c->pktcap) {
			uint8_t *b = realloc(c->pkt, (size_t)len + PF_PAD);
			if (!b)
				return -ENOMEM;
			c->pkt = b;
			c->pktcap = (size_t)len;
		}
		if ((r = rb_take(&c->rb, c->pkt, len)))
			return r;
		c->packets++;
		if ((r = packet(c, c->pkt, (size_t)len, fast)))
			return r;
	}
	return 0;
}

/* One input stream, to its end, through the shared read buffer. */
static int stream(struct pf *c, int fd, bool kernel)
{
	c->in_total += c->rb.total;
	c->rb.fd = fd;
	c->rb.pos = c->rb.len = 0;
	c->rb.total = 0;
	c->kernel = kernel;
	return kernel && c->par ? par_stream(c, fd) : stream_read(c, kernel);
}

static int run(struct pf *c, int in_fd, int kernel_fd)
{
	int r;
	pthread_t th;
	/* With two threads for the kernel's stream, a third for the
	 * runtime's beside it (rt_*). */
	struct rt *t = c->par ? rt_start(c, in_fd, kernel_fd, &th) : NULL;
	/* The kernel's stream first: the forks it holds decide which pids
	 * are the app's before the runtime's descriptors are judged. */
	r = kernel_fd >= 0 ? stream(c, kernel_fd, true) : 0;
	if (t) {
		pthread_join(th, NULL);
		if (!r)
			r = rt_end(c, t);
		rt_fini(t);
	} else if (!r) {
		r = stream(c, in_fd, false);
	}
	if (r)
		return r;
	if ((r = wb_flush(&c->wb)))
		return r;
	/* Nothing parsed, or nothing of the app's left: never an empty result. */
	if (!c->packets || !c->app_records)
		return -EBADMSG;
	return 0;
}

int rdc_perfetto(int in_fd, int kernel_fd, int out_fd, const struct rdc_policy *p,
		 struct rdc_stats *st)
{
	struct rdc_stats scratch;
	if (!st)
		st = &scratch;
	memset(st, 0, sizeof(*st));
	if (in_fd < 0 || out_fd < 0 || kernel_fd < -1 || !p || (p->npids && !p->pids) ||
	    (p->ntids && !p->tids))
		return -EINVAL;

	struct pf *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	int r = pf_setup(c, p, st, out_fd);
	if (!r)
		r = policy_ids(c);
	/* Two threads for a kernel stream; not worth a thread below a pair. */
	size_t chunk = p->pf_chunk ? p->pf_chunk : RDC_PF_CHUNK;
	/* Without the memory for it, one thread does it all. */
	if (!r && kernel_fd >= 0 && chunk <= SIZE_MAX / 2 && par_init(c, chunk)) {
		par_fini(c->par);
		c->par = NULL;
	}
	if (!r)
		r = run(c, in_fd, kernel_fd);

	st->in_bytes = c->in_total + c->rb.total;
	st->out_bytes = c->wb.total;
	par_fini(c->par);
	pf_release(c);
	free(c);
	return r;
}

/*
 * HPROF -> Perfetto heap graph (issue #20, docs/PERFETTO.md "Heap
 * formats"). The output holds the reference graph only, by construction:
 * for every object its id, its type, an estimated size and the ids it
 * references, with the referring field's name; for every class its name,
 * superclass and class loader; the GC roots. No field value, array
 * element, constant-pool entry or static of a primitive type is ever read
 * into the output, so a string's characters (a char[]/byte[]) cannot
 * reach it in any encoding.
 *
 * The input is read whole (a pipe or a file, up to HG_MAX_IN). Pass 1
 * walks every record and checks its bounds, indexing UTF8 names, LOAD
 * CLASS names, CLASS DUMP layouts and the roots; pass 2 walks the heap
 * dump again and writes one HeapGraphObject per instance, object array,
 * primitive array (size only) and class. The first packets carry the
 * types, the interned field names and the roots; objects follow in
 * packets of about HG_PACKET bytes, index counting up from 0 and
 * continued set on all but the last (upstream's rule for one dump).
 * Then, on a second sequence, the process and the threads' stacks
 * (put_threads), and upstream's ArtProcessMetadata with the OOM thread's
 * stack when an OOM caused the dump (put_metadata).
 *
 * Sizes: HPROF records no object sizes. self_size is the HPROF's own
 * byte count (instance field bytes, ids of an object array, elements of a
 * primitive array) plus a 16-byte header; jcmd's byte totals differ, its
 * counts do not.
 */
#include "rdc.h"
#include "rdc_pbw.h"
#include "util.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HG_MAX_IN (1ull << 30)       /* input bytes; past it E2BIG (caps: docs/PERFETTO.md) */
#define HG_MAX_CLASSES (1u << 20)
#define HG_MAX_KEYS (1u << 24)       /* UTF8 records, LOAD CLASS rows */
#define HG_MAX_ROOTS (1u << 24)
#define HG_MAX_NAME 4096             /* a class or field name, cut past it */
#define HG_PACKET (1u << 20)         /* objects per packet: bytes, about */
#define HG_MAX_OUT (256u << 20)      /* one packet being built: an Object[] of ~25M */
#define HG_MAX_DEPTH 1024            /* superclass chain */
#define HG_HEADER_BYTES 16           /* the self_size estimate's header */
#define HG_MAX_THREADS (1u << 16)    /* threads kept; the rest left out */
#define HG_NTYPES 12                 /* HPROF basic types 0..11 */

enum { T_OBJECT = 2, T_BOOLEAN = 4, T_CHAR, T_FLOAT, T_DOUBLE, T_BYTE, T_SHORT, T_INT, T_LONG };

/* u64 -> u64, open addressing, key 0 never stored (HPROF's null id). */
struct hmap {
	uint64_t *k, *v;
	uint32_t n, cap;
};

struct hg_class {
	uint64_t id, super, loader, name; /* name: a UTF8 id, or 0 */
	size_t rec;      /* offset of its CLASS DUMP body after the class id */
	size_t ifields;  /* offset of its instance field count (u2) */
	uint32_t inst;   /* instance field bytes (the record's own figure) */
	uint32_t iref_base, sref_base; /* first field_names iid of its refs */
	uint16_t nirefs, nsrefs;
};

struct hg {
	const uint8_t *in;
	size_t size;
	unsigned idsz;
	uint64_t ts_ns;
	int32_t pid;
	const struct rdc_proc *proc; /* process metadata, OOM tid; may be NULL */

	struct hmap utf8;   /* name id -> body offset of its UTF8 record */
	struct hmap cname;  /* class id -> name id (LOAD CLASS) */
	struct hmap cidx;   /* class id -> index + 1 in cls */
	struct hmap cserial; /* LOAD CLASS serial + 1 -> name id */
	struct hmap sframe; /* STACK FRAME id -> body offset */
	struct hmap strace; /* STACK TRACE serial + 1 -> body offset */
	struct hg_thread { uint32_t serial, trace; uint64_t name; } *threads;
	uint32_t nthreads, capthreads;
	struct hmap tbest;  /* thread serial + 1 -> index + 1 of its entry */
	struct hg_class *cls;
	uint32_t ncls, capcls;
	uint64_t prim_type[HG_NTYPES]; /* type id of "<t>[]" */
	uint64_t *roots[16];           /* by HeapGraphRoot.Type */
	uint32_t nroots[16], caproots[16], roots_all;
	uint32_t nfield_iids;

	struct rdc_pbw hgb, obj, tmp, pkt;
	uint64_t index, out_bytes, objects;
	uint64_t *refs_f, *refs_o;
	size_t nrefs, caprefs;
	int out_fd;
};

/* ------------------------------------------------------------ helpers */

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t get_id(const struct hg *h, const uint8_t *p)
{
	return h->idsz == 4 ? be32(p) : (uint64_t)be32(p) << 32 | be32(p + 4);
}

static unsigned type_size(const struct hg *h, unsigned t)
{
	switch (t) {
	case T_OBJECT: return h->idsz;
	case T_BOOLEAN: case T_BYTE: return 1;
	case T_CHAR: case T_SHORT: return 2;
	case T_FLOAT: case T_INT: return 4;
	case T_DOUBLE: case T_LONG: return 8;
	default: return 0;
	}
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

static int hmap_put(struct hmap *m, uint64_t k, uint64_t v)
{
	if (!k)
		return 0;
	if ((uint64_t)(m->n + 1) * 2 > m->cap) {
		if (m->n >= HG_MAX_KEYS)
			return -E2BIG;
		uint32_t cap = m->cap ? m->cap * 2 : 1024;
		uint64_t *nk = calloc(cap, sizeof(*nk)), *nv = calloc(cap, sizeof(*nv));
		if (!nk || !nv) {
			free(nk);
			free(nv);
			return -ENOMEM;
		}
		for (uint32_t i = 0; i < m->cap; i++) {
			if (!m->k[i])
				continue;
			uint32_t j = (uint32_t)mix(m->k[i]) & (cap - 1);
			while (nk[j])
				j = (j + 1) & (cap - 1);
			nk[j] = m->k[i];
			nv[j] = m->v[i];
		}
		free(m->k);
		free(m->v);
		m->k = nk;
		m->v = nv;
		m->cap = cap;
	}
	uint32_t j = (uint32_t)mix(k) & (m->cap - 1);
	while (m->k[j] && m->k[j] != k)
		j = (j + 1) & (m->cap - 1);
	if (!m->k[j])
		m->n++;
	m->k[j] = k; /* a later record with the same id wins, as in readers */
	m->v[j] = v;
	return 0;
}

static bool hmap_get(const struct hmap *m, uint64_t k, uint64_t *v)
{
	if (!k || !m->cap)
		return false;
	for (uint32_t j = (uint32_t)mix(k) & (m->cap - 1); m->k[j]; j = (j + 1) & (m->cap - 1))
		if (m->k[j] == k) {
			*v = m->v[j];
			return true;
		}
	return false;
}

static void hmap_free(struct hmap *m)
{
	free(m->k);
	free(m->v);
}

/* The bytes of UTF8 record id, or NULL. */
static const uint8_t *utf8(const struct hg *h, uint64_t id, size_t *len)
{
	uint64_t off;
	if (!hmap_get(&h->utf8, id, &off))
		return NULL;
	*len = be32(h->in + off - 4) - h->idsz;
	return h->in + off + h->idsz;
}

/* A JVM descriptor or internal name to the Java form jcmd and Perfetto
 * print for arrays of classes ("[Ljava/lang/String;" -> "java.lang.String[]",
 * "[I" -> "int[]", "java/lang/Thread" -> "java.lang.Thread"). */
static void java_name(const uint8_t *s, size_t n, char *out, size_t outsz)
{
	static const char *const prim[128] = {
		['Z'] = "boolean", ['C'] = "char", ['F'] = "float", ['D'] = "double",
		['B'] = "byte", ['S'] = "short", ['I'] = "int", ['J'] = "long",
	};
	size_t dims = 0, o = 0;
	while (dims < n && s[dims] == '[')
		dims++;
	const uint8_t *b = s + dims;
	size_t bn = n - dims;
	if (dims && bn == 1 && b[0] < 128 && prim[b[0]]) {
		const char *p = prim[b[0]];
		while (*p && o + 1 < outsz)
			out[o++] = *p++;
		bn = 0;
	} else if (dims && bn >= 2 && b[0] == 'L' && b[bn - 1] == ';') {
		b++;
		bn -= 2;
	}
	for (size_t i = 0; i < bn && o + 1 < outsz; i++)
		out[o++] = b[i] == '/' ? '.' : (char)b[i];
	for (size_t i = 0; i < dims && o + 2 < outsz; i++) {
		out[o++] = '[';
		out[o++] = ']';
	}
	out[o] = '\0';
}

static void class_name(const struct hg *h, const struct hg_class *c, char *out, size_t n)
{
	size_t len;
	const uint8_t *s = utf8(h, c->name, &len);
	if (!s) {
		snprintf(out, n, "unknown class 0x%llx", (unsigned long long)c->id);
		return;
	}
	java_name(s, len < HG_MAX_NAME ? len : HG_MAX_NAME, out, n);
}

static struct hg_class *find_class(const struct hg *h, uint64_t id)
{
	uint64_t i;
	return hmap_get(&h->cidx, id, &i) ? &h->cls[i - 1] : NULL;
}

/* ------------------------------------------------------- pass 1: index */

/* HPROF heap-dump sub-record tags. */
enum {
	SUB_ROOT_JNI_GLOBAL = 0x01, SUB_ROOT_JNI_LOCAL = 0x02, SUB_ROOT_JAVA_FRAME = 0x03,
	SUB_ROOT_NATIVE_STACK = 0x04, SUB_ROOT_STICKY_CLASS = 0x05,
	SUB_ROOT_THREAD_BLOCK = 0x06, SUB_ROOT_MONITOR_USED = 0x07,
	SUB_ROOT_THREAD_OBJECT = 0x08, SUB_CLASS_DUMP = 0x20, SUB_INSTANCE_DUMP = 0x21,
	SUB_OBJ_ARRAY_DUMP = 0x22, SUB_PRIM_ARRAY_DUMP = 0x23,
	SUB_ART_INTERNED = 0x89, SUB_ART_FINALIZING = 0x8a, SUB_ART_DEBUGGER = 0x8b,
	SUB_ART_REF_CLEANUP = 0x8c, SUB_ART_VM_INTERNAL = 0x8d, SUB_ART_JNI_MONITOR = 0x8e,
	SUB_ART_UNREACHABLE = 0x90, SUB_ART_PRIM_NODATA = 0xc3, SUB_ART_HEAP_INFO = 0xfe,
	SUB_ROOT_UNKNOWN = 0xff,
};

/* For a root sub-record: its HeapGraphRoot.Type and the bytes after the
 * id; -1 if tag is no root. */
static int root_kind(unsigned tag, unsigned idsz, size_t *extra)
{
	static const struct { uint8_t tag, type, extra_u4, extra_id; } rows[] = {
		{ SUB_ROOT_UNKNOWN, 0, 0, 0 },      { SUB_ROOT_JNI_GLOBAL, 1, 0, 1 },
		{ SUB_ROOT_JNI_LOCAL, 2, 2, 0 },    { SUB_ROOT_JAVA_FRAME, 3, 2, 0 },
		{ SUB_ROOT_NATIVE_STACK, 4, 1, 0 }, { SUB_ROOT_STICKY_CLASS, 5, 0, 0 },
		{ SUB_ROOT_THREAD_BLOCK, 6, 1, 0 }, { SUB_ROOT_MONITOR_USED, 7, 0, 0 },
		{ SUB_ROOT_THREAD_OBJECT, 8, 2, 0 }, { SUB_ART_INTERNED, 9, 0, 0 },
		{ SUB_ART_FINALIZING, 10, 0, 0 },   { SUB_ART_DEBUGGER, 11, 0, 0 },
		{ SUB_ART_REF_CLEANUP, 12, 0, 0 },  { SUB_ART_VM_INTERNAL, 13, 0, 0 },
		{ SUB_ART_JNI_MONITOR, 14, 2, 0 },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		if (rows[i].tag == tag) {
			*extra = rows[i].extra_u4 * 4u + rows[i].extra_id * idsz;
			return rows[i].type;
		}
	return -1;
}

static int add_root(struct hg *h, int type, uint64_t id)
{
	if (!id)
		return 0;
	if (h->roots_all >= HG_MAX_ROOTS)
		return -E2BIG;
	if (h->nroots[type] == h->caproots[type]) {
		uint32_t cap = h->caproots[type] ? h->caproots[type] * 2 : 256;
		uint64_t *r = realloc(h->roots[type], cap * sizeof(*r));
		if (!r)
			return -ENOMEM;
		h->roots[type] = r;
		h->caproots[type] = cap;
	}
	h->roots[type][h->nroots[type]++] = id;
	h->roots_all++;
	return 0;
}

/* Bounds of a CLASS DUMP whose body (after the tag) starts at p: its end,
 * the offset of the instance field count, or -EBADMSG. */
static int class_dump_len(const struct hg *h, size_t p, size_t end, size_t *next,
			  size_t *ifields)
{
	unsigned id = h->idsz;
	size_t q = p + 7 * (size_t)id + 4 + 4; /* id, serial, super..reserved, size */
	if (q + 2 > end)
		return -EBADMSG;
	unsigned n = (unsigned)h->in[q] << 8 | h->in[q + 1];
	q += 2;
	for (unsigned i = 0; i < n; i++) { /* constant pool: u2, type, value */
		if (q + 3 > end)
			return -EBADMSG;
		unsigned sz = type_size(h, h->in[q + 2]);
		if (!sz || q + 3 + sz > end)
			return -EBADMSG;
		q += 3 + sz;
	}
	if (q + 2 > end)
		return -EBADMSG;
	n = (unsigned)h->in[q] << 8 | h->in[q + 1];
	q += 2;
	for (unsigned i = 0; i < n; i++) { /* statics: name id, type, value */
		if (q + id + 1 > end)
			return -EBADMSG;
		unsigned sz = type_size(h, h->in[q + id]);
		if (!sz || q + id + 1 + sz > end)
			return -EBADMSG;
		q += id + 1 + sz;
	}
	if (q + 2 > end)
		return -EBADMSG;
	*ifields = q;
	n = (unsigned)h->in[q] << 8 | h->in[q + 1];
	q += 2;
	for (unsigned i = 0; i < n; i++) {
		if (q + id + 1 > end || !type_size(h, h->in[q + id]))
			return -EBADMSG;
		q += id + 1;
	}
	*next = q;
	return 0;
}

static int add_class(struct hg *h, size_t p, size_t ifields)
{
	unsigned id = h->idsz;
	uint64_t cid = get_id(h, h->in + p), i;
	if (hmap_get(&h->cidx, cid, &i))
		return 0; /* a repeat: the first one describes the layout */
	if (h->ncls == HG_MAX_CLASSES)
		return -E2BIG;
	if (h->ncls == h->capcls) {
		uint32_t cap = h->capcls ? h->capcls * 2 : 1024;
		struct hg_class *c = realloc(h->cls, cap * sizeof(*c));
		if (!c)
			return -ENOMEM;
		h->cls = c;
		h->capcls = cap;
	}
	struct hg_class *c = &h->cls[h->ncls];
	memset(c, 0, sizeof(*c));
	c->id = cid;
	c->super = get_id(h, h->in + p + id + 4);
	c->loader = get_id(h, h->in + p + 2 * id + 4);
	c->inst = be32(h->in + p + 7 * id + 4);
	c->rec = p;
	c->ifields = ifields;
	int r = hmap_put(&h->cidx, cid, ++h->ncls);
	return r;
}

/* Walk one heap dump segment's sub-records [p, end). Pass 1 indexes
 * classes and roots; pass 2 (emit) writes objects. */
static int walk_heap(struct hg *h, size_t p, size_t end, bool emit);

/* A thread, from START THREAD (named: the attach path's Thread.print) or
 * from a ROOT THREAD OBJECT (HotSpot's own dump: no name). One entry per
 * serial is emitted, a named one if there is one. */
static int add_thread(struct hg *h, uint32_t serial, uint32_t trace, uint64_t name)
{
	uint64_t at;
	if (hmap_get(&h->tbest, (uint64_t)serial + 1, &at) && (h->threads[at - 1].name || !name))
		return 0;
	if (h->nthreads == HG_MAX_THREADS)
		return 0;
	if (h->nthreads == h->capthreads) {
		uint32_t cap = h->capthreads ? h->capthreads * 2 : 64;
		struct hg_thread *t = realloc(h->threads, cap * sizeof(*t));
		if (!t)
			return -ENOMEM;
		h->threads = t;
		h->capthreads = cap;
	}
	h->threads[h->nthreads] = (struct hg_thread){ serial, trace, name };
	return hmap_put(&h->tbest, (uint64_t)serial + 1, ++h->nthreads);
}

static int pass1(struct hg *h)
{
	size_t p = 0;
	while (p < h->size && h->in[p])
		p++;
	if (p >= h->size || p < 18 || memcmp(h->in, "JAVA PROFILE 1.0.", 17))
		return -EBADMSG;
	p++;
	if (p + 12 > h->size)
		return -EBADMSG;
	h->idsz = be32(h->in + p);
	if (h->idsz != 4 && h->idsz != 8)
		return -EBADMSG;
	uint64_t ms = (uint64_t)be32(h->in + p + 4) << 32 | be32(h->in + p + 8);
	h->ts_ns = ms < UINT64_MAX / 1000000 ? ms * 1000000 : 0;
	p += 12;
	bool heap = false;
	while (p < h->size) {
		if (h->size - p < 9)
			return -EBADMSG;
		unsigned tag = h->in[p];
		size_t len = be32(h->in + p + 5), b = p + 9;
		if (len > h->size - b)
			return -EBADMSG;
		int r = 0;
		if (tag == 0x01) { /* UTF8: id, bytes */
			if (len < h->idsz)
				return -EBADMSG;
			r = hmap_put(&h->utf8, get_id(h, h->in + b), b);
		} else if (tag == 0x02) { /* LOAD CLASS: serial, class id, serial, name id */
			if (len != 8 + 2 * (size_t)h->idsz)
				return -EBADMSG;
			r = hmap_put(&h->cname, get_id(h, h->in + b + 4),
				     get_id(h, h->in + b + 8 + h->idsz));
			if (r == 0)
				r = hmap_put(&h->cserial, (uint64_t)be32(h->in + b) + 1,
					     get_id(h, h->in + b + 8 + h->idsz));
		} else if (tag == 0x04) { /* STACK FRAME: 4 ids, class serial, line */
			if (len != 4 * (size_t)h->idsz + 8)
				return -EBADMSG;
			r = hmap_put(&h->sframe, get_id(h, h->in + b), b);
		} else if (tag == 0x05) { /* STACK TRACE: serial, thread, n, n ids */
			if (len < 12 || (len - 12) / h->idsz != be32(h->in + b + 8) ||
			    (len - 12) % h->idsz)
				return -EBADMSG;
			r = hmap_put(&h->strace, (uint64_t)be32(h->in + b) + 1, b);
		} else if (tag == 0x0a) { /* START THREAD */
			if (len != 8 + 4 * (size_t)h->idsz)
				return -EBADMSG;
			r = add_thread(h, be32(h->in + b), be32(h->in + b + 4 + h->idsz),
				       get_id(h, h->in + b + 8 + h->idsz));
		} else if (tag == 0x0c || tag == 0x1c) {
			heap = true;
			r = walk_heap(h, b, b + len, false);
		}
		if (r < 0)
			return r;
		p = b + len;
	}
	if (!heap)
		return -EBADMSG;
	for (uint32_t i = 0; i < h->ncls; i++) {
		uint64_t name;
		if (hmap_get(&h->cname, h->cls[i].id, &name))
			h->cls[i].name = name;
	}
	return 0;
}

/* --------------------------------------------------- pass 2: the graph */

static int flush_packet(struct hg *h, bool last)
{
	rdc_pbw_u64(&h->hgb, RDC_PF_HG_PID, (uint64_t)(uint32_t)h->pid);
	rdc_pbw_u64(&h->hgb, RDC_PF_HG_INDEX, h->index++);
	if (!last)
		rdc_pbw_u64(&h->hgb, RDC_PF_HG_CONTINUED, 1);
	rdc_pbw_reset(&h->tmp);
	rdc_pbw_u64(&h->tmp, RDC_PF_PACKET_TIMESTAMP, h->ts_ns);
	rdc_pbw_u64(&h->tmp, RDC_PF_PACKET_SEQ_ID, 1);
	rdc_pbw_msg(&h->tmp, RDC_PF_PACKET_HEAP_GRAPH, &h->hgb);
	rdc_pbw_msg(&h->pkt, RDC_PF_TRACE_PACKET, &h->tmp);
	rdc_pbw_reset(&h->hgb);
	return rdc_pbw_flush(&h->pkt, h->out_fd, &h->out_bytes);
}

static int maybe_flush(struct hg *h)
{
	if (h->hgb.err)
		return h->hgb.err;
	return h->hgb.n >= HG_PACKET ? flush_packet(h, false) : 0;
}

static int add_ref(struct hg *h, uint64_t field, uint64_t obj)
{
	if (!obj)
		return 0;
	if (h->nrefs == h->caprefs) {
		size_t cap = h->caprefs ? h->caprefs * 2 : 1024;
		uint64_t *f = realloc(h->refs_f, cap * sizeof(*f));
		if (!f)
			return -ENOMEM;
		h->refs_f = f;
		uint64_t *o = realloc(h->refs_o, cap * sizeof(*o));
		if (!o)
			return -ENOMEM;
		h->refs_o = o;
		h->caprefs = cap;
	}
	h->refs_f[h->nrefs] = field;
	h->refs_o[h->nrefs++] = obj;
	return 0;
}

static int put_object(struct hg *h, uint64_t id, uint64_t type, uint64_t size, bool fields)
{
	rdc_pbw_reset(&h->obj);
	rdc_pbw_u64(&h->obj, RDC_PF_HGO_ID, id);
	rdc_pbw_u64(&h->obj, RDC_PF_HGO_TYPE_ID, type);
	rdc_pbw_u64(&h->obj, RDC_PF_HGO_SELF_SIZE, size);
	if (fields)
		rdc_pbw_packed(&h->obj, RDC_PF_HGO_REF_FIELD_ID, h->refs_f, h->nrefs);
	rdc_pbw_packed(&h->obj, RDC_PF_HGO_REF_OBJECT_ID, h->refs_o, h->nrefs);
	rdc_pbw_msg(&h->hgb, RDC_PF_HG_OBJECTS, &h->obj);
	h->nrefs = 0;
	h->objects++;
	return maybe_flush(h);
}

static uint64_t class_type(const struct hg *h, const struct hg_class *c)
{
	return (uint64_t)(c - h->cls) + 1;
}

static uint64_t class_object_type(const struct hg *h, const struct hg_class *c)
{
	return (uint64_t)h->ncls + (uint64_t)(c - h->cls) + 1;
}

/* An instance's references: its class's reference fields first, then each
 * superclass's, in HPROF's value order. */
static int emit_instance(struct hg *h, size_t p, size_t end)
{
	unsigned id = h->idsz;
	if (p + 2 * (size_t)id + 8 > end)
		return -EBADMSG;
	uint64_t oid = get_id(h, h->in + p);
	uint64_t cid = get_id(h, h->in + p + id + 4);
	size_t n = be32(h->in + p + 2 * id + 4), v = p + 2 * id + 8;
	if (n > end - v)
		return -EBADMSG;
	size_t vend = v + n;
	struct hg_class *c = find_class(h, cid);
	if (!c)
		return -EBADMSG; /* an instance of no class dumped */
	struct hg_class *k = c;
	for (unsigned depth = 0; k; depth++) {
		if (depth == HG_MAX_DEPTH)
			return -EBADMSG; /* a superclass loop */
		size_t q = k->ifields;
		unsigned nf = (unsigned)h->in[q] << 8 | h->in[q + 1], ref = 0;
		q += 2;
		for (unsigned i = 0; i < nf; i++, q += id + 1) {
			unsigned t = h->in[q + id], sz = type_size(h, t);
			if (sz > vend - v)
				return -EBADMSG;
			if (t == T_OBJECT) {
				int r = add_ref(h, k->iref_base + ref++, get_id(h, h->in + v));
				if (r < 0)
					return r;
			}
			v += sz;
		}
		k = k->super ? find_class(h, k->super) : NULL;
	}
	return put_object(h, oid, class_type(h, c), n + HG_HEADER_BYTES, true);
}

/* A class object: its static reference fields are its references. */
static int emit_class_object(struct hg *h, const struct hg_class *c)
{
	unsigned id = h->idsz;
	size_t q = c->rec + 7 * (size_t)id + 8;
	unsigned n = (unsigned)h->in[q] << 8 | h->in[q + 1], ref = 0;
	q += 2;
	for (unsigned i = 0; i < n; i++)
		q += 3 + type_size(h, h->in[q + 2]);
	n = (unsigned)h->in[q] << 8 | h->in[q + 1];
	q += 2;
	for (unsigned i = 0; i < n; i++) {
		unsigned t = h->in[q + id];
		if (t == T_OBJECT) {
			int r = add_ref(h, c->sref_base + ref++, get_id(h, h->in + q + id + 1));
			if (r < 0)
				return r;
		}
		q += id + 1 + type_size(h, t);
	}
	/* The superclass and loader are references too: they keep it alive. */
	return put_object(h, c->id, class_object_type(h, c), HG_HEADER_BYTES, true);
}

static int walk_heap(struct hg *h, size_t p, size_t end, bool emit)
{
	unsigned id = h->idsz;
	while (p < end) {
		unsigned tag = h->in[p++];
		size_t extra, next;
		int rt = root_kind(tag, id, &extra), r = 0;
		if (rt >= 0) {
			if (p + id + extra > end)
				return -EBADMSG;
			if (!emit)
				r = add_root(h, rt, get_id(h, h->in + p));
			if (!emit && r == 0 && tag == SUB_ROOT_THREAD_OBJECT)
				r = add_thread(h, be32(h->in + p + id), be32(h->in + p + id + 4), 0);
			p += id + extra;
		} else if (tag == SUB_CLASS_DUMP) {
			size_t ifields;
			if ((r = class_dump_len(h, p, end, &next, &ifields)) < 0)
				return r;
			if (!emit) {
				r = add_class(h, p, ifields);
			} else {
				struct hg_class *c = find_class(h, get_id(h, h->in + p));
				if (c && c->rec == p)
					r = emit_class_object(h, c);
			}
			p = next;
		} else if (tag == SUB_INSTANCE_DUMP) {
			if (p + 2 * (size_t)id + 8 > end)
				return -EBADMSG;
			size_t n = be32(h->in + p + 2 * id + 4);
			if (n > end - (p + 2 * id + 8))
				return -EBADMSG;
			if (emit)
				r = emit_instance(h, p, end);
			p += 2 * id + 8 + n;
		} else if (tag == SUB_OBJ_ARRAY_DUMP) {
			if (p + 2 * (size_t)id + 8 > end)
				return -EBADMSG;
			size_t n = be32(h->in + p + id + 4);
			size_t e = p + 2 * id + 8;
			if (n > (end - e) / id)
				return -EBADMSG;
			if (emit) {
				struct hg_class *c = find_class(h, get_id(h, h->in + p + id + 8));
				for (size_t i = 0; i < n && r == 0; i++)
					r = add_ref(h, 0, get_id(h, h->in + e + i * id));
				if (r == 0)
					r = put_object(h, get_id(h, h->in + p),
						       c ? class_type(h, c) : h->prim_type[0],
						       n * id + HG_HEADER_BYTES, false);
			}
			p = e + n * id;
		} else if (tag == SUB_PRIM_ARRAY_DUMP || tag == SUB_ART_PRIM_NODATA) {
			if (p + (size_t)id + 9 > end)
				return -EBADMSG;
			size_t n = be32(h->in + p + id + 4);
			unsigned t = h->in[p + id + 8], sz = type_size(h, t);
			if (!sz || t == T_OBJECT)
				return -EBADMSG;
			size_t data = tag == SUB_PRIM_ARRAY_DUMP ? n * sz : 0;
			if (data > end - (p + id + 9)) /* n * sz: at most 2^35 */
				return -EBADMSG;
			/* The elements are skipped, never read. */
			if (emit)
				r = put_object(h, get_id(h, h->in + p), h->prim_type[t],
					       n * sz + HG_HEADER_BYTES, false);
			p += id + 9 + data;
		} else if (tag == SUB_ART_UNREACHABLE) {
			if (p + id > end)
				return -EBADMSG;
			p += id;
		} else if (tag == SUB_ART_HEAP_INFO) {
			if (p + 4 + id > end)
				return -EBADMSG;
			p += 4 + id;
		} else {
			return -EBADMSG;
		}
		if (r < 0)
			return r;
	}
	return 0;
}

/* Field names, "Class.field", for every reference field (instance and
 * static) of every class: iids 1.. in class order. */
static int put_field_names(struct hg *h)
{
	char cname[HG_MAX_NAME + 8], full[2 * HG_MAX_NAME + 16];
	uint64_t iid = 1;
	unsigned id = h->idsz;
	for (uint32_t ci = 0; ci < h->ncls; ci++) {
		struct hg_class *c = &h->cls[ci];
		class_name(h, c, cname, sizeof(cname));
		for (int statics = 1; statics >= 0; statics--) {
			size_t q = c->rec + 7 * (size_t)id + 8;
			unsigned n = (unsigned)h->in[q] << 8 | h->in[q + 1];
			q += 2;
			for (unsigned i = 0; i < n; i++)
				q += 3 + type_size(h, h->in[q + 2]);
			n = (unsigned)h->in[q] << 8 | h->in[q + 1];
			q += 2;
			if (statics)
				c->sref_base = (uint32_t)iid;
			else {
				q = c->ifields;
				n = (unsigned)h->in[q] << 8 | h->in[q + 1];
				q += 2;
				c->iref_base = (uint32_t)iid;
			}
			for (unsigned i = 0; i < n; i++) {
				unsigned t = h->in[q + id];
				if (t == T_OBJECT) {
					size_t len;
					const uint8_t *s = utf8(h, get_id(h, h->in + q), &len);
					int k = snprintf(full, sizeof(full), "%s.%.*s", cname,
							 s ? (int)(len < HG_MAX_NAME ? len : HG_MAX_NAME)
							   : 1, s ? (const char *)s : "?");
					rdc_pbw_reset(&h->obj);
					rdc_pbw_u64(&h->obj, RDC_PF_ISTR_IID, iid++);
					rdc_pbw_bytes(&h->obj, RDC_PF_ISTR_STR, full,
						      k < 0 ? 0 : strnlen(full, sizeof(full)));
					rdc_pbw_msg(&h->hgb, RDC_PF_HG_FIELD_NAMES, &h->obj);
					int r = maybe_flush(h);
					if (r < 0)
						return r;
				}
				q += id + 1 + (statics ? type_size(h, t) : 0);
			}
			if (iid > UINT32_MAX)
				return -E2BIG;
		}
	}
	h->nfield_iids = (uint32_t)iid;
	return 0;
}

static int put_type(struct hg *h, uint64_t tid, const char *name, uint64_t size, uint64_t super,
		    unsigned kind, uint64_t loader)
{
	rdc_pbw_reset(&h->obj);
	rdc_pbw_u64(&h->obj, RDC_PF_HGT_ID, tid);
	rdc_pbw_bytes(&h->obj, RDC_PF_HGT_CLASS_NAME, name, strlen(name));
	if (size)
		rdc_pbw_u64(&h->obj, RDC_PF_HGT_OBJECT_SIZE, size);
	if (super)
		rdc_pbw_u64(&h->obj, RDC_PF_HGT_SUPERCLASS_ID, super);
	rdc_pbw_u64(&h->obj, RDC_PF_HGT_KIND, kind);
	if (loader)
		rdc_pbw_u64(&h->obj, RDC_PF_HGT_CLASSLOADER_ID, loader);
	rdc_pbw_msg(&h->hgb, RDC_PF_HG_TYPES, &h->obj);
	return maybe_flush(h);
}

static int put_types(struct hg *h)
{
	static const char *const prim[HG_NTYPES] = {
		[T_BOOLEAN] = "boolean[]", [T_CHAR] = "char[]", [T_FLOAT] = "float[]",
		[T_DOUBLE] = "double[]", [T_BYTE] = "byte[]", [T_SHORT] = "short[]",
		[T_INT] = "int[]", [T_LONG] = "long[]",
	};
	char name[HG_MAX_NAME + 8], cls[HG_MAX_NAME + 32];
	int r;
	for (uint32_t i = 0; i < h->ncls; i++) {
		struct hg_class *c = &h->cls[i], *s = c->super ? find_class(h, c->super) : NULL;
		class_name(h, c, name, sizeof(name));
		for (unsigned t = 0; t < HG_NTYPES; t++)
			if (prim[t] && !strcmp(name, prim[t]))
				h->prim_type[t] = class_type(h, c);
		unsigned kind = name[0] && name[strlen(name) - 1] == ']' ? RDC_PF_KIND_ARRAY
			: !strcmp(name, "java.lang.String") ? RDC_PF_KIND_STRING
			: RDC_PF_KIND_NORMAL;
		if ((r = put_type(h, class_type(h, c), name,
				  kind == RDC_PF_KIND_ARRAY ? 0 : c->inst + HG_HEADER_BYTES,
				  s ? class_type(h, s) : 0, kind, c->loader)) < 0)
			return r;
		snprintf(cls, sizeof(cls), "java.lang.Class<%s>", name);
		if ((r = put_type(h, class_object_type(h, c), cls, 0, 0, RDC_PF_KIND_CLASS,
				  c->loader)) < 0)
			return r;
	}
	/* Arrays whose class the dump did not describe; slot 0 is for object
	 * arrays, typed "java.lang.Object[]". */
	for (unsigned t = 0; t < HG_NTYPES; t++) {
		if ((t && !prim[t]) || h->prim_type[t])
			continue;
		h->prim_type[t] = 2 * (uint64_t)h->ncls + 1 + t;
		if ((r = put_type(h, h->prim_type[t], t ? prim[t] : "java.lang.Object[]", 0, 0,
				  RDC_PF_KIND_ARRAY, 0)) < 0)
			return r;
	}
	return 0;
}

static int put_roots(struct hg *h)
{
	for (unsigned t = 0; t < 16; t++) {
		if (!h->nroots[t])
			continue;
		rdc_pbw_reset(&h->obj);
		rdc_pbw_packed(&h->obj, RDC_PF_HGR_OBJECT_IDS, h->roots[t], h->nroots[t]);
		rdc_pbw_u64(&h->obj, RDC_PF_HGR_ROOT_TYPE, t);
		rdc_pbw_msg(&h->hgb, RDC_PF_HG_ROOTS, &h->obj);
		int r = maybe_flush(h);
		if (r < 0)
			return r;
	}
	return 0;
}

/* "Class.method" of the STACK FRAME at foff (bounds checked in pass 1)
 * into fn; its length. */
static size_t frame_name(const struct hg *h, size_t foff, char *fn, size_t fnsz)
{
	char cls[HG_MAX_NAME + 8];
	size_t len;
	uint64_t cname = 0;
	const uint8_t *m = utf8(h, get_id(h, h->in + foff + h->idsz), &len);
	size_t ml = m ? (len < HG_MAX_NAME ? len : HG_MAX_NAME) : 1;
	cls[0] = '\0';
	if (hmap_get(&h->cserial, (uint64_t)be32(h->in + foff + 4 * h->idsz) + 1, &cname)) {
		size_t cl;
		const uint8_t *c = utf8(h, cname, &cl);
		if (c)
			java_name(c, cl < HG_MAX_NAME ? cl : HG_MAX_NAME, cls, sizeof(cls));
	}
	int n = snprintf(fn, fnsz, "%s%s%.*s", cls, cls[0] ? "." : "", (int)ml,
			 m ? (const char *)m : "?");
	return n < 0 ? 0 : strnlen(fn, fnsz);
}

/*
 * The thread whose allocation failed (h->proc->oom_tid, a number the
 * runtime reported) as upstream's ArtProcessMetadata.oom_thread_java_stack
 * into st: its frames leaf first, as ART writes them. The thread is found
 * only among the dump's own named threads (the attach path's Thread.print
 * records, whose serial is the OS tid: docs/JVM.md), by equality: a tid
 * that names no thread of the dump, however large, finds nothing and
 * reads nothing. 1 if found, 0 if not.
 */
static int oom_stack(struct hg *h, struct rdc_pbw *st)
{
	char fn[2 * HG_MAX_NAME + 16];
	uint64_t best, toff, foff;
	uint32_t tid = h->proc ? h->proc->oom_tid : 0;
	if (!tid || !hmap_get(&h->tbest, (uint64_t)tid + 1, &best) || !h->threads[best - 1].name ||
	    !hmap_get(&h->strace, (uint64_t)h->threads[best - 1].trace + 1, &toff))
		return 0;
	size_t tb = (size_t)toff;
	uint32_t nf = be32(h->in + tb + 8);
	for (uint32_t k = 0; k < nf; k++) {
		if (!hmap_get(&h->sframe, get_id(h, h->in + tb + 12 + (size_t)k * h->idsz), &foff))
			continue;
		size_t n = frame_name(h, (size_t)foff, fn, sizeof(fn)), sl;
		rdc_pbw_reset(&h->obj);
		rdc_pbw_bytes(&h->obj, RDC_PF_JFRAME_METHOD_NAME, fn, n);
		const uint8_t *src = utf8(h, get_id(h, h->in + foff + 3 * h->idsz), &sl);
		if (src && sl)
			rdc_pbw_bytes(&h->obj, RDC_PF_JFRAME_SOURCE_FILE, src,
				      sl < HG_MAX_NAME ? sl : HG_MAX_NAME);
		/* HPROF's line: > 0 a line; 0 none, -1 unknown, -2 compiled, -3 native. */
		int32_t line = (int32_t)be32(h->in + foff + 4 * h->idsz + 4);
		if (line > 0)
			rdc_pbw_u64(&h->obj, RDC_PF_JFRAME_LINE_NUMBER, (uint64_t)line);
		rdc_pbw_msg(st, RDC_PF_JSTACK_FRAMES, &h->obj);
	}
	return 1;
}

/*
 * Upstream's ArtProcessMetadata (TracePacket 131) on sequence 2: the
 * dumped process's pid, uid and argv[0], and, when an OOM caused the
 * dump, the failing thread's stack. trace_processor reads a dump as an
 * OOME one when oom_allocation_size is present; JVMTI's ResourceExhausted
 * does not tell the size, so it is written as 0 (unknown).
 */
static int put_metadata(struct hg *h)
{
	struct rdc_pbw md, st;
	rdc_pbw_init(&md, HG_MAX_OUT);
	rdc_pbw_init(&st, HG_MAX_OUT);
	const struct rdc_proc *pr = h->proc;
	rdc_pbw_u64(&md, RDC_PF_APM_PID, (uint64_t)(uint32_t)h->pid);
	if (pr && pr->has_uid)
		rdc_pbw_u64(&md, RDC_PF_APM_UID, pr->uid);
	if (pr && pr->cmdline && pr->cmdline_len) {
		size_t n = pr->cmdline_len < RDC_CMDLINE_MAX ? pr->cmdline_len : RDC_CMDLINE_MAX;
		rdc_pbw_bytes(&md, RDC_PF_APM_PROCESS_NAME, pr->cmdline, strnlen(pr->cmdline, n));
	}
	if (pr && pr->oom_tid) {
		rdc_pbw_u64(&md, RDC_PF_APM_OOM_ALLOCATION_SIZE, 0);
		if (oom_stack(h, &st))
			rdc_pbw_msg(&md, RDC_PF_APM_OOM_THREAD_JAVA_STACK, &st);
	}
	if (st.err && !md.err)
		md.err = st.err;
	rdc_pbw_reset(&h->tmp);
	rdc_pbw_u64(&h->tmp, RDC_PF_PACKET_TIMESTAMP, h->ts_ns);
	rdc_pbw_u64(&h->tmp, RDC_PF_PACKET_SEQ_ID, 2);
	rdc_pbw_msg(&h->tmp, RDC_PF_PACKET_ART_PROCESS_METADATA, &md);
	if (md.err && !h->tmp.err)
		h->tmp.err = md.err;
	rdc_pbw_msg(&h->pkt, RDC_PF_TRACE_PACKET, &h->tmp);
	rdc_pbw_free(&md);
	rdc_pbw_free(&st);
	return rdc_pbw_flush(&h->pkt, h->out_fd, &h->out_bytes);
}

/*
 * The threads' stacks at the dump (HotSpot's STACK TRACE per thread, named
 * by the attach path's Thread.print: docs/JVM.md) as one PerfSample per
 * thread on sequence 2, with a ProcessTree naming the process (pid,
 * cmdline, uid: h->proc) and the threads, and the frames and callstacks
 * interned on that sequence; then the process metadata (put_metadata).
 * A thread's tid is its HPROF thread serial: the OS tid for the attach
 * path's threads (ja_hprof writes them so), a serial of HotSpot's for a
 * dump without them.
 */
static int put_threads(struct hg *h)
{
	char fn[2 * HG_MAX_NAME + 16];
	struct rdc_pbw tree, interned, pk;
	uint64_t *fids = NULL;
	int r = 0;
	bool named = false;
	/* The attach path appends named copies (Thread.print) of the stacks
	 * HotSpot dumped unnamed, under serials of its own: when there are
	 * named ones, they are the threads. */
	for (uint32_t i = 0; i < h->nthreads; i++)
		named |= h->threads[i].name != 0;
	rdc_pbw_init(&tree, HG_MAX_OUT);
	rdc_pbw_init(&interned, HG_MAX_OUT);
	rdc_pbw_init(&pk, HG_MAX_OUT);
	rdc_pbw_reset(&h->obj);
	rdc_pbw_process(&h->obj, h->pid, h->proc);
	rdc_pbw_msg(&tree, RDC_PF_PT_PROCESSES, &h->obj);
	uint64_t iid = 0;
	for (uint32_t i = 0; i < h->nthreads && r == 0; i++) {
		size_t len, tb;
		uint64_t tserial = h->threads[i].serial, toff, best;
		if (!hmap_get(&h->tbest, tserial + 1, &best) || best != i + 1)
			continue; /* replaced by a named entry */
		const uint8_t *nm = utf8(h, h->threads[i].name, &len);
		if (named && !h->threads[i].name)
			continue;
		rdc_pbw_reset(&h->obj);
		rdc_pbw_u64(&h->obj, RDC_PF_PTT_TID, tserial);
		rdc_pbw_u64(&h->obj, RDC_PF_PTT_TGID, (uint64_t)(uint32_t)h->pid);
		if (nm)
			rdc_pbw_bytes(&h->obj, RDC_PF_PTT_NAME, nm, len < HG_MAX_NAME ? len : HG_MAX_NAME);
		rdc_pbw_msg(&tree, RDC_PF_PT_THREADS, &h->obj);
		if (!hmap_get(&h->strace, (uint64_t)h->threads[i].trace + 1, &toff))
			continue;
		tb = (size_t)toff;
		uint32_t nf = be32(h->in + tb + 8);
		if (!nf)
			continue;
		uint64_t *f = realloc(fids, nf * sizeof(*f));
		if (!f) {
			r = -ENOMEM;
			break;
		}
		fids = f;
		uint32_t kept = 0;
		/* HPROF lists the top frame first; a callstack is root first. */
		for (uint32_t k = nf; k-- > 0;) {
			uint64_t foff;
			if (!hmap_get(&h->sframe, get_id(h, h->in + tb + 12 + (size_t)k * h->idsz), &foff))
				continue;
			size_t n = frame_name(h, (size_t)foff, fn, sizeof(fn));
			fids[kept++] = ++iid;
			rdc_pbw_reset(&h->obj);
			rdc_pbw_u64(&h->obj, RDC_PF_ISTR_IID, iid);
			rdc_pbw_bytes(&h->obj, RDC_PF_ISTR_STR, fn, n);
			rdc_pbw_msg(&interned, RDC_PF_ID_FUNCTION_NAMES, &h->obj);
			rdc_pbw_reset(&h->obj);
			rdc_pbw_u64(&h->obj, RDC_PF_FRAME_IID, iid);
			rdc_pbw_u64(&h->obj, RDC_PF_FRAME_FUNCTION_NAME_ID, iid);
			rdc_pbw_msg(&interned, RDC_PF_ID_FRAMES, &h->obj);
		}
		if (!kept)
			continue;
		rdc_pbw_reset(&h->obj);
		rdc_pbw_u64(&h->obj, RDC_PF_CS_IID, tserial + 1);
		rdc_pbw_packed(&h->obj, RDC_PF_CS_FRAME_IDS, fids, kept);
		rdc_pbw_msg(&interned, RDC_PF_ID_CALLSTACKS, &h->obj);
	}
	/* The tree and the interning first, clearing the sequence's state. */
	if (r == 0) {
		rdc_pbw_reset(&h->tmp);
		rdc_pbw_u64(&h->tmp, RDC_PF_PACKET_TIMESTAMP, h->ts_ns);
		rdc_pbw_u64(&h->tmp, RDC_PF_PACKET_SEQ_ID, 2);
		rdc_pbw_u64(&h->tmp, RDC_PF_PACKET_SEQ_FLAGS, 1); /* SEQ_INCREMENTAL_STATE_CLEARED */
		rdc_pbw_msg(&h->tmp, RDC_PF_PACKET_PROCESS_TREE, &tree);
		if (interned.n)
			rdc_pbw_msg(&h->tmp, RDC_PF_PACKET_INTERNED_DATA, &interned);
		rdc_pbw_msg(&h->pkt, RDC_PF_TRACE_PACKET, &h->tmp);
		r = rdc_pbw_flush(&h->pkt, h->out_fd, &h->out_bytes);
	}
	for (uint32_t i = 0; i < h->nthreads && r == 0; i++) {
		uint64_t tserial = h->threads[i].serial, toff, best;
		if ((named && !h->threads[i].name) ||
		    !hmap_get(&h->tbest, tserial + 1, &best) || best != i + 1 ||
		    !hmap_get(&h->strace, (uint64_t)h->threads[i].trace + 1, &toff) ||
		    !be32(h->in + toff + 8))
			continue;
		rdc_pbw_reset(&pk);
		rdc_pbw_u64(&pk, RDC_PF_PS_PID, (uint64_t)(uint32_t)h->pid);
		rdc_pbw_u64(&pk, RDC_PF_PS_TID, tserial);
		rdc_pbw_u64(&pk, RDC_PF_PS_CALLSTACK_IID, tserial + 1);
		rdc_pbw_reset(&h->tmp);
		rdc_pbw_u64(&h->tmp, RDC_PF_PACKET_TIMESTAMP, h->ts_ns);
		rdc_pbw_u64(&h->tmp, RDC_PF_PACKET_SEQ_ID, 2);
		rdc_pbw_msg(&h->tmp, RDC_PF_PACKET_PERF_SAMPLE, &pk);
		rdc_pbw_msg(&h->pkt, RDC_PF_TRACE_PACKET, &h->tmp);
		r = rdc_pbw_flush(&h->pkt, h->out_fd, &h->out_bytes);
	}
	free(fids);
	rdc_pbw_free(&tree);
	rdc_pbw_free(&interned);
	rdc_pbw_free(&pk);
	return r ? r : put_metadata(h);
}

static int pass2(struct hg *h)
{
	int r;
	if ((r = put_types(h)) < 0 || (r = put_field_names(h)) < 0 || (r = put_roots(h)) < 0)
		return r;
	size_t p = 0;
	while (h->in[p])
		p++;
	p += 13;
	while (p < h->size) {
		unsigned tag = h->in[p];
		size_t len = be32(h->in + p + 5), b = p + 9;
		if ((tag == 0x0c || tag == 0x1c) && (r = walk_heap(h, b, b + len, true)) < 0)
			return r;
		p = b + len;
	}
	if ((r = flush_packet(h, true)) < 0)
		return r;
	return put_threads(h);
}

int rdc_heapgraph_buf(const uint8_t *in, size_t n, int out_fd, int32_t pid,
		      const struct rdc_proc *proc, struct rdc_stats *st)
{
	struct hg h;
	int r;
	memset(&h, 0, sizeof(h));
	h.in = in;
	h.size = n;
	h.pid = pid;
	h.proc = proc;
	h.out_fd = out_fd;
	rdc_pbw_init(&h.hgb, HG_MAX_OUT);
	rdc_pbw_init(&h.obj, HG_MAX_OUT);
	rdc_pbw_init(&h.tmp, HG_MAX_OUT);
	rdc_pbw_init(&h.pkt, HG_MAX_OUT);
	if ((r = pass1(&h)) == 0 && !h.ncls)
		r = -EBADMSG;
	if (r == 0)
		r = pass2(&h);
	if (r == 0 && !h.objects)
		r = -ENODATA;
	if (st) {
		st->in_bytes = n;
		st->out_bytes = h.out_bytes;
		st->kept = h.objects;
	}
	hmap_free(&h.utf8);
	hmap_free(&h.cname);
	hmap_free(&h.cidx);
	hmap_free(&h.cserial);
	hmap_free(&h.sframe);
	hmap_free(&h.strace);
	free(h.threads);
	hmap_free(&h.tbest);
	free(h.cls);
	for (unsigned t = 0; t < 16; t++)
		free(h.roots[t]);
	free(h.refs_f);
	free(h.refs_o);
	rdc_pbw_free(&h.hgb);
	rdc_pbw_free(&h.obj);
	rdc_pbw_free(&h.tmp);
	rdc_pbw_free(&h.pkt);
	return r;
}

int rdc_heapgraph(int in_fd, int out_fd, const struct rdc_policy *p, struct rdc_stats *st)
{
	uint8_t *in = NULL;
	size_t n = 0;
	if (!p || !p->npids)
		return -EINVAL;
	int r = util_read_all(in_fd, HG_MAX_IN, &in, &n);
	if (r < 0)
		return r;
	r = rdc_heapgraph_buf(in, n, out_fd, p->pids[0], p->proc, st);
	free(in);
	return r;
}

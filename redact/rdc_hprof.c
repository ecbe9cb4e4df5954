/*
 * HPROF heap dump redaction (docs/DESIGN.md §6, docs/HPROF.md): keep the object
 * graph, zero the data. Every record keeps its size, so the output has the
 * same structure as the input and any HPROF reader still opens it.
 *
 * Two passes over the seekable input. Pass 1 checks the whole structure and
 * collects each CLASS DUMP's superclass and instance field types, and the
 * ids that records use as names; nothing is written. Pass 2 repeats the
 * walk and writes, now able to lay out every INSTANCE DUMP (whose class may
 * come later in the file) and to drop UTF8 records that name nothing. I/O
 * goes through two fixed buffers, so memory is the tables plus 2 MiB.
 */
#include "rdc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HP_IOBUF (1u << 20)
#define HP_MAX_CLASSES (1u << 20)
#define HP_MAX_FIELDS (1u << 24) /* instance field types, all classes together */
#define HP_MAX_NAMES (1u << 22)  /* distinct UTF8 ids referenced as names */
#define HP_NONE UINT32_MAX
#define HP_HEADER 31             /* "JAVA PROFILE 1.0.x\0", u4 id size, u8 time */

/* Top-level record tags. */
enum {
	TAG_UTF8 = 0x01,
	TAG_LOAD_CLASS = 0x02,
	TAG_UNLOAD_CLASS = 0x03,
	TAG_STACK_FRAME = 0x04,
	TAG_STACK_TRACE = 0x05,
	TAG_ALLOC_SITES = 0x06,
	TAG_HEAP_SUMMARY = 0x07,
	TAG_START_THREAD = 0x0a,
	TAG_END_THREAD = 0x0b,
	TAG_HEAP_DUMP = 0x0c,
	TAG_CPU_SAMPLES = 0x0d,
	TAG_CONTROL_SETTINGS = 0x0e,
	TAG_HEAP_DUMP_SEGMENT = 0x1c,
	TAG_HEAP_DUMP_END = 0x2c,
};

/* Heap dump sub-record tags; 0x8x, 0x90, 0xc3 and 0xfe are ART's (1.0.3). */
enum {
	SUB_ROOT_JNI_GLOBAL = 0x01,
	SUB_ROOT_JNI_LOCAL = 0x02,
	SUB_ROOT_JAVA_FRAME = 0x03,
	SUB_ROOT_NATIVE_STACK = 0x04,
	SUB_ROOT_STICKY_CLASS = 0x05,
	SUB_ROOT_THREAD_BLOCK = 0x06,
	SUB_ROOT_MONITOR_USED = 0x07,
	SUB_ROOT_THREAD_OBJECT = 0x08,
	SUB_CLASS_DUMP = 0x20,
	SUB_INSTANCE_DUMP = 0x21,
	SUB_OBJ_ARRAY_DUMP = 0x22,
	SUB_PRIM_ARRAY_DUMP = 0x23,
	SUB_ART_ROOT_INTERNED_STRING = 0x89,
	SUB_ART_ROOT_FINALIZING = 0x8a,
	SUB_ART_ROOT_DEBUGGER = 0x8b,
	SUB_ART_ROOT_REFERENCE_CLEANUP = 0x8c,
	SUB_ART_ROOT_VM_INTERNAL = 0x8d,
	SUB_ART_ROOT_JNI_MONITOR = 0x8e,
	SUB_ART_UNREACHABLE = 0x90,
	SUB_ART_PRIM_ARRAY_NODATA = 0xc3,
	SUB_ART_HEAP_DUMP_INFO = 0xfe,
	SUB_ROOT_UNKNOWN = 0xff,
};

/* Basic types of fields and array elements. */
enum {
	T_OBJECT = 2,
	T_BOOLEAN = 4,
	T_CHAR = 5,
	T_FLOAT = 6,
	T_DOUBLE = 7,
	T_BYTE = 8,
	T_SHORT = 9,
	T_INT = 10,
	T_LONG = 11,
};

enum { CLS_NEW, CLS_VISITING, CLS_DONE };
#define F_REF 0x80

struct hp_class {
	uint64_t id, super;
	uint32_t nbytes;  /* instance field bytes with superclasses, saturated */
	uint32_t own;     /* bytes of this class's own fields */
	uint32_t types;   /* own fields: offset into hp.types */
	uint32_t next;    /* nearest superclass that has fields, or HP_NONE */
	uint16_t nfields;
	uint8_t state;
};

struct hp {
	int in_fd, out_fd;
	int emit;                /* pass 2: write the output */
	int art;                 /* 1.0.3: ART's sub-records are allowed */
	unsigned idsz;
	uint64_t size;           /* input bytes, fixed before pass 1 */

	uint8_t *ib;             /* input window: ib[ih..it) is file offset ioff + ih.. */
	size_t ih, it;
	uint64_t ioff;
	uint8_t *ob;
	size_t on;

	struct hp_class *cls;
	uint32_t ncls, capcls;
	uint32_t *slot;          /* open addressing, class index + 1, 0 = free */
	uint32_t nslot;          /* power of two */
	uint8_t *types;          /* per field: byte size, | F_REF for a reference */
	uint32_t ntypes, captypes;
	uint64_t *names;         /* set of referenced name ids, 0 = free */
	uint32_t nnames, nname_slots;

	uint64_t out_bytes, kept, dropped, anonymised, subrecs;
};

static uint32_t be16(const uint8_t *p)
{
	return (uint32_t)p[0] << 8 | p[1];
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t get_id(const struct hp *h, const uint8_t *p)
{
	if (h->idsz == 4)
		return be32(p);
	return (uint64_t)be32(p) << 32 | be32(p + 4);
}

/* Bytes of a value of basic type t, or 0 if t is not a valid type. */
static unsigned type_size(const struct hp *h, unsigned t)
{
	switch (t) {
	case T_OBJECT:
		return h->idsz;
	case T_BOOLEAN:
	case T_BYTE:
		return 1;
	case T_CHAR:
	case T_SHORT:
		return 2;
	case T_FLOAT:
	case T_INT:
		return 4;
	case T_DOUBLE:
	case T_LONG:
		return 8;
	default:
		return 0;
	}
}

/* ---- Input: a window over the file, read with pread at our own offset. */

static uint64_t in_pos(const struct hp *h)
{
	return h->ioff + h->ih;
}

/* Make n (at most HP_IOBUF) bytes available at ib + ih. */
static int in_need(struct hp *h, size_t n)
{
	if (h->it - h->ih >= n)
		return 0;
	if (in_pos(h) > h->size || n > h->size - in_pos(h))
		return -EBADMSG;
	memmove(h->ib, h->ib + h->ih, h->it - h->ih);
	h->ioff += h->ih;
	h->it -= h->ih;
	h->ih = 0;
	while (h->it < n) {
		uint64_t left = h->size - (h->ioff + h->it);
		size_t want = HP_IOBUF - h->it;
		if (want > left)
			want = (size_t)left;
		ssize_t r = pread(h->in_fd, h->ib + h->it, want, (off_t)(h->ioff + h->it));
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0) /* shorter than lseek said: truncated under us */
			return -EBADMSG;
		h->it += (size_t)r;
	}
	return 0;
}

/* Consume n bytes that must end by end; *p is valid until the next in_need. */
static int in_take(struct hp *h, size_t n, uint64_t end, const uint8_t **p)
{
	if (n > end - in_pos(h))
		return -EBADMSG;
	int rc = in_need(h, n);
	if (rc)
		return rc;
	*p = h->ib + h->ih;
	h->ih += n;
	return 0;
}

/* Skip n bytes without reading them; the caller has bounds-checked n. */
static void in_skip(struct hp *h, uint64_t n)
{
	if (n <= h->it - h->ih) {
		h->ih += (size_t)n;
		return;
	}
	h->ioff = in_pos(h) + n;
	h->ih = h->it = 0;
}

/* ---- Output: buffered, and a no-op in pass 1. */

static int out_flush(struct hp *h)
{
	size_t done = 0;
	while (done < h->on) {
		ssize_t w = write(h->out_fd, h->ob + done, h->on - done);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (w == 0)
			return -EIO;
		done += (size_t)w;
	}
	h->on = 0;
	return 0;
}

/* Append n bytes of p, or n zero bytes if p is NULL. */
static int out_put(struct hp *h, const uint8_t *p, uint64_t n)
{
	if (!h->emit)
		return 0;
	h->out_bytes += n;
	while (n) {
		if (h->on == HP_IOBUF) {
			int rc = out_flush(h);
			if (rc)
				return rc;
		}
		size_t c = HP_IOBUF - h->on;
		if (c > n)
			c = (size_t)n;
		if (p) {
			memcpy(h->ob + h->on, p, c);
			p += c;
		} else {
			memset(h->ob + h->on, 0, c);
		}
		h->on += c;
		n -= c;
	}
	return 0;
}

/* Pass n input bytes (ending by end) to the output, or zeros in their place. */
static int xfer(struct hp *h, uint64_t n, uint64_t end, int zero)
{
	if (n > end - in_pos(h))
		return -EBADMSG;
	if (!h->emit || zero) {
		/* Zeros do not depend on the input: no need to read it. */
		in_skip(h, n);
		return out_put(h, NULL, zero ? n : 0);
	}
	while (n) {
		int rc = in_need(h, 1);
		if (rc)
			return rc;
		size_t c = h->it - h->ih;
		if (c > n)
			c = (size_t)n;
		if ((rc = out_put(h, h->ib + h->ih, c)))
			return rc;
		h->ih += c;
		n -= c;
	}
	return 0;
}

/* Take n bytes and echo them to the output. */
static int take_copy(struct hp *h, size_t n, uint64_t end, const uint8_t **p)
{
	int rc = in_take(h, n, end, p);
	return rc ? rc : out_put(h, *p, n);
}

/* ---- Class table. */

static uint32_t slot_of(const struct hp *h, uint64_t id)
{
	return (uint32_t)((id * 0x9e3779b97f4a7c15ull) >> 32) & (h->nslot - 1);
}

static uint32_t class_find(const struct hp *h, uint64_t id)
{
	if (!h->nslot)
		return HP_NONE;
	for (uint32_t s = slot_of(h, id);; s = (s + 1) & (h->nslot - 1)) {
		uint32_t v = h->slot[s];
		if (!v)
			return HP_NONE;
		if (h->cls[v - 1].id == id)
			return v - 1;
	}
}

static void slot_insert(struct hp *h, uint32_t idx)
{
	uint32_t s = slot_of(h, h->cls[idx].id);
	while (h->slot[s])
		s = (s + 1) & (h->nslot - 1);
	h->slot[s] = idx + 1;
}

/* Room for one more class, keeping the hash table at most half full. */
static int class_reserve(struct hp *h)
{
	if (h->ncls >= HP_MAX_CLASSES)
		return -E2BIG;
	if (h->ncls == h->capcls) {
		uint32_t cap = h->capcls ? h->capcls * 2 : 1024;
		struct hp_class *c = realloc(h->cls, (size_t)cap * sizeof(*c));
		if (!c)
			return -ENOMEM;
		h->cls = c;
		h->capcls = cap;
	}
	if ((uint64_t)(h->ncls + 1) * 2 > h->nslot) {
		uint32_t n = h->nslot ? h->nslot * 2 : 2048;
		uint32_t *s = calloc(n, sizeof(*s));
		if (!s)
			return -ENOMEM;
		free(h->slot);
		h->slot = s;
		h->nslot = n;
		for (uint32_t i = 0; i < h->ncls; i++)
			slot_insert(h, i);
	}
	return 0;
}

static int types_reserve(struct hp *h, uint32_t n)
{
	if (n > HP_MAX_FIELDS - h->ntypes)
		return -E2BIG;
	if (h->ntypes + n <= h->captypes)
		return 0;
	uint32_t cap = h->captypes ? h->captypes : 4096;
	while (cap < h->ntypes + n)
		cap = cap > HP_MAX_FIELDS / 2 ? HP_MAX_FIELDS : cap * 2;
	uint8_t *t = realloc(h->types, cap);
	if (!t)
		return -ENOMEM;
	h->types = t;
	h->captypes = cap;
	return 0;
}

/*
 * Names. HotSpot writes its whole symbol table as UTF8 records, string
 * literals included, so only the UTF8 records that something in the dump
 * names (classes, fields, frames, threads, heaps) are kept.
 */
static uint32_t name_slot(uint64_t id, uint32_t nslots)
{
	return (uint32_t)((id * 0x9e3779b97f4a7c15ull) >> 32) & (nslots - 1);
}

static int name_has(const struct hp *h, uint64_t id)
{
	if (!id || !h->nname_slots)
		return 0;
	for (uint32_t s = name_slot(id, h->nname_slots);; s = (s + 1) & (h->nname_slots - 1)) {
		if (h->names[s] == id)
			return 1;
		if (!h->names[s])
			return 0;
	}
}

static void name_insert(uint64_t *names, uint32_t nslots, uint64_t id)
{
	uint32_t s = name_slot(id, nslots);
	while (names[s] && names[s] != id)
		s = (s + 1) & (nslots - 1);
	names[s] = id;
}

/* Record a reference to name id (pass 1 only; 0 is no name). */
static int name_ref(struct hp *h, uint64_t id)
{
	if (h->emit || !id || name_has(h, id))
		return 0;
	if (h->nnames >= HP_MAX_NAMES)
		return -E2BIG;
	if ((uint64_t)(h->nnames + 1) * 2 > h->nname_slots) {
		uint32_t n = h->nname_slots ? h->nname_slots * 2 : 4096;
		uint64_t *t = calloc(n, sizeof(*t));
		if (!t)
			return -ENOMEM;
		for (uint32_t i = 0; i < h->nname_slots; i++)
			if (h->names[i])
				name_insert(t, n, h->names[i]);
		free(h->names);
		h->names = t;
		h->nname_slots = n;
	}
	name_insert(h->names, h->nname_slots, id);
	h->nnames++;
	return 0;
}

/*
 * Give every class its full instance size and its nearest superclass with
 * fields. Iterative with an explicit stack, since a crafted chain can be a
 * million classes deep; a cycle or an unknown superclass is malformed.
 * Skipping field-less superclasses keeps the per-instance walk linear in
 * the instance's bytes.
 */
static int classes_resolve(struct hp *h)
{
	if (!h->ncls)
		return 0;
	uint32_t *stack = malloc((size_t)h->ncls * sizeof(*stack));
	if (!stack)
		return -ENOMEM;
	int rc = 0;
	for (uint32_t i = 0; i < h->ncls; i++) {
		uint32_t depth = 0, c = i, anc = HP_NONE;
		while (h->cls[c].state != CLS_DONE) {
			struct hp_class *k = &h->cls[c];
			if (k->state == CLS_VISITING) {
				rc = -EBADMSG;
				goto out;
			}
			k->state = CLS_VISITING;
			stack[depth++] = c;
			if (!k->super)
				break;
			if ((c = class_find(h, k->super)) == HP_NONE) {
				rc = -EBADMSG;
				goto out;
			}
		}
		if (h->cls[c].state == CLS_DONE)
			anc = c;
		uint64_t total = anc == HP_NONE ? 0 : h->cls[anc].nbytes;
		uint32_t next = HP_NONE;
		if (anc != HP_NONE)
			next = h->cls[anc].nfields ? anc : h->cls[anc].next;
		while (depth) {
			uint32_t x = stack[--depth];
			struct hp_class *k = &h->cls[x];
			total += k->own;
			k->nbytes = total > UINT32_MAX ? UINT32_MAX : (uint32_t)total;
			k->next = next;
			k->state = CLS_DONE;
			if (k->nfields)
				next = x;
		}
	}
out:
	free(stack);
	return rc;
}

/* ---- Heap dump sub-records. */

/* A constant pool or static value: references kept, primitives zeroed. */
static int value(struct hp *h, unsigned t, uint64_t end)
{
	unsigned sz = type_size(h, t);
	if (!sz)
		return -EBADMSG;
	return xfer(h, sz, end, t != T_OBJECT);
}

static int class_dump(struct hp *h, uint64_t end)
{
	const unsigned I = h->idsz;
	const uint8_t *p;
	int rc;

	/* id, stack serial, super, loader, signers, domain, 2 reserved, size */
	if ((rc = take_copy(h, 7 * I + 8, end, &p)))
		return rc;
	uint64_t id = get_id(h, p), super = get_id(h, p + I + 4);
	if (!id || id == super)
		return -EBADMSG;

	if ((rc = take_copy(h, 2, end, &p)))
		return rc;
	for (uint32_t i = 0, n = be16(p); i < n; i++) {
		if ((rc = take_copy(h, 3, end, &p)) || (rc = value(h, p[2], end)))
			return rc;
	}
	if ((rc = take_copy(h, 2, end, &p)))
		return rc;
	for (uint32_t i = 0, n = be16(p); i < n; i++) {
		if ((rc = take_copy(h, I + 1, end, &p)) || (rc = name_ref(h, get_id(h, p))) ||
		    (rc = value(h, p[I], end)))
			return rc;
	}

	if ((rc = take_copy(h, 2, end, &p)))
		return rc;
	uint32_t nf = be16(p);
	if ((uint64_t)nf * (I + 1) > end - in_pos(h))
		return -EBADMSG;
	if (!h->emit) {
		if (class_find(h, id) != HP_NONE)
			return -EBADMSG; /* two layouts for one id */
		if ((rc = class_reserve(h)) || (rc = types_reserve(h, nf)))
			return rc;
	}
	uint32_t own = 0;
	for (uint32_t i = 0; i < nf; i++) {
		if ((rc = take_copy(h, I + 1, end, &p)))
			return rc;
		uint8_t t = p[I];
		unsigned sz = type_size(h, t);
		if (!sz)
			return -EBADMSG;
		if ((rc = name_ref(h, get_id(h, p))))
			return rc;
		own += sz;
		if (!h->emit)
			h->types[h->ntypes + i] = (uint8_t)(sz | (t == T_OBJECT ? F_REF : 0));
	}
	if (h->emit)
		return 0;
	struct hp_class *k = &h->cls[h->ncls];
	*k = (struct hp_class){ .id = id, .super = super, .own = own,
				.types = h->ntypes, .next = HP_NONE,
				.nfields = (uint16_t)nf, .state = CLS_NEW };
	h->ntypes += nf;
	slot_insert(h, h->ncls++);
	return 0;
}

static int instance_dump(struct hp *h, uint64_t end)
{
	const unsigned I = h->idsz;
	const uint8_t *p;
	int rc;

	/* id, stack serial, class id, byte count */
	if ((rc = in_take(h, 2 * I + 8, end, &p)))
		return rc;
	uint64_t cid = get_id(h, p + I + 4);
	uint32_t n = be32(p + 2 * I + 4);
	if (n > end - in_pos(h))
		return -EBADMSG;
	if (!h->emit) {
		in_skip(h, n);
		return 0;
	}
	if ((rc = out_put(h, p, 2 * I + 8)))
		return rc;
	uint32_t c = class_find(h, cid);
	if (c == HP_NONE || h->cls[c].nbytes != n)
		return -EBADMSG;
	if (!h->cls[c].nfields)
		c = h->cls[c].next;
	h->anonymised++;

	/* Field values: this class's, then each superclass's. */
	if (n <= HP_IOBUF) {
		/* The common case: lay it out from one buffer into the other. */
		if ((rc = in_need(h, n)))
			return rc;
		if (HP_IOBUF - h->on < n && (rc = out_flush(h)))
			return rc;
		/* Copy it all, then clear each run of primitives. */
		uint8_t *dst = h->ob + h->on;
		memcpy(dst, h->ib + h->ih, n);
		size_t off = 0, zrun = 0;
		for (; c != HP_NONE; c = h->cls[c].next) {
			const struct hp_class *k = &h->cls[c];
			const uint8_t *t = h->types + k->types;
			for (uint32_t i = 0; i < k->nfields; i++) {
				unsigned sz = t[i] & ~F_REF;
				if (!(t[i] & F_REF)) {
					zrun += sz;
				} else if (zrun) {
					memset(dst + off - zrun, 0, zrun);
					zrun = 0;
				}
				off += sz;
			}
		}
		if (zrun)
			memset(dst + off - zrun, 0, zrun);
		h->ih += n;
		h->on += n;
		h->out_bytes += n;
		return 0;
	}
	/* Bigger than a buffer: stream runs of references and of primitives. */
	uint64_t run = 0;
	int zero = 0;
	for (; c != HP_NONE; c = h->cls[c].next) {
		const struct hp_class *k = &h->cls[c];
		const uint8_t *t = h->types + k->types;
		for (uint32_t i = 0; i < k->nfields; i++) {
			int z = !(t[i] & F_REF);
			if (run && z != zero) {
				if ((rc = xfer(h, run, end, zero)))
					return rc;
				run = 0;
			}
			zero = z;
			run += t[i] & ~F_REF;
		}
	}
	if (run && (rc = xfer(h, run, end, zero)))
		return rc;
	return 0;
}

static int obj_array_dump(struct hp *h, uint64_t end)
{
	const unsigned I = h->idsz;
	const uint8_t *p;
	/* id, stack serial, count, array class id; then the references */
	int rc = take_copy(h, 2 * I + 8, end, &p);
	if (rc)
		return rc;
	return xfer(h, (uint64_t)be32(p + I + 4) * I, end, 0);
}

static int prim_array_dump(struct hp *h, uint64_t end)
{
	const unsigned I = h->idsz;
	const uint8_t *p;
	/* id, stack serial, count, element type; then the elements */
	int rc = take_copy(h, I + 9, end, &p);
	if (rc)
		return rc;
	unsigned t = p[I + 8], sz = type_size(h, t);
	if (!sz || t == T_OBJECT)
		return -EBADMSG;
	if ((rc = xfer(h, (uint64_t)be32(p + I + 4) * sz, end, 1)))
		return rc;
	if (h->emit)
		h->anonymised++;
	return 0;
}

/* Size of a sub-record that is kept as is, or 0 if tag is not one. */
static unsigned fixed_sub_size(const struct hp *h, unsigned tag)
{
	const unsigned I = h->idsz;
	switch (tag) {
	case SUB_ROOT_UNKNOWN:
	case SUB_ROOT_STICKY_CLASS:
	case SUB_ROOT_MONITOR_USED:
		return I;
	case SUB_ROOT_JNI_GLOBAL:
		return 2 * I;
	case SUB_ROOT_NATIVE_STACK:
	case SUB_ROOT_THREAD_BLOCK:
		return I + 4;
	case SUB_ROOT_JNI_LOCAL:
	case SUB_ROOT_JAVA_FRAME:
	case SUB_ROOT_THREAD_OBJECT:
		return I + 8;
	}
	if (!h->art)
		return 0;
	switch (tag) {
	case SUB_ART_ROOT_INTERNED_STRING:
	case SUB_ART_ROOT_FINALIZING:
	case SUB_ART_ROOT_DEBUGGER:
	case SUB_ART_ROOT_REFERENCE_CLEANUP:
	case SUB_ART_ROOT_VM_INTERNAL:
	case SUB_ART_UNREACHABLE:
		return I;
	case SUB_ART_ROOT_JNI_MONITOR:
		return I + 8;
	case SUB_ART_HEAP_DUMP_INFO:
		return 4 + I;
	case SUB_ART_PRIM_ARRAY_NODATA: /* id, stack serial, count, type: no data */
		return I + 9;
	}
	return 0;
}

/* The sub-records of one HEAP DUMP or HEAP DUMP SEGMENT, ending at end. */
static int heap_dump(struct hp *h, uint64_t end)
{
	while (in_pos(h) < end) {
		const uint8_t *p;
		int rc = take_copy(h, 1, end, &p);
		if (rc)
			return rc;
		unsigned tag = p[0], sz;
		h->subrecs++;
		switch (tag) {
		case SUB_CLASS_DUMP:
			rc = class_dump(h, end);
			break;
		case SUB_INSTANCE_DUMP:
			rc = instance_dump(h, end);
			break;
		case SUB_OBJ_ARRAY_DUMP:
			rc = obj_array_dump(h, end);
			break;
		case SUB_PRIM_ARRAY_DUMP:
			rc = prim_array_dump(h, end);
			break;
		default:
			/* Without a length, an unknown sub-record cannot be skipped. */
			if (!(sz = fixed_sub_size(h, tag)))
				return -EBADMSG;
			if (tag == SUB_ART_HEAP_DUMP_INFO) { /* heap type, heap name id */
				if (!(rc = take_copy(h, sz, end, &p)))
					rc = name_ref(h, get_id(h, p + 4));
				break;
			}
			rc = xfer(h, sz, end, 0);
		}
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- Top-level records. */

/* A body made of a fixed prefix and count (u4 at count_at) entries of esz. */
static int counted(struct hp *h, uint32_t len, uint64_t end, size_t prefix, size_t count_at,
		   unsigned esz)
{
	const uint8_t *p;
	if (len < prefix)
		return -EBADMSG;
	int rc = take_copy(h, prefix, end, &p);
	if (rc)
		return rc;
	if ((uint64_t)be32(p + count_at) * esz != len - prefix)
		return -EBADMSG;
	return xfer(h, len - prefix, end, 0);
}

static int fixed(struct hp *h, uint32_t len, uint64_t end, uint64_t want)
{
	return len == want ? xfer(h, len, end, 0) : -EBADMSG;
}

/* A fixed-size body (at most 4 ids and 8 bytes) with name ids at at[]. */
static int named(struct hp *h, uint32_t len, uint64_t end, uint32_t want, const unsigned *at,
		 size_t nat)
{
	const uint8_t *p;
	if (len != want)
		return -EBADMSG;
	int rc = take_copy(h, len, end, &p);
	for (size_t i = 0; i < nat && !rc; i++)
		rc = name_ref(h, get_id(h, p + at[i]));
	return rc;
}

static int known_tag(unsigned tag)
{
	switch (tag) {
	case TAG_UTF8:
	case TAG_LOAD_CLASS:
	case TAG_UNLOAD_CLASS:
	case TAG_STACK_FRAME:
	case TAG_STACK_TRACE:
	case TAG_ALLOC_SITES:
	case TAG_HEAP_SUMMARY:
	case TAG_START_THREAD:
	case TAG_END_THREAD:
	case TAG_HEAP_DUMP:
	case TAG_CPU_SAMPLES:
	case TAG_CONTROL_SETTINGS:
	case TAG_HEAP_DUMP_SEGMENT:
	case TAG_HEAP_DUMP_END:
		return 1;
	}
	return 0;
}

static int header(struct hp *h)
{
	const uint8_t *p;
	int rc = take_copy(h, HP_HEADER, h->size, &p);
	if (rc)
		return rc;
	if (memcmp(p, "JAVA PROFILE 1.0.", 17) != 0 || p[17] < '1' || p[17] > '3' || p[18])
		return -EBADMSG;
	h->art = p[17] == '3';
	h->idsz = be32(p + 19);
	if (h->idsz != 4 && h->idsz != 8)
		return -EBADMSG;
	return 0;
}

static int walk(struct hp *h)
{
	int rc, open_segment = 0;

	if ((rc = header(h)))
		return rc;
	const unsigned I = h->idsz;
	while (in_pos(h) < h->size) {
		const uint8_t *p;
		/* u1 tag, u4 time, u4 body length */
		if ((rc = in_take(h, 9, h->size, &p)))
			return rc;
		unsigned tag = p[0];
		uint32_t len = be32(p + 5);
		if (len > h->size - in_pos(h))
			return -EBADMSG;
		uint64_t end = in_pos(h) + len;
		uint8_t rec[9];
		memcpy(rec, p, sizeof(rec)); /* p does not survive the next read */

		/* Unknown content cannot be vetted, so it never goes out; nor do
		 * UTF8 records that name nothing (pass 2 knows the names). */
		int keep = known_tag(tag);
		if (keep && tag == TAG_UTF8) {
			if (len < I)
				return -EBADMSG;
			if ((rc = in_need(h, I)))
				return rc;
			keep = !h->emit || name_has(h, get_id(h, h->ib + h->ih));
		}
		if (!keep) {
			in_skip(h, len);
			if (h->emit)
				h->dropped++;
			continue;
		}
		if ((rc = out_put(h, rec, sizeof(rec))))
			return rc;
		if (h->emit)
			h->kept++;

		switch (tag) {
		case TAG_UTF8: /* name id, then the name's bytes */
			rc = xfer(h, len, end, 0);
			break;
		case TAG_LOAD_CLASS: { /* serial, class id, stack serial, name id */
			const unsigned at[] = { 8 + I };
			rc = named(h, len, end, 2 * I + 8, at, 1);
			break;
		}
		case TAG_UNLOAD_CLASS:
		case TAG_END_THREAD:
			rc = fixed(h, len, end, 4);
			break;
		case TAG_STACK_FRAME: { /* frame, method, signature, source; class serial, line */
			const unsigned at[] = { I, 2 * I, 3 * I };
			rc = named(h, len, end, 4 * I + 8, at, 3);
			break;
		}
		case TAG_STACK_TRACE: /* serial, thread serial, count; frame ids */
			rc = counted(h, len, end, 12, 8, I);
			break;
		case TAG_ALLOC_SITES: /* 34-byte summary, count; 25-byte sites */
			rc = counted(h, len, end, 34, 30, 25);
			break;
		case TAG_HEAP_SUMMARY:
			rc = fixed(h, len, end, 24);
			break;
		case TAG_START_THREAD: { /* serial, thread, trace serial; thread, group, parent names */
			const unsigned at[] = { 8 + I, 8 + 2 * I, 8 + 3 * I };
			rc = named(h, len, end, 4 * I + 8, at, 3);
			break;
		}
		case TAG_CPU_SAMPLES: /* total, count; (samples, trace serial) pairs */
			rc = counted(h, len, end, 8, 4, 8);
			break;
		case TAG_CONTROL_SETTINGS:
			rc = fixed(h, len, end, 6);
			break;
		case TAG_HEAP_DUMP_SEGMENT:
			open_segment = 1;
			/* fall through */
		case TAG_HEAP_DUMP:
			rc = heap_dump(h, end);
			break;
		case TAG_HEAP_DUMP_END:
			open_segment = 0;
			rc = len ? -EBADMSG : 0;
			break;
		}
		if (rc)
			return rc;
	}
	/* Segments without their END mean the dump was cut at a record
	 * boundary; no sub-record at all would be an empty result. */
	if (open_segment || !h->subrecs)
		return -EBADMSG;
	return 0;
}

int rdc_hprof(int in_fd, int out_fd, const struct rdc_policy *p, struct rdc_stats *st)
{
	/* The dump is one process's heap: the policy selects nothing inside. */
	struct hp h = { .in_fd = in_fd, .out_fd = out_fd };
	int rc;

	if (st)
		memset(st, 0, sizeof(*st));
	off_t cur = lseek(in_fd, 0, SEEK_CUR);
	off_t size = cur < 0 ? -1 : lseek(in_fd, 0, SEEK_END);
	if (size < 0)
		return -errno;
	if (lseek(in_fd, cur, SEEK_SET) < 0)
		return -errno;
	h.size = (uint64_t)size;

	h.ib = malloc(HP_IOBUF);
	h.ob = malloc(HP_IOBUF);
	if (!h.ib || !h.ob) {
		rc = -ENOMEM;
		goto out;
	}
	if ((rc = walk(&h)) || (rc = classes_resolve(&h)))
		goto out;

	h.emit = 1;
	h.ioff = h.ih = h.it = 0;
	h.subrecs = 0;
	if ((rc = walk(&h)) || (rc = out_flush(&h)))
		goto out;
	if (st) {
		st->in_bytes = h.size;
		st->out_bytes = h.out_bytes;
		st->kept = h.kept;
		st->dropped = h.dropped;
		st->anonymised = h.anonymised;
	}
out:
	free(h.ib);
	free(h.ob);
	free(h.cls);
	free(h.slot);
	free(h.types);
	free(h.names);
	return rc;
}

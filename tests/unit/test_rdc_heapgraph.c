/*
 * Heap formats (issue #20): rdc_heapgraph (HPROF -> Perfetto heap graph)
 * and rdc_heapprofile (pprof heap profile -> ProfilePacket).
 *
 * - test_field_numbers: every field number the converters write, pinned
 *   here from upstream (docs/PERFETTO.md, "Heap formats") and checked
 *   against both redact/rdc_pbw.h and proto/perfetto_heap.proto, the
 *   schema the integration tests decode with.
 * - test_graph: a built HPROF (both id sizes) becomes objects with the
 *   right types, counts and references; no value of it survives: a secret
 *   in a char[] (UTF-16), a byte[] (Latin-1 and UTF-8), an int field and
 *   a static long is absent from the output in any of those encodings.
 * - test_graph_truncated: every prefix of the HPROF is refused.
 * - test_graph_oom: process metadata (ProcessTree.Process, ArtProcessMetadata)
 *   and the OOM thread's stack; tids a JVM could lie with name no stack.
 * - test_profile: in-use bytes per call site equal the pprof's, a sample
 *   of another pid and its strings are gone; the process's pid, cmdline
 *   and uid come first.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pprof.h"
#include "rdc.h"
#include "rdc_pbw.h"

/* ------------------------------------------------------ field numbers */

static const struct pin {
	const char *msg, *field;
	int have, want;
} pins[] = {
	{ "Trace", "packet", RDC_PF_TRACE_PACKET, 1 },
	{ "TracePacket", "timestamp", RDC_PF_PACKET_TIMESTAMP, 8 },
	{ "TracePacket", "trusted_packet_sequence_id", RDC_PF_PACKET_SEQ_ID, 10 },
	{ "TracePacket", "sequence_flags", RDC_PF_PACKET_SEQ_FLAGS, 13 },
	{ "TracePacket", "profile_packet", RDC_PF_PACKET_PROFILE_PACKET, 37 },
	{ "TracePacket", "heap_graph", RDC_PF_PACKET_HEAP_GRAPH, 56 },
	{ "TracePacket", "process_tree", RDC_PF_PACKET_PROCESS_TREE, 2 },
	{ "TracePacket", "interned_data", RDC_PF_PACKET_INTERNED_DATA, 12 },
	{ "TracePacket", "perf_sample", RDC_PF_PACKET_PERF_SAMPLE, 66 },
	{ "TracePacket", "art_process_metadata", RDC_PF_PACKET_ART_PROCESS_METADATA, 131 },
	{ "ArtProcessMetadata", "pid", RDC_PF_APM_PID, 1 },
	{ "ArtProcessMetadata", "uid", RDC_PF_APM_UID, 2 },
	{ "ArtProcessMetadata", "process_name", RDC_PF_APM_PROCESS_NAME, 3 },
	{ "ArtProcessMetadata", "oom_allocation_size", RDC_PF_APM_OOM_ALLOCATION_SIZE, 5 },
	{ "ArtProcessMetadata", "oom_thread_java_stack", RDC_PF_APM_OOM_THREAD_JAVA_STACK, 8 },
	{ "JavaStack", "frames", RDC_PF_JSTACK_FRAMES, 1 },
	{ "JavaFrame", "method_name", RDC_PF_JFRAME_METHOD_NAME, 1 },
	{ "JavaFrame", "source_file", RDC_PF_JFRAME_SOURCE_FILE, 2 },
	{ "JavaFrame", "line_number", RDC_PF_JFRAME_LINE_NUMBER, 3 },
	{ "ProcessTree", "processes", RDC_PF_PT_PROCESSES, 1 },
	{ "ProcessTree", "threads", RDC_PF_PT_THREADS, 2 },
	{ "Process", "pid", RDC_PF_PTP_PID, 1 },
	{ "Process", "cmdline", RDC_PF_PTP_CMDLINE, 3 },
	{ "Process", "uid", RDC_PF_PTP_UID, 5 },
	{ "Thread", "tid", RDC_PF_PTT_TID, 1 },
	{ "Thread", "name", RDC_PF_PTT_NAME, 2 },
	{ "Thread", "tgid", RDC_PF_PTT_TGID, 3 },
	{ "InternedData", "function_names", RDC_PF_ID_FUNCTION_NAMES, 5 },
	{ "InternedData", "frames", RDC_PF_ID_FRAMES, 6 },
	{ "InternedData", "callstacks", RDC_PF_ID_CALLSTACKS, 7 },
	{ "PerfSample", "pid", RDC_PF_PS_PID, 2 },
	{ "PerfSample", "tid", RDC_PF_PS_TID, 3 },
	{ "PerfSample", "callstack_iid", RDC_PF_PS_CALLSTACK_IID, 4 },
	{ "HeapGraph", "pid", RDC_PF_HG_PID, 1 },
	{ "HeapGraph", "objects", RDC_PF_HG_OBJECTS, 2 },
	{ "HeapGraph", "field_names", RDC_PF_HG_FIELD_NAMES, 4 },
	{ "HeapGraph", "continued", RDC_PF_HG_CONTINUED, 5 },
	{ "HeapGraph", "index", RDC_PF_HG_INDEX, 6 },
	{ "HeapGraph", "roots", RDC_PF_HG_ROOTS, 7 },
	{ "HeapGraph", "types", RDC_PF_HG_TYPES, 9 },
	{ "HeapGraphObject", "id", RDC_PF_HGO_ID, 1 },
	{ "HeapGraphObject", "type_id", RDC_PF_HGO_TYPE_ID, 2 },
	{ "HeapGraphObject", "self_size", RDC_PF_HGO_SELF_SIZE, 3 },
	{ "HeapGraphObject", "reference_field_id", RDC_PF_HGO_REF_FIELD_ID, 4 },
	{ "HeapGraphObject", "reference_object_id", RDC_PF_HGO_REF_OBJECT_ID, 5 },
	{ "HeapGraphObject", "id_delta", RDC_PF_HGO_ID_DELTA, 7 },
	{ "HeapGraphType", "id", RDC_PF_HGT_ID, 1 },
	{ "HeapGraphType", "class_name", RDC_PF_HGT_CLASS_NAME, 3 },
	{ "HeapGraphType", "object_size", RDC_PF_HGT_OBJECT_SIZE, 4 },
	{ "HeapGraphType", "superclass_id", RDC_PF_HGT_SUPERCLASS_ID, 5 },
	{ "HeapGraphType", "kind", RDC_PF_HGT_KIND, 7 },
	{ "HeapGraphType", "classloader_id", RDC_PF_HGT_CLASSLOADER_ID, 8 },
	{ "HeapGraphRoot", "object_ids", RDC_PF_HGR_OBJECT_IDS, 1 },
	{ "HeapGraphRoot", "root_type", RDC_PF_HGR_ROOT_TYPE, 2 },
	{ "InternedString", "iid", RDC_PF_ISTR_IID, 1 },
	{ "InternedString", "str", RDC_PF_ISTR_STR, 2 },
	{ "Mapping", "iid", RDC_PF_MAP_IID, 1 },
	{ "Mapping", "build_id", RDC_PF_MAP_BUILD_ID, 2 },
	{ "Mapping", "start_offset", RDC_PF_MAP_START_OFFSET, 3 },
	{ "Mapping", "start", RDC_PF_MAP_START, 4 },
	{ "Mapping", "end", RDC_PF_MAP_END, 5 },
	{ "Mapping", "path_string_ids", RDC_PF_MAP_PATH_STRING_IDS, 7 },
	{ "Frame", "iid", RDC_PF_FRAME_IID, 1 },
	{ "Frame", "function_name_id", RDC_PF_FRAME_FUNCTION_NAME_ID, 2 },
	{ "Frame", "mapping_id", RDC_PF_FRAME_MAPPING_ID, 3 },
	{ "Frame", "rel_pc", RDC_PF_FRAME_REL_PC, 4 },
	{ "Callstack", "iid", RDC_PF_CS_IID, 1 },
	{ "Callstack", "frame_ids", RDC_PF_CS_FRAME_IDS, 2 },
	{ "ProfilePacket", "strings", RDC_PF_PP_STRINGS, 1 },
	{ "ProfilePacket", "frames", RDC_PF_PP_FRAMES, 2 },
	{ "ProfilePacket", "callstacks", RDC_PF_PP_CALLSTACKS, 3 },
	{ "ProfilePacket", "mappings", RDC_PF_PP_MAPPINGS, 4 },
	{ "ProfilePacket", "process_dumps", RDC_PF_PP_PROCESS_DUMPS, 5 },
	{ "ProfilePacket", "continued", RDC_PF_PP_CONTINUED, 6 },
	{ "ProfilePacket", "index", RDC_PF_PP_INDEX, 7 },
	{ "ProcessHeapSamples", "pid", RDC_PF_PHS_PID, 1 },
	{ "ProcessHeapSamples", "samples", RDC_PF_PHS_SAMPLES, 2 },
	{ "ProcessHeapSamples", "timestamp", RDC_PF_PHS_TIMESTAMP, 9 },
	{ "ProcessHeapSamples", "heap_name", RDC_PF_PHS_HEAP_NAME, 11 },
	{ "ProcessHeapSamples", "sampling_interval_bytes", RDC_PF_PHS_SAMPLING_INTERVAL, 12 },
	{ "HeapSample", "callstack_id", RDC_PF_HS_CALLSTACK_ID, 1 },
	{ "HeapSample", "self_allocated", RDC_PF_HS_SELF_ALLOCATED, 2 },
	{ "HeapSample", "self_freed", RDC_PF_HS_SELF_FREED, 3 },
	{ "HeapSample", "alloc_count", RDC_PF_HS_ALLOC_COUNT, 5 },
	{ "HeapSample", "free_count", RDC_PF_HS_FREE_COUNT, 6 },
};

/* The number proto/perfetto_heap.proto gives field in message msg: the
 * first "<field> = N" line after "message <msg> {" and before its closing
 * brace at the same indentation; -1 if none. */
static int schema_number(const char *text, const char *msg, const char *field)
{
	char head[96], pat[96];
	snprintf(head, sizeof(head), "message %s {", msg);
	const char *m = strstr(text, head);
	if (!m)
		return -1;
	const char *ls = m;
	while (ls > text && ls[-1] != '\n')
		ls--;
	char close[32];
	snprintf(close, sizeof(close), "\n%.*s}", (int)(m - ls), ls);
	const char *end = strstr(m, close);
	snprintf(pat, sizeof(pat), " %s = ", field);
	const char *f = strstr(m, pat);
	if (!f || (end && f > end))
		return -1;
	return atoi(f + strlen(pat));
}

static void test_field_numbers(void **state)
{
	(void)state;
	FILE *f = fopen(PD_SOURCE_DIR "/proto/perfetto_heap.proto", "r");
	assert_non_null(f);
	static char text[32768];
	size_t n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	for (size_t i = 0; i < sizeof(pins) / sizeof(pins[0]); i++) {
		const struct pin *p = &pins[i];
		if (p->have != p->want || schema_number(text, p->msg, p->field) != p->want)
			fail_msg("%s.%s: rdc_pbw.h %d, schema %d, upstream %d", p->msg, p->field,
				 p->have, schema_number(text, p->msg, p->field), p->want);
	}
	assert_int_equal(RDC_PF_KIND_NORMAL, 1);
	assert_int_equal(RDC_PF_KIND_STRING, 3);
	assert_int_equal(RDC_PF_KIND_ARRAY, 4);
	assert_int_equal(RDC_PF_KIND_CLASS, 5);
}

/* ------------------------------------------------------- a tiny reader */

struct pb {
	const uint8_t *p, *end;
};

static int rd_varint(struct pb *b, uint64_t *v)
{
	*v = 0;
	for (unsigned s = 0; s < 64 && b->p < b->end; s += 7) {
		uint8_t c = *b->p++;
		*v |= (uint64_t)(c & 0x7f) << s;
		if (!(c & 0x80))
			return 0;
	}
	return -1;
}

/* Next field: number, wire type, varint value or sub-buffer. */
static int rd_field(struct pb *b, uint32_t *f, uint64_t *v, struct pb *sub)
{
	uint64_t k, len;
	if (b->p >= b->end || rd_varint(b, &k) < 0)
		return -1;
	*f = (uint32_t)(k >> 3);
	if ((k & 7) == 0)
		return rd_varint(b, v);
	if ((k & 7) != 2 || rd_varint(b, &len) < 0 || len > (uint64_t)(b->end - b->p))
		return -1;
	sub->p = b->p;
	sub->end = b->p + len;
	b->p += len;
	*v = len;
	return 2;
}

/* --------------------------------------------------- an HPROF builder */

struct hb {
	uint8_t *d;
	size_t n, cap;
	unsigned idsz;
};

static void put(struct hb *b, const void *p, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = (b->n + n) * 2;
		b->d = realloc(b->d, b->cap);
		assert_non_null(b->d);
	}
	memcpy(b->d + b->n, p, n);
	b->n += n;
}

static void bev(struct hb *b, uint64_t v, unsigned n)
{
	uint8_t t[8];
	for (unsigned i = 0; i < n; i++)
		t[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
	put(b, t, n);
}

#define U1(v) bev(b, (v), 1)
#define U2(v) bev(b, (v), 2)
#define U4(v) bev(b, (v), 4)
#define U8(v) bev(b, (v), 8)
#define ID(v) bev(b, (v), b->idsz)

static size_t rec(struct hb *b, unsigned tag)
{
	U1(tag);
	U4(0);
	U4(0);
	return b->n;
}

static void rec_done(struct hb *b, size_t body)
{
	size_t len = b->n - body;
	for (unsigned i = 0; i < 4; i++)
		b->d[body - 4 + i] = (uint8_t)(len >> (8 * (3 - i)));
}

static void name(struct hb *b, uint64_t id, const char *s)
{
	size_t r = rec(b, 0x01);
	ID(id);
	put(b, s, strlen(s));
	rec_done(b, r);
}

static void load(struct hb *b, uint32_t serial, uint64_t cls, uint64_t nm)
{
	size_t r = rec(b, 0x02);
	U4(serial);
	ID(cls);
	U4(0);
	ID(nm);
	rec_done(b, r);
}

/* Class ids 0x100.., name ids 0x10.., objects 0x1000.. */
enum { C_OBJ = 0x100, C_SECRET = 0x108, C_CHARS = 0x110, C_BYTES = 0x118, C_OBJS = 0x120 };
#define SECRET "TOPSECRETq7"
#define SECRET_LONG 0x5ec7e75ec7e75ec7ull
#define SECRET_INT 0x5ec7e7a1u
#define N_SECRET 5

static void class_dump(struct hb *b, uint64_t id, uint64_t super, int secret)
{
	U1(0x20);
	ID(id);
	U4(0);
	ID(super);
	for (int i = 0; i < 5; i++)
		ID(0); /* loader, signers, domain, reserved x2 */
	U4(secret ? 4 + b->idsz : 0);
	U2(0); /* constant pool */
	if (secret) {
		U2(2); /* statics: long s1 = SECRET_LONG, Object s2 -> 0x1000 */
		ID(0x14);
		U1(11);
		U8(SECRET_LONG);
		ID(0x15);
		U1(2);
		ID(0x1000);
		U2(2); /* fields: int x, Object next */
		ID(0x12);
		U1(10);
		ID(0x13);
		U1(2);
	} else {
		U2(0);
		U2(0);
	}
}

static void build(struct hb *b, unsigned idsz)
{
	memset(b, 0, sizeof(*b));
	b->idsz = idsz;
	put(b, "JAVA PROFILE 1.0.2", 19);
	U4(idsz);
	U8(1700000000000ull);
	name(b, 0x10, "java/lang/Object");
	name(b, 0x11, "com/example/Secret");
	name(b, 0x12, "x");
	name(b, 0x13, "next");
	name(b, 0x14, "s1");
	name(b, 0x15, "s2");
	name(b, 0x16, "[C");
	name(b, 0x17, "[B");
	name(b, 0x18, "[Ljava/lang/Object;");
	name(b, 0x19, "sleepHere");
	name(b, 0x1a, "worker-1");
	load(b, 1, C_OBJ, 0x10);
	load(b, 2, C_SECRET, 0x11);
	load(b, 3, C_CHARS, 0x16);
	load(b, 4, C_BYTES, 0x17);
	load(b, 5, C_OBJS, 0x18);
	/* A thread, as the attach path names it: frame, trace, START THREAD. */
	size_t r = rec(b, 0x04);
	ID(0x500);
	ID(0x19);
	ID(0);
	ID(0);
	U4(2);
	U4(42);
	rec_done(b, r);
	r = rec(b, 0x05);
	U4(7);
	U4(3);
	U4(1);
	ID(0x500);
	rec_done(b, r);
	r = rec(b, 0x0a);
	U4(3);
	ID(0);
	U4(7);
	ID(0x1a);
	ID(0);
	ID(0);
	rec_done(b, r);
	r = rec(b, 0x1c);
	class_dump(b, C_OBJ, 0, 0);
	class_dump(b, C_SECRET, C_OBJ, 1);
	class_dump(b, C_CHARS, C_OBJ, 0);
	class_dump(b, C_BYTES, C_OBJ, 0);
	class_dump(b, C_OBJS, C_OBJ, 0);
	/* Secret instances 0x1000.. in a chain (next), x = SECRET_INT. */
	for (int i = 0; i < N_SECRET; i++) {
		U1(0x21);
		ID(0x1000 + 0x10 * (uint64_t)i);
		U4(0);
		ID(C_SECRET);
		U4(4 + idsz);
		U4(SECRET_INT);
		ID(i + 1 < N_SECRET ? 0x1000 + 0x10 * (uint64_t)(i + 1) : 0);
	}
	/* char[] holding SECRET in UTF-16, byte[] holding it in Latin-1. */
	U1(0x23);
	ID(0x2000);
	U4(0);
	U4(strlen(SECRET));
	U1(5);
	for (const char *s = SECRET; *s; s++)
		U2((uint8_t)*s);
	U1(0x23);
	ID(0x2010);
	U4(0);
	U4(strlen(SECRET));
	U1(8);
	put(b, SECRET, strlen(SECRET));
	/* Object[] -> the char[] and the byte[]. */
	U1(0x22);
	ID(0x3000);
	U4(0);
	U4(2);
	ID(C_OBJS);
	ID(0x2000);
	ID(0x2010);
	/* Roots: a sticky class, a JNI global (id + ref), a Java frame. */
	U1(0x05);
	ID(C_SECRET);
	U1(0x01);
	ID(0x3000);
	ID(0);
	U1(0x03);
	ID(0x1000);
	U4(1);
	U4(0);
	/* HotSpot's own, unnamed copy of the thread: not a second one. */
	U1(0x08);
	ID(0x1000);
	U4(9);
	U4(7);
	rec_done(b, r);
	r = rec(b, 0x2c);
	rec_done(b, r);
}

static int run_graph_p(const uint8_t *in, size_t n, const struct rdc_proc *proc, uint8_t **out,
		       size_t *outn)
{
	int fd = memfd_create("hg", 0);
	assert_true(fd >= 0);
	struct rdc_stats st;
	memset(&st, 0, sizeof(st));
	int r = rdc_heapgraph_buf(in, n, fd, 4242, proc, &st);
	off_t len = lseek(fd, 0, SEEK_END);
	*outn = (size_t)len;
	*out = malloc(*outn + 1);
	assert_int_equal(pread(fd, *out, *outn, 0), (ssize_t)*outn);
	close(fd);
	return r;
}

static int run_graph(const uint8_t *in, size_t n, uint8_t **out, size_t *outn)
{
	return run_graph_p(in, n, NULL, out, outn);
}

static bool has(const uint8_t *h, size_t n, const void *needle, size_t k)
{
	return memmem(h, n, needle, k) != NULL;
}

struct graph {
	uint64_t types[64];     /* type id -> class name index in names */
	char names[64][64];
	unsigned ntypes;
	unsigned count[64];     /* objects per type slot */
	unsigned refs, named_refs, roots, objects, packets, pid_ok, perf_samples, hg_packets;
	uint64_t last_index;
	int continued_last;
};

static unsigned slot(struct graph *g, uint64_t tid)
{
	for (unsigned i = 0; i < g->ntypes; i++)
		if (g->types[i] == tid)
			return i;
	assert_true(g->ntypes < 64);
	g->types[g->ntypes] = tid;
	return g->ntypes++;
}

static void read_graph(const uint8_t *d, size_t n, struct graph *g)
{
	struct pb t = { d, d + n }, pk, hg, o;
	uint32_t f;
	uint64_t v;
	memset(g, 0, sizeof(*g));
	while (t.p < t.end) {
		assert_int_equal(rd_field(&t, &f, &v, &pk), 2);
		assert_int_equal(f, 1);
		g->packets++;
		struct pb p = pk;
		while (p.p < p.end) {
			int w = rd_field(&p, &f, &v, &hg);
			assert_true(w >= 0);
			g->perf_samples += f == 66;
			if (f != 56)
				continue;
			g->hg_packets++;
			g->continued_last = 0;
			while (hg.p < hg.end) {
				w = rd_field(&hg, &f, &v, &o);
				assert_true(w >= 0);
				if (f == 1)
					g->pid_ok += v == 4242;
				if (f == 5)
					g->continued_last = (int)v;
				if (f == 6)
					g->last_index = v;
				if (f == 7)
					g->roots++;
				if (f == 9) {
					uint64_t id = 0;
					struct pb s;
					char nm[64] = "";
					while (o.p < o.end) {
						int w2 = rd_field(&o, &f, &v, &s);
						assert_true(w2 >= 0);
						if (f == 1)
							id = v;
						if (f == 3)
							snprintf(nm, sizeof(nm), "%.*s", (int)v, (const char *)s.p);
					}
					snprintf(g->names[slot(g, id)], 64, "%s", nm);
				}
				if (f == 2) {
					uint64_t tid = 0;
					struct pb s;
					g->objects++;
					while (o.p < o.end) {
						int w2 = rd_field(&o, &f, &v, &s);
						assert_true(w2 >= 0);
						if (f == 2)
							tid = v;
						while ((f == 4 || f == 5) && w2 == 2 && s.p < s.end) {
							assert_int_equal(rd_varint(&s, &v), 0);
							if (f == 5)
								g->refs++;
							else
								g->named_refs++;
						}
					}
					g->count[slot(g, tid)]++;
				}
			}
		}
	}
}

static unsigned count_of(const struct graph *g, const char *name)
{
	for (unsigned i = 0; i < g->ntypes; i++)
		if (!strcmp(g->names[i], name))
			return g->count[i];
	return 0;
}

static void check_graph(unsigned idsz)
{
	struct hb b;
	uint8_t *out;
	size_t n;
	build(&b, idsz);
	assert_int_equal(run_graph(b.d, b.n, &out, &n), 0);
	struct graph g;
	read_graph(out, n, &g);
	assert_int_equal(count_of(&g, "com.example.Secret"), N_SECRET);
	assert_int_equal(count_of(&g, "char[]"), 1);
	assert_int_equal(count_of(&g, "byte[]"), 1);
	assert_int_equal(count_of(&g, "java.lang.Object[]"), 1);
	assert_int_equal(count_of(&g, "java.lang.Class<com.example.Secret>"), 1);
	/* References: 4 next links, 2 array elements, 1 static (s2). */
	assert_int_equal(g.refs, N_SECRET - 1 + 2 + 1);
	assert_int_equal(g.named_refs, N_SECRET - 1 + 1);
	assert_int_equal(g.roots, 4);
	/* One thread's stack, named, its frame as Class.method. */
	assert_int_equal(g.perf_samples, 1);
	assert_true(has(out, n, "worker-1", 8));
	assert_true(has(out, n, "com.example.Secret.sleepHere", 28));
	assert_true(g.pid_ok >= 1);
	assert_int_equal(g.continued_last, 0);
	assert_int_equal(g.last_index, g.hg_packets - 1);
	/* No value in any encoding. */
	const char *s = SECRET;
	uint8_t u16be[64], u16le[64], l8[8], b8[8], l4[4], b4[4];
	size_t k = strlen(s);
	for (size_t i = 0; i < k; i++) {
		u16be[2 * i] = 0, u16be[2 * i + 1] = (uint8_t)s[i];
		u16le[2 * i] = (uint8_t)s[i], u16le[2 * i + 1] = 0;
	}
	for (unsigned i = 0; i < 8; i++) {
		l8[i] = (uint8_t)(SECRET_LONG >> (8 * i));
		b8[7 - i] = l8[i];
	}
	for (unsigned i = 0; i < 4; i++) {
		l4[i] = (uint8_t)(SECRET_INT >> (8 * i));
		b4[3 - i] = l4[i];
	}
	assert_false(has(out, n, s, k));
	assert_false(has(out, n, u16be + 1, 2 * k - 1));
	assert_false(has(out, n, u16le, 2 * k - 1));
	assert_false(has(out, n, l8, 8) || has(out, n, b8, 8));
	assert_false(has(out, n, l4, 4) || has(out, n, b4, 4));
	/* Nor as a varint: the encoders' other way to carry a number. */
	struct rdc_pbw w;
	rdc_pbw_init(&w, 64);
	rdc_pbw_varint(&w, SECRET_LONG);
	assert_false(has(out, n, w.b, w.n));
	rdc_pbw_reset(&w);
	rdc_pbw_varint(&w, SECRET_INT);
	assert_false(has(out, n, w.b, w.n));
	rdc_pbw_free(&w);
	free(out);
	free(b.d);
}

static void test_graph_id4(void **state)
{
	(void)state;
	check_graph(4);
}

static void test_graph_id8(void **state)
{
	(void)state;
	check_graph(8);
}

static void test_graph_truncated(void **state)
{
	(void)state;
	struct hb b;
	build(&b, 8);
	size_t body_end = b.n - 9; /* without the empty HEAP DUMP END */
	for (size_t cut = 0; cut < body_end; cut++) {
		uint8_t *out;
		size_t n;
		int r = run_graph(b.d, cut, &out, &n);
		/* A cut at a record boundary is a complete, shorter dump. */
		if (r == 0)
			assert_true(cut < 31 + 8); /* never: there is no heap before the end */
		else
			assert_true(r == -EBADMSG || r == -ENODATA);
		free(out);
	}
	free(b.d);
}

/* ------------------------------------------------- process metadata */

/* What a trace says about the process: its ProcessTree.Process and its
 * ArtProcessMetadata (the OOM stack's frames, leaf first). */
struct procmeta {
	unsigned processes, apm;
	uint64_t pid, uid, apm_pid, apm_uid;
	char cmdline[4][32];
	unsigned ncmd;
	char process_name[32];
	bool oom;                /* oom_allocation_size present */
	char frames[4][64];
	uint64_t lines[4];
	unsigned nframes;
};

static void str_to(char *dst, size_t n, const struct pb *s, uint64_t len)
{
	snprintf(dst, n, "%.*s", (int)len, (const char *)s->p);
}

static void read_meta(const uint8_t *d, size_t n, struct procmeta *m)
{
	struct pb t = { d, d + n }, pk, x, y, z, w;
	uint32_t f;
	uint64_t v;
	memset(m, 0, sizeof(*m));
	while (t.p < t.end) {
		assert_int_equal(rd_field(&t, &f, &v, &pk), 2);
		while (pk.p < pk.end) {
			int wt = rd_field(&pk, &f, &v, &x);
			assert_true(wt >= 0);
			if (wt == 2 && f == 2) { /* process_tree */
				while (x.p < x.end) {
					if (rd_field(&x, &f, &v, &y) != 2 || f != 1)
						continue;
					m->processes++;
					while (y.p < y.end) {
						int w2 = rd_field(&y, &f, &v, &z);
						if (f == 1)
							m->pid = v;
						if (f == 5)
							m->uid = v;
						if (f == 3 && w2 == 2 && m->ncmd < 4)
							str_to(m->cmdline[m->ncmd++], 32, &z, v);
					}
				}
			}
			if (wt == 2 && f == 131) { /* art_process_metadata */
				m->apm++;
				while (x.p < x.end) {
					int w2 = rd_field(&x, &f, &v, &y);
					if (f == 1)
						m->apm_pid = v;
					if (f == 2)
						m->apm_uid = v;
					if (f == 3 && w2 == 2)
						str_to(m->process_name, 32, &y, v);
					if (f == 5)
						m->oom = true;
					while (f == 8 && w2 == 2 && y.p < y.end) {
						if (rd_field(&y, &f, &v, &z) != 2 || f != 1)
							continue;
						assert_true(m->nframes < 4);
						while (z.p < z.end) {
							int w3 = rd_field(&z, &f, &v, &w);
							if (f == 1 && w3 == 2)
								str_to(m->frames[m->nframes], 64, &w, v);
							if (f == 3)
								m->lines[m->nframes] = v;
						}
						m->nframes++;
						f = 8;
					}
				}
			}
		}
	}
}

/*
 * An OOM caused the dump: the failing thread (OS tid 3, the serial the
 * attach path gives its Thread.print thread "worker-1") is the OOM stack,
 * in ArtProcessMetadata's shape, beside the process's pid, uid and
 * cmdline. Then the JVM lies: a tid of HotSpot's own unnamed copy of the
 * thread (9), a stack trace's serial (7), a huge one: the dump is still an
 * OOME one, but no stack is named and nothing else is read.
 */
static void test_graph_oom(void **state)
{
	(void)state;
	struct hb b;
	uint8_t *out;
	size_t n;
	static const char cmd[] = "java\0-Xmx32m\0OomFill";
	struct rdc_proc proc = { .has_uid = true, .uid = 1234, .cmdline = cmd,
				 .cmdline_len = sizeof(cmd), .oom_tid = 3 };
	struct procmeta m;
	build(&b, 8);
	assert_int_equal(run_graph_p(b.d, b.n, &proc, &out, &n), 0);
	read_meta(out, n, &m);
	assert_int_equal(m.processes, 1);
	assert_int_equal(m.pid, 4242);
	assert_int_equal(m.uid, 1234);
	assert_int_equal(m.ncmd, 3);
	assert_string_equal(m.cmdline[0], "java");
	assert_string_equal(m.cmdline[1], "-Xmx32m");
	assert_string_equal(m.cmdline[2], "OomFill");
	assert_int_equal(m.apm, 1);
	assert_int_equal(m.apm_pid, 4242);
	assert_int_equal(m.apm_uid, 1234);
	assert_string_equal(m.process_name, "java");
	assert_true(m.oom);
	assert_int_equal(m.nframes, 1);
	assert_string_equal(m.frames[0], "com.example.Secret.sleepHere");
	assert_int_equal(m.lines[0], 42);
	free(out);

	/* No OOM: the metadata without the OOM fields. */
	proc.oom_tid = 0;
	assert_int_equal(run_graph_p(b.d, b.n, &proc, &out, &n), 0);
	read_meta(out, n, &m);
	assert_int_equal(m.apm, 1);
	assert_false(m.oom);
	assert_int_equal(m.nframes, 0);
	free(out);

	static const uint32_t lies[] = { 9, 7, 4, 0x7f000000u, UINT32_MAX - 1 };
	for (size_t i = 0; i < sizeof(lies) / sizeof(lies[0]); i++) {
		proc.oom_tid = lies[i];
		assert_int_equal(run_graph_p(b.d, b.n, &proc, &out, &n), 0);
		read_meta(out, n, &m);
		assert_true(m.oom);
		assert_int_equal(m.nframes, 0);
		free(out);
	}

	/* A cmdline the daemon would never pass (over the cap, no NUL at the
	 * end) is cut at the cap, never read past. */
	static char big[RDC_CMDLINE_MAX + 64];
	memset(big, 'a', sizeof(big));
	proc.cmdline = big;
	proc.cmdline_len = sizeof(big);
	proc.oom_tid = 3;
	assert_int_equal(run_graph_p(b.d, b.n, &proc, &out, &n), 0);
	read_meta(out, n, &m);
	assert_int_equal(m.ncmd, 1);
	assert_int_equal(m.nframes, 1);
	free(out);
	free(b.d);
}

/* ------------------------------------------------------- heap profile */

static void test_profile(void **state)
{
	(void)state;
	struct pp_builder *pb = NULL;
	assert_int_equal(pp_new(&pb), 0);
	assert_int_equal(pp_add_sample_type(pb, "alloc_objects", "count"), 0);
	assert_int_equal(pp_add_sample_type(pb, "alloc_space", "bytes"), 0);
	assert_int_equal(pp_add_sample_type(pb, "inuse_objects", "count"), 0);
	assert_int_equal(pp_add_sample_type(pb, "inuse_space", "bytes"), 0);
	assert_int_equal(pp_set_period(pb, "space", "bytes", 4096), 0);
	static const char *const fn[3] = { "leaf_a", "leaf_b", "foreign_secret_fn" };
	static const int64_t v[3][4] = { { 10, 10000, 4, 4000 }, { 20, 65536, 20, 65536 },
					 { 1, 77, 1, 77 } };
	uint64_t map, fmain, lmain;
	assert_int_equal(pp_add_mapping(pb, 0x1000, 0x9000, 0, "/usr/bin/app", "abcd", true,
					false, &map), 0);
	assert_int_equal(pp_add_function(pb, "main", NULL, NULL, 0, &fmain), 0);
	assert_int_equal(pp_add_location(pb, map, 0x2000, fmain, 0, &lmain), 0);
	for (int i = 0; i < 3; i++) {
		uint64_t f, locs[2];
		assert_int_equal(pp_add_function(pb, fn[i], NULL, NULL, 0, &f), 0);
		assert_int_equal(pp_add_location(pb, map, 0x1100 + (uint64_t)i, f, 0, &locs[0]), 0);
		locs[1] = lmain;
		struct pp_label pl = { .key = "pid", .num = i == 2 ? 999 : 4242 };
		assert_int_equal(pp_add_sample(pb, locs, 2, v[i], 4, &pl, 1), 0);
	}
	int gzfd = memfd_create("gz", 0);
	uint64_t gzn;
	assert_int_equal(pp_write_gz(pb, gzfd, &gzn), 0);
	pp_free(pb);
	uint8_t *gz = malloc(gzn);
	assert_int_equal(pread(gzfd, gz, gzn, 0), (ssize_t)gzn);
	close(gzfd);

	int in = memfd_create("pp", 0), out = memfd_create("pt", 0);
	assert_int_equal(write(in, gz, gzn), (ssize_t)gzn);
	lseek(in, 0, SEEK_SET);
	int32_t pid = 4242;
	static const char cmd[] = "./native_heap\0--leak";
	const struct rdc_proc proc = { .has_uid = true, .uid = 1234, .cmdline = cmd,
				       .cmdline_len = sizeof(cmd) };
	struct rdc_policy pol = { .pids = &pid, .npids = 1, .proc = &proc };
	struct rdc_stats st;
	memset(&st, 0, sizeof(st));
	assert_int_equal(rdc_heapprofile(in, out, &pol, &st), 0);
	assert_int_equal(st.kept, 2);
	assert_int_equal(st.dropped, 1);
	size_t n = (size_t)lseek(out, 0, SEEK_END);
	uint8_t *d = malloc(n);
	assert_int_equal(pread(out, d, n, 0), (ssize_t)n);
	assert_false(has(d, n, "foreign_secret_fn", 17));
	assert_true(has(d, n, "leaf_a", 6));

	/* In use per sample = self_allocated - self_freed, as pprof said. */
	struct pb t = { d, d + n }, pk, pp, dump, hs;
	uint32_t f;
	uint64_t x;
	uint64_t inuse[2] = { 0, 0 }, allocs[2] = { 0, 0 };
	unsigned ns = 0, interval = 0;
	/* The process first: pid, cmdline, uid (issue #20). */
	struct procmeta m;
	read_meta(d, n, &m);
	assert_int_equal(m.processes, 1);
	assert_int_equal(m.pid, 4242);
	assert_int_equal(m.uid, 1234);
	assert_int_equal(m.ncmd, 2);
	assert_string_equal(m.cmdline[0], "./native_heap");
	assert_string_equal(m.cmdline[1], "--leak");
	assert_int_equal(m.apm, 0);
	while (t.p < t.end) {
		assert_int_equal(rd_field(&t, &f, &x, &pk), 2);
		while (pk.p < pk.end) {
			if (rd_field(&pk, &f, &x, &pp) != 2 || f != 37)
				continue;
			while (pp.p < pp.end) {
				if (rd_field(&pp, &f, &x, &dump) != 2 || f != 5)
					continue;
				while (dump.p < dump.end) {
					int w = rd_field(&dump, &f, &x, &hs);
					if (f == 12)
						interval = (unsigned)x;
					if (w != 2 || f != 2)
						continue;
					uint64_t a = 0, fr = 0, ac = 0;
					struct pb s;
					while (hs.p < hs.end) {
						rd_field(&hs, &f, &x, &s);
						if (f == 2)
							a = x;
						if (f == 3)
							fr = x;
						if (f == 5)
							ac = x;
					}
					assert_true(ns < 2);
					inuse[ns] = a - fr;
					allocs[ns++] = ac;
				}
			}
		}
	}
	assert_int_equal(ns, 2);
	assert_int_equal(interval, 4096);
	assert_int_equal(inuse[0], 4000);
	assert_int_equal(inuse[1], 65536);
	assert_int_equal(allocs[0], 10);
	assert_int_equal(allocs[1], 20);
	free(d);
	free(gz);
	close(in);
	close(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_field_numbers),
		cmocka_unit_test(test_graph_id4),
		cmocka_unit_test(test_graph_id8),
		cmocka_unit_test(test_graph_truncated),
		cmocka_unit_test(test_graph_oom),
		cmocka_unit_test(test_profile),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * heapgraph_check FILE: read a Perfetto trace of the heap formats (issue
 * #20: rdc_heapgraph's heap graph, rdc_heapprofile's ProfilePacket) with a
 * reader of its own, independent of the converters' writer, and print
 * facts for the drivers to compare, one per line:
 *   packets N / objects N / refs N / roots N / pids P[,P..]
 *   count CLASS N          objects per HeapGraphType class_name
 *   inuse FUNC BYTES       ProfilePacket: in-use bytes (self_allocated -
 *                          self_freed) summed per leaf frame's function
 *   interval BYTES         the sampling interval
 * Exit 0, or 1 if the file does not parse.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pb {
	const uint8_t *p, *end;
};

static int varint(struct pb *b, uint64_t *v)
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

/* Returns the wire type (0 or 2), -1 on error. */
static int field(struct pb *b, uint32_t *f, uint64_t *v, struct pb *sub)
{
	uint64_t k, len;
	if (varint(b, &k) < 0)
		return -1;
	*f = (uint32_t)(k >> 3);
	if ((k & 7) == 0)
		return varint(b, v) < 0 ? -1 : 0;
	if ((k & 7) == 1 && b->end - b->p >= 8) {
		b->p += 8;
		return 1;
	}
	if ((k & 7) == 5 && b->end - b->p >= 4) {
		b->p += 4;
		return 5;
	}
	if ((k & 7) != 2 || varint(b, &len) < 0 || len > (uint64_t)(b->end - b->p))
		return -1;
	sub->p = b->p;
	sub->end = b->p + len;
	b->p += len;
	*v = len;
	return 2;
}

/* A growable table keyed by id. */
struct ent {
	uint64_t id, a, b;
	char *name;
};
struct tab {
	struct ent *e;
	size_t n, cap;
};

static struct ent *tab_get(struct tab *t, uint64_t id, int add)
{
	for (size_t i = 0; i < t->n; i++) /* small tables: types, functions */
		if (t->e[i].id == id)
			return &t->e[i];
	if (!add)
		return NULL;
	if (t->n == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 256;
		t->e = realloc(t->e, t->cap * sizeof(*t->e));
		if (!t->e)
			exit(1);
	}
	memset(&t->e[t->n], 0, sizeof(t->e[0]));
	t->e[t->n].id = id;
	return &t->e[t->n++];
}

static char *dup(const struct pb *s)
{
	size_t n = (size_t)(s->end - s->p);
	char *c = malloc(n + 1);
	if (!c)
		exit(1);
	memcpy(c, s->p, n);
	c[n] = '\0';
	return c;
}

static struct tab types, strs, frames, stacks, counts;
static uint64_t npk, nobj, nrefs, nroots, interval;
static int64_t pids[16];
static size_t npids;

#define BAD(...)                                                    \
	do {                                                        \
		fprintf(stderr, "heapgraph_check: " __VA_ARGS__);  \
		exit(1);                                            \
	} while (0)

static void pid_seen(uint64_t p)
{
	for (size_t i = 0; i < npids; i++)
		if (pids[i] == (int64_t)p)
			return;
	if (npids < 16)
		pids[npids++] = (int64_t)p;
}

static void heap_graph(struct pb g)
{
	uint32_t f;
	uint64_t v;
	struct pb s, t;
	while (g.p < g.end) {
		int w = field(&g, &f, &v, &s);
		if (w < 0)
			BAD("bad HeapGraph\n");
		if (f == 1 && w == 0)
			pid_seen(v);
		else if (f == 7 && w == 2)
			nroots++;
		else if (f == 9 && w == 2) {
			uint64_t id = 0;
			char *name = NULL;
			while (s.p < s.end) {
				int w2 = field(&s, &f, &v, &t);
				if (w2 < 0)
					BAD("bad HeapGraphType\n");
				if (f == 1 && w2 == 0)
					id = v;
				if (f == 3 && w2 == 2)
					name = dup(&t);
			}
			tab_get(&types, id, 1)->name = name;
		} else if (f == 2 && w == 2) {
			uint64_t tid = 0;
			nobj++;
			while (s.p < s.end) {
				int w2 = field(&s, &f, &v, &t);
				if (w2 < 0)
					BAD("bad HeapGraphObject\n");
				if (f == 2 && w2 == 0)
					tid = v;
				if (f == 5 && w2 == 2)
					while (t.p < t.end)
						if (varint(&t, &v) == 0)
							nrefs++;
			}
			tab_get(&counts, tid, 1)->a++;
		}
	}
}

struct hsample {
	uint64_t cs, alloc, freed;
};
static struct hsample *hs;
static size_t nhs, caphs;

static void profile_packet(struct pb pp)
{
	uint32_t f;
	uint64_t v;
	struct pb s, t, u;
	while (pp.p < pp.end) {
		int w = field(&pp, &f, &v, &s);
		if (w < 0)
			BAD("bad ProfilePacket\n");
		if (w != 2)
			continue;
		if (f == 1) { /* strings */
			uint64_t iid = 0;
			char *str = NULL;
			while (s.p < s.end) {
				int w2 = field(&s, &f, &v, &t);
				if (f == 1 && w2 == 0)
					iid = v;
				if (f == 2 && w2 == 2)
					str = dup(&t);
			}
			tab_get(&strs, iid, 1)->name = str;
		} else if (f == 2) { /* frames */
			uint64_t iid = 0, fn = 0;
			while (s.p < s.end) {
				int w2 = field(&s, &f, &v, &t);
				if (f == 1 && w2 == 0)
					iid = v;
				if (f == 2 && w2 == 0)
					fn = v;
			}
			tab_get(&frames, iid, 1)->a = fn;
		} else if (f == 3) { /* callstacks: the last frame is the leaf */
			uint64_t iid = 0, leaf = 0;
			while (s.p < s.end) {
				int w2 = field(&s, &f, &v, &t);
				if (f == 1 && w2 == 0)
					iid = v;
				if (f == 2 && w2 == 2)
					while (t.p < t.end && varint(&t, &v) == 0)
						leaf = v;
				if (f == 2 && w2 == 0)
					leaf = v;
			}
			tab_get(&stacks, iid, 1)->a = leaf;
		} else if (f == 5) { /* ProcessHeapSamples */
			while (s.p < s.end) {
				int w2 = field(&s, &f, &v, &t);
				if (w2 < 0)
					BAD("bad ProcessHeapSamples\n");
				if (f == 1 && w2 == 0)
					pid_seen(v);
				if (f == 12 && w2 == 0)
					interval = v;
				if (f != 2 || w2 != 2)
					continue;
				struct hsample x = { 0, 0, 0 };
				while (t.p < t.end) {
					int w3 = field(&t, &f, &v, &u);
					if (w3 < 0)
						BAD("bad HeapSample\n");
					if (f == 1 && w3 == 0)
						x.cs = v;
					if (f == 2 && w3 == 0)
						x.alloc = v;
					if (f == 3 && w3 == 0)
						x.freed = v;
				}
				if (nhs == caphs) {
					caphs = caphs ? caphs * 2 : 256;
					hs = realloc(hs, caphs * sizeof(*hs));
					if (!hs)
						exit(1);
				}
				hs[nhs++] = x;
			}
		}
	}
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: heapgraph_check FILE\n");
		return 2;
	}
	FILE *fp = fopen(argv[1], "rb");
	if (!fp)
		BAD("cannot open %s\n", argv[1]);
	size_t cap = 1 << 20, n = 0, r;
	uint8_t *d = malloc(cap);
	while (d && (r = fread(d + n, 1, cap - n, fp)) > 0) {
		n += r;
		if (n == cap)
			d = realloc(d, cap *= 2);
	}
	fclose(fp);
	if (!d)
		return 1;
	struct pb t = { d, d + n }, pk, s;
	uint32_t f;
	uint64_t v;
	while (t.p < t.end) {
		if (field(&t, &f, &v, &pk) != 2 || f != 1)
			BAD("not a Trace\n");
		npk++;
		while (pk.p < pk.end) {
			int w = field(&pk, &f, &v, &s);
			if (w < 0)
				BAD("bad TracePacket\n");
			if (f == 56 && w == 2)
				heap_graph(s);
			if (f == 37 && w == 2)
				profile_packet(s);
		}
	}
	printf("packets %llu\nobjects %llu\nrefs %llu\nroots %llu\n", (unsigned long long)npk,
	       (unsigned long long)nobj, (unsigned long long)nrefs, (unsigned long long)nroots);
	printf("pids");
	for (size_t i = 0; i < npids; i++)
		printf("%s%lld", i ? "," : " ", (long long)pids[i]);
	printf("\n");
	for (size_t i = 0; i < counts.n; i++) {
		struct ent *ty = tab_get(&types, counts.e[i].id, 0);
		printf("count %s %llu\n", ty && ty->name ? ty->name : "?",
		       (unsigned long long)counts.e[i].a);
	}
	if (nhs)
		printf("interval %llu\n", (unsigned long long)interval);
	struct tab per = { 0 };
	for (size_t i = 0; i < nhs; i++) {
		struct ent *cs = tab_get(&stacks, hs[i].cs, 0);
		struct ent *fr = cs ? tab_get(&frames, cs->a, 0) : NULL;
		struct ent *fn = fr ? tab_get(&strs, fr->a, 0) : NULL;
		uint64_t key = fn ? fn->id : 0;
		struct ent *e = tab_get(&per, key, 1);
		e->name = fn ? fn->name : (char *)"?";
		e->a += hs[i].alloc - (hs[i].freed < hs[i].alloc ? hs[i].freed : hs[i].alloc);
	}
	for (size_t i = 0; i < per.n; i++)
		printf("inuse %s %llu\n", per.e[i].name, (unsigned long long)per.e[i].a);
	return 0;
}

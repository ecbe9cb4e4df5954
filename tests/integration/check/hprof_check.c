/*
 * hprof_check FILE [CLASS...]: the tests' own HPROF reader. Prints facts
 * about a heap dump for the JVM tests to compare with jcmd:
 *
 *   instances CLASS N          instances of each CLASS named (Leak$Node);
 *                              "[B" etc. count primitive arrays of that type
 *   arrays_len TYPE LEN N      primitive arrays of TYPE ("[B") by length, for LEN 1024
 *   nonzero_primitive_arrays N arrays with any non-zero element
 *   nonzero_byte_arrays N      of those, byte arrays
 *   max_refs_to CLASS N        the most references to CLASS held by one object array
 *   thread NAME frames F1,F2   threads from START THREAD + STACK TRACE records
 *
 * Exit 0 after a full walk, 1 on a malformed file (with a reason).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const uint8_t *base, *end;
static unsigned idsz;

static void die(const char *why)
{
	fprintf(stderr, "hprof_check: %s\n", why);
	exit(1);
}

static void need(const uint8_t *p, size_t n)
{
	if (p > end || (size_t)(end - p) < n)
		die("truncated");
}

static uint32_t u4(const uint8_t *p)
{
	need(p, 4);
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint16_t u2(const uint8_t *p)
{
	need(p, 2);
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint64_t id(const uint8_t *p)
{
	need(p, idsz);
	uint64_t v = 0;
	for (unsigned i = 0; i < idsz; i++)
		v = v << 8 | p[i];
	return v;
}

static unsigned tsize(uint8_t t)
{
	switch (t) {
	case 2: return idsz;
	case 4: case 8: return 1;
	case 5: case 9: return 2;
	case 6: case 10: return 4;
	case 7: case 11: return 8;
	}
	die("bad basic type");
	return 0;
}

/* ---- small open-addressing maps: id -> value */
struct map {
	uint64_t *k;
	uint64_t *v;
	size_t cap, n;
};

static void map_put(struct map *m, uint64_t k, uint64_t v)
{
	if (!k)
		return; /* 0 is "no object" in HPROF, and the empty slot here */
	if ((m->n + 1) * 2 > m->cap) {
		struct map o = *m;
		m->cap = o.cap ? o.cap * 2 : 1024;
		m->k = calloc(m->cap, sizeof(*m->k));
		m->v = calloc(m->cap, sizeof(*m->v));
		if (!m->k || !m->v)
			die("out of memory");
		m->n = 0;
		for (size_t i = 0; i < o.cap; i++)
			if (o.k[i])
				map_put(m, o.k[i], o.v[i]);
		free(o.k);
		free(o.v);
	}
	size_t i = (k * 0x9e3779b97f4a7c15ull) & (m->cap - 1);
	while (m->k[i] && m->k[i] != k)
		i = (i + 1) & (m->cap - 1);
	if (!m->k[i])
		m->n++;
	m->k[i] = k;
	m->v[i] = v;
}

static int map_get(const struct map *m, uint64_t k, uint64_t *v)
{
	if (!m->cap || !k)
		return 0;
	size_t i = (k * 0x9e3779b97f4a7c15ull) & (m->cap - 1);
	while (m->k[i]) {
		if (m->k[i] == k) {
			if (v)
				*v = m->v[i];
			return 1;
		}
		i = (i + 1) & (m->cap - 1);
	}
	return 0;
}

static struct map utf8;     /* string id -> offset of its bytes (len in high 24 bits) */
static struct map classes;  /* class object id -> name string id */
static struct map serials;  /* class serial -> name string id */
static struct map frames;   /* frame id -> record offset */
static struct map wanted;   /* class object id -> index into want[] */
static struct map target;   /* ids of instances of want[0] */
static const char **want;
static int nwant;
static uint64_t *counts;

static void str_of(uint64_t sid, char *out, size_t n)
{
	uint64_t v;
	out[0] = '\0';
	if (!map_get(&utf8, sid, &v))
		return;
	size_t len = (size_t)(v >> 40), off = (size_t)(v & ((1ull << 40) - 1));
	if (len >= n)
		len = n - 1;
	memcpy(out, base + off, len);
	out[len] = '\0';
	for (char *c = out; *c; c++)
		if (*c == '/')
			*c = '.';
}

static const char *prim_name[12] = { [4] = "[Z", [5] = "[C", [6] = "[F", [7] = "[D",
				     [8] = "[B", [9] = "[S", [10] = "[I", [11] = "[J" };

struct stats {
	uint64_t nonzero, nonzero_bytes, len1024[12], prim[12], max_refs;
};

/* Walk one heap dump segment's sub-records. pass 1: instances; pass 2: arrays. */
static void walk_segment(const uint8_t *p, const uint8_t *e, int pass, struct stats *st)
{
	while (p < e) {
		uint8_t t = *p++;
		uint64_t cls, v;
		uint32_t n;
		switch (t) {
		case 0xff: case 0x05: case 0x07: p += idsz; break;
		case 0x01: p += 2 * idsz; break;
		case 0x02: case 0x03: case 0x08: p += idsz + 8; break;
		case 0x04: case 0x06: p += idsz + 4; break;
		case 0x20: {
			const uint8_t *q = p + 7 * idsz + 8;
			uint16_t ncp = u2(q);
			q += 2;
			for (uint16_t i = 0; i < ncp; i++) {
				uint8_t ty = q[2];
				q += 3 + tsize(ty);
			}
			uint16_t ns = u2(q);
			q += 2;
			for (uint16_t i = 0; i < ns; i++) {
				need(q, idsz + 1);
				uint8_t ty = q[idsz];
				q += idsz + 1 + tsize(ty);
			}
			uint16_t nf = u2(q);
			q += 2 + (size_t)nf * (idsz + 1);
			p = q;
			break;
		}
		case 0x21:
			cls = id(p + idsz + 4);
			n = u4(p + 2 * idsz + 4);
			if (pass == 1 && map_get(&wanted, cls, &v)) {
				counts[v]++;
				if (v == 0)
					map_put(&target, id(p), 1);
			}
			p += 2 * idsz + 8 + n;
			break;
		case 0x22: {
			n = u4(p + idsz + 4);
			const uint8_t *el = p + 2 * idsz + 8;
			need(el, (size_t)n * idsz);
			if (pass == 2) {
				uint64_t refs = 0;
				for (uint32_t i = 0; i < n; i++)
					if (map_get(&target, id(el + (size_t)i * idsz), NULL))
						refs++;
				if (refs > st->max_refs)
					st->max_refs = refs;
			}
			p = el + (size_t)n * idsz;
			break;
		}
		case 0x23: {
			n = u4(p + idsz + 4);
			need(p, 2 * 4 + idsz + 1);
			uint8_t ty = p[idsz + 8];
			size_t bytes = (size_t)n * tsize(ty);
			const uint8_t *el = p + idsz + 9;
			need(el, bytes);
			if (pass == 1) {
				st->prim[ty]++;
				if (n == 1024)
					st->len1024[ty]++;
				for (size_t i = 0; i < bytes; i++) {
					if (el[i]) {
						st->nonzero++;
						if (ty == 8)
							st->nonzero_bytes++;
						break;
					}
				}
			}
			p = el + bytes;
			break;
		}
		default:
			fprintf(stderr, "hprof_check: sub-record 0x%02x\n", t);
			die("unknown heap dump sub-record");
		}
		if (p > e)
			die("sub-record crosses its segment");
	}
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: hprof_check FILE [CLASS...]\n");
		return 2;
	}
	int fd = open(argv[1], O_RDONLY);
	struct stat sb;
	if (fd < 0 || fstat(fd, &sb) < 0 || sb.st_size < 32)
		die("cannot open or too small");
	base = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (base == MAP_FAILED)
		die("mmap");
	end = base + sb.st_size;
	if (memcmp(base, "JAVA PROFILE 1.0.", 17))
		die("not an HPROF file");
	const uint8_t *p = memchr(base, 0, 32);
	if (!p)
		die("bad header");
	idsz = u4(p + 1);
	if (idsz != 4 && idsz != 8)
		die("bad id size");
	const uint8_t *first = p + 1 + 4 + 8;
	want = (const char **)argv + 2;
	nwant = argc - 2;
	counts = calloc((size_t)nwant + 1, sizeof(*counts));
	struct stats st = { 0 };

	/* Names and classes; threads are printed at the end. */
	for (p = first; p < end;) {
		need(p, 9);
		uint8_t tag = p[0];
		uint32_t len = u4(p + 5);
		const uint8_t *b = p + 9;
		need(b, len);
		if (tag == 0x01) {
			if (len < idsz)
				die("short UTF8");
			map_put(&utf8, id(b), (uint64_t)(len - idsz) << 40 | (uint64_t)(b + idsz - base));
		} else if (tag == 0x02) {
			uint64_t cid = id(b + 4), nid = id(b + 8 + idsz);
			map_put(&classes, cid, nid);
			map_put(&serials, u4(b), nid);
			char name[512];
			str_of(nid, name, sizeof(name));
			for (int i = 0; i < nwant; i++)
				if (!strcmp(name, want[i]))
					map_put(&wanted, cid, (uint64_t)i);
		} else if (tag == 0x04) {
			map_put(&frames, id(b), (uint64_t)(b - base));
		}
		p = b + len;
	}
	for (int pass = 1; pass <= 2; pass++) {
		for (p = first; p < end;) {
			uint8_t tag = p[0];
			uint32_t len = u4(p + 5);
			const uint8_t *b = p + 9;
			if (tag == 0x0c || tag == 0x1c)
				walk_segment(b, b + len, pass, &st);
			p = b + len;
		}
	}
	for (int i = 0; i < nwant; i++) {
		uint64_t c = counts[i];
		for (int t = 4; t < 12; t++)
			if (prim_name[t] && !strcmp(want[i], prim_name[t]))
				c = st.prim[t];
		printf("instances %s %llu\n", want[i], (unsigned long long)c);
	}
	for (int t = 4; t < 12; t++)
		if (st.len1024[t])
			printf("arrays_len %s 1024 %llu\n", prim_name[t],
			       (unsigned long long)st.len1024[t]);
	printf("nonzero_primitive_arrays %llu\n", (unsigned long long)st.nonzero);
	printf("nonzero_byte_arrays %llu\n", (unsigned long long)st.nonzero_bytes);
	if (nwant)
		printf("max_refs_to %s %llu\n", want[0], (unsigned long long)st.max_refs);

	/* START THREAD -> its STACK TRACE -> frames: "thread NAME frames a,b". */
	struct map traces = { 0 };
	for (p = first; p < end;) {
		uint32_t len = u4(p + 5);
		if (p[0] == 0x05)
			map_put(&traces, (uint64_t)u4(p + 9) + 1, (uint64_t)(p + 9 - base));
		p += 9 + len;
	}
	for (p = first; p < end;) {
		uint32_t len = u4(p + 5);
		const uint8_t *b = p + 9;
		uint64_t toff;
		if (p[0] == 0x0a && map_get(&traces, (uint64_t)u4(b + 4 + idsz) + 1, &toff)) {
			char name[256], grp[64];
			str_of(id(b + 8 + idsz), name, sizeof(name));
			str_of(id(b + 8 + 2 * idsz), grp, sizeof(grp));
			const uint8_t *tr = base + toff;
			uint32_t nf = u4(tr + 8);
			printf("thread %s state %s frames ", name, grp);
			for (uint32_t k = 0; k < nf; k++) {
				uint64_t foff;
				char m[256], cls[512];
				if (!map_get(&frames, id(tr + 12 + (size_t)k * idsz), &foff))
					die("trace names a missing frame");
				const uint8_t *f = base + foff;
				uint64_t cname = 0;
				map_get(&serials, u4(f + 4 * idsz), &cname);
				str_of(id(f + idsz), m, sizeof(m));
				str_of(cname, cls, sizeof(cls));
				printf("%s%s.%s", k ? "," : "", cls[0] ? cls : "?", m);
			}
			printf("\n");
		}
		p = b + len;
	}
	struct map *maps[] = { &utf8, &classes, &serials, &frames, &wanted, &target, &traces };
	for (size_t i = 0; i < sizeof(maps) / sizeof(maps[0]); i++) {
		free(maps[i]->k);
		free(maps[i]->v);
	}
	free(counts);
	munmap((void *)base, (size_t)sb.st_size);
	close(fd);
	return 0;
}

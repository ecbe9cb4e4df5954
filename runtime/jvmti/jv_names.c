/*
 * Java method names for pprof: one GetMethodName / GetClassSignature /
 * GetSourceFileName / GetLineNumberTable per distinct method per artifact,
 * cached here; locations are keyed by (method, line) with a synthetic
 * address, since pprof deduplicates locations by address.
 */
#include "jv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pprof.h"

struct jvm_method {
	jmethodID id;
	uint64_t func;               /* pprof function id */
	jvmtiLineNumberEntry *lines; /* sorted by start_location; NULL: none */
	jint nlines;
};

struct jvm_loc {
	jmethodID id;
	int64_t line;
	uint64_t loc;
};

struct jvm_names {
	JNIEnv *jni;
	struct pp_builder *b;
	struct jvm_method *m;
	size_t mcap, mused;
	struct jvm_loc *l;
	size_t lcap, lused;
	uint64_t next_addr;
};

static size_t hash_ptr(const void *p, int64_t extra)
{
	uint64_t h = (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ull;
	h ^= (uint64_t)extra * 0xc2b2ae3d27d4eb4full;
	return (size_t)(h ^ (h >> 29));
}

int jvm_names_new(JNIEnv *jni, struct pp_builder *b, struct jvm_names **out)
{
	struct jvm_names *n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	n->jni = jni;
	n->b = b;
	n->mcap = n->lcap = 256;
	n->m = calloc(n->mcap, sizeof(*n->m));
	n->l = calloc(n->lcap, sizeof(*n->l));
	n->next_addr = 0x1000;
	if (!n->m || !n->l) {
		jvm_names_free(n);
		return -ENOMEM;
	}
	*out = n;
	return 0;
}

void jvm_names_free(struct jvm_names *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->mcap; i++)
		if (n->m[i].id && n->m[i].lines)
			(*jv_jvmti)->Deallocate(jv_jvmti, (unsigned char *)n->m[i].lines);
	free(n->m);
	free(n->l);
	free(n);
}

void jvm_class_name(const char *sig, char *out, size_t n)
{
	static const struct { char c; const char *name; } prim[] = {
		{ 'Z', "boolean" }, { 'B', "byte" }, { 'C', "char" }, { 'S', "short" },
		{ 'I', "int" }, { 'J', "long" }, { 'F', "float" }, { 'D', "double" },
		{ 'V', "void" },
	};
	size_t dims = 0, o = 0;
	if (!n)
		return;
	out[0] = '\0';
	if (!sig)
		return;
	while (sig[dims] == '[')
		dims++;
	const char *s = sig + dims;
	if (*s == 'L') {
		for (s++; *s && *s != ';' && o + 1 < n; s++)
			out[o++] = *s == '/' ? '.' : *s;
	} else {
		const char *p = NULL;
		for (size_t i = 0; i < sizeof(prim) / sizeof(prim[0]); i++)
			if (prim[i].c == *s)
				p = prim[i].name;
		for (p = p ? p : s; *p && o + 1 < n; p++)
			out[o++] = *p;
	}
	for (size_t d = 0; d < dims && o + 2 < n; d++) {
		out[o++] = '[';
		out[o++] = ']';
	}
	out[o] = '\0';
}

static int grow_methods(struct jvm_names *n)
{
	size_t cap = n->mcap * 2;
	struct jvm_method *m = calloc(cap, sizeof(*m));
	if (!m)
		return -ENOMEM;
	for (size_t i = 0; i < n->mcap; i++) {
		if (!n->m[i].id)
			continue;
		size_t j = hash_ptr(n->m[i].id, 0) & (cap - 1);
		while (m[j].id)
			j = (j + 1) & (cap - 1);
		m[j] = n->m[i];
	}
	free(n->m);
	n->m = m;
	n->mcap = cap;
	return 0;
}

/* Resolve a method once: its pprof function and its line table. */
static int method_of(struct jvm_names *n, jmethodID id, struct jvm_method **out)
{
	jvmtiEnv *j = jv_jvmti;
	int r;
	if (n->mused * 2 >= n->mcap && (r = grow_methods(n)) < 0)
		return r;
	size_t i = hash_ptr(id, 0) & (n->mcap - 1);
	for (; n->m[i].id; i = (i + 1) & (n->mcap - 1))
		if (n->m[i].id == id) {
			*out = &n->m[i];
			return 0;
		}
	struct jvm_method *m = &n->m[i];
	char name[512] = "(unknown)", cls[384] = "";
	char *mname = NULL, *csig = NULL, *src = NULL;
	jclass k = NULL;
	if ((*j)->GetMethodName(j, id, &mname, NULL, NULL) == JVMTI_ERROR_NONE &&
	    (*j)->GetMethodDeclaringClass(j, id, &k) == JVMTI_ERROR_NONE &&
	    (*j)->GetClassSignature(j, k, &csig, NULL) == JVMTI_ERROR_NONE) {
		jvm_class_name(csig, cls, sizeof(cls));
		snprintf(name, sizeof(name), "%s.%s", cls, mname);
		if (jv_caps.source_files &&
		    (*j)->GetSourceFileName(j, k, &src) != JVMTI_ERROR_NONE)
			src = NULL;
	}
	/* The file pprof shows: the package's path plus the source file name. */
	char file[512] = "";
	if (src) {
		char *dot = strrchr(cls, '.');
		if (dot) {
			*dot = '\0';
			for (char *c = cls; *c; c++)
				if (*c == '.')
					*c = '/';
			snprintf(file, sizeof(file), "%s/%s", cls, src);
		} else {
			snprintf(file, sizeof(file), "%s", src);
		}
	}
	m->lines = NULL;
	m->nlines = 0;
	if (jv_caps.line_numbers &&
	    (*j)->GetLineNumberTable(j, id, &m->nlines, &m->lines) != JVMTI_ERROR_NONE) {
		m->lines = NULL;
		m->nlines = 0;
	}
	r = pp_add_function(n->b, name, NULL, file, m->nlines ? m->lines[0].line_number : 0,
			    &m->func);
	if (mname)
		(*j)->Deallocate(j, (unsigned char *)mname);
	if (csig)
		(*j)->Deallocate(j, (unsigned char *)csig);
	if (src)
		(*j)->Deallocate(j, (unsigned char *)src);
	if (k && n->jni)
		(*n->jni)->DeleteLocalRef(n->jni, k);
	if (r < 0) {
		if (m->lines)
			(*j)->Deallocate(j, (unsigned char *)m->lines);
		m->lines = NULL;
		return r;
	}
	m->id = id;
	n->mused++;
	*out = m;
	return 0;
}

/* The line of bci: the entry with the greatest start_location <= bci. */
static int64_t line_of(const struct jvm_method *m, jlocation bci)
{
	int64_t line = 0;
	jlocation best = -1;
	if (bci < 0)
		return 0; /* a native method */
	for (jint i = 0; i < m->nlines; i++)
		if (m->lines[i].start_location <= bci && m->lines[i].start_location > best) {
			best = m->lines[i].start_location;
			line = m->lines[i].line_number;
		}
	return line;
}

static int grow_locs(struct jvm_names *n)
{
	size_t cap = n->lcap * 2;
	struct jvm_loc *l = calloc(cap, sizeof(*l));
	if (!l)
		return -ENOMEM;
	for (size_t i = 0; i < n->lcap; i++) {
		if (!n->l[i].loc)
			continue;
		size_t j = hash_ptr(n->l[i].id, n->l[i].line) & (cap - 1);
		while (l[j].loc)
			j = (j + 1) & (cap - 1);
		l[j] = n->l[i];
	}
	free(n->l);
	n->l = l;
	n->lcap = cap;
	return 0;
}

int jvm_location(struct jvm_names *n, jmethodID id, jlocation bci, uint64_t *loc)
{
	struct jvm_method *m;
	int r;
	if ((r = method_of(n, id, &m)) < 0)
		return r;
	int64_t line = line_of(m, bci);
	if (n->lused * 2 >= n->lcap && (r = grow_locs(n)) < 0)
		return r;
	size_t i = hash_ptr(id, line) & (n->lcap - 1);
	for (; n->l[i].loc; i = (i + 1) & (n->lcap - 1))
		if (n->l[i].id == id && n->l[i].line == line) {
			*loc = n->l[i].loc;
			return 0;
		}
	if ((r = pp_add_location(n->b, 0, n->next_addr++, m->func, line, &n->l[i].loc)) < 0)
		return r;
	n->l[i].id = id;
	n->l[i].line = line;
	n->lused++;
	*loc = n->l[i].loc;
	return 0;
}

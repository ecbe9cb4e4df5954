#include "pprof.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "profile.pb-c.h"
#include "util.h"

/*
 * The builder keeps compact internal arrays and only builds the (much
 * larger) protobuf-c object graph for the duration of a serialise call.
 * Hash tables store 1-based indices into those arrays, so the arrays can be
 * realloc'd freely without invalidating the tables.
 */

struct pp_slot {
	uint32_t idx1; /* index + 1; 0 marks an empty slot */
	uint32_t hash; /* kept so that growing never re-hashes keys */
};

struct pp_htab {
	struct pp_slot *slot;
	size_t cap; /* power of two, or 0 before first use */
	size_t used;
};

struct pp_func {
	int64_t name, system_name, file, start_line;
};

struct pp_loc {
	uint64_t mapping_id, address, function_id;
	int64_t line;
};

struct pp_map {
	uint64_t start, limit, offset;
	int64_t file, build_id;
	bool has_functions, has_line_numbers;
};

struct pp_sample {
	size_t loc_off, nlocs, lab_off, nlabels;
};

struct pp_lab {
	int64_t key, str, num, num_unit;
};

struct pp_builder {
	/* String table: NUL-terminated strings back to back in chars. */
	char *chars;
	size_t nchars, chars_cap;
	size_t *str_off;
	size_t nstrs, strs_cap;
	struct pp_htab str_ht;

	struct pp_func *funcs;
	size_t nfuncs, funcs_cap;
	struct pp_htab func_ht;

	struct pp_loc *locs;
	size_t nlocs, locs_cap;
	struct pp_htab loc_ht;

	struct pp_map *maps;
	size_t nmaps, maps_cap;

	/* Sample i's values are values[i * ntypes ..]; locs and labels pooled. */
	struct pp_sample *samples;
	size_t nsamples, samples_cap;
	uint64_t *sample_locs;
	size_t nsample_locs, sample_locs_cap;
	int64_t *values;
	size_t nvalues, values_cap;
	struct pp_lab *labels;
	size_t nlabels, labels_cap;

	int64_t *comments;
	size_t ncomments, comments_cap;

	int64_t types[PP_MAX_VALUES][2];
	size_t ntypes;
	int64_t period_type[2];
	int64_t period;
	bool has_period;
	int64_t default_type;
	int64_t time_nanos, duration_nanos;
};

/* Make room for need elements, doubling; NULL (arr untouched) on failure. */
static void *grow(void *arr, size_t *cap, size_t need, size_t elem)
{
	size_t n = *cap ? *cap : 16;
	void *p;

	if (need <= *cap)
		return arr;
	while (n < need) {
		if (n > SIZE_MAX / 2)
			return NULL;
		n *= 2;
	}
	if (n > SIZE_MAX / elem)
		return NULL;
	p = realloc(arr, n * elem);
	if (p)
		*cap = n;
	return p;
}

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

static uint32_t fold32(uint64_t h)
{
	return (uint32_t)(h ^ (h >> 32));
}

static uint32_t hash_bytes(const char *s, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)s[i];
		h *= 0x100000001b3ull;
	}
	return fold32(mix64(h));
}

static uint32_t hash_words(const uint64_t *w, size_t n)
{
	uint64_t h = 0x9e3779b97f4a7c15ull;

	for (size_t i = 0; i < n; i++)
		h = mix64(h ^ w[i]) + 0x9e3779b97f4a7c15ull;
	return fold32(h);
}

typedef bool (*ht_eq_fn)(const struct pp_builder *b, size_t idx, const void *key);

/* Ensure one more entry fits at load <= 1/2 (keeps linear probing short). */
static int ht_reserve(struct pp_htab *h)
{
	struct pp_slot *ns;
	size_t ncap;

	if ((h->used + 1) * 2 <= h->cap)
		return 0;
	ncap = h->cap ? h->cap * 2 : 64;
	ns = calloc(ncap, sizeof(*ns));
	if (!ns)
		return -ENOMEM;
	for (size_t i = 0; i < h->cap; i++) {
		size_t j;

		if (!h->slot[i].idx1)
			continue;
		for (j = h->slot[i].hash & (ncap - 1); ns[j].idx1; j = (j + 1) & (ncap - 1))
			;
		ns[j] = h->slot[i];
	}
	free(h->slot);
	h->slot = ns;
	h->cap = ncap;
	return 0;
}

/* The matching slot, or the empty one where key belongs (load is <= 1/2). */
static struct pp_slot *ht_find(const struct pp_htab *h, uint32_t hash, ht_eq_fn eq,
			       const struct pp_builder *b, const void *key)
{
	size_t mask = h->cap - 1;

	for (size_t i = hash & mask;; i = (i + 1) & mask) {
		struct pp_slot *s = &h->slot[i];

		if (!s->idx1 || (s->hash == hash && eq(b, s->idx1 - 1, key)))
			return s;
	}
}

static void ht_set(struct pp_htab *h, struct pp_slot *s, uint32_t hash, size_t idx)
{
	s->idx1 = (uint32_t)(idx + 1);
	s->hash = hash;
	h->used++;
}

struct str_key {
	const char *s;
	size_t len;
};

static size_t str_len(const struct pp_builder *b, size_t i)
{
	size_t end = i + 1 < b->nstrs ? b->str_off[i + 1] : b->nchars;

	return end - b->str_off[i] - 1;
}

static bool str_eq(const struct pp_builder *b, size_t idx, const void *key)
{
	const struct str_key *k = key;

	return str_len(b, idx) == k->len && !memcmp(b->chars + b->str_off[idx], k->s, k->len);
}

/* Returns the index, or -errno. Never called for "" (always index 0). */
static int64_t str_intern(struct pp_builder *b, const char *s)
{
	struct str_key k = { .s = s, .len = strlen(s) };
	uint32_t h = hash_bytes(s, k.len);
	struct pp_slot *slot;
	size_t *offs;
	char *chars;
	int r;

	/* A full table is never grown: lookups still work, inserts fail below. */
	if (b->nstrs < PP_MAX_ENTRIES) {
		r = ht_reserve(&b->str_ht);
		if (r)
			return r;
	}
	slot = ht_find(&b->str_ht, h, str_eq, b, &k);
	if (slot->idx1)
		return slot->idx1 - 1;
	if (b->nstrs >= PP_MAX_ENTRIES)
		return -ENOSPC;
	if (k.len >= SIZE_MAX - b->nchars)
		return -ENOMEM;
	offs = grow(b->str_off, &b->strs_cap, b->nstrs + 1, sizeof(*offs));
	if (!offs)
		return -ENOMEM;
	b->str_off = offs;
	chars = grow(b->chars, &b->chars_cap, b->nchars + k.len + 1, 1);
	if (!chars)
		return -ENOMEM;
	b->chars = chars;
	memcpy(chars + b->nchars, s, k.len + 1);
	offs[b->nstrs] = b->nchars;
	b->nchars += k.len + 1;
	ht_set(&b->str_ht, slot, h, b->nstrs);
	return (int64_t)b->nstrs++;
}

/* Index of s, or -errno (-EINVAL for a NULL builder). */
int64_t pp_str(struct pp_builder *b, const char *s)
{
	if (!b)
		return -EINVAL;
	if (!s || !*s)
		return 0;
	return str_intern(b, s);
}

int pp_new(struct pp_builder **out)
{
	struct pp_builder *b;

	if (!out)
		return -EINVAL;
	*out = NULL;
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->chars = grow(NULL, &b->chars_cap, 256, 1);
	b->str_off = grow(NULL, &b->strs_cap, 64, sizeof(*b->str_off));
	if (!b->chars || !b->str_off) {
		pp_free(b);
		return -ENOMEM;
	}
	/* pprof requires string_table[0] == "". */
	b->chars[0] = '\0';
	b->nchars = 1;
	b->str_off[0] = 0;
	b->nstrs = 1;
	*out = b;
	return 0;
}

void pp_free(struct pp_builder *b)
{
	if (!b)
		return;
	free(b->chars);
	free(b->str_off);
	free(b->str_ht.slot);
	free(b->funcs);
	free(b->func_ht.slot);
	free(b->locs);
	free(b->loc_ht.slot);
	free(b->maps);
	free(b->samples);
	free(b->sample_locs);
	free(b->values);
	free(b->labels);
	free(b->comments);
	free(b);
}

/* Intern type and unit (unit may be NULL) into out[2]. */
static int value_type(struct pp_builder *b, const char *type, const char *unit, int64_t out[2])
{
	int64_t t, u;

	if (!b || !type)
		return -EINVAL;
	t = pp_str(b, type);
	if (t < 0)
		return (int)t;
	u = pp_str(b, unit);
	if (u < 0)
		return (int)u;
	out[0] = t;
	out[1] = u;
	return 0;
}

int pp_add_sample_type(struct pp_builder *b, const char *type, const char *unit)
{
	int64_t vt[2] = { 0, 0 };
	int r;

	if (!b || !type)
		return -EINVAL;
	/* Existing samples were checked against the old count. */
	if (b->nsamples)
		return -EINVAL;
	if (b->ntypes >= PP_MAX_VALUES)
		return -ENOSPC;
	r = value_type(b, type, unit, vt);
	if (r)
		return r;
	b->types[b->ntypes][0] = vt[0];
	b->types[b->ntypes][1] = vt[1];
	b->ntypes++;
	return 0;
}

int pp_set_period(struct pp_builder *b, const char *type, const char *unit, int64_t period)
{
	int r = value_type(b, type, unit, b ? b->period_type : NULL);

	if (r)
		return r;
	b->period = period;
	b->has_period = true;
	return 0;
}

int pp_set_default_sample_type(struct pp_builder *b, const char *type)
{
	int64_t t = pp_str(b, type);

	if (t < 0)
		return (int)t;
	b->default_type = t;
	return 0;
}

void pp_set_time(struct pp_builder *b, int64_t time_nanos, int64_t duration_nanos)
{
	if (!b)
		return;
	b->time_nanos = time_nanos;
	b->duration_nanos = duration_nanos;
}

int pp_add_comment(struct pp_builder *b, const char *comment)
{
	int64_t *c, s;

	if (!b || !comment)
		return -EINVAL;
	if (b->ncomments >= PP_MAX_ENTRIES)
		return -ENOSPC;
	c = grow(b->comments, &b->comments_cap, b->ncomments + 1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	b->comments = c;
	s = pp_str(b, comment);
	if (s < 0)
		return (int)s;
	c[b->ncomments++] = s;
	return 0;
}

int pp_add_mapping(struct pp_builder *b, uint64_t start, uint64_t limit,
		   uint64_t file_offset, const char *file, const char *build_id,
		   bool has_functions, bool has_line_numbers, uint64_t *id)
{
	struct pp_map *m;
	int64_t f, bid;

	if (!b || limit < start)
		return -EINVAL;
	if (b->nmaps >= PP_MAX_ENTRIES)
		return -ENOSPC;
	m = grow(b->maps, &b->maps_cap, b->nmaps + 1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	b->maps = m;
	f = pp_str(b, file);
	if (f < 0)
		return (int)f;
	bid = pp_str(b, build_id);
	if (bid < 0)
		return (int)bid;
	m += b->nmaps;
	m->start = start;
	m->limit = limit;
	m->offset = file_offset;
	m->file = f;
	m->build_id = bid;
	m->has_functions = has_functions;
	m->has_line_numbers = has_line_numbers;
	if (id)
		*id = b->nmaps + 1;
	b->nmaps++;
	return 0;
}

static bool func_eq(const struct pp_builder *b, size_t idx, const void *key)
{
	const int64_t *k = key;

	return b->funcs[idx].name == k[0] && b->funcs[idx].file == k[1];
}

int pp_add_function(struct pp_builder *b, const char *name, const char *system_name,
		    const char *file, int64_t start_line, uint64_t *id)
{
	int64_t k[2], sys;
	struct pp_slot *slot;
	struct pp_func *f;
	uint32_t h;
	int r;

	if (!b || !name)
		return -EINVAL;
	k[0] = pp_str(b, name);
	if (k[0] < 0)
		return (int)k[0];
	k[1] = pp_str(b, file);
	if (k[1] < 0)
		return (int)k[1];
	h = hash_words((const uint64_t[]){ (uint64_t)k[0], (uint64_t)k[1] }, 2);
	if (b->nfuncs < PP_MAX_ENTRIES) {
		r = ht_reserve(&b->func_ht);
		if (r)
			return r;
	}
	slot = ht_find(&b->func_ht, h, func_eq, b, k);
	if (slot->idx1) {
		if (id)
			*id = slot->idx1;
		return 0;
	}
	if (b->nfuncs >= PP_MAX_ENTRIES)
		return -ENOSPC;
	sys = system_name ? pp_str(b, system_name) : k[0];
	if (sys < 0)
		return (int)sys;
	f = grow(b->funcs, &b->funcs_cap, b->nfuncs + 1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	b->funcs = f;
	f += b->nfuncs;
	f->name = k[0];
	f->system_name = sys;
	f->file = k[1];
	f->start_line = start_line;
	ht_set(&b->func_ht, slot, h, b->nfuncs);
	b->nfuncs++;
	if (id)
		*id = b->nfuncs;
	return 0;
}

/*
 * Location key. Address 0 is not a real address (interpreted or synthetic
 * frames): keying those by address alone would fold every such frame into
 * one location, so for them the function and line join the key.
 */
static void loc_key(uint64_t k[4], uint64_t mapping_id, uint64_t address,
		    uint64_t function_id, int64_t line)
{
	k[0] = mapping_id;
	k[1] = address;
	k[2] = address ? 0 : function_id;
	k[3] = address ? 0 : (uint64_t)line;
}

static bool loc_eq(const struct pp_builder *b, size_t idx, const void *key)
{
	const struct pp_loc *l = &b->locs[idx];
	uint64_t k[4];

	loc_key(k, l->mapping_id, l->address, l->function_id, l->line);
	return !memcmp(k, key, sizeof(k));
}

int pp_add_location(struct pp_builder *b, uint64_t mapping_id, uint64_t address,
		    uint64_t function_id, int64_t line, uint64_t *id)
{
	struct pp_slot *slot;
	struct pp_loc *l;
	uint64_t k[4];
	uint32_t h;
	int r;

	if (!b || mapping_id > b->nmaps || function_id > b->nfuncs)
		return -EINVAL;
	/* A line number without a function means nothing to pprof. */
	if (!function_id)
		line = 0;
	loc_key(k, mapping_id, address, function_id, line);
	h = hash_words(k, 4);
	if (b->nlocs < PP_MAX_ENTRIES) {
		r = ht_reserve(&b->loc_ht);
		if (r)
			return r;
	}
	slot = ht_find(&b->loc_ht, h, loc_eq, b, k);
	if (slot->idx1) {
		if (id)
			*id = slot->idx1;
		return 0;
	}
	if (b->nlocs >= PP_MAX_ENTRIES)
		return -ENOSPC;
	l = grow(b->locs, &b->locs_cap, b->nlocs + 1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	b->locs = l;
	l += b->nlocs;
	l->mapping_id = mapping_id;
	l->address = address;
	l->function_id = function_id;
	l->line = line;
	ht_set(&b->loc_ht, slot, h, b->nlocs);
	b->nlocs++;
	if (id)
		*id = b->nlocs;
	return 0;
}

/* Reserve pool space for one more sample; nothing is committed. */
static int sample_reserve(struct pp_builder *b, size_t nlocs, size_t nlabels)
{
	void *p;

	if (nlocs > SIZE_MAX - b->nsample_locs)
		return -ENOMEM;
	p = grow(b->samples, &b->samples_cap, b->nsamples + 1, sizeof(*b->samples));
	if (!p)
		return -ENOMEM;
	b->samples = p;
	if (nlocs) {
		p = grow(b->sample_locs, &b->sample_locs_cap, b->nsample_locs + nlocs,
			 sizeof(*b->sample_locs));
		if (!p)
			return -ENOMEM;
		b->sample_locs = p;
	}
	p = grow(b->values, &b->values_cap, b->nvalues + b->ntypes, sizeof(*b->values));
	if (!p)
		return -ENOMEM;
	b->values = p;
	if (nlabels) {
		p = grow(b->labels, &b->labels_cap, b->nlabels + nlabels, sizeof(*b->labels));
		if (!p)
			return -ENOMEM;
		b->labels = p;
	}
	return 0;
}

int pp_add_sample(struct pp_builder *b, const uint64_t *locs, size_t nlocs,
		  const int64_t *values, size_t nvalues,
		  const struct pp_label *labels, size_t nlabels)
{
	struct pp_lab lab[PP_MAX_LABELS];
	struct pp_sample *s;
	int r;

	if (!b || !b->ntypes || nvalues != b->ntypes || !values)
		return -EINVAL;
	if ((nlocs && !locs) || (nlabels && !labels) || nlabels > PP_MAX_LABELS)
		return -EINVAL;
	for (size_t i = 0; i < nlocs; i++)
		if (!locs[i] || locs[i] > b->nlocs)
			return -EINVAL;
	for (size_t i = 0; i < nlabels; i++)
		if (!labels[i].key)
			return -EINVAL;
	/* Checked before interning so a full builder gains no stray strings. */
	if (b->nsamples >= PP_MAX_ENTRIES)
		return -ENOSPC;

	for (size_t i = 0; i < nlabels; i++) {
		const struct pp_label *in = &labels[i];
		int64_t key, val;

		key = pp_str(b, in->key);
		if (key < 0)
			return (int)key;
		/* A label is either a string or a number (with optional unit). */
		val = pp_str(b, in->str ? in->str : in->num_unit);
		if (val < 0)
			return (int)val;
		lab[i] = (struct pp_lab){ .key = key };
		if (in->str) {
			lab[i].str = val;
		} else {
			lab[i].num = in->num;
			lab[i].num_unit = val;
		}
	}
	r = sample_reserve(b, nlocs, nlabels);
	if (r)
		return r;

	s = &b->samples[b->nsamples++];
	s->loc_off = b->nsample_locs;
	s->nlocs = nlocs;
	s->lab_off = b->nlabels;
	s->nlabels = nlabels;
	if (nlocs)
		memcpy(b->sample_locs + b->nsample_locs, locs, nlocs * sizeof(*locs));
	b->nsample_locs += nlocs;
	memcpy(b->values + b->nvalues, values, nvalues * sizeof(*values));
	b->nvalues += nvalues;
	if (nlabels)
		memcpy(b->labels + b->nlabels, lab, nlabels * sizeof(*lab));
	b->nlabels += nlabels;
	return 0;
}

/* The protobuf-c object graph; scalar arrays point into the builder. */
struct pp_view {
	Perftools__Profiles__Profile prof;
	Perftools__Profiles__ValueType types[PP_MAX_VALUES], *typep[PP_MAX_VALUES];
	Perftools__Profiles__ValueType period_type;
	Perftools__Profiles__Sample *samples, **samplep;
	Perftools__Profiles__Label *labels, **labelp;
	Perftools__Profiles__Mapping *maps, **mapp;
	Perftools__Profiles__Location *locs, **locp;
	Perftools__Profiles__Line *lines, **linep;
	Perftools__Profiles__Function *funcs, **funcp;
	char **strs;
};

/* malloc(n * elem) with overflow check; never NULL for n == 0 on success. */
static void *alloc_n(size_t n, size_t elem)
{
	if (n && n > SIZE_MAX / elem)
		return NULL;
	return malloc(n ? n * elem : 1);
}

static void view_free(struct pp_view *v)
{
	free(v->samples);
	free(v->samplep);
	free(v->labels);
	free(v->labelp);
	free(v->maps);
	free(v->mapp);
	free(v->locs);
	free(v->locp);
	free(v->lines);
	free(v->linep);
	free(v->funcs);
	free(v->funcp);
	free(v->strs);
}

static int view_alloc(const struct pp_builder *b, struct pp_view *v)
{
	v->samples = alloc_n(b->nsamples, sizeof(*v->samples));
	v->samplep = alloc_n(b->nsamples, sizeof(*v->samplep));
	v->labels = alloc_n(b->nlabels, sizeof(*v->labels));
	v->labelp = alloc_n(b->nlabels, sizeof(*v->labelp));
	v->maps = alloc_n(b->nmaps, sizeof(*v->maps));
	v->mapp = alloc_n(b->nmaps, sizeof(*v->mapp));
	v->locs = alloc_n(b->nlocs, sizeof(*v->locs));
	v->locp = alloc_n(b->nlocs, sizeof(*v->locp));
	/* At most one line per location; indexed like locs. */
	v->lines = alloc_n(b->nlocs, sizeof(*v->lines));
	v->linep = alloc_n(b->nlocs, sizeof(*v->linep));
	v->funcs = alloc_n(b->nfuncs, sizeof(*v->funcs));
	v->funcp = alloc_n(b->nfuncs, sizeof(*v->funcp));
	v->strs = alloc_n(b->nstrs, sizeof(*v->strs));
	if (!v->samples || !v->samplep || !v->labels || !v->labelp || !v->maps ||
	    !v->mapp || !v->locs || !v->locp || !v->lines || !v->linep ||
	    !v->funcs || !v->funcp || !v->strs)
		return -ENOMEM;
	return 0;
}

static int view_build(struct pp_builder *b, struct pp_view *v)
{
	Perftools__Profiles__Profile *p = &v->prof;
	int r;

	memset(v, 0, sizeof(*v));
	r = view_alloc(b, v);
	if (r) {
		view_free(v);
		return r;
	}
	perftools__profiles__profile__init(p);

	for (size_t i = 0; i < b->ntypes; i++) {
		perftools__profiles__value_type__init(&v->types[i]);
		v->types[i].type = b->types[i][0];
		v->types[i].unit = b->types[i][1];
		v->typep[i] = &v->types[i];
	}
	p->n_sample_type = b->ntypes;
	p->sample_type = v->typep;

	for (size_t i = 0; i < b->nlabels; i++) {
		Perftools__Profiles__Label *l = &v->labels[i];

		perftools__profiles__label__init(l);
		l->key = b->labels[i].key;
		l->str = b->labels[i].str;
		l->num = b->labels[i].num;
		l->num_unit = b->labels[i].num_unit;
		v->labelp[i] = l;
	}
	for (size_t i = 0; i < b->nsamples; i++) {
		const struct pp_sample *in = &b->samples[i];
		Perftools__Profiles__Sample *s = &v->samples[i];

		perftools__profiles__sample__init(s);
		s->n_location_id = in->nlocs;
		s->location_id = b->sample_locs + in->loc_off;
		s->n_value = b->ntypes;
		s->value = b->values + i * b->ntypes;
		s->n_label = in->nlabels;
		s->label = v->labelp + in->lab_off;
		v->samplep[i] = s;
	}
	p->n_sample = b->nsamples;
	p->sample = v->samplep;

	for (size_t i = 0; i < b->nmaps; i++) {
		const struct pp_map *in = &b->maps[i];
		Perftools__Profiles__Mapping *m = &v->maps[i];

		perftools__profiles__mapping__init(m);
		m->id = i + 1;
		m->memory_start = in->start;
		m->memory_limit = in->limit;
		m->file_offset = in->offset;
		m->filename = in->file;
		m->build_id = in->build_id;
		m->has_functions = in->has_functions;
		/* Our symbolisers yield file names exactly when they yield lines. */
		m->has_filenames = in->has_line_numbers;
		m->has_line_numbers = in->has_line_numbers;
		v->mapp[i] = m;
	}
	p->n_mapping = b->nmaps;
	p->mapping = v->mapp;

	for (size_t i = 0; i < b->nlocs; i++) {
		const struct pp_loc *in = &b->locs[i];
		Perftools__Profiles__Location *l = &v->locs[i];

		perftools__profiles__location__init(l);
		l->id = i + 1;
		l->mapping_id = in->mapping_id;
		l->address = in->address;
		if (in->function_id) {
			perftools__profiles__line__init(&v->lines[i]);
			v->lines[i].function_id = in->function_id;
			v->lines[i].line = in->line;
			v->linep[i] = &v->lines[i];
			l->n_line = 1;
			l->line = &v->linep[i];
		}
		v->locp[i] = l;
	}
	p->n_location = b->nlocs;
	p->location = v->locp;

	for (size_t i = 0; i < b->nfuncs; i++) {
		const struct pp_func *in = &b->funcs[i];
		Perftools__Profiles__Function *f = &v->funcs[i];

		perftools__profiles__function__init(f);
		f->id = i + 1;
		f->name = in->name;
		f->system_name = in->system_name;
		f->filename = in->file;
		f->start_line = in->start_line;
		v->funcp[i] = f;
	}
	p->n_function = b->nfuncs;
	p->function = v->funcp;

	for (size_t i = 0; i < b->nstrs; i++)
		v->strs[i] = b->chars + b->str_off[i];
	p->n_string_table = b->nstrs;
	p->string_table = v->strs;

	p->time_nanos = b->time_nanos;
	p->duration_nanos = b->duration_nanos;
	if (b->has_period) {
		perftools__profiles__value_type__init(&v->period_type);
		v->period_type.type = b->period_type[0];
		v->period_type.unit = b->period_type[1];
		p->period_type = &v->period_type;
		p->period = b->period;
	}
	p->n_comment = b->ncomments;
	p->comment = b->comments;
	p->default_sample_type = b->default_type;
	return 0;
}

/*
 * The samples go last: v->prof keeps everything else and *tail only the
 * samples, packed in that order. Two messages back to back are one
 * (repeated fields concatenate), and any field order is legal; with the
 * strings and tables before the samples, the redactor judges each sample
 * as it reads it, in one pass (redact/rdc_pprof.c).
 */
static void view_split(struct pp_view *v, Perftools__Profiles__Profile *tail)
{
	perftools__profiles__profile__init(tail);
	tail->n_sample = v->prof.n_sample;
	tail->sample = v->prof.sample;
	v->prof.n_sample = 0;
	v->prof.sample = NULL;
}

int pp_serialize(struct pp_builder *b, uint8_t **out, size_t *len)
{
	Perftools__Profiles__Profile tail;
	struct pp_view v;
	uint8_t *buf;
	size_t n, head;
	int r;

	if (!b || !out || !len)
		return -EINVAL;
	r = view_build(b, &v);
	if (r)
		return r;
	view_split(&v, &tail);
	head = perftools__profiles__profile__get_packed_size(&v.prof);
	n = head + perftools__profiles__profile__get_packed_size(&tail);
	buf = malloc(n ? n : 1);
	if (!buf) {
		view_free(&v);
		return -ENOMEM;
	}
	if (perftools__profiles__profile__pack(&v.prof, buf) != head ||
	    perftools__profiles__profile__pack(&tail, buf + head) != n - head) {
		free(buf);
		view_free(&v);
		return -EIO;
	}
	view_free(&v);
	*out = buf;
	*len = n;
	return 0;
}

#define GZ_CHUNK (64 * 1024)

/*
 * protobuf-c packs into this sink piece by piece, so the uncompressed
 * profile never exists in memory as a whole. Appends are tiny (often a few
 * bytes), hence the staging buffer in front of deflate.
 */
struct gz_sink {
	ProtobufCBuffer base; /* first: protobuf-c hands &base to gz_append */
	z_stream zs;
	int fd;
	int err;
	uint64_t written;
	size_t inlen;
	uint8_t in[GZ_CHUNK];
	uint8_t out[GZ_CHUNK];
};

/* Compress the staged input and write whatever deflate produces. */
static void gz_pump(struct gz_sink *s, int flush)
{
	int zr;

	s->zs.next_in = s->in;
	s->zs.avail_in = (uInt)s->inlen;
	do {
		size_t have;

		s->zs.next_out = s->out;
		s->zs.avail_out = GZ_CHUNK;
		zr = deflate(&s->zs, flush);
		if (zr == Z_STREAM_ERROR) {
			s->err = -EIO;
			return;
		}
		have = GZ_CHUNK - s->zs.avail_out;
		if (have) {
			int r = util_write_all(s->fd, s->out, have);

			if (r) {
				s->err = r;
				return;
			}
			s->written += have;
		}
	} while (s->zs.avail_out == 0);
	s->inlen = 0;
	if (flush == Z_FINISH && zr != Z_STREAM_END)
		s->err = -EIO;
}

static void gz_append(ProtobufCBuffer *buf, size_t len, const uint8_t *data)
{
	struct gz_sink *s = (struct gz_sink *)buf;

	/* append cannot fail, so the first error sticks and the rest is dropped. */
	while (len && !s->err) {
		size_t n = GZ_CHUNK - s->inlen;

		if (n > len)
			n = len;
		memcpy(s->in + s->inlen, data, n);
		s->inlen += n;
		data += n;
		len -= n;
		if (s->inlen == GZ_CHUNK)
			gz_pump(s, Z_NO_FLUSH);
	}
}

/* On error the fd may hold a partial stream; callers write to a temp file. */
int pp_write_gz(struct pp_builder *b, int fd, uint64_t *written)
{
	return pp_write_gz_level(b, fd, Z_DEFAULT_COMPRESSION, written);
}

int pp_write_gz_level(struct pp_builder *b, int fd, int level, uint64_t *written)
{
	struct pp_view v;
	struct gz_sink *s;
	int r;

	if (written)
		*written = 0;
	if (!b)
		return -EINVAL;
	if (fd < 0)
		return -EBADF;
	if (level < Z_DEFAULT_COMPRESSION || level > Z_BEST_COMPRESSION)
		return -EINVAL;
	s = malloc(sizeof(*s));
	if (!s)
		return -ENOMEM;
	memset(s, 0, offsetof(struct gz_sink, in));
	s->base.append = gz_append;
	s->fd = fd;
	/* windowBits 15 + 16: gzip wrapper, which is what pprof expects. */
	if (deflateInit2(&s->zs, level, Z_DEFLATED, 15 + 16, 8,
			 Z_DEFAULT_STRATEGY) != Z_OK) {
		free(s);
		return -ENOMEM;
	}
	r = view_build(b, &v);
	if (!r) {
		Perftools__Profiles__Profile tail;

		view_split(&v, &tail);
		perftools__profiles__profile__pack_to_buffer(&v.prof, &s->base);
		perftools__profiles__profile__pack_to_buffer(&tail, &s->base);
		if (!s->err)
			gz_pump(s, Z_FINISH);
		r = s->err;
		view_free(&v);
	}
	if (written)
		*written = s->written;
	deflateEnd(&s->zs);
	free(s);
	return r;
}

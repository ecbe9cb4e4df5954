/* The capture as gzip'd pprof through common/pprof.h. */
#include "pf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perfmap.h"
#include "pprof.h"

/* frame -> location id, so each distinct frame is symbolised once */
struct loc_cache {
	uint64_t *key, *val; /* val 0: empty */
	size_t n, cap;
};

static uint64_t *cache_slot(struct loc_cache *c, uint64_t k)
{
	uint64_t h = k * 0x9e3779b97f4a7c15ull;
	size_t i = (size_t)(h >> 20) & (c->cap - 1);
	while (c->val[i] && c->key[i] != k)
		i = (i + 1) & (c->cap - 1);
	c->key[i] = k;
	return &c->val[i];
}

static int cache_grow(struct loc_cache *c)
{
	struct loc_cache n = { .cap = c->cap ? c->cap * 2 : 4096 };
	n.key = calloc(n.cap, sizeof(*n.key));
	n.val = calloc(n.cap, sizeof(*n.val));
	if (!n.key || !n.val) {
		free(n.key);
		free(n.val);
		return -ENOMEM;
	}
	for (size_t i = 0; i < c->cap; i++)
		if (c->val[i])
			*cache_slot(&n, c->key[i]) = c->val[i];
	n.n = c->n;
	free(c->key);
	free(c->val);
	*c = n;
	return 0;
}

static int location(struct pp_builder *b, struct pf_unwind *u, const struct pmap *jit,
		    uint64_t *mapids, struct loc_cache *c, uint64_t frame, uint64_t *loc)
{
	struct pf_sym s;
	uint64_t fid = 0, mid = 0, pc = PF_FRAME_PC(frame);
	char hex[32], name[256];
	const char *at;
	int r;

	if ((c->n + 1) * 2 > c->cap && (r = cache_grow(c)) < 0)
		return r;
	uint64_t *slot = cache_slot(c, frame);
	if (*slot) {
		*loc = *slot;
		return 0;
	}
	pf_unwind_symbolize(u, frame, &s);
	/*
	 * Code no module names: a JIT's, named by its perf map if it has one.
	 * Not only outside every module: libdw's module ranges can span the
	 * anonymous code V8 maps between a module's segments. A frame the map
	 * names is JIT code, in no file: it gets no mapping.
	 */
	if (!s.function) {
		uint64_t call = pc - ((frame & PF_FRAME_RET) ? 1 : 0);
		if ((s.function = pmap_lookup(jit, call, NULL)))
			s.module = -1;
	}
	if (s.module >= 0) {
		if (!mapids[s.module]) {
			struct pf_module m;
			if ((r = pf_unwind_module(u, s.module, &m)) < 0 ||
			    (r = pp_add_mapping(b, m.start, m.limit, 0, m.file, m.build_id, true,
						s.file != NULL, &mapids[s.module])) < 0)
				return r;
		}
		mid = mapids[s.module];
	}
	if (!s.function) {
		/* Unknown symbol (JIT code, stripped binary): keep the frame by address. */
		snprintf(hex, sizeof(hex), "0x%" PRIx64, pc);
		s.function = hex;
	} else if ((at = strchr(s.function, '@')) && at > s.function &&
		   (size_t)(at - s.function) < sizeof(name)) {
		/* .dynsym names carry their symbol version ("f@@GLIBC_2.34"): drop it. */
		memcpy(name, s.function, (size_t)(at - s.function));
		name[at - s.function] = '\0';
		s.function = name;
	}
	if ((r = pp_add_function(b, s.function, NULL, s.file, 0, &fid)) < 0 ||
	    (r = pp_add_location(b, mid, pc, fid, s.line, loc)) < 0)
		return r;
	*slot = *loc;
	c->n++;
	return 0;
}

static void comments(struct pp_builder *b, const struct pf_capture_info *ci,
		     const struct pf_counts *c)
{
	char line[512];
	unsigned long long sh = (unsigned long long)c->short_;

	if (ci->nmethods) {
		snprintf(line, sizeof(line), "profilingd-perf: method events, uprobes, the stack "
			 "of every %llu. hit; hits=%llu stacks=%llu lost=%llu dropped=%llu",
			 (unsigned long long)ci->every, (unsigned long long)ci->hits,
			 (unsigned long long)c->samples, (unsigned long long)c->lost,
			 (unsigned long long)c->dropped);
		pp_add_comment(b, line);
		if (ci->over_budget_ns) {
			snprintf(line, sizeof(line), "overhead budget: %llu ns per recorded hit on "
				 "average, over the budget of %llu us: the probes were removed",
				 (unsigned long long)ci->over_budget_ns,
				 (unsigned long long)(ci->budget_ns / 1000));
			pp_add_comment(b, line);
		}
		if (ci->args_dropped) {
			snprintf(line, sizeof(line), "arguments: %llu hits had argument values past "
				 "the cap of %d distinct sets: counted, not recorded",
				 (unsigned long long)ci->args_dropped, PF_MAX_ARGSETS);
			pp_add_comment(b, line);
		}
		if (ci->past_cap) {
			snprintf(line, sizeof(line), "max hits: the cap of %llu was reached, every "
				 "probe was disabled at once; %llu samples written before that took "
				 "were not recorded", (unsigned long long)ci->max_hits,
				 (unsigned long long)ci->past_cap);
			pp_add_comment(b, line);
		}
		for (unsigned k = 0; k < ci->nmethods; k++) {
			unsigned long long hk = ci->hits_k ? (unsigned long long)ci->hits_k[k] : 0;
			snprintf(line, sizeof(line), "method target: %.240s hits=%llu", ci->methods[k],
				 hk);
			pp_add_comment(b, line);
			if (ci->over_k && ci->over_k[k]) {
				snprintf(line, sizeof(line), "overhead budget: target %.200s: %llu ns "
					 "per recorded hit on average, over the budget of %llu us: "
					 "its probe was removed, the others ran on", ci->methods[k],
					 (unsigned long long)ci->over_k[k],
					 (unsigned long long)(ci->budget_ns / 1000));
				pp_add_comment(b, line);
			}
		}
		return;
	}

	snprintf(line, sizeof(line),
		 "profilingd-perf: perf_event cpu-clock, user mode, %u Hz per thread; "
		 "%u B user stack copy, DWARF CFI (libdw) first, kernel frame-pointer "
		 "callchain when DWARF gives fewer than 2 frames", ci->hz, PF_STACK_BYTES);
	pp_add_comment(b, line);
	snprintf(line, sizeof(line), "samples=%llu unwinder dwarf=%llu fp=%llu short=%llu",
		 (unsigned long long)c->samples, (unsigned long long)c->dwarf,
		 (unsigned long long)c->fp, sh);
	pp_add_comment(b, line);
	snprintf(line, sizeof(line),
		 "not in the profile: lost=%llu (ring full) dropped=%llu (caps) empty=%llu "
		 "bad=%llu; throttled=%llu",
		 (unsigned long long)c->lost, (unsigned long long)c->dropped,
		 (unsigned long long)c->empty, (unsigned long long)c->bad,
		 (unsigned long long)c->throttled);
	pp_add_comment(b, line);
	snprintf(line, sizeof(line), "threads: %u seen, %u not sampled, %u with samples",
		 c->threads_seen, c->threads_skipped, c->threads);
	pp_add_comment(b, line);
	if (ci->jit) {
		struct pmap_stats ps;
		pmap_get_stats(ci->jit, &ps);
		snprintf(line, sizeof(line), "JIT names: /tmp/perf-%d.map, %u entries (%u malformed "
			 "lines skipped, %u past the cap%s)", (int)ci->pid, ps.entries, ps.bad,
			 ps.dropped, ps.truncated ? ", file cut at 64 MiB" : "");
		pp_add_comment(b, line);
	}
}

int pf_output_write(int fd, const struct pf_capture_info *ci, const struct pf_agg *agg,
		    struct pf_unwind *u, const struct pf_events *ev, const struct pf_counts *c)
{
	static const char *const unw_name[] = { "dwarf", "fp" };
	struct pp_builder *b = NULL;
	struct loc_cache cache = { 0 };
	uint64_t *mapids = NULL, locs[PF_MAX_FRAMES];
	int r;

	/* Modules are indexed while symbolising: size for the cap. */
	mapids = calloc(PF_MAX_MODULES, sizeof(*mapids));
	if (!mapids)
		return -ENOMEM;
	if ((r = pp_new(&b)) < 0)
		goto out;
	if (ci->nmethods) {
		/*
		 * Method events: each sample stands for `every` hits (its period),
		 * so "hits" is the value a flame graph shows; "stacks" is how many
		 * stacks were recorded.
		 */
		if ((r = pp_add_sample_type(b, "hits", "count")) < 0 ||
		    (r = pp_add_sample_type(b, "stacks", "count")) < 0 ||
		    (r = pp_set_period(b, "hits", "count", (int64_t)ci->every)) < 0 ||
		    (r = pp_set_default_sample_type(b, "hits")) < 0)
			goto out;
	} else if ((r = pp_add_sample_type(b, "samples", "count")) < 0 ||
	    (r = pp_add_sample_type(b, "cpu", "nanoseconds")) < 0 ||
	    (r = pp_set_period(b, "cpu", "nanoseconds", 1000000000ll / ci->hz)) < 0 ||
	    (r = pp_set_default_sample_type(b, "cpu")) < 0)
		goto out;
	pp_set_time(b, ci->start_ns, ci->duration_ns);
	comments(b, ci, c);
	/* pprof takes the first mapping for the program: make it the executable. */
	int exe = pf_unwind_main_module(u);
	struct pf_module m;
	if (exe >= 0 && pf_unwind_module(u, exe, &m) == 0 &&
	    (r = pp_add_mapping(b, m.start, m.limit, 0, m.file, m.build_id, true, true,
				&mapids[exe])) < 0)
		goto out;
	for (size_t i = 0; i < pf_agg_size(agg); i++) {
		struct pf_stack st;
		pf_agg_get(agg, i, &st);
		for (size_t k = 0; k < st.nframes; k++)
			if ((r = location(b, u, ci->jit, mapids, &cache, st.frames[k], &locs[k])) < 0)
				goto out;
		int64_t vals[2] = { (int64_t)st.count, (int64_t)st.cpu_ns };
		if (ci->nmethods) { /* cpu_ns holds the summed periods: hits */
			vals[0] = (int64_t)st.cpu_ns;
			vals[1] = (int64_t)st.count;
		}
		/* The redactor keeps a sample by its pid label. */
		/* Method events: which target fired, as it was spelt, and its
		 * arguments (arg<index>: num for numbers, str for strings and
		 * pointers in hex); distinct values are distinct samples. */
		char keys[NARGS_MAX][8], ptrs[NARGS_MAX][24];
		struct pp_label labels[5 + NARGS_MAX] = {
			{ .key = "pid", .num = ci->pid },
			{ .key = "thread_id", .num = st.tid },
			{ .key = "thread_name", .str = pf_events_comm(ev, st.tid) },
			{ .key = "unwinder", .str = unw_name[st.unwinder] },
			{ .key = "target" },
		};
		size_t nl = 4;
		if (st.probe >= 0 && (unsigned)st.probe < ci->nmethods)
			labels[nl++].str = ci->methods[st.probe];
		const struct pf_argset *as = pf_argtab_get(ci->args, st.args);
		for (unsigned k = 0; as && k < as->n && k < NARGS_MAX; k++) {
			const struct pf_argval *a = &as->a[k];
			struct pp_label *l = &labels[nl++];
			snprintf(keys[k], sizeof(keys[k]), "arg%u", (unsigned)a->index);
			l->key = keys[k];
			if (a->kind == 's') {
				l->str = a->s;
			} else if (a->kind == 'p') {
				snprintf(ptrs[k], sizeof(ptrs[k]), "0x%llx", (unsigned long long)a->v);
				l->str = ptrs[k];
			} else {
				/* 'u' past 2^63 shows as negative: pprof's num is signed. */
				l->num = (int64_t)a->v;
			}
		}
		if ((r = pp_add_sample(b, locs, st.nframes, vals, 2, labels, nl)) < 0)
			goto out;
	}
	r = pp_write_gz_level(b, fd, PP_GZ_HOP, NULL);
out:
	pp_free(b);
	free(cache.key);
	free(cache.val);
	free(mapids);
	return r;
}

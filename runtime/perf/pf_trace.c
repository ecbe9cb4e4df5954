/*
 * Method events as a Perfetto trace (docs/METHOD_EVENTS.md, "Perfetto
 * result"): the hits profilingd-perf kept (pf_hits, at most PF_MAX_SAMPLES,
 * past that counted as dropped) written by common/hit_trace.c, one instant
 * event per hit on its thread's track at the hit's CLOCK_MONOTONIC time,
 * each distinct stack of pf_agg interned once (hit_trace.h says why).
 */
#include "pf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hit_trace.h"
#include "perfmap.h"

#define STACK_TEXT_MAX (PF_MAX_FRAMES * 96)

int pf_hits_add(struct pf_hits *h, uint64_t ts, uint32_t tid, size_t stack)
{
	if (!h)
		return -EINVAL;
	if (h->n >= PF_MAX_SAMPLES) {
		h->dropped++;
		return -ENOSPC;
	}
	if (h->n == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 1024;
		if (cap > PF_MAX_SAMPLES)
			cap = PF_MAX_SAMPLES;
		struct pf_hit *v = realloc(h->v, cap * sizeof(*v));
		if (!v) {
			h->dropped++;
			return -ENOMEM;
		}
		h->v = v;
		h->cap = cap;
	}
	h->v[h->n++] = (struct pf_hit){ .ts = ts, .tid = tid, .stack = (uint32_t)stack };
	return 0;
}

void pf_hits_free(struct pf_hits *h)
{
	if (!h)
		return;
	free(h->v);
	memset(h, 0, sizeof(*h));
}

/* A frame's name: its function (no symbol version), a JIT's perf-map
 * name, else its address. */
static const char *frame_name(struct pf_unwind *u, const struct pmap *jit, uint64_t frame,
			      char *buf, size_t n)
{
	struct pf_sym s;
	uint64_t pc = PF_FRAME_PC(frame);
	pf_unwind_symbolize(u, frame, &s);
	const char *f = s.function;
	if (!f)
		f = pmap_lookup(jit, pc - ((frame & PF_FRAME_RET) ? 1 : 0), NULL);
	if (!f) {
		snprintf(buf, n, "0x%" PRIx64, pc);
		return buf;
	}
	const char *at = strchr(f, '@');
	snprintf(buf, n, "%.*s", at && at > f ? (int)(at - f) : (int)strlen(f), f);
	return buf;
}

int pf_trace_write(int fd, const struct pf_capture_info *ci, const struct pf_agg *agg,
		   struct pf_unwind *u, const struct pf_events *ev, const struct pf_hits *hits)
{
	struct htr w = { .buf = NULL };
	uint8_t *seen = NULL;
	char *text = NULL, leaf[256], fr[256];
	uint32_t *tids = NULL;
	size_t ntids = 0;
	int r = 0;

	if (!ci || !agg || !hits)
		return -EINVAL;
	size_t nstacks = pf_agg_size(agg);
	seen = calloc(nstacks ? nstacks : 1, 1);
	text = malloc(STACK_TEXT_MAX);
	tids = calloc(PF_MAX_TIDS, sizeof(*tids));
	if (!seen || !text || !tids) {
		r = -ENOMEM;
		goto out;
	}
	if ((r = htr_begin(&w, fd, CLOCK_MONOTONIC, ci->pid,
			   pf_events_comm(ev, (uint32_t)ci->pid))) < 0)
		goto out;

	/* A track per thread with hits, each once (PF_MAX_TIDS at most). */
	for (size_t i = 0; i < hits->n; i++) {
		uint32_t tid = hits->v[i].tid;
		size_t k = 0;
		while (k < ntids && tids[k] != tid)
			k++;
		if (k < ntids || ntids >= PF_MAX_TIDS)
			continue;
		tids[ntids++] = tid;
		if ((r = htr_thread(&w, (int32_t)tid, pf_events_comm(ev, tid))) < 0)
			goto out;
	}

	/* The hits. A stack's names are interned with its first hit. */
	for (size_t i = 0; i < hits->n; i++) {
		const struct pf_hit *h = &hits->v[i];
		bool stack_ok = h->stack < nstacks;
		const char *names = NULL;
		size_t len = 0;
		if (stack_ok && !seen[h->stack]) {
			struct pf_stack st;
			pf_agg_get(agg, h->stack, &st);
			leaf[0] = text[0] = '\0';
			for (size_t k = 0; k < st.nframes; k++) {
				const char *nm = frame_name(u, ci->jit, st.frames[k], fr, sizeof(fr));
				if (k == 0)
					snprintf(leaf, sizeof(leaf), "%s", nm);
				if (!htr_text_add(text, STACK_TEXT_MAX, &len, nm))
					break;
			}
			names = text;
			seen[h->stack] = 1;
		}
		/* The hit's arguments (#args), as arg<index> annotations. */
		struct htr_arg args[HTR_ARGS_MAX];
		size_t nargs = 0;
		const struct pf_argset *as = NULL;
		if (stack_ok) {
			struct pf_stack st;
			pf_agg_get(agg, h->stack, &st);
			as = pf_argtab_get(ci->args, st.args);
		}
		for (unsigned k = 0; as && k < as->n && nargs < HTR_ARGS_MAX; k++) {
			const struct pf_argval *a = &as->a[k];
			struct htr_arg *o = &args[nargs++];
			memset(o, 0, sizeof(*o));
			o->index = a->index;
			switch (a->kind) {
			case 'i': o->kind = HTR_ARG_INT; o->v.i = (int64_t)a->v; break;
			case 'u': o->kind = HTR_ARG_UINT; o->v.u = a->v; break;
			case 'p': o->kind = HTR_ARG_PTR; o->v.u = a->v; break;
			default: o->kind = HTR_ARG_STR; o->s = a->s; o->len = a->slen; break;
			}
		}
		if ((r = htr_hit_args(&w, (int32_t)h->tid, h->ts,
				      stack_ok ? (uint64_t)h->stack + 1 : 0, leaf, names, len,
				      args, nargs)) < 0)
			goto out;
	}
out:
	htr_free(&w);
	free(seen);
	free(text);
	free(tids);
	return r;
}

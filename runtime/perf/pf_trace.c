/*
 * Method events as a Perfetto trace (docs/METHOD_EVENTS.md, "Perfetto
 * result"): one TYPE_INSTANT TrackEvent per recorded hit on its thread's
 * track, at the hit's CLOCK_MONOTONIC time, carrying its stack.
 *
 * Why interning: a stack repeats across hits (a loop calls the method),
 * and PF_MAX_SAMPLES hits of 128 frames written out each time would be
 * hundreds of MB. Each distinct (thread, stack) of pf_agg is written once,
 * as an interned event name (its leaf function) and an interned debug
 * annotation string (the frames, leaf first, one per line), in the packet
 * of its first hit; a hit is then ~30 bytes. All packets but the clock
 * snapshot are on one sequence, so the redactor's per-sequence rules
 * (redact/rdc_perfetto.c) keep the interning with the app's tracks.
 */
#include "pf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "perfetto_trace.pb-c.h"
#include "perfmap.h"

#define SEQ_ID 1
#define STACK_TEXT_MAX (PF_MAX_FRAMES * 96)
#define CLOCK_MONO 3 /* BuiltinClock BUILTIN_CLOCK_MONOTONIC */
#define CLOCK_BOOT 6 /* BUILTIN_CLOCK_BOOTTIME: the trace's default clock */
#define ANNOT_STACK_IID 1

typedef Perfetto__Protos__TracePacket Packet;

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

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* One Trace.packet (field 1, length-delimited) to fd. */
static int put_packet(int fd, const Packet *pkt, uint8_t **buf, size_t *cap)
{
	size_t sz = perfetto__protos__trace_packet__get_packed_size(pkt);
	if (sz + 11 > *cap) {
		uint8_t *b = realloc(*buf, sz + 11);
		if (!b)
			return -ENOMEM;
		*buf = b;
		*cap = sz + 11;
	}
	size_t h = 0;
	(*buf)[h++] = 0x0a;
	for (uint64_t v = sz;; v >>= 7) {
		(*buf)[h++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		if (v <= 0x7f)
			break;
	}
	perfetto__protos__trace_packet__pack(pkt, *buf + h);
	return write_all(fd, *buf, h + sz);
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

static uint64_t now_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t thread_uuid(uint32_t tid)
{
	return (1ull << 32) | tid;
}

int pf_trace_write(int fd, const struct pf_capture_info *ci, const struct pf_agg *agg,
		   struct pf_unwind *u, const struct pf_events *ev, const struct pf_hits *hits)
{
	uint8_t *buf = NULL, *seen = NULL;
	size_t cap = 0;
	char *text = NULL, leaf[256], fr[256];
	uint32_t *tids = NULL;
	size_t ntids = 0;
	bool named = false;
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

	/* The clocks, so a reader can place CLOCK_MONOTONIC times on its own. */
	Perfetto__Protos__ClockSnapshot__Clock c_mono = PERFETTO__PROTOS__CLOCK_SNAPSHOT__CLOCK__INIT;
	Perfetto__Protos__ClockSnapshot__Clock c_boot = PERFETTO__PROTOS__CLOCK_SNAPSHOT__CLOCK__INIT;
	Perfetto__Protos__ClockSnapshot__Clock *clocks[2] = { &c_boot, &c_mono };
	Perfetto__Protos__ClockSnapshot cs = PERFETTO__PROTOS__CLOCK_SNAPSHOT__INIT;
	c_boot.has_clock_id = c_boot.has_timestamp = 1;
	c_boot.clock_id = CLOCK_BOOT;
	c_boot.timestamp = now_ns(CLOCK_BOOTTIME);
	c_mono.has_clock_id = c_mono.has_timestamp = 1;
	c_mono.clock_id = CLOCK_MONO;
	c_mono.timestamp = now_ns(CLOCK_MONOTONIC);
	cs.n_clocks = 2;
	cs.clocks = clocks;
	Packet p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	p.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_CLOCK_SNAPSHOT;
	p.clock_snapshot = &cs;
	p.has_timestamp = 1;
	p.timestamp = c_boot.timestamp;
	if ((r = put_packet(fd, &p, &buf, &cap)) < 0)
		goto out;

	/* The process's track, first on the sequence: it clears the state. */
	Perfetto__Protos__ProcessDescriptor pd = PERFETTO__PROTOS__PROCESS_DESCRIPTOR__INIT;
	Perfetto__Protos__TrackDescriptor td = PERFETTO__PROTOS__TRACK_DESCRIPTOR__INIT;
	pd.has_pid = 1;
	pd.pid = ci->pid;
	const char *pname = pf_events_comm(ev, (uint32_t)ci->pid);
	if (pname && *pname)
		pd.process_name = (char *)pname;
	td.has_uuid = 1;
	td.uuid = (uint64_t)(uint32_t)ci->pid;
	td.process = &pd;
	p = (Packet)PERFETTO__PROTOS__TRACE_PACKET__INIT;
	p.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_DESCRIPTOR;
	p.track_descriptor = &td;
	p.has_trusted_packet_sequence_id = 1;
	p.trusted_packet_sequence_id = SEQ_ID;
	p.has_sequence_flags = 1;
	p.sequence_flags = PERFETTO__PROTOS__TRACE_PACKET__SEQUENCE_FLAGS__SEQ_INCREMENTAL_STATE_CLEARED;
	if ((r = put_packet(fd, &p, &buf, &cap)) < 0)
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
		Perfetto__Protos__ThreadDescriptor th = PERFETTO__PROTOS__THREAD_DESCRIPTOR__INIT;
		td = (Perfetto__Protos__TrackDescriptor)PERFETTO__PROTOS__TRACK_DESCRIPTOR__INIT;
		th.has_pid = th.has_tid = 1;
		th.pid = ci->pid;
		th.tid = (int32_t)tid;
		const char *tn = pf_events_comm(ev, tid);
		if (tn && *tn)
			th.thread_name = (char *)tn;
		td.has_uuid = td.has_parent_uuid = 1;
		td.uuid = thread_uuid(tid);
		td.parent_uuid = (uint64_t)(uint32_t)ci->pid;
		td.thread = &th;
		p = (Packet)PERFETTO__PROTOS__TRACE_PACKET__INIT;
		p.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_DESCRIPTOR;
		p.track_descriptor = &td;
		p.has_trusted_packet_sequence_id = 1;
		p.trusted_packet_sequence_id = SEQ_ID;
		if ((r = put_packet(fd, &p, &buf, &cap)) < 0)
			goto out;
	}

	/* The hits. A stack's names are interned with its first hit. */
	for (size_t i = 0; i < hits->n; i++) {
		const struct pf_hit *h = &hits->v[i];
		Perfetto__Protos__InternedData id = PERFETTO__PROTOS__INTERNED_DATA__INIT;
		Perfetto__Protos__EventName en = PERFETTO__PROTOS__EVENT_NAME__INIT;
		Perfetto__Protos__EventName *ens[1] = { &en };
		Perfetto__Protos__InternedString is = PERFETTO__PROTOS__INTERNED_STRING__INIT;
		Perfetto__Protos__InternedString *iss[1] = { &is };
		Perfetto__Protos__DebugAnnotationName an = PERFETTO__PROTOS__DEBUG_ANNOTATION_NAME__INIT;
		Perfetto__Protos__DebugAnnotationName *ans[1] = { &an };
		Perfetto__Protos__DebugAnnotation da = PERFETTO__PROTOS__DEBUG_ANNOTATION__INIT;
		Perfetto__Protos__DebugAnnotation *das[1] = { &da };
		Perfetto__Protos__TrackEvent te = PERFETTO__PROTOS__TRACK_EVENT__INIT;
		bool stack_ok = h->stack < nstacks;
		uint64_t iid = (uint64_t)h->stack + 1;

		p = (Packet)PERFETTO__PROTOS__TRACE_PACKET__INIT;
		if (stack_ok && !seen[h->stack]) {
			struct pf_stack st;
			size_t len = 0;
			pf_agg_get(agg, h->stack, &st);
			leaf[0] = '\0';
			text[0] = '\0';
			for (size_t k = 0; k < st.nframes; k++) {
				const char *nm = frame_name(u, ci->jit, st.frames[k], fr, sizeof(fr));
				if (k == 0)
					snprintf(leaf, sizeof(leaf), "%s", nm);
				int w = snprintf(text + len, STACK_TEXT_MAX - len, "%s%s",
						 k ? "\n" : "", nm);
				if (w < 0 || (size_t)w >= STACK_TEXT_MAX - len)
					break; /* the outermost frames go: the leaf matters most */
				len += (size_t)w;
			}
			en.has_iid = 1;
			en.iid = iid;
			en.name = leaf[0] ? leaf : "method hit";
			is.has_iid = is.has_str = 1;
			is.iid = iid;
			is.str.data = (uint8_t *)text;
			is.str.len = len;
			id.n_event_names = 1;
			id.event_names = ens;
			id.n_debug_annotation_string_values = 1;
			id.debug_annotation_string_values = iss;
			/* The annotation's name, once. */
			if (!named) {
				named = true;
				an.has_iid = 1;
				an.iid = ANNOT_STACK_IID;
				an.name = "stack";
				id.n_debug_annotation_names = 1;
				id.debug_annotation_names = ans;
			}
			p.interned_data = &id;
			seen[h->stack] = 1;
		}
		te.has_type = 1;
		te.type = PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT;
		te.has_track_uuid = 1;
		te.track_uuid = thread_uuid(h->tid);
		if (stack_ok) {
			te.name_field_case = PERFETTO__PROTOS__TRACK_EVENT__NAME_FIELD_NAME_IID;
			te.name_iid = iid;
			da.name_field_case = PERFETTO__PROTOS__DEBUG_ANNOTATION__NAME_FIELD_NAME_IID;
			da.name_iid = ANNOT_STACK_IID;
			da.value_case = PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_STRING_VALUE_IID;
			da.string_value_iid = iid;
			te.n_debug_annotations = 1;
			te.debug_annotations = das;
		} else {
			te.name_field_case = PERFETTO__PROTOS__TRACK_EVENT__NAME_FIELD_NAME;
			te.name = "method hit";
		}
		p.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_EVENT;
		p.track_event = &te;
		p.has_timestamp = p.has_timestamp_clock_id = 1;
		p.timestamp = h->ts;
		p.timestamp_clock_id = CLOCK_MONO;
		p.has_trusted_packet_sequence_id = 1;
		p.trusted_packet_sequence_id = SEQ_ID;
		p.has_sequence_flags = 1;
		p.sequence_flags =
			PERFETTO__PROTOS__TRACE_PACKET__SEQUENCE_FLAGS__SEQ_NEEDS_INCREMENTAL_STATE;
		if ((r = put_packet(fd, &p, &buf, &cap)) < 0)
			goto out;
	}
out:
	free(buf);
	free(seen);
	free(text);
	free(tids);
	return r;
}

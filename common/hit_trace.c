/* Method-event hits as a Perfetto trace: the contract is in hit_trace.h. */
#include "hit_trace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perfetto_trace.pb-c.h"

/* BuiltinClock values (perfetto/common/builtin_clock.proto). */
enum { CLK_REALTIME = 1, CLK_MONOTONIC = 3, CLK_BOOTTIME = 6 };
#define SEQ_ID 1
#define ANNOT_STACK_IID 1

typedef Perfetto__Protos__TracePacket Packet;

static uint64_t now_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* One Trace.packet (field 1, length-delimited) to the trace's fd. */
static int put(struct htr *w, const Packet *pkt)
{
	size_t sz = perfetto__protos__trace_packet__get_packed_size(pkt), h = 0;
	if (sz + 11 > w->cap) {
		uint8_t *b = realloc(w->buf, sz + 11);
		if (!b)
			return -ENOMEM;
		w->buf = b;
		w->cap = sz + 11;
	}
	w->buf[h++] = 0x0a;
	for (uint64_t v = sz;; v >>= 7) {
		w->buf[h++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		if (v <= 0x7f)
			break;
	}
	perfetto__protos__trace_packet__pack(pkt, w->buf + h);
	for (size_t off = 0, n = h + sz; off < n;) {
		ssize_t k = write(w->fd, w->buf + off, n - off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		off += (size_t)k;
	}
	w->bytes += h + sz;
	return 0;
}

static void on_sequence(Packet *p)
{
	p->has_trusted_packet_sequence_id = 1;
	p->trusted_packet_sequence_id = SEQ_ID;
}

int htr_begin(struct htr *w, int fd, clockid_t clock, int32_t pid, const char *pname)
{
	if (!w || fd < 0 || (clock != CLOCK_MONOTONIC && clock != CLOCK_REALTIME))
		return -EINVAL;
	memset(w, 0, sizeof(*w));
	w->fd = fd;
	w->pid = pid;
	w->clock_id = clock == CLOCK_MONOTONIC ? CLK_MONOTONIC : CLK_REALTIME;

	/* The clocks, so a reader can place the hits' times on its own. */
	Perfetto__Protos__ClockSnapshot__Clock c_hit = PERFETTO__PROTOS__CLOCK_SNAPSHOT__CLOCK__INIT;
	Perfetto__Protos__ClockSnapshot__Clock c_boot = PERFETTO__PROTOS__CLOCK_SNAPSHOT__CLOCK__INIT;
	Perfetto__Protos__ClockSnapshot__Clock *clocks[2] = { &c_boot, &c_hit };
	Perfetto__Protos__ClockSnapshot cs = PERFETTO__PROTOS__CLOCK_SNAPSHOT__INIT;
	c_boot.has_clock_id = c_boot.has_timestamp = 1;
	c_boot.clock_id = CLK_BOOTTIME;
	c_boot.timestamp = now_ns(CLOCK_BOOTTIME);
	c_hit.has_clock_id = c_hit.has_timestamp = 1;
	c_hit.clock_id = w->clock_id;
	c_hit.timestamp = now_ns(clock);
	cs.n_clocks = 2;
	cs.clocks = clocks;
	Packet p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	p.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_CLOCK_SNAPSHOT;
	p.clock_snapshot = &cs;
	p.has_timestamp = 1;
	p.timestamp = c_boot.timestamp;
	int r = put(w, &p);
	if (r < 0)
		return r;

	/* The process's track, first on the sequence: it clears the state. */
	Perfetto__Protos__ProcessDescriptor pd = PERFETTO__PROTOS__PROCESS_DESCRIPTOR__INIT;
	Perfetto__Protos__TrackDescriptor td = PERFETTO__PROTOS__TRACK_DESCRIPTOR__INIT;
	pd.has_pid = 1;
	pd.pid = pid;
	if (pname && *pname)
		pd.process_name = (char *)pname;
	td.has_uuid = 1;
	td.uuid = (uint64_t)(uint32_t)pid;
	td.process = &pd;
	p = (Packet)PERFETTO__PROTOS__TRACE_PACKET__INIT;
	p.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_DESCRIPTOR;
	p.track_descriptor = &td;
	on_sequence(&p);
	p.has_sequence_flags = 1;
	p.sequence_flags = PERFETTO__PROTOS__TRACE_PACKET__SEQUENCE_FLAGS__SEQ_INCREMENTAL_STATE_CLEARED;
	return put(w, &p);
}

static uint64_t thread_uuid(int32_t tid)
{
	return (1ull << 32) | (uint32_t)tid;
}

int htr_thread(struct htr *w, int32_t tid, const char *name)
{
	if (!w)
		return -EINVAL;
	Perfetto__Protos__ThreadDescriptor th = PERFETTO__PROTOS__THREAD_DESCRIPTOR__INIT;
	Perfetto__Protos__TrackDescriptor td = PERFETTO__PROTOS__TRACK_DESCRIPTOR__INIT;
	th.has_pid = th.has_tid = 1;
	th.pid = w->pid;
	th.tid = tid;
	if (name && *name)
		th.thread_name = (char *)name;
	td.has_uuid = td.has_parent_uuid = 1;
	td.uuid = thread_uuid(tid);
	td.parent_uuid = (uint64_t)(uint32_t)w->pid;
	td.thread = &th;
	Packet p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	p.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_DESCRIPTOR;
	p.track_descriptor = &td;
	on_sequence(&p);
	return put(w, &p);
}

int htr_hit(struct htr *w, int32_t tid, uint64_t ts, uint64_t iid, const char *leaf,
	    const char *text, size_t len)
{
	return htr_hit_args(w, tid, ts, iid, leaf, text, len, NULL, 0);
}

/* One argument as a debug annotation named "arg<index>". */
static void arg_annotation(Perfetto__Protos__DebugAnnotation *da, char name[8],
			   const struct htr_arg *a)
{
	snprintf(name, 8, "arg%u", (unsigned)a->index);
	da->name_field_case = PERFETTO__PROTOS__DEBUG_ANNOTATION__NAME_FIELD_NAME;
	da->name = name;
	switch (a->kind) {
	case HTR_ARG_INT:
		da->value_case = PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_INT_VALUE;
		da->int_value = a->v.i;
		break;
	case HTR_ARG_UINT:
		da->value_case = PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_UINT_VALUE;
		da->uint_value = a->v.u;
		break;
	case HTR_ARG_PTR:
		da->value_case = PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_POINTER_VALUE;
		da->pointer_value = a->v.u;
		break;
	case HTR_ARG_STR:
	default:
		/* protobuf-c packs a string with strlen: the caller's bytes are
		 * copied, cut and terminated in the annotation's own buffer. */
		da->value_case = PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_STRING_VALUE;
		break;
	}
}

int htr_hit_args(struct htr *w, int32_t tid, uint64_t ts, uint64_t iid, const char *leaf,
		 const char *text, size_t len, const struct htr_arg *args, size_t nargs)
{
	if (!w || nargs > HTR_ARGS_MAX || (nargs && !args))
		return -EINVAL;
	Perfetto__Protos__DebugAnnotation ada[HTR_ARGS_MAX];
	char aname[HTR_ARGS_MAX][8];
	char astr[HTR_ARGS_MAX][HTR_ARG_STR_MAX + 1];
	Perfetto__Protos__InternedData id = PERFETTO__PROTOS__INTERNED_DATA__INIT;
	Perfetto__Protos__EventName en = PERFETTO__PROTOS__EVENT_NAME__INIT;
	Perfetto__Protos__EventName *ens[1] = { &en };
	Perfetto__Protos__InternedString is = PERFETTO__PROTOS__INTERNED_STRING__INIT;
	Perfetto__Protos__InternedString *iss[1] = { &is };
	Perfetto__Protos__DebugAnnotationName an = PERFETTO__PROTOS__DEBUG_ANNOTATION_NAME__INIT;
	Perfetto__Protos__DebugAnnotationName *ans[1] = { &an };
	Perfetto__Protos__DebugAnnotation da = PERFETTO__PROTOS__DEBUG_ANNOTATION__INIT;
	Perfetto__Protos__DebugAnnotation *das[1 + HTR_ARGS_MAX] = { &da };
	Perfetto__Protos__TrackEvent te = PERFETTO__PROTOS__TRACK_EVENT__INIT;
	Packet p = PERFETTO__PROTOS__TRACE_PACKET__INIT;

	if (iid && text) {
		/* The stack's names, with its first hit. */
		en.has_iid = 1;
		en.iid = iid;
		en.name = (char *)(leaf && *leaf ? leaf : "method hit");
		is.has_iid = is.has_str = 1;
		is.iid = iid;
		is.str.data = (uint8_t *)text;
		is.str.len = len;
		id.n_event_names = 1;
		id.event_names = ens;
		id.n_debug_annotation_string_values = 1;
		id.debug_annotation_string_values = iss;
		if (!w->named) {
			w->named = true;
			an.has_iid = 1;
			an.iid = ANNOT_STACK_IID;
			an.name = "stack";
			id.n_debug_annotation_names = 1;
			id.debug_annotation_names = ans;
		}
		p.interned_data = &id;
	}
	te.has_type = te.has_track_uuid = 1;
	te.type = PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT;
	te.track_uuid = thread_uuid(tid);
	if (iid) {
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
	for (size_t i = 0; i < nargs; i++) {
		perfetto__protos__debug_annotation__init(&ada[i]);
		arg_annotation(&ada[i], aname[i], &args[i]);
		if (ada[i].value_case == PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_STRING_VALUE) {
			size_t n = args[i].len < HTR_ARG_STR_MAX ? args[i].len : HTR_ARG_STR_MAX;
			if (n && args[i].s)
				memcpy(astr[i], args[i].s, n);
			else
				n = 0;
			astr[i][n] = '\0';
			ada[i].string_value = astr[i];
		}
		das[te.n_debug_annotations++] = &ada[i];
		te.debug_annotations = das;
	}
	p.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_EVENT;
	p.track_event = &te;
	p.has_timestamp = p.has_timestamp_clock_id = 1;
	p.timestamp = ts;
	p.timestamp_clock_id = w->clock_id;
	on_sequence(&p);
	p.has_sequence_flags = 1;
	p.sequence_flags = PERFETTO__PROTOS__TRACE_PACKET__SEQUENCE_FLAGS__SEQ_NEEDS_INCREMENTAL_STATE;
	return put(w, &p);
}

bool htr_text_add(char *text, size_t cap, size_t *len, const char *name)
{
	if (!text || !len || !name || *len >= cap)
		return false;
	int k = snprintf(text + *len, cap - *len, "%s%s", *len ? "\n" : "", name);
	if (k < 0 || (size_t)k >= cap - *len) {
		text[*len] = '\0';
		return false;
	}
	*len += (size_t)k;
	return true;
}

void htr_free(struct htr *w)
{
	if (!w)
		return;
	free(w->buf);
	w->buf = NULL;
	w->cap = 0;
}

#include "trace_fmt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perfetto_trace.pb-c.h"
#include "util.h"


void tfmt_init(struct tfmt_out *o, int fd)
{
	o->fd = fd;
	o->err = 0;
	o->total = 0;
	o->len = 0;
	o->ncounters = 0;
}

static void out_flush(struct tfmt_out *o);

int tfmt_finish(struct tfmt_out *o, uint64_t *bytes)
{
	out_flush(o);
	if (bytes)
		*bytes = o->total;
	return o->err;
}

static void out_flush(struct tfmt_out *o)
{
	if (o->len && !o->err) {
		int r = util_write_all(o->fd, o->buf, o->len);
		if (r < 0)
			o->err = r;
		o->total += o->len;
	}
	o->len = 0;
}

/* Frame one packet as Trace.packet (field 1, length-delimited). */
static void out_packet(struct tfmt_out *o, const Perfetto__Protos__TracePacket *p)
{
	size_t n = perfetto__protos__trace_packet__get_packed_size(p);
	uint8_t hdr[11];
	size_t h = 0;
	hdr[h++] = 0x0a;
	for (size_t v = n; ; v >>= 7) {
		hdr[h++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		if (v <= 0x7f)
			break;
	}
	if (o->len + h + n > sizeof(o->buf))
		out_flush(o);
	if (h + n > sizeof(o->buf)) {
		uint8_t *big = malloc(n);
		if (!big) {
			o->err = -ENOMEM;
			return;
		}
		perfetto__protos__trace_packet__pack(p, big);
		if (!o->err && ((o->err = util_write_all(o->fd, hdr, h)) == 0))
			o->err = util_write_all(o->fd, big, n);
		o->total += h + n;
		free(big);
		return;
	}
	memcpy(o->buf + o->len, hdr, h);
	perfetto__protos__trace_packet__pack(p, o->buf + o->len + h);
	o->len += h + n;
}

#define SEQ_ID(pid) (0x10000u + (uint32_t)(pid))
#define PROCESS_UUID(pid) ((uint64_t)(uint32_t)(pid) | (1ull << 40))
#define THREAD_UUID(tid) ((uint64_t)(uint32_t)(tid) | (2ull << 40))

static uint64_t counter_uuid(const char *name, size_t len)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < len; i++) {
		h ^= (uint8_t)name[i];
		h *= 1099511628211ull;
	}
	return (h & ((1ull << 40) - 1)) | (3ull << 40);
}

void tfmt_process(struct tfmt_out *o, pid_t pid, const char *name, const char *argv0)
{
	Perfetto__Protos__TracePacket p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	Perfetto__Protos__TrackDescriptor td = PERFETTO__PROTOS__TRACK_DESCRIPTOR__INIT;
	Perfetto__Protos__ProcessDescriptor pd = PERFETTO__PROTOS__PROCESS_DESCRIPTOR__INIT;
	char *cmd = (char *)argv0;

	pd.has_pid = 1;
	pd.pid = pid;
	pd.process_name = (char *)name;
	if (argv0) {
		pd.n_cmdline = 1;
		pd.cmdline = &cmd;
	}
	td.has_uuid = 1;
	td.uuid = PROCESS_UUID(pid);
	td.process = &pd;
	p.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_DESCRIPTOR;
	p.track_descriptor = &td;
	p.has_trusted_packet_sequence_id = 1;
	p.trusted_packet_sequence_id = SEQ_ID(pid);
	p.has_sequence_flags = 1;
	p.sequence_flags = 1; /* SEQ_INCREMENTAL_STATE_CLEARED */
	p.has_first_packet_on_sequence = 1;
	p.first_packet_on_sequence = 1;
	out_packet(o, &p);
}

void tfmt_thread(struct tfmt_out *o, pid_t pid, pid_t tid, const char *comm)
{
	Perfetto__Protos__TracePacket p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	Perfetto__Protos__TrackDescriptor td = PERFETTO__PROTOS__TRACK_DESCRIPTOR__INIT;
	Perfetto__Protos__ThreadDescriptor th = PERFETTO__PROTOS__THREAD_DESCRIPTOR__INIT;

	th.has_pid = 1;
	th.pid = pid;
	th.has_tid = 1;
	th.tid = tid;
	th.thread_name = (char *)comm;
	td.has_uuid = 1;
	td.uuid = THREAD_UUID(tid);
	td.has_parent_uuid = 1;
	td.parent_uuid = PROCESS_UUID(pid);
	td.thread = &th;
	p.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_DESCRIPTOR;
	p.track_descriptor = &td;
	p.has_trusted_packet_sequence_id = 1;
	p.trusted_packet_sequence_id = SEQ_ID(pid);
	out_packet(o, &p);
}

static void emit_counter_track(struct tfmt_out *o, pid_t pid, const char *name, uint64_t uuid)
{
	Perfetto__Protos__TracePacket p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	Perfetto__Protos__TrackDescriptor td = PERFETTO__PROTOS__TRACK_DESCRIPTOR__INIT;
	Perfetto__Protos__CounterDescriptor cd = PERFETTO__PROTOS__COUNTER_DESCRIPTOR__INIT;
	td.has_uuid = 1;
	td.uuid = uuid;
	td.has_parent_uuid = 1;
	td.parent_uuid = PROCESS_UUID(pid);
	td.name = (char *)name;
	td.counter = &cd;
	p.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_DESCRIPTOR;
	p.track_descriptor = &td;
	p.has_trusted_packet_sequence_id = 1;
	p.trusted_packet_sequence_id = SEQ_ID(pid);
	out_packet(o, &p);
}

void tfmt_event(struct tfmt_out *o, pid_t pid, pid_t tid, const struct trc_ev *e)
{
	uint64_t *counters = o->counters;
	unsigned *ncounters = &o->ncounters;
	Perfetto__Protos__TracePacket p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	Perfetto__Protos__TrackEvent te = PERFETTO__PROTOS__TRACK_EVENT__INIT;
	char name[TRC_NAME_MAX];

	/* A dump is untrusted: never trust len beyond the name buffer. */
	size_t len = e->len < TRC_NAME_MAX ? e->len : TRC_NAME_MAX - 1;
	memcpy(name, e->name, len);
	name[len] = '\0';
	te.has_track_uuid = 1;
	te.track_uuid = THREAD_UUID(tid);
	te.has_type = 1;
	switch (e->type) {
	case EV_BEGIN:
		te.type = PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_BEGIN;
		break;
	case EV_END:
		te.type = PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_END;
		break;
	case EV_INSTANT:
		te.type = PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT;
		break;
	case EV_COUNTER: {
		uint64_t uuid = counter_uuid(name, len);
		unsigned i;
		for (i = 0; i < *ncounters && counters[i] != uuid; i++)
			;
		if (i == *ncounters && *ncounters < 64) {
			counters[(*ncounters)++] = uuid;
			emit_counter_track(o, pid, name, uuid);
		}
		te.type = PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_COUNTER;
		te.track_uuid = uuid;
		te.counter_value_field_case = PERFETTO__PROTOS__TRACK_EVENT__COUNTER_VALUE_FIELD_COUNTER_VALUE;
		te.counter_value = e->value;
		break;
	}
	default:
		return;
	}
	if (e->type == EV_BEGIN || e->type == EV_INSTANT) {
		te.name_field_case = PERFETTO__PROTOS__TRACK_EVENT__NAME_FIELD_NAME;
		te.name = name;
	}
	p.has_timestamp = 1;
	p.timestamp = e->ts;
	p.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_EVENT;
	p.track_event = &te;
	p.has_trusted_packet_sequence_id = 1;
	p.trusted_packet_sequence_id = SEQ_ID(pid);
	out_packet(o, &p);
}


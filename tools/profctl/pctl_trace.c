/*
 * Perfetto trace reader for flame graphs: TrackEvent slices (begin/end
 * pairs per track, names inline or interned per packet sequence) become
 * stacks rooted at their track's name, weighted by each slice's self time
 * in nanoseconds. Kernel sched data and counters are not stacks and are
 * skipped. Caps: PCTL_MAX_DEPTH open slices per track (deeper begins are
 * counted in `truncated` and their ends ignored), TRC_MAX_TRACKS tracks,
 * TRC_MAX_NAMES interned names; past them events are dropped.
 */
#include "pctl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "perfetto_trace.pb-c.h"

#define TRC_MAX_TRACKS 4096
#define TRC_MAX_NAMES (1u << 16)

struct open_slice {
	uint32_t name;
	uint64_t begin, child;
};

struct track {
	uint64_t uuid;
	uint32_t name;            /* the root frame: thread or track name */
	struct open_slice *open;
	uint32_t depth, lost;     /* lost: begins past the depth cap still open */
};

struct iname {
	uint32_t seq;
	uint64_t iid;
	uint32_t name;
};

struct trc {
	struct pctl_profile *p;
	struct track *tracks;
	size_t ntracks;
	struct iname *names;
	size_t nnames;
	uint32_t frames[PCTL_MAX_DEPTH + 1];
};

static struct track *track_get(struct trc *t, uint64_t uuid)
{
	for (size_t i = 0; i < t->ntracks; i++)
		if (t->tracks[i].uuid == uuid)
			return &t->tracks[i];
	if (t->ntracks == TRC_MAX_TRACKS)
		return NULL;
	struct track *k = &t->tracks[t->ntracks];
	memset(k, 0, sizeof(*k));
	k->uuid = uuid;
	k->open = malloc(PCTL_MAX_DEPTH * sizeof(*k->open));
	if (!k->open)
		return NULL;
	char buf[40];
	snprintf(buf, sizeof(buf), "track %" PRIu64, uuid);
	int64_t id = pctl_intern(t->p, buf, strlen(buf));
	if (id < 0) {
		free(k->open);
		return NULL;
	}
	k->name = (uint32_t)id;
	t->ntracks++;
	return k;
}

static int64_t iname_get(struct trc *t, uint32_t seq, uint64_t iid)
{
	for (size_t i = t->nnames; i > 0; i--)
		if (t->names[i - 1].seq == seq && t->names[i - 1].iid == iid)
			return t->names[i - 1].name;
	return -1;
}

static int on_descriptor(struct trc *t, const Perfetto__Protos__TrackDescriptor *d)
{
	const char *name = d->name;
	char buf[64];
	if (!d->has_uuid)
		return 0;
	if (d->thread && d->thread->thread_name)
		name = d->thread->thread_name;
	if ((!name || !*name) && d->thread && d->thread->has_tid) {
		snprintf(buf, sizeof(buf), "thread %d", d->thread->tid);
		name = buf;
	}
	if ((!name || !*name) && d->process && d->process->process_name)
		name = d->process->process_name;
	if (!name || !*name)
		return 0;
	struct track *k = track_get(t, d->uuid);
	int64_t id = pctl_intern(t->p, name, strlen(name));
	if (!k || id < 0)
		return k ? -ENOMEM : 0;
	k->name = (uint32_t)id;
	return 0;
}

static int on_event(struct trc *t, const Perfetto__Protos__TracePacket *pk, uint64_t def_track)
{
	const Perfetto__Protos__TrackEvent *e = pk->track_event;
	uint64_t uuid = e->has_track_uuid ? e->track_uuid : def_track;
	uint64_t ts = pk->timestamp;
	struct track *k;

	if (!e->has_type || (e->type != PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_BEGIN &&
			     e->type != PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_END))
		return 0;
	if (!(k = track_get(t, uuid)))
		return 0;
	if (e->type == PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_BEGIN) {
		int64_t name = -1;
		if (e->name_field_case == PERFETTO__PROTOS__TRACK_EVENT__NAME_FIELD_NAME && e->name)
			name = pctl_intern(t->p, e->name, strlen(e->name));
		else if (e->name_field_case == PERFETTO__PROTOS__TRACK_EVENT__NAME_FIELD_NAME_IID)
			name = iname_get(t, pk->trusted_packet_sequence_id, e->name_iid);
		if (name < 0 && (name = pctl_intern(t->p, "?", 1)) < 0)
			return -ENOMEM;
		if (k->depth == PCTL_MAX_DEPTH) {
			k->lost++;
			t->p->truncated++;
			return 0;
		}
		k->open[k->depth++] = (struct open_slice){ (uint32_t)name, ts, 0 };
		return 0;
	}
	if (k->lost) {
		k->lost--;
		return 0;
	}
	if (!k->depth)
		return 0; /* an end without its begin (the ring wrapped) */
	struct open_slice *s = &k->open[--k->depth];
	uint64_t dur = ts > s->begin ? ts - s->begin : 0;
	uint64_t self = dur > s->child ? dur - s->child : 0;
	if (k->depth)
		k->open[k->depth - 1].child += dur;
	t->frames[0] = k->name;
	for (uint32_t i = 0; i <= k->depth; i++)
		t->frames[i + 1] = k->open[i].name;
	if (self > 0 && self <= INT64_MAX)
		return pctl_add_stack(t->p, t->frames, k->depth + 2, (int64_t)self);
	return 0;
}

int pctl_trace_read(const uint8_t *buf, size_t len, struct pctl_profile **out, char *err,
		    size_t errn)
{
	struct trc t = { 0 };
	Perfetto__Protos__Trace *tr = NULL;
	uint64_t *defaults = NULL;  /* per sequence: the default track uuid */
	uint32_t *def_seq = NULL;
	size_t ndef = 0;
	int r = 0;

	*out = NULL;
	if (len > PCTL_MAX_FILE) {
		snprintf(err, errn, "file over %u MiB", PCTL_MAX_FILE >> 20);
		return -EFBIG;
	}
	tr = perfetto__protos__trace__unpack(NULL, len, buf);
	if (!tr) {
		snprintf(err, errn, "not a Perfetto trace (protobuf decoding failed)");
		return -EBADMSG;
	}
	t.p = calloc(1, sizeof(*t.p));
	t.tracks = calloc(TRC_MAX_TRACKS, sizeof(*t.tracks));
	t.names = calloc(TRC_MAX_NAMES, sizeof(*t.names));
	defaults = calloc(TRC_MAX_TRACKS, sizeof(*defaults));
	def_seq = calloc(TRC_MAX_TRACKS, sizeof(*def_seq));
	if (!t.p || !t.tracks || !t.names || !defaults || !def_seq) {
		r = -ENOMEM;
		goto out;
	}
	snprintf(t.p->sample_type, sizeof(t.p->sample_type), "wall");
	snprintf(t.p->unit, sizeof(t.p->unit), "nanoseconds");
	/* Descriptors first: a track's name may come after its events. */
	for (size_t i = 0; i < tr->n_packet; i++)
		if (tr->packet[i]->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_DESCRIPTOR &&
		    (r = on_descriptor(&t, tr->packet[i]->track_descriptor)) < 0)
			goto out;
	for (size_t i = 0; i < tr->n_packet; i++) {
		const Perfetto__Protos__TracePacket *pk = tr->packet[i];
		uint32_t seq = pk->trusted_packet_sequence_id;
		uint64_t def_track = 0;
		if (pk->incremental_state_cleared ||
		    (pk->sequence_flags & PERFETTO__PROTOS__TRACE_PACKET__SEQUENCE_FLAGS__SEQ_INCREMENTAL_STATE_CLEARED)) {
			/* The sequence's interned names start over. */
			size_t k = 0;
			for (size_t j = 0; j < t.nnames; j++)
				if (t.names[j].seq != seq)
					t.names[k++] = t.names[j];
			t.nnames = k;
		}
		if (pk->trace_packet_defaults && pk->trace_packet_defaults->track_event_defaults &&
		    pk->trace_packet_defaults->track_event_defaults->has_track_uuid) {
			size_t j;
			for (j = 0; j < ndef && def_seq[j] != seq; j++)
				;
			if (j < TRC_MAX_TRACKS) {
				def_seq[j] = seq;
				defaults[j] = pk->trace_packet_defaults->track_event_defaults->track_uuid;
				if (j == ndef)
					ndef++;
			}
		}
		for (size_t j = 0; j < ndef; j++)
			if (def_seq[j] == seq)
				def_track = defaults[j];
		if (pk->interned_data) {
			const Perfetto__Protos__InternedData *in = pk->interned_data;
			for (size_t j = 0; j < in->n_event_names && t.nnames < TRC_MAX_NAMES; j++) {
				const Perfetto__Protos__EventName *en = in->event_names[j];
				if (!en->has_iid || !en->name)
					continue;
				int64_t id = pctl_intern(t.p, en->name, strlen(en->name));
				if (id < 0) {
					r = -ENOMEM;
					goto out;
				}
				t.names[t.nnames++] = (struct iname){ seq, en->iid, (uint32_t)id };
			}
		}
		if (pk->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_EVENT &&
		    (r = on_event(&t, pk, def_track)) < 0)
			goto out;
	}
	if (t.p->nstacks == 0) {
		snprintf(err, errn, "the trace holds no complete slices (prof_trace_begin/end)");
		r = -ENODATA;
		goto out;
	}
	*out = t.p;
	t.p = NULL;
out:
	if (r == -ENOMEM)
		snprintf(err, errn, "out of memory");
	for (size_t i = 0; t.tracks && i < t.ntracks; i++)
		free(t.tracks[i].open);
	free(t.tracks);
	free(t.names);
	free(defaults);
	free(def_seq);
	pctl_profile_free(t.p);
	perfetto__protos__trace__free_unpacked(tr, NULL);
	return r;
}

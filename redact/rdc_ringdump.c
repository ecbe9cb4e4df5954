/*
 * Crash ring dumps (client/trace.c trc_crash_dump, written by a dying
 * process's fatal-signal handler) to a Perfetto trace of the app's tracks.
 * The dump is untrusted: every size is checked against the header, the
 * header against the writer's layout, and the pid against the policy. Slot
 * k of a ring holds event seq - 1; events are emitted in seq order, from
 * the oldest one still in the ring. Names go through the DLP rules.
 * Memory: one ring (TRC ring_events x ev_size bytes) at a time.
 */
#include "rdc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trace_fmt.h"

#define RDC_RING_MAX_EVENTS 65536
#define RDC_RINGS_MAX 4096

static int read_full(int fd, void *buf, size_t n)
{
	uint8_t *p = buf;
	while (n) {
		ssize_t r = read(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EBADMSG;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static int cmp_seq(const void *a, const void *b)
{
	uint64_t x = atomic_load(&((const struct trc_ev *)a)->seq);
	uint64_t y = atomic_load(&((const struct trc_ev *)b)->seq);
	return x < y ? -1 : x > y;
}

int rdc_ringdump(int in_fd, int out_fd, const struct rdc_policy *p, struct rdc_stats *st)
{
	struct tfmt_dump_hdr h;
	struct rdc_stats dummy;
	struct trc_ev *ev = NULL;
	struct tfmt_out *o = NULL;
	int r;

	if (!st)
		st = &dummy;
	memset(st, 0, sizeof(*st));
	if (!p)
		return -EINVAL;
	if ((r = read_full(in_fd, &h, sizeof(h))) < 0)
		return -EBADMSG;
	st->in_bytes = sizeof(h);
	if (memcmp(h.magic, TFMT_DUMP_MAGIC, 8) || h.version != 1 ||
	    h.ev_size != sizeof(struct trc_ev) || h.ring_events == 0 ||
	    h.ring_events > RDC_RING_MAX_EVENTS || h.nrings == 0 || h.nrings > RDC_RINGS_MAX)
		return -EBADMSG;
	/* Only the app's own process may be in its crash dump. */
	if (!rdc_is_app_pid(p, (int32_t)h.pid))
		return -EBADMSG;
	ev = malloc((size_t)h.ring_events * sizeof(*ev));
	o = malloc(sizeof(*o));
	if (!ev || !o) {
		r = -ENOMEM;
		goto out;
	}
	tfmt_init(o, out_fd);
	tfmt_process(o, (pid_t)h.pid, NULL, NULL);
	for (uint32_t i = 0; i < h.nrings; i++) {
		struct tfmt_dump_ring rh;
		if (read_full(in_fd, &rh, sizeof(rh)) < 0 ||
		    read_full(in_fd, ev, (size_t)h.ring_events * sizeof(*ev)) < 0) {
			r = -EBADMSG;
			goto out;
		}
		st->in_bytes += sizeof(rh) + (uint64_t)h.ring_events * sizeof(*ev);
		/* Valid slots: seq in (head - ring_events, head] and in the right slot. */
		size_t n = 0;
		for (uint32_t k = 0; k < h.ring_events; k++) {
			uint64_t seq = atomic_load(&ev[k].seq);
			if (seq == 0 || seq > rh.head || seq + h.ring_events <= rh.head ||
			    (seq - 1) % h.ring_events != k) {
				if (seq)
					st->dropped++;
				continue;
			}
			memmove(&ev[n++], &ev[k], sizeof(*ev));
		}
		if (!n)
			continue;
		qsort(ev, n, sizeof(*ev), cmp_seq);
		char comm[17];
		memcpy(comm, rh.comm, 16);
		comm[16] = '\0';
		tfmt_thread(o, (pid_t)h.pid, rh.tid, comm);
		for (size_t k = 0; k < n; k++) {
			struct trc_ev *e = &ev[k];
			if (p->dlp && e->len) {
				char in[TRC_NAME_MAX], clean[TRC_NAME_MAX];
				int changed = 0;
				size_t len = e->len < TRC_NAME_MAX ? e->len : TRC_NAME_MAX - 1;
				memcpy(in, e->name, len);
				in[len] = '\0';
				if (rdc_dlp_scrub(p->dlp, in, clean, sizeof(clean), &changed) == 0 &&
				    changed) {
					e->len = (uint8_t)strlen(clean);
					memcpy(e->name, clean, e->len);
					st->scrubbed++;
				}
			}
			tfmt_event(o, (pid_t)h.pid, rh.tid, e);
			st->kept++;
		}
	}
	if (!st->kept) {
		r = -ENODATA;
		goto out;
	}
	r = tfmt_finish(o, &st->out_bytes);
out:
	free(ev);
	free(o);
	return r;
}

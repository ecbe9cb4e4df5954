/*
 * fuzz_seedgen: writes the synthetic seeds of the fuzz corpora with the
 * project's own encoders and layouts (corpus/README.md says which seeds
 * are synthetic and which come from real captures).
 *
 *   fuzz_seedgen pprof > corpus/pprof/synthetic.pb.gz
 *	app pid 100 and another process (pid 200), a kernel frame, a foreign
 *	pid label, an e-mail address in a comment for the DLP rules
 *   fuzz_seedgen ringdump > corpus/ringdump/two-rings
 *	a crash dump of pid 100, two rings of 8 slots, one of them wrapped
 *   fuzz_seedgen perf-ring > corpus/perf_ring/samples
 *	the fuzz_perf_ring input: tail, head - tail, then two samples (one
 *	with registers and a stack copy), a lost record and a throttle record,
 *	wrapping around the end of a 512-byte ring
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pprof.h"
#include "trace_fmt.h"
#include "util.h"

static int die(const char *what, int r)
{
	fprintf(stderr, "fuzz_seedgen: %s: %s\n", what, strerror(r < 0 ? -r : r));
	return 1;
}

static int gen_pprof(void)
{
	struct pp_builder *b;
	uint64_t map, kmap, fn[3], kfn, loc[4];
	int r;

	if ((r = pp_new(&b)) < 0)
		return die("pp_new", r);
	if ((r = pp_add_sample_type(b, "samples", "count")) < 0 ||
	    (r = pp_add_sample_type(b, "cpu", "nanoseconds")) < 0 ||
	    (r = pp_set_period(b, "cpu", "nanoseconds", 10000000)) < 0 ||
	    (r = pp_set_default_sample_type(b, "cpu")) < 0 ||
	    (r = pp_add_comment(b, "captured for someone@example.com on 10.1.2.3")) < 0 ||
	    (r = pp_add_mapping(b, 0x400000, 0x500000, 0, "/usr/bin/app", "ab12cd34", true, true,
				&map)) < 0 ||
	    (r = pp_add_mapping(b, 0xffffffff81000000ull, 0xffffffff82000000ull, 0,
				"[kernel.kallsyms]", NULL, true, false, &kmap)) < 0 ||
	    (r = pp_add_function(b, "main", NULL, "app.c", 10, &fn[0])) < 0 ||
	    (r = pp_add_function(b, "hot_function", NULL, "app.c", 40, &fn[1])) < 0 ||
	    (r = pp_add_function(b, "other_secret", NULL, "other.c", 7, &fn[2])) < 0 ||
	    (r = pp_add_function(b, "do_syscall_64", NULL, NULL, 0, &kfn)) < 0 ||
	    (r = pp_add_location(b, map, 0x401000, fn[0], 12, &loc[0])) < 0 ||
	    (r = pp_add_location(b, map, 0x402000, fn[1], 44, &loc[1])) < 0 ||
	    (r = pp_add_location(b, map, 0x403000, fn[2], 8, &loc[2])) < 0 ||
	    (r = pp_add_location(b, kmap, 0xffffffff81001000ull, kfn, 0, &loc[3])) < 0)
		return die("pprof tables", r);
	pp_set_time(b, 1700000000000000000ll, 2000000000ll);
	const uint64_t app_stack[] = { loc[3], loc[1], loc[0] }, other_stack[] = { loc[2], loc[0] };
	const int64_t v1[] = { 3, 30000000 }, v2[] = { 1, 10000000 };
	const struct pp_label app_labels[] = {
		{ .key = "pid", .num = 100 }, { .key = "thread_id", .num = 101 },
		{ .key = "thread_name", .str = "worker" }, { .key = "peer_pid", .num = 4321 },
	};
	const struct pp_label other_labels[] = {
		{ .key = "pid", .num = 200 }, { .key = "thread_id", .num = 200 },
	};
	if ((r = pp_add_sample(b, app_stack, 3, v1, 2, app_labels, 4)) < 0 ||
	    (r = pp_add_sample(b, other_stack, 2, v2, 2, other_labels, 2)) < 0 ||
	    (r = pp_write_gz(b, 1, NULL)) < 0)
		return die("pprof samples", r);
	pp_free(b);
	return 0;
}

static int gen_ringdump(void)
{
	enum { SLOTS = 8 };
	struct tfmt_dump_hdr h = { .version = 1, .pid = 100, .nrings = 2, .ring_events = SLOTS,
				   .ev_size = sizeof(struct trc_ev) };
	struct trc_ev ev[SLOTS];
	int r;

	memcpy(h.magic, TFMT_DUMP_MAGIC, 8);
	if ((r = util_write_all(1, &h, sizeof(h))) < 0)
		return die("write", r);
	/* Ring 0: 5 events, no wrap. Ring 1: 11 events, the first 3 overwritten. */
	const uint64_t heads[2] = { 5, 11 };
	for (int ring = 0; ring < 2; ring++) {
		struct tfmt_dump_ring rh = { .tid = 100 + ring, .head = heads[ring] };
		snprintf(rh.comm, sizeof(rh.comm), ring ? "render" : "main");
		memset(ev, 0, sizeof(ev));
		for (uint64_t seq = 1; seq <= heads[ring]; seq++) {
			struct trc_ev *e = &ev[(seq - 1) % SLOTS];
			static const uint8_t types[] = { EV_BEGIN, EV_INSTANT, EV_COUNTER, EV_END };
			atomic_store(&e->seq, seq);
			e->ts = 1000000 * seq;
			e->type = types[seq % 4];
			e->value = (int64_t)seq * 7;
			e->len = (uint8_t)snprintf(e->name, sizeof(e->name), seq == 2 ? "mail a@b.org"
						   : "event-%llu", (unsigned long long)seq);
		}
		if ((r = util_write_all(1, &rh, sizeof(rh))) < 0 ||
		    (r = util_write_all(1, ev, sizeof(ev))) < 0)
			return die("write", r);
	}
	return 0;
}

/* Append a record to a 512-byte ring at position pos. */
static void put(uint8_t *ring, uint64_t *pos, const void *rec, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ring[(*pos + i) % 512] = ((const uint8_t *)rec)[i];
	*pos += n;
}

static int gen_perf_ring(void)
{
	uint8_t ring[512] = { 0 }, rec[400];
	const uint64_t tail = 400; /* records wrap at 512 */
	uint64_t pos = tail;

	/* Sample 1: callchain only (kernel then user context), no regs, no stack. */
	uint64_t s1[] = { 0x0000006500000064ull, 123456789, 1000000, 5, PERF_CONTEXT_KERNEL,
			  0xffffffff81001000ull, PERF_CONTEXT_USER, 0x401234, 0x400567,
			  PERF_SAMPLE_REGS_ABI_NONE, 0 };
	struct perf_event_header h = { .type = PERF_RECORD_SAMPLE, .misc = PERF_RECORD_MISC_USER,
				       .size = (uint16_t)(sizeof(h) + sizeof(s1)) };
	memcpy(rec, &h, sizeof(h));
	memcpy(rec + sizeof(h), s1, sizeof(s1));
	put(ring, &pos, rec, h.size);

	/* Sample 2: 17 registers (ABI 64) and 32 bytes of stack, 24 of them valid. */
	uint64_t s2[5 + 2 + 17 + 1 + 4 + 1], *p = s2;
	*p++ = 0x0000006600000064ull; *p++ = 123999999; *p++ = 1000000;
	*p++ = 2; *p++ = PERF_CONTEXT_USER; *p++ = 0x401300;
	*p++ = PERF_SAMPLE_REGS_ABI_64;
	for (int i = 0; i < 17; i++)
		*p++ = i == 7 ? 0x7ffc0000 : 0x1000 + (uint64_t)i;
	*p++ = 32;
	for (int i = 0; i < 4; i++)
		*p++ = 0x401300 + (uint64_t)i;
	*p++ = 24;
	h.size = (uint16_t)(sizeof(h) + sizeof(s2));
	memcpy(rec, &h, sizeof(h));
	memcpy(rec + sizeof(h), s2, sizeof(s2));
	put(ring, &pos, rec, h.size);

	uint64_t lost[2] = { 1, 17 };
	h = (struct perf_event_header){ .type = PERF_RECORD_LOST, .size = sizeof(h) + sizeof(lost) };
	memcpy(rec, &h, sizeof(h));
	memcpy(rec + sizeof(h), lost, sizeof(lost));
	put(ring, &pos, rec, h.size);
	uint64_t thr[3] = { 1, 2, 3 };
	h = (struct perf_event_header){ .type = PERF_RECORD_THROTTLE, .size = sizeof(h) + sizeof(thr) };
	memcpy(rec, &h, sizeof(h));
	memcpy(rec + sizeof(h), thr, sizeof(thr));
	put(ring, &pos, rec, h.size);

	/* The fuzz input: tail, head - tail, then the data from position tail on. */
	uint64_t avail = pos - tail;
	uint8_t out[16 + 512];
	memcpy(out, &tail, 8);
	memcpy(out + 8, &avail, 8);
	for (size_t i = 0; i < 512; i++)
		out[16 + i] = ring[(tail + i) % 512];
	int r = util_write_all(1, out, 16 + (size_t)avail);
	return r < 0 ? die("write", r) : 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "pprof"))
		return gen_pprof();
	if (argc == 2 && !strcmp(argv[1], "ringdump"))
		return gen_ringdump();
	if (argc == 2 && !strcmp(argv[1], "perf-ring"))
		return gen_perf_ring();
	fprintf(stderr, "usage: fuzz_seedgen pprof|ringdump|perf-ring > seed\n");
	return 2;
}

/*
 * Unit tests of profilingd-perf's parts that need no perf events: record
 * parsing, ring draining across the wrap, the frame-pointer chain, the
 * aggregation and its caps.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <linux/perf_event.h>

#include "pf.h"
#include "perfetto_trace.pb-c.h"

/* A sample record as the kernel lays it out for pf_events' attributes. */
static size_t build_sample(uint8_t *buf, uint32_t tid, const uint64_t *chain, size_t nchain,
			   uint64_t sp, uint64_t ip, const uint8_t *stack, size_t nstack)
{
	uint64_t *w = (uint64_t *)(buf + sizeof(struct perf_event_header));
	size_t k = 0;
	w[k++] = 100 | ((uint64_t)tid << 32);
	w[k++] = 123456789; /* time */
	w[k++] = 10000000;  /* period */
	w[k++] = nchain;
	for (size_t i = 0; i < nchain; i++)
		w[k++] = chain[i];
	w[k++] = PERF_SAMPLE_REGS_ABI_64;
	/* perf order: ax bx cx dx si di bp sp ip r8..r15 */
	for (int i = 0; i < 17; i++)
		w[k++] = i == 7 ? sp : i == 8 ? ip : 0x1000u + (unsigned)i;
	w[k++] = nstack;
	memcpy(&w[k], stack, nstack);
	k += nstack / 8;
	w[k++] = nstack; /* dyn_size */
	struct perf_event_header h = {
		.type = PERF_RECORD_SAMPLE,
		.size = (uint16_t)(sizeof(h) + k * 8),
	};
	memcpy(buf, &h, sizeof(h));
	return h.size;
}

static void test_parse_sample(void **state)
{
	uint8_t buf[1024], stack[32];
	uint64_t chain[] = { PERF_CONTEXT_USER, 0x401000, 0x402000 };
	struct pf_sample s;

	memset(stack, 0xab, sizeof(stack));
	size_t n = build_sample(buf, 42, chain, 3, 0x7ff000, 0x401000, stack, sizeof(stack));
	assert_int_equal(pf_parse_sample(buf, n, &s), 0);
	assert_int_equal(s.tid, 42);
	assert_int_equal(s.pid, 100);
	assert_int_equal(s.period, 10000000);
	assert_int_equal(s.ncallchain, 3);
	assert_true(s.has_regs);
	assert_int_equal(s.regs[PF_DWARF_SP], 0x7ff000);
	assert_int_equal(s.regs[PF_DWARF_PC], 0x401000);
	assert_int_equal(s.regs[3], 0x1001);  /* rbx is perf's 1, DWARF's 3 */
	assert_int_equal(s.regs[1], 0x1003);  /* rdx is perf's 3, DWARF's 1 */
	assert_int_equal(s.regs[8], 0x1009);  /* r8 */
	assert_int_equal(s.stack_size, 32);
	assert_memory_equal(s.stack, stack, 32);
	/* Every truncation is refused, never read past. */
	for (size_t cut = 0; cut < n; cut += 8)
		assert_int_equal(pf_parse_sample(buf, cut, &s), -EBADMSG);
	/* A callchain count bigger than the record. */
	uint64_t big = 1ull << 60;
	memcpy(buf + 8 + 24, &big, 8);
	assert_int_equal(pf_parse_sample(buf, n, &s), -EBADMSG);
}

struct seen {
	int n;
	uint32_t tids[16];
};

static void on_sample(const struct pf_sample *s, void *arg)
{
	struct seen *x = arg;
	if (x->n < 16)
		x->tids[x->n++] = s->tid;
}

/* A ring of size bytes whose tail starts at start; records are copied in at head. */
struct fake_ring {
	struct perf_event_mmap_page meta;
	uint8_t data[512];
	struct pf_ring r;
};

static void ring_init(struct fake_ring *f, uint64_t start)
{
	memset(f, 0, sizeof(*f));
	f->r.meta = &f->meta;
	f->r.data = f->data;
	f->r.size = sizeof(f->data);
	f->meta.data_head = f->meta.data_tail = start;
}

static void ring_put(struct fake_ring *f, const uint8_t *rec, size_t n)
{
	for (size_t i = 0; i < n; i++)
		f->data[(f->meta.data_head + i) % sizeof(f->data)] = rec[i];
	f->meta.data_head += n;
}

static void test_ring_wrap(void **state)
{
	static uint8_t scratch[1 << 16];
	struct fake_ring f;
	struct pf_ring_stats st = { 0 };
	struct seen x = { 0 };
	uint8_t rec[512], stack[64] = { 0 };
	uint64_t chain[] = { PERF_CONTEXT_USER, 0x401000 };

	/* Start near the end so the second record wraps (and its header may too). */
	for (uint64_t start = 400; start < 512; start += 8) {
		ring_init(&f, start);
		memset(&st, 0, sizeof(st));
		x.n = 0;
		size_t n = build_sample(rec, 7, chain, 2, 0x1000, 0x401000, stack, 16);
		ring_put(&f, rec, n);
		struct { struct perf_event_header h; uint64_t id, lost; } lost = {
			{ PERF_RECORD_LOST, 0, sizeof(lost) }, 1, 5
		};
		ring_put(&f, (const uint8_t *)&lost, sizeof(lost));
		n = build_sample(rec, 8, chain, 2, 0x1000, 0x401000, stack, 16);
		ring_put(&f, rec, n);
		pf_ring_drain(&f.r, scratch, on_sample, &x, &st);
		assert_int_equal(x.n, 2);
		assert_int_equal(x.tids[0], 7);
		assert_int_equal(x.tids[1], 8);
		assert_int_equal(st.lost, 5);
		assert_int_equal(st.bad, 0);
		assert_int_equal(f.meta.data_tail, f.meta.data_head);
	}
}

static void test_ring_corrupt(void **state)
{
	static uint8_t scratch[1 << 16];
	struct fake_ring f;
	struct pf_ring_stats st = { 0 };
	struct seen x = { 0 };

	/* A header claiming more than is there: skipped, counted, tail at head. */
	ring_init(&f, 0);
	struct perf_event_header h = { PERF_RECORD_SAMPLE, 0, 400 };
	ring_put(&f, (const uint8_t *)&h, sizeof(h));
	pf_ring_drain(&f.r, scratch, on_sample, &x, &st);
	assert_int_equal(x.n, 0);
	assert_int_equal(st.bad, 1);
	assert_int_equal(f.meta.data_tail, f.meta.data_head);
	/* A zero-size header would loop forever if accepted. */
	h.size = 0;
	ring_put(&f, (const uint8_t *)&h, sizeof(h));
	pf_ring_drain(&f.r, scratch, on_sample, &x, &st);
	assert_int_equal(st.bad, 2);
	/* A sample whose fields overrun its size. */
	h.size = 16;
	uint64_t junk = 1;
	ring_put(&f, (const uint8_t *)&h, sizeof(h));
	ring_put(&f, (const uint8_t *)&junk, sizeof(junk));
	pf_ring_drain(&f.r, scratch, on_sample, &x, &st);
	assert_int_equal(st.bad, 3);
	assert_int_equal(x.n, 0);
	assert_int_equal(f.meta.data_tail, f.meta.data_head);
}

static void test_fp_chain(void **state)
{
	uint8_t buf[1024], stack[8] = { 0 };
	uint64_t chain[] = { PERF_CONTEXT_KERNEL, 0xffffffff81000000ull, PERF_CONTEXT_USER,
			     0x401000, 0x402000, 0x403000, 0 };
	uint64_t frames[PF_MAX_FRAMES];
	struct pf_sample s;

	size_t n = build_sample(buf, 1, chain, 7, 0x1000, 0x401000, stack, sizeof(stack));
	assert_int_equal(pf_parse_sample(buf, n, &s), 0);
	size_t k = pf_unwind_fp(&s, frames, PF_MAX_FRAMES);
	assert_int_equal(k, 3);
	assert_int_equal(frames[0], 0x401000);               /* the ip itself */
	assert_int_equal(frames[1], 0x402000 | PF_FRAME_RET); /* return addresses */
	assert_int_equal(frames[2], 0x403000 | PF_FRAME_RET);
	assert_int_equal(pf_unwind_fp(&s, frames, 2), 2);
}

/*
 * Method events' layout: PERF_SAMPLE_IDENTIFIER first. The same record
 * behind an id parses to the same fields plus the id, and no truncation
 * reads past the record.
 */
static void test_parse_sample_ident(void **state)
{
	uint8_t buf[1024], rec[1024], stack[16];
	uint64_t chain[] = { PERF_CONTEXT_USER, 0x401000 };
	struct pf_sample s;
	(void)state;

	memset(stack, 0xcd, sizeof(stack));
	size_t n = build_sample(buf, 7, chain, 2, 0x7ff000, 0x401000, stack, sizeof(stack));
	struct perf_event_header h;
	memcpy(&h, buf, sizeof(h));
	uint64_t id = 0x1234567890ull;
	memcpy(rec, buf, sizeof(h));
	memcpy(rec + sizeof(h), &id, 8);
	memcpy(rec + sizeof(h) + 8, buf + sizeof(h), n - sizeof(h));
	h.size = (uint16_t)(n + 8);
	memcpy(rec, &h, sizeof(h));
	assert_int_equal(pf_parse_sample_ident(rec, n + 8, true, &s), 0);
	assert_int_equal(s.id, id);
	assert_int_equal(s.tid, 7);
	assert_int_equal(s.regs[5], 0x1005); /* rdi: perf's 5, DWARF's 5 */
	assert_int_equal(s.regs[PF_DWARF_PC], 0x401000);
	assert_int_equal(s.stack_size, 16);
	for (size_t cut = 0; cut < n + 8; cut += 8)
		assert_int_equal(pf_parse_sample_ident(rec, cut, true, &s), -EBADMSG);
	/* Without the flag the id is read as pid/tid: the layouts differ. */
	assert_int_equal(pf_parse_sample_ident(buf, n, false, &s), 0);
	assert_int_equal(s.id, 0);
}

/* A hit's target and argument set are part of its key. */
static void test_agg_probe_args(void **state)
{
	struct pf_agg *a;
	struct pf_stack st;
	uint64_t f[] = { 1, 2, 3 };
	(void)state;

	assert_int_equal(pf_agg_new(&a), 0);
	assert_int_equal(pf_agg_add_probe(a, 5, 0, 0, PF_UNW_DWARF, f, 3, 1), 0);
	assert_int_equal(pf_agg_add_probe(a, 5, 0, 0, PF_UNW_DWARF, f, 3, 1), 0);
	assert_int_equal(pf_agg_add_probe(a, 5, 1, 0, PF_UNW_DWARF, f, 3, 1), 0);
	assert_int_equal(pf_agg_add_probe(a, 5, 1, 2, PF_UNW_DWARF, f, 3, 1), 0);
	assert_int_equal(pf_agg_add(a, 5, PF_UNW_DWARF, f, 3, 1), 0);
	assert_int_equal(pf_agg_add_probe(a, 5, PF_MAX_UPROBES, 0, PF_UNW_DWARF, f, 3, 1), -EINVAL);
	assert_int_equal(pf_agg_size(a), 4);
	pf_agg_get(a, 0, &st);
	assert_int_equal(st.probe, 0);
	assert_int_equal(st.count, 2);
	pf_agg_get(a, 2, &st);
	assert_int_equal(st.probe, 1);
	assert_int_equal(st.args, 2);
	pf_agg_get(a, 3, &st);
	assert_int_equal(st.probe, -1);
	pf_agg_free(a);

	/* Equal argument sets are one id; a new one past the cap is refused. */
	struct pf_argtab *t;
	struct pf_argset x, y;
	uint32_t id1, id2, id3;
	memset(&x, 0, sizeof(x));
	memset(&y, 0, sizeof(y));
	x.n = 1;
	x.a[0].kind = 's';
	memcpy(x.a[0].s, "hello", 6);
	x.a[0].slen = 5;
	y = x;
	y.a[0].s[0] = 'j';
	assert_int_equal(pf_argtab_new(&t), 0);
	assert_int_equal(pf_argtab_add(t, &x, &id1), 0);
	assert_int_equal(pf_argtab_add(t, &y, &id2), 0);
	assert_int_equal(pf_argtab_add(t, &x, &id3), 0);
	assert_int_equal(id1, id3);
	assert_int_not_equal(id1, id2);
	assert_string_equal(pf_argtab_get(t, id2)->a[0].s, "jello");
	assert_null(pf_argtab_get(t, 0));
	int r = 0;
	for (uint64_t i = 0; i < PF_MAX_ARGSETS + 10 && r == 0; i++) {
		y.a[0].kind = 'i';
		y.a[0].v = i + 1000;
		r = pf_argtab_add(t, &y, &id2);
	}
	assert_int_equal(r, -ENOSPC);
	assert_int_equal(pf_argtab_add(t, &x, &id3), 0); /* a known set still is */
	assert_int_equal(id3, id1);
	pf_argtab_free(t);
}

static void test_agg(void **state)
{
	struct pf_agg *a;
	struct pf_stack st;
	uint64_t f1[] = { 1, 2, 3 }, f2[] = { 1, 2, 4 };

	assert_int_equal(pf_agg_new(&a), 0);
	assert_int_equal(pf_agg_add(a, 5, PF_UNW_DWARF, f1, 3, 10), 0);
	assert_int_equal(pf_agg_add(a, 5, PF_UNW_DWARF, f1, 3, 10), 0);
	assert_int_equal(pf_agg_add(a, 5, PF_UNW_FP, f1, 3, 10), 0);
	assert_int_equal(pf_agg_add(a, 6, PF_UNW_DWARF, f1, 3, 10), 0);
	assert_int_equal(pf_agg_add(a, 5, PF_UNW_DWARF, f2, 3, 10), 0);
	assert_int_equal(pf_agg_size(a), 4);
	pf_agg_get(a, 0, &st);
	assert_int_equal(st.count, 2);
	assert_int_equal(st.cpu_ns, 20);
	assert_int_equal(st.nframes, 3);
	/* Distinct stacks stop at the cap; known ones still count. */
	uint64_t f[2] = { 0, 0 };
	int r = 0;
	for (uint64_t i = 0; i < PF_MAX_STACKS + 10 && r == 0; i++) {
		f[1] = i + 100;
		r = pf_agg_add(a, 9, PF_UNW_DWARF, f, 2, 1);
	}
	assert_int_equal(r, -ENOSPC);
	assert_int_equal(pf_agg_size(a), PF_MAX_STACKS);
	assert_int_equal(pf_agg_add(a, 5, PF_UNW_DWARF, f1, 3, 10), 0);
	pf_agg_get(a, 0, &st);
	assert_int_equal(st.count, 3);
	pf_agg_free(a);
}

/* A function of this test, whose file offset pf_elf must find. */
__attribute__((noinline, used)) int pf_elf_probe_target(int x);
__attribute__((noinline, used)) int pf_elf_probe_target(int x)
{
	return x * 7 + 1;
}

/*
 * pf_elf_symbol_offset against the loader's own word: the mapping of
 * /proc/self/exe that holds the function gives its file offset as
 * address - start + the mapping's offset.
 */
static void test_elf_offset(void **state)
{
	(void)state;
	uintptr_t addr = (uintptr_t)&pf_elf_probe_target;
	unsigned long long lo, hi, off, want = 0;
	char line[512], perm[8];
	int found = 0;
	FILE *f = fopen("/proc/self/maps", "re");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%llx-%llx %7s %llx", &lo, &hi, perm, &off) == 4 && addr >= lo &&
		    addr < hi) {
			want = addr - lo + off;
			found = 1;
		}
	fclose(f);
	assert_true(found);

	char why[256];
	uint64_t got = 0;
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(pf_elf_symbol_offset(fd, "pf_elf_probe_target", &got, why, sizeof(why)), 0);
	assert_int_equal(got, want);
	assert_int_equal(pf_elf_check_offset(fd, got, why, sizeof(why)), 0);
	/* Unknown names, prefixes of a name, and data are refused. */
	assert_int_equal(pf_elf_symbol_offset(fd, "no_such_function_here", &got, why, sizeof(why)),
			 -ENOENT);
	assert_non_null(strstr(why, "no_such_function_here"));
	assert_int_equal(pf_elf_symbol_offset(fd, "pf_elf_probe", &got, why, sizeof(why)), -ENOENT);
	assert_int_equal(pf_elf_check_offset(fd, 1ull << 40, why, sizeof(why)), -ENOENT);
	assert_int_equal(pf_elf_symbol_offset(-1, "x", &got, why, sizeof(why)), -EINVAL);
	/* The build id: hex, one per byte pair, and too small a buffer refused. */
	char id[2 * 64 + 1], small[8];
	assert_int_equal(pf_elf_build_id(fd, id, sizeof(id)), 0);
	assert_true(strlen(id) >= 2 && strlen(id) % 2 == 0);
	assert_int_equal(strspn(id, "0123456789abcdef"), strlen(id));
	assert_int_equal(pf_elf_build_id(fd, small, sizeof(small)), -ENOENT);
	close(fd);
	/* Not ELF at all. */
	fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(pf_elf_symbol_offset(fd, "main", &got, why, sizeof(why)), -ENOEXEC);
	assert_int_equal(pf_elf_build_id(fd, id, sizeof(id)), -ENOEXEC);
	close(fd);
}

/*
 * The method-event trace (pf_trace.c) writes these fields of
 * proto/perfetto_trace.proto; their numbers are upstream Perfetto's
 * (protos/perfetto/trace/...: trace_packet.proto, track_event/
 * track_event.proto, track_descriptor.proto, debug_annotation.proto,
 * interned_data.proto, clock_snapshot.proto). A renumbered field would
 * make a trace Perfetto reads as something else.
 */
static void test_trace_fields(void **state)
{
	(void)state;
	static const struct {
		const ProtobufCMessageDescriptor *d;
		const char *field;
		unsigned num;
	} pins[] = {
		{ &perfetto__protos__trace__descriptor, "packet", 1 },
		{ &perfetto__protos__trace_packet__descriptor, "timestamp", 8 },
		{ &perfetto__protos__trace_packet__descriptor, "timestamp_clock_id", 58 },
		{ &perfetto__protos__trace_packet__descriptor, "clock_snapshot", 6 },
		{ &perfetto__protos__trace_packet__descriptor, "track_event", 11 },
		{ &perfetto__protos__trace_packet__descriptor, "track_descriptor", 60 },
		{ &perfetto__protos__trace_packet__descriptor, "trusted_packet_sequence_id", 10 },
		{ &perfetto__protos__trace_packet__descriptor, "interned_data", 12 },
		{ &perfetto__protos__trace_packet__descriptor, "sequence_flags", 13 },
		{ &perfetto__protos__track_event__descriptor, "type", 9 },
		{ &perfetto__protos__track_event__descriptor, "name_iid", 10 },
		{ &perfetto__protos__track_event__descriptor, "name", 23 },
		{ &perfetto__protos__track_event__descriptor, "track_uuid", 11 },
		{ &perfetto__protos__track_event__descriptor, "debug_annotations", 4 },
		{ &perfetto__protos__debug_annotation__descriptor, "name_iid", 1 },
		{ &perfetto__protos__debug_annotation__descriptor, "string_value_iid", 17 },
		{ &perfetto__protos__interned_data__descriptor, "event_names", 2 },
		{ &perfetto__protos__interned_data__descriptor, "debug_annotation_names", 3 },
		{ &perfetto__protos__interned_data__descriptor, "debug_annotation_string_values", 29 },
		{ &perfetto__protos__event_name__descriptor, "iid", 1 },
		{ &perfetto__protos__event_name__descriptor, "name", 2 },
		{ &perfetto__protos__interned_string__descriptor, "iid", 1 },
		{ &perfetto__protos__interned_string__descriptor, "str", 2 },
		{ &perfetto__protos__debug_annotation_name__descriptor, "iid", 1 },
		{ &perfetto__protos__debug_annotation_name__descriptor, "name", 2 },
		{ &perfetto__protos__track_descriptor__descriptor, "uuid", 1 },
		{ &perfetto__protos__track_descriptor__descriptor, "parent_uuid", 5 },
		{ &perfetto__protos__track_descriptor__descriptor, "process", 3 },
		{ &perfetto__protos__track_descriptor__descriptor, "thread", 4 },
		{ &perfetto__protos__process_descriptor__descriptor, "pid", 1 },
		{ &perfetto__protos__process_descriptor__descriptor, "process_name", 6 },
		{ &perfetto__protos__thread_descriptor__descriptor, "pid", 1 },
		{ &perfetto__protos__thread_descriptor__descriptor, "tid", 2 },
		{ &perfetto__protos__thread_descriptor__descriptor, "thread_name", 5 },
		{ &perfetto__protos__clock_snapshot__descriptor, "clocks", 1 },
		{ &perfetto__protos__clock_snapshot__clock__descriptor, "clock_id", 1 },
		{ &perfetto__protos__clock_snapshot__clock__descriptor, "timestamp", 2 },
	};
	for (size_t i = 0; i < sizeof(pins) / sizeof(pins[0]); i++) {
		const ProtobufCFieldDescriptor *f =
			protobuf_c_message_descriptor_get_field_by_name(pins[i].d, pins[i].field);
		if (!f || f->id != pins[i].num)
			fail_msg("%s.%s: %u, upstream %u", pins[i].d->name, pins[i].field,
				 f ? f->id : 0, pins[i].num);
	}
	/* TrackEvent.Type TYPE_INSTANT, TracePacket.SequenceFlags, BuiltinClock */
	assert_int_equal(PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT, 3);
	assert_int_equal(PERFETTO__PROTOS__TRACE_PACKET__SEQUENCE_FLAGS__SEQ_INCREMENTAL_STATE_CLEARED, 1);
	assert_int_equal(PERFETTO__PROTOS__TRACE_PACKET__SEQUENCE_FLAGS__SEQ_NEEDS_INCREMENTAL_STATE, 2);
	assert_int_equal(PERFETTO__PROTOS__BUILTIN_CLOCK__BUILTIN_CLOCK_MONOTONIC, 3);
	assert_int_equal(PERFETTO__PROTOS__BUILTIN_CLOCK__BUILTIN_CLOCK_BOOTTIME, 6);
}

/* pf_hits: bounded at PF_MAX_SAMPLES, the rest counted as dropped. */
static void test_hits_cap(void **state)
{
	(void)state;
	struct pf_hits h = { 0 };
	for (size_t i = 0; i < PF_MAX_SAMPLES; i++)
		assert_int_equal(pf_hits_add(&h, i, 7, i % 3), 0);
	assert_int_equal(pf_hits_add(&h, 1, 7, 0), -ENOSPC);
	assert_int_equal(pf_hits_add(&h, 2, 7, 0), -ENOSPC);
	assert_int_equal(h.n, PF_MAX_SAMPLES);
	assert_int_equal(h.dropped, 2);
	assert_int_equal(h.v[5].stack, 2);
	assert_int_equal(h.v[5].ts, 5);
	pf_hits_free(&h);
	assert_null(h.v);
	pf_hits_free(NULL);
	assert_int_equal(pf_hits_add(NULL, 0, 0, 0), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_sample),
		cmocka_unit_test(test_ring_wrap),
		cmocka_unit_test(test_ring_corrupt),
		cmocka_unit_test(test_fp_chain),
		cmocka_unit_test(test_agg),
		cmocka_unit_test(test_parse_sample_ident),
		cmocka_unit_test(test_agg_probe_args),
		cmocka_unit_test(test_elf_offset),
		cmocka_unit_test(test_trace_fields),
		cmocka_unit_test(test_hits_cap),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* profctl's readers and views: pprof (plain, gzip'd, inlined frames, the
 * default sample type, bad ids, caps), Perfetto slices, top, collapsed, the
 * SVG flame graph; and the daemon's control-packet decoder. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "control.pb-c.h"
#include "pctl.h"
#include "perfetto_trace.pb-c.h"
#include "pprof.h"
#include "profile.pb-c.h"
#include "svc_ctl.h"

/* main -> a -> leaf x30, main -> b x10 (cpu ns = 1e6 per sample). */
static void build(uint8_t **buf, size_t *len, bool gz)
{
	struct pp_builder *b;
	uint64_t m, fmain, fa, fb, fleaf, lmain, la, lb, lleaf;
	assert_int_equal(pp_new(&b), 0);
	assert_int_equal(pp_add_sample_type(b, "samples", "count"), 0);
	assert_int_equal(pp_add_sample_type(b, "cpu", "nanoseconds"), 0);
	assert_int_equal(pp_add_sample_type(b, "alloc", "bytes"), 0);
	assert_int_equal(pp_set_default_sample_type(b, "cpu"), 0);
	assert_int_equal(pp_add_mapping(b, 0x1000, 0x9000, 0, "/bin/app", NULL, true, true, &m), 0);
	assert_int_equal(pp_add_function(b, "main", NULL, "app.c", 1, &fmain), 0);
	assert_int_equal(pp_add_function(b, "a", NULL, "app.c", 2, &fa), 0);
	assert_int_equal(pp_add_function(b, "b", NULL, "app.c", 3, &fb), 0);
	assert_int_equal(pp_add_function(b, "le<af>&", NULL, "app.c", 4, &fleaf), 0);
	assert_int_equal(pp_add_location(b, m, 0x1100, fmain, 1, &lmain), 0);
	assert_int_equal(pp_add_location(b, m, 0x1200, fa, 2, &la), 0);
	assert_int_equal(pp_add_location(b, m, 0x1300, fb, 3, &lb), 0);
	assert_int_equal(pp_add_location(b, m, 0x1400, fleaf, 4, &lleaf), 0);
	uint64_t s1[] = { lleaf, la, lmain }, s2[] = { lb, lmain };
	int64_t v1[] = { 30, 30000000, 7 }, v2[] = { 10, 10000000, 9 };
	assert_int_equal(pp_add_sample(b, s1, 3, v1, 3, NULL, 0), 0);
	assert_int_equal(pp_add_sample(b, s2, 2, v2, 3, NULL, 0), 0);
	if (gz) {
		int fd = memfd_create("pp", 0);
		uint64_t w;
		assert_true(fd >= 0);
		assert_int_equal(pp_write_gz(b, fd, &w), 0);
		lseek(fd, 0, SEEK_SET);
		assert_int_equal(pctl_read_fd(fd, buf, len), 0);
		assert_int_equal(*len, w);
		close(fd);
	} else {
		assert_int_equal(pp_serialize(b, buf, len), 0);
	}
	pp_free(b);
}

static char *collapsed(const struct pctl_profile *p)
{
	char *s = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&s, &n);
	assert_non_null(f);
	assert_int_equal(pctl_collapsed(p, f), 0);
	fclose(f);
	return s;
}

static void test_pprof_views(void **state)
{
	for (int gz = 0; gz < 2; gz++) {
		uint8_t *buf;
		size_t len;
		char err[128];
		struct pctl_profile *p;
		build(&buf, &len, gz);
		assert_int_equal(pctl_pprof_read(buf, len, &p, err, sizeof(err)), 0);
		free(buf);
		assert_string_equal(p->sample_type, "cpu");
		assert_string_equal(p->unit, "nanoseconds");
		assert_int_equal(p->total, 40000000);

		struct pctl_top_row *rows;
		size_t n;
		assert_int_equal(pctl_top(p, &rows, &n), 0);
		assert_int_equal(n, 4);
		assert_string_equal(p->names[rows[0].name], "le<af>&");
		assert_int_equal(rows[0].flat, 30000000);
		assert_int_equal(rows[0].cum, 30000000);
		assert_string_equal(p->names[rows[1].name], "b");
		assert_int_equal(rows[1].flat, 10000000);
		/* main and a have no flat; main's cum is everything. */
		assert_string_equal(p->names[rows[2].name], "main");
		assert_int_equal(rows[2].cum, 40000000);
		assert_int_equal(rows[3].cum, 30000000);
		free(rows);

		char *c = collapsed(p);
		assert_string_equal(c, "main;a;le<af>& 30000000\nmain;b 10000000\n");
		free(c);

		char *svg = NULL;
		size_t sl = 0, frames = 0;
		FILE *f = open_memstream(&svg, &sl);
		assert_int_equal(pctl_flame_svg(p, "t<1>", f, &frames), 0);
		fclose(f);
		assert_int_equal(frames, 5); /* all, main, a, b, leaf */
		assert_non_null(strstr(svg, "data-n=\"le&lt;af&gt;&amp;\""));
		assert_non_null(strstr(svg, ">t&lt;1&gt;</text>"));
		assert_null(strstr(svg, "le<af>"));
		/* The root spans 1180 px; a (30 of 40) 885 px. */
		assert_non_null(strstr(svg, "width=\"1180.000\""));
		assert_non_null(strstr(svg, "width=\"885.000\""));
		free(svg);
		pctl_profile_free(p);
	}
}

/* Hand-built: a location with an inlined frame, and the last sample type by default. */
static void test_pprof_inline_and_default(void **state)
{
	Perftools__Profiles__Profile pr = PERFTOOLS__PROFILES__PROFILE__INIT;
	Perftools__Profiles__ValueType vt[2] = { PERFTOOLS__PROFILES__VALUE_TYPE__INIT,
						  PERFTOOLS__PROFILES__VALUE_TYPE__INIT };
	Perftools__Profiles__ValueType *vts[2] = { &vt[0], &vt[1] };
	Perftools__Profiles__Function fn[2] = { PERFTOOLS__PROFILES__FUNCTION__INIT,
						PERFTOOLS__PROFILES__FUNCTION__INIT };
	Perftools__Profiles__Function *fns[2] = { &fn[0], &fn[1] };
	Perftools__Profiles__Line ln[2] = { PERFTOOLS__PROFILES__LINE__INIT,
					    PERFTOOLS__PROFILES__LINE__INIT };
	Perftools__Profiles__Line *lns[2] = { &ln[0], &ln[1] };
	Perftools__Profiles__Location loc = PERFTOOLS__PROFILES__LOCATION__INIT, loc2 = loc;
	Perftools__Profiles__Location *locs[2] = { &loc, &loc2 };
	Perftools__Profiles__Sample s = PERFTOOLS__PROFILES__SAMPLE__INIT;
	Perftools__Profiles__Sample *ss[1] = { &s };
	char *strs[] = { "", "inl", "outer", "count", "n", "bytes", "b" };
	uint64_t lids[] = { 7, 9 };
	int64_t vals[] = { 1, 4096 };
	uint8_t buf[512];
	char err[128];
	struct pctl_profile *p;

	vt[0].type = 4; vt[0].unit = 3;
	vt[1].type = 6; vt[1].unit = 5;
	fn[0].id = 100; fn[0].name = 1;
	fn[1].id = 200; fn[1].name = 2;
	ln[0].function_id = 100; /* innermost first */
	ln[1].function_id = 200;
	loc.id = 7; loc.n_line = 2; loc.line = lns;
	loc2.id = 9; loc2.address = 0xabc; /* no line: shown as its address */
	s.n_location_id = 2; s.location_id = lids;
	s.n_value = 2; s.value = vals;
	pr.n_sample_type = 2; pr.sample_type = vts;
	pr.n_function = 2; pr.function = fns;
	pr.n_location = 2; pr.location = locs;
	pr.n_sample = 1; pr.sample = ss;
	pr.n_string_table = 7; pr.string_table = strs;
	size_t len = perftools__profiles__profile__pack(&pr, buf);
	assert_int_equal(pctl_pprof_read(buf, len, &p, err, sizeof(err)), 0);
	assert_string_equal(p->unit, "bytes");
	char *c = collapsed(p);
	assert_string_equal(c, "0xabc;outer;inl 4096\n");
	free(c);
	pctl_profile_free(p);

	/* A sample naming a location that does not exist. */
	lids[1] = 10;
	len = perftools__profiles__profile__pack(&pr, buf);
	assert_int_equal(pctl_pprof_read(buf, len, &p, err, sizeof(err)), -EBADMSG);
	assert_null(p);
	assert_non_null(strstr(err, "location 10"));
}

static void test_pprof_bad_input(void **state)
{
	static const uint8_t junk[] = { 0xff, 0xff, 0xff, 0x01, 0x02 };
	static const uint8_t badgz[] = { 0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03,
					 0xde, 0xad };
	struct pctl_profile *p;
	char err[128];
	assert_int_equal(pctl_pprof_read(junk, sizeof(junk), &p, err, sizeof(err)), -EBADMSG);
	assert_int_equal(pctl_pprof_read(badgz, sizeof(badgz), &p, err, sizeof(err)), -EBADMSG);
	assert_string_equal(err, "corrupt gzip data");
	/* Empty: a valid empty message without sample types. */
	assert_int_equal(pctl_pprof_read(junk, 0, &p, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "no sample types"));
}

static void test_depth_cap(void **state)
{
	struct pp_builder *b;
	uint64_t m, f, l[PCTL_MAX_DEPTH + 8];
	char name[16];
	uint8_t *buf;
	size_t len;
	char err[128];
	struct pctl_profile *p;
	assert_int_equal(pp_new(&b), 0);
	assert_int_equal(pp_add_sample_type(b, "samples", "count"), 0);
	assert_int_equal(pp_add_mapping(b, 0, 0x100000, 0, "x", NULL, true, true, &m), 0);
	for (int i = 0; i < PCTL_MAX_DEPTH + 8; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		assert_int_equal(pp_add_function(b, name, NULL, "x.c", 0, &f), 0);
		assert_int_equal(pp_add_location(b, m, 0x10 + (uint64_t)i, f, 0, &l[i]), 0);
	}
	int64_t v = 1;
	assert_int_equal(pp_add_sample(b, l, PCTL_MAX_DEPTH + 8, &v, 1, NULL, 0), 0);
	assert_int_equal(pp_serialize(b, &buf, &len), 0);
	pp_free(b);
	assert_int_equal(pctl_pprof_read(buf, len, &p, err, sizeof(err)), 0);
	free(buf);
	assert_int_equal(p->truncated, 1);
	assert_int_equal(p->stacks[0].n, PCTL_MAX_DEPTH);
	/* The leaf-most frames are kept: f0 is the leaf, the last frame. */
	assert_string_equal(p->names[p->frames[p->stacks[0].off + PCTL_MAX_DEPTH - 1]], "f0");
	pctl_profile_free(p);
}

/* Slices on one track: outer [0, 100) holding inner [10, 40); names interned. */
static void test_trace_slices(void **state)
{
	Perfetto__Protos__Trace tr = PERFETTO__PROTOS__TRACE__INIT;
	Perfetto__Protos__TracePacket pk[5];
	Perfetto__Protos__TracePacket *pks[5];
	Perfetto__Protos__TrackEvent ev[4];
	Perfetto__Protos__TrackDescriptor td = PERFETTO__PROTOS__TRACK_DESCRIPTOR__INIT;
	Perfetto__Protos__ThreadDescriptor th = PERFETTO__PROTOS__THREAD_DESCRIPTOR__INIT;
	Perfetto__Protos__InternedData in = PERFETTO__PROTOS__INTERNED_DATA__INIT;
	Perfetto__Protos__EventName en = PERFETTO__PROTOS__EVENT_NAME__INIT;
	Perfetto__Protos__EventName *ens[1] = { &en };
	uint64_t ts[4] = { 1000, 1010, 1040, 1100 };
	uint8_t buf[1024];
	char err[128];
	struct pctl_profile *p;

	th.thread_name = "worker";
	td.has_uuid = 1;
	td.uuid = 42;
	td.thread = &th;
	en.has_iid = 1;
	en.iid = 5;
	en.name = "inner";
	in.n_event_names = 1;
	in.event_names = ens;
	for (int i = 0; i < 5; i++) {
		perfetto__protos__trace_packet__init(&pk[i]);
		pks[i] = &pk[i];
	}
	pk[0].data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_DESCRIPTOR;
	pk[0].track_descriptor = &td;
	for (int i = 0; i < 4; i++) {
		perfetto__protos__track_event__init(&ev[i]);
		ev[i].has_type = 1;
		ev[i].type = i == 0 || i == 1 ? PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_BEGIN
					      : PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_END;
		ev[i].has_track_uuid = 1;
		ev[i].track_uuid = 42;
		pk[i + 1].data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_EVENT;
		pk[i + 1].track_event = &ev[i];
		pk[i + 1].has_timestamp = 1;
		pk[i + 1].timestamp = ts[i];
		pk[i + 1].has_trusted_packet_sequence_id = 1;
		pk[i + 1].trusted_packet_sequence_id = 3;
	}
	ev[0].name_field_case = PERFETTO__PROTOS__TRACK_EVENT__NAME_FIELD_NAME;
	ev[0].name = "outer";
	ev[1].name_field_case = PERFETTO__PROTOS__TRACK_EVENT__NAME_FIELD_NAME_IID;
	ev[1].name_iid = 5;
	pk[2].interned_data = &in;
	tr.n_packet = 5;
	tr.packet = pks;
	size_t len = perfetto__protos__trace__pack(&tr, buf);
	assert_int_equal(pctl_trace_read(buf, len, &p, err, sizeof(err)), 0);
	char *c = collapsed(p);
	assert_string_equal(c, "worker;outer 70\nworker;outer;inner 30\n");
	free(c);
	assert_int_equal(p->total, 100);
	pctl_profile_free(p);

	/* No slices at all: an error that says so, not an empty graph. */
	tr.n_packet = 1;
	len = perfetto__protos__trace__pack(&tr, buf);
	assert_int_equal(pctl_trace_read(buf, len, &p, err, sizeof(err)), -ENODATA);
}

static void test_xml_sanitising(void **state)
{
	struct pctl_profile *p = calloc(1, sizeof(*p));
	uint32_t fr[2];
	char *svg = NULL;
	size_t sl = 0;
	assert_non_null(p);
	fr[0] = (uint32_t)pctl_intern(p, "ok\xff\x01\xc3\xa9", 6); /* bad byte, control, é */
	fr[1] = (uint32_t)pctl_intern(p, "x;y", 3);
	assert_int_equal(pctl_add_stack(p, fr, 2, 5), 0);
	FILE *f = open_memstream(&svg, &sl);
	assert_int_equal(pctl_flame_svg(p, NULL, f, NULL), 0);
	fclose(f);
	assert_non_null(strstr(svg, "data-n=\"ok??\xc3\xa9\""));
	free(svg);
	char *c = collapsed(p);
	assert_string_equal(c, "ok\xff\x01\xc3\xa9;x:y 5\n"); /* ';' in a name is not a separator */
	free(c);
	pctl_profile_free(p);
}

static void test_ctl_decode(void **state)
{
	Pdctl__CtlRequest rq = PDCTL__CTL_REQUEST__INIT;
	Pdctl__Capture cp = PDCTL__CAPTURE__INIT;
	uint8_t buf[CTL_MAX_REQ + 64];
	char tag[80];
	const char *why;

	memset(tag, 'x', sizeof(tag) - 1);
	tag[sizeof(tag) - 1] = '\0';
	rq.version = 1;
	rq.cmd_case = PDCTL__CTL_REQUEST__CMD_REQUEST;
	rq.request = &cp;
	cp.pid = 1;
	cp.type = 3;
	cp.tag = tag;
	size_t len = pdctl__ctl_request__pack(&rq, buf);
	assert_null(svc_ctl_decode(buf, len, &why));
	assert_string_equal(why, "tag too long");
	cp.tag = "ok";
	len = pdctl__ctl_request__pack(&rq, buf);
	struct Pdctl__CtlRequest *m = svc_ctl_decode(buf, len, &why);
	assert_non_null(m);
	pdctl__ctl_request__free_unpacked(m, NULL);
	assert_null(svc_ctl_decode(buf, CTL_MAX_REQ + 1, &why));
	assert_string_equal(why, "message over the size cap");
	/* No command. */
	rq.cmd_case = PDCTL__CTL_REQUEST__CMD__NOT_SET;
	len = pdctl__ctl_request__pack(&rq, buf);
	assert_null(svc_ctl_decode(buf, len, &why));
	assert_string_equal(why, "no command set");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pprof_views),
		cmocka_unit_test(test_pprof_inline_and_default),
		cmocka_unit_test(test_pprof_bad_input),
		cmocka_unit_test(test_depth_cap),
		cmocka_unit_test(test_trace_slices),
		cmocka_unit_test(test_xml_sanitising),
		cmocka_unit_test(test_ctl_decode),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

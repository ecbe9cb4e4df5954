/* svc_sink: a pipe drained into a file with a cap (svc_sink.h). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "svc_sink.h"

struct fix {
	struct event_base *base;
	int p[2];
	int out;
	struct svc_sink *s;
	int ended, status;
};

static void cb(void *ud, int status)
{
	struct fix *f = ud;
	f->ended++;
	f->status = status;
}

static struct fix *start(uint64_t cap)
{
	static struct fix f;
	memset(&f, 0, sizeof(f));
	f.base = event_base_new();
	assert_non_null(f.base);
	assert_int_equal(pipe2(f.p, O_CLOEXEC), 0);
	f.out = memfd_create("test_sink", MFD_CLOEXEC);
	assert_true(f.out >= 0);
	assert_int_equal(svc_sink_start(f.base, f.p[0], f.out, cap, cb, &f, &f.s), 0);
	return &f;
}

static void finish(struct fix *f)
{
	svc_sink_free(f->s);
	if (f->p[1] >= 0)
		close(f->p[1]);
	close(f->out);
	event_base_free(f->base);
}

static void put(struct fix *f, size_t n)
{
	char buf[4096];
	memset(buf, 'x', sizeof(buf));
	while (n) {
		size_t k = n < sizeof(buf) ? n : sizeof(buf);
		assert_int_equal(write(f->p[1], buf, k), (ssize_t)k);
		n -= k;
	}
}

/* Run the loop until the sink ends, or nothing is left to read. */
static void run(struct fix *f)
{
	for (int i = 0; i < 1000 && !f->ended; i++)
		if (event_base_loop(f->base, EVLOOP_ONCE | EVLOOP_NONBLOCK) < 0)
			break;
}

static off_t out_size(const struct fix *f)
{
	struct stat st;
	assert_int_equal(fstat(f->out, &st), 0);
	return st.st_size;
}

static void t_eof(void **state)
{
	struct fix *f = start(1 << 20);
	put(f, 3000);
	close(f->p[1]);
	f->p[1] = -1;
	run(f);
	assert_int_equal(f->ended, 1);
	assert_int_equal(f->status, 0);
	assert_int_equal(svc_sink_bytes(f->s), 3000);
	assert_int_equal(out_size(f), 3000);
	assert_true(svc_sink_ended(f->s));
	finish(f);
}

/* Past the cap: nothing beyond it is written, and the sink says so. */
static void t_cap(void **state)
{
	struct fix *f = start(1000);
	put(f, 5000);
	run(f);
	assert_int_equal(f->ended, 1);
	assert_int_equal(f->status, -EFBIG);
	assert_int_equal(svc_sink_bytes(f->s), 1000);
	assert_int_equal(out_size(f), 1000);
	finish(f);
}

/* Exactly the cap is fine. */
static void t_cap_exact(void **state)
{
	struct fix *f = start(1000);
	put(f, 1000);
	close(f->p[1]);
	f->p[1] = -1;
	run(f);
	assert_int_equal(f->status, 0);
	assert_int_equal(out_size(f), 1000);
	finish(f);
}

/* The declared count ends it without EOF (the writer keeps its end). */
static void t_expect(void **state)
{
	struct fix *f = start(1 << 20);
	put(f, 300);
	run(f);
	assert_int_equal(f->ended, 0);
	assert_int_equal(svc_sink_bytes(f->s), 300);
	assert_int_equal(svc_sink_expect(f->s, 300), 1);
	assert_true(svc_sink_ended(f->s));
	finish(f);

	f = start(1 << 20);
	assert_int_equal(svc_sink_expect(f->s, 500), 0);
	put(f, 500);
	run(f);
	assert_int_equal(f->ended, 1);
	assert_int_equal(f->status, 0);
	assert_int_equal(out_size(f), 500);
	finish(f);
}

/* More than declared: -EPROTO, at once or when it arrives. */
static void t_expect_over(void **state)
{
	struct fix *f = start(1 << 20);
	put(f, 300);
	run(f);
	assert_int_equal(svc_sink_expect(f->s, 200), -EPROTO);
	finish(f);

	f = start(1 << 20);
	put(f, 100);
	run(f);
	assert_int_equal(svc_sink_expect(f->s, 150), 0);
	put(f, 100);
	run(f);
	assert_int_equal(f->ended, 1);
	assert_int_equal(f->status, -EPROTO);
	assert_int_equal(out_size(f), 150);
	finish(f);
}

/* A failing write ends it with the errno. */
static void t_write_error(void **state)
{
	struct fix *f = start(1 << 20);
	int was = f->out;
	close(f->out);
	/* The sink writes to the fd number it was given: now read-only (the
	 * lowest free number is the one just closed). */
	f->out = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_int_equal(f->out, was);
	put(f, 10);
	run(f);
	assert_int_equal(f->ended, 1);
	assert_int_equal(f->status, -EBADF);
	finish(f);
}

static void t_null(void **state)
{
	struct svc_sink *s = (struct svc_sink *)1;
	assert_int_equal(svc_sink_start(NULL, 0, 1, 1, cb, NULL, &s), -EINVAL);
	assert_null(s);
	svc_sink_free(NULL);
	assert_int_equal(svc_sink_bytes(NULL), 0);
	assert_int_equal(svc_sink_expect(NULL, 1), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_eof),
		cmocka_unit_test(t_cap),
		cmocka_unit_test(t_cap_exact),
		cmocka_unit_test(t_expect),
		cmocka_unit_test(t_expect_over),
		cmocka_unit_test(t_write_error),
		cmocka_unit_test(t_null),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

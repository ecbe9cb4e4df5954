/* client/trace.c: the flight recorder's two fill policies (issue #21).
 * Ring keeps each thread's newest TRC_RING_EVENTS and counts the older
 * ones as dropped; a discard window keeps each thread's first
 * TRC_RING_EVENTS of the window, none from before it, and counts the rest
 * as discarded. A snapshot whose copy the writer laps keeps no gap. Real
 * threads, a real snapshot written to /dev/null. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "profiling/profiling.h"
#include "trace.h"

static void snap(struct trc_stats *st)
{
	int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	uint64_t bytes = 0;
	assert_true(fd >= 0);
	assert_int_equal(trc_snapshot(fd, st, &bytes), 0);
	assert_true(bytes > 0);
	close(fd);
}

static void put_n(int n)
{
	for (int i = 0; i < n; i++)
		prof_trace_instant("e");
}

static pthread_barrier_t go, done;

static void *other_thread(void *arg)
{
	put_n((int)(long)arg);
	/* Stays alive to the end: a live thread's ring is the case here. */
	pthread_barrier_wait(&go);
	pthread_barrier_wait(&done);
	return NULL;
}

static void test_ring_and_discard(void **state)
{
	struct trc_stats st;
	pthread_t th;
	(void)state;

	/* A second thread writes 50 events, all before the window. */
	pthread_barrier_init(&go, NULL, 2);
	pthread_barrier_init(&done, NULL, 2);
	assert_int_equal(pthread_create(&th, NULL, other_thread, (void *)50L), 0);
	pthread_barrier_wait(&go);

	put_n(100);
	snap(&st);
	assert_int_equal(st.events, 150);
	assert_int_equal(st.dropped, 0);
	assert_int_equal(st.discarded, 0);
	assert_int_equal(st.threads, 2);

	/* Discard: this thread's window is [100, 5100): the first 4096 are
	 * kept, 904 discarded; the other thread wrote nothing in it. */
	trc_discard_begin();
	put_n(5000);
	snap(&st);
	assert_int_equal(st.events, TRC_RING_EVENTS);
	assert_int_equal(st.discarded, 5000 - TRC_RING_EVENTS);
	assert_int_equal(st.dropped, 0);
	assert_int_equal(st.threads, 1);
	trc_discard_end();

	/* Ring again: the discarded events were never written, so the head
	 * is 100 + 4096 and 10 more make 4206 written: the ring holds the
	 * newest 4096, and the 110 before them count as dropped. */
	put_n(10);
	snap(&st);
	assert_int_equal(st.discarded, 0);
	assert_int_equal(st.events, TRC_RING_EVENTS + 50);
	assert_int_equal(st.dropped, 100 + 10);
	assert_int_equal(st.threads, 2);

	/* A second window starts afresh: nothing carried over. */
	trc_discard_begin();
	put_n(7);
	snap(&st);
	assert_int_equal(st.events, 7);
	assert_int_equal(st.discarded, 0);
	trc_discard_end();

	pthread_barrier_wait(&done);
	pthread_join(th, NULL);
	pthread_barrier_destroy(&go);
	pthread_barrier_destroy(&done);
}

/* The copy hook (TRC_TEST_COPY_HOOK): at this thread's ring's copy of
 * event lap_at, this thread writes lap_by events, as its writer would had
 * the snapshot been preempted there; laps times in all. */
static int64_t lap_at, lap_by;
static int laps;

void test_trace_copy_hook(int32_t tid, uint64_t i);
void test_trace_copy_hook(int32_t tid, uint64_t i)
{
	if (!laps || tid != (int32_t)syscall(SYS_gettid) || i != (uint64_t)lap_at)
		return;
	laps--;
	put_n((int)lap_by);
}

static void test_lapped_copy_has_no_gap(void **state)
{
	struct trc_stats st;
	(void)state;

	put_n(2 * TRC_RING_EVENTS);
	snap(&st);
	/* Other rings (the first test's threads) are left as they were. */
	uint64_t others = st.events - TRC_RING_EVENTS;
	uint64_t dropped0 = st.dropped;

	/* At the copy's event 2000, 2300 new events overwrite the ring's
	 * oldest 2300 slots: 2000 already copied, 300 not yet, so the copy
	 * is lapped. Once: the second try, from the new head, is whole. */
	lap_at = 2000;
	lap_by = 2300;
	laps = 1;
	snap(&st);
	assert_int_equal(laps, 0);
	assert_int_equal(st.events - others, TRC_RING_EVENTS);
	assert_int_equal(st.dropped, dropped0 + 2300);

	/* Lapped on every try: the last try's 300 not copied are a hole
	 * between its first 2000 and its last 1796, so only the last 1796
	 * stay (keeping 3796 with a hole was the bug). The head moved 3 x
	 * 2300 on; all but the kept 1796 count as dropped. */
	laps = 3;
	snap(&st);
	assert_int_equal(laps, 0);
	assert_int_equal(st.events - others, TRC_RING_EVENTS - 2300);
	assert_int_equal(st.dropped, dropped0 + 2300 + 2 * 2300 + 2300);

	/* Not lapped, the ring holds its newest 4096 whole again. */
	snap(&st);
	assert_int_equal(st.events - others, TRC_RING_EVENTS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ring_and_discard),
		cmocka_unit_test(test_lapped_copy_has_no_gap),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

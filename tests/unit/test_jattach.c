/* Unit tests of profilingd-jattach's parsers (runtime/jvm/ja_parse.c) and
 * of the thread records it appends to a heap dump (ja_hprof.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "ja.h"

static void test_reply(void **state)
{
	int st, rc;
	const char *body;
	size_t blen;
	const char r1[] = "0\nreturn code: 0\n";
	assert_int_equal(ja_parse_reply(r1, sizeof(r1) - 1, &st, &body, &blen), 0);
	assert_int_equal(st, 0);
	assert_int_equal(ja_parse_load_rc(body, blen, &rc), 0);
	assert_int_equal(rc, 0);
	const char r2[] = "0\n102\n"; /* JDK 8: the bare code */
	assert_int_equal(ja_parse_reply(r2, sizeof(r2) - 1, &st, &body, &blen), 0);
	assert_int_equal(ja_parse_load_rc(body, blen, &rc), 0);
	assert_int_equal(rc, 102);
	const char r3[] = "101\nNo such command";
	assert_int_equal(ja_parse_reply(r3, sizeof(r3) - 1, &st, &body, &blen), 0);
	assert_int_equal(st, 101);
	assert_int_equal(ja_parse_load_rc(body, blen, &rc), -EBADMSG);
	assert_int_equal(ja_parse_reply("x\n", 2, &st, &body, &blen), -EBADMSG);
	assert_int_equal(ja_parse_reply("", 0, &st, &body, &blen), -EBADMSG);
	assert_int_equal(ja_parse_reply("12x", 3, &st, &body, &blen), -EBADMSG);
	(void)state;
}

static const char dump17[] =
	"Full thread dump OpenJDK 64-Bit Server VM (17.0.15+6 mixed mode):\n\n"
	"\"main\" #1 prio=5 os_prio=0 cpu=1ms tid=0x7f nid=0x1234 waiting on condition  [0x0]\n"
	"   java.lang.Thread.State: TIMED_WAITING (sleeping)\n"
	"\tat java.lang.Thread.sleep(java.base@17.0.15/Native Method)\n"
	"\tat Leak.sleepHere(Leak.java:46)\n"
	"\t- locked <0x8a> (a java.lang.Object)\n"
	"\tat Leak$Inner.run(Unknown Source)\n"
	"\tat Gen.x(Gen.java)\n\n"
	"\"a \"quoted\" name\" #12 [777] daemon prio=5 os_prio=0 tid=0x1 nid=777 runnable\n"
	"   java.lang.Thread.State: RUNNABLE\n\n"
	"\"VM Thread\" os_prio=0 cpu=1.00ms tid=0x2 nid=0x99 runnable\n";

static void test_threads(void **state)
{
	struct ja_threads t;
	assert_int_equal(ja_threads_parse(dump17, sizeof(dump17) - 1, &t), 0);
	assert_int_equal(t.nthreads, 2); /* the VM thread has no Java state */
	const struct ja_thread *m = &t.threads[0];
	assert_int_equal(m->name_len, 4);
	assert_memory_equal(m->name, "main", 4);
	assert_int_equal(m->nid, 0x1234);
	assert_memory_equal(m->state, "TIMED_WAITING", 13);
	assert_int_equal(m->nframes, 4);
	const struct ja_frame *f = &t.frames[m->first];
	assert_memory_equal(f[0].cls, "java.lang.Thread", f[0].cls_len);
	assert_int_equal(f[0].cls_len, 16);
	assert_memory_equal(f[0].method, "sleep", 5);
	assert_int_equal(f[0].line, -3);
	assert_null(f[0].file);
	assert_memory_equal(f[1].file, "Leak.java", 9);
	assert_int_equal(f[1].line, 46);
	assert_memory_equal(f[2].cls, "Leak$Inner", 10);
	assert_int_equal(f[2].line, -1);
	assert_int_equal(f[3].line, 0);
	assert_memory_equal(f[3].file, "Gen.java", 8);
	const struct ja_thread *q = &t.threads[1];
	assert_int_equal(q->name_len, 15);
	assert_memory_equal(q->name, "a \"quoted\" name", 15);
	assert_int_equal(q->nid, 777);
	assert_int_equal(q->nframes, 0);
	ja_threads_free(&t);
	assert_int_equal(ja_threads_parse("no threads\n", 11, &t), -EBADMSG);
	(void)state;
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Each appended thread's serial is its OS tid (Thread.print's nid): the
 * redactor names threads by it and finds an OOM's failing thread by it. */
static void test_hprof_threads(void **state)
{
	struct ja_threads t;
	static const uint8_t head[31] = "JAVA PROFILE 1.0.2\0\0\0\0\x08";
	uint8_t out[8192];
	assert_int_equal(ja_threads_parse(dump17, sizeof(dump17) - 1, &t), 0);
	int in = memfd_create("hprof-in", 0), o = memfd_create("hprof-out", 0);
	assert_true(in >= 0 && o >= 0);
	assert_int_equal(write(in, head, sizeof(head)), (ssize_t)sizeof(head));
	assert_int_equal(ja_hprof_with_threads(in, o, &t), 0);
	ssize_t n = pread(o, out, sizeof(out), 0);
	assert_true(n > (ssize_t)sizeof(head) && n < (ssize_t)sizeof(out));
	uint32_t serials[4], nser = 0;
	for (size_t p = sizeof(head); p + 9 <= (size_t)n;) {
		uint32_t len = be32(out + p + 5);
		assert_true(len <= (size_t)n - p - 9);
		if (out[p] == 0x0a) { /* START THREAD */
			assert_true(nser < 4);
			serials[nser++] = be32(out + p + 9);
		}
		p += 9 + len;
	}
	assert_int_equal(nser, 2);
	assert_int_equal(serials[0], 0x1234);
	assert_int_equal(serials[1], 777);
	close(in);
	close(o);
	ja_threads_free(&t);
	(void)state;
}

static void test_main_class(void **state)
{
	char out[64];
	const char a[] = "java\0-Xmx64m\0-cp\0/x:/y\0-Dk=v\0com.ex.Main\0arg";
	assert_int_equal(ja_main_class(a, sizeof(a), out, sizeof(out)), 0);
	assert_string_equal(out, "com.ex.Main");
	const char b[] = "java\0-jar\0/opt/app.jar\0x";
	assert_int_equal(ja_main_class(b, sizeof(b), out, sizeof(out)), 0);
	assert_string_equal(out, "/opt/app.jar");
	const char c[] = "java\0--module=m/p.Main";
	assert_int_equal(ja_main_class(c, sizeof(c), out, sizeof(out)), 0);
	assert_string_equal(out, "m/p.Main");
	const char d[] = "java\0-version";
	assert_int_equal(ja_main_class(d, sizeof(d), out, sizeof(out)), -ENOENT);
	assert_int_equal(ja_main_class(a, sizeof(a), out, 4), -ENAMETOOLONG);
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reply),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_hprof_threads),
		cmocka_unit_test(test_main_class),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

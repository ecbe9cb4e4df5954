/*
 * The JVM method events' class-file rewriter (runtime/jvmti/jv_inject.c)
 * over class files javac made from tests/integration/apps/java/Target.java:
 * the rewritten class is loaded by real JVMs with -Xverify:all, its methods
 * return what the original's return, each hooked method calls the hook once
 * per call, a same-named overload with another descriptor is untouched, and
 * what the rewriter does not handle (jsr, truncated or damaged classes) is
 * refused with a reason.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jtarget.h"
#include "jv_inject.h"

static const char *jvms[] = {
	"/usr/lib/jvm/java-17-openjdk-amd64/bin/java",
	"/usr/lib/jvm/temurin-25-jdk-amd64/bin/java",
};

static const struct jvi_hook test_hook = { .cls = "TestHook", .name = "hit" };

static uint8_t *read_class(const char *name, size_t *n)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s.class", PD_JAVA_CLASSES, name);
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	uint8_t *b = malloc(1 << 20);
	*n = b ? fread(b, 1, 1 << 20, f) : 0;
	fclose(f);
	return b;
}

static uint8_t *target_class(size_t *n)
{
	uint8_t *b = read_class("Target", n);
	if (!b) {
		print_message("no %s/Target.class (javac did not run)\n", PD_JAVA_CLASSES);
		fail();
	}
	return b;
}

/* Every method of Target but the overload, with ids 1..6. */
static const struct jvi_target all_targets[] = {
	{ .method = "register", .desc = "(Ljava/lang/Object;)V", .id = 1 },
	{ .method = "mixed", .id = 2 },
	{ .method = "guarded", .id = 3 },
	{ .method = "guardedFar", .id = 4 },
	{ .method = "far", .id = 5 },
	{ .method = "sum", .desc = "([JD)D", .id = 6 },
};
#define NT (sizeof(all_targets) / sizeof(all_targets[0]))

/* Run InjectCheck with classes from dir before the build's; its one line of output. */
static int run_check(const char *java, const char *dir, char *out, size_t n)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "%s -Xshare:off -Xverify:all -Xint -cp %s%s%s InjectCheck 2>&1",
		 java, dir ? dir : "", dir ? ":" : "", PD_JAVA_CLASSES);
	FILE *p = popen(cmd, "r");
	if (!p)
		return -errno;
	size_t k = fread(out, 1, n - 1, p);
	out[k] = '\0';
	return pclose(p);
}

static void run_both(const char *java, const char *dir, const char *want_hits,
		     const char *want_args)
{
	char orig[4096], hooked[4096];
	assert_int_equal(run_check(java, NULL, orig, sizeof(orig)), 0);
	int rc = run_check(java, dir, hooked, sizeof(hooked));
	if (rc != 0)
		print_message("%s: %s\n", java, hooked);
	assert_int_equal(rc, 0);
	/* Same results; only the hook's counters differ. */
	char *h1 = strstr(orig, " hits="), *h2 = strstr(hooked, " hits=");
	assert_non_null(h1);
	assert_non_null(h2);
	assert_int_equal(h1 - orig, h2 - hooked);
	assert_memory_equal(orig, hooked, (size_t)(h1 - orig));
	assert_string_equal(h1, " hits=0,0,0,0,0,0,0,0 args=\n");
	char want[512];
	snprintf(want, sizeof(want), " hits=%s args=%s\n", want_hits, want_args);
	assert_string_equal(h2, want);
	print_message("%s: %s", java, hooked);
}

static void write_file(const char *path, const uint8_t *b, size_t n)
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(b, 1, n, f), n);
	assert_int_equal(fclose(f), 0);
}

static void test_verified_in_jvms(void **state)
{
	size_t n, on = 0;
	uint8_t *in = target_class(&n), *out = NULL;
	unsigned hooked = 0, by[NT];
	char err[256];
	int rc = jvi_rewrite(in, n, all_targets, NT, &test_hook, &out, &on, &hooked, by, err,
			     sizeof(err));
	if (rc)
		print_message("refused: %s\n", err);
	assert_int_equal(rc, 0);
	assert_int_equal(hooked, 6);
	for (size_t i = 0; i < NT; i++)
		assert_int_equal(by[i], 1);
	/* 6 constant-pool entries, 8 bytes a method, and two frames that grew
	 * to their _extended form (guardedFar, far). */
	assert_true(on > n + 6 * 8);

	char dir[] = "/tmp/test_jv_inject.XXXXXX", path[600];
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/Target.class", dir);
	write_file(path, out, on);
	int ran = 0;
	for (size_t i = 0; i < sizeof(jvms) / sizeof(jvms[0]); i++) {
		if (access(jvms[i], X_OK) != 0) {
			print_message("no %s: not run there\n", jvms[i]);
			continue;
		}
		/* register(Object) 3 calls, mixed 2, guarded 2, guardedFar 2, far 2, sum 1
		 * (its loop jumps back to offset 0: the hook still runs once). */
		run_both(jvms[i], dir, "0,3,2,2,2,2,1,0", "");
		ran++;
	}
	unlink(path);
	rmdir(dir);
	free(out);
	free(in);
	if (!ran)
		skip();
}

/* #args: the typed hooks get each primitive or String parameter with its
 * index (TestHook logs "index=value;"), the rest skipped; verified. */
static void test_args_verified_in_jvms(void **state)
{
	static const struct jvi_target t[] = {
		{ .method = "register", .desc = "(ILjava/lang/String;Ljava/lang/Object;)V", .id = 7,
		  .args = true },
		{ .method = "mixed", .id = 2, .args = true },
		{ .method = "far", .id = 5, .args = true },
		{ .method = "sum", .desc = "([JD)D", .id = 6, .args = true },
		{ .method = "stamp", .id = 0, .args = true },
		{ .method = "guarded", .id = 3 },   /* no #args: the plain 8 bytes */
	};
	size_t n, on = 0;
	uint8_t *in = target_class(&n), *out = NULL;
	unsigned hooked = 0, by[6];
	char err[256];
	int rc = jvi_rewrite(in, n, t, 6, &test_hook, &out, &on, &hooked, by, err, sizeof(err));
	if (rc)
		print_message("refused: %s\n", err);
	assert_int_equal(rc, 0);
	assert_int_equal(hooked, 6);
	char dir[] = "/tmp/test_jv_inject.XXXXXX", path[600];
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/Target.class", dir);
	write_file(path, out, on);
	int ran = 0;
	for (size_t i = 0; i < sizeof(jvms) / sizeof(jvms[0]); i++) {
		if (access(jvms[i], X_OK) != 0) {
			print_message("no %s: not run there\n", jvms[i]);
			continue;
		}
		/* mixed(10), mixed(1000): int; far(3), far(-3); sum(long[], 0.5):
		 * the array skipped, the double (slot 2 of an instance method) is
		 * index 1; register(7, "alice@example.com", Object): the Object
		 * skipped; stamp(5L, 1.5f): a long and a float. */
		run_both(jvms[i], dir, "1,0,2,2,0,2,1,1",
			 "0=10;0=1000;0=3;0=-3;1=D0.5;0=7;1=Salice@example.com;0=J5;1=F1.5;");
		ran++;
	}
	unlink(path);
	rmdir(dir);
	free(out);
	free(in);
	if (!ran)
		skip();
}

static void test_overloads(void **state)
{
	size_t n, on;
	uint8_t *in = target_class(&n), *out;
	unsigned hooked, by[1];
	char err[256];
	/* No descriptor: every register overload (three). */
	struct jvi_target any = { .method = "register", .id = 1 };
	assert_int_equal(jvi_rewrite(in, n, &any, 1, &test_hook, &out, &on, &hooked, by, err,
				     sizeof(err)), 0);
	assert_int_equal(hooked, 3);
	assert_int_equal(by[0], 3);
	free(out);
	/* The other descriptor: only that one. */
	struct jvi_target str = { .method = "register", .desc = "(Ljava/lang/String;I)V", .id = 1 };
	assert_int_equal(jvi_rewrite(in, n, &str, 1, &test_hook, &out, &on, &hooked, by, err,
				     sizeof(err)), 0);
	assert_int_equal(hooked, 1);
	free(out);
	/* Nothing matches: unchanged, no output. */
	struct jvi_target none = { .method = "register", .desc = "()V", .id = 1 };
	assert_int_equal(jvi_rewrite(in, n, &none, 1, &test_hook, &out, &on, &hooked, by, err,
				     sizeof(err)), 0);
	assert_int_equal(hooked, 0);
	assert_null(out);
	free(in);
}

/* register(Object)'s code: getstatic; iconst_1; iadd; putstatic; return. */
static size_t find_register_code(const uint8_t *b, size_t n)
{
	for (size_t i = 0; i + 9 <= n; i++)
		if (b[i] == 0xb2 && b[i + 3] == 0x04 && b[i + 4] == 0x60 && b[i + 5] == 0xb3 &&
		    b[i + 8] == 0xb1)
			return i;
	return 0;
}

static void test_refusals(void **state)
{
	size_t n, on;
	uint8_t *in = target_class(&n), *out;
	unsigned hooked;
	char err[256];
	struct jvi_target t = { .method = "register", .id = 1 };

	size_t at = find_register_code(in, n);
	assert_true(at > 0);
	uint8_t saved = in[at];
	in[at] = 0xa8; /* jsr, same length as getstatic */
	assert_int_equal(jvi_rewrite(in, n, &t, 1, &test_hook, &out, &on, &hooked, NULL, err,
				     sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "jsr"));
	assert_null(out);
	assert_int_equal(hooked, 0);
	in[at] = 0xfe; /* impdep1 */
	assert_int_equal(jvi_rewrite(in, n, &t, 1, &test_hook, &out, &on, &hooked, NULL, err,
				     sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "unknown opcode"));
	in[at] = saved;

	/* Every truncation is refused, never read past. */
	for (size_t k = 0; k < n; k++) {
		uint8_t *cut = malloc(k ? k : 1);
		memcpy(cut, in, k);
		assert_true(jvi_rewrite(cut, k, &t, 1, &test_hook, &out, &on, &hooked, NULL, err,
					sizeof(err)) < 0);
		assert_null(out);
		free(cut);
	}
	/* One trailing byte. */
	uint8_t *more = malloc(n + 1);
	memcpy(more, in, n);
	more[n] = 0;
	assert_int_equal(jvi_rewrite(more, n + 1, &t, 1, &test_hook, &out, &on, &hooked, NULL, err,
				     sizeof(err)), -EINVAL);
	free(more);
	/* Every single byte set to 0xff: refused or rewritten, never a crash. */
	for (size_t k = 0; k < n; k++) {
		uint8_t was = in[k];
		in[k] = 0xff;
		if (jvi_rewrite(in, n, &t, 1, &test_hook, &out, &on, &hooked, NULL, err,
				sizeof(err)) == 0)
			free(out);
		in[k] = was;
	}
	/* Bad arguments. */
	struct jvi_target big = { .method = "register", .id = JVI_MAX_ID + 1 };
	assert_int_equal(jvi_rewrite(in, n, &big, 1, &test_hook, &out, &on, &hooked, NULL, err,
				     sizeof(err)), -EINVAL);
	assert_int_equal(jvi_rewrite(NULL, 0, &t, 1, &test_hook, &out, &on, &hooked, NULL, err,
				     sizeof(err)), -EINVAL);
	free(in);
}

static void test_descriptors(void **state)
{
	assert_true(jt_desc_valid("()V"));
	assert_true(jt_desc_valid("(Ljava/lang/Object;)V"));
	assert_true(jt_desc_valid("([JD)D"));
	assert_true(jt_desc_valid("(Ljava/lang/String;I)[[Ljava/util/Map$Entry;"));
	assert_false(jt_desc_valid(NULL));
	assert_false(jt_desc_valid(""));
	assert_false(jt_desc_valid("V"));
	assert_false(jt_desc_valid("()"));
	assert_false(jt_desc_valid("(V)V"));
	assert_false(jt_desc_valid("()VV"));
	assert_false(jt_desc_valid("(Ljava.lang.Object;)V"));
	assert_false(jt_desc_valid("(Ljava/lang/Object)V"));
	assert_false(jt_desc_valid("(L;)V"));
	assert_false(jt_desc_valid("(Ljava//Object;)V"));
	assert_false(jt_desc_valid("([)V"));
	assert_false(jt_desc_valid("(I"));
}

/* The target spelling the daemon and the agent share (common/jtarget.c). */
static void test_targets(void **state)
{
	struct jt_target t;
	char why[160];
	assert_int_equal(jt_parse("java:Target.register", &t, why, sizeof(why)), 0);
	assert_string_equal(t.cls, "Target");
	assert_string_equal(t.method, "register");
	assert_string_equal(t.desc, "");
	assert_string_equal(t.loader, "");
	assert_int_equal(jt_parse("java:com.example.Outer$Inner.register(Ljava/lang/Object;)V@app",
				  &t, why, sizeof(why)), 0);
	assert_string_equal(t.cls, "com/example/Outer$Inner");
	assert_string_equal(t.desc, "(Ljava/lang/Object;)V");
	assert_string_equal(t.loader, "app");
	assert_int_equal(jt_parse("java:a.B.<init>()V", &t, why, sizeof(why)), 0);
	assert_string_equal(t.method, "<init>");
	assert_false(t.args);
	assert_int_equal(jt_parse("java:Target.register(ILjava/lang/String;Ljava/lang/Object;)V#args",
				  &t, why, sizeof(why)), 0);
	assert_true(t.args);
	assert_string_equal(t.desc, "(ILjava/lang/String;Ljava/lang/Object;)V");
	assert_int_equal(jt_parse("java:Target.register@app#args", &t, why, sizeof(why)), 0);
	assert_true(t.args);
	assert_string_equal(t.loader, "app");
	assert_string_equal(t.method, "register");

	static const struct {
		const char *s, *why;
	} bad[] = {
		{ "Target.register", "starts with" },
		{ "java:Target", "expected java:CLASS.METHOD" },
		{ "java:.register", "expected" },
		{ "java:Target.", "expected" },
		{ "java:a..B.m", "bad class name" },
		{ "java:a/B.m", "bad class name" },
		{ "java:Target.register(Ljava/lang/Object)V", "bad descriptor" },
		{ "java:Target.register(", "bad descriptor" },
		{ "java:java.lang.String.length", "java.*" },
		{ "java:jdk.internal.misc.Unsafe.park", "java.*" },
		{ "java:sun.misc.Unsafe.park", "java.*" },
		{ "java:profilingd.MethodHook.hit", "java.*" },
		{ "java:Target.<clinit>", "class initializer" },
		{ "java:Target.reg<ister", "bad method name" },
		{ "java:Target.register@", "loader name" },
		{ "java:Target.register@a b", "spaces" },
		{ "java:Target.register@a/b", "loader name" },
		{ "java:Target.re\tgister", "control characters" },
		{ "java:Target.register#arg", "bad suffix '#arg'" },
		{ "java:Target.register#args=is", "bad suffix" },
		{ "java:Target.register#", "bad suffix" },
		{ "java:Target.register#ARGS", "bad suffix" },
		{ "java:Target.register#args#args", "bad suffix" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int r = jt_parse(bad[i].s, &t, why, sizeof(why));
		if (r != -EINVAL || !strstr(why, bad[i].why))
			print_message("%s: %d '%s'\n", bad[i].s, r, why);
		assert_int_equal(r, -EINVAL);
		assert_non_null(strstr(why, bad[i].why));
	}
	char big[2048];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	memcpy(big, "java:", 5);
	assert_int_equal(jt_parse(big, &t, why, sizeof(why)), -EINVAL);
	assert_int_equal(jt_parse(NULL, &t, why, sizeof(why)), -EINVAL);
}

static void test_hook_class(void **state)
{
	uint8_t *b = NULL;
	size_t n = 0;
	struct jvi_hook h = { .cls = "profilingd/MethodHook", .name = "hit" };
	assert_int_equal(jvi_hook_class(&h, &b, &n), 0);
	assert_true(n > 10);
	assert_int_equal(b[0], 0xca);
	/* The hook class itself parses, and has no code to hook (native). */
	struct jvi_target t = { .method = "hit", .id = 1 };
	uint8_t *out;
	size_t on;
	unsigned hooked;
	char err[128];
	assert_int_equal(jvi_rewrite(b, n, &t, 1, &h, &out, &on, &hooked, NULL, err, sizeof(err)), 0);
	assert_int_equal(hooked, 0);
	free(b);
	assert_int_equal(jvi_hook_class(NULL, &b, &n), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_verified_in_jvms),
		cmocka_unit_test(test_args_verified_in_jvms),
		cmocka_unit_test(test_overloads),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_descriptors),
		cmocka_unit_test(test_targets),
		cmocka_unit_test(test_hook_class),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * libFuzzer: the JVM method events' class-file rewriter
 * (runtime/jvmti/jv_inject.c), which reads the bytes of any class the JVM
 * loads, an app's own. The first input byte picks the targets; the rest is
 * the class file. A rewritten class must parse again, hook the same methods
 * a second time (each gains 8 more bytes; unless a code length or the
 * constant pool has no room left), and have grown by exactly 8
 * bytes a method plus the hook's constant-pool entries plus at most 2 bytes
 * a method (a first stack map frame turned _extended). Then again with
 * #args on every picked target: the prologue grows by the parameters
 * passed, within JVI_PROLOGUE_MAX, and the rewritten class rewrites again.
 * The same bytes, as
 * a string after "java:", go through the JVM target parser the daemon runs
 * at admission (common/jtarget.c): what it accepts is a class in internal
 * form, a method name, and a valid descriptor or none.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jtarget.h"
#include "jv_inject.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct jvi_target targets[] = {
	{ .method = "register", .desc = "(Ljava/lang/Object;)V", .id = 1 },
	{ .method = "mixed", .id = 2 },
	{ .method = "far", .id = 3 },
	{ .method = "main", .id = 4 },
	{ .method = "<init>", .id = 5 },
	{ .method = "hit", .id = 6 },
	{ .method = "guardedFar", .id = 7 },
	{ .method = "sum", .desc = "([JD)D", .id = 8 },
};
#define NT (sizeof(targets) / sizeof(targets[0]))

static void fuzz_target_spelling(const uint8_t *data, size_t size)
{
	char s[2048], why[160];
	struct jt_target t;
	size_t n = size < sizeof(s) - 6 ? size : sizeof(s) - 6;
	memcpy(s, "java:", 5);
	memcpy(s + 5, data, n);
	s[5 + n] = '\0';
	if (jt_parse(s, &t, why, sizeof(why)) < 0) {
		if (!why[0])
			abort();
		return;
	}
	if (!t.cls[0] || strchr(t.cls, '.') || !t.method[0] || (t.desc[0] && !jt_desc_valid(t.desc)))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct jvi_hook hook = { .cls = "profilingd/MethodHook", .name = "hit" };
	struct jvi_target pick[NT];
	size_t np = 0;
	uint8_t *out = NULL, *out2 = NULL;
	size_t on = 0, on2 = 0;
	unsigned hooked = 0, hooked2 = 0, by[NT];
	char err[160];

	fuzz_target_spelling(data, size);
	if (size < 1)
		return 0;
	for (size_t i = 0; i < NT; i++)
		if (data[0] & (1u << i))
			pick[np++] = targets[i];
	if (jvi_rewrite(data + 1, size - 1, pick, np, &hook, &out, &on, &hooked, by, err,
			sizeof(err)) < 0) {
		if (out || hooked || !err[0] || strlen(err) >= sizeof(err))
			abort();
		return 0;
	}
	if (!hooked) {
		if (out)
			abort();
		return 0;
	}
	/* Utf8 hook class, Class, Utf8 name, Utf8 "(I)V", NameAndType, Methodref. */
	size_t cp = 3 + strlen(hook.cls) + 3 + 3 + strlen(hook.name) + 3 + 4 + 5 + 5;
	size_t base = size - 1 + cp + (size_t)hooked * JVI_HOOK_LEN;
	if (on < base || on > base + 2ull * hooked)
		abort();
	int r = jvi_rewrite(out, on, pick, np, &hook, &out2, &on2, &hooked2, NULL, err, sizeof(err));
	if (r == 0 ? hooked2 != hooked : !strstr(err, "no room"))
		abort();
	free(out2);
	free(out);
	out = out2 = NULL;

	/* The same targets with #args: a longer prologue per method (8 ..
	 * JVI_PROLOGUE_MAX bytes, by its descriptor), 4 more constant-pool
	 * entries per typed hook; a method whose descriptor the prologue
	 * cannot walk refuses the class. */
	for (size_t i = 0; i < np; i++)
		pick[i].args = true;
	if (jvi_rewrite(data + 1, size - 1, pick, np, &hook, &out, &on, &hooked, by, err,
			sizeof(err)) < 0) {
		if (out || hooked || !err[0])
			abort();
		return 0;
	}
	if (!hooked)
		return 0;
	for (unsigned k = 0; k < JVI_ARG_KINDS; k++)
		cp += 3 + strlen(jvi_arg_hooks[k].name) + 3 + strlen(jvi_arg_hooks[k].desc) + 5 + 5;
	base = size - 1 + cp + (size_t)hooked * JVI_HOOK_LEN;
	if (on < base || on > base + (size_t)hooked * (JVI_PROLOGUE_MAX - JVI_HOOK_LEN + 2))
		abort();
	r = jvi_rewrite(out, on, pick, np, &hook, &out2, &on2, &hooked2, NULL, err, sizeof(err));
	if (r == 0 ? hooked2 != hooked : !strstr(err, "no room"))
		abort();
	free(out2);
	free(out);
	return 0;
}

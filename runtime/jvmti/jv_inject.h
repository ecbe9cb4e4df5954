/*
 * jv_inject: the class-file rewriter of the JVM method events (issue #19,
 * docs/METHOD_EVENTS.md, "JVM targets"). Pure: bytes in, bytes out, no JVM,
 * no JNI, so the unit tests and the fuzzer run it alone.
 *
 * Contract: jvi_rewrite() parses a class file (untrusted bytes: every
 * count, index and length is checked against the buffer), and for every
 * method whose name (and descriptor, when the target names one) matches a
 * target, inserts at offset 0 of its Code
 *
 *     sipush ID; invokestatic HOOK_CLASS.HOOK_NAME(I)V; nop; nop
 *
 * (8 bytes: a multiple of 4, so tableswitch/lookupswitch padding holds;
 * longer with a target's arguments, below), appends the constant-pool
 * entries of that Methodref, raises max_stack to at least 1, and moves
 * every absolute code offset by the prologue's length: the exception
 * table, LineNumberTable, LocalVariableTable, LocalVariableTypeTable and
 * the first StackMapTable frame's offset_delta (a same_frame or
 * same_locals_1_stack_item frame whose delta no longer fits becomes its
 * _extended form). Relative branch offsets need no change: a backward
 * branch to offset 0 now lands after the hook, so the hook runs once per
 * call.
 *
 * It refuses the whole class (returns -EINVAL, -ENOMEM on allocation
 * failure, and leaves *out NULL, with the reason in err) when any matching
 * method cannot be hooked: jsr/ret, an unknown opcode, a Code attribute it
 * does not know how to shift (type annotations), a code length or
 * constant pool past the class-file limits, an offset past the code, or a
 * malformed class. Abstract and native methods have no code: they are
 * skipped, not hooked. No match at all is not an error: 0 with *out NULL
 * and *hooked 0 (the class stays as is).
 */
#ifndef PD_JV_INJECT_H
#define PD_JV_INJECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JVI_HOOK_LEN   8       /* bytes inserted at the start of a method's Code */
#define JVI_MAX_ID     32767   /* sipush's range */
#define JVI_MAX_CLASS  (64u << 20) /* larger class files are refused */

/* The hook every rewritten method calls: a static void method taking int. */
struct jvi_hook {
	const char *cls;       /* internal name, "profilingd/MethodHook" */
	const char *name;      /* "hit" */
};
#define JVI_HOOK_DESC "(I)V"

struct jvi_target {
	const char *method;    /* method name */
	const char *desc;      /* JVM method descriptor; NULL: every overload */
	uint16_t id;           /* passed to the hook: 0..JVI_MAX_ID */
	bool args;             /* #args: pass the parameters to the typed hooks */
};

/*
 * Arguments (a target's #args, docs/METHOD_EVENTS.md, "Arguments"): after
 * the hit call the prologue passes each of the method's first
 * JVI_ARGS_MAX parameters that is a primitive or a java.lang.String to a
 * static native of the hook class, with its index (0-based, `this` not
 * counted): boolean/byte/char/short/int to argI(II)V, long argJ(IJ)V,
 * float argF(IF)V, double argD(ID)V, String argS(ILjava/lang/String;)V.
 * Other parameters are skipped. The prologue is padded with nops to a
 * multiple of 4 (switch padding holds), at most JVI_PROLOGUE_MAX bytes,
 * and every offset moves by its length; max_stack is at least 3 when a
 * long or double is passed, 2 for any other argument.
 */
#define JVI_ARGS_MAX     6
#define JVI_PROLOGUE_MAX (JVI_HOOK_LEN + 6 * JVI_ARGS_MAX)
enum jvi_arg_kind { JVI_ARG_INT, JVI_ARG_LONG, JVI_ARG_FLOAT, JVI_ARG_DOUBLE, JVI_ARG_STRING,
		    JVI_ARG_KINDS };
struct jvi_arg_hook {
	const char *name, *desc;
};
extern const struct jvi_arg_hook jvi_arg_hooks[JVI_ARG_KINDS];

/*
 * Rewrite class bytes in[0..n). On success with at least one method hooked:
 * 0, *out (malloc'd, the caller frees) and *out_len set, *hooked = methods
 * hooked, and hooked_by_target[i] (when not NULL, nt entries) the methods
 * target i matched. err (n_err bytes) always gets a NUL-terminated reason
 * on failure.
 */
int jvi_rewrite(const uint8_t *in, size_t n, const struct jvi_target *t, size_t nt,
		const struct jvi_hook *hook, uint8_t **out, size_t *out_len, unsigned *hooked,
		unsigned *hooked_by_target, char *err, size_t n_err);

/* The class bytes of the hook class: public final HOOK_CLASS with the
 * methods "public static native void HOOK_NAME(int)" and the typed
 * argument hooks (jvi_arg_hooks), version 52 (no stack maps needed).
 * Malloc'd into *out. */
int jvi_hook_class(const struct jvi_hook *hook, uint8_t **out, size_t *out_len);

#endif

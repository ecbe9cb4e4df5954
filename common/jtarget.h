/*
 * jtarget: the spelling of a JVM method-event target (issue #19,
 * docs/METHOD_EVENTS.md, "JVM targets"), shared by the daemon's admission
 * (svc_admit_methods) and the JVMTI agent (jv_methods.c), so both refuse
 * the same strings for the same reasons:
 *
 *     java:CLASS.METHOD[(DESCRIPTOR)][@LOADER][#args]
 *
 * CLASS is a binary name (com.example.Outer$Inner), METHOD a method name
 * (or <init>), DESCRIPTOR a JVM method descriptor (all overloads when
 * absent) and LOADER the name of the defining class loader
 * (ClassLoader.getName(): "app", "platform", a custom loader's name;
 * "boot" for the bootstrap loader). Classes of java.*, jdk.*, sun.* and
 * profilingd.* (the hook's own) are refused. The suffix #args records the
 * parameters that are primitives or java.lang.String (docs/METHOD_EVENTS.md,
 * "Arguments"); any other suffix after '#' is refused.
 */
#ifndef PD_JTARGET_H
#define PD_JTARGET_H

#include <stdbool.h>
#include <stddef.h>

#define JT_PREFIX     "java:"
#define JT_CLASS_MAX  256   /* bytes of CLASS, with its NUL */
#define JT_METHOD_MAX 128
#define JT_DESC_MAX   512
#define JT_LOADER_MAX 64
#define JT_ARGS_SUFFIX "#args"

struct jt_target {
	char cls[JT_CLASS_MAX];       /* internal form: com/example/Target */
	char method[JT_METHOD_MAX];
	char desc[JT_DESC_MAX];       /* "": every overload */
	char loader[JT_LOADER_MAX];   /* "": any loader */
	bool args;                    /* #args: record the parameters */
};

/* Whether s is meant as a JVM target (starts with "java:"). */
bool jt_is_java(const char *s);

/* Parse s into *t. 0, or -EINVAL with the reason in why (n bytes). */
int jt_parse(const char *s, struct jt_target *t, char *why, size_t n);

/* Whether s is a well-formed JVM method descriptor "(T*)R". */
bool jt_desc_valid(const char *s);

#endif

/* The spelling of JVM method-event targets (jtarget.h). */
#include "jtarget.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

bool jt_is_java(const char *s)
{
	return s && !strncmp(s, JT_PREFIX, strlen(JT_PREFIX));
}

/* One field type of a descriptor; the byte after it, or NULL. */
static const char *field_type(const char *s)
{
	while (*s == '[')
		s++;
	switch (*s) {
	case 'B': case 'C': case 'D': case 'F': case 'I': case 'J': case 'S': case 'Z':
		return s + 1;
	case 'L': {
		const char *e = s + 1;
		/* An internal class name: no '.', '[' or empty part inside. */
		if (*e == ';' || *e == '/')
			return NULL;
		for (; *e && *e != ';'; e++)
			if (*e == '.' || *e == '[' || *e == '(' || *e == ')' ||
			    (*e == '/' && (e[1] == '/' || e[1] == ';')) || (unsigned char)*e < 0x20)
				return NULL;
		return *e == ';' ? e + 1 : NULL;
	}
	default:
		return NULL;
	}
}

bool jt_desc_valid(const char *s)
{
	if (!s || *s++ != '(')
		return false;
	while (*s && *s != ')')
		if (!(s = field_type(s)))
			return false;
	if (*s++ != ')')
		return false;
	if (*s == 'V')
		return s[1] == '\0';
	s = field_type(s);
	return s && *s == '\0';
}

static bool denied_package(const char *cls)
{
	static const char *const deny[] = { "java/", "jdk/", "sun/", "profilingd/" };
	for (size_t i = 0; i < sizeof(deny) / sizeof(deny[0]); i++)
		if (!strncmp(cls, deny[i], strlen(deny[i])))
			return true;
	return false;
}

int jt_parse(const char *s, struct jt_target *t, char *why, size_t n)
{
	char buf[1024];
	if (why && n)
		why[0] = '\0';
	if (!t || !jt_is_java(s)) {
		util_fmt(why, n, "a JVM target starts with %s", JT_PREFIX);
		return -EINVAL;
	}
	memset(t, 0, sizeof(*t));
	if (util_strlcpy(buf, s + strlen(JT_PREFIX), sizeof(buf)) >= sizeof(buf)) {
		util_fmt(why, n, "longer than %zu bytes", sizeof(buf) - 1);
		return -EINVAL;
	}
	for (const char *c = buf; *c; c++)
		if ((unsigned char)*c <= 0x20 || *c == 0x7f) {
			util_fmt(why, n, "spaces or control characters");
			return -EINVAL;
		}
	/* The suffix first: '#' is in no class, method, descriptor or loader. */
	char *hash = strchr(buf, '#');
	if (hash) {
		if (strcmp(hash, JT_ARGS_SUFFIX)) {
			util_fmt(why, n, "bad suffix '%.32s' (expected %s, or none)", hash,
				 JT_ARGS_SUFFIX);
			return -EINVAL;
		}
		t->args = true;
		*hash = '\0';
	}
	char *at = strrchr(buf, '@');
	if (at) {
		*at++ = '\0';
		if (!*at || strlen(at) >= JT_LOADER_MAX ||
		    strspn(at, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._$-") !=
			    strlen(at)) {
			util_fmt(why, n, "loader name: 1..%d of [A-Za-z0-9._$-]", JT_LOADER_MAX - 1);
			return -EINVAL;
		}
		memcpy(t->loader, at, strlen(at) + 1);
	}
	char *paren = strchr(buf, '(');
	if (paren) {
		if (!jt_desc_valid(paren) || strlen(paren) >= JT_DESC_MAX) {
			util_fmt(why, n, "bad descriptor '%.64s' (expected e.g. (Ljava/lang/String;I)V)",
				 paren);
			return -EINVAL;
		}
		memcpy(t->desc, paren, strlen(paren) + 1);
		*paren = '\0';
	}
	char *dot = strrchr(buf, '.');
	if (!dot || dot == buf || !dot[1]) {
		util_fmt(why, n, "expected java:CLASS.METHOD[(DESCRIPTOR)][@LOADER]");
		return -EINVAL;
	}
	*dot = '\0';
	const char *m = dot + 1;
	if (strlen(m) >= JT_METHOD_MAX || strlen(buf) >= JT_CLASS_MAX) {
		util_fmt(why, n, "class name or method name too long");
		return -EINVAL;
	}
	if (!strcmp(m, "<clinit>")) {
		util_fmt(why, n, "a class initializer (<clinit>) cannot be hooked");
		return -EINVAL;
	}
	if (strcmp(m, "<init>") && strpbrk(m, ".;[/<>()@")) {
		util_fmt(why, n, "bad method name '%.64s'", m);
		return -EINVAL;
	}
	/* Binary name: dotted parts, none empty, none with a JVM-reserved byte. */
	for (char *c = buf; *c; c++) {
		if (strchr("/;[<>()", *c) || (*c == '.' && (c == buf || c[1] == '.' || !c[1]))) {
			util_fmt(why, n, "bad class name '%.64s' (a binary name: com.example.Outer$Inner)",
				 buf);
			return -EINVAL;
		}
		if (*c == '.')
			*c = '/';
	}
	memcpy(t->cls, buf, strlen(buf) + 1);
	memcpy(t->method, m, strlen(m) + 1);
	if (denied_package(t->cls)) {
		util_fmt(why, n, "classes of java.*, jdk.*, sun.* (and profilingd.*) are not hooked");
		return -EINVAL;
	}
	return 0;
}

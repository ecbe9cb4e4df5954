/*
 * Parsers of what a JVM sends back over the attach socket, and of its
 * command line. All input is untrusted; every field has a length cap and
 * every loop is bounded by the input length.
 */
#include "ja.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* Parse an optionally signed decimal at [p, end); the end of it in *stop. */
static int parse_int(const char *p, const char *end, long *v, const char **stop)
{
	bool neg = false;
	long x = 0;
	if (p < end && (*p == '-' || *p == '+'))
		neg = *p++ == '-';
	const char *start = p;
	while (p < end && is_digit(*p)) {
		if (x > 100000000L)
			return -ERANGE;
		x = x * 10 + (*p++ - '0');
	}
	if (p == start)
		return -EBADMSG;
	*v = neg ? -x : x;
	if (stop)
		*stop = p;
	return 0;
}

int ja_parse_reply(const char *buf, size_t len, int *status, const char **body, size_t *blen)
{
	const char *end = buf + len, *p;
	long v;
	if (!buf || parse_int(buf, end, &v, &p) < 0)
		return -EBADMSG;
	/* The status line ends at a newline, or the reply ends with it. */
	if (p < end && *p != '\n')
		return -EBADMSG;
	if (p < end)
		p++;
	*status = (int)v;
	*body = p;
	*blen = (size_t)(end - p);
	return 0;
}

int ja_parse_load_rc(const char *body, size_t blen, int *rc)
{
	static const char prefix[] = "return code: ";
	const char *p = body, *end = body + blen;
	long v;
	while (p < end && (*p == ' ' || *p == '\n'))
		p++;
	if ((size_t)(end - p) >= sizeof(prefix) - 1 && !memcmp(p, prefix, sizeof(prefix) - 1))
		p += sizeof(prefix) - 1;
	if (parse_int(p, end, &v, NULL) < 0)
		return -EBADMSG;
	*rc = (int)v;
	return 0;
}

/* ------------------------------------------------------------ Thread.print */

static uint16_t cap16(size_t n) { return (uint16_t)(n > 65535 ? 65535 : n); }

static const char *mem_find(const char *p, const char *end, const char *needle)
{
	size_t n = strlen(needle);
	while ((size_t)(end - p) >= n) {
		const char *q = memchr(p, needle[0], (size_t)(end - p) - n + 1);
		if (!q)
			return NULL;
		if (!memcmp(q, needle, n))
			return q;
		p = q + 1;
	}
	return NULL;
}

/*
 * A thread header: "NAME" #1 [tid] daemon prio=5 ... nid=0x1a2b ...
 * The name may itself hold quotes, so it ends at the last quote that is
 * followed by " #", " daemon", " prio=" or " os_prio=" (or ends the line).
 */
static bool parse_header(const char *p, const char *eol, struct ja_thread *t)
{
	static const char *const after[] = { "\" #", "\" daemon", "\" prio=", "\" os_prio=" };
	const char *close = NULL;
	if (p >= eol || *p != '"')
		return false;
	for (size_t i = 0; i < sizeof(after) / sizeof(after[0]) && !close; i++)
		close = mem_find(p + 1, eol, after[i]);
	if (!close) {
		close = eol - 1;
		while (close > p && *close != '"')
			close--;
		if (close == p)
			return false;
	}
	t->name = p + 1;
	t->name_len = cap16((size_t)(close - p - 1));
	t->nid = 0;
	const char *nid = mem_find(close, eol, " nid=");
	if (nid) {
		const char *q = nid + 5;
		uint64_t v = 0;
		bool hex = eol - q > 2 && q[0] == '0' && q[1] == 'x';
		if (hex)
			q += 2;
		for (int i = 0; q < eol && i < 16; q++, i++) {
			char c = *q;
			int d = is_digit(c) ? c - '0' : hex && c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
			if (d < 0)
				break;
			v = v * (hex ? 16 : 10) + (uint64_t)d;
		}
		t->nid = v;
	}
	return true;
}

/* "\tat pkg.Cls.method(java.base@17/File.java:12)" into f. */
static bool parse_frame(const char *p, const char *eol, struct ja_frame *f)
{
	const char *open = memchr(p, '(', (size_t)(eol - p));
	const char *close = open ? eol - 1 : NULL;
	while (close && close > open && *close != ')')
		close--;
	if (!open || close <= open)
		return false;
	const char *dot = open - 1;
	while (dot >= p && *dot != '.')
		dot--;
	if (dot < p || dot == p)
		return false;
	f->cls = p;
	f->cls_len = cap16((size_t)(dot - p));
	f->method = dot + 1;
	f->method_len = cap16((size_t)(open - dot - 1));
	/* Inside the parentheses: [module@version/]File.java:line, or a word. */
	const char *in = open + 1, *slash = close;
	while (slash > in && *slash != '/')
		slash--;
	if (*slash == '/')
		in = slash + 1;
	f->file = NULL;
	f->file_len = 0;
	f->line = 0;
	if ((size_t)(close - in) == 13 && !memcmp(in, "Native Method", 13)) {
		f->line = -3;
		return true;
	}
	if ((size_t)(close - in) == 14 && !memcmp(in, "Unknown Source", 14)) {
		f->line = -1;
		return true;
	}
	const char *colon = close - 1;
	while (colon > in && *colon != ':')
		colon--;
	long v;
	const char *stop;
	if (*colon == ':' && parse_int(colon + 1, close, &v, &stop) == 0 && stop == close && v > 0) {
		f->line = (int32_t)v;
	} else {
		colon = close;
	}
	if (colon > in) {
		f->file = in;
		f->file_len = cap16((size_t)(colon - in));
	}
	return true;
}

int ja_threads_parse(const char *text, size_t len, struct ja_threads *out)
{
	const char *p = text, *end = text + len;
	struct ja_thread cur = { 0 };
	bool in_thread = false, is_java = false;
	uint32_t cap_threads = 64, cap_frames = 1024;

	memset(out, 0, sizeof(*out));
	out->threads = malloc(cap_threads * sizeof(*out->threads));
	out->frames = malloc(cap_frames * sizeof(*out->frames));
	if (!out->threads || !out->frames)
		goto oom;
	for (; p < end;) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		if (!eol)
			eol = end;
		const char *line = p;
		p = eol < end ? eol + 1 : end;
		if (line < eol && eol[-1] == '\r')
			eol--;
		if (line < eol && *line == '"') {
			/* A new thread: keep the previous one if it was a Java thread. */
			if (in_thread && is_java)
				out->nthreads++;
			in_thread = false;
			is_java = false;
			if (out->nthreads >= JA_MAX_THREADS) {
				out->dropped_threads++;
				continue;
			}
			if (!parse_header(line, eol, &cur))
				continue;
			if (out->nthreads == cap_threads) {
				void *n = realloc(out->threads, 2 * cap_threads * sizeof(*out->threads));
				if (!n)
					goto oom;
				out->threads = n;
				cap_threads *= 2;
			}
			cur.state = NULL;
			cur.state_len = 0;
			cur.first = out->nframes;
			cur.nframes = 0;
			out->threads[out->nthreads] = cur;
			in_thread = true;
			continue;
		}
		if (!in_thread)
			continue;
		while (line < eol && (*line == ' ' || *line == '\t'))
			line++;
		struct ja_thread *t = &out->threads[out->nthreads];
		static const char st[] = "java.lang.Thread.State: ";
		if ((size_t)(eol - line) >= sizeof(st) - 1 && !memcmp(line, st, sizeof(st) - 1)) {
			is_java = true;
			const char *s = line + sizeof(st) - 1, *e = s;
			while (e < eol && *e != ' ')
				e++;
			t->state = s;
			t->state_len = cap16((size_t)(e - s));
			continue;
		}
		if (eol - line > 3 && !memcmp(line, "at ", 3)) {
			if (t->nframes >= JA_MAX_FRAMES) {
				out->dropped_frames++;
				continue;
			}
			struct ja_frame f;
			if (!parse_frame(line + 3, eol, &f))
				continue;
			if (out->nframes == cap_frames) {
				if (cap_frames >= JA_MAX_THREADS * 64u) {
					out->dropped_frames++;
					continue;
				}
				void *n = realloc(out->frames, 2 * cap_frames * sizeof(*out->frames));
				if (!n)
					goto oom;
				out->frames = n;
				cap_frames *= 2;
			}
			out->frames[out->nframes++] = f;
			t->nframes++;
		}
	}
	if (in_thread && is_java)
		out->nthreads++;
	if (out->nthreads == 0) {
		ja_threads_free(out);
		return -EBADMSG;
	}
	return 0;
oom:
	ja_threads_free(out);
	return -ENOMEM;
}

void ja_threads_free(struct ja_threads *t)
{
	if (!t)
		return;
	free(t->threads);
	free(t->frames);
	memset(t, 0, sizeof(*t));
}

/* ------------------------------------------------------------ command line */

/* Launcher options that take the next argument as their value. */
static bool takes_value(const char *a)
{
	static const char *const opts[] = { "-cp", "-classpath", "--class-path", "-p",
					    "--module-path", "--add-modules", "--add-opens",
					    "--add-exports", "--add-reads", "--limit-modules",
					    "--upgrade-module-path", "--patch-module",
					    "--enable-native-access" };
	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
		if (!strcmp(a, opts[i]))
			return true;
	return false;
}

int ja_main_class(const char *cmdline, size_t len, char *out, size_t n)
{
	const char *p = cmdline, *end = cmdline + len;
	bool first = true, want_jar = false, want_module = false;
	if (!cmdline || n == 0)
		return -EINVAL;
	while (p < end) {
		const char *z = memchr(p, '\0', (size_t)(end - p));
		size_t alen = z ? (size_t)(z - p) : (size_t)(end - p);
		char a[JA_MAX_ARG];
		if (alen >= sizeof(a)) {
			/* Too long for a class name: an option value; skip it. */
			p += alen + 1;
			first = false;
			continue;
		}
		memcpy(a, p, alen);
		a[alen] = '\0';
		p += alen + 1;
		if (first) { /* argv[0]: the launcher */
			first = false;
			continue;
		}
		if (want_jar || want_module || a[0] != '-') {
			if (alen == 0)
				return -ENOENT;
			if (alen + 1 > n)
				return -ENAMETOOLONG;
			memcpy(out, a, alen + 1);
			return 0;
		}
		if (!strcmp(a, "-jar")) {
			want_jar = true;
		} else if (!strcmp(a, "-m") || !strcmp(a, "--module")) {
			want_module = true;
		} else if (!strncmp(a, "--module=", 9)) {
			if (alen - 9 + 1 > n)
				return -ENAMETOOLONG;
			memcpy(out, a + 9, alen - 9 + 1);
			return alen > 9 ? 0 : -ENOENT;
		} else if (takes_value(a)) {
			const char *z2 = memchr(p, '\0', (size_t)(end > p ? end - p : 0));
			p = z2 ? z2 + 1 : end;
		}
	}
	return -ENOENT;
}

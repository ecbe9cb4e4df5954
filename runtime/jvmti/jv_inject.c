/*
 * The class-file rewriter of the JVM method events (jv_inject.h). The input
 * is whatever the JVM is loading, which an app controls: it is read through
 * a cursor that never passes the end, and a method is rewritten only after
 * its whole Code attribute has been walked. The JVM parses and verifies the
 * output again, so this module only has to keep what it changes consistent.
 */
#include "jv_inject.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ reading */

struct rd {
	const uint8_t *p;
	size_t n, off;
	bool bad;
};

static bool need(struct rd *r, size_t k)
{
	if (r->bad || k > r->n - r->off) {
		r->bad = true;
		return false;
	}
	return true;
}

static uint32_t u1(struct rd *r)
{
	if (!need(r, 1))
		return 0;
	return r->p[r->off++];
}

static uint32_t u2(struct rd *r)
{
	if (!need(r, 2))
		return 0;
	uint32_t v = (uint32_t)r->p[r->off] << 8 | r->p[r->off + 1];
	r->off += 2;
	return v;
}

static uint32_t u4(struct rd *r)
{
	if (!need(r, 4))
		return 0;
	const uint8_t *q = r->p + r->off;
	r->off += 4;
	return (uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 | q[3];
}

static const uint8_t *take(struct rd *r, size_t k)
{
	if (!need(r, k))
		return NULL;
	const uint8_t *q = r->p + r->off;
	r->off += k;
	return q;
}

/* ------------------------------------------------------------ writing */

struct wb {
	uint8_t *p;
	size_t n, cap;
	bool oom;
};

static void put(struct wb *w, const void *src, size_t k)
{
	if (w->oom)
		return;
	if (k > w->cap - w->n) {
		size_t cap = w->cap ? w->cap : 256;
		while (cap - w->n < k) {
			if (cap > (size_t)JVI_MAX_CLASS * 2) {
				w->oom = true;
				return;
			}
			cap *= 2;
		}
		uint8_t *np = realloc(w->p, cap);
		if (!np) {
			w->oom = true;
			return;
		}
		w->p = np;
		w->cap = cap;
	}
	memcpy(w->p + w->n, src, k);
	w->n += k;
}

static void put1(struct wb *w, uint32_t v)
{
	uint8_t b = (uint8_t)v;
	put(w, &b, 1);
}

static void put2(struct wb *w, uint32_t v)
{
	uint8_t b[2] = { (uint8_t)(v >> 8), (uint8_t)v };
	put(w, b, 2);
}

static void put4(struct wb *w, uint32_t v)
{
	uint8_t b[4] = { (uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v };
	put(w, b, 4);
}

static void put_utf8(struct wb *w, const char *s)
{
	size_t k = strlen(s);
	put1(w, 1);
	put2(w, (uint32_t)k);
	put(w, s, k);
}

/* ------------------------------------------------------ the class file */

struct cls {
	const uint8_t *in;
	uint32_t shift;     /* the method being rewritten: its prologue's length */
	uint32_t cp_count;
	uint32_t *cp_off;   /* offset of each entry's tag; 0: none (index 0, 2nd slot of long/double) */
	char *err;
	size_t n_err;
};

__attribute__((format(printf, 2, 3))) static int fail(struct cls *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (c->n_err) {
		vsnprintf(c->err, c->n_err, fmt, ap);
	}
	va_end(ap);
	return -EINVAL;
}

/* The CONSTANT_Utf8 at index i, or NULL. */
static const uint8_t *utf8_at(const struct cls *c, uint32_t i, uint32_t *len)
{
	if (i == 0 || i >= c->cp_count || !c->cp_off[i])
		return NULL;
	const uint8_t *q = c->in + c->cp_off[i];
	if (q[0] != 1)
		return NULL;
	*len = (uint32_t)q[1] << 8 | q[2];
	return q + 3;
}

static bool utf8_is(const struct cls *c, uint32_t i, const char *s)
{
	uint32_t len;
	const uint8_t *q = utf8_at(c, i, &len);
	return q && strlen(s) == len && !memcmp(q, s, len);
}

static int parse_cp(struct cls *c, struct rd *r)
{
	c->cp_count = u2(r);
	if (r->bad || c->cp_count == 0)
		return fail(c, "truncated or empty constant pool");
	c->cp_off = calloc(c->cp_count, sizeof(*c->cp_off));
	if (!c->cp_off)
		return -ENOMEM;
	for (uint32_t i = 1; i < c->cp_count; i++) {
		size_t at = r->off;
		uint32_t tag = u1(r), skip;
		switch (tag) {
		case 1: skip = u2(r); break;                    /* Utf8 */
		case 3: case 4: skip = 4; break;                /* Integer, Float */
		case 5: case 6: skip = 8; break;                /* Long, Double: two slots */
		case 7: case 8: case 16: case 19: case 20: skip = 2; break;
		case 9: case 10: case 11: case 12: case 17: case 18: skip = 4; break;
		case 15: skip = 3; break;                       /* MethodHandle */
		default:
			return fail(c, "constant pool entry %u: unknown tag %u", i, tag);
		}
		if (!take(r, skip))
			return fail(c, "constant pool entry %u runs past the end", i);
		c->cp_off[i] = (uint32_t)at;
		if (tag == 5 || tag == 6) {
			if (++i >= c->cp_count)
				return fail(c, "long/double takes the last constant pool slot");
		}
	}
	return 0;
}

/* Skip na attributes (of a field, an unhooked method, the class). */
static int skip_n_attrs(struct cls *c, struct rd *r, uint32_t na)
{
	for (uint32_t a = 0; a < na && !r->bad; a++) {
		u2(r);
		take(r, u4(r));
	}
	return r->bad ? fail(c, "attribute table runs past the end") : 0;
}

static int skip_attrs(struct cls *c, struct rd *r)
{
	return skip_n_attrs(c, r, u2(r));
}

/* Length of the instruction at pc, or 0 when it is refused/malformed. */
static uint32_t insn_len(struct cls *c, const uint8_t *code, uint32_t len, uint32_t pc, int *err)
{
	uint32_t op = code[pc];
	static const uint8_t fixed[256] = {
		[0x10] = 2, [0x11] = 3, [0x12] = 2, [0x13] = 3, [0x14] = 3,
		[0x15] = 2, [0x16] = 2, [0x17] = 2, [0x18] = 2, [0x19] = 2,
		[0x36] = 2, [0x37] = 2, [0x38] = 2, [0x39] = 2, [0x3a] = 2,
		[0x84] = 3,
		[0x99] = 3, [0x9a] = 3, [0x9b] = 3, [0x9c] = 3, [0x9d] = 3, [0x9e] = 3,
		[0x9f] = 3, [0xa0] = 3, [0xa1] = 3, [0xa2] = 3, [0xa3] = 3, [0xa4] = 3,
		[0xa5] = 3, [0xa6] = 3, [0xa7] = 3,
		[0xb2] = 3, [0xb3] = 3, [0xb4] = 3, [0xb5] = 3, [0xb6] = 3, [0xb7] = 3,
		[0xb8] = 3, [0xb9] = 5, [0xba] = 5, [0xbb] = 3, [0xbc] = 2, [0xbd] = 3,
		[0xc0] = 3, [0xc1] = 3, [0xc5] = 4, [0xc6] = 3, [0xc7] = 3, [0xc8] = 5,
	};
	uint64_t n;
	if (op == 0xa8 || op == 0xa9 || op == 0xc9) {
		*err = fail(c, "jsr/ret at %u (class files before version 50)", pc);
		return 0;
	}
	if (op > 0xc9) {
		*err = fail(c, "unknown opcode 0x%02x at %u", op, pc);
		return 0;
	}
	if (op == 0xaa || op == 0xab) {
		uint32_t pad = (4 - (pc + 1) % 4) % 4;
		uint64_t at = (uint64_t)pc + 1 + pad;
		if (at + 12 > len)
			goto trunc;
		const uint8_t *q = code + at;
#define S4(x) ((int32_t)((uint32_t)(x)[0] << 24 | (uint32_t)(x)[1] << 16 | (uint32_t)(x)[2] << 8 | (x)[3]))
		if (op == 0xaa) {
			int64_t lo = S4(q + 4), hi = S4(q + 8);
			if (hi < lo) {
				*err = fail(c, "tableswitch at %u: high < low", pc);
				return 0;
			}
			n = 1 + pad + 12 + 4 * (uint64_t)(hi - lo + 1);
		} else {
			int64_t np = S4(q + 4);
			if (np < 0) {
				*err = fail(c, "lookupswitch at %u: negative npairs", pc);
				return 0;
			}
			n = 1 + pad + 8 + 8 * (uint64_t)np;
		}
#undef S4
	} else if (op == 0xc4) {
		if (pc + 1 >= len)
			goto trunc;
		uint32_t w = code[pc + 1];
		if (w == 0xa9) {
			*err = fail(c, "wide ret at %u", pc);
			return 0;
		}
		if (w == 0x84)
			n = 6;
		else if ((w >= 0x15 && w <= 0x19) || (w >= 0x36 && w <= 0x3a))
			n = 4;
		else {
			*err = fail(c, "wide with opcode 0x%02x at %u", w, pc);
			return 0;
		}
	} else {
		n = fixed[op] ? fixed[op] : 1;
	}
	if ((uint64_t)pc + n > len)
		goto trunc;
	return (uint32_t)n;
trunc:
	*err = fail(c, "instruction at %u runs past the code", pc);
	return 0;
}

/*
 * Add the prologue's length (c->shift) to a u2 code offset. An offset past the code (max: the
 * code length, or the end for the exclusive end of a range) is refused:
 * the JVM would refuse it too, and a shifted offset then stays a u2.
 */
static int shift2(struct cls *c, struct rd *r, struct wb *w, const char *what, uint32_t max)
{
	uint32_t v = u2(r);
	if (r->bad)
		return fail(c, "%s runs past its attribute", what);
	if (v > max)
		return fail(c, "%s offset %u is past the code (%u)", what, v, max);
	put2(w, v + c->shift);
	return 0;
}

/* StackMapTable: only the first frame's offset_delta is absolute. */
static int shift_stackmap(struct cls *c, const uint8_t *body, uint32_t len, uint32_t code_len,
			  struct wb *w)
{
	struct rd r = { .p = body, .n = len };
	uint32_t n = u2(&r);
	if (r.bad)
		return fail(c, "StackMapTable too short");
	put2(w, n);
	if (n == 0) {
		if (len != 2)
			return fail(c, "StackMapTable: bytes after 0 entries");
		return 0;
	}
	uint32_t type = u1(&r);
	if (r.bad)
		return fail(c, "StackMapTable: no first frame");
	if (type <= 127 && (type & 63) >= code_len)
		return fail(c, "StackMapTable frame offset %u is past the code (%u)", type & 63,
			    code_len);
	if (type <= 63) {                       /* same_frame */
		if (type + c->shift <= 63) {
			put1(w, type + c->shift);
		} else {
			put1(w, 251);           /* same_frame_extended */
			put2(w, type + c->shift);
		}
	} else if (type <= 127) {               /* same_locals_1_stack_item */
		uint32_t d = type - 64;
		if (d + c->shift <= 63) {
			put1(w, type + c->shift);
		} else {
			put1(w, 247);           /* ..._extended; the item follows as before */
			put2(w, d + c->shift);
		}
	} else if (type >= 247) {               /* every kind with a u2 offset_delta */
		put1(w, type);
		if (shift2(c, &r, w, "StackMapTable frame", code_len - 1) < 0)
			return -EINVAL;
	} else {
		return fail(c, "StackMapTable: reserved frame type %u", type);
	}
	/* The rest (the first frame's locals/stack and the later frames) is relative. */
	put(w, body + r.off, len - r.off);
	return 0;
}

/*
 * The prologue of one hooked method into p (JVI_PROLOGUE_MAX bytes); its
 * length, a multiple of 4. With args (the target's #args), after the hit
 * call, for each of the first JVI_ARGS_MAX parameters that is a primitive
 * or a java.lang.String: iconst_<index>; <T>load <slot>; invokestatic
 * argT. desc[0..dlen) is the method's descriptor (the class's bytes: read
 * within dlen, and refused when malformed). *stack: the operand stack the
 * prologue needs.
 */
static int prologue(struct cls *c, const uint8_t *desc, uint32_t dlen, bool is_static, bool args,
		    uint16_t id, uint32_t hit_ref, const uint32_t *arg_ref, uint8_t *p,
		    uint32_t *stack)
{
	uint32_t n = 0;
	p[n++] = 0x11;                                  /* sipush ID */
	p[n++] = (uint8_t)(id >> 8);
	p[n++] = (uint8_t)id;
	p[n++] = 0xb8;                                  /* invokestatic hit */
	p[n++] = (uint8_t)(hit_ref >> 8);
	p[n++] = (uint8_t)hit_ref;
	*stack = 1;
	if (args) {
		uint32_t slot = is_static ? 0 : 1, i = 0, k = 1;
		if (!dlen || desc[0] != '(')
			return fail(c, "method descriptor does not start with '('");
		while (k < dlen && desc[k] != ')') {
			uint32_t start = k, dims = 0;
			while (k < dlen && desc[k] == '[')
				k++, dims++;
			if (k >= dlen)
				return fail(c, "method descriptor truncated");
			uint8_t t = desc[k];
			if (t == 'L') {
				while (k < dlen && desc[k] != ';')
					k++;
				if (k >= dlen)
					return fail(c, "method descriptor truncated");
			} else if (!strchr("BCDFIJSZ", t) || !t) {
				return fail(c, "bad type '%c' in a method descriptor", t);
			}
			k++;
			/* The kind of hook and load of this parameter, or none. */
			int kind = -1;
			static const char str[] = "Ljava/lang/String;";
			if (!dims && strchr("BCISZ", t))
				kind = JVI_ARG_INT;
			else if (!dims && t == 'J')
				kind = JVI_ARG_LONG;
			else if (!dims && t == 'F')
				kind = JVI_ARG_FLOAT;
			else if (!dims && t == 'D')
				kind = JVI_ARG_DOUBLE;
			else if (!dims && k - start == sizeof(str) - 1 &&
				 !memcmp(desc + start, str, sizeof(str) - 1))
				kind = JVI_ARG_STRING;
			if (kind >= 0 && i < JVI_ARGS_MAX && slot <= 255) {
				static const uint8_t load[] = { 0x15, 0x16, 0x17, 0x18, 0x19 };
				p[n++] = (uint8_t)(0x03 + i);   /* iconst_<i> */
				p[n++] = load[kind];
				p[n++] = (uint8_t)slot;
				p[n++] = 0xb8;
				p[n++] = (uint8_t)(arg_ref[kind] >> 8);
				p[n++] = (uint8_t)arg_ref[kind];
				if (kind == JVI_ARG_LONG || kind == JVI_ARG_DOUBLE)
					*stack = 3;
				else if (*stack < 2)
					*stack = 2;
			}
			slot += !dims && (t == 'J' || t == 'D') ? 2 : 1;
			i++;
		}
		if (k >= dlen)
			return fail(c, "method descriptor without ')'");
	}
	while (n % 4)
		p[n++] = 0x00;                          /* nop */
	return (int)n;
}

/* The new Code attribute body for one hooked method (without name/length). */
static int rewrite_code(struct cls *c, const uint8_t *body, uint32_t len, const uint8_t *pro,
			uint32_t pro_len, uint32_t pro_stack, struct wb *w)
{
	struct rd r = { .p = body, .n = len };
	uint32_t max_stack = u2(&r), max_locals = u2(&r), code_len = u4(&r);
	const uint8_t *code = take(&r, code_len);
	int err = 0;
	if (r.bad || !code)
		return fail(c, "Code attribute truncated");
	c->shift = pro_len;
	if (code_len == 0 || code_len + pro_len > 0xffff)
		return fail(c, "code length %u: no room for the hook (65535 at most)", code_len);
	for (uint32_t pc = 0; pc < code_len;) {
		uint32_t k = insn_len(c, code, code_len, pc, &err);
		if (!k)
			return err ? err : -EINVAL;
		pc += k;
	}
	put2(w, max_stack > pro_stack ? max_stack : pro_stack);
	put2(w, max_locals);
	put4(w, code_len + pro_len);
	put(w, pro, pro_len);
	put(w, code, code_len);

	uint32_t ne = u2(&r);
	if (r.bad)
		return fail(c, "exception table truncated");
	put2(w, ne);
	for (uint32_t i = 0; i < ne; i++) {
		if (shift2(c, &r, w, "exception start", code_len - 1) < 0 ||
		    shift2(c, &r, w, "exception end", code_len) < 0 ||
		    shift2(c, &r, w, "exception handler", code_len - 1) < 0)
			return -EINVAL;
		put2(w, u2(&r));
	}
	uint32_t na = u2(&r);
	if (r.bad)
		return fail(c, "Code attributes truncated");
	put2(w, na);
	for (uint32_t a = 0; a < na; a++) {
		uint32_t name = u2(&r), alen = u4(&r);
		const uint8_t *ab = take(&r, alen);
		if (r.bad || !ab)
			return fail(c, "Code attribute %u runs past the end", a);
		put2(w, name);
		size_t len_at = w->n;
		put4(w, 0); /* patched below: a StackMapTable may grow by 2 */
		size_t start = w->n;
		struct rd ar = { .p = ab, .n = alen };
		if (utf8_is(c, name, "LineNumberTable")) {
			uint32_t k = u2(&ar);
			if (ar.bad || alen != 2 + 4ull * k)
				return fail(c, "LineNumberTable length %u for %u entries", alen, k);
			put2(w, k);
			for (uint32_t i = 0; i < k; i++) {
				if (shift2(c, &ar, w, "line number start", code_len - 1) < 0)
					return -EINVAL;
				put2(w, u2(&ar));
			}
		} else if (utf8_is(c, name, "LocalVariableTable") ||
			   utf8_is(c, name, "LocalVariableTypeTable")) {
			uint32_t k = u2(&ar);
			if (ar.bad || alen != 2 + 10ull * k)
				return fail(c, "local variable table length %u for %u entries", alen, k);
			put2(w, k);
			for (uint32_t i = 0; i < k; i++) {
				/* [start, start+length) moves as a whole: length stays. */
				if (shift2(c, &ar, w, "local variable start", code_len) < 0)
					return -EINVAL;
				put(w, take(&ar, 8), 8);
			}
		} else if (utf8_is(c, name, "StackMapTable")) {
			if (shift_stackmap(c, ab, alen, code_len, w) < 0)
				return -EINVAL;
		} else {
			uint32_t l;
			const uint8_t *s = utf8_at(c, name, &l);
			return fail(c, "Code attribute '%.*s' holds offsets this rewriter does not move",
				    s ? (int)(l > 64 ? 64 : l) : 1, s ? (const char *)s : "?");
		}
		if (w->oom)
			return -ENOMEM;
		uint32_t nl = (uint32_t)(w->n - start);
		w->p[len_at] = (uint8_t)(nl >> 24);
		w->p[len_at + 1] = (uint8_t)(nl >> 16);
		w->p[len_at + 2] = (uint8_t)(nl >> 8);
		w->p[len_at + 3] = (uint8_t)nl;
	}
	if (r.off != len)
		return fail(c, "Code attribute: %zu bytes after its attributes", len - r.off);
	return 0;
}

static bool desc_matches(const struct cls *c, uint32_t i, const struct jvi_target *t)
{
	return !t->desc || utf8_is(c, i, t->desc);
}

int jvi_rewrite(const uint8_t *in, size_t n, const struct jvi_target *t, size_t nt,
		const struct jvi_hook *hook, uint8_t **out, size_t *out_len, unsigned *hooked,
		unsigned *by_target, char *err, size_t n_err)
{
	struct cls c = { .in = in, .err = err, .n_err = n_err };
	struct rd r = { .p = in, .n = n };
	struct wb w = { 0 };
	int ret;

	if (out)
		*out = NULL;
	if (out_len)
		*out_len = 0;
	if (hooked)
		*hooked = 0;
	if (err && n_err)
		err[0] = '\0';
	if (!in || !t || !hook || !hook->cls || !hook->name || !out || !out_len || !hooked)
		return -EINVAL;
	if (by_target)
		memset(by_target, 0, nt * sizeof(*by_target));
	for (size_t i = 0; i < nt; i++)
		if (!t[i].method || t[i].id > JVI_MAX_ID)
			return fail(&c, "target %zu: no method name or id past %d", i, JVI_MAX_ID);
	if (n > JVI_MAX_CLASS)
		return fail(&c, "class file of %zu bytes (at most %u)", n, JVI_MAX_CLASS);
	if (u4(&r) != 0xcafebabeu)
		return fail(&c, "not a class file");
	uint32_t minor = u2(&r), major = u2(&r);
	if ((ret = parse_cp(&c, &r)) < 0)
		goto out;
	bool any_args = false;
	for (size_t i = 0; i < nt; i++)
		any_args |= t[i].args;
	/* The hit's 6 entries; with arguments 4 more per typed hook. */
	uint32_t extra = 6 + (any_args ? 4 * JVI_ARG_KINDS : 0);
	if (c.cp_count + extra > 0xffff) {
		ret = fail(&c, "constant pool of %u entries: no room for the hook's %u", c.cp_count,
			   extra);
		goto out;
	}
	uint32_t methodref = c.cp_count + 5, arg_ref[JVI_ARG_KINDS] = { 0 };
	put4(&w, 0xcafebabeu);
	put2(&w, minor);
	put2(&w, major);
	put2(&w, c.cp_count + extra);
	put(&w, in + 10, r.off - 10);
	put_utf8(&w, hook->cls);                   /* cp_count + 0 */
	put1(&w, 7); put2(&w, c.cp_count);         /* + 1 Class */
	put_utf8(&w, hook->name);                  /* + 2 */
	put_utf8(&w, JVI_HOOK_DESC);               /* + 3 */
	put1(&w, 12); put2(&w, c.cp_count + 2); put2(&w, c.cp_count + 3); /* + 4 NameAndType */
	put1(&w, 10); put2(&w, c.cp_count + 1); put2(&w, c.cp_count + 4); /* + 5 Methodref */
	for (uint32_t k = 0; any_args && k < JVI_ARG_KINDS; k++) {
		uint32_t b = c.cp_count + 6 + 4 * k;
		put_utf8(&w, jvi_arg_hooks[k].name);       /* b + 0 */
		put_utf8(&w, jvi_arg_hooks[k].desc);       /* b + 1 */
		put1(&w, 12); put2(&w, b); put2(&w, b + 1);                  /* b + 2 */
		put1(&w, 10); put2(&w, c.cp_count + 1); put2(&w, b + 2);     /* b + 3 */
		arg_ref[k] = b + 3;
	}

	size_t from = r.off;
	u2(&r); u2(&r); u2(&r);                    /* access, this, super */
	take(&r, 2ull * u2(&r));                   /* interfaces */
	uint32_t nf = u2(&r);
	for (uint32_t i = 0; i < nf && !r.bad; i++) {
		take(&r, 6);
		if ((ret = skip_attrs(&c, &r)) < 0)
			goto out;
	}
	uint32_t nm = u2(&r);
	if (r.bad) {
		ret = fail(&c, "class header truncated");
		goto out;
	}
	put(&w, in + from, r.off - from);
	for (uint32_t m = 0; m < nm; m++) {
		size_t mstart = r.off;
		uint32_t acc = u2(&r), name = u2(&r), desc = u2(&r), na = u2(&r);
		if (r.bad) {
			ret = fail(&c, "method %u truncated", m);
			goto out;
		}
		uint32_t l;
		/* Checked, not trusted: a bad index would otherwise name one of the
		 * hook's own entries appended past the pool. */
		if (!utf8_at(&c, name, &l) || !utf8_at(&c, desc, &l)) {
			ret = fail(&c, "method %u: name or descriptor is not a Utf8 entry", m);
			goto out;
		}
		int match = -1;
		for (size_t i = 0; i < nt && match < 0; i++)
			if (utf8_is(&c, name, t[i].method) && desc_matches(&c, desc, &t[i]))
				match = (int)i;
		/* Abstract and native methods have no code to hook: skipped. */
		if (match < 0 || (acc & (0x0400 | 0x0100))) {
			if ((ret = skip_n_attrs(&c, &r, na)) < 0)
				goto out;
			put(&w, in + mstart, r.off - mstart);
			continue;
		}
		put(&w, in + mstart, 8);
		bool had_code = false;
		for (uint32_t a = 0; a < na; a++) {
			uint32_t an = u2(&r), alen = u4(&r);
			const uint8_t *ab = take(&r, alen);
			if (r.bad || !ab) {
				ret = fail(&c, "method %u: attribute runs past the end", m);
				goto out;
			}
			put2(&w, an);
			if (!utf8_is(&c, an, "Code") || had_code) {
				put4(&w, alen);
				put(&w, ab, alen);
				continue;
			}
			had_code = true;
			uint8_t pro[JVI_PROLOGUE_MAX];
			uint32_t dl = 0, pstack = 1;
			const uint8_t *d = utf8_at(&c, desc, &dl);
			int pl = prologue(&c, d, dl, acc & 0x0008, t[match].args, t[match].id,
					  methodref, arg_ref, pro, &pstack);
			if (pl < 0) {
				ret = pl;
				goto out;
			}
			size_t len_at = w.n;
			put4(&w, 0);
			size_t start = w.n;
			if ((ret = rewrite_code(&c, ab, alen, pro, (uint32_t)pl, pstack, &w)) < 0)
				goto out;
			if (w.oom) {
				ret = -ENOMEM;
				goto out;
			}
			uint32_t nl = (uint32_t)(w.n - start);
			w.p[len_at] = (uint8_t)(nl >> 24);
			w.p[len_at + 1] = (uint8_t)(nl >> 16);
			w.p[len_at + 2] = (uint8_t)(nl >> 8);
			w.p[len_at + 3] = (uint8_t)nl;
		}
		if (!had_code) {
			ret = fail(&c, "method %u has no Code attribute", m);
			goto out;
		}
		(*hooked)++;
		if (by_target)
			by_target[match]++;
	}
	from = r.off;
	if ((ret = skip_attrs(&c, &r)) < 0)
		goto out;
	if (r.off != n) {
		ret = fail(&c, "%zu bytes after the class attributes", n - r.off);
		goto out;
	}
	put(&w, in + from, r.off - from);
	if (w.oom) {
		ret = -ENOMEM;
		goto out;
	}
	ret = 0;
	if (*hooked) {
		*out = w.p;
		*out_len = w.n;
		w.p = NULL;
	}
out:
	if (ret < 0) {
		*hooked = 0;
		if (by_target)
			memset(by_target, 0, nt * sizeof(*by_target));
		if (ret == -ENOMEM && err && n_err)
			snprintf(err, n_err, "out of memory");
	}
	free(w.p);
	free(c.cp_off);
	return ret;
}

/* ------------------------------------------------------ the hook class */

const struct jvi_arg_hook jvi_arg_hooks[JVI_ARG_KINDS] = {
	[JVI_ARG_INT] = { "argI", "(II)V" },
	[JVI_ARG_LONG] = { "argJ", "(IJ)V" },
	[JVI_ARG_FLOAT] = { "argF", "(IF)V" },
	[JVI_ARG_DOUBLE] = { "argD", "(ID)V" },
	[JVI_ARG_STRING] = { "argS", "(ILjava/lang/String;)V" },
};

int jvi_hook_class(const struct jvi_hook *hook, uint8_t **out, size_t *out_len)
{
	struct wb w = { 0 };
	if (!hook || !hook->cls || !hook->name || !out || !out_len)
		return -EINVAL;
	put4(&w, 0xcafebabeu);
	put2(&w, 0);
	put2(&w, 52);           /* Java 8: no StackMapTable needed, and no code at all */
	put2(&w, 7 + 2 * JVI_ARG_KINDS);
	put_utf8(&w, hook->cls);        /* 1 */
	put1(&w, 7); put2(&w, 1);       /* 2 this */
	put_utf8(&w, "java/lang/Object"); /* 3 */
	put1(&w, 7); put2(&w, 3);       /* 4 super */
	put_utf8(&w, hook->name);       /* 5 */
	put_utf8(&w, JVI_HOOK_DESC);    /* 6 */
	for (unsigned k = 0; k < JVI_ARG_KINDS; k++) {
		put_utf8(&w, jvi_arg_hooks[k].name);   /* 7 + 2k */
		put_utf8(&w, jvi_arg_hooks[k].desc);   /* 8 + 2k */
	}
	put2(&w, 0x0001 | 0x0010 | 0x0020); /* public final super */
	put2(&w, 2);
	put2(&w, 4);
	put2(&w, 0);            /* interfaces */
	put2(&w, 0);            /* fields */
	put2(&w, 1 + JVI_ARG_KINDS); /* methods: public static native, no attributes */
	put2(&w, 0x0001 | 0x0008 | 0x0100);
	put2(&w, 5);
	put2(&w, 6);
	put2(&w, 0);
	for (unsigned k = 0; k < JVI_ARG_KINDS; k++) {
		put2(&w, 0x0001 | 0x0008 | 0x0100);
		put2(&w, 7 + 2 * k);
		put2(&w, 8 + 2 * k);
		put2(&w, 0);
	}
	put2(&w, 0);            /* class attributes */
	if (w.oom) {
		free(w.p);
		return -ENOMEM;
	}
	*out = w.p;
	*out_len = w.n;
	return 0;
}

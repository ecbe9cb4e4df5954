/*
 * HotSpot's own description of its layout (docs/JVMTI.md, "Mixed
 * stacks"). libjvm.so exports gHotSpotVMStructs (one row per field: type
 * name, field name, field type, static or not, offset or address) and
 * gHotSpotVMTypes (one row per type: name and size), with the byte offsets
 * of each row's members in gHotSpotVMStructEntry*Offset /
 * gHotSpotVMTypeEntry*Offset and the row sizes in *ArrayStride: the tables
 * the serviceability agent reads. They are filled in statically, so they
 * can be read at Agent_OnLoad, before the VM runs.
 *
 * Every offset the signal handler will add to a JavaThread* or a
 * JavaCallWrapper* is checked here against the size of its type, once, so
 * the handler never reads past the object; one field missing or out of
 * range and the layout is unusable (jvv_layout.ok false, jvv_layout.missing
 * names it).
 */
#include "jv.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "util.h"

/* Rows read at most: HotSpot 17 has ~2,000 fields, 25 fewer; a table
 * without its NULL terminator must not walk off. */
#define JVV_MAX_ROWS 100000

static const char *row_str(const char *row, uint64_t off)
{
	const char *s;
	memcpy(&s, row + off, sizeof(s));
	return s;
}

static int32_t row_i32(const char *row, uint64_t off)
{
	int32_t v;
	memcpy(&v, row + off, sizeof(v));
	return v;
}

static uint64_t row_u64(const char *row, uint64_t off)
{
	uint64_t v;
	memcpy(&v, row + off, sizeof(v));
	return v;
}

/* The size of a type by name; 0 when the table does not list it. */
static uint64_t type_size(const struct jvv_tables *t, const char *name)
{
	const char *row = t->types;
	for (uint32_t i = 0; row && i < JVV_MAX_ROWS; i++, row += t->type_stride) {
		const char *n = row_str(row, t->type_name_off);
		if (!n)
			break;
		if (!strcmp(n, name))
			return row_u64(row, t->type_size_off);
	}
	return 0;
}

/* The row of type.field (type: one of two names, the field may sit in a
 * base class's rows), or NULL. */
static const char *field_row(const struct jvv_tables *t, const char *type, const char *alt,
			     const char *field)
{
	const char *row = t->structs;
	for (uint32_t i = 0; row && i < JVV_MAX_ROWS; i++, row += t->struct_stride) {
		const char *tn = row_str(row, t->type_name_off_s);
		if (!tn)
			break;
		const char *fn = row_str(row, t->field_name_off);
		if (fn && !strcmp(fn, field) && (!strcmp(tn, type) || (alt && !strcmp(tn, alt))))
			return row;
	}
	return NULL;
}

/* A non-static field's offset, checked to hold `need` bytes inside `limit`. */
static int field(const struct jvv_tables *t, const char *type, const char *alt, const char *name,
		 uint64_t need, uint64_t limit, uint32_t *out, struct jvv_layout *l)
{
	const char *row = field_row(t, type, alt, name);
	if (!row || row_i32(row, t->is_static_off)) {
		snprintf(l->missing, sizeof(l->missing), "%s::%s", type, name);
		return -ENOENT;
	}
	uint64_t off = row_u64(row, t->offset_off);
	if (off > limit || need > limit - off || (off % 8 && need == 8)) {
		snprintf(l->missing, sizeof(l->missing), "%s::%s at %llu", type, name,
			 (unsigned long long)off);
		return -ERANGE;
	}
	*out = (uint32_t)off;
	return 0;
}

int jvv_parse(const struct jvv_tables *t, struct jvv_layout *l)
{
	memset(l, 0, sizeof(*l));
	if (!t || !t->structs || !t->types || t->struct_stride < 8 || t->type_stride < 8) {
		snprintf(l->missing, sizeof(l->missing), "gHotSpotVMStructs");
		return -ENOENT;
	}
	uint64_t thread = type_size(t, "JavaThread");
	uint64_t anchor = type_size(t, "JavaFrameAnchor");
	uint64_t wrapper = type_size(t, "JavaCallWrapper");
	/* Sizes beyond these are not HotSpot's (JavaThread is ~2 KiB). */
	if (!thread || thread > 65536 || anchor < 24 || anchor > 256 || !wrapper ||
	    wrapper > 4096) {
		snprintf(l->missing, sizeof(l->missing), "the sizes of JavaThread, "
			 "JavaFrameAnchor, JavaCallWrapper");
		return -ENOENT;
	}
	int r;
	if ((r = field(t, "JavaThread", "Thread", "_stack_base", 8, thread, &l->stack_base, l)) ||
	    (r = field(t, "JavaThread", "Thread", "_stack_size", 8, thread, &l->stack_size, l)) ||
	    (r = field(t, "JavaThread", NULL, "_anchor", anchor, thread, &l->thread_anchor, l)) ||
	    (r = field(t, "JavaFrameAnchor", NULL, "_last_Java_sp", 8, anchor, &l->last_sp, l)) ||
	    (r = field(t, "JavaFrameAnchor", NULL, "_last_Java_pc", 8, anchor, &l->last_pc, l)) ||
	    (r = field(t, "JavaCallWrapper", NULL, "_anchor", anchor, wrapper, &l->wrapper_anchor,
		       l)))
		return r;
	const char *row = field_row(t, "StubRoutines", NULL, "_call_stub_return_address");
	if (!row || !(row_i32(row, t->is_static_off)) ||
	    !row_u64(row, t->address_off)) {
		snprintf(l->missing, sizeof(l->missing), "StubRoutines::_call_stub_return_address");
		return -ENOENT;
	}
	l->call_stub_ret = (const uintptr_t *)(uintptr_t)row_u64(row, t->address_off);
	l->thread_size = (uint32_t)thread;
	l->wrapper_size = (uint32_t)wrapper;
	l->ok = true;
	return 0;
}

/* A uint64_t the VM exports, or -1 when it does not. */
static int64_t exported(void *h, const char *name)
{
	const uint64_t *p = dlsym(h, name);
	return p ? (int64_t)*p : -1;
}

int jvv_read(struct jvv_layout *l)
{
	void *h = dlopen("libjvm.so", RTLD_LAZY | RTLD_NOLOAD);
	int r = jvv_read_from(h ? h : RTLD_DEFAULT, l);
	if (h)
		dlclose(h);
	return r;
}

int jvv_read_from(void *dh, struct jvv_layout *l)
{
	struct jvv_tables t;
	memset(&t, 0, sizeof(t));
	const char *const *s = dlsym(dh, "gHotSpotVMStructs");
	const char *const *y = dlsym(dh, "gHotSpotVMTypes");
	int64_t v[10] = {
		exported(dh, "gHotSpotVMStructEntryTypeNameOffset"),
		exported(dh, "gHotSpotVMStructEntryFieldNameOffset"),
		exported(dh, "gHotSpotVMStructEntryIsStaticOffset"),
		exported(dh, "gHotSpotVMStructEntryOffsetOffset"),
		exported(dh, "gHotSpotVMStructEntryAddressOffset"),
		exported(dh, "gHotSpotVMStructEntryArrayStride"),
		exported(dh, "gHotSpotVMTypeEntryTypeNameOffset"),
		exported(dh, "gHotSpotVMTypeEntrySizeOffset"),
		exported(dh, "gHotSpotVMTypeEntryArrayStride"),
		0,
	};
	bool all = s && y;
	for (int i = 0; i < 9; i++)
		/* Each member must lie inside its row (strides are ~48 bytes). */
		all = all && v[i] >= 0 && v[i] <= 1024;
	if (all) {
		t.structs = *s;
		t.types = *y;
		t.type_name_off_s = (uint64_t)v[0];
		t.field_name_off = (uint64_t)v[1];
		t.is_static_off = (uint64_t)v[2];
		t.offset_off = (uint64_t)v[3];
		t.address_off = (uint64_t)v[4];
		t.struct_stride = (uint64_t)v[5];
		t.type_name_off = (uint64_t)v[6];
		t.type_size_off = (uint64_t)v[7];
		t.type_stride = (uint64_t)v[8];
		all = t.type_name_off_s + 8 <= t.struct_stride && t.field_name_off + 8 <= t.struct_stride &&
		      t.is_static_off + 4 <= t.struct_stride && t.offset_off + 8 <= t.struct_stride &&
		      t.address_off + 8 <= t.struct_stride && t.type_name_off + 8 <= t.type_stride &&
		      t.type_size_off + 8 <= t.type_stride;
	}
	int r = jvv_parse(all ? &t : NULL, l);
	if (r < 0)
		LOG_I("VMStructs: no %s: Java -> native -> Java stacks lack their C frames",
		      l->missing);
	else
		LOG_D("VMStructs: JavaThread %u bytes, _anchor +%u, stack +%u/+%u; "
		      "JavaCallWrapper::_anchor +%u; last_Java_sp +%u",
		      l->thread_size, l->thread_anchor, l->stack_base, l->stack_size,
		      l->wrapper_anchor, l->last_sp);
	return r;
}

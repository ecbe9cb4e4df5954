#include "symbolize.h"

#include "perfmap.h"
#include "pprof.h"

#include <dlfcn.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


struct sym_mod {
	Dwfl_Module *m;
	struct sym_module pub;
	char build_id[2 * 64 + 1];
	bool own_lines; /* the module's file carries its own .debug_line */
};

struct sym_ctx {
	Dwfl *dwfl;
	struct sym_mod *mods;
	int nmods;
	struct pmap *jit; /* /tmp/perf-<pid>.map, or NULL */
};

static const Dwfl_Callbacks sym_callbacks = {
	.find_elf = dwfl_linux_proc_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
};

/* Does the ELF itself hold line tables (built with -g, not stripped)? */
static bool sym_has_lines(Elf *elf)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;

	if (!elf || elf_getshdrstrndx(elf, &shstrndx) < 0)
		return false;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *n;
		if (gelf_getshdr(scn, &sh) && (n = elf_strptr(elf, shstrndx, sh.sh_name)) &&
		    !strcmp(n, ".debug_line"))
			return true;
	}
	return false;
}

static int sym_collect(Dwfl_Module *m, void **userdata, const char *name,
		       Dwarf_Addr start, void *arg)
{
	struct sym_ctx *s = arg;
	Dwarf_Addr lo, hi;
	const char *mainfile = NULL;
	const unsigned char *bits;
	GElf_Addr vaddr;
	int n;

	if (s->nmods >= SYM_MAX_MODULES)
		return DWARF_CB_ABORT;
	struct sym_mod *sm = &s->mods[s->nmods];
	memset(sm, 0, sizeof(*sm));
	/* Opening the ELF fills in the main file name and the build id. */
	GElf_Addr bias;
	sm->own_lines = sym_has_lines(dwfl_module_getelf(m, &bias));
	dwfl_module_info(m, NULL, &lo, &hi, NULL, NULL, &mainfile, NULL);
	sm->m = m;
	sm->pub.start = lo;
	sm->pub.limit = hi;
	sm->pub.file = mainfile ? mainfile : (name ? name : "");
	n = dwfl_module_build_id(m, &bits, &vaddr);
	if (n > 0 && n <= 64) {
		for (int i = 0; i < n; i++)
			snprintf(sm->build_id + 2 * i, 3, "%02x", bits[i]);
		sm->pub.build_id = sm->build_id;
	}
	s->nmods++;
	return DWARF_CB_OK;
}

int sym_open(int pid, struct sym_ctx **out)
{
	struct sym_ctx *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->mods = calloc(SYM_MAX_MODULES, sizeof(*s->mods));
	if (!s->mods)
		goto nomem;
	s->dwfl = dwfl_begin(&sym_callbacks);
	if (!s->dwfl)
		goto nomem;
	/* A failed report leaves an empty Dwfl: lookups fall back to dladdr. */
	if (dwfl_linux_proc_report(s->dwfl, pid) == 0) {
		dwfl_report_end(s->dwfl, NULL, NULL);
		dwfl_getmodules(s->dwfl, sym_collect, s, 0);
	}
	/*
	 * A JIT's map names code in no file. Ours only if this process's user
	 * made it (/tmp is anyone's); none, or a bad one, leaves bare addresses.
	 */
	if (pmap_load(pid, geteuid(), &s->jit) < 0)
		s->jit = NULL;
	*out = s;
	return 0;
nomem:
	sym_close(s);
	return -ENOMEM;
}

void sym_close(struct sym_ctx *s)
{
	if (!s)
		return;
	if (s->dwfl)
		dwfl_end(s->dwfl);
	pmap_free(s->jit);
	free(s->mods);
	free(s);
}

static int sym_module_index(struct sym_ctx *s, Dwfl_Module *m)
{
	for (int i = 0; i < s->nmods; i++)
		if (s->mods[i].m == m)
			return i;
	return -1;
}

int sym_lookup(struct sym_ctx *s, uint64_t pc, struct sym_frame *out)
{
	memset(out, 0, sizeof(*out));
	out->module = -1;
	if (!s)
		return -EINVAL;
	Dwfl_Module *m = s->dwfl ? dwfl_addrmodule(s->dwfl, pc) : NULL;
	if (m) {
		GElf_Off off;
		GElf_Sym sym;
		out->module = sym_module_index(s, m);
		out->function = dwfl_module_addrinfo(m, pc, &off, &sym, NULL, NULL, NULL);
		/*
		 * Line numbers only from a module's own DWARF. A system library's
		 * come from a separate debug file (libc6-dbg) whose sections are
		 * zlib-compressed: inflating them was about 60 % of the agent's
		 * CPU per capture (bench/stack_overhead.sh, perf record), for
		 * lines of libc internals. Names still come from its .symtab.
		 */
		int mi = out->module;
		Dwfl_Line *l = mi >= 0 && s->mods[mi].own_lines ? dwfl_module_getsrc(m, pc) : NULL;
		if (l) {
			int line = 0;
			const char *f = dwfl_lineinfo(l, NULL, &line, NULL, NULL, NULL);
			if (f) {
				out->file = f;
				out->line = line;
			}
		}
	}
	if (!out->function) {
		Dl_info di;
		if (dladdr((void *)(uintptr_t)pc, &di) && di.dli_sname)
			out->function = di.dli_sname;
	}
	/*
	 * Code nothing else names: a JIT's, named by its perf map if it has
	 * one (libdw's module ranges can span the anonymous code a JIT maps
	 * between a module's segments). Such a frame is in no file.
	 */
	if (!out->function && (out->function = pmap_lookup(s->jit, pc, NULL))) {
		out->module = -1;
		out->file = NULL;
		out->line = 0;
	}
	return 0;
}

int sym_module_count(struct sym_ctx *s)
{
	return s ? s->nmods : 0;
}

int sym_module_get(struct sym_ctx *s, int idx, struct sym_module *out)
{
	if (!s || idx < 0 || idx >= s->nmods)
		return -EINVAL;
	*out = s->mods[idx].pub;
	return 0;
}

int sym_pprof_mapping(struct pp_builder *b, struct sym_ctx *s, uint64_t *mapids, int module,
		      bool has_lines)
{
	struct sym_module m;
	if (module < 0 || module >= SYM_MAX_MODULES || mapids[module])
		return 0;
	if (sym_module_get(s, module, &m) < 0)
		return -EINVAL;
	return pp_add_mapping(b, m.start, m.limit, 0, m.file, m.build_id, true, has_lines,
			      &mapids[module]);
}

int sym_pprof_location(struct pp_builder *b, struct sym_ctx *s, uint64_t *mapids, uint64_t pc,
		       uint64_t *loc)
{
	struct sym_frame f;
	uint64_t fid = 0, mid = 0;
	char hex[32];
	int r;

	sym_lookup(s, pc, &f);
	if (f.module >= 0) {
		if ((r = sym_pprof_mapping(b, s, mapids, f.module, f.file != NULL)) < 0)
			return r;
		mid = mapids[f.module];
	}
	if (!f.function) {
		/* Unknown symbol: name it by address so the frame is still visible. */
		snprintf(hex, sizeof(hex), "0x%llx", (unsigned long long)pc);
		f.function = hex;
	}
	if ((r = pp_add_function(b, f.function, NULL, f.file, 0, &fid)) < 0)
		return r;
	return pp_add_location(b, mid, pc, fid, f.line, loc);
}

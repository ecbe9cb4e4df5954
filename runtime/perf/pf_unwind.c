/*
 * Unwinding and symbolisation with libdw. One Dwfl holds the target's
 * modules (from /proc/<pid>/maps). Its process state is attached with our own
 * thread callbacks: the "thread" is the sample being unwound, its registers
 * come from PERF_SAMPLE_REGS_USER and its memory is the PERF_SAMPLE_STACK_USER
 * copy. elfutils 0.188 has no perf-sample helper, so this is the way in.
 */
#include "pf.h"

#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

#define PF_REFRESH_MS  1000 /* at most one re-read of the maps per second */

struct pf_mod {
	Dwfl_Module *m;
	struct pf_module pub;
	char name[32];
	char build_id[2 * 64 + 1];
};

struct pf_unwind {
	pid_t pid;
	Dwfl *dwfl;
	bool attached;
	const struct pf_sample *cur; /* the sample being unwound */
	uint64_t misses;             /* leaf pcs in no known module since the last refresh */
	uint64_t refreshed_ms;
	struct pf_mod *mods;
	int nmods;
	char exe[4096];              /* /proc/<pid>/exe at the start */
};

/*
 * Dwfl_Callbacks.find_elf. A module's path comes from the target's maps,
 * which the target shapes (a path seen through its own mount namespace, a
 * file it renames and replaces): open it without following a link in the
 * last component, insist on a regular file (a FIFO or a device could block
 * or feed endless bytes), and refuse a path that resolves elsewhere than it
 * reads, which a link in an earlier component would do. The helper already
 * runs as the target's user here (main.c), so what is left is read with
 * that user's rights only. Names that are no path (the vDSO) go to libdw's
 * own callback, which reads them from the process's memory.
 */
static int cb_find_elf(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr base,
		       char **file_name, Elf **elfp)
{
	char self[64], real[4096];
	struct stat st;

	if (name[0] != '/')
		return dwfl_linux_proc_find_elf(mod, userdata, name, base, file_name, elfp);
	int fd = open(name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		LOG_D("module %s not opened: %s", name, strerror(errno));
		return -1;
	}
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(self, real, sizeof(real) - 1);
	real[n > 0 ? n : 0] = '\0';
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || strcmp(real, name) != 0) {
		LOG_D("module %s not opened: %s", name,
		      strcmp(real, name) ? "a link in its path" : "not a regular file");
		close(fd);
		return -1;
	}
	*file_name = strdup(name);
	if (!*file_name) {
		close(fd);
		return -1;
	}
	return fd;
}

static const Dwfl_Callbacks pf_dwfl_callbacks = {
	.find_elf = cb_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
};

/* The process has one thread as far as libdw knows: the current sample's. */
static pid_t cb_next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
	struct pf_unwind *u = arg;
	if (*thread_argp || !u->cur)
		return 0;
	*thread_argp = u;
	return (pid_t)u->cur->tid;
}

static bool cb_get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
	struct pf_unwind *u = arg;
	if (!u->cur || (pid_t)u->cur->tid != tid)
		return false;
	*thread_argp = u;
	return true;
}

/*
 * Only the stack copy is readable. The live process has moved on since the
 * sample, so reading its memory would unwind through someone else's frames;
 * CFI itself comes from the ELF files, not from here.
 */
static bool cb_memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
	struct pf_unwind *u = arg;
	const struct pf_sample *s = u->cur;
	if (!s || s->stack_size < sizeof(*result))
		return false;
	uint64_t sp = s->regs[PF_DWARF_SP];
	if (addr < sp || addr - sp > s->stack_size - sizeof(*result))
		return false;
	memcpy(result, s->stack + (addr - sp), sizeof(*result));
	return true;
}

static bool cb_set_initial_registers(Dwfl_Thread *thread, void *thread_arg)
{
	struct pf_unwind *u = thread_arg;
	Dwarf_Word regs[PF_NREGS];
	for (int i = 0; i < PF_NREGS; i++)
		regs[i] = u->cur->regs[i];
	if (!dwfl_thread_state_registers(thread, 0, PF_NREGS, regs))
		return false;
	dwfl_thread_state_register_pc(thread, regs[PF_DWARF_PC]);
	return true;
}

static const Dwfl_Thread_Callbacks pf_thread_callbacks = {
	.next_thread = cb_next_thread,
	.get_thread = cb_get_thread,
	.memory_read = cb_memory_read,
	.set_initial_registers = cb_set_initial_registers,
};

int pf_unwind_open(pid_t pid, struct pf_unwind **out)
{
	struct pf_unwind *u = calloc(1, sizeof(*u));
	int r;

	*out = NULL;
	if (!u)
		return -ENOMEM;
	u->pid = pid;
	u->refreshed_ms = util_mono_ms();
	char link[64];
	snprintf(link, sizeof(link), "/proc/%d/exe", (int)pid);
	ssize_t n = readlink(link, u->exe, sizeof(u->exe) - 1);
	u->exe[n > 0 ? n : 0] = '\0';
	u->dwfl = dwfl_begin(&pf_dwfl_callbacks);
	if (!u->dwfl) {
		free(u);
		return -ENOMEM;
	}
	r = dwfl_linux_proc_report(u->dwfl, pid);
	dwfl_report_end(u->dwfl, NULL, NULL);
	if (r != 0) {
		/* An errno, or -1 when a module could not be reported. */
		r = r > 0 ? -r : -EINVAL;
		pf_unwind_close(u);
		return r;
	}
	/* Without a state only the frame-pointer chain is left. */
	u->attached = dwfl_attach_state(u->dwfl, NULL, pid, &pf_thread_callbacks, u);
	if (!u->attached)
		LOG_W("DWARF unwinding unavailable: %s", dwfl_errmsg(-1));
	*out = u;
	return 0;
}

struct pf_walk {
	uint64_t *frames;
	size_t n, max;
};

static int cb_frame(Dwfl_Frame *state, void *arg)
{
	struct pf_walk *w = arg;
	Dwarf_Addr pc;
	bool activation;

	if (w->n >= w->max || !dwfl_frame_pc(state, &pc, &activation))
		return DWARF_CB_ABORT;
	/* pc 0 ends the chain; a top-bit pc is no user address. */
	if (pc == 0 || (pc & PF_FRAME_RET))
		return DWARF_CB_ABORT;
	w->frames[w->n++] = activation ? pc : pc | PF_FRAME_RET;
	return DWARF_CB_OK;
}

size_t pf_unwind_dwarf(struct pf_unwind *u, const struct pf_sample *s, uint64_t *frames,
		       size_t max)
{
	struct pf_walk w = { frames, 0, max };

	if (!u->attached || !s->has_regs)
		return 0;
	u->cur = s;
	/* An error past some frames still leaves those frames: keep them. */
	dwfl_getthread_frames(u->dwfl, (pid_t)s->tid, cb_frame, &w);
	u->cur = NULL;
	if (w.n && !dwfl_addrmodule(u->dwfl, PF_FRAME_PC(frames[0])))
		u->misses++;
	return w.n;
}

size_t pf_unwind_fp(const struct pf_sample *s, uint64_t *frames, size_t max)
{
	bool user = false;
	size_t n = 0;

	for (uint64_t i = 0; i < s->ncallchain && n < max; i++) {
		uint64_t v;
		memcpy(&v, s->callchain + 8 * i, sizeof(v));
		if (v >= PERF_CONTEXT_MAX) {
			user = v == PERF_CONTEXT_USER;
			continue;
		}
		if (!user)
			continue;
		if (v == 0 || (v & PF_FRAME_RET))
			break;
		/* The first user entry is the sampled ip, the rest return addresses. */
		frames[n] = n == 0 ? v : v | PF_FRAME_RET;
		n++;
	}
	return n;
}

void pf_unwind_refresh(struct pf_unwind *u)
{
	uint64_t now = util_mono_ms();

	if (!u->misses || now - u->refreshed_ms < PF_REFRESH_MS)
		return;
	u->misses = 0;
	u->refreshed_ms = now;
	/*
	 * _add keeps the modules already known: a library unmapped since (or a
	 * process that exited) must still symbolise the samples taken in it.
	 */
	dwfl_report_begin_add(u->dwfl);
	int r = dwfl_linux_proc_report(u->dwfl, u->pid);
	dwfl_report_end(u->dwfl, NULL, NULL);
	LOG_D("re-read /proc/%d/maps: %d", (int)u->pid, r);
}

/* The module's index in u->mods, adding it on first sight; -1 if none. */
static int module_index(struct pf_unwind *u, Dwfl_Module *m)
{
	void **ud;
	Dwarf_Addr lo, hi;
	const unsigned char *bits;
	GElf_Addr vaddr, bias;

	const char *name = dwfl_module_info(m, &ud, &lo, &hi, NULL, NULL, NULL, NULL);
	if (*ud)
		return (int)(intptr_t)*ud - 1;
	if (u->nmods >= PF_MAX_MODULES)
		return -1;
	if (!u->mods && !(u->mods = calloc(PF_MAX_MODULES, sizeof(*u->mods))))
		return -1;
	struct pf_mod *pm = &u->mods[u->nmods];
	pm->m = m;
	pm->pub.start = lo;
	pm->pub.limit = hi;
	pm->pub.file = name ? name : "";
	/* The vDSO is reported as "[vdso: <pid>]"; the pid is noise in a mapping. */
	if (name && !strncmp(name, "[vdso", 5)) {
		util_strlcpy(pm->name, "[vdso]", sizeof(pm->name));
		pm->pub.file = pm->name;
	}
	dwfl_module_getelf(m, &bias); /* loads the ELF, which holds the build id */
	int n = dwfl_module_build_id(m, &bits, &vaddr);
	if (n > 0 && n <= 64) {
		for (int i = 0; i < n; i++)
			snprintf(pm->build_id + 2 * i, 3, "%02x", bits[i]);
		pm->pub.build_id = pm->build_id;
	}
	*ud = (void *)(intptr_t)(u->nmods + 1);
	return u->nmods++;
}

void pf_unwind_symbolize(struct pf_unwind *u, uint64_t frame, struct pf_sym *out)
{
	/* A return address points after the call: look up the call itself. */
	uint64_t pc = PF_FRAME_PC(frame) - ((frame & PF_FRAME_RET) ? 1 : 0);
	GElf_Off off;
	GElf_Sym sym;

	memset(out, 0, sizeof(*out));
	out->module = -1;
	Dwfl_Module *m = dwfl_addrmodule(u->dwfl, pc);
	if (!m)
		return;
	out->module = module_index(u, m);
	out->function = dwfl_module_addrinfo(m, pc, &off, &sym, NULL, NULL, NULL);
	Dwfl_Line *l = dwfl_module_getsrc(m, pc);
	if (l) {
		int line = 0;
		const char *file = dwfl_lineinfo(l, NULL, &line, NULL, NULL, NULL);
		if (file) {
			out->file = file;
			out->line = line;
		}
	}
}

struct main_find {
	const char *exe;
	Dwfl_Module *m;
};

static int cb_find_main(Dwfl_Module *m, void **ud, const char *name, Dwarf_Addr start, void *arg)
{
	struct main_find *f = arg;
	if (name && !strcmp(name, f->exe)) {
		f->m = m;
		return DWARF_CB_ABORT;
	}
	return DWARF_CB_OK;
}

int pf_unwind_main_module(struct pf_unwind *u)
{
	struct main_find f = { u->exe, NULL };
	if (!u->exe[0])
		return -1;
	dwfl_getmodules(u->dwfl, cb_find_main, &f, 0);
	return f.m ? module_index(u, f.m) : -1;
}

int pf_unwind_module(struct pf_unwind *u, int idx, struct pf_module *out)
{
	if (idx < 0 || idx >= u->nmods)
		return -ENOENT;
	*out = u->mods[idx].pub;
	return 0;
}

void pf_unwind_close(struct pf_unwind *u)
{
	if (!u)
		return;
	if (u->dwfl)
		dwfl_end(u->dwfl);
	free(u->mods);
	free(u);
}

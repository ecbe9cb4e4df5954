/*
 * profilingd-perf: CPU stack samples of a process with no runtime agent.
 * The daemon runs it as root:
 *
 *   profilingd-perf --pid P [--start-time S] --hz H --duration-ms D > profile.pb.gz
 *
 * S is P's start time (/proc/P/stat field 22) when the daemon bound the
 * capture to P: once the events are open it is read again, and a P that
 * is another process by then (its pid reused) fails the run, with
 * "error: target replaced: ..." and exit 70, before a sample is taken.
 *
 * fd 1 gets gzip'd pprof; the last line on fd 2 is the status,
 * "ok samples=N short=M unwinder=dwarf|fp threads=T[ unregistered_agent=LIB]"
 * or "error: ...". unregistered_agent: the target maps libprofiling_preload.so
 * or libprofiling.so, whose agent should have registered with the daemon.
 * Exit 0, 70 on an error. A process that used no CPU gets an empty profile
 * (samples=0), not an error.
 */
#include "pf.h"

#include <errno.h>
#include <linux/capability.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sysexits.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "perf_policy.h"
#include "names.h"
#include "perfmap.h"
#include "sandbox.h"
#include "util.h"

struct run {
	struct pf_unwind *u;
	struct pf_agg *agg;
	struct pf_counts c;
	uint64_t taken;
	uint64_t hits;      /* method events: hits the samples stand for */
	uint64_t period_ns; /* for a sample without a period */
	uint64_t frames[PF_MAX_FRAMES], fp[PF_MAX_FRAMES];
	bool trace;         /* --format perfetto: every recorded hit kept */
	struct pf_hits hits_v;
	/* --budget-us: this helper's own time per recorded hit (unwinding
	 * and merging it), summed per target (the sample's probe); a target
	 * whose mean passes budget_ns has its probe closed alone (over_k,
	 * its mean), the others run on; over once none is left. */
	bool budget_on, over;
	uint64_t budget_ns, spent_ns, spent_n;
	uint64_t spent_k[PF_MAX_UPROBES], n_k[PF_MAX_UPROBES], over_k[PF_MAX_UPROBES];
	/* --max-hits: recorded hits (hits) stop at max_hits exactly; at the
	 * cap every probe is disabled at once and later samples (written
	 * before the disable took) are counted in past_cap, not recorded. */
	struct pf_events *ev;
	unsigned nmethods;
	uint64_t max_hits, past_cap;
	bool capped;
	int probe;          /* the target of the sample being handled, or -1 */
	/* #args=TYPES per target ("" none), and the distinct sets recorded. */
	pid_t pid;
	int pidfd;          /* the target's, for string reads; -1 none */
	char types[PF_MAX_UPROBES][NARGS_MAX + 1];
	struct pf_argtab *argtab;
	uint64_t args_dropped; /* past PF_MAX_ARGSETS: counted, not recorded */
};

/* Samples before the mean is judged: one slow first unwind (its module's
 * CFI read) must not end a capture. */
#define PF_BUDGET_MIN_SAMPLES 16

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: profilingd-perf --pid P [--start-time S] --hz H --duration-ms D\n"
		"                       [--verbose] [--debug-seccomp]\n"
		"       profilingd-perf --pid P [--start-time S] --duration-ms D\n"
		"                       --method PATH:SYMBOL|PATH:+0xOFFSET|buildid:HEX:+0xOFFSET\n"
		"                                [#args=TYPES] ...\n"
		"                       [--every N]\n"
		"                       [--max-hits M] [--format pprof|perfetto] [--budget-us B]\n"
		"Method events (docs/METHOD_EVENTS.md): a uprobe on each target (1..%d),\n"
		"the stack of every Nth hit; stops after M hits exactly (default %d).\n"
		"#args=TYPES: the hit's arguments, one letter per register rdi..r9:\n"
		"i signed, u unsigned, p pointer, s string (64 bytes), - skipped.\n"
		"--format perfetto: a Perfetto trace (uncompressed), one instant event per\n"
		"recorded hit on its thread's track with its stack, instead of pprof.\n"
		"--budget-us B: once this helper's mean time per recorded hit (after %d)\n"
		"is over B µs, the probes are removed and the capture ends (over_budget=).\n"
		"S: P's start time (/proc/P/stat field 22); P must still have it once its\n"
		"events are open, else nothing is sampled (exit 70).\n"
		"Samples the user-mode stacks of every thread of P at H Hz of its CPU time\n"
		"for D ms and writes gzip'd pprof to stdout; the last stderr line is the status.\n"
		"  H: 1..%d (and at most perf_event_max_sample_rate), D: 1..%u\n"
		"Once the events are open it runs under policy/seccomp/perf.policy;\n"
		"--debug-seccomp traps a forbidden call and names it (exit 75) instead of\n"
		"a kill.\n",
		PF_MAX_UPROBES, PF_MAX_SAMPLES, PF_BUDGET_MIN_SAMPLES, PF_MAX_HZ,
		PF_MAX_DURATION_MS);
}

#define fail(...) util_fail(EX_SOFTWARE, __VA_ARGS__)

/* A decimal in 1..max, nothing else. */
static int parse_num(const char *s, unsigned long max, unsigned long *out)
{
	char *end;
	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || *end || v == 0 || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

static void handle_sample(struct run *run, const struct pf_sample *s);

static void on_sample(const struct pf_sample *s, void *arg)
{
	struct run *run = arg;
	run->probe = run->nmethods ? pf_events_probe_of(run->ev, s->tid, s->id) : -1;
	if (!run->budget_on) {
		handle_sample(run, s);
		return;
	}
	/* vDSO clock: no syscall, ~20 ns, against the µs an unwind takes. */
	uint64_t t0 = mono_ns();
	handle_sample(run, s);
	uint64_t dt = mono_ns() - t0;
	run->spent_ns += dt;
	run->spent_n++;
	int k = run->probe;
	if (k < 0 || run->over_k[k])
		return;
	run->spent_k[k] += dt;
	run->n_k[k]++;
	if (run->n_k[k] >= PF_BUDGET_MIN_SAMPLES && run->spent_k[k] > run->budget_ns * run->n_k[k]) {
		run->over_k[k] = run->spent_k[k] / run->n_k[k];
		unsigned left = pf_events_close_probe(run->ev, (unsigned)k);
		LOG_I("target %d over budget: %" PRIu64 " ns per recorded hit on average over %"
		      PRIu64 " hits, the budget is %" PRIu64 " µs: its probe goes, %u left", k,
		      run->over_k[k], run->n_k[k], run->budget_ns / 1000, left);
		if (left == 0)
			run->over = true;
	}
}

static void handle_sample(struct run *run, const struct pf_sample *s)
{
	uint64_t period = s->period ? s->period : 1;
	if (run->nmethods) {
		if (run->capped || run->hits + period > run->max_hits) {
			run->past_cap++;
			if (!run->capped)
				pf_events_disable(run->ev);
			run->capped = true;
			return;
		}
		run->hits += period;
		if (run->hits >= run->max_hits) {
			/* At once, not at the next poll: the target may be in a loop. */
			pf_events_disable(run->ev);
			run->capped = true;
		}
	} else {
		run->hits += period;
	}
	if (run->taken >= PF_MAX_SAMPLES) {
		run->c.dropped++;
		return;
	}
	run->taken++;
	const uint64_t *f = run->frames;
	enum pf_unwinder unw = PF_UNW_DWARF;
	size_t n = pf_unwind_dwarf(run->u, s, run->frames, PF_MAX_FRAMES);
	if (n < 2) {
		/* No CFI for this pc, or a stack cut short: the kernel's FP walk may do better. */
		size_t m = pf_unwind_fp(s, run->fp, PF_MAX_FRAMES);
		if (m > n) {
			n = m;
			f = run->fp;
			unw = PF_UNW_FP;
		}
	}
	if (n == 0) {
		run->c.empty++;
		return;
	}
	uint32_t args = 0;
	if (run->probe >= 0 && run->types[run->probe][0]) {
		struct pf_argset as;
		if (pf_args_read(run->pid, run->pidfd, run->types[run->probe], s, &as) == 0 &&
		    as.n &&
		    pf_argtab_add(run->argtab, &as, &args) < 0) {
			run->args_dropped++;
			run->c.dropped++;
			return;
		}
	}
	if (pf_agg_add_probe(run->agg, s->tid, run->probe, args, unw, f, n,
			     s->period ? s->period : run->period_ns) < 0) {
		run->c.dropped++;
		return;
	}
	run->c.samples++;
	/* The hit's own event (--format perfetto): past the cap it is in the
	 * counts and the stacks, not in the trace; pf_hits counts the drop. */
	if (run->trace)
		(void)pf_hits_add(&run->hits_v, s->time_ns, s->tid, pf_agg_last(run->agg));
	if (unw == PF_UNW_DWARF)
		run->c.dwarf++;
	else
		run->c.fp++;
	if (n < 2)
		run->c.short_++;
}

/* False once pid is gone or a zombie: nothing left to sample. */
static bool process_running(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* The state follows the last ')': comm may itself hold one. */
	char *p = strrchr(buf, ')');
	return p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X' && p[2] != '\0';
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static unsigned threads_with_samples(const struct pf_agg *agg)
{
	size_t n = pf_agg_size(agg);
	unsigned k = 0;
	uint32_t *t = malloc((n ? n : 1) * sizeof(*t));
	if (!t)
		return 0;
	for (size_t i = 0; i < n; i++) {
		struct pf_stack st;
		pf_agg_get(agg, i, &st);
		t[i] = st.tid;
	}
	qsort(t, n, sizeof(*t), cmp_u32);
	for (size_t i = 0; i < n; i++)
		if (i == 0 || t[i] != t[i - 1])
			k++;
	free(t);
	return k;
}

/* One event fd per thread: lift the soft limit towards the caps. */
static void raise_nofile(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	rlim_t want = PF_MAX_EVENTS + 64;
	if (rl.rlim_cur >= want)
		return;
	rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
	setrlimit(RLIMIT_NOFILE, &rl);
}

static long max_sample_rate(void)
{
	long v = 0;
	FILE *f = fopen("/proc/sys/kernel/perf_event_max_sample_rate", "re");
	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v;
}

/*
 * Least privilege before anything the target names is opened or parsed:
 * its maps name its modules, and their ELF, DWARF and debuglink bytes are
 * the target's too. With one uid and one gid in the target
 * (/proc/<pid>/status, written by the kernel) the helper becomes that user
 * first, keeping CAP_PERFMON (perf_event_open past perf_event_paranoid;
 * CAP_SYS_ADMIN on kernels before 5.8, which lack PERFMON) and
 * CAP_IPC_LOCK (ring buffers past perf_event_mlock_kb). A root target, or
 * one with mixed ids (a setuid program), is only reachable with
 * CAP_SYS_PTRACE, so there the helper stays root and keeps that too.
 * *as_target tells which.
 */
static int perfmon_cap(void)
{
	return prctl(PR_CAPBSET_READ, CAP_PERFMON, 0, 0, 0) >= 0 ? CAP_PERFMON : CAP_SYS_ADMIN;
}

/*
 * Method events (uprobes) keep CAP_SYS_ADMIN as well: the kernel's uprobe
 * PMU takes nothing less (CAP_PERFMON alone gets EACCES, measured on
 * 6.18), and threads the target starts later need new probes at each
 * rescan. What the helper can do with it is bounded by perf.policy.
 */
static int drop_privileges(pid_t pid, bool uprobes, bool *as_target, char *how, size_t n)
{
	int keep[5], nk = 0;
	unsigned u[4], g[4];
	int r = util_proc_creds((int)pid, u, g);
	if (r < 0)
		return r;
	keep[nk++] = perfmon_cap();
	keep[nk++] = CAP_IPC_LOCK;
	if (uprobes && keep[0] != CAP_SYS_ADMIN)
		keep[nk++] = CAP_SYS_ADMIN;
	bool one = u[0] == u[1] && u[1] == u[2] && g[0] == g[1] && g[1] == g[2];
	*as_target = one && u[0] != 0;
	if (!*as_target) {
		keep[nk++] = CAP_SYS_PTRACE;
		snprintf(how, n, "root, %s", one ? "the target is root" : "the target has mixed ids");
		return sbx_drop(keep, (size_t)nk, (uid_t)-1, (gid_t)-1);
	}
	snprintf(how, n, "uid %u gid %u", u[0], g[0]);
	return sbx_drop(keep, (size_t)nk, (uid_t)u[0], (gid_t)g[0]);
}

/*
 * Once the first events are open, what sampling still needs: events and
 * rings for threads the target starts later (rescans). As the target's own
 * user, the kernel opens user-only events of its threads without
 * CAP_PERFMON when perf_event_paranoid <= 2, so it goes; their rings may
 * still pass perf_event_mlock_kb, so CAP_IPC_LOCK stays. As root (a root or
 * setuid target) nothing changes: events and /proc/<pid>/maps of such a
 * process need CAP_SYS_PTRACE and CAP_PERFMON all along.
 */
static int drop_setup_caps(bool as_target, char *how, size_t n)
{
	long paranoid = 3;
	FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "re");
	if (f) {
		if (fscanf(f, "%ld", &paranoid) != 1)
			paranoid = 3;
		fclose(f);
	}
	if (!as_target || paranoid > 2)
		return 0;
	int keep[] = { CAP_IPC_LOCK };
	size_t l = strlen(how);
	if (l < n)
		snprintf(how + l, n - l, ", CAP_PERFMON dropped");
	return sbx_drop(keep, 1, (uid_t)-1, (gid_t)-1);
}

/*
 * Does the target map one of profilingd's own agent libraries? Then its
 * agent should have registered with the daemon and did not (a wrong or
 * missing PROFILINGD_SOCKET, another daemon): the status line says so and
 * the daemon puts it in the result's note. Read as the target's user;
 * at most PF_MAPS_MAX_LINES lines.
 */
#define PF_MAPS_MAX_LINES 65536
static const char *agent_lib_of(pid_t pid)
{
	static const char *const libs[] = { "libprofiling_preload.so", "libprofiling.so" };
	static char found[32];
	char path[64], line[4096];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return NULL;
	found[0] = '\0';
	for (int n = 0; !found[0] && n < PF_MAPS_MAX_LINES && fgets(line, sizeof(line), f); n++) {
		const char *base = strrchr(line, '/');
		for (size_t i = 0; base && i < sizeof(libs) / sizeof(libs[0]); i++)
			if (!strncmp(base + 1, libs[i], strlen(libs[i])))
				snprintf(found, sizeof(found), "%s", libs[i]);
	}
	fclose(f);
	return found[0] ? found : NULL;
}

/*
 * A method target "PATH:SYMBOL" or "PATH:+0xOFFSET" to a uprobe. PATH is
 * opened here, as the target's user (the caller has dropped to it), so a
 * file that user cannot read is refused by the kernel's own check; the
 * uprobe then names that open file (/proc/self/fd/N), never the path
 * again, so a path swapped after the check cannot redirect it. The fd stays
 * open for the rescans' opens. 0, or -errno with why set.
 */
/*
 * "buildid:HEX:+0xOFF": the file mapped executable in pid whose GNU build
 * id is HEX, found through /proc/<pid>/maps (as the target's user, at
 * most PF_MAPS_MAX_LINES lines), copied into path. 0, or -ENOENT with why.
 */
static int path_of_build_id(pid_t pid, const char *hex, size_t hexlen, char *path, size_t n,
			    char *why, size_t whylen)
{
	char maps[64], line[4096], last[4096] = "", id[2 * 64 + 1];
	snprintf(maps, sizeof(maps), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(maps, "re");
	if (!f) {
		snprintf(why, whylen, "cannot read %s: %s", maps, strerror(errno));
		return -ESRCH;
	}
	int r = -ENOENT;
	for (int k = 0; r && k < PF_MAPS_MAX_LINES && fgets(line, sizeof(line), f); k++) {
		char perm[8];
		int at = 0;
		line[strcspn(line, "\n")] = '\0';
		if (sscanf(line, "%*x-%*x %7s %*x %*s %*u %n", perm, &at) != 1 || !at ||
		    perm[2] != 'x' || line[at] != '/' || !strcmp(line + at, last))
			continue;
		util_strlcpy(last, line + at, sizeof(last));
		int fd = open(last, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
		if (fd < 0)
			continue;
		struct stat st;
		if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
		    pf_elf_build_id(fd, id, sizeof(id)) == 0 && strlen(id) == hexlen &&
		    !strncasecmp(id, hex, hexlen) && strlen(last) < n) {
			snprintf(path, n, "%s", last);
			r = 0;
		}
		close(fd);
	}
	fclose(f);
	if (r)
		snprintf(why, whylen, "no file mapped executable in pid %d has build id %.*s", (int)pid,
			 (int)(hexlen > 128 ? 128 : hexlen), hex);
	return r;
}

/*
 * Where a function's probe goes: 4 bytes further when the function starts
 * with endbr64 (f3 0f 1e fa) followed by push %rbp (55), else at its entry.
 * Why: the kernel (6.18's arch/x86/kernel/uprobes.c) emulates push and
 * nops at the breakpoint, one trap, but runs endbr64 out of line with a
 * single step, a second trap: ~13 us per hit against ~1 us on this VM
 * (bench/uprobe_cost). Safe: endbr64 is a nop to the code (only indirect
 * branches check for it, and they land on it before the probe), so at the
 * push the registers, stack and CFA are the entry's and every call passes
 * it exactly once; no loop can jump back to a push %rbp without
 * unbalancing the stack, so the probe cannot count an iteration as a call.
 * An explicit +0xOFFSET is probed where it says.
 */
static uint64_t past_endbr(int fd, uint64_t off)
{
	static const uint8_t endbr_push[5] = { 0xf3, 0x0f, 0x1e, 0xfa, 0x55 };
	uint8_t b[5];
	if (pread(fd, b, sizeof(b), (off_t)off) != (ssize_t)sizeof(b) ||
	    memcmp(b, endbr_push, sizeof(b)))
		return 0;
	return 4;
}

static int resolve_target(pid_t pid, const char *spec, struct pf_uprobe *up, int *fd_out,
			  char *why, size_t whylen)
{
	char path[4096], byid[4096];
	const char *colon = strrchr(spec, ':');
	struct stat st;
	int r;

	*fd_out = -1;
	if (!strncmp(spec, "buildid:", 8)) {
		const char *hex = spec + 8;
		size_t hl = strspn(hex, "0123456789abcdefABCDEF");
		if (hl < 2 || hl > 128 || hl % 2 || hex + hl != colon || colon[1] != '+') {
			snprintf(why, whylen, "method target '%.200s': expected buildid:HEX:+0xOFFSET",
				 spec);
			return -EINVAL;
		}
		if ((r = path_of_build_id(pid, hex, hl, byid, sizeof(byid), why, whylen)) < 0)
			return r;
		/* On as a path target: same open, same checks. */
		snprintf(path, sizeof(path), "%s", byid);
		char spec2[4096 + 64];
		snprintf(spec2, sizeof(spec2), "%s%s", path, colon);
		return resolve_target(pid, spec2, up, fd_out, why, whylen);
	}
	if (!colon || colon == spec || !colon[1] || (size_t)(colon - spec) >= sizeof(path) ||
	    spec[0] != '/') {
		snprintf(why, whylen, "method target '%.200s': expected /PATH:SYMBOL or "
			 "/PATH:+0xOFFSET", spec);
		return -EINVAL;
	}
	memcpy(path, spec, (size_t)(colon - spec));
	path[colon - spec] = '\0';
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		r = -errno;
		snprintf(why, whylen, "method target %.200s: %s (opened as the target's user)",
			 path, strerror(-r));
		return r;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		snprintf(why, whylen, "method target %.200s: not a regular file", path);
		return -EINVAL;
	}
	char w[256];
	uint64_t off = 0;
	if (colon[1] == '+') {
		char *end;
		errno = 0;
		off = strtoull(colon + 2, &end, 0);
		r = errno || *end || end == colon + 2 ? -EINVAL : pf_elf_check_offset(fd, off, w, sizeof(w));
		if (r == -EINVAL)
			snprintf(w, sizeof(w), "bad offset '%.40s'", colon + 2);
	} else {
		r = pf_elf_symbol_offset(fd, colon + 1, &off, w, sizeof(w));
		if (r == 0)
			off += past_endbr(fd, off);
	}
	if (r < 0) {
		close(fd);
		snprintf(why, whylen, "method target %.200s: %s", path, w);
		return r;
	}
	snprintf(up->path, sizeof(up->path), "/proc/self/fd/%d", fd);
	up->offset = off;
	*fd_out = fd;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "start-time", required_argument, NULL, 's' },
		{ "hz", required_argument, NULL, 'f' },
		{ "duration-ms", required_argument, NULL, 'd' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "debug-seccomp", no_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ "method", required_argument, NULL, 'm' },
		{ "every", required_argument, NULL, 'e' },
		{ "max-hits", required_argument, NULL, 'x' },
		{ "format", required_argument, NULL, 'F' },
		{ "budget-us", required_argument, NULL, 'B' },
		{ 0 }
	};
	const char *methods[PF_MAX_UPROBES];
	struct pf_uprobe up[PF_MAX_UPROBES];
	int upfd[PF_MAX_UPROBES];
	unsigned nmethods = 0;
	unsigned long every = 1, max_hits = PF_MAX_SAMPLES;
	unsigned long pid = 0, hz = 0, dur = 0;
	unsigned long long start_time = 0;
	struct pf_events *ev = NULL;
	struct run run = { 0 };
	char why[512];
	int c, r, verbose = 0, debug_seccomp = 0, rc = EX_SOFTWARE;

	while ((c = getopt_long(argc, argv, "p:s:f:d:vh", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (parse_num(optarg, INT32_MAX, &pid) < 0)
				return fail("--pid: expected a process id, got '%s'", optarg);
			break;
		case 's': {
			char *end;
			errno = 0;
			start_time = strtoull(optarg, &end, 10);
			if (errno || *end || optarg[0] < '0' || optarg[0] > '9' || !start_time)
				return fail("--start-time: expected clock ticks, got '%s'", optarg);
			break;
		}
		case 'f':
			if (parse_num(optarg, PF_MAX_HZ, &hz) < 0)
				return fail("--hz: expected 1..%d, got '%s'", PF_MAX_HZ, optarg);
			break;
		case 'd':
			if (parse_num(optarg, PF_MAX_METHOD_DURATION_MS, &dur) < 0)
				return fail("--duration-ms: expected 1..%u, got '%s'",
					    PF_MAX_DURATION_MS, optarg);
			break;
		case 'm':
			if (nmethods >= PF_MAX_UPROBES)
				return fail("--method: at most %d targets", PF_MAX_UPROBES);
			methods[nmethods++] = optarg;
			break;
		case 'e':
			if (parse_num(optarg, 1000000, &every) < 0)
				return fail("--every: expected 1..1000000, got '%s'", optarg);
			break;
		case 'x':
			if (parse_num(optarg, 1ul << 32, &max_hits) < 0)
				return fail("--max-hits: expected 1..2^32, got '%s'", optarg);
			break;
		case 'F':
			if (!strcmp(optarg, "perfetto"))
				run.trace = true;
			else if (strcmp(optarg, "pprof"))
				return fail("--format: expected pprof or perfetto, got '%s'", optarg);
			break;
		case 'B': {
			/* 0 is a budget too (any time is over it): parse_num refuses 0. */
			unsigned long b = 0;
			if (strcmp(optarg, "0") && parse_num(optarg, 1000000, &b) < 0)
				return fail("--budget-us: expected 0..1000000, got '%s'", optarg);
			run.budget_on = true;
			run.budget_ns = (uint64_t)b * 1000;
			break;
		}
		case 'v': verbose = 1; break;
		case 'S': debug_seccomp = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return fail("bad usage");
		}
	}
	if (run.trace && !nmethods)
		return fail("--format perfetto is for method events (--method)");
	if (run.budget_on && !nmethods)
		return fail("--budget-us is for method events (--method)");
	if (nmethods && !hz)
		hz = 1; /* unused: method events are hits, not a rate */
	/* Method events run until their config's expiry (24 h), samples 10 min. */
	if (!nmethods && dur > PF_MAX_DURATION_MS)
		return fail("--duration-ms: expected 1..%u", PF_MAX_DURATION_MS);
	if (optind < argc || !pid || !hz || !dur) {
		usage(stderr);
		return fail("--pid, --hz and --duration-ms are required");
	}
	for (unsigned k = 0; k < PF_MAX_UPROBES; k++)
		upfd[k] = -1;
	log_init(LOG_SINK_STDERR, verbose ? LOG_DEBUG : LOG_WARNING, "profilingd-perf");
	/*
	 * Not dumpable from the start: once it runs as the target's user, that
	 * user must not ptrace it or read its /proc/<pid>/mem and fds (sbx_drop
	 * clears the flag again after the switch, which resets it).
	 */
	if ((r = sbx_no_dump()) < 0)
		return fail("PR_SET_DUMPABLE: %s", strerror(-r));
	if ((pid_t)pid == getpid())
		return fail("cannot sample profilingd-perf itself");
	long maxrate = max_sample_rate();
	if (maxrate > 0 && (long)hz > maxrate)
		return fail("--hz %lu is above perf_event_max_sample_rate (%ld)", hz, maxrate);
	/* Never fetch debug info over the network on the daemon's behalf. */
	unsetenv("DEBUGINFOD_URLS");
	signal(SIGPIPE, SIG_IGN);
	raise_nofile();

	if (pf_agg_new(&run.agg) < 0)
		return fail("out of memory");
	run.period_ns = 1000000000ull / hz;
	/* The target's user first: nothing of the target is opened as root. */
	char how[96];
	bool as_target;
	if ((r = drop_privileges((pid_t)pid, nmethods > 0, &as_target, how, sizeof(how))) < 0) {
		rc = fail("cannot drop privileges: %s", strerror(-r));
		goto out;
	}
	uint64_t t0 = util_mono_ms();
	int64_t start_real = (int64_t)util_now_ns(CLOCK_REALTIME);
	run.pid = (pid_t)pid;
	run.pidfd = -1;
	for (unsigned k = 0; k < nmethods; k++) {
		/* The arguments suffix first: the rest is the target proper. */
		char spec[4096], w[160];
		size_t sl;
		if (nargs_split(methods[k], &sl, run.types[k], w, sizeof(w)) < 0) {
			rc = fail("method target '%.200s': %s", methods[k], w);
			goto out;
		}
		if (sl >= sizeof(spec)) {
			rc = fail("method target '%.200s': too long", methods[k]);
			goto out;
		}
		memcpy(spec, methods[k], sl);
		spec[sl] = '\0';
		if (run.types[k][0] && !run.argtab && (r = pf_argtab_new(&run.argtab)) < 0) {
			rc = fail("out of memory");
			goto out;
		}
		if ((r = resolve_target((pid_t)pid, spec, &up[k], &upfd[k], why, sizeof(why))) < 0) {
			rc = fail("%s", why);
			goto out;
		}
	}
	run.nmethods = nmethods;
	run.max_hits = max_hits;
	run.probe = -1;
	if (nmethods)
		r = pf_events_open_uprobes((pid_t)pid, up, nmethods, every,
					   (max_hits + every - 1) / every, &ev, why, sizeof(why));
	else
		r = pf_events_open((pid_t)pid, (unsigned)hz, &ev, why, sizeof(why));
	if (r < 0) {
		rc = fail("%s", why);
		goto out;
	}
	run.ev = ev;
	/* Before the start-time check below: this pidfd is then the admitted
	 * process's, and string arguments are read only while it lives. */
	if (run.argtab) {
		long pfd = syscall(SYS_pidfd_open, (pid_t)pid, 0);
		run.pidfd = pfd >= 0 ? (int)pfd : -1;
		if (pfd >= 0)
			(void)fcntl(run.pidfd, F_SETFD, FD_CLOEXEC);
	}
	/* The events are bound to whatever had the pid at perf_event_open: it
	 * must be the process the daemon admitted, not its pid's next owner. */
	if (start_time) {
		uint64_t now_start = 0;
		if ((r = util_proc_start_time((int)pid, &now_start)) < 0 || now_start != start_time) {
			rc = fail("target replaced: pid %lu %s (start time %llu, expected %llu)", pid,
				  r < 0 ? "is gone" : "is another process now",
				  (unsigned long long)now_start, start_time);
			goto out;
		}
	}
	if ((r = pf_unwind_open((pid_t)pid, &run.u)) < 0) {
		rc = fail("cannot read the memory map of %lu: %s", pid, strerror(-r));
		goto out;
	}
	/* Uprobes for threads started later need CAP_PERFMON at every rescan. */
	if (!nmethods && (r = drop_setup_caps(as_target, how, sizeof(how))) < 0) {
		rc = fail("cannot drop capabilities: %s", strerror(-r));
		goto out;
	}
	LOG_D("sampling as %s", how);
	const char *agent_lib = agent_lib_of((pid_t)pid);
	unsigned cu[4], cg[4];
	uid_t jit_owner = util_proc_creds((int)pid, cu, cg) == 0 ? (uid_t)cu[3] : (uid_t)-1;
	/* Sandbox last: what is left is polling, rescans and reading ELF files. */
	if ((r = sbx_install(perf_policy, perf_policy_count, debug_seccomp)) < 0) {
		rc = fail("cannot install the seccomp filter: %s", strerror(-r));
		goto out;
	}

	uint64_t end = t0 + dur, next_scan = t0 + PF_RESCAN_MS;
	for (;;) {
		uint64_t now = util_mono_ms();
		if (now >= end)
			break;
		if (now >= next_scan) {
			/* Stacks below the rings' wakeup mark: at least every rescan. */
			if (nmethods)
				pf_events_drain(ev, on_sample, &run);
			pf_events_rescan(ev);
			pf_unwind_refresh(run.u);
			next_scan = now + PF_RESCAN_MS;
		}
		uint64_t until = end < next_scan ? end : next_scan;
		int open = pf_events_poll(ev, (int)(until - now), on_sample, &run);
		if (open == 0 && !process_running((pid_t)pid))
			break;
		if (run.over) {
			LOG_I("over budget: %" PRIu64 " ns per recorded hit on average over %" PRIu64
			      " hits, the budget is %" PRIu64 " µs: the probes go", run.spent_ns /
			      run.spent_n, run.spent_n, run.budget_ns / 1000);
			break;
		}
		if (nmethods && run.capped) {
			LOG_I("%" PRIu64 " hits recorded: the cap of %lu is reached, the probes were "
			      "disabled at once", run.hits, max_hits);
			break;
		}
	}
	pf_events_stop(ev, on_sample, &run);
	uint64_t t1 = util_mono_ms();
	/*
	 * The probes' own counts are exact; the samples' periods miss lost
	 * ones. Past --max-hits they may say more than the cap (hits on other
	 * threads before the disable took): recorded stacks never do.
	 */
	uint64_t hits_k[PF_MAX_UPROBES] = { 0 };
	for (unsigned k = 0; k < nmethods; k++)
		hits_k[k] = pf_events_probe_hits(ev, k);
	if (nmethods && pf_events_hits(ev) >= run.hits)
		run.hits = pf_events_hits(ev);
	if (run.past_cap)
		LOG_I("%" PRIu64 " samples came past the cap of %lu hits: not recorded",
		      run.past_cap, max_hits);

	struct pf_ring_stats st;
	pf_events_stats(ev, &st, &run.c.threads_seen, &run.c.threads_skipped);
	run.c.lost = st.lost;
	/* Lost at the end of a burst is never reported by a LOST record: the
	 * probes' counts say how many samples there were to be. */
	if (nmethods && pf_events_expected(ev) > st.samples + st.lost)
		run.c.lost = pf_events_expected(ev) - st.samples;
	run.c.bad = st.bad;
	run.c.throttled = st.throttled;
	run.c.threads = threads_with_samples(run.agg);
	LOG_I("samples=%" PRIu64 " dwarf=%" PRIu64 " fp=%" PRIu64 " short=%" PRIu64
	      " empty=%" PRIu64 " lost=%" PRIu64 " dropped=%" PRIu64 " bad=%" PRIu64
	      " threads seen=%u skipped=%u", run.c.samples, run.c.dwarf, run.c.fp, run.c.short_,
	      run.c.empty, run.c.lost, run.c.dropped, run.c.bad, run.c.threads_seen,
	      run.c.threads_skipped);
	/*
	 * An idle process takes no CPU samples: that is an answer too. Its
	 * profile is written empty (header and comments), and the daemon
	 * delivers it with a note that says why.
	 */
	if (run.c.samples == 0)
		LOG_I("nothing sampled: %u threads seen, %" PRIu64 " lost, %" PRIu64 " without a "
		      "user frame (an idle or exited process takes no CPU samples)",
		      run.c.threads_seen, run.c.lost, run.c.empty);
	/*
	 * JIT frames (code in no mapped file) are named from the target's
	 * /tmp/perf-<pid>.map, read after the capture so that code compiled
	 * during it is in, as the target's user (or as root for a root or
	 * setuid target), and only if the target's own fs uid owns it.
	 */
	struct pmap *jit = NULL;
	if (jit_owner != (uid_t)-1 && (r = pmap_load((pid_t)pid, jit_owner, &jit)) < 0 &&
	    r != -ENOENT)
		LOG_I("/tmp/perf-%lu.map not used: %s", pid, strerror(-r));
	struct pf_capture_info ci = {
		.pid = (pid_t)pid,
		.hz = (unsigned)hz,
		.start_ns = start_real,
		.duration_ns = (int64_t)(t1 - t0) * 1000000,
		.jit = jit,
		.methods = nmethods ? methods : NULL,
		.nmethods = nmethods,
		.every = every,
		.hits = run.hits,
		.over_budget_ns = run.over ? run.spent_ns / run.spent_n : 0,
		.budget_ns = run.budget_ns,
		.over_k = run.over_k,
		.hits_k = hits_k,
		.past_cap = run.past_cap,
		.max_hits = max_hits,
		.args = run.argtab,
		.args_dropped = run.args_dropped,
	};
	if (run.trace) {
		if (run.hits_v.dropped)
			LOG_I("%" PRIu64 " hits past the trace's cap of %d have no event",
			      run.hits_v.dropped, PF_MAX_SAMPLES);
		r = pf_trace_write(1, &ci, run.agg, run.u, ev, &run.hits_v);
	} else {
		r = pf_output_write(1, &ci, run.agg, run.u, ev, &run.c);
	}
	pmap_free(jit);
	if (r < 0) {
		rc = fail("writing the profile: %s", strerror(-r));
		rc = names_errno_exit(r);
		goto out;
	}
	if (nmethods && run.over)
		fprintf(stderr, "ok hits=%" PRIu64 " stacks=%" PRIu64 " lost=%" PRIu64
			" threads=%u over_budget=%" PRIu64 "/%" PRIu64 "\n", run.hits,
			run.c.samples, run.c.lost, run.c.threads, run.spent_ns / run.spent_n,
			run.budget_ns);
	else if (nmethods)
		fprintf(stderr, "ok hits=%" PRIu64 " stacks=%" PRIu64 " lost=%" PRIu64
			" threads=%u\n", run.hits, run.c.samples, run.c.lost, run.c.threads);
	else
		fprintf(stderr, "ok samples=%" PRIu64 " short=%" PRIu64 " unwinder=%s threads=%u%s%s\n",
			run.c.samples, run.c.short_, run.c.dwarf >= run.c.fp ? "dwarf" : "fp",
			run.c.threads, agent_lib ? " unregistered_agent=" : "",
			agent_lib ? agent_lib : "");
	rc = 0;
out:
	pf_events_close(ev);
	for (unsigned k = 0; k < PF_MAX_UPROBES; k++)
		if (upfd[k] >= 0)
			close(upfd[k]);
	pf_unwind_close(run.u);
	pf_agg_free(run.agg);
	pf_hits_free(&run.hits_v);
	pf_argtab_free(run.argtab);
	if (run.pidfd >= 0)
		close(run.pidfd);
	return rc;
}

/*
 * profilingd-redact: the redactor child. The daemon forks, drops the child
 * to an unprivileged user (no capabilities, no_new_privs), sets memory and
 * CPU limits and execs this program with the raw artifact on fd 0 and the
 * result file on fd 1; for a system trace, the kernel's stream
 * (profilingd-ftrace's packets) comes on its own fd, named by --kernel-fd
 * (the daemon uses 3). It compiles its DLP rules, installs the seccomp
 * allow-list of policy/seccomp/redactor.policy (failure is fatal), then
 * parses and rewrites the artifact. One status line goes to fd 2.
 *
 * Exit status (<sysexits.h>, names.h): 0 done; 65 EX_DATAERR the artifact
 * is malformed or holds nothing of the app; 66 EX_NOINPUT a format cap was
 * hit; 73 EX_CANTCREAT the output did not fit (ENOSPC or EDQUOT: the
 * daemon answers NO_DISK_SPACE); 70 EX_SOFTWARE anything else (usage,
 * sandbox, I/O).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <getopt.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sysexits.h>
#include <unistd.h>

#include "rdc.h"
#include "redactor_policy.h"
#include "names.h"
#include "sandbox.h"

#define MAX_IDS 4096

/*
 * The status line. Not dprintf: glibc probes a character-device fd with
 * ioctl(TCGETS), which the sandbox forbids (stderr on a tty or /dev/null).
 */
__attribute__((format(printf, 1, 2))) static void status(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n > 0) {
		ssize_t w = write(2, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
		(void)w;
	}
}

static int parse_ids(const char *s, int32_t *out, size_t *n)
{
	char *end;
	while (*s) {
		if (*n == MAX_IDS)
			return -E2BIG;
		long v = strtol(s, &end, 10);
		if (end == s || v <= 0 || v > INT32_MAX || (*end && *end != ','))
			return -EINVAL;
		out[(*n)++] = (int32_t)v;
		s = *end ? end + 1 : end;
	}
	return 0;
}

/* "--cmdline HEX": the app's /proc cmdline bytes, hex so that its NULs
 * survive argv; at most RDC_CMDLINE_MAX bytes. -EINVAL otherwise. */
static int parse_hex(const char *s, char *out, size_t *n)
{
	size_t l = strlen(s);
	if (l % 2 || l / 2 > RDC_CMDLINE_MAX)
		return -EINVAL;
	for (size_t i = 0; i < l; i += 2) {
		int v = 0;
		for (int k = 0; k < 2; k++) {
			char c = s[i + (size_t)k];
			int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
			if (d < 0)
				return -EINVAL;
			v = v * 16 + d;
		}
		out[i / 2] = (char)v;
	}
	*n = l / 2;
	return 0;
}

/* A decimal uid or tid: 0 .. UINT32_MAX - 1. */
static int parse_u32(const char *s, uint32_t *v)
{
	char *end;
	errno = 0;
	unsigned long long x = strtoull(s, &end, 10);
	if (end == s || *end || errno || *s == '-' || x >= UINT32_MAX)
		return -EINVAL;
	*v = (uint32_t)x;
	return 0;
}

/*
 * The DLP rules apply to the process's cmdline as to a trace's command
 * lines (docs/PERFETTO.md, "DLP"): each argument is scrubbed; arguments
 * that no longer fit RDC_CMDLINE_MAX are left out, and a failed scrub
 * drops the whole cmdline rather than keep it unchecked.
 */
static void scrub_cmdline(const struct rdc_dlp *d, char *cmd, size_t *n)
{
	static char out[RDC_CMDLINE_MAX], arg[RDC_CMDLINE_MAX + 1], s[2 * RDC_CMDLINE_MAX];
	size_t o = 0;
	for (size_t i = 0; i < *n;) {
		const char *z = memchr(cmd + i, '\0', *n - i);
		size_t l = z ? (size_t)(z - (cmd + i)) : *n - i;
		memcpy(arg, cmd + i, l);
		arg[l] = '\0';
		if (rdc_dlp_scrub(d, arg, s, sizeof(s), NULL) < 0) {
			*n = 0;
			return;
		}
		size_t sl = strlen(s);
		if (o + sl + 1 > sizeof(out))
			break;
		memcpy(out + o, s, sl + 1);
		o += sl + 1;
		i += l + 1;
	}
	memcpy(cmd, out, o);
	*n = o;
}

/*
 * A heap format's kernel context (issue #20, docs/PERFETTO.md): the
 * kernel's stream on kfd, redacted by the trace rules (rdc_perfetto, with
 * no runtime stream: fd 0 is at its end once the converter has read it),
 * appended to the heap packets already on fd 1. A Perfetto trace is a
 * bare sequence of packets, so the two concatenated are one trace. When
 * it fails (nothing of the app's in it, malformed), the heap capture
 * stands alone: fd 1 is cut back to where the context began. Returns the
 * kernel records kept; st's byte counts grow by the context's.
 */
static uint64_t kernel_context(int kfd, const struct rdc_policy *pol, struct rdc_stats *st)
{
	struct rdc_stats ks;
	off_t at = lseek(1, 0, SEEK_CUR);
	if (at < 0)
		return 0; /* not a file: nothing could be taken back */
	int r = rdc_perfetto(0, kfd, 1, pol, &ks);
	if (r < 0) {
		if (ftruncate(1, at) < 0 || lseek(1, at, SEEK_SET) != at) {
			status("error: cannot take back a failed kernel context\n");
			exit(EX_SOFTWARE);
		}
		return 0;
	}
	st->in_bytes += ks.in_bytes;
	st->out_bytes += ks.out_bytes;
	return ks.kept;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: profilingd-redact --format pprof|perfetto|hprof|ringdump|heapgraph|heapprofile --pids P[,P..] [options]\n"
		"Reads a raw capture on stdin, writes the app's redacted copy on stdout.\n"
		"Run by profilingd; see docs/ARCHITECTURE.md.\n\n"
		"  --tids T[,T..]        the app's threads (for traces)\n"
		"  --kernel-fd N         perfetto: the kernel's stream is on fd N (3 or more)\n"
		"  --one-thread          perfetto: redact the kernel's stream on one thread,\n"
		"                        not two (bench/redact_throughput's comparison)\n"
		"  --dlp REGEX           scrub matches from trace names (repeatable)\n"
		"  --dlp-builtin         also scrub e-mail addresses, IPv4 and long hex tokens\n"
		"  --uid U               heap formats: the process's uid (process metadata)\n"
		"  --cmdline HEX         heap formats: its /proc cmdline, hex (at most 1024 bytes)\n"
		"  --oom-tid T           heapgraph: an OOM caused the dump; T is the failing thread\n"
		"  --kernel-fd N         also heapgraph, heapprofile: kernel context appended\n"
		"  --debug-seccomp       trap forbidden syscalls and name them, instead of kill\n"
		"  --test-forbidden      after the sandbox is on, try openat(2) (for tests)\n"
		"  --test-fork           after the sandbox is on, try clone(2) without\n"
		"                        CLONE_THREAD, a new process (for tests)\n"
		"  --allow-root          run even as root (development only)\n");
}

int main(int argc, char **argv)
{
	enum { O_FORMAT = 256, O_PIDS, O_TIDS, O_KFD, O_DLP, O_DLP_BUILTIN, O_DEBUG, O_FORBIDDEN,
	       O_ROOT, O_UID, O_CMDLINE, O_OOM_TID, O_FORK, O_ONE };
	static const struct option opts[] = {
		{ "format", required_argument, NULL, O_FORMAT },
		{ "pids", required_argument, NULL, O_PIDS },
		{ "tids", required_argument, NULL, O_TIDS },
		{ "kernel-fd", required_argument, NULL, O_KFD },
		{ "dlp", required_argument, NULL, O_DLP },
		{ "dlp-builtin", no_argument, NULL, O_DLP_BUILTIN },
		{ "debug-seccomp", no_argument, NULL, O_DEBUG },
		{ "test-forbidden", no_argument, NULL, O_FORBIDDEN },
		{ "test-fork", no_argument, NULL, O_FORK },
		{ "allow-root", no_argument, NULL, O_ROOT },
		{ "uid", required_argument, NULL, O_UID },
		{ "cmdline", required_argument, NULL, O_CMDLINE },
		{ "oom-tid", required_argument, NULL, O_OOM_TID },
		{ "one-thread", no_argument, NULL, O_ONE },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	static int32_t pids[MAX_IDS], tids[MAX_IDS];
	const char *format = NULL, *dlp[RDC_DLP_MAX];
	size_t npids = 0, ntids = 0, ndlp = 0;
	bool debug = false, forbidden = false, allow_root = false, try_fork = false, one = false;
	int c, r, kfd = -1;
	static char cmdline[RDC_CMDLINE_MAX];
	struct rdc_proc proc = { .cmdline = cmdline };
	char *end;

	/* Before a byte of any app's data: redactors share one uid (sandbox.h). */
	if ((r = sbx_no_dump()) < 0) {
		fprintf(stderr, "error: PR_SET_DUMPABLE: %s\n", strerror(-r));
		return EX_SOFTWARE;
	}

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case O_FORMAT: format = optarg; break;
		case O_PIDS:
			if (parse_ids(optarg, pids, &npids) < 0)
				goto bad;
			break;
		case O_TIDS:
			if (parse_ids(optarg, tids, &ntids) < 0)
				goto bad;
			break;
		case O_KFD: {
			long v = strtol(optarg, &end, 10);
			/* 0-2 are the artifact, the result and the status line. */
			if (end == optarg || *end || v < 3 || v > 1023)
				goto bad;
			kfd = (int)v;
			break;
		}
		case O_DLP:
			if (ndlp == RDC_DLP_MAX)
				goto bad;
			dlp[ndlp++] = optarg;
			break;
		case O_DLP_BUILTIN:
			for (size_t i = 0; i < rdc_dlp_builtin_count && ndlp < RDC_DLP_MAX; i++)
				dlp[ndlp++] = rdc_dlp_builtin[i];
			break;
		case O_DEBUG: debug = true; break;
		case O_FORBIDDEN: forbidden = true; break;
		case O_ROOT: allow_root = true; break;
		case O_ONE: one = true; break;
		case O_UID:
			if (parse_u32(optarg, &proc.uid) < 0)
				goto bad;
			proc.has_uid = true;
			break;
		case O_CMDLINE:
			if (parse_hex(optarg, cmdline, &proc.cmdline_len) < 0)
				goto bad;
			break;
		case O_OOM_TID:
			if (parse_u32(optarg, &proc.oom_tid) < 0)
				goto bad;
			break;
		case O_FORK: try_fork = true; break;
		case 'h': usage(stdout); return 0;
		default: goto bad;
		}
	}
	int (*fn)(int, int, const struct rdc_policy *, struct rdc_stats *) = NULL;
	bool perfetto = format && !strcmp(format, "perfetto");
	if (format && !strcmp(format, "pprof"))
		fn = rdc_pprof;
	else if (perfetto)
		fn = NULL; /* two inputs: called below */
	else if (format && !strcmp(format, "hprof"))
		fn = rdc_hprof;
	else if (format && !strcmp(format, "ringdump"))
		fn = rdc_ringdump;
	/* Heap formats (issue #20): converters to Perfetto. */
	else if (format && !strcmp(format, "heapgraph"))
		fn = rdc_heapgraph;
	else if (format && !strcmp(format, "heapprofile"))
		fn = rdc_heapprofile;
	/* Only a trace, or a heap format's kernel context (issue #20), has
	 * kernel data; elsewhere an extra input is a mistake. */
	bool heap = fn == rdc_heapgraph || fn == rdc_heapprofile;
	if ((!fn && !perfetto) || (kfd >= 0 && !perfetto && !heap) || npids == 0 || optind != argc)
		goto bad;
	if ((getuid() == 0 || geteuid() == 0) && !allow_root) {
		status("error: refusing to redact as root; the daemon drops privileges first\n");
		return EX_SOFTWARE;
	}

	struct rdc_dlp *d = NULL;
	if (ndlp && (r = rdc_dlp_compile(dlp, ndlp, &d)) < 0) {
		status("error: bad --dlp pattern\n");
		return EX_SOFTWARE;
	}
	if (d && proc.cmdline_len)
		scrub_cmdline(d, cmdline, &proc.cmdline_len);
	/* Nothing but fds 0-2 and the kernel's stream may stay open into the
	 * sandbox. */
	if (kfd > 3)
		syscall(SYS_close_range, 3, (unsigned)kfd - 1, 0);
	syscall(SYS_close_range, kfd >= 3 ? (unsigned)kfd + 1 : 3, ~0u, 0);
	if (kfd >= 0 && fcntl(kfd, F_GETFD) < 0) {
		status("error: --kernel-fd %d is not open\n", kfd);
		return EX_SOFTWARE;
	}
	struct rlimit as;
	if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY &&
	    as.rlim_cur < RDC_PF_THREADS_AS)
		one = true;
	/* The pprof redactor's threads (rdc_pprof.c) share the one malloc
	 * arena: no 64 MiB arena reservation per thread under RLIMIT_AS. */
	mallopt(M_ARENA_MAX, 1);
	if ((r = sbx_install(redactor_policy, redactor_policy_count, debug)) < 0) {
		status("error: cannot install the seccomp filter: %s\n", strerror(-r));
		return EX_SOFTWARE;
	}
	if (forbidden) {
		/* Raw syscall: glibc's open() may take another route. */
		long fd = syscall(SYS_openat, -100, "/etc/passwd", 0);
		status("error: the sandbox let openat through (%ld)\n", fd);
		return EX_SOFTWARE;
	}
	if (try_fork) {
		/* The filter lets clone through for threads only: a process,
		 * as fork(2) makes it, must die here. Raw, as glibc might use
		 * clone3 (refused with ENOSYS) or vfork. */
		long pid = syscall(SYS_clone, (unsigned long)SIGCHLD, 0ul, 0ul, 0ul, 0ul);
		if (pid == 0)
			_exit(EX_SOFTWARE);
		status("error: the sandbox let a process through (%ld)\n", pid);
		return EX_SOFTWARE;
	}

	struct rdc_policy pol = { .pids = pids, .npids = npids, .tids = tids, .ntids = ntids,
				  .dlp = d, .proc = &proc, .pf_chunk = one ? SIZE_MAX : 0 };
	struct rdc_stats st;
	memset(&st, 0, sizeof(st));
	r = perfetto ? rdc_perfetto(0, kfd, 1, &pol, &st) : fn(0, 1, &pol, &st);
	uint64_t kept_kernel = 0;
	if (r == 0 && heap && kfd >= 0)
		kept_kernel = kernel_context(kfd, &pol, &st);
	if (r < 0) {
		status("error: %s: %s\n", format,
			r == -EBADMSG ? "malformed artifact"
			: r == -ENODATA ? "nothing of the app in the capture"
			: strerror(-r));
		return names_errno_exit(r);
	}
	status("ok in=%llu out=%llu kept=%llu dropped=%llu anonymised=%llu scrubbed=%llu%s%llu\n",
		(unsigned long long)st.in_bytes, (unsigned long long)st.out_bytes,
		(unsigned long long)st.kept, (unsigned long long)st.dropped,
		(unsigned long long)st.anonymised, (unsigned long long)st.scrubbed,
		heap && kfd >= 0 ? " kernel_kept=" : "", heap && kfd >= 0 ? kept_kernel : 0ull);
	return 0;
bad:
	usage(stderr);
	return EX_SOFTWARE;
}

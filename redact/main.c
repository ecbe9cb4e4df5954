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

static void usage(FILE *f)
{
	fprintf(f,
		"usage: profilingd-redact --format pprof|perfetto|hprof|ringdump|heapgraph|heapprofile --pids P[,P..] [options]\n"
		"Reads a raw capture on stdin, writes the app's redacted copy on stdout.\n"
		"Run by profilingd; see docs/ARCHITECTURE.md.\n\n"
		"  --tids T[,T..]        the app's threads (for traces)\n"
		"  --kernel-fd N         perfetto: the kernel's stream is on fd N (3 or more)\n"
		"  --dlp REGEX           scrub matches from trace names (repeatable)\n"
		"  --dlp-builtin         also scrub e-mail addresses, IPv4 and long hex tokens\n"
		"  --debug-seccomp       trap forbidden syscalls and name them, instead of kill\n"
		"  --test-forbidden      after the sandbox is on, try openat(2) (for tests)\n"
		"  --test-fork           after the sandbox is on, try clone(2) without\n"
		"                        CLONE_THREAD, a new process (for tests)\n"
		"  --allow-root          run even as root (development only)\n");
}

int main(int argc, char **argv)
{
	enum { O_FORMAT = 256, O_PIDS, O_TIDS, O_KFD, O_DLP, O_DLP_BUILTIN, O_DEBUG, O_FORBIDDEN,
	       O_ROOT, O_FORK };
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
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	static int32_t pids[MAX_IDS], tids[MAX_IDS];
	const char *format = NULL, *dlp[RDC_DLP_MAX];
	size_t npids = 0, ntids = 0, ndlp = 0;
	bool debug = false, forbidden = false, allow_root = false, try_fork = false;
	int c, r, kfd = -1;
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
	/* Only a trace has kernel data; elsewhere an extra input is a mistake. */
	if ((!fn && !perfetto) || (kfd >= 0 && !perfetto) || npids == 0 || optind != argc)
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
	/* Nothing but fds 0-2 and the kernel's stream may stay open into the
	 * sandbox. */
	if (kfd > 3)
		syscall(SYS_close_range, 3, (unsigned)kfd - 1, 0);
	syscall(SYS_close_range, kfd >= 3 ? (unsigned)kfd + 1 : 3, ~0u, 0);
	if (kfd >= 0 && fcntl(kfd, F_GETFD) < 0) {
		status("error: --kernel-fd %d is not open\n", kfd);
		return EX_SOFTWARE;
	}
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
				  .dlp = d };
	struct rdc_stats st;
	memset(&st, 0, sizeof(st));
	r = perfetto ? rdc_perfetto(0, kfd, 1, &pol, &st) : fn(0, 1, &pol, &st);
	if (r < 0) {
		status("error: %s: %s\n", format,
			r == -EBADMSG ? "malformed artifact"
			: r == -ENODATA ? "nothing of the app in the capture"
			: strerror(-r));
		return names_errno_exit(r);
	}
	status("ok in=%llu out=%llu kept=%llu dropped=%llu anonymised=%llu scrubbed=%llu\n",
		(unsigned long long)st.in_bytes, (unsigned long long)st.out_bytes,
		(unsigned long long)st.kept, (unsigned long long)st.dropped,
		(unsigned long long)st.anonymised, (unsigned long long)st.scrubbed);
	return 0;
bad:
	usage(stderr);
	return EX_SOFTWARE;
}

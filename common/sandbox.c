#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef PROFILINGD_SANITIZE_BUILD
#include <sanitizer/lsan_interface.h>
#endif

/*
 * Syscall names for the debug trap, resolved before the filter goes on:
 * libseccomp's resolver allocates, which a signal handler must not do.
 */
#define NAMES_MAX 512
#define NAME_LEN 28
static char names[NAMES_MAX][NAME_LEN];

static size_t put_str(char *buf, size_t pos, size_t cap, const char *s)
{
	while (*s && pos < cap)
		buf[pos++] = *s++;
	return pos;
}

static size_t put_num(char *buf, size_t pos, size_t cap, long v)
{
	char tmp[24];
	size_t n = 0;
	unsigned long u = v < 0 ? 0ul - (unsigned long)v : (unsigned long)v;
	do {
		tmp[n++] = (char)('0' + u % 10);
		u /= 10;
	} while (u && n < sizeof(tmp));
	if (v < 0 && pos < cap)
		buf[pos++] = '-';
	while (n && pos < cap)
		buf[pos++] = tmp[--n];
	return pos;
}

/* Async-signal-safe: no stdio, no malloc; a raw exit_group because
 * sanitizer runtimes wrap _exit with calls the filter forbids. */
static void on_sigsys(int sig, siginfo_t *si, void *uc)
{
	char msg[128];
	size_t n = 0;
	int nr = si->si_syscall;
	n = put_str(msg, n, sizeof(msg), "seccomp: forbidden syscall ");
	n = put_num(msg, n, sizeof(msg), nr);
	if (nr >= 0 && nr < NAMES_MAX && names[nr][0]) {
		n = put_str(msg, n, sizeof(msg), " (");
		n = put_str(msg, n, sizeof(msg), names[nr]);
		n = put_str(msg, n, sizeof(msg), ")");
	}
	n = put_str(msg, n, sizeof(msg) - 1, "\n");
	ssize_t w = write(STDERR_FILENO, msg, n);
	(void)w;
	syscall(SYS_exit_group, SBX_TRAP_EXIT);
}

static void resolve_names(void)
{
	for (int nr = 0; nr < NAMES_MAX; nr++) {
		char *s = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
		if (s) {
			strncpy(names[nr], s, NAME_LEN - 1);
			free(s);
		}
	}
}

static int add_rule(scmp_filter_ctx ctx, const struct sbx_rule *r)
{
	int nr = seccomp_syscall_resolve_name(r->name);
	if (nr == __NR_SCMP_ERROR)
		return -EINVAL;
	uint32_t act = r->refuse ? SCMP_ACT_ERRNO((uint32_t)r->refuse) : SCMP_ACT_ALLOW;
	if (r->op == SBX_ANY)
		return seccomp_rule_add(ctx, act, nr, 0);
	if (r->arg < 0 || r->arg > 5)
		return -EINVAL;
	static const enum scmp_compare ops[] = {
		[SBX_EQ] = SCMP_CMP_EQ, [SBX_NE] = SCMP_CMP_NE, [SBX_LT] = SCMP_CMP_LT,
		[SBX_LE] = SCMP_CMP_LE, [SBX_GT] = SCMP_CMP_GT, [SBX_GE] = SCMP_CMP_GE,
		[SBX_MASKED_EQ] = SCMP_CMP_MASKED_EQ,
	};
	if ((size_t)r->op >= sizeof(ops) / sizeof(ops[0]) || !ops[r->op])
		return -EINVAL;
	struct scmp_arg_cmp cmp = {
		.arg = (unsigned)r->arg, .op = ops[r->op],
		.datum_a = r->op == SBX_MASKED_EQ ? r->mask : r->value,
		.datum_b = r->op == SBX_MASKED_EQ ? r->value : 0,
	};
	return seccomp_rule_add_array(ctx, act, nr, 1, &cmp);
}

/* The filter of rules as a libseccomp context: 0 with *out set, or -errno. */
static int build(const struct sbx_rule *rules, size_t n, bool debug, scmp_filter_ctx *out)
{
	int r;
	scmp_filter_ctx ctx = seccomp_init(debug ? SCMP_ACT_TRAP : SCMP_ACT_KILL_PROCESS);
	if (!ctx)
		return -ENOMEM;
	/* Only the native ABI (x32 and i386 calls hit this too). */
	if ((r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS)) < 0)
		goto fail;
	for (size_t i = 0; i < n; i++)
		if ((r = add_rule(ctx, &rules[i])) < 0)
			goto fail;
	*out = ctx;
	return 0;
fail:
	seccomp_release(ctx);
	return r;
}

int sbx_install_apart(const struct sbx_rule *rules, size_t n)
{
	/* BPF_MAXINSNS instructions at most: the kernel takes no more. */
	enum { CAP = BPF_MAXINSNS * sizeof(struct sock_filter) };
	int p[2], r = 0, status;
	ssize_t got = 0, k;

	if (seccomp_arch_native() != SCMP_ARCH_X86_64)
		return -ENOTSUP;
#ifdef PROFILINGD_SANITIZE_BUILD
	__lsan_do_leak_check(); /* as in sbx_install */
#endif
	struct sock_filter *insn = malloc(CAP + 1);
	if (!insn)
		return -ENOMEM;
	if (pipe2(p, O_CLOEXEC) < 0) {
		r = -errno;
		goto out;
	}
	pid_t pid = fork();
	if (pid < 0) {
		r = -errno;
		close(p[0]);
		close(p[1]);
		goto out;
	}
	if (pid == 0) {
		scmp_filter_ctx ctx;
		close(p[0]);
		int e = build(rules, n, false, &ctx);
		if (!e)
			e = seccomp_export_bpf(ctx, p[1]);
		/* The child's errno as its status: 0, or what failed. */
		_exit(e < 0 ? (-e & 0xff ? -e & 0xff : EIO) : 0);
	}
	close(p[1]);
	/* The pipe ends when the child does: read to EOF, one byte past the cap. */
	while (got <= CAP && (k = read(p[0], (char *)insn + got, CAP + 1 - (size_t)got)) != 0) {
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			r = -errno;
			break;
		}
		got += k;
	}
	close(p[0]);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			r = r ? r : -errno;
			goto out;
		}
	if (!r && (!WIFEXITED(status) || WEXITSTATUS(status)))
		r = WIFEXITED(status) ? -WEXITSTATUS(status) : -ECHILD;
	if (!r && (got <= 0 || got > CAP || got % (ssize_t)sizeof(*insn)))
		r = -EPROTO;
	if (r)
		goto out;
	struct sock_fprog prog = { .len = (unsigned short)(got / (ssize_t)sizeof(*insn)),
				   .filter = insn };
	/* What seccomp_load does with libseccomp's default attributes. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
		r = -errno;
out:
	free(insn);
	return r;
}

int sbx_install(const struct sbx_rule *rules, size_t n, bool debug)
{
	scmp_filter_ctx ctx;
	int r;

	/* The policies name x86_64 syscalls; another ABI would need its own. */
	if (seccomp_arch_native() != SCMP_ARCH_X86_64)
		return -ENOTSUP;
#ifdef PROFILINGD_SANITIZE_BUILD
	/*
	 * LeakSanitizer's scan stops the world with a ptrace-ing thread and
	 * reads /proc, which every filter here kills: run it now, over what ran
	 * so far, which also turns off the exit-time scan (whatever ASAN_OPTIONS
	 * says).
	 */
	__lsan_do_leak_check();
#endif
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	if (debug) {
		struct sigaction sa;
		resolve_names();
		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = on_sigsys;
		sa.sa_flags = SA_SIGINFO;
		if (sigaction(SIGSYS, &sa, NULL) < 0)
			return -errno;
	}
	if ((r = build(rules, n, debug, &ctx)) < 0)
		return r;
	r = seccomp_load(ctx);
	seccomp_release(ctx);
	return r;
}

static bool kept(const int *keep, size_t n, int cap)
{
	for (size_t i = 0; i < n; i++)
		if (keep[i] == cap)
			return true;
	return false;
}

int sbx_no_dump(void)
{
	return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 ? -errno : 0;
}

int sbx_drop(const int *keep, size_t n, uid_t uid, gid_t gid)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct have[2], data[2];

	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return -errno;
	/*
	 * The bounding set first: dropping from it needs CAP_SETPCAP, which the
	 * spawner's helpers do not get. Without it the bounding set stays as it
	 * is: it only matters at execve, which every filter here forbids.
	 */
	for (int c = 0; c <= 63; c++) {
		if (kept(keep, n, c))
			continue;
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0) {
			if (errno == EINVAL || errno == EPERM)
				break; /* past the kernel's last capability, or no CAP_SETPCAP */
			return -errno;
		}
	}
	if (syscall(SYS_capget, &hdr, have) < 0)
		return -errno;
	if (uid != (uid_t)-1) {
		/* The permitted set survives the switch; effective is refilled below. */
		if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0)
			return -errno;
		if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 ||
		    setresuid(uid, uid, uid) < 0)
			return -errno;
		if (prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) < 0)
			return -errno;
		/* The switch set the flag to fs.suid_dumpable, which may be 1. */
		int r = sbx_no_dump();
		if (r < 0)
			return r;
	}
	/* Within what this process has (a container's bounding set may lack some). */
	memset(data, 0, sizeof(data));
	for (size_t i = 0; i < n; i++) {
		int c = keep[i];
		if (c >= 0 && c < 64)
			data[c / 32].permitted |= (1u << (c % 32)) & have[c / 32].permitted;
	}
	for (int i = 0; i < 2; i++)
		data[i].effective = data[i].permitted;
	if (syscall(SYS_capset, &hdr, data) < 0)
		return -errno;
	return 0;
}

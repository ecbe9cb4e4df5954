/*
 * The daemon's own sandbox, applied once init is done (everything that
 * needs CAP_NET_ADMIN, bind() or dlopen()ed NSS modules has run by then):
 * 1. capabilities: the bounding set, permitted and effective sets shrink
 *    to the runtime set below, ambient and inheritable are cleared;
 * 2. no_new_privs;
 * 3. the seccomp allow-list of policy/seccomp/daemon.policy.
 * The spawner, forked earlier, keeps what the helpers need. docs/SANDBOX.md
 * says why each capability stays.
 */
#include "svc_sandbox.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "daemon_policy.h"
#include "log.h"
#include "sandbox.h"

/* What the running daemon still needs as root (docs/SANDBOX.md). */
static const int keep_caps[] = {
	CAP_CHOWN,        /* results are chown'ed to the app's uid */
	CAP_DAC_OVERRIDE, /* ... and written, renamed, pruned in results/<uid>/ (app-owned, 0700) */
	CAP_FOWNER,       /* chmod of the app-owned result dir and files */
	CAP_KILL,         /* kill(pid, 0) liveness probes of other uids (seccomp: signal 0 only) */
	CAP_SYS_PTRACE,   /* /proc/<pid>/exe of other uids (exec matching, app ids) */
	CAP_SYS_RESOURCE, /* PSI trigger windows that are not multiples of 2 s */
};

/* The kept capabilities this process really has, for the log. */
static const char *caps_names(void)
{
	static const char *const names[] = { "chown", "dac_override", "fowner", "kill", "sys_ptrace",
					     "sys_resource" };
	static char out[96];
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];
	size_t pos = 0;
	out[0] = '\0';
	if (syscall(SYS_capget, &hdr, d) < 0)
		return "?";
	for (size_t i = 0; i < sizeof(keep_caps) / sizeof(keep_caps[0]); i++) {
		int c = keep_caps[i];
		if ((d[c / 32].effective & (1u << (c % 32))) && pos < sizeof(out))
			pos += (size_t)snprintf(out + pos, sizeof(out) - pos, "%s%s", pos ? "," : "",
						names[i]);
	}
	return pos ? out : "none";
}

/*
 * Load every NSS module of the passwd and group chains now: a lookup that
 * misses /etc/passwd goes on to the next module (libnss_systemd), and
 * dlopen()ing it under the filter would map code (PROT_EXEC: killed).
 * Loaded here, its later lookups only meet the refused connect().
 */
static void nss_preload(void)
{
	(void)getpwuid((uid_t)0x7ffffffe);
	(void)getgrgid((gid_t)0x7ffffffe);
	endpwent();
	endgrent();
}

int svc_sandbox_apply(enum svc_seccomp_mode mode)
{
	int r;

	nss_preload();
	if ((r = sbx_drop(keep_caps, sizeof(keep_caps) / sizeof(keep_caps[0]), (uid_t)-1,
			  (gid_t)-1)) < 0) {
		LOG_E("cannot drop capabilities: %s", strerror(-r));
		return r;
	}
	if (mode == SVC_SECCOMP_OFF) {
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
			return -errno;
		LOG_W("************************************************************");
		LOG_W("SECCOMP SANDBOX DISABLED ([sandbox] seccomp = off): the daemon");
		LOG_W("parses every app's bytes as root WITHOUT its syscall filter.");
		LOG_W("For debugging only; never run like this in production.");
		LOG_W("************************************************************");
		return 0;
	}
	const char *caps = caps_names(); /* capget is not allowed under the filter */
	/* Enforcing, libseccomp runs in a child only (sbx_install_apart): the
	 * debug trap needs its syscall names resolved here, so debug loads it. */
	r = mode == SVC_SECCOMP_DEBUG ? sbx_install(daemon_policy, daemon_policy_count, true)
				      : sbx_install_apart(daemon_policy, daemon_policy_count);
	if (r < 0) {
		LOG_E("cannot install the seccomp filter: %s", strerror(-r));
		return r;
	}
	LOG_I("sandbox on: %zu seccomp rules%s; capabilities kept: %s", daemon_policy_count,
	      mode == SVC_SECCOMP_DEBUG ? " (debug: forbidden calls trap and are named)" : "",
	      caps);
	return 0;
}

/*
 * Which processes are HotSpot JVMs (docs/JVM.md): the executable is a
 * java launcher, or the VM published its perf-data file
 * (<tmp>/hsperfdata_<user>/<nspid>), which every HotSpot VM does unless
 * started with -XX:-UsePerfData. Both are read through /proc, so a JVM in
 * another mount namespace is found the same way.
 */
#include "svc_config.h"
#include "svc_jvm.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ja.h"
#include "trg.h"
#include "util.h"

/* One process's answer (svc_jvm.h: the key, how long it holds). */
struct jvm_slot {
	pid_t pid;            /* 0: empty */
	uint64_t start;
	dev_t dev;            /* the executable's, at the look */
	ino_t ino;
	uint64_t at_ns;       /* CLOCK_MONOTONIC of the look */
	bool by_name;         /* decided by the executable's name: no expiry */
	bool jvm;
};

/* One uid's user name, or that it has none (found false). */
struct jvm_user {
	bool used, found;
	uid_t uid;
	uint64_t at_ns;
	char name[256];       /* LOGIN_NAME_MAX; a longer one is not cached */
};

static struct jvm_slot slots[SVC_JVM_SLOTS];
static struct jvm_user users[SVC_JVM_USERS];

void svc_jvm_forget(void)
{
	memset(slots, 0, sizeof(slots));
	memset(users, 0, sizeof(users));
}

void svc_jvm_exec(pid_t pid)
{
	if (pid <= 0)
		return;
	struct jvm_slot *s = &slots[(unsigned)pid % SVC_JVM_SLOTS];
	if (s->pid == pid)
		s->pid = 0;
}

void svc_jvm_lost(void)
{
	memset(slots, 0, sizeof(slots));
}

/* uid's user name into out: 0, or -ENOENT (none, or too long for out). */
static int user_name(uid_t uid, char *out, size_t n, uint64_t now)
{
	struct jvm_user *u = &users[uid % SVC_JVM_USERS];
	if (!u->used || u->uid != uid || now - u->at_ns >= SVC_JVM_USER_TTL_S * 1000000000ull) {
		/* getpwuid reads /etc/passwd (or NSS) whole: the cost this saves. */
		struct passwd *pw = getpwuid(uid);
		size_t len = pw ? strlen(pw->pw_name) : 0;
		if (len >= sizeof(u->name))
			return pw && util_fmt(out, n, "%s", pw->pw_name) == 0 ? 0 : -ENOENT;
		*u = (struct jvm_user){ .used = true, .found = pw != NULL, .uid = uid, .at_ns = now };
		if (pw)
			memcpy(u->name, pw->pw_name, len + 1);
	}
	if (!u->found || util_fmt(out, n, "%s", u->name) < 0)
		return -ENOENT;
	return 0;
}

/*
 * The real uid and the innermost pid (the last NSpid: number) of pid,
 * from one read of /proc/<pid>/status. 0 or -errno.
 */
static int status_ids(pid_t pid, uid_t *uid, pid_t *nspid)
{
	char path[64], buf[4096];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	ssize_t n = util_read_file(path, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	const char *l = strstr(buf, "\nUid:");
	char *e;
	if (!l)
		return -EINVAL;
	unsigned long u = strtoul(l + 5, &e, 10);
	if (e == l + 5 || u > UINT32_MAX)
		return -EINVAL;
	*uid = (uid_t)u;
	/* Without an NSpid: line (Linux < 4.1) there are no namespaces to cross. */
	*nspid = pid;
	l = strstr(buf, "\nNSpid:");
	if (!l)
		return 0;
	for (const char *p = l + 7; *p && *p != '\n';) {
		long v = strtol(p, &e, 10);
		if (e == p)
			break;
		if (v > 0 && v <= INT32_MAX)
			*nspid = (pid_t)v;
		p = e;
	}
	return 0;
}

/* The look itself; *by_name: the executable's name decided it. */
static bool look(pid_t pid, bool *by_name, uint64_t now)
{
	char link[64], exe[SVC_PATH_MAX], user[256], path[SVC_PATH_MAX];
	*by_name = false;
	snprintf(link, sizeof(link), "/proc/%d/exe", (int)pid);
	ssize_t n = readlink(link, exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		const char *b = strrchr(exe, '/');
		b = b ? b + 1 : exe;
		if (!strcmp(b, "java")) {
			*by_name = true;
			return true;
		}
	}
	/* An embedded VM (a launcher of its own): look for its perf data. */
	uid_t uid = 0;
	pid_t nspid = pid;
	if (status_ids(pid, &uid, &nspid) < 0 || user_name(uid, user, sizeof(user), now) < 0 ||
	    util_fmt(path, sizeof(path), "/proc/%d/root/tmp/hsperfdata_%s/%d", (int)pid, user,
		     (int)nspid) < 0)
		return false;
	return access(path, F_OK) == 0;
}

bool svc_jvm_detect(pid_t pid, uint64_t start)
{
	char link[64];
	struct stat st;
	bool by_name;

	if (pid <= 0)
		return false;
	uint64_t now = util_now_ns(CLOCK_MONOTONIC);
	if (!start)
		return look(pid, &by_name, now);
	struct jvm_slot *s = &slots[(unsigned)pid % SVC_JVM_SLOTS];
	bool fresh = s->pid == pid && s->start == start &&
		     (s->by_name || now - s->at_ns < SVC_JVM_PERF_TTL_MS * 1000000ull);
	/* Every exec reported so far has dropped its pid's answer: a slot
	 * still here was made for the image pid runs now (svc_jvm.h). */
	if (fresh && trg_proc_current())
		return s->jvm;
	snprintf(link, sizeof(link), "/proc/%d/exe", (int)pid);
	/* The executable's identity, taken before the look: an exec between
	 * the two leaves a slot no later lookup matches. */
	if (stat(link, &st) < 0)
		return look(pid, &by_name, now);
	if (fresh && s->dev == st.st_dev && s->ino == st.st_ino)
		return s->jvm;
	bool jvm = look(pid, &by_name, now);
	*s = (struct jvm_slot){ .pid = pid, .start = start, .dev = st.st_dev, .ino = st.st_ino,
				.at_ns = now, .by_name = by_name, .jvm = jvm };
	return jvm;
}

int svc_jvm_main(pid_t pid, char *out, size_t n)
{
	char path[64], cmd[8192];
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t len = read(fd, cmd, sizeof(cmd));
	close(fd);
	if (len <= 0)
		return len < 0 ? -errno : -ENOENT;
	return ja_main_class(cmd, (size_t)len, out, n);
}

bool svc_jvm_main_matches(const char *main, const char *want)
{
	if (!strcmp(main, want))
		return true;
	/* A jar matches by its file name as well as by its path. */
	const char *b = strrchr(main, '/');
	return b && !strcmp(b + 1, want);
}

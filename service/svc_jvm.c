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
#include <string.h>
#include <unistd.h>

#include "ja.h"
#include "util.h"

bool svc_jvm_detect(pid_t pid)
{
	char link[64], exe[SVC_PATH_MAX], path[SVC_PATH_MAX];
	snprintf(link, sizeof(link), "/proc/%d/exe", (int)pid);
	ssize_t n = readlink(link, exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		const char *b = strrchr(exe, '/');
		b = b ? b + 1 : exe;
		if (!strcmp(b, "java"))
			return true;
	}
	/* An embedded VM (a launcher of its own): look for its perf data. */
	unsigned uid, gid;
	pid_t nspid;
	if (util_proc_ids((int)pid, &uid, &gid) < 0 || ja_nspid(pid, &nspid) < 0)
		return false;
	struct passwd *pw = getpwuid(uid);
	if (!pw || util_fmt(path, sizeof(path), "/proc/%d/root/tmp/hsperfdata_%s/%d", (int)pid,
			    pw->pw_name, (int)nspid) < 0)
		return false;
	return access(path, F_OK) == 0;
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

/*
 * Running the redactor (svc_redact.h). The arguments name the app from the
 * daemon's knowledge only: --pids is the session's process, --tids its
 * threads read from /proc while it is still that process; nothing in the
 * artifact can widen them. The run is svc_helper's.
 */
#include "svc_redact.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "svc_config.h"
#include "util.h"

#define MAX_ARGS (22 + 2 * SVC_MAX_DLP)

static const struct svc_config *cfg;

/*
 * "tid,tid,..." of pid's threads, at most SVC_REDACT_TIDS_MAX of them, when
 * pid is still the process that started at start (before and after the
 * listing): the threads of a later owner of the pid are not the app's.
 */
static void list_tids(pid_t pid, uint64_t start, char *out, size_t n)
{
	char dir[64];
	size_t pos = 0;
	int count = 0;
	uint64_t now = 0;
	out[0] = '\0';
	if (!start || util_proc_start_time((int)pid, &now) < 0 || now != start)
		return;
	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
	DIR *d = opendir(dir);
	struct dirent *de;
	if (!d)
		return;
	while ((de = readdir(d)) && count < SVC_REDACT_TIDS_MAX) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		int w = snprintf(out + pos, n - pos, "%s%s", pos ? "," : "", de->d_name);
		if (w < 0 || (size_t)w >= n - pos)
			break;
		pos += (size_t)w;
		count++;
	}
	closedir(d);
	if (util_proc_start_time((int)pid, &now) < 0 || now != start)
		out[0] = '\0';
}

void svc_redact_proc_read(struct svc_redact_proc *p, pid_t pid, uint64_t start)
{
	char path[64], buf[SVC_REDACT_CMDLINE_MAX + 1];
	unsigned uid[4], gid[4];
	uint64_t now = 0;
	if (!p || p->read || pid <= 0 || !start)
		return;
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	ssize_t n = util_read_file(path, buf, sizeof(buf));
	/* Both readings are the admitted process's only if it is still that
	 * process after them (pid reuse). */
	if (util_proc_creds((int)pid, uid, gid) < 0 ||
	    util_proc_start_time((int)pid, &now) < 0 || now != start)
		return;
	p->read = true;
	p->uid = uid[0];
	p->cmdline_len = n > 0 ? (uint16_t)n : 0;
	if (n > 0)
		memcpy(p->cmdline, buf, (size_t)n);
}

int svc_redact_init(const struct svc_config *c)
{
	cfg = c;
	return 0;
}

int svc_redact_start(int in_fd, int kernel_fd, int out_fd, const char *format, pid_t app_pid,
		     uint64_t app_start, const struct svc_redact_proc *proc, svc_helper_cb cb,
		     void *ud, struct svc_helper **out)
{
	char pids[16], tids[SVC_REDACT_TIDS_MAX * 12], uid[16], oom[16];
	char hex[2 * SVC_REDACT_CMDLINE_MAX + 1];
	char *argv[MAX_ARGS];
	int n = 0;

	/* The app's threads now; a trace names them by tid. */
	snprintf(pids, sizeof(pids), "%d", (int)app_pid);
	tids[0] = '\0';
	list_tids(app_pid, app_start, tids, sizeof(tids));
	argv[n++] = "profilingd-redact";
	argv[n++] = "--format";
	argv[n++] = (char *)format;
	argv[n++] = "--pids";
	argv[n++] = pids;
	if (tids[0]) {
		argv[n++] = "--tids";
		argv[n++] = tids;
	}
	/* The spawner puts it at fd 3 (SVC_SPAWN_F_FD3). */
	if (kernel_fd >= 0) {
		argv[n++] = "--kernel-fd";
		argv[n++] = "3";
	}
	/* The heap formats' process metadata: numbers, and the cmdline in hex
	 * so its NULs survive argv (docs/PERFETTO.md, "Heap formats"). */
	if (proc && proc->read && strncmp(format, "heap", 4) == 0) {
		snprintf(uid, sizeof(uid), "%u", (unsigned)proc->uid);
		argv[n++] = "--uid";
		argv[n++] = uid;
		if (proc->cmdline_len) {
			size_t len = proc->cmdline_len < SVC_REDACT_CMDLINE_MAX
				     ? proc->cmdline_len : SVC_REDACT_CMDLINE_MAX;
			for (size_t i = 0; i < len; i++)
				snprintf(hex + 2 * i, 3, "%02x", (unsigned char)proc->cmdline[i]);
			argv[n++] = "--cmdline";
			argv[n++] = hex;
		}
	}
	if (proc && proc->oom_tid && strcmp(format, "heapgraph") == 0) {
		snprintf(oom, sizeof(oom), "%u", (unsigned)proc->oom_tid);
		argv[n++] = "--oom-tid";
		argv[n++] = oom;
	}
	if (svc_helper_redact_as_daemon())
		argv[n++] = "--allow-root";
	if (cfg->dlp_builtin)
		argv[n++] = "--dlp-builtin";
	for (unsigned i = 0; i < cfg->ndlp; i++) {
		argv[n++] = "--dlp";
		argv[n++] = (char *)cfg->dlp[i];
	}
	argv[n] = NULL;
	if (lseek(in_fd, 0, SEEK_SET) < 0 || (kernel_fd >= 0 && lseek(kernel_fd, 0, SEEK_SET) < 0))
		return -errno;
	return svc_helper_run(SVC_HELPER_REDACT, argv, in_fd, out_fd, kernel_fd,
			      cfg->redact_timeout_ms, cb, ud, out);
}

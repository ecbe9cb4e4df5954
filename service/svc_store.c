/*
 * The stored result files: retention of delivered and undelivered results
 * (files older than retention_days go, then, per app, the oldest ones past
 * max_app_result_bytes; the index row goes with the file), and the checked
 * open of a result for delivery.
 */
#include "svc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

struct prune_ctx {
	int removed;
};

static void remove_one(const struct svc_db_result *r, void *ud)
{
	struct prune_ctx *pc = ud;
	if (unlink(r->path) < 0 && errno != ENOENT) {
		LOG_W("cannot remove %s: %s", r->path, strerror(errno));
		return;
	}
	if (svc_db_result_delete(r->id) == 0)
		pc->removed++;
}

int svc_store_prune(const struct svc_config *cfg, uint64_t now_ns)
{
	struct prune_ctx pc = { 0 };
	uint64_t age = (uint64_t)cfg->retention_days * 86400ull * 1000000000ull;
	int r;

	if (now_ns > age && (r = svc_db_expired(now_ns - age, remove_one, &pc)) < 0)
		return r;
	int expired = pc.removed;
	if ((r = svc_db_over_quota(cfg->max_app_result_bytes, remove_one, &pc)) < 0)
		return r;
	if (pc.removed) {
		LOG_I("retention: removed %d result(s) (%d past %u days, %d over an app's quota)",
		      pc.removed, expired, cfg->retention_days, pc.removed - expired);
		svc_admit_recount();
	}
	return pc.removed;
}

int svc_store_open(const char *path, uid_t uid, char *what, size_t n)
{
	struct stat st;
	char dummy[1];
	int r;

	if (!what || !n) {
		what = dummy;
		n = sizeof(dummy);
	}
	what[0] = '\0';
	if (!path || !*path)
		return -ENOENT;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		r = -errno;
		snprintf(what, n, "%s", r == -ELOOP ? "a symbolic link" : strerror(-r));
		return r;
	}
	if (fstat(fd, &st) < 0) {
		r = -errno;
		snprintf(what, n, "%s", strerror(-r));
	} else if (!S_ISREG(st.st_mode)) {
		r = -EINVAL;
		snprintf(what, n, "not a regular file");
	} else if (st.st_uid != uid && !(st.st_uid == geteuid() && geteuid() != 0)) {
		/* (A daemon run without root cannot chown: its own files are the app's.) */
		r = -EPERM;
		snprintf(what, n, "owned by uid %u, not the app's uid %u", (unsigned)st.st_uid,
			 (unsigned)uid);
	} else if (st.st_nlink != 1) {
		r = -EMLINK;
		snprintf(what, n, "%lu links, not 1", (unsigned long)st.st_nlink);
	} else
		return fd;
	close(fd);
	return r;
}

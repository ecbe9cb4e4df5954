/*
 * Retention of delivered and undelivered results: files older than
 * retention_days go, then, per app, the oldest ones past
 * max_app_result_bytes. The index row goes with the file.
 */
#include "svc.h"

#include <errno.h>
#include <string.h>
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

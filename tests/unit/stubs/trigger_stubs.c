/* Neighbours of svc_trigger.c and svc_trigreg.c (trigger_stubs.h). */
#include "trigger_stubs.h"

#include <errno.h>
#include <string.h>

#include "profiling/profiling.h"
#include "svc_db.h"
#include "svc_db_result.h"
#include "svc_conn.h"
#include "svc_admit.h"
#include "svc_helper.h"
#include "svc_capture.h"
#include "svc_request.h"
#include "svc_jvm.h"
#include "svc_methods.h"
#include "util.h"

const struct trg_ops *stub_ops;
svc_session_end_fn stub_end_fn;
void *stub_end_ud;
int stub_requests, stub_request_ret;
uint64_t stub_next_id;
struct stub_request stub_last;
int stub_cooldown_ret, stub_cooldown_records;
int stub_stops, stub_event_done;
pid_t stub_cpu_watched;

void stub_reset(void)
{
	stub_ops = NULL;
	stub_requests = stub_request_ret = 0;
	stub_next_id = 500;
	memset(&stub_last, 0, sizeof(stub_last));
	stub_cooldown_ret = stub_cooldown_records = 0;
	stub_stops = 0;
	stub_event_done = -1;
	stub_cpu_watched = 0;
}

/* triggers/: every watcher starts; proc's keeps the ops. */
int trg_proc_init(struct event_base *base, const struct trg_ops *ops)
{
	stub_ops = ops;
	return 0;
}
void trg_proc_fini(void) { stub_ops = NULL; }
const char *trg_proc_status(void) { return "stub"; }
void trg_proc_exits(const pid_t *pids, size_t n) {}
int trg_cpu_init(struct event_base *base, const struct trg_ops *ops, bool use_perf) { return 0; }
void trg_cpu_fini(void) {}
int trg_cpu_watch(pid_t pid, uid_t uid, unsigned percent, unsigned window_ms)
{
	stub_cpu_watched = pid;
	return 0;
}
void trg_cpu_unwatch(pid_t pid)
{
	if (stub_cpu_watched == pid)
		stub_cpu_watched = 0;
}
const char *trg_cpu_status(void) { return "stub"; }
int trg_hang_init(struct event_base *base, const struct trg_ops *ops) { return 0; }
void trg_hang_fini(void) {}
int trg_hang_beat(pid_t pid, unsigned timeout_ms) { return 0; }
void trg_hang_forget(pid_t pid) {}
const char *trg_hang_status(void) { return "stub"; }
int trg_mem_init(struct event_base *base, const struct trg_ops *ops) { return 0; }
void trg_mem_fini(void) {}
int trg_mem_watch(pid_t pid, unsigned percent, uint64_t bytes) { return 0; }
void trg_mem_unwatch(pid_t pid) {}
bool trg_mem_counts_kills(pid_t pid) { return true; }
int trg_mem_global(unsigned avail_percent, unsigned stall_percent) { return 0; }
const char *trg_mem_status(void) { return "stub"; }
int trg_psi_init(struct event_base *base, const struct trg_ops *ops) { return 0; }
void trg_psi_fini(void) {}
int trg_psi_watch(int key, unsigned resource, unsigned stall_us, unsigned window_ms)
{
	return -ENOTSUP;
}
void trg_psi_unwatch(int key) {}
const char *trg_psi_status(void) { return "stub"; }

/* svc_session, svc_request, svc_capture */
int svc_session_subscribe_end(svc_session_end_fn fn, void *ud)
{
	if (stub_end_fn)
		return -ENOSPC;
	stub_end_fn = fn;
	stub_end_ud = ud;
	return 0;
}
void svc_session_unsubscribe_end(svc_session_end_fn fn, void *ud)
{
	if (stub_end_fn == fn && stub_end_ud == ud)
		stub_end_fn = NULL;
}
void svc_session_event_done(pid_t pid, uint32_t kind, int status) { stub_event_done = status; }
/* The OOM thread handed to the session the OOM started (its id, its tid). */
uint64_t stub_oom_session;
uint32_t stub_oom_tid;
int svc_session_set_oom_tid(uint64_t id, pid_t pid, uint32_t tid)
{
	(void)pid;
	stub_oom_session = id;
	stub_oom_tid = tid;
	return 0;
}
/* svc_methods: the trigger tests add no method-event config. */
void svc_methods_exec(pid_t pid, const char *exe)
{
	(void)pid;
	(void)exe;
}
bool svc_methods_any(void) { return false; }
int svc_request_trigger(pid_t pid, uint64_t start, uid_t uid, gid_t gid, const char *app,
			uint32_t type, const Pd__Params *params, uint32_t trigger, const char *tag,
			uint32_t wait_ms, uint64_t *id, char *msg, size_t n)
{
	stub_requests++;
	stub_last.pid = pid;
	stub_last.uid = uid;
	stub_last.type = type;
	stub_last.trigger = trigger;
	stub_last.wait_ms = wait_ms;
	util_strlcpy(stub_last.tag, tag, sizeof(stub_last.tag));
	stub_last.params = *params;
	if (stub_request_ret) {
		util_fmt(msg, n, "refused by the stub");
		return stub_request_ret;
	}
	*id = stub_next_id++;
	return 0;
}
int svc_request_adopt(pid_t pid, uid_t uid, gid_t gid, const char *app, const char *path,
		      const char *format, uint32_t trigger, const char *tag, char *msg, size_t n)
{
	return PROF_E_UNKNOWN;
}
int svc_capture_stop(pid_t pid, uint32_t trigger)
{
	stub_stops++;
	return trigger == PROF_TRIGGER_COLD_START ? 0 : -ENOENT;
}
const char *svc_store_raw_dir(void) { return "/nonexistent"; }

/* svc_admit */
int svc_admit_cooldown_check(const char *app, uint32_t trigger, uint32_t period_s, char *why,
			     size_t n)
{
	if (stub_cooldown_ret)
		util_fmt(why, n, "cooling down");
	return stub_cooldown_ret;
}
void svc_admit_cooldown_record(const char *app, uint32_t trigger) { stub_cooldown_records++; }

/* svc_conn */
const char *svc_conn_app(const struct svc_conn *c) { return c->app; }
uid_t svc_conn_uid(const struct svc_conn *c) { return c->uid; }
gid_t svc_conn_gid(const struct svc_conn *c) { return c->gid; }
pid_t svc_conn_pid(const struct svc_conn *c) { return c->pid; }
const struct svc_ident *svc_conn_ident(const struct svc_conn *c) { return &c->ident; }
uint32_t svc_conn_runtime_caps(const struct svc_conn *c) { return c->caps; }
struct svc_conn *svc_conn_runtime_for(pid_t pid) { return NULL; }
int svc_conn_send(struct svc_conn *c, const ProtobufCMessage *m, int fd) { return 0; }
void svc_app_key(const struct svc_config *cfg, pid_t pid, uid_t uid, char *out, size_t n)
{
	util_fmt(out, n, "uid:%u", (unsigned)uid);
}

/* svc_db: triggers are stored, nothing loads. */
int svc_db_trigger_put(const char *app, uint32_t type, uid_t uid, gid_t gid, const char *exe,
		       const void *spec, size_t len)
{
	return 0;
}
int svc_db_trigger_del(const char *app, int type) { return 0; }
int svc_db_trigger_load(svc_db_trigger_fn fn, void *ud) { return 0; }
int svc_db_result_requeue(uint64_t session_id, const char *note) { return -ENOENT; }

/* svc_jvm, svc_helper: no JVMs here. */
bool svc_jvm_detect(pid_t pid, uint64_t start) { return false; }
int svc_jvm_main(pid_t pid, char *out, size_t n) { return -ENOENT; }
bool svc_jvm_main_matches(const char *main, const char *want) { return false; }
void svc_jvm_exec(pid_t pid) { (void)pid; }
void svc_jvm_lost(void) {}
int svc_jattach_start(pid_t pid, uint64_t start, enum svc_jattach_op op, uint32_t timeout_ms,
		      int out_fd, svc_helper_cb cb, void *ud, struct svc_helper **h)
{
	return -ENOENT;
}

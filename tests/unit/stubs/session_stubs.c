/* Neighbours of svc_session.c and svc_capture.c (session_stubs.h). */
#include "session_stubs.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "profiling/profiling.h"
#include "profilingd.pb-c.h"
#include "svc_db.h"
#include "svc_conn.h"
#include "svc_helper.h"
#include "svc_redact.h"
#include "svc_store.h"
#include "svc_sink.h"
#include "util.h"

struct svc_conn *stub_runtime;
int stub_sent_case, stub_sent, stub_sent_fds;
int stub_ident_check;
int stub_sink_expect;
uint64_t stub_sink_bytes;
int stub_perf_start;
int stub_failed, stub_fails, stub_delivered, stub_abandoned;
char stub_fail_msg[256];

void stub_reset(void)
{
	stub_runtime = NULL;
	stub_sent_case = stub_sent = stub_sent_fds = 0;
	stub_ident_check = 0;
	stub_sink_expect = 0;
	stub_sink_bytes = 0;
	stub_perf_start = -ENOENT;
	stub_failed = stub_fails = stub_delivered = stub_abandoned = 0;
	stub_fail_msg[0] = '\0';
}

/* svc_conn */
struct svc_conn *svc_conn_runtime_for(pid_t pid)
{
	return stub_runtime && stub_runtime->pid == pid ? stub_runtime : NULL;
}
const struct svc_ident *svc_conn_ident(const struct svc_conn *c) { return &c->ident; }
uint32_t svc_conn_runtime_caps(const struct svc_conn *c) { return c->caps; }
pid_t svc_conn_pid(const struct svc_conn *c) { return c->pid; }
struct svc_conn *svc_conn_by_id(uint64_t id) { return NULL; }
int svc_conn_check(struct svc_conn *c) { return 0; }
int svc_conn_send(struct svc_conn *c, const ProtobufCMessage *m, int fd)
{
	const Pd__DaemonToRuntime *out = (const Pd__DaemonToRuntime *)m;
	if (m->descriptor == &pd__daemon_to_runtime__descriptor)
		stub_sent_case = out->msg_case;
	stub_sent++;
	stub_sent_fds += fd >= 0;
	return 0;
}

/* svc_ident */
void svc_ident_init(struct svc_ident *id)
{
	memset(id, 0, sizeof(*id));
	id->pidfd = -1;
}
void svc_ident_fini(struct svc_ident *id) { svc_ident_init(id); }
int svc_ident_check(const struct svc_ident *id) { return stub_ident_check; }

/* svc_helper: helpers */
void svc_helper_abort(struct svc_helper *h) {}
int svc_ftrace_start(uint64_t session_id, uint32_t duration_ms, uint32_t buffer_kb, bool discard,
		     uint64_t background_from, bool lead, int out_fd,
		     svc_helper_cb cb, void *ud, struct svc_helper **h)
{
	return -ENOENT;
}
int svc_perf_start(pid_t pid, uint64_t start, uint32_t hz, uint32_t duration_ms, int out_fd,
		   svc_helper_cb cb, void *ud, struct svc_helper **h)
{
	return stub_perf_start;
}
/* Method events share the agentless helper's answer. */
int svc_perf_methods_start(pid_t pid, uint64_t start, const char *const *methods, unsigned n,
			   uint32_t every, uint32_t max_hits, bool perfetto, uint32_t budget_us,
			   uint32_t duration_ms,
			   int out_fd, svc_helper_cb cb, void *ud, struct svc_helper **h)
{
	return stub_perf_start;
}
int svc_jattach_start(pid_t pid, uint64_t start, enum svc_jattach_op op, uint32_t timeout_ms,
		      int out_fd, svc_helper_cb cb, void *ud, struct svc_helper **h)
{
	return -ENOENT;
}
bool svc_jvm_agent_available(void) { return false; }
/* svc_redact: the state machine tests run no redactor; the process
 * metadata it would read is svc_redact's (it_jvm_heapgraph). */
void svc_redact_proc_read(struct svc_redact_proc *p, pid_t pid, uint64_t start)
{
	(void)p;
	(void)pid;
	(void)start;
}

/* svc_sink: a token record; the test says what it has drained. */
static int sink_token;
int svc_sink_start(struct event_base *base, int in_fd, int out_fd, uint64_t cap,
		   svc_sink_cb cb, void *ud, struct svc_sink **out)
{
	close(in_fd);
	*out = (struct svc_sink *)&sink_token;
	return 0;
}
int svc_sink_expect(struct svc_sink *s, uint64_t n) { return stub_sink_expect; }
uint64_t svc_sink_bytes(const struct svc_sink *s) { return stub_sink_bytes; }
bool svc_sink_ended(const struct svc_sink *s) { return false; }
void svc_sink_free(struct svc_sink *s) {}

/* svc_store */
static char raw_dir[64];
int svc_store_init(struct event_base *base, const struct svc_config *cfg)
{
	util_fmt(raw_dir, sizeof(raw_dir), "%s", cfg->state_dir);
	return 0;
}
void svc_store_fini(void) {}
const char *svc_store_raw_dir(void) { return raw_dir; }

/* svc_db */
int svc_db_session_end(uint64_t id, const char *state, int error, const char *message,
		       uint64_t now_ns)
{
	return 0;
}
int svc_db_session_abandon(uint64_t id, const char *message)
{
	stub_abandoned++;
	return 0;
}

/* svc_deliver: the ends, recorded; a failure frees as the real one does. */
void svc_deliver_start(struct session *s)
{
	stub_delivered++;
}
void svc_deliver_fail(struct session *s, int error, const char *msg)
{
	stub_failed = error;
	stub_fails++;
	util_fmt(stub_fail_msg, sizeof(stub_fail_msg), "%s", msg);
	svc_session_release_files(s);
	svc_session_notify(s, "failed", error, msg, 0, NULL);
	svc_session_free(s);
}

/*
 * Peers on client.sock and runtime.sock: accept with caps, identity bound
 * to the peer's process at accept (svc_ident: pidfd or pid + start time,
 * every uid and gid), one packet = one message, a table-driven dispatcher
 * per role, and a bounded outgoing queue per peer.
 *
 * Identity: a client's request, trigger registration and app signal, and a
 * runtime's hello and every match of a runtime to a capture, first check
 * that the peer's process is still the one that connected, with the same
 * ids (svc_ident_check). One that is gone (its socket passed on, its pid
 * reused) or changed (a setuid exec) is refused with PROF_E_PERMISSION and
 * its connection closed.
 *
 * Caps and what happens at them:
 *   max_clients / max_clients_per_uid / max_runtimes / max_runtimes_per_uid:
 *     the new connection is accepted and closed at once (logged through the
 *     uid's log budget, LOG_PEER).
 *   hello_timeout_ms: a client or runtime that has not said hello by then
 *     is closed, so idle connections cannot hold a uid's share for long.
 *   messages per event-loop round: CONN_UID_ROUND_MSGS per uid, shared by
 *     all its connections; the rest wait in their sockets for the next
 *     round. One uid's many connections cannot make a round long for the
 *     others (a request from another uid waits one round, not 64 x 16
 *     messages). See struct uid_share.
 *   max_queued_msgs: a peer that does not read its messages is closed.
 *   packet size (wire.h): the peer is closed, with one log line.
 *   out of fds (EMFILE/ENFILE on accept): the listener pauses for
 *     SVC_ACCEPT_PAUSE_MS (svc_listen.c), one log line per pause; connections
 *     wait in the listen backlog (and connect() fails with EAGAIN once it is full).
 *     At start the soft RLIMIT_NOFILE is raised to fit 2 x (max_clients +
 *     max_runtimes) (a socket and a pidfd each) + max_runtimes (crash
 *     rings) + TRG_MAX_PIDS + CONN_FD_RESERVE, so this only happens when
 *     the hard limit is lower than that. A peer accepted when no fd is left for its pidfd is
 *     closed and the listener pauses the same way.
 *
 * Listening sockets come from systemd socket activation when it passes them
 * (matched by FileDescriptorName= "client"/"runtime"/"control", else by
 * path), and are bound here otherwise. control.sock is handed to svc_ctl.
 */
#include "svc.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "log.h"
#include "names.h"
#include "profiling/profiling.h"
#include "svc_ident.h"
#include "trg.h"
#include "util.h"
#include "wire.h"

struct svc_conn {
	uint64_t id;
	enum svc_role role;
	int fd;
	uid_t uid;
	gid_t gid;
	pid_t pid;
	struct svc_ident ident;  /* the process that connected (svc_ident.h) */
	struct event *ev_read, *ev_write;
	struct event *ev_hello;  /* closes the peer if no hello comes in time */
	struct svc_outq q;
	bool hello;        /* client: ClientHello seen; runtime: RuntimeHello accepted */
	bool listener;
	bool dropping;
	uint32_t caps;     /* runtime capabilities */
	char app[RL_APP_MAX];
	char kind[16];     /* runtime kind from its hello ("native", "jvm"), for status */
	struct uid_share *share;  /* its uid's budget per loop round */
	struct svc_conn *next;
};

/*
 * The messages one uid's connections may handle in one round of the
 * event loop, shared by all of them. A connection whose uid has spent its
 * budget leaves its messages in the socket: the event is level-triggered,
 * so a later round comes back to them. Budgets are renewed by a zero
 * timeout armed when one runs out: libevent runs timers after the I/O
 * callbacks of the next round, so a spent uid waits at most one round
 * while every other peer is served. (libevent's cached time cannot tell
 * rounds apart: it is CLOCK_MONOTONIC_COARSE, a few ms a tick.) Root is
 * trusted (DESIGN 8a) and not counted.
 */
#define CONN_UID_ROUND_MSGS 32
struct uid_share {
	uid_t uid;
	unsigned refs;            /* connections of this uid */
	uint64_t round;           /* the budget period its count is of */
	unsigned used;
	struct uid_share *next;
};
static struct uid_share *shares;
static uint64_t round_no;
static struct event *ev_round; /* renews the budgets */

struct listener {
	int fd;
	enum svc_role role;
	struct svc_acceptor acc;
	char path[SVC_SUN_MAX];
	bool activated;   /* from systemd: the socket unit owns the path */
};

/* fds besides the peers': databases, listeners, helper pipes and pidfds, raw files. */
#define CONN_FD_RESERVE 256

static struct event_base *base;
static const struct svc_config *cfg;
static struct listener listeners[2];
static struct svc_conn *conns;
static uint64_t next_conn_id = 1;
static uint32_t nclients, nruntimes;

static void conn_free(struct svc_conn *c);

/* The share of uid, made for its first connection. NULL: out of memory. */
static struct uid_share *share_get(uid_t uid)
{
	struct uid_share *sh;
	for (sh = shares; sh; sh = sh->next)
		if (sh->uid == uid)
			break;
	if (!sh) {
		if (!(sh = calloc(1, sizeof(*sh))))
			return NULL;
		sh->uid = uid;
		sh->next = shares;
		shares = sh;
	}
	sh->refs++;
	return sh;
}

static void share_put(struct uid_share *sh)
{
	if (!sh || --sh->refs)
		return;
	for (struct uid_share **pp = &shares; *pp; pp = &(*pp)->next)
		if (*pp == sh) {
			*pp = sh->next;
			break;
		}
	free(sh);
}

/* A read that brought no message gives its unit back. */
static void share_refund(struct uid_share *sh)
{
	if (sh->used)
		sh->used--;
}

static void round_cb(evutil_socket_t fd, short what, void *arg)
{
	round_no++;
}

/* Take one message from c's uid's budget for this round: false if spent. */
static bool share_take(struct uid_share *sh)
{
	static const struct timeval now = { 0, 0 };
	if (sh->uid == 0)
		return true;
	if (sh->round != round_no) {
		sh->round = round_no;
		sh->used = 0;
	}
	if (sh->used < CONN_UID_ROUND_MSGS) {
		sh->used++;
		return true;
	}
	if (ev_round && !evtimer_pending(ev_round, NULL))
		evtimer_add(ev_round, &now);
	return false;
}

/* ------------------------------------------------------------ lookups */

uint64_t svc_conn_id(const struct svc_conn *c) { return c->id; }
uid_t svc_conn_uid(const struct svc_conn *c) { return c->uid; }
gid_t svc_conn_gid(const struct svc_conn *c) { return c->gid; }
pid_t svc_conn_pid(const struct svc_conn *c) { return c->pid; }
const struct svc_ident *svc_conn_ident(const struct svc_conn *c) { return &c->ident; }

/* Why svc_ident_check() refused, for the peer and the log. */
static const char *ident_why(int r)
{
	return r == -EPERM ? "the connecting process changed its ids (a setuid exec?)"
	       : r == -ESRCH ? "the connecting process is gone (its pid may be another's now)"
	       : "the connecting process cannot be checked";
}

int svc_conn_check(struct svc_conn *c)
{
	if (c->dropping)
		return -ESRCH;
	int r = svc_ident_check(&c->ident);
	if (r < 0)
		svc_conn_drop(c, ident_why(r));
	return r;
}
const char *svc_conn_app(const struct svc_conn *c) { return c->app; }

/* The app key of a process: its uid, plus the [apps] id of its executable. */
void svc_app_key(const struct svc_config *config, pid_t pid, uid_t uid, char *out, size_t n)
{
	char link[64], exe[SVC_PATH_MAX];
	const char *id = NULL;

	if (config->napps) {
		snprintf(link, sizeof(link), "/proc/%d/exe", (int)pid);
		ssize_t len = readlink(link, exe, sizeof(exe) - 1);
		if (len > 0) {
			exe[len] = '\0';
			id = svc_config_app_id(config, exe);
		}
	}
	if (id)
		util_fmt(out, n, "uid:%u/%s", (unsigned)uid, id);
	else
		util_fmt(out, n, "uid:%u", (unsigned)uid);
}

void svc_conn_set_listener(struct svc_conn *c, bool on) { c->listener = on; }
bool svc_conn_is_listener(const struct svc_conn *c) { return c->listener && !c->dropping; }
uint32_t svc_conn_runtime_caps(const struct svc_conn *c) { return c->caps; }

/* The hello came: the peer may stay. */
static void hello_seen(struct svc_conn *c)
{
	c->hello = true;
	if (c->ev_hello)
		evtimer_del(c->ev_hello);
}

void svc_conn_set_runtime(struct svc_conn *c, uint32_t caps)
{
	hello_seen(c);
	c->caps = caps;
}

struct svc_conn *svc_conn_by_id(uint64_t id)
{
	for (struct svc_conn *c = conns; c; c = c->next)
		if (c->id == id && !c->dropping)
			return c;
	return NULL;
}

struct svc_conn *svc_conn_listener_for(uid_t uid)
{
	for (struct svc_conn *c = conns; c; c = c->next)
		if (c->role == SVC_ROLE_CLIENT && c->uid == uid && c->listener && !c->dropping)
			return c;
	return NULL;
}

/*
 * A runtime is matched to the process that has pid now: one whose own
 * process is gone (kept past its pid's reuse) or changed is closed here,
 * never handed out.
 */
struct svc_conn *svc_conn_runtime_for(pid_t pid)
{
	for (struct svc_conn *c = conns; c; c = c->next)
		if (c->role == SVC_ROLE_RUNTIME && c->hello && c->pid == pid && !c->dropping &&
		    svc_conn_check(c) == 0)
			return c;
	return NULL;
}

/* ------------------------------------------------------------ sending */

static int conn_flush(struct svc_conn *c)
{
	int r = svc_outq_flush(&c->q, c->fd);
	if (r == 1)
		event_add(c->ev_write, NULL);
	return r < 0 ? r : 0;
}

int svc_conn_send(struct svc_conn *c, const ProtobufCMessage *m, int fd)
{
	size_t cap = c->role == SVC_ROLE_CLIENT ? WIRE_CLIENT_MAX_MSG : WIRE_RUNTIME_MAX_MSG;

	if (c->dropping)
		return -EPIPE;
	int r = svc_outq_push(&c->q, m, cap, fd);
	if (r == -ENOBUFS)
		svc_conn_drop(c, "peer does not read: outgoing queue full");
	if (r < 0)
		return r;
	r = conn_flush(c);
	if (r < 0)
		svc_conn_drop(c, strerror(-r));
	return r;
}

/* ------------------------------------------------------------ closing */

static void conn_unlink(struct svc_conn *c)
{
	for (struct svc_conn **pp = &conns; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			return;
		}
	}
}

static void conn_free(struct svc_conn *c)
{
	if (!c)
		return;
	if (c->role == SVC_ROLE_RUNTIME && c->hello)
		svc_session_runtime_down(c);
	if (c->role == SVC_ROLE_CLIENT && c->hello)
		svc_trigger_client_down(c);
	conn_unlink(c);
	share_put(c->share);
	if (c->role == SVC_ROLE_CLIENT)
		nclients--;
	else
		nruntimes--;
	if (c->ev_read)
		event_free(c->ev_read);
	if (c->ev_write)
		event_free(c->ev_write);
	if (c->ev_hello)
		event_free(c->ev_hello);
	svc_outq_fini(&c->q);
	svc_ident_fini(&c->ident);
	if (c->fd >= 0)
		close(c->fd);
	free(c);
}

static void conn_reap_cb(evutil_socket_t fd, short what, void *arg)
{
	struct svc_conn *c = arg;
	conn_free(c);
}

void svc_conn_drop(struct svc_conn *c, const char *why)
{
	if (c->dropping)
		return;
	c->dropping = true;
	if (why)
		LOG_PEER(c->uid, LOG_NOTICE, "closing %s peer pid %d uid %u: %s",
			 c->role == SVC_ROLE_CLIENT ? "client" : "runtime", (int)c->pid,
			 (unsigned)c->uid, why);
	/* Free outside the current handler: callers may still hold c. */
	event_base_once(base, -1, EV_TIMEOUT, conn_reap_cb, c, NULL);
}

/* --------------------------------------------------- client dispatcher */

typedef int (*client_fn)(struct svc_conn *c, const Pd__ClientMsg *m);
static int reply(struct svc_conn *c, uint64_t token, int error, const char *why);

/*
 * Before a message that acts for the peer's process: is it still the one
 * that connected? If not, the refusal (token != 0) and the connection
 * closed. 0 or a negative errno (then the handler stops, and returns 0:
 * the drop is already under way).
 */
static int client_recheck(struct svc_conn *c, uint64_t token, bool answer)
{
	int r = svc_ident_check(&c->ident);
	if (r == 0)
		return 0;
	if (answer)
		reply(c, token, PROF_E_PERMISSION, ident_why(r));
	svc_conn_drop(c, ident_why(r));
	return r;
}

static int client_hello(struct svc_conn *c, const Pd__ClientMsg *m)
{
	Pd__DaemonMsg out = PD__DAEMON_MSG__INIT;
	Pd__Welcome w = PD__WELCOME__INIT;

	if (c->hello)
		return -EPROTO;
	hello_seen(c);
	w.version = PROF_API_VERSION;
	w.runtime_socket = (char *)cfg->runtime_socket;
	w.uid = (uint32_t)c->uid;
	w.has_max_message_bytes = 1;
	w.max_message_bytes = WIRE_CLIENT_MAX_MSG;
	out.msg_case = PD__DAEMON_MSG__MSG_WELCOME;
	out.welcome = &w;
	svc_trigger_client_up(c);
	return svc_conn_send(c, &out.base, -1);
}

static int client_request(struct svc_conn *c, const Pd__ClientMsg *m)
{
	Pd__DaemonMsg out = PD__DAEMON_MSG__INIT;
	Pd__RequestReply rep = PD__REQUEST_REPLY__INIT;
	const char *why = NULL;
	uint64_t id = 0;

	if (client_recheck(c, m->request->token, true) < 0)
		return 0;
	int e = svc_session_request(c, m->request, &id, &why);
	rep.token = m->request->token;
	rep.request_id = id;
	rep.error = (uint32_t)e;
	rep.message = (char *)why;
	out.msg_case = PD__DAEMON_MSG__MSG_REPLY;
	out.reply = &rep;
	if (e)
		LOG_PEER(c->uid, LOG_INFO, "refused request from pid %d (%s): %s: %s", (int)c->pid,
			 c->app, prof_strerror(e), why ? why : "");
	int r = svc_conn_send(c, &out.base, -1);
	if (r == 0 && e)
		svc_session_refused(c, id, m->request, e, why);
	return r;
}

static int client_cancel(struct svc_conn *c, const Pd__ClientMsg *m)
{
	svc_session_cancel(c, m->cancel->request_id);
	return 0;
}

static int client_set_listener(struct svc_conn *c, const Pd__ClientMsg *m)
{
	c->listener = !m->set_listener->has_enable || m->set_listener->enable;
	if (c->listener)
		svc_session_redeliver(c);
	return 0;
}

static int reply(struct svc_conn *c, uint64_t token, int error, const char *why)
{
	Pd__DaemonMsg out = PD__DAEMON_MSG__INIT;
	Pd__RequestReply rep = PD__REQUEST_REPLY__INIT;
	rep.token = token;
	rep.error = (uint32_t)error;
	rep.message = (char *)why;
	out.msg_case = PD__DAEMON_MSG__MSG_REPLY;
	out.reply = &rep;
	return svc_conn_send(c, &out.base, -1);
}

static int client_add_trigger(struct svc_conn *c, const Pd__ClientMsg *m)
{
	char why[160] = "";
	if (client_recheck(c, m->add_trigger->token, true) < 0)
		return 0;
	int e = svc_trigger_add(c, m->add_trigger->trigger, why, sizeof(why));
	return reply(c, m->add_trigger->token, e, e ? why : NULL);
}

static int client_remove_trigger(struct svc_conn *c, const Pd__ClientMsg *m)
{
	const Pd__RemoveTrigger *rt = m->remove_trigger;
	int e = svc_trigger_remove(c, rt->has_type ? (int)rt->type : -1) < 0 ? PROF_E_UNKNOWN : 0;
	return reply(c, rt->token, e, NULL);
}

static int client_signal(struct svc_conn *c, const Pd__ClientMsg *m)
{
	if (client_recheck(c, 0, false) < 0)
		return 0;
	svc_trigger_signal(c, m->signal);
	return 0;
}

static int client_ack(struct svc_conn *c, const Pd__ClientMsg *m)
{
	svc_session_ack(c, m->ack->result_id);
	return 0;
}

static const struct {
	Pd__ClientMsg__MsgCase which;
	bool needs_hello;
	client_fn fn;
} client_table[] = {
	{ PD__CLIENT_MSG__MSG_HELLO, false, client_hello },
	{ PD__CLIENT_MSG__MSG_REQUEST, true, client_request },
	{ PD__CLIENT_MSG__MSG_CANCEL, true, client_cancel },
	{ PD__CLIENT_MSG__MSG_SET_LISTENER, true, client_set_listener },
	{ PD__CLIENT_MSG__MSG_ACK, true, client_ack },
	{ PD__CLIENT_MSG__MSG_ADD_TRIGGER, true, client_add_trigger },
	{ PD__CLIENT_MSG__MSG_REMOVE_TRIGGER, true, client_remove_trigger },
	{ PD__CLIENT_MSG__MSG_SIGNAL, true, client_signal },
};

static int client_dispatch(struct svc_conn *c, const uint8_t *buf, size_t len)
{
	const char *why;
	Pd__ClientMsg *m = svc_decode_client(buf, len, &why);
	int r = -EPROTO;

	if (!m) {
		svc_conn_drop(c, why);
		return -EPROTO;
	}
	for (size_t i = 0; i < sizeof(client_table) / sizeof(client_table[0]); i++) {
		if (client_table[i].which != m->msg_case)
			continue;
		if (client_table[i].needs_hello && !c->hello) {
			why = "message before hello";
			break;
		}
		r = client_table[i].fn(c, m);
		why = r == -EPROTO ? "protocol violation" : NULL;
		break;
	}
	pd__client_msg__free_unpacked(m, NULL);
	if (r < 0)
		svc_conn_drop(c, why);
	return r;
}

/* -------------------------------------------------- runtime dispatcher */

static uint32_t parse_caps(const Pd__RuntimeHello *h)
{
	uint32_t caps = 0;
	for (size_t i = 0; i < h->n_capabilities; i++)
		caps |= names_cap_parse(h->capabilities[i]);
	return caps;
}

typedef int (*runtime_fn)(struct svc_conn *c, const Pd__RuntimeMsg *m);

static int runtime_hello(struct svc_conn *c, const Pd__RuntimeMsg *m)
{
	Pd__DaemonToRuntime out = PD__DAEMON_TO_RUNTIME__INIT;
	Pd__HelloAck ack = PD__HELLO_ACK__INIT;

	if (c->hello)
		return -EPROTO;
	/* The process that connected, still there with its ids. */
	int ir = svc_ident_check(&c->ident);
	if (ir < 0) {
		LOG_W("runtime hello of pid %d refused: %s", (int)c->pid, ident_why(ir));
		return ir;
	}
	/* The pid is the kernel's word, never the message's. */
	if ((pid_t)m->hello->pid != c->pid) {
		LOG_PEER(c->uid, LOG_WARNING, "runtime hello claims pid %u but the peer is pid %d",
			 m->hello->pid, (int)c->pid);
		return -EPERM;
	}
	if (svc_conn_runtime_for(c->pid)) {
		LOG_PEER(c->uid, LOG_WARNING, "pid %d already has a runtime connection",
			 (int)c->pid);
		return -EEXIST;
	}
	svc_conn_set_runtime(c, parse_caps(m->hello));
	util_strlcpy(c->kind, m->hello->runtime, sizeof(c->kind));
	/* What the runtime would offer but could not get (a JVMTI capability). */
	char missing[WIRE_MAX_CAPS * 33 + 2] = "";
	for (size_t i = 0; i < m->hello->n_missing; i++) {
		size_t len = strlen(missing);
		util_fmt(missing + len, sizeof(missing) - len, "%s%s", i ? "," : "",
			 m->hello->missing[i]);
	}
	LOG_PEER(c->uid, LOG_INFO, "runtime up: pid %d uid %u kind %s caps 0x%x missing %s",
		 (int)c->pid, (unsigned)c->uid, m->hello->runtime, c->caps,
		 missing[0] ? missing : "-");
	ack.version = PROF_API_VERSION;
	out.msg_case = PD__DAEMON_TO_RUNTIME__MSG_HELLO_ACK;
	out.hello_ack = &ack;
	int r = svc_conn_send(c, &out.base, -1);
	if (r == 0) {
		svc_trigger_runtime_up(c);
		svc_session_runtime_up(c);
	}
	return r;
}

static int runtime_done(struct svc_conn *c, const Pd__RuntimeMsg *m)
{
	return svc_session_capture_done(c, m->done);
}

static int runtime_event(struct svc_conn *c, const Pd__RuntimeMsg *m)
{
	/* It may fire a trigger: only for the process that connected. */
	if (svc_conn_check(c) < 0)
		return 0;
	svc_trigger_runtime_event(c, m->event);
	return 0;
}

static const struct {
	Pd__RuntimeMsg__MsgCase which;
	bool needs_hello;
	runtime_fn fn;
} runtime_table[] = {
	{ PD__RUNTIME_MSG__MSG_HELLO, false, runtime_hello },
	{ PD__RUNTIME_MSG__MSG_DONE, true, runtime_done },
	{ PD__RUNTIME_MSG__MSG_EVENT, true, runtime_event },
};

static int runtime_dispatch(struct svc_conn *c, const uint8_t *buf, size_t len)
{
	const char *why;
	Pd__RuntimeMsg *m = svc_decode_runtime(buf, len, &why);
	int r = -EPROTO;

	if (!m) {
		svc_conn_drop(c, why);
		return -EPROTO;
	}
	for (size_t i = 0; i < sizeof(runtime_table) / sizeof(runtime_table[0]); i++) {
		if (runtime_table[i].which != m->msg_case)
			continue;
		if (runtime_table[i].needs_hello && !c->hello) {
			why = "message before hello";
			break;
		}
		r = runtime_table[i].fn(c, m);
		why = r < 0 ? strerror(-r) : NULL;
		break;
	}
	pd__runtime_msg__free_unpacked(m, NULL);
	if (r < 0)
		svc_conn_drop(c, why);
	return r;
}

/* ------------------------------------------------------------ events */

static void conn_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct svc_conn *c = arg;
	uint8_t buf[WIRE_CLIENT_MAX_MSG > WIRE_RUNTIME_MAX_MSG ? WIRE_CLIENT_MAX_MSG
							      : WIRE_RUNTIME_MAX_MSG];
	size_t cap = c->role == SVC_ROLE_CLIENT ? WIRE_CLIENT_MAX_MSG : WIRE_RUNTIME_MAX_MSG;

	/* A bounded batch per wakeup keeps one chatty peer from starving others. */
	for (int i = 0; i < 16 && !c->dropping && share_take(c->share); i++) {
		ssize_t n = wire_recv(c->fd, buf, cap, NULL);
		if (n <= 0)
			share_refund(c->share);
		if (n == -EAGAIN)
			return;
		if (n == 0) {
			LOG_PEER(c->uid, LOG_DEBUG, "%s pid %d disconnected",
				 c->role == SVC_ROLE_CLIENT ? "client" : "runtime", (int)c->pid);
			svc_conn_drop(c, NULL);
			return;
		}
		if (n < 0) {
			svc_conn_drop(c, n == -EMSGSIZE ? "message over the size cap"
				      : n == -EPROTO ? "unexpected fds or truncated control data"
				      : strerror((int)-n));
			return;
		}
		if (c->role == SVC_ROLE_CLIENT)
			client_dispatch(c, buf, (size_t)n);
		else
			runtime_dispatch(c, buf, (size_t)n);
	}
}

static void conn_write_cb(evutil_socket_t fd, short what, void *arg)
{
	struct svc_conn *c = arg;
	int r = conn_flush(c);
	if (r < 0)
		svc_conn_drop(c, strerror(-r));
}

static uint32_t count_uid(enum svc_role role, uid_t uid)
{
	uint32_t n = 0;
	for (struct svc_conn *c = conns; c; c = c->next)
		if (c->role == role && c->uid == uid && !c->dropping)
			n++;
	return n;
}

static void hello_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct svc_conn *c = arg;
	if (!c->hello)
		svc_conn_drop(c, "no hello within hello_timeout_ms");
}

static void accept_cb(evutil_socket_t lfd, short what, void *arg)
{
	struct listener *l = arg;
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	struct svc_ident ident;
	const char *refuse = NULL;

	int fd = svc_acceptor_accept(&l->acc);
	if (fd < 0)
		return;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0) {
		LOG_W("SO_PEERCRED: %s", strerror(errno));
		close(fd);
		return;
	}
	if (l->role == SVC_ROLE_CLIENT) {
		if (nclients >= cfg->max_clients)
			refuse = "max_clients reached";
		else if (count_uid(SVC_ROLE_CLIENT, cred.uid) >= cfg->max_clients_per_uid)
			refuse = "max_clients_per_uid reached";
	} else if (nruntimes >= cfg->max_runtimes) {
		refuse = "max_runtimes reached";
	} else if (count_uid(SVC_ROLE_RUNTIME, cred.uid) >= cfg->max_runtimes_per_uid) {
		/* One uid's idle connections must not lock every other app's agent out. */
		refuse = "max_runtimes_per_uid reached";
	}
	if (refuse) {
		LOG_PEER(cred.uid, LOG_WARNING, "refusing pid %d uid %u on %s: %s", (int)cred.pid,
			 (unsigned)cred.uid, l->path, refuse);
		close(fd);
		return;
	}
	/* Bound to the process, not its pid (after the caps: a refused flood
	 * costs no /proc reads). One already gone, or with other ids than
	 * SO_PEERCRED's, has nobody to speak for. */
	int ir = svc_ident_bind(&ident, fd);
	if (ir < 0) {
		close(fd);
		/* No fd for its pidfd: out of fds as if accept had failed, so
		 * pause the same way rather than close every new peer. */
		if (svc_acceptor_pause(&l->acc, "binding a peer", ir) == 0)
			return;
		LOG_D("refusing pid %d uid %u on %s: %s", (int)cred.pid, (unsigned)cred.uid, l->path,
		      ir == -EPERM || ir == -ESRCH ? ident_why(ir) : strerror(-ir));
		return;
	}
	struct svc_conn *c = calloc(1, sizeof(*c));
	if (!c)
		goto fail;
	int qr = svc_outq_init(&c->q, cfg->max_queued_msgs);
	c->fd = fd;
	c->id = next_conn_id++;
	c->role = l->role;
	c->uid = cred.uid;
	c->gid = cred.gid;
	c->pid = cred.pid;
	c->ident = ident; /* c owns its pidfd now */
	ident.pidfd = -1;
	svc_app_key(cfg, c->pid, c->uid, c->app, sizeof(c->app));
	c->ev_read = event_new(base, fd, EV_READ | EV_PERSIST, conn_read_cb, c);
	c->ev_write = event_new(base, fd, EV_WRITE, conn_write_cb, c);
	c->ev_hello = evtimer_new(base, hello_timeout_cb, c);
	c->share = share_get(c->uid);
	if (qr < 0 || !c->ev_read || !c->ev_write || !c->ev_hello || !c->share)
		goto fail_conn;
	c->next = conns;
	conns = c;
	if (c->role == SVC_ROLE_CLIENT)
		nclients++;
	else
		nruntimes++;
	event_add(c->ev_read, NULL);
	struct timeval hto = { cfg->hello_timeout_ms / 1000,
			       (cfg->hello_timeout_ms % 1000) * 1000 };
	evtimer_add(c->ev_hello, &hto);
	LOG_PEER(c->uid, LOG_DEBUG, "%s connected: pid %d uid %u",
		 l->role == SVC_ROLE_CLIENT ? "client" : "runtime", (int)c->pid, (unsigned)c->uid);
	return;
fail_conn:
	if (c->ev_read)
		event_free(c->ev_read);
	if (c->ev_write)
		event_free(c->ev_write);
	if (c->ev_hello)
		event_free(c->ev_hello);
	share_put(c->share);
	svc_outq_fini(&c->q);
	svc_ident_fini(&c->ident);
	free(c);
fail:
	LOG_E("out of memory accepting a connection");
	svc_ident_fini(&ident);
	close(fd);
}

/*
 * Every peer holds an fd: make the soft fd limit fit the connection caps
 * (service managers start daemons at 1024). Up to the hard limit, or past
 * it where we may (CAP_SYS_RESOURCE); short of that, say so.
 */
static void fit_fd_limit(void)
{
	struct rlimit rl;
	/* Each peer holds two: its socket and its process's pidfd (svc_ident).
	 * Each process the CPU watcher follows holds one too (trg_cpu.c), and
	 * each runtime's process may have a crash ring memfd (svc_trigger.c). */
	rlim_t want = 2 * ((rlim_t)cfg->max_clients + cfg->max_runtimes) + cfg->max_runtimes +
		      TRG_MAX_PIDS + CONN_FD_RESERVE;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= want)
		return;
	rlim_t old = rl.rlim_cur;
	struct rlimit up = { want, rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? rl.rlim_max
										     : want };
	if (setrlimit(RLIMIT_NOFILE, &up) < 0) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0 || getrlimit(RLIMIT_NOFILE, &rl) < 0)
			rl.rlim_cur = old;
	} else {
		rl = up;
	}
	if (rl.rlim_cur < want)
		LOG_W("fd limit %llu is below 2 x (max_clients + max_runtimes) + %d = %llu: "
		      "connections past it wait until fds are free", (unsigned long long)rl.rlim_cur,
		      TRG_MAX_PIDS + CONN_FD_RESERVE, (unsigned long long)want);
	else
		LOG_I("fd limit raised from %llu to %llu for 2 x (max_clients + max_runtimes)",
		      (unsigned long long)old, (unsigned long long)rl.rlim_cur);
}

static int listen_on(struct listener *l, const char *path, enum svc_role role)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	char dir[SVC_SUN_MAX];
	int r;

	l->fd = -1;
	l->role = role;
	util_strlcpy(l->path, path, sizeof(l->path));
	util_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
	util_strlcpy(dir, path, sizeof(dir));
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		if ((r = util_mkdir_p(dir, 0755)) < 0) {
			LOG_E("cannot create %s: %s", dir, strerror(-r));
			return r;
		}
	}
	/* Replace a stale socket from a previous run, never another file. */
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			LOG_E("%s exists and is not a socket", path);
			return -EEXIST;
		}
		unlink(path);
	}
	l->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (l->fd < 0)
		return -errno;
	if (bind(l->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(l->fd, 128) < 0) {
		r = -errno;
		LOG_E("cannot listen on %s: %s", path, strerror(errno));
		close(l->fd);
		l->fd = -1;
		return r;
	}
	/* Any local process may connect; authorisation is by peer uid. */
	chmod(path, 0666);
	if ((r = svc_acceptor_start(&l->acc, base, l->fd, l->path, accept_cb, l)) < 0)
		return r;
	LOG_I("listening on %s", path);
	return 0;
}

/* Watch an inherited listening socket as l. */
/*
 * Ready an inherited listening socket: it must be AF_UNIX SOCK_SEQPACKET;
 * it gets CLOEXEC and O_NONBLOCK (inherited without them, and helpers must
 * not get it); path is its bound path, else name. 0 or -errno.
 */
static int inherited(int fd, const char *name, char *path, size_t n)
{
	struct sockaddr_un sa;
	socklen_t len = sizeof(sa);

	if (sd_is_socket(fd, AF_UNIX, SOCK_SEQPACKET, 1) <= 0) {
		LOG_E("activated socket '%s' (fd %d) is not a listening AF_UNIX SOCK_SEQPACKET "
		      "socket: use ListenSequentialPacket= in the socket unit", name, fd);
		return -EINVAL;
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ||
	    fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
		return -errno;
	memset(&sa, 0, sizeof(sa));
	if (getsockname(fd, (struct sockaddr *)&sa, &len) == 0 && sa.sun_path[0])
		util_strlcpy(path, sa.sun_path, n);
	else
		util_strlcpy(path, name, n);
	return 0;
}

/* Watch an inherited listening socket as l. */
static int adopt(struct listener *l, int fd, enum svc_role role, const char *name)
{
	int r = inherited(fd, name, l->path, sizeof(l->path));
	if (r < 0)
		return r;
	l->fd = fd;
	l->role = role;
	l->activated = true;
	if ((r = svc_acceptor_start(&l->acc, base, l->fd, l->path, accept_cb, l)) < 0)
		return r;
	LOG_I("listening on %s (socket-activated as '%s')", l->path, name);
	return 0;
}

/* An activated control.sock and its path, until svc_ctl takes them. */
static int control_fd = -1;
static char control_path[SVC_SUN_MAX];

int svc_conn_take_control_fd(char *path, size_t n)
{
	int fd = control_fd;
	control_fd = -1;
	if (fd >= 0)
		util_strlcpy(path, control_path, n);
	return fd;
}

/* An activated control.sock: readied and kept for svc_ctl, or closed when
 * unusable or a second one. 0 if it is one, else -ENOENT. */
static int keep_control(int fd, const char *name)
{
	if (strcmp(name, "control") && sd_is_socket_unix(fd, SOCK_SEQPACKET, 1, cfg->control_socket, 0) <= 0)
		return -ENOENT;
	if (control_fd >= 0 || inherited(fd, name, control_path, sizeof(control_path)) < 0) {
		LOG_E("activated socket '%s' (fd %d) is not a usable control socket: closed",
		      name, fd);
		close(fd);
		return 0;
	}
	control_fd = fd;
	return 0;
}

/*
 * Take the sockets systemd passed (LISTEN_FDS). A name "client"/"runtime"
 * decides the role; otherwise the bound path must be the configured one.
 * An fd that matches neither is closed with a warning.
 */
static int take_activated(void)
{
	char **names = NULL;
	int n = sd_listen_fds_with_names(1, &names), r = 0;

	if (n < 0) {
		LOG_W("socket activation: %s; binding the sockets here", strerror(-n));
		return 0;
	}
	for (int i = 0; i < n; i++) {
		int fd = SD_LISTEN_FDS_START + i;
		const char *name = names && names[i] ? names[i] : "unknown";
		int role = -1;
		if (keep_control(fd, name) == 0)
			continue;
		if (!strcmp(name, "client"))
			role = SVC_ROLE_CLIENT;
		else if (!strcmp(name, "runtime"))
			role = SVC_ROLE_RUNTIME;
		else if (sd_is_socket_unix(fd, SOCK_SEQPACKET, 1, cfg->client_socket, 0) > 0)
			role = SVC_ROLE_CLIENT;
		else if (sd_is_socket_unix(fd, SOCK_SEQPACKET, 1, cfg->runtime_socket, 0) > 0)
			role = SVC_ROLE_RUNTIME;
		if (r < 0 || role < 0 || listeners[role].fd >= 0) {
			if (r == 0)
				LOG_W("socket activation: fd %d '%s' is none of client.sock, "
				      "runtime.sock, control.sock (by name or configured path): closed",
				      fd, name);
			close(fd);
			continue;
		}
		r = adopt(&listeners[role], fd, (enum svc_role)role, name);
		if (r < 0 && listeners[role].fd != fd)
			close(fd);
	}
	if (names)
		for (int i = 0; i < n; i++)
			free(names[i]);
	free(names);
	return r;
}

int svc_conn_init(struct event_base *b, const struct svc_config *c)
{
	int r;
	base = b;
	cfg = c;
	if (!(ev_round = evtimer_new(base, round_cb, NULL)))
		return -ENOMEM;
	listeners[0].fd = listeners[1].fd = -1;
	listeners[0].activated = listeners[1].activated = false;
	fit_fd_limit();
	if ((r = take_activated()) < 0)
		return r;
	if (listeners[0].fd < 0 &&
	    (r = listen_on(&listeners[0], cfg->client_socket, SVC_ROLE_CLIENT)) < 0)
		return r;
	if (listeners[1].fd < 0)
		return listen_on(&listeners[1], cfg->runtime_socket, SVC_ROLE_RUNTIME);
	return 0;
}

void svc_conn_fini(void)
{
	if (control_fd >= 0)
		close(control_fd);
	control_fd = -1;
	for (int i = 0; i < 2; i++) {
		svc_acceptor_stop(&listeners[i].acc);
		if (listeners[i].fd >= 0) {
			close(listeners[i].fd);
			/* An activated socket's path belongs to its socket unit. */
			if (!listeners[i].activated)
				unlink(listeners[i].path);
		}
		listeners[i].fd = -1;
	}
	while (conns)
		conn_free(conns);
	if (ev_round)
		event_free(ev_round);
	ev_round = NULL;
}

/* ------------------------------------------------- read-only queries */

void svc_conn_foreach(void (*fn)(struct svc_conn *c, void *ud), void *ud)
{
	for (struct svc_conn *c = conns; c; c = c->next)
		if (!c->dropping)
			fn(c, ud);
}

enum svc_role svc_conn_role(const struct svc_conn *c) { return c->role; }
bool svc_conn_hello_done(const struct svc_conn *c) { return c->hello; }
const char *svc_conn_kind(const struct svc_conn *c) { return c->kind; }

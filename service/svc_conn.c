/*
 * The transport of client.sock, runtime.sock and control.sock (svc_conn.h
 * has the contract and the caps). The roles' handlers live in
 * svc_client.c, svc_runtime.c and svc_ctl.c and come in through
 * struct svc_conn_role_ops; this file knows the sockets, the peers and
 * their caps, never what a message means.
 *
 * Identity: svc_conn_check() and the roles' checks ask svc_ident whether
 * the peer's process is still the one that connected, with the same ids.
 * One that is gone (its socket passed on, its pid reused) or changed (a
 * setuid exec) is closed.
 *
 * Out of fds (EMFILE/ENFILE on accept) the listener pauses for
 * SVC_ACCEPT_PAUSE_MS (svc_listen.c), one log line per pause; connections
 * wait in the listen backlog (and connect() fails with EAGAIN once it is
 * full). At start the soft RLIMIT_NOFILE is raised to fit 2 x (max_clients
 * + max_runtimes) (a socket and a pidfd each) + max_runtimes (crash rings)
 * + TRG_MAX_PIDS + CONN_FD_RESERVE, so this only happens when the hard
 * limit is lower than that. A peer accepted when no fd is left for its
 * pidfd is closed and the listener pauses the same way.
 */
#include "svc_config.h"
#include "svc_conn.h"

#include <errno.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "svc_ident.h"
#include "svc_listen.h"
#include "svc_outq.h"
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
	/* Dropped while messages were held: freed after the release sends them
	 * (conn_reap_cb, svc_conn_release). */
	bool reap_wait;
	/* Wakes left reading one message only (conn_read_cb); 0: a full batch. */
	uint8_t single;
	uint32_t caps;     /* runtime capabilities */
	char app[RL_APP_MAX];
	char kind[16];     /* runtime kind from its hello ("native", "jvm"), for status */
	struct uid_share *share;  /* its uid's budget per loop round */
	struct svc_conn *next;
	struct svc_conn *rt_next; /* a runtime's chain in rt_by_pid */
	struct svc_conn *id_next; /* its chain in by_id */
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
struct uid_share {
	uid_t uid;
	unsigned refs;            /* connections of this uid */
	unsigned listeners;       /* of them, with the listener flag */
	uint64_t round;           /* the budget period its count is of */
	unsigned used;
	struct uid_share *next;
};

/*
 * The three sockets: systemd's name, what the log calls them, the listen
 * backlog and the messages one peer may have handled per wakeup (a bounded
 * batch keeps one chatty peer from starving others).
 */
static const struct {
	const char *name, *label;
	int backlog;
	unsigned batch;
} socks[SVC_ROLE_N] = {
	[SVC_ROLE_CLIENT] = { "client", NULL, 128, 16 },
	[SVC_ROLE_RUNTIME] = { "runtime", NULL, 128, 16 },
	/* profctl is one operator: a short backlog is plenty. */
	[SVC_ROLE_CONTROL] = { "control", "profctl", 16, 8 },
};

/* conn_read_cb: wakes reading one message after a wake that found one. */
#define CONN_SINGLE_WAKES 8

/* fds besides the peers': databases, listeners, helper pipes and pidfds, raw files. */
#define CONN_FD_RESERVE 256

static struct event_base *base;
static const struct svc_config *cfg;
static struct svc_listener listeners[SVC_ROLE_N];
static const struct svc_conn_role_ops *role_ops[SVC_ROLE_N];
static bool role_hello[SVC_ROLE_N];   /* its handlers need a hello */
static uint32_t npeers[SVC_ROLE_N];
static struct svc_conn *conns;
static uint64_t next_conn_id = 1;
static struct uid_share *shares;
static uint64_t round_no;
static struct event *ev_round; /* renews the budgets */
/*
 * Runtime peers by pid, newest first in a bucket as in conns.
 * svc_conn_runtime_for runs for every request (svc_request's snapshot)
 * and session start and end (svc_session): walking every peer of every
 * role for it was about 1 % of the daemon's time with 32 clients and no
 * runtime (bench/admission.sh, perf), and it grows with the peers. A
 * chain holds at most max_runtimes peers (the accept cap), the walk's
 * bound before.
 */
#define CONN_RT_BUCKETS 256
static struct svc_conn *rt_by_pid[CONN_RT_BUCKETS];
/*
 * Every peer by id, for svc_conn_by_id: a session's requester when its
 * reply or result goes out (svc_request's batch, svc_deliver,
 * svc_capture), where a walk of every peer was 0.4 % of the daemon's
 * time in the same bench. Ids are sequential: they spread evenly.
 */
#define CONN_ID_BUCKETS 256
static struct svc_conn *by_id[CONN_ID_BUCKETS];
static void conn_free(struct svc_conn *c);

static struct svc_conn **rt_bucket(pid_t pid)
{
	return &rt_by_pid[(unsigned)pid % CONN_RT_BUCKETS];
}

static struct svc_conn **id_bucket(uint64_t id)
{
	return &by_id[id % CONN_ID_BUCKETS];
}

/* uid's share, or NULL when none of its peers is connected. */
static struct uid_share *share_find(uid_t uid)
{
	struct uid_share *sh;
	for (sh = shares; sh && sh->uid != uid; sh = sh->next)
		;
	return sh;
}

/* The share of uid, made for its first connection. NULL: out of memory. */
static struct uid_share *share_get(uid_t uid)
{
	struct uid_share *sh = share_find(uid);
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
	if (sh->used < SVC_CONN_UID_ROUND_MSGS) {
		sh->used++;
		return true;
	}
	if (ev_round && !evtimer_pending(ev_round, NULL))
		evtimer_add(ev_round, &now);
	return false;
}


/* ------------------------------------------------------------ lookups */

uint64_t svc_conn_id(const struct svc_conn *c) { return c->id; }
enum svc_role svc_conn_role(const struct svc_conn *c) { return c->role; }
uid_t svc_conn_uid(const struct svc_conn *c) { return c->uid; }
gid_t svc_conn_gid(const struct svc_conn *c) { return c->gid; }
pid_t svc_conn_pid(const struct svc_conn *c) { return c->pid; }
const struct svc_ident *svc_conn_ident(const struct svc_conn *c) { return &c->ident; }
const char *svc_conn_app(const struct svc_conn *c) { return c->app; }
bool svc_conn_hello_done(const struct svc_conn *c) { return c->hello; }
const char *svc_conn_kind(const struct svc_conn *c) { return c->kind; }
uint32_t svc_conn_runtime_caps(const struct svc_conn *c) { return c->caps; }
void svc_conn_set_listener(struct svc_conn *c, bool on)
{
	if (c->listener != on && c->share)
		c->share->listeners += on ? 1 : -1;
	c->listener = on;
}
bool svc_conn_is_listener(const struct svc_conn *c) { return c->listener && !c->dropping; }

const char *svc_conn_ident_why(int r)
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
		svc_conn_drop(c, svc_conn_ident_why(r));
	return r;
}

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

void svc_conn_hello(struct svc_conn *c)
{
	c->hello = true;
	if (c->ev_hello)
		evtimer_del(c->ev_hello);
}

void svc_conn_set_runtime(struct svc_conn *c, uint32_t caps, const char *kind)
{
	svc_conn_hello(c);
	c->caps = caps;
	util_strlcpy(c->kind, kind ? kind : "", sizeof(c->kind));
}

struct svc_conn *svc_conn_by_id(uint64_t id)
{
	for (struct svc_conn *c = *id_bucket(id); c; c = c->id_next)
		if (c->id == id && !c->dropping)
			return c;
	return NULL;
}

/*
 * Asked for every refusal (svc_deliver_refused: the listener's copy) and
 * every result whose requester has gone: the uid's count of listeners
 * spares the walk of every peer when it has none, the everyday case.
 */
struct svc_conn *svc_conn_listener_for(uid_t uid)
{
	const struct uid_share *sh = share_find(uid);
	if (!sh || !sh->listeners)
		return NULL;
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
	for (struct svc_conn *c = *rt_bucket(pid); c; c = c->rt_next)
		if (c->hello && c->pid == pid && !c->dropping && svc_conn_check(c) == 0)
			return c;
	return NULL;
}

void svc_conn_foreach(void (*fn)(struct svc_conn *c, void *ud), void *ud)
{
	for (struct svc_conn *c = conns; c; c = c->next)
		if (!c->dropping)
			fn(c, ud);
}

/* ------------------------------------------------------------ sending */

/* svc_conn_hold: sends are queued until the last svc_conn_release. */
static unsigned held;

/*
 * The turn's hold. The first read of a loop turn holds every peer's
 * messages until ev_flush, activated then, runs: after the callbacks
 * already active in the turn (every peer's read, then the timers), so a
 * peer's messages of one turn leave together, in one sendmmsg
 * (svc_outq_flush), and wake it once. Why (bench/admission.sh): a
 * refusal's reply went at once, and the failure result of the app's
 * last capture (a timer of the same turn, held by the group commit)
 * woke the app again at the commit; each wake of another CPU's task is
 * an IPI, ~4 us of the daemon's 27 us a decision. A message so waits at
 * most one turn's callbacks, as an admission's reply already did.
 */
static struct event *ev_flush;
static bool turn_held;

static void flush_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	turn_held = false;
	svc_conn_release();
}

static void turn_hold(void)
{
	if (turn_held || !ev_flush)
		return;
	turn_held = true;
	svc_conn_hold();
	event_active(ev_flush, EV_TIMEOUT, 0);
}

static int conn_flush(struct svc_conn *c)
{
	if (held)
		return 0;
	int r = svc_outq_flush(&c->q, c->fd);
	if (r == 1)
		event_add(c->ev_write, NULL);
	return r < 0 ? r : 0;
}

int svc_conn_send(struct svc_conn *c, const ProtobufCMessage *m, int fd)
{
	if (c->dropping || !role_ops[c->role])
		return -EPIPE;
	int r = svc_outq_push(&c->q, m, role_ops[c->role]->max_out, fd);
	if (r == -ENOBUFS)
		svc_conn_drop(c, "peer does not read: outgoing queue full");
	if (r < 0)
		return r;
	r = conn_flush(c);
	if (r < 0)
		svc_conn_drop(c, strerror(-r));
	return r;
}

void svc_conn_hold(void)
{
	held++;
}

static void conn_reap_cb(evutil_socket_t fd, short what, void *arg);

void svc_conn_release(void)
{
	if (held && --held)
		return;
	for (struct svc_conn *c = conns; c; c = c->next) {
		if (c->dropping) {
			/* What was queued before the drop (a refusal saying why,
			 * say) leaves now, once, without waiting for the peer to
			 * read; the peer is freed after, outside this caller. */
			if (c->q.len)
				(void)svc_outq_flush(&c->q, c->fd);
			if (c->reap_wait) {
				c->reap_wait = false;
				event_base_once(base, -1, EV_TIMEOUT, conn_reap_cb, c, NULL);
			}
			continue;
		}
		if (!c->q.len)
			continue;
		int r = conn_flush(c);
		if (r < 0)
			svc_conn_drop(c, strerror(-r));
	}
}

/* ------------------------------------------------------------ closing */

static void conn_free(struct svc_conn *c)
{
	if (!c)
		return;
	if (c->hello && role_ops[c->role] && role_ops[c->role]->closed)
		role_ops[c->role]->closed(c);
	for (struct svc_conn **pp = &conns; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	if (c->role == SVC_ROLE_RUNTIME)
		for (struct svc_conn **pp = rt_bucket(c->pid); *pp; pp = &(*pp)->rt_next)
			if (*pp == c) {
				*pp = c->rt_next;
				break;
			}
	for (struct svc_conn **pp = id_bucket(c->id); *pp; pp = &(*pp)->id_next)
		if (*pp == c) {
			*pp = c->id_next;
			break;
		}
	if (c->share && c->listener)
		c->share->listeners--;
	share_put(c->share);
	npeers[c->role]--;
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
	/*
	 * A peer dropped while the turn or the group commit holds the sends
	 * may have a message queued that it was meant to get before the close
	 * (svc_client's PERMISSION refusal of a peer whose ids changed): it
	 * waits for the release, which sends it and reaps the peer. Nothing is
	 * read from it meanwhile.
	 */
	if (held && c->q.len) {
		c->reap_wait = true;
		if (c->ev_read)
			event_del(c->ev_read);
		return;
	}
	conn_free(c);
}

void svc_conn_drop(struct svc_conn *c, const char *why)
{
	if (c->dropping)
		return;
	c->dropping = true;
	if (why)
		LOG_PEER(c->uid, LOG_NOTICE, "closing %s peer pid %d uid %u: %s",
			 socks[c->role].name, (int)c->pid, (unsigned)c->uid, why);
	/* Free outside the current handler: callers may still hold c. */
	event_base_once(base, -1, EV_TIMEOUT, conn_reap_cb, c, NULL);
}

/* ------------------------------------------------------------ reading */

/*
 * The case of m's oneof (every role's message has one): the quantifier
 * of a oneof's fields is its case. -1 for a message without a oneof.
 */
static int oneof_case(const ProtobufCMessage *m)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;
	for (unsigned i = 0; i < d->n_fields; i++)
		if (d->fields[i].flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
			return (int)*(const uint32_t *)((const char *)m +
							d->fields[i].quantifier_offset);
	return -1;
}

/* One packet: decoded by the role, handled by the entry of its case. */
static void conn_dispatch(struct svc_conn *c, const struct svc_conn_role_ops *ops,
			  const uint8_t *buf, size_t len)
{
	const char *why = NULL;
	ProtobufCMessage *m = ops->decode(buf, len, &why);
	int r = -EPROTO;

	if (!m) {
		svc_conn_drop(c, why ? why : "undecodable message");
		return;
	}
	int which = oneof_case(m);
	why = "unknown message";
	for (size_t i = 0; i < ops->nhandlers; i++) {
		const struct svc_conn_handler *h = &ops->handlers[i];
		if (h->which != which && h->which != SVC_CONN_ANY)
			continue;
		if (h->needs_hello && !c->hello) {
			why = "message before hello";
			break;
		}
		r = h->fn(c, m);
		why = r == -EPROTO ? "protocol violation" : r < 0 ? strerror(-r) : NULL;
		break;
	}
	protobuf_c_message_free_unpacked(m, NULL);
	if (r < 0)
		svc_conn_drop(c, why);
}

static void conn_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct svc_conn *c = arg;
	const struct svc_conn_role_ops *ops = role_ops[c->role];
	uint8_t buf[SVC_CONN_MAX_PACKET];

	/*
	 * A peer that sends one message and waits for its answer (an app's
	 * request) leaves nothing behind it: the receive after it fails with
	 * EAGAIN, one system call in eight of a decision (bench/admission.sh,
	 * strace -c). Once a wake found exactly one message, the next
	 * CONN_SINGLE_WAKES wakes read one only: the event is level-triggered,
	 * so a message left behind wakes the next round, and then a full batch
	 * is tried again. A pipelining peer loses nothing but a loop round.
	 */
	unsigned max = c->single ? 1 : socks[c->role].batch;
	if (c->single)
		c->single--;
	turn_hold();
	for (unsigned i = 0; ops && i < max && !c->dropping && share_take(c->share); i++) {
		ssize_t n = wire_recv(c->fd, buf, ops->max_in, NULL);
		if (n <= 0)
			share_refund(c->share);
		if (n == -EAGAIN) {
			if (i == 1)
				c->single = CONN_SINGLE_WAKES;
			return;
		}
		if (n == 0) {
			LOG_PEER(c->uid, LOG_DEBUG, "%s pid %d disconnected", socks[c->role].name,
				 (int)c->pid);
			svc_conn_drop(c, NULL);
			return;
		}
		if (n < 0) {
			svc_conn_drop(c, n == -EMSGSIZE ? "message over the size cap"
				      : n == -EPROTO ? "unexpected fds or truncated control data"
				      : strerror((int)-n));
			return;
		}
		conn_dispatch(c, ops, buf, (size_t)n);
	}
}

static void conn_write_cb(evutil_socket_t fd, short what, void *arg)
{
	struct svc_conn *c = arg;
	int r = conn_flush(c);
	if (r < 0)
		svc_conn_drop(c, strerror(-r));
}

static void hello_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct svc_conn *c = arg;
	if (!c->hello)
		svc_conn_drop(c, "no hello within hello_timeout_ms");
}

/* ------------------------------------------------------------ accepting */

/* A role's caps: connections in all and per uid, queued messages per peer,
 * and the config keys that set the first two, for the log. */
struct role_caps {
	uint32_t total, per_uid, queue;
	const char *total_key, *uid_key;
};

static struct role_caps caps_of(enum svc_role role)
{
	switch (role) {
	case SVC_ROLE_CLIENT:
		return (struct role_caps){ cfg->max_clients, cfg->max_clients_per_uid,
					   cfg->max_queued_msgs, "max_clients",
					   "max_clients_per_uid" };
	case SVC_ROLE_RUNTIME:
		/* Per uid: one uid's idle connections must not lock every other
		 * app's agent out. */
		return (struct role_caps){ cfg->max_runtimes, cfg->max_runtimes_per_uid,
					   cfg->max_queued_msgs, "max_runtimes",
					   "max_runtimes_per_uid" };
	default:
		return (struct role_caps){ cfg->max_ctl_clients, cfg->max_ctl_per_uid,
					   SVC_CONN_CTL_QUEUE, "max_control_clients",
					   "max_control_per_uid" };
	}
}

static uint32_t count_uid(enum svc_role role, uid_t uid)
{
	uint32_t n = 0;
	for (struct svc_conn *c = conns; c; c = c->next)
		if (c->role == role && c->uid == uid && !c->dropping)
			n++;
	return n;
}

/* The peer's state once it is bound; it owns fd and ident from here. 0 or -ENOMEM. */
static int conn_new(enum svc_role role, int fd, const struct ucred *cred,
		    struct svc_ident *ident)
{
	bool hello = role_hello[role];
	struct svc_conn *c = calloc(1, sizeof(*c));

	if (!c) {
		svc_ident_fini(ident);
		close(fd);
		return -ENOMEM;
	}
	int qr = svc_outq_init(&c->q, caps_of(role).queue);
	c->fd = fd;
	c->id = next_conn_id++;
	c->role = role;
	c->uid = cred->uid;
	c->gid = cred->gid;
	c->pid = cred->pid;
	c->ident = *ident; /* c owns its pidfd now */
	ident->pidfd = -1;
	svc_app_key(cfg, c->pid, c->uid, c->app, sizeof(c->app));
	c->ev_read = event_new(base, fd, EV_READ | EV_PERSIST, conn_read_cb, c);
	c->ev_write = event_new(base, fd, EV_WRITE, conn_write_cb, c);
	if (hello)
		c->ev_hello = evtimer_new(base, hello_timeout_cb, c);
	else
		c->hello = true; /* nothing to wait for */
	c->share = share_get(c->uid);
	c->next = conns;
	conns = c;
	if (role == SVC_ROLE_RUNTIME) {
		c->rt_next = *rt_bucket(c->pid);
		*rt_bucket(c->pid) = c;
	}
	c->id_next = *id_bucket(c->id);
	*id_bucket(c->id) = c;
	npeers[role]++;
	if (qr < 0 || !c->ev_read || !c->ev_write || (hello && !c->ev_hello) || !c->share) {
		conn_free(c);
		return -ENOMEM;
	}
	event_add(c->ev_read, NULL);
	if (hello) {
		struct timeval hto = { cfg->hello_timeout_ms / 1000,
				       (cfg->hello_timeout_ms % 1000) * 1000 };
		evtimer_add(c->ev_hello, &hto);
	}
	LOG_PEER(c->uid, LOG_DEBUG, "%s connected: pid %d uid %u", socks[role].name, (int)c->pid,
		 (unsigned)c->uid);
	return 0;
}

static void accept_cb(evutil_socket_t lfd, short what, void *arg)
{
	enum svc_role role = (enum svc_role)(intptr_t)arg;
	struct svc_listener *l = &listeners[role];
	struct role_caps caps = caps_of(role);
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
	if (!role_ops[role])
		refuse = "not serving this socket now";
	else if (npeers[role] >= caps.total)
		refuse = caps.total_key;
	else if (count_uid(role, cred.uid) >= caps.per_uid)
		refuse = caps.uid_key;
	if (refuse) {
		LOG_PEER(cred.uid, LOG_WARNING, "refusing pid %d uid %u on %s: %s%s", (int)cred.pid,
			 (unsigned)cred.uid, l->path, refuse, role_ops[role] ? " reached" : "");
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
		      ir == -EPERM || ir == -ESRCH ? svc_conn_ident_why(ir) : strerror(-ir));
		return;
	}
	if (conn_new(role, fd, &cred, &ident) < 0)
		LOG_E("out of memory accepting a connection");
}

/* ------------------------------------------------------------ roles */

int svc_conn_role_register(enum svc_role role, const struct svc_conn_role_ops *ops)
{
	if ((unsigned)role >= SVC_ROLE_N || !ops || !ops->decode || !ops->nhandlers ||
	    ops->max_in > SVC_CONN_MAX_PACKET)
		return -EINVAL;
	role_hello[role] = false;
	for (size_t i = 0; i < ops->nhandlers; i++)
		role_hello[role] |= ops->handlers[i].needs_hello;
	role_ops[role] = ops;
	return 0;
}

void svc_conn_role_unregister(enum svc_role role)
{
	if ((unsigned)role >= SVC_ROLE_N)
		return;
	for (struct svc_conn *c = conns, *next; c; c = next) {
		next = c->next;
		if (c->role == role)
			conn_free(c);
	}
	role_ops[role] = NULL;
}

/* ------------------------------------------------------------ init */

/*
 * Every peer holds an fd: make the soft fd limit fit the connection caps
 * (service managers start daemons at 1024). Up to the hard limit, or past
 * it where we may (CAP_SYS_RESOURCE); short of that, say so.
 */
static void fit_fd_limit(void)
{
	struct rlimit rl;
	/* Each peer holds two: its socket and its process's pidfd (svc_ident).
	 * The CPU watcher holds at most TRG_MAX_PIDS (perf counters and stat
	 * files of the processes it follows, trg_cpu.c), and
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


int svc_conn_init(struct event_base *b, const struct svc_config *c)
{
	const char *paths[SVC_ROLE_N] = {
		[SVC_ROLE_CLIENT] = c->client_socket,
		[SVC_ROLE_RUNTIME] = c->runtime_socket,
		[SVC_ROLE_CONTROL] = c->control_socket,
	};
	struct svc_listen_spec spec[SVC_ROLE_N];
	int r;

	base = b;
	cfg = c;
	if (!(ev_round = evtimer_new(base, round_cb, NULL)))
		return -ENOMEM;
	/* Without it (no memory) each send goes at once, as before. */
	ev_flush = event_new(base, -1, 0, flush_cb, NULL);
	fit_fd_limit();
	for (int i = 0; i < SVC_ROLE_N; i++)
		spec[i] = (struct svc_listen_spec){ socks[i].name, paths[i], socks[i].label,
						    socks[i].backlog };
	if ((r = svc_listen_activated(listeners, spec, SVC_ROLE_N)) < 0)
		return r;
	for (int i = 0; i < SVC_ROLE_N; i++)
		if ((r = svc_listen_start(&listeners[i], &spec[i], base, accept_cb,
					  (void *)(intptr_t)i)) < 0)
			return r;
	return 0;
}

void svc_conn_fini(void)
{
	for (int i = 0; i < SVC_ROLE_N; i++)
		svc_listen_close(&listeners[i]);
	while (conns)
		conn_free(conns);
	if (ev_round)
		event_free(ev_round);
	ev_round = NULL;
	if (ev_flush)
		event_free(ev_flush);
	ev_flush = NULL;
	if (turn_held && held)
		held--;
	turn_held = false;
}

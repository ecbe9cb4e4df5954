/* libprofiling's public API (profiling.h) over client.sock. */
#include "profiling/profiling.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "abi.h"
#include "agent.h"
#include "log.h"
#include "profilingd.pb-c.h"
#include "util.h"
#include "wire.h"

#define PROF_DEFAULT_SOCKET "/run/profilingd/client.sock"
/* Requests with a callback still waiting for their result. */
#define PROF_MAX_PENDING 64
/*
 * Messages that arrive while prof_request waits for its reply are parked
 * here for the next prof_dispatch. At the cap the oldest is dropped (its fd
 * closed); with at most one outstanding reply this needs a flood of results.
 */
#define PROF_MAX_PARKED 64
#define PROF_REPLY_TIMEOUT_MS 5000
#define PROF_AGENT_WAIT_MS 1000
/* The socket's receive timeout: a blocking wait for a reply lasts at most
 * this long a call; a hung daemon costs a wake a second. */
#define PROF_RECV_SLICE_MS 1000

struct prof_pending {
	uint64_t request_id;
	prof_result_cb cb;
	void *ud;
};

struct prof_parked {
	Pd__DaemonMsg *msg;
	int fd;
};

struct prof_client {
	int sock;
	uint32_t uid;
	uint64_t next_token;
	bool agent;
	bool blocking;     /* the socket blocks, SO_RCVTIMEO set (prof_set_blocking) */
	struct prof_pending pending[PROF_MAX_PENDING];
	struct prof_parked parked[PROF_MAX_PARKED];
	unsigned nparked;
	prof_result_cb listener;
	void *listener_ud;
};

/* The client the global app signals go through: the latest connected. */
static _Atomic int signal_fd = -1;

static void prof_log_setup(void)
{
	static bool done;
	if (done)
		return;
	done = true;
	const char *d = getenv("PROFILING_DEBUG");
	if (d && *d == '1')
		log_init(LOG_SINK_STDERR, LOG_DEBUG, "libprofiling");
}

static int prof_send(prof_client *c, Pd__ClientMsg *m)
{
	int r = wire_send_msg(c->sock, &m->base, WIRE_CLIENT_MAX_MSG, -1);
	if (r == -EAGAIN) {
		/* Daemon's queue full: wait for room once rather than fail. */
		struct pollfd pf = { .fd = c->sock, .events = POLLOUT };
		if (poll(&pf, 1, PROF_REPLY_TIMEOUT_MS) == 1)
			r = wire_send_msg(c->sock, &m->base, WIRE_CLIENT_MAX_MSG, -1);
	}
	return r;
}

/*
 * How prof_read gets its packet:
 *   PROF_POLL_FIRST  poll for timeout_ms, then receive; a drain (timeout
 *                    0) receives without a poll, which would only say
 *                    again that nothing is there;
 *   PROF_BLOCK       wait in the receive itself, one system call where a
 *                    poll and a receive were two, for replies (prof_wait).
 *                    Only on a c->blocking socket, whose SO_RCVTIMEO,
 *                    PROF_RECV_SLICE_MS, bounds the wait: -EAGAIN when it
 *                    ran out, a signal came, or the app made the socket
 *                    non-blocking; the caller's deadline decides.
 */
enum prof_read_mode { PROF_POLL_FIRST, PROF_BLOCK };

/* Read one message; NULL with *err set on EOF/error/timeout. */
static Pd__DaemonMsg *prof_read(prof_client *c, int timeout_ms, enum prof_read_mode mode,
				int *fd, int *err)
{
	uint8_t buf[WIRE_CLIENT_MAX_MSG];
	struct pollfd pf = { .fd = c->sock, .events = POLLIN };
	ssize_t n = -EAGAIN;

	*fd = -1;
	if (mode == PROF_BLOCK && c->blocking) {
		/*
		 * Waiting for a reply, poll and then receive were two system
		 * calls, each with its own wait-queue setup (bench/admission.c,
		 * perf: poll was 19 % of a client's CPU besides the sleep).
		 */
		n = wire_recv_wait(c->sock, buf, sizeof(buf), fd);
		if (n == -EAGAIN || n == -EINTR) {
			*err = -EAGAIN;
			return NULL;
		}
	} else {
		/*
		 * A wait polls first: the answer is almost never there yet,
		 * and a receive that fails with EAGAIN before the poll was
		 * one system call per request for nothing.
		 */
		bool poll_first = timeout_ms != 0;
		/* A signal ends a poll early: the next one waits for the rest
		 * only, or a timer's signals would keep the wait going forever. */
		uint64_t end = timeout_ms > 0 ? util_mono_ms() + (uint64_t)timeout_ms : 0;
		for (;;) {
			if (!poll_first) {
				n = wire_recv(c->sock, buf, sizeof(buf), fd);
				if (n != -EAGAIN)
					break;
				if (timeout_ms == 0) {
					/* Drained: a poll with no wait would only say so again. */
					*err = -ETIMEDOUT;
					return NULL;
				}
			}
			poll_first = false;
			int pr = poll(&pf, 1, timeout_ms);
			if (pr == 0) {
				*err = -ETIMEDOUT;
				return NULL;
			}
			if (pr < 0 && errno != EINTR) {
				*err = -errno;
				return NULL;
			}
			if (pr < 0 && timeout_ms > 0) {
				uint64_t now = util_mono_ms();
				if (now >= end) {
					*err = -ETIMEDOUT;
					return NULL;
				}
				timeout_ms = (int)(end - now);
				poll_first = true;
			}
		}
	}
	if (n <= 0) {
		*err = n == 0 ? -EPIPE : (int)n;
		return NULL;
	}
	Pd__DaemonMsg *m = pd__daemon_msg__unpack(NULL, (size_t)n, buf);
	if (!m || m->msg_case == PD__DAEMON_MSG__MSG__NOT_SET) {
		if (m)
			pd__daemon_msg__free_unpacked(m, NULL);
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
		*err = -EPROTO;
		return NULL;
	}
	return m;
}

static void prof_park(prof_client *c, Pd__DaemonMsg *m, int fd)
{
	if (c->nparked == PROF_MAX_PARKED) {
		LOG_W("parked queue full, dropping the oldest message");
		pd__daemon_msg__free_unpacked(c->parked[0].msg, NULL);
		if (c->parked[0].fd >= 0)
			close(c->parked[0].fd);
		memmove(&c->parked[0], &c->parked[1], (PROF_MAX_PARKED - 1) * sizeof(c->parked[0]));
		c->nparked--;
	}
	c->parked[c->nparked].msg = m;
	c->parked[c->nparked].fd = fd;
	c->nparked++;
}

/*
 * How a wait with left ms to its deadline reads: in the receive while the
 * socket's receive timeout (PROF_RECV_SLICE_MS) ends inside the deadline,
 * so the deadline stays exact; the last slice, and the rest after a
 * blocking receive that ended without a packet (its timeout, a signal, or
 * a socket the app made non-blocking: then the poll is what waits), poll.
 */
static enum prof_read_mode prof_wait_mode(uint64_t left, bool poll_next)
{
	return poll_next || left < PROF_RECV_SLICE_MS ? PROF_POLL_FIRST : PROF_BLOCK;
}

/* The token a reply or a budget reply answers; true for any other kind. */
static bool answers(const Pd__DaemonMsg *m, uint64_t token)
{
	if (m->msg_case == PD__DAEMON_MSG__MSG_REPLY)
		return m->reply->token == token;
	if (m->msg_case == PD__DAEMON_MSG__MSG_BUDGET_REPLY)
		return m->budget_reply->token == token;
	return true;
}

/*
 * Wait for a message of kind `want` or `also` (PD__DAEMON_MSG__MSG__NOT_SET:
 * none, as prof_read never returns one), answering token when it is a
 * reply; park others. Its fd, if any, is closed.
 */
static Pd__DaemonMsg *prof_wait(prof_client *c, Pd__DaemonMsg__MsgCase want,
				Pd__DaemonMsg__MsgCase also, uint64_t token, int *err)
{
	uint64_t deadline = util_mono_ms() + PROF_REPLY_TIMEOUT_MS;
	bool poll_next = false;
	for (;;) {
		uint64_t now = util_mono_ms();
		if (now >= deadline) {
			*err = -ETIMEDOUT;
			return NULL;
		}
		int fd;
		Pd__DaemonMsg *m = prof_read(c, (int)(deadline - now),
					     prof_wait_mode(deadline - now, poll_next), &fd, err);
		/* A blocking receive that ended without a packet: poll the rest. */
		poll_next = !m && *err == -EAGAIN;
		if (poll_next)
			continue;
		if (!m)
			return NULL;
		if ((m->msg_case == want || m->msg_case == also) && answers(m, token)) {
			if (fd >= 0)
				close(fd);
			return m;
		}
		prof_park(c, m, fd);
	}
}

/*
 * After the connect, the socket blocks, with PROF_RECV_SLICE_MS as its
 * receive timeout, so that a reply is waited for in the receive itself
 * (PROF_BLOCK). Every other receive and every send says MSG_DONTWAIT, so
 * nothing else ever blocks on it. Without the timeout the socket stays
 * non-blocking: a receive that could block forever is worse than a poll.
 * true: blocking.
 */
static bool prof_set_blocking(int s)
{
	struct timeval tv = { PROF_RECV_SLICE_MS / 1000, (PROF_RECV_SLICE_MS % 1000) * 1000 };
	if (setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0)
		return false;
	int fl = fcntl(s, F_GETFL);
	return fl >= 0 && fcntl(s, F_SETFL, fl & ~O_NONBLOCK) == 0;
}

static int prof_connect_sock(const char *path, bool *blocking)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (util_strlcpy(sa.sun_path, path, sizeof(sa.sun_path)) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0)
		return -errno;
	/*
	 * Unix seqpacket connect completes at once or fails; EAGAIN means the
	 * daemon's backlog is full (a burst of apps starting): retry briefly.
	 */
	for (int tries = 0;; tries++) {
		if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			*blocking = prof_set_blocking(s);
			return s;
		}
		if (errno != EAGAIN || tries == 50)
			break;
		usleep(2000u << (tries < 5 ? tries : 5));
	}
	int r = -errno;
	close(s);
	return r;
}

prof_client *prof_connect(const char *socket_path, int *err)
{
	int dummy, r;
	prof_client *c;

	if (!err)
		err = &dummy;
	prof_log_setup();
	if (!socket_path)
		socket_path = getenv("PROFILINGD_SOCKET");
	if (!socket_path || !*socket_path)
		socket_path = PROF_DEFAULT_SOCKET;
	c = calloc(1, sizeof(*c));
	if (!c) {
		*err = -ENOMEM;
		return NULL;
	}
	c->next_token = 1;
	c->sock = prof_connect_sock(socket_path, &c->blocking);
	if (c->sock < 0) {
		*err = c->sock;
		LOG_D("connect %s: %s", socket_path, strerror(-c->sock));
		free(c);
		return NULL;
	}

	Pd__ClientMsg m = PD__CLIENT_MSG__INIT;
	Pd__ClientHello h = PD__CLIENT_HELLO__INIT;
	h.version = PROF_API_VERSION;
	m.msg_case = PD__CLIENT_MSG__MSG_HELLO;
	m.hello = &h;
	if ((r = prof_send(c, &m)) < 0)
		goto fail;
	Pd__DaemonMsg *w = prof_wait(c, PD__DAEMON_MSG__MSG_WELCOME, PD__DAEMON_MSG__MSG__NOT_SET, 0, &r);
	if (!w)
		goto fail;
	c->uid = w->welcome->uid;
	const char *no_agent = getenv("PROFILING_NO_AGENT");
	if (!(no_agent && *no_agent == '1')) {
		r = agent_start(w->welcome->runtime_socket, PROF_AGENT_WAIT_MS);
		if (r == 0)
			c->agent = true;
		else
			LOG_D("runtime agent not started: %s", strerror(-r));
	}
	pd__daemon_msg__free_unpacked(w, NULL);
	atomic_store(&signal_fd, c->sock);
	*err = 0;
	return c;
fail:
	LOG_D("handshake with %s failed: %s", socket_path, strerror(-r));
	*err = r;
	prof_close(c);
	return NULL;
}

void prof_close(prof_client *c)
{
	if (!c)
		return;
	int fd = c->sock;
	atomic_compare_exchange_strong(&signal_fd, &fd, -1);
	for (unsigned i = 0; i < c->nparked; i++) {
		pd__daemon_msg__free_unpacked(c->parked[i].msg, NULL);
		if (c->parked[i].fd >= 0)
			close(c->parked[i].fd);
	}
	if (c->sock >= 0)
		close(c->sock);
	if (c->agent)
		agent_stop();
	free(c);
}

int prof_fd(prof_client *c)
{
	return c ? c->sock : -PROF_E_INVALID_REQUEST;
}

static int prof_deliver(prof_client *c, Pd__DaemonMsg *m, int fd)
{
	int ran = 0;

	if (m->msg_case != PD__DAEMON_MSG__MSG_RESULT)
		goto out;
	const Pd__Result *pr = m->result;
	struct prof_result res = {
		.request_id = pr->request_id,
		.type = (enum prof_type)pr->type,
		.trigger = (enum prof_trigger_type)(pr->has_trigger ? pr->trigger : 0),
		.error = (int)pr->error,
		.error_message = pr->error_message ? pr->error_message : "",
		.tag = pr->tag ? pr->tag : "",
		.fd = pr->error == 0 ? fd : -1,
		.path = pr->path ? pr->path : "",
		.size = pr->size,
		.start_ns = pr->start_ns,
		.end_ns = pr->end_ns,
		.format = pr->format ? pr->format : "",
		.note = pr->note ? pr->note : "",
	};
	for (unsigned i = 0; i < PROF_MAX_PENDING; i++) {
		struct prof_pending *p = &c->pending[i];
		if (p->cb && p->request_id == pr->request_id) {
			prof_result_cb cb = p->cb;
			void *ud = p->ud;
			memset(p, 0, sizeof(*p));
			cb(&res, ud);
			ran++;
			break;
		}
	}
	if (c->listener) {
		c->listener(&res, c->listener_ud);
		ran++;
	}
	/*
	 * The callback returned: the app has the result, so the daemon may
	 * stop redelivering it. A result nobody took stays queued. Stored
	 * failures (a capture cut short by a daemon restart) carry an id too.
	 */
	if (ran && pr->has_result_id) {
		Pd__ClientMsg am = PD__CLIENT_MSG__INIT;
		Pd__Ack ack = PD__ACK__INIT;
		ack.result_id = pr->result_id;
		am.msg_case = PD__CLIENT_MSG__MSG_ACK;
		am.ack = &ack;
		prof_send(c, &am);
	}
out:
	if (fd >= 0)
		close(fd);
	pd__daemon_msg__free_unpacked(m, NULL);
	return ran;
}

int prof_dispatch(prof_client *c, int timeout_ms)
{
	int ran = 0, err = 0, fd;

	if (!c)
		return -PROF_E_INVALID_REQUEST;
	while (c->nparked) {
		struct prof_parked p = c->parked[0];
		memmove(&c->parked[0], &c->parked[1], (c->nparked - 1) * sizeof(c->parked[0]));
		c->nparked--;
		ran += prof_deliver(c, p.msg, p.fd);
	}
	/* Wait only when nothing was parked; then drain what is readable. */
	int wait = ran ? 0 : timeout_ms;
	for (;;) {
		Pd__DaemonMsg *m = prof_read(c, wait, PROF_POLL_FIRST, &fd, &err);
		if (!m)
			break;
		ran += prof_deliver(c, m, fd);
		wait = 0;
	}
	if (err == -ETIMEDOUT)
		return ran;
	return ran ? ran : -PROF_E_UNKNOWN;
}

/*
 * Send m and wait for the RequestReply with token. Returns the reply's
 * error (0 or a positive PROF_E_*), PROF_E_UNKNOWN on a lost connection.
 */
static int prof_call(prof_client *c, Pd__ClientMsg *m, uint64_t token, uint64_t *id)
{
	int r;
	if ((r = prof_send(c, m)) < 0) {
		LOG_D("send: %s", strerror(-r));
		return PROF_E_UNKNOWN;
	}
	Pd__DaemonMsg *rep =
		prof_wait(c, PD__DAEMON_MSG__MSG_REPLY, PD__DAEMON_MSG__MSG__NOT_SET, token, &r);
	if (!rep) {
		LOG_D("no reply: %s", strerror(-r));
		return PROF_E_UNKNOWN;
	}
	int e = (int)rep->reply->error;
	if (id)
		*id = rep->reply->request_id;
	if (e)
		LOG_D("refused: %s (%s)", prof_strerror(e),
		      rep->reply->message ? rep->reply->message : "");
	pd__daemon_msg__free_unpacked(rep, NULL);
	return e;
}

static void fill_params(Pd__Params *pp, const struct prof_params *params)
{
	pp->has_duration_ms = params->duration_ms != 0;
	pp->duration_ms = params->duration_ms;
	pp->has_frequency_hz = params->frequency_hz != 0;
	pp->frequency_hz = params->frequency_hz;
	pp->has_sampling_interval_bytes = params->sampling_interval_bytes != 0;
	pp->sampling_interval_bytes = params->sampling_interval_bytes;
	pp->has_buffer_kb = params->buffer_kb != 0;
	pp->buffer_kb = params->buffer_kb;
	pp->has_clock = params->clock != 0;
	pp->clock = params->clock;
	pp->has_buffer_fill_policy = params->buffer_fill_policy != 0;
	pp->buffer_fill_policy = params->buffer_fill_policy;
	pp->has_track_java_allocations = params->track_java_allocations != 0;
	pp->track_java_allocations = params->track_java_allocations;
	pp->has_background_ms = params->background_ms != 0;
	pp->background_ms = params->background_ms;
	pp->has_format = params->format != 0;
	pp->format = params->format;
	/* Method events: the strings are the caller's, valid through the send. */
	pp->n_method_targets = params->method_targets ? params->n_method_targets : 0;
	pp->method_targets = (char **)params->method_targets;
	pp->has_method_every = params->method_every != 0;
	pp->method_every = params->method_every;
	pp->has_method_max_hits = params->method_max_hits != 0;
	pp->method_max_hits = params->method_max_hits;
	pp->has_method_budget_us = params->method_budget_us != 0;
	pp->method_budget_us = params->method_budget_us;
}

int prof_request(prof_client *c, enum prof_type type, const struct prof_params *caller_params,
		 const char *tag, prof_result_cb cb, void *ud, uint64_t *request_id)
{
	Pd__ClientMsg m = PD__CLIENT_MSG__INIT;
	Pd__Request rq = PD__REQUEST__INIT;
	Pd__Params pp = PD__PARAMS__INIT;
	struct prof_pending *slot = NULL;
	struct prof_params own, *params = NULL;

	if (!c)
		return -PROF_E_INVALID_REQUEST;
	if (caller_params) {
		int r = pabi_params(&own, caller_params);
		if (r < 0)
			return r;
		params = &own;
	}
	if (tag && strlen(tag) > WIRE_MAX_TAG)
		return -PROF_E_INVALID_REQUEST;
	if (cb) {
		for (unsigned i = 0; i < PROF_MAX_PENDING && !slot; i++)
			if (!c->pending[i].cb)
				slot = &c->pending[i];
		if (!slot)
			return -PROF_E_PROFILING_IN_PROGRESS;
	}
	rq.token = c->next_token++;
	rq.type = (uint32_t)type;
	if (params) {
		fill_params(&pp, params);
		rq.params = &pp;
		rq.has_target_pid = params->target_pid != 0;
		rq.target_pid = params->target_pid;
	}
	rq.tag = (char *)tag;
	m.msg_case = PD__CLIENT_MSG__MSG_REQUEST;
	m.request = &rq;
	uint64_t id = 0;
	int e = prof_call(c, &m, rq.token, &id);
	if (request_id)
		*request_id = id; /* a refusal has an id too: the listener's copy carries it */
	if (e)
		return -e;
	if (slot) {
		slot->request_id = id;
		slot->cb = cb;
		slot->ud = ud;
	}
	return 0;
}

/* ------------------------------------------------------------ budget query */

static void budget_fill(struct prof_budget *b, const Pd__BudgetReply *r)
{
	memset(b, 0, sizeof(*b));
	b->error = (int)r->error;
	util_strlcpy(b->message, r->message && r->error ? r->message : "", sizeof(b->message));
	b->cost = r->has_cost ? r->cost : 0;
	for (size_t i = 0; i < r->n_window && b->nwindows < PROF_BUDGET_MAX_WINDOWS; i++) {
		struct prof_budget_window *w = &b->windows[b->nwindows++];
		w->length_ms = r->window[i]->length_ms;
		w->app_left = r->window[i]->app_left;
		w->app_cap = r->window[i]->app_cap;
		w->system_left = r->window[i]->system_left;
		w->system_cap = r->window[i]->system_cap;
	}
	for (size_t i = 0; i < r->n_trigger && b->ntriggers < PROF_BUDGET_MAX_TRIGGERS; i++) {
		struct prof_budget_trigger *t = &b->triggers[b->ntriggers++];
		t->type = (enum prof_trigger_type)r->trigger[i]->type;
		t->capture = (enum prof_type)r->trigger[i]->capture;
		t->rate_limit_period_s = r->trigger[i]->period_s;
		t->ready_ms = r->trigger[i]->has_ready_ms ? r->trigger[i]->ready_ms : 0;
	}
	b->admit_ms = r->has_admit_ms ? r->admit_ms : 0;
	b->now_ms = r->now_ms;
}

int prof_get_budget(prof_client *c, enum prof_type type, const struct prof_params *params,
		    struct prof_budget *out, size_t size)
{
	Pd__ClientMsg m = PD__CLIENT_MSG__INIT;
	Pd__BudgetQuery q = PD__BUDGET_QUERY__INIT;
	Pd__Params pp = PD__PARAMS__INIT;
	struct prof_params own;
	struct prof_budget b;
	int r;

	/* A caller built against a larger struct gets this one's fields; a
	 * smaller one than this first version is not a prof_budget. */
	if (!c || !out || size < sizeof(b))
		return -PROF_E_INVALID_REQUEST;
	/* params is size-prefixed, as prof_request's (docs/ABI.md). */
	if (params) {
		if ((r = pabi_params(&own, params)) < 0)
			return r;
		params = &own;
	}
	q.token = c->next_token++;
	q.type = (uint32_t)type;
	if (params) {
		fill_params(&pp, params);
		q.params = &pp;
		q.has_target_pid = params->target_pid != 0;
		q.target_pid = params->target_pid;
	}
	m.msg_case = PD__CLIENT_MSG__MSG_BUDGET_QUERY;
	m.budget_query = &q;
	if ((r = prof_send(c, &m)) < 0) {
		LOG_D("send: %s", strerror(-r));
		return -PROF_E_UNKNOWN;
	}
	/* A refusal of the query itself (the process is no longer the one
	 * that connected) comes as a RequestReply with the token. */
	Pd__DaemonMsg *d = prof_wait(c, PD__DAEMON_MSG__MSG_BUDGET_REPLY, PD__DAEMON_MSG__MSG_REPLY,
				     q.token, &r);
	if (!d) {
		LOG_D("no budget reply: %s", strerror(-r));
		return -PROF_E_UNKNOWN;
	}
	if (d->msg_case == PD__DAEMON_MSG__MSG_BUDGET_REPLY) {
		budget_fill(&b, d->budget_reply);
	} else {
		memset(&b, 0, sizeof(b));
		b.error = d->reply->error ? (int)d->reply->error : PROF_E_UNKNOWN;
		util_strlcpy(b.message, d->reply->message ? d->reply->message : "",
			     sizeof(b.message));
	}
	pd__daemon_msg__free_unpacked(d, NULL);
	memset(out, 0, size);
	memcpy(out, &b, sizeof(b));
	return 0;
}

int prof_cancel(prof_client *c, uint64_t request_id)
{
	Pd__ClientMsg m = PD__CLIENT_MSG__INIT;
	Pd__Cancel cn = PD__CANCEL__INIT;

	if (!c || !request_id)
		return -PROF_E_INVALID_REQUEST;
	cn.request_id = request_id;
	m.msg_case = PD__CLIENT_MSG__MSG_CANCEL;
	m.cancel = &cn;
	return prof_send(c, &m) < 0 ? -PROF_E_UNKNOWN : 0;
}

int prof_set_result_listener(prof_client *c, prof_result_cb cb, void *ud)
{
	Pd__ClientMsg m = PD__CLIENT_MSG__INIT;
	Pd__SetListener sl = PD__SET_LISTENER__INIT;

	if (!c)
		return -PROF_E_INVALID_REQUEST;
	c->listener = cb;
	c->listener_ud = ud;
	sl.has_enable = 1;
	sl.enable = cb != NULL;
	m.msg_case = PD__CLIENT_MSG__MSG_SET_LISTENER;
	m.set_listener = &sl;
	return prof_send(c, &m) < 0 ? -PROF_E_UNKNOWN : 0;
}

int prof_add_trigger(prof_client *c, const struct prof_trigger *caller_t)
{
	Pd__ClientMsg m = PD__CLIENT_MSG__INIT;
	Pd__AddTrigger at = PD__ADD_TRIGGER__INIT;
	Pd__Trigger tr = PD__TRIGGER__INIT;
	Pd__Params pp = PD__PARAMS__INIT;
	struct prof_trigger t_own;
	struct prof_params p_own = PROF_PARAMS_INIT();
	const struct prof_trigger *t = &t_own;

	if (!c || !caller_t)
		return -PROF_E_INVALID_REQUEST;
	int r = pabi_trigger(&t_own, caller_t);
	if (r == 0 && t_own.params)
		r = pabi_params(&p_own, t_own.params);
	if (r < 0)
		return r;
	tr.type = (uint32_t)t->type;
#define OPT(f) do { tr.has_##f = t->f != 0; tr.f = t->f; } while (0)
	tr.has_capture = t->capture != 0;
	tr.capture = (uint32_t)t->capture;
	OPT(rate_limit_period_s);
	OPT(cpu_percent);
	OPT(cpu_window_ms);
	OPT(memory_bytes);
	OPT(memory_percent);
	OPT(hang_timeout_ms);
	OPT(timeout_ms);
	OPT(psi_stall_us);
	OPT(psi_window_ms);
#undef OPT
	tr.has_psi_resource = 1;
	tr.psi_resource = (uint32_t)t->psi_resource;
	fill_params(&pp, &p_own);
	tr.params = &pp;
	at.token = c->next_token++;
	at.trigger = &tr;
	m.msg_case = PD__CLIENT_MSG__MSG_ADD_TRIGGER;
	m.add_trigger = &at;
	return -prof_call(c, &m, at.token, NULL);
}

/*
 * The first header's entry points (no size field), bound by programs built
 * against it: their references are unversioned, and the dynamic linker
 * gives an unversioned reference the oldest version, PROFILING_1.0.
 * Programs built now bind to the PROFILING_1.1 defaults above.
 */
int pabi_request_v1(prof_client *c, enum prof_type type, const struct pabi_params_v1 *params,
		    const char *tag, prof_result_cb cb, void *ud, uint64_t *request_id);
int pabi_request_v1(prof_client *c, enum prof_type type, const struct pabi_params_v1 *params,
		    const char *tag, prof_result_cb cb, void *ud, uint64_t *request_id)
{
	struct prof_params p;

	pabi_params_v1(&p, params);
	return prof_request(c, type, params ? &p : NULL, tag, cb, ud, request_id);
}
__asm__(".symver pabi_request_v1, prof_request@PROFILING_1.0");

int pabi_add_trigger_v1(prof_client *c, const struct pabi_trigger_v1 *t);
int pabi_add_trigger_v1(prof_client *c, const struct pabi_trigger_v1 *t)
{
	struct prof_trigger own;
	struct prof_params p;

	if (!t)
		return -PROF_E_INVALID_REQUEST;
	pabi_trigger_v1(&own, &p, t);
	return prof_add_trigger(c, &own);
}
__asm__(".symver pabi_add_trigger_v1, prof_add_trigger@PROFILING_1.0");

static int prof_remove(prof_client *c, uint32_t type, bool all)
{
	Pd__ClientMsg m = PD__CLIENT_MSG__INIT;
	Pd__RemoveTrigger rt = PD__REMOVE_TRIGGER__INIT;
	if (!c)
		return -PROF_E_INVALID_REQUEST;
	rt.token = c->next_token++;
	rt.has_type = !all;
	rt.type = type;
	m.msg_case = PD__CLIENT_MSG__MSG_REMOVE_TRIGGER;
	m.remove_trigger = &rt;
	return -prof_call(c, &m, rt.token, NULL);
}

int prof_remove_trigger(prof_client *c, enum prof_trigger_type type)
{
	return prof_remove(c, (uint32_t)type, false);
}

int prof_clear_triggers(prof_client *c)
{
	return prof_remove(c, 0, true);
}

/* Fire and forget from any thread: one packet, never blocking. */
static void prof_signal(uint32_t kind, const char *name)
{
	Pd__ClientMsg m = PD__CLIENT_MSG__INIT;
	Pd__AppSignal sg = PD__APP_SIGNAL__INIT;
	char buf[WIRE_MAX_TAG + 1];
	int fd = atomic_load(&signal_fd);
	if (fd < 0)
		return;
	sg.kind = kind;
	if (name) {
		util_strlcpy(buf, name, sizeof(buf));
		sg.name = buf;
	}
	m.msg_case = PD__CLIENT_MSG__MSG_SIGNAL;
	m.signal = &sg;
	wire_send_msg(fd, &m.base, WIRE_CLIENT_MAX_MSG, -1);
}

void prof_report_fully_drawn(void)
{
	prof_signal(1, NULL);
}

void prof_report_anomaly(const char *name)
{
	prof_signal(2, name ? name : "");
}

void prof_heartbeat(void)
{
	prof_signal(3, NULL);
}

/*
 * svc_conn: the transport of all three sockets, client.sock, runtime.sock
 * and control.sock, and the registry of their peers. It knows no message's
 * meaning: each role (svc_client.c, svc_runtime.c, svc_ctl.c) registers
 * ops, its decoder and a table of {message, needs_hello, handler}, and a
 * closed op, much as triggers/trg.h's trg_ops do for the watchers. So the
 * transport calls no session, trigger or request code by name, and those
 * modules may call it (to send, to find a peer) without a circle.
 *
 * What it does for every peer:
 *   - accept (svc_listen.c), then bind the peer to its process (svc_ident:
 *     pidfd or pid + start time, every uid and gid, cross-checked with
 *     SO_PEERCRED);
 *   - caps, checked at accept before any /proc read; at a cap the new
 *     connection is closed at once (one line through the uid's log budget):
 *       client.sock   max_clients, max_clients_per_uid
 *       runtime.sock  max_runtimes, max_runtimes_per_uid
 *       control.sock  max_control_clients, max_control_per_uid;
 *   - hello_timeout_ms, for roles with a hello (client, runtime): a peer
 *     that has not said it by then is closed, so idle connections cannot
 *     hold a uid's share for long;
 *   - framed reads, one packet = one message, at most the role's max_in
 *     bytes (bigger: closed, one log line), at most 16 messages per wakeup
 *     of a client or runtime and 8 of a control peer (one on the 8 wakes after
 *     a wake that found one: a peer that waits for its answer leaves nothing
 *     behind it), and at most SVC_CONN_UID_ROUND_MSGS per uid per
 *     event-loop round across all its connections (root not counted); the
 *     rest wait in their sockets for the next round;
 *   - decode with the role's op (a failure closes the peer with the
 *     reason), then the handler of the message's case; a handler's
 *     negative return closes that peer and never touches the others;
 *   - a bounded out-queue (svc_outq): max_queued_msgs messages for client
 *     and runtime peers, SVC_CONN_CTL_QUEUE for control peers; a peer that
 *     lets it fill is closed;
 *   - out of fds: the listener pauses (svc_listen.c); at init the soft
 *     RLIMIT_NOFILE is raised to fit the caps.
 *
 * A peer is freed outside the handler that drops it (callers may still
 * hold it); its role's closed op runs first.
 */
#ifndef PD_SVC_CONN_H
#define PD_SVC_CONN_H

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct event_base;
struct svc_config;
struct svc_ident;
struct svc_conn;

enum svc_role { SVC_ROLE_CLIENT, SVC_ROLE_RUNTIME, SVC_ROLE_CONTROL, SVC_ROLE_N };

/* The biggest packet a role may take in (its max_in). */
#define SVC_CONN_MAX_PACKET (16 * 1024)
/*
 * Messages one uid's connections may handle per event-loop round. Small,
 * because another uid's message waits for the rounds ahead of it: with 32
 * a uid flooding from 32 connections held another's round trip p99 near
 * 5 ms, with 8 it is about 1 ms (bench/flood_connect.sh).
 */
#define SVC_CONN_UID_ROUND_MSGS 8
/* Queued replies per control peer (profctl waits for each). */
#define SVC_CONN_CTL_QUEUE 16

/* A handler's which that takes every message of its role. */
#define SVC_CONN_ANY (-1)

/* One message of a role and what handles it. */
struct svc_conn_handler {
	int which;          /* the case of the message's oneof, or SVC_CONN_ANY */
	bool needs_hello;   /* before svc_conn_hello(): the peer is closed */
	/* msg: the role's decoded message, freed after the call. 0, or a
	 * negative errno that closes the peer (-EPROTO: "protocol violation"). */
	int (*fn)(struct svc_conn *c, const void *msg);
};

/*
 * A role. Its messages are protobuf messages with one oneof, whose case
 * picks the handler. A role with handlers that need a hello has a hello:
 * its peers must say it within hello_timeout_ms. A role without one takes
 * its peers as hello'd at accept.
 */
struct svc_conn_role_ops {
	size_t max_in, max_out;   /* packet caps, max_in <= SVC_CONN_MAX_PACKET */
	/* One packet: the message, or NULL with *why (the peer is closed). */
	ProtobufCMessage *(*decode)(const uint8_t *buf, size_t len, const char **why);
	const struct svc_conn_handler *handlers;
	size_t nhandlers;
	/* A hello'd peer is going (closed, dropped, or at fini), before its fd
	 * is closed; NULL for nothing. It must not send to it. */
	void (*closed)(struct svc_conn *c);
};

/* Bind or take the three sockets and raise the fd limit. 0 or -errno. */
int svc_conn_init(struct event_base *base, const struct svc_config *cfg);
/* Close the listeners and every peer left (their closed ops run). */
void svc_conn_fini(void);
/* A role's ops (static storage) for its socket's peers; until they are
 * registered its peers are closed at accept. 0 or -EINVAL. */
int svc_conn_role_register(enum svc_role role, const struct svc_conn_role_ops *ops);
/* Close every peer of role now (its closed op runs) and forget its ops. */
void svc_conn_role_unregister(enum svc_role role);

/* Queue a message (and optionally an fd, which is dup'd) to the peer, at
 * most the role's max_out bytes. 0 or -errno; -ENOBUFS (queue full) and
 * send errors close the peer. */
int svc_conn_send(struct svc_conn *c, const ProtobufCMessage *m, int fd);
/*
 * Hold every peer's outgoing messages: while held, svc_conn_send queues
 * (the queue's cap still applies) and sends nothing, and
 * svc_conn_release sends what was queued, in order. svc_request holds
 * while a batch of admissions is not yet committed, so that no reply can
 * say "admitted" before the admission is on disk. Nested: the last
 * release sends. The transport itself holds from a loop turn's first
 * read to the end of the callbacks active in that turn (svc_conn.c,
 * "The turn's hold"): a peer's messages of one turn go in one call.
 */
void svc_conn_hold(void);
void svc_conn_release(void);
/* Close the peer after the current handler returns; why (NULL: no log
 * line) is logged through the uid's budget. */
void svc_conn_drop(struct svc_conn *c, const char *why);

uint64_t svc_conn_id(const struct svc_conn *c);
enum svc_role svc_conn_role(const struct svc_conn *c);
uid_t svc_conn_uid(const struct svc_conn *c);
gid_t svc_conn_gid(const struct svc_conn *c);
pid_t svc_conn_pid(const struct svc_conn *c);
/* The process the peer connected from, bound at accept (svc_ident.h). */
const struct svc_ident *svc_conn_ident(const struct svc_conn *c);
/* svc_ident_check() of the peer's process; on -ESRCH (gone, replaced) or
 * -EPERM (ids changed) the connection is closed. 0 or that error. */
int svc_conn_check(struct svc_conn *c);
/* Why svc_ident_check() gave r, for the peer and the log. */
const char *svc_conn_ident_why(int r);
/* The app key: "uid:<uid>" or "uid:<uid>/<id>" when [apps] maps the exe. */
const char *svc_conn_app(const struct svc_conn *c);
void svc_app_key(const struct svc_config *cfg, pid_t pid, uid_t uid, char *out, size_t n);

/* The hello came (its role's handler accepted it): the hello timer stops
 * and handlers that need a hello run from now on. */
void svc_conn_hello(struct svc_conn *c);
/* Client: ClientHello seen; runtime: RuntimeHello accepted; control: at accept. */
bool svc_conn_hello_done(const struct svc_conn *c);
/* A client's result listener flag. */
void svc_conn_set_listener(struct svc_conn *c, bool on);
bool svc_conn_is_listener(const struct svc_conn *c);
/* A runtime's hello was accepted: its capability bits and kind ("native",
 * "jvm"); svc_conn_hello() is implied. */
void svc_conn_set_runtime(struct svc_conn *c, uint32_t caps, const char *kind);
uint32_t svc_conn_runtime_caps(const struct svc_conn *c);
/* A runtime's kind from its hello, "" before it. */
const char *svc_conn_kind(const struct svc_conn *c);

/* A live peer by id, or NULL. */
struct svc_conn *svc_conn_by_id(uint64_t id);
/* A connected client of uid with a result listener, or NULL. */
struct svc_conn *svc_conn_listener_for(uid_t uid);
/* The hello'd runtime of the process that has pid now, or NULL; a runtime
 * whose own process is gone or changed is closed, never returned. A
 * session also compares the start time (svc_conn_ident). */
struct svc_conn *svc_conn_runtime_for(pid_t pid);
/* Every live peer of every role (status); fn must not close any. */
void svc_conn_foreach(void (*fn)(struct svc_conn *c, void *ud), void *ud);

#endif

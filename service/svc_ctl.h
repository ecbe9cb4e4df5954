/*
 * svc_ctl: the control role of the transport, profctl's requests on
 * control.sock (proto/control.proto, docs/PROTOCOL.md): status, apps,
 * triggers, ratelimit, results, show, open, request.
 *
 * The socket is mode 0666, like client.sock. Every request is authorised
 * by the uid of the peer's process, bound at accept (svc_conn, svc_ident)
 * and re-checked before each request: a peer whose process is gone or
 * changed its ids is closed. Root sees and does everything; any other uid
 * sees only what belongs to it (its apps' results, triggers, budgets,
 * runtimes and sessions) and may not `request` captures.
 *
 * Caps and what happens at them (the connection caps, max_control_clients
 * and max_control_per_uid, and the queue, SVC_CONN_CTL_QUEUE, are the
 * transport's):
 *   request packet: CTL_MAX_REQ before decoding; bigger: closed.
 *   reply packet: CTL_MAX_REPLY; lists are cut to fit and say so
 *     (truncated); results at most 200, apps at most 512.
 *   one waiting request (request --wait) per connection.
 */
#ifndef PD_SVC_CTL_H
#define PD_SVC_CTL_H

#include <stddef.h>
#include <stdint.h>

#define CTL_VERSION 1
#define CTL_MAX_REQ 4096          /* profctl -> daemon packet */
#define CTL_MAX_REPLY (64 * 1024) /* daemon -> profctl packet */

struct svc_config;
struct Pdctl__CtlRequest;

/* Register the control role with svc_conn (after svc_conn_init) and
 * observe sessions for request --wait. 0 or -errno. */
int svc_ctl_init(const struct svc_config *cfg);
/* Close every control peer and unregister. */
void svc_ctl_fini(void);
/* Decode and check one control packet (size cap, string caps); NULL with
 * *why on failure. Fuzzed by tests/fuzz/fuzz_ctl_msg.c. */
struct Pdctl__CtlRequest *svc_ctl_decode(const uint8_t *buf, size_t len, const char **why);

#endif

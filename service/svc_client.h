/*
 * svc_client: the client role of the transport, the messages an app's
 * libprofiling sends on client.sock (docs/PROTOCOL.md): hello, request,
 * cancel, result listener, ack, triggers and app signals. It registers
 * its handlers with svc_conn (svc_conn_role_ops) and hands each message
 * on to the session and trigger modules; svc_conn never calls them.
 *
 * A request, a trigger registration and an app signal first check that
 * the peer's process is still the one that connected (svc_ident); one
 * that is not is refused with PROF_E_PERMISSION and closed. A client's
 * going away unwatches its pid (svc_trigger_client_down).
 */
#ifndef PD_SVC_CLIENT_H
#define PD_SVC_CLIENT_H

struct svc_config;

/* Register the client role with svc_conn (after svc_conn_init). 0 or -errno. */
int svc_client_init(const struct svc_config *cfg);
/* Close every client and unregister. */
void svc_client_fini(void);

#endif

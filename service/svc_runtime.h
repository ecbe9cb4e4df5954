/*
 * svc_runtime: the runtime role of the transport, the messages an app's
 * runtime agent (libprofiling's agent thread, the LD_PRELOAD agent, the
 * JVMTI agent) sends on runtime.sock: hello, capture done, events. It
 * registers its handlers with svc_conn (svc_conn_role_ops) and hands each
 * message on to the session and trigger modules.
 *
 * A hello is accepted once per process (pid and start time): the pid is
 * the kernel's (SO_PEERCRED), never the message's, and the process must
 * still be the one that connected. A runtime's going away fails what it
 * was capturing (svc_capture_runtime_down).
 */
#ifndef PD_SVC_RUNTIME_H
#define PD_SVC_RUNTIME_H

/* Register the runtime role with svc_conn (after svc_conn_init). 0 or -errno. */
int svc_runtime_init(void);
/* Close every runtime and unregister. */
void svc_runtime_fini(void);

#endif

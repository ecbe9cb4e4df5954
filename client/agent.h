/*
 * The in-process runtime agent: one thread per process that holds a
 * runtime.sock connection, says hello with this pid and its capabilities,
 * and answers CaptureRequests by writing the artifact into the passed fd.
 * Reference-counted: every prof_client holds one reference.
 */
#ifndef PD_AGENT_H
#define PD_AGENT_H

/*
 * Start (or take a reference to) the agent. Waits up to wait_ms for the
 * daemon's HelloAck; a slow daemon is not an error (the thread keeps going).
 * 0 or -errno.
 */
int agent_start(const char *runtime_socket, int wait_ms);
/*
 * The same, given the daemon's client socket instead: the agent thread
 * first asks it for the runtime socket (ClientHello -> Welcome, then hangs
 * up), as libprofiling does, so one variable (PROFILINGD_SOCKET) serves
 * both libraries.
 */
int agent_start_via_client(const char *client_socket, int wait_ms);
void agent_stop(void);

#endif

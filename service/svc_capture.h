/*
 * svc_capture: starting a session's capture and taking its completions.
 *
 * Contract:
 * - A session waits (WAIT_RUNTIME) for its process's runtime, at most its
 *   wait; then, in this order of preference: a JVM heap dump through the
 *   attach protocol (profilingd-jattach), the runtime's capture
 *   (CaptureRequest with the write end of a pipe that svc_sink drains,
 *   capped at max_result_bytes), a JVMTI agent load and a new wait, an
 *   agentless stack capture (profilingd-perf); else RUNTIME_UNAVAILABLE.
 *   A system trace also records the kernel's half (profilingd-ftrace).
 * - The target process and the runtime's own are re-checked (svc_ident)
 *   before any capture starts and when profilingd-perf is done: one gone,
 *   replaced or with changed ids fails the session with PERMISSION.
 * - The capture is over when CaptureDone has come and the sink holds the
 *   bytes it declared (EOF when none); a mismatch is POST_PROCESSING; the
 *   deadline (duration + deadline_grace_ms) runs until then: TIMEOUT and a
 *   CaptureCancel. Then the session goes to svc_deliver.
 * Above svc_deliver and svc_session; below svc_request.
 */
#ifndef PD_SVC_CAPTURE_H
#define PD_SVC_CAPTURE_H

#include <stdint.h>
#include <sys/types.h>

#include "profilingd.pb-c.h"

struct svc_conn;

/* A runtime said hello: start what waits for it. */
void svc_capture_runtime_up(struct svc_conn *rt);
/* A runtime connection is closing: fail what it was capturing (EXECUTING). */
void svc_capture_runtime_down(struct svc_conn *rt);
/* CaptureDone from a runtime. A negative return closes the runtime. */
int svc_capture_done(struct svc_conn *rt, const Pd__CaptureDone *d);
/* End pid's running capture of trigger early (fully drawn): CaptureStop.
 * 0, or -ENOENT when none runs. */
int svc_capture_stop(pid_t pid, uint32_t trigger);

#endif

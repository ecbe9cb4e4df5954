/*
 * profilingd's service modules (svc_*). Each has an _init/_fini pair where it
 * holds state; main.c starts them lower modules first and stops them in the
 * reverse order (docs/ARCHITECTURE.md, "Helpers, the spawner and the state
 * database"). Modules with a header of their own are included from here
 * until svc.h goes (issue #16).
 */
#ifndef PD_SVC_H
#define PD_SVC_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <sys/un.h>

#include "profilingd.pb-c.h"
#include "rl.h"

struct event_base;

/* SVC_PATH_MAX, SVC_SUN_MAX, SVC_MAX_DLP, SVC_MAX_SYSTRIG and the request
 * parameter ranges (SVC_DURATION_*, SVC_HZ_*, ...): svc_config.h. */
#include "svc_config.h"

#include "svc_db.h"
#include "svc_db_result.h"

/* Moved to their own headers (issue 16); svc.h goes once every slice is in. */
#include "svc_proto.h"
#include "svc_outq.h"
#include "svc_listen.h"
#include "svc_conn.h"
#include "svc_client.h"
#include "svc_runtime.h"

#include "svc_admit.h"
#include "svc_helper.h"
#include "svc_redact.h"
#include "svc_spawn.h"
#include "svc_sandbox.h"

/* ----------------------------------------- the capture pipeline, triggers */

#include "svc_store.h"
#include "svc_session.h"
#include "svc_deliver.h"
#include "svc_capture.h"
#include "svc_request.h"
#include "svc_trigger.h"
#include "svc_jvm.h"

/*
 * Old names of the pipeline's entry points, for the files that still use
 * them; they go with this header (svc_conn.c, svc_ctl.c call them).
 */
#define svc_session_request svc_request_client
#define svc_session_cancel svc_request_cancel
#define svc_session_trigger svc_request_trigger
#define svc_session_adopt svc_request_adopt
#define svc_session_refused svc_deliver_refused
#define svc_session_redeliver svc_deliver_redeliver
#define svc_session_ack svc_deliver_ack
#define svc_session_runtime_up svc_capture_runtime_up
#define svc_session_runtime_down svc_capture_runtime_down
#define svc_session_capture_done svc_capture_done
#define svc_session_stop svc_capture_stop
#define svc_session_raw_dir svc_store_raw_dir

#include "svc_ctl.h"

#endif

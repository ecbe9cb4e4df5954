/*
 * libprofiling: the client API of profilingd (see libprofiling(3) and
 * docs/DESIGN.md §3 in the source tree). An app connects, requests
 * captures of itself, and receives the redacted results as file
 * descriptors inside prof_dispatch().
 *
 * Thread model: a prof_client is used from one thread at a time. The
 * in-process runtime agent that answers the daemon's capture requests runs on
 * its own thread and never calls back into the app.
 *
 * Errors: functions return 0 or a negative PROF_E_* code. prof_connect()
 * reports a negative errno through *err. The library never prints unless
 * PROFILING_DEBUG=1 is set in the environment.
 */
#ifndef PROFILING_PROFILING_H
#define PROFILING_PROFILING_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The wire protocol's version (ClientHello). The library's ABI is the
 * soname, libprofiling.so.1, and its symbol versions (docs/ABI.md). */
#define PROF_API_VERSION 1

/* Capture types. Values mirror Android's ProfilingManager. */
enum prof_type {
	PROF_HEAP_DUMP = 1,
	PROF_HEAP_PROFILE = 2,
	PROF_STACK_SAMPLING = 3,
	PROF_SYSTEM_TRACE = 4,
	/*
	 * Method events (docs/METHOD_EVENTS.md): hits of chosen functions,
	 * with their stacks. An extension: Android's values stay below 0x100.
	 */
	PROF_METHOD_EVENTS = 0x100,
};

/* Trigger types; PROF_TRIGGER_NONE marks a direct request. */
enum prof_trigger_type {
	PROF_TRIGGER_NONE = 0,
	PROF_TRIGGER_COLD_START = 1,
	PROF_TRIGGER_APP_FULLY_DRAWN = 2,
	PROF_TRIGGER_OOM = 3,
	PROF_TRIGGER_EXCESSIVE_CPU = 4,
	PROF_TRIGGER_HANG = 5,
	PROF_TRIGGER_CRASH = 6,
	PROF_TRIGGER_ANOMALY = 7,
	PROF_TRIGGER_PRESSURE_STALL = 8,
};

/* Errors: positive in results, negative as return codes. 0..8 are Android's. */
enum prof_error {
	PROF_E_NONE = 0,
	PROF_E_RATE_LIMIT_SYSTEM = 1,
	PROF_E_RATE_LIMIT_PROCESS = 2,
	PROF_E_PROFILING_IN_PROGRESS = 3,
	PROF_E_EXECUTING = 4,
	PROF_E_POST_PROCESSING = 5,
	PROF_E_NO_DISK_SPACE = 6,
	PROF_E_INVALID_REQUEST = 7,
	PROF_E_UNKNOWN = 8,
	PROF_E_RUNTIME_UNAVAILABLE = 100,
	PROF_E_TIMEOUT = 101,
	PROF_E_CANCELLED = 102,
	PROF_E_TRIGGER_COOLDOWN = 103,
	PROF_E_PERMISSION = 104,
};

/*
 * Growing structs (docs/ABI.md). struct prof_params and struct prof_trigger
 * begin with `size`, the caller's sizeof: the library reads only the fields
 * that size covers and takes a field past it as zero, "the default", so a
 * program built against this header keeps working when later versions add
 * fields at the end. A size larger than the library knows is accepted only
 * if the unknown tail is all zero; otherwise the call returns
 * -PROF_E_INVALID_REQUEST (the program asks for something this library
 * cannot do). Declare them with the INIT macros, which set size:
 *
 *   struct prof_params p = PROF_PARAMS_INIT(.duration_ms = 2000);
 *   struct prof_trigger t = PROF_TRIGGER_INIT(.type = PROF_TRIGGER_HANG);
 *
 * size 0 (a struct declared without the macro) is refused with
 * -PROF_E_INVALID_REQUEST. Programs built against the first header (no
 * size field, unversioned symbols) keep binding to the PROFILING_1.0
 * entry points, which read that layout.
 */
#define PROF_PARAMS_INIT(...) { .size = sizeof(struct prof_params), __VA_ARGS__ }
#define PROF_TRIGGER_INIT(...) { .size = sizeof(struct prof_trigger), __VA_ARGS__ }

/* Buffer fill policy of a system trace (Android's KEY_BUFFER_FILL_POLICY). */
enum prof_fill_policy {
	PROF_FILL_DEFAULT = 0,     /* PROF_FILL_RING_BUFFER */
	PROF_FILL_DISCARD = 1,     /* stop recording when full: keeps the start */
	PROF_FILL_RING_BUFFER = 2, /* overwrite the oldest: keeps the end */
};

/* A yes/no parameter whose zero is "the default". */
enum prof_switch { PROF_SWITCH_DEFAULT = 0, PROF_SWITCH_ON = 1, PROF_SWITCH_OFF = 2 };

/*
 * Capture parameters; a zero field means "the default". Ranges (checked by
 * the daemon; a value outside gives PROF_E_INVALID_REQUEST):
 *   duration_ms   100 .. 120000, default 10000
 *   frequency_hz  1 .. 1000,     default 100   (PROF_STACK_SAMPLING)
 *   sampling_interval_bytes 1 .. 2^30, default 4096 (PROF_HEAP_PROFILE)
 *   buffer_kb     64 .. 65536,   default 4096  (PROF_SYSTEM_TRACE, kernel
 *                 buffer per CPU)
 *   buffer_fill_policy  enum prof_fill_policy, default ring buffer
 *                 (PROF_SYSTEM_TRACE: the kernel buffer and the flight
 *                 recorder; with discard the recorder keeps each thread's
 *                 first events of the capture, and the note counts the rest)
 *   track_java_allocations  enum prof_switch, default on (PROF_HEAP_PROFILE
 *                 of a JVM: the JVMTI agent's sampled Java allocations; off
 *                 leaves native allocations only, where the allocator is
 *                 interposed). docs/ANDROID.md compares these with Android.
 *   background_ms 0 .. [trace] background_max_s * 1000, default 0
 *                 (PROF_SYSTEM_TRACE: the trace starts this long before
 *                 the capture, from the daemon's running background trace;
 *                 where that is off the trace starts at the capture and
 *                 the result's note says so; PROF_HEAP_DUMP and
 *                 PROF_HEAP_PROFILE with format PROF_FORMAT_PERFETTO: the
 *                 ring's sched data of that window is appended to the heap
 *                 packets, docs/PERFETTO.md "Heap formats")
 */
struct prof_params {
	uint32_t size; /* sizeof(struct prof_params): PROF_PARAMS_INIT */
	uint32_t duration_ms;
	uint32_t frequency_hz;
	uint32_t sampling_interval_bytes; /* PROF_HEAP_PROFILE */
	uint32_t buffer_kb;               /* PROF_SYSTEM_TRACE */
	/*
	 * 0: the calling process. Another pid: root only (else
	 * PROF_E_PERMISSION); the result belongs to the target's app and is
	 * delivered to the caller (a setuid target's stays root's). A target
	 * without a runtime agent is sampled by the daemon itself
	 * (PROF_STACK_SAMPLING). The calling process is the one that
	 * connected: once it has exited (a child kept the connection) or run
	 * a setuid program, requests get PROF_E_PERMISSION and the
	 * connection is closed.
	 */
	uint32_t target_pid;
	/* PROF_STACK_SAMPLING clock: 0 CPU time (default), 1 wall clock (also
	 * samples blocked threads; hang captures use it). */
	uint32_t clock;
	/* Android parity (issue #21). */
	uint32_t buffer_fill_policy;      /* enum prof_fill_policy */
	uint32_t track_java_allocations;  /* enum prof_switch */
	/* The running background trace: the last background_ms before the
	 * capture (PROF_SYSTEM_TRACE; 0: none). A trigger's params take it
	 * too. */
	uint32_t background_ms;
	/* Heap formats (issue #20): the result's format, enum prof_format.
	 * 0: the type's own (HPROF for PROF_HEAP_DUMP, pprof for
	 * PROF_HEAP_PROFILE). PROF_FORMAT_PERFETTO: a Perfetto trace (a heap
	 * graph without field values, or a heapprofd-style ProfilePacket);
	 * refused (PROF_E_INVALID_REQUEST) for the other types. */
	uint32_t format;
	/*
	 * PROF_METHOD_EVENTS (issue #19): the functions to watch, 1..8, each
	 * "/PATH:SYMBOL" or "/PATH:+0xOFFSET" (an ELF file the target maps),
	 * or "buildid:HEX:+0xOFFSET"; or, all of them, JVM methods
	 * "java:CLASS.METHOD[(DESCRIPTOR)][@LOADER]" (the JVM's agent hooks
	 * them; docs/METHOD_EVENTS.md); at most 1023 bytes. The stack of every
	 * method_every-th hit is recorded (0: every hit); the probes go after
	 * method_max_hits hits (0: 200000) or duration_ms (up to 86400000 for
	 * this type). Zero fields are the defaults.
	 */
	const char *const *method_targets;
	uint32_t n_method_targets;
	uint32_t method_every;
	uint32_t method_max_hits;
	/* Method events' overhead budget (issue #19): once the helper's mean
	 * time per recorded hit of native targets is over it, in µs, the
	 * probes go and the result's note says so. 0: the daemon's [capture]
	 * method_budget_us (50). At most 1000000. */
	uint32_t method_budget_us;
	/* New fields go here, at the end; zero must mean the default. */
};

/* Heap formats (issue #20): values of prof_params.format. */
enum prof_format { PROF_FORMAT_DEFAULT = 0, PROF_FORMAT_PERFETTO = 1 };

/* PSI resources for PROF_TRIGGER_PRESSURE_STALL. */
enum prof_psi_resource { PROF_PSI_MEMORY = 0, PROF_PSI_CPU = 1, PROF_PSI_IO = 2 };

/*
 * A trigger: when its condition holds, the daemon captures `capture` of
 * the app (a system capture: cost 5 by default), at most once per
 * rate_limit_period_s. One per type per app; adding one again replaces it.
 * Triggers persist across daemon restarts. A zero field means the default:
 *   capture              COLD_START, EXCESSIVE_CPU, HANG, ANOMALY: stack samples;
 *                        OOM: heap profile; CRASH, APP_FULLY_DRAWN,
 *                        PRESSURE_STALL: system trace (flight recorder)
 *   params               NULL: the defaults (a struct prof_params with its
 *                        own size, so both structs grow on their own)
 *   cpu_percent 90, cpu_window_ms 5000   (EXCESSIVE_CPU; percent of one core)
 *   memory_percent 90 of the cgroup limit, or memory_bytes of RSS (OOM)
 *   hang_timeout_ms 5000                 (HANG: missed prof_heartbeat())
 *   timeout_ms 5000                      (COLD_START: ends at fully drawn or here)
 *   psi_resource memory, psi_stall_us 100000 per psi_window_ms 1000 (PRESSURE_STALL)
 */
struct prof_trigger {
	uint32_t size; /* sizeof(struct prof_trigger): PROF_TRIGGER_INIT */
	enum prof_trigger_type type;
	enum prof_type capture;
	uint32_t rate_limit_period_s;
	const struct prof_params *params;
	uint64_t memory_bytes;
	uint32_t cpu_percent;
	uint32_t cpu_window_ms;
	uint32_t memory_percent;
	uint32_t hang_timeout_ms;
	uint32_t timeout_ms;
	enum prof_psi_resource psi_resource;
	uint32_t psi_stall_us;
	uint32_t psi_window_ms;
	/* New fields go here, at the end; zero must mean the default. */
};

/*
 * A finished capture, valid only during the callback. On success error is 0
 * and fd is a read-only descriptor of the delivered file at path; the library
 * closes it when the callback returns, so dup() it to keep it. On failure
 * fd is -1 and error/error_message say why. When a callback has run for a
 * delivered result the library acknowledges it; a result that reached no
 * callback (the app exited first) is delivered again to the app's result
 * listener when it next connects, up to 3 times within 7 days.
 */
struct prof_result {
	uint64_t request_id;
	enum prof_type type;
	enum prof_trigger_type trigger;
	int error;                 /* enum prof_error, positive */
	const char *error_message; /* never NULL; "" when none */
	const char *tag;           /* never NULL */
	int fd;
	const char *path;          /* never NULL; "" on failure */
	uint64_t size;
	uint64_t start_ns;         /* CLOCK_REALTIME */
	uint64_t end_ns;
	const char *format;        /* "pprof", "perfetto", "hprof", or "" */
	const char *note;          /* never NULL; e.g. an OOM kill after the capture */
};

typedef struct prof_client prof_client;
typedef void (*prof_result_cb)(const struct prof_result *result, void *ud);

/*
 * Connect to profilingd. A NULL socket_path means $PROFILINGD_SOCKET, else
 * the compiled-in default (/run/profilingd/client.sock). Unless
 * $PROFILING_NO_AGENT=1, this also starts the in-process runtime agent, which
 * registers with the daemon before prof_connect returns (or gives up after
 * one second; the daemon waits for it on the first request).
 * Returns NULL and sets *err (negative errno) on failure.
 */
prof_client *prof_connect(const char *socket_path, int *err);
void prof_close(prof_client *c);

/*
 * The fd to poll for POLLIN in the app's own loop. It is a blocking socket
 * (a 1 s receive timeout): the library waits for a reply in the receive
 * itself, and every other receive and send of the library is non-blocking.
 * An app may make it non-blocking; the library then polls for its replies.
 */
int prof_fd(prof_client *c);

/*
 * Read what the daemon sent and run callbacks. Waits up to timeout_ms for
 * the first message (0: don't wait, -1: forever). Returns the number of
 * callbacks run, or a negative PROF_E_* (PROF_E_UNKNOWN: connection lost).
 */
int prof_dispatch(prof_client *c, int timeout_ms);

/*
 * Ask for a capture of the calling process. params may be NULL for
 * defaults; tag may be NULL. On 0, *request_id (if given) identifies the
 * capture and cb (if given) receives its result. A refusal returns the
 * negative PROF_E_* at once; cb is not called for it, but the result
 * listener (prof_set_result_listener) also receives it as a result, with
 * the id stored in *request_id.
 */
int prof_request(prof_client *c, enum prof_type type,
		 const struct prof_params *params, const char *tag,
		 prof_result_cb cb, void *ud, uint64_t *request_id);

/* Cancel a capture; its result arrives with PROF_E_CANCELLED. */
int prof_cancel(prof_client *c, uint64_t request_id);

/*
 * Receive every result for this app, including those with no per-request
 * callback. A NULL cb removes the listener.
 */
int prof_set_result_listener(prof_client *c, prof_result_cb cb, void *ud);

/*
 * The trace flight recorder. Each thread writes into its own ring (4096
 * events, oldest overwritten) that always runs, so a PROF_SYSTEM_TRACE
 * capture shows what happened before it was asked for. Lock-free and
 * cheap (one clock read and a copy of at most 39 bytes of name); safe to
 * call from any thread, no connection needed. Slices nest per thread.
 */
void prof_trace_begin(const char *name);
void prof_trace_end(void);
void prof_trace_instant(const char *name);
void prof_trace_counter(const char *name, int64_t value);

/* Register (or replace) a trigger for this app. 0 or a negative PROF_E_*. */
int prof_add_trigger(prof_client *c, const struct prof_trigger *t);
int prof_remove_trigger(prof_client *c, enum prof_trigger_type type);
int prof_clear_triggers(prof_client *c);

/*
 * App signals, sent through the most recently connected client (no-ops
 * without one). Safe from any thread.
 *   fully drawn: ends a cold-start capture; fires APP_FULLY_DRAWN
 *   anomaly:     fires ANOMALY, the result tagged with name
 *   heartbeat:   with a HANG trigger, a missed heartbeat is a hang
 */
void prof_report_fully_drawn(void);
void prof_report_anomaly(const char *name);
void prof_heartbeat(void);

/*
 * Budget query (issue #21): what prof_request(type, params) would get now,
 * without spending anything (no cost charged, no request id, no result).
 * The daemon answers from the same admission rules, in the same order, as
 * for a real request, so the answer holds until something changes: another
 * capture, a window moving on, a trigger firing.
 */
#define PROF_BUDGET_MAX_WINDOWS 3
#define PROF_BUDGET_MAX_TRIGGERS 8

struct prof_budget_window {
	uint64_t length_ms;        /* 1 h, 24 h, 7 d by default */
	uint32_t app_left;         /* cost units the app may still spend in it */
	uint32_t app_cap;
	uint32_t system_left;      /* the same for all apps together */
	uint32_t system_cap;
};

struct prof_budget_trigger {
	enum prof_trigger_type type;
	enum prof_type capture;
	uint32_t rate_limit_period_s;
	uint64_t ready_ms;         /* CLOCK_REALTIME ms it may fire again; 0: now */
};

struct prof_budget {
	int error;                 /* what prof_request would return, as a positive
				    * PROF_E_*; 0: it would be admitted */
	char message[256];         /* why, "" when admitted */
	uint32_t cost;             /* what it would charge each window */
	uint32_t nwindows;         /* 0 when the store fails closed */
	struct prof_budget_window windows[PROF_BUDGET_MAX_WINDOWS];
	uint32_t ntriggers;        /* the app's registered triggers */
	struct prof_budget_trigger triggers[PROF_BUDGET_MAX_TRIGGERS];
	/* Earliest admission (CLOCK_REALTIME ms; now_ms when admitted now), if
	 * nothing else is admitted meanwhile; 0 when no time will do it alone
	 * (a capture running, the disk, the store failing closed, invalid). */
	uint64_t admit_ms;
	uint64_t now_ms;           /* the daemon's clock when it answered */
};

/*
 * Fill *out (size: sizeof(*out), so that the struct can grow) for a
 * request of type with params (NULL: defaults; target_pid as in
 * prof_request). Returns 0 when the daemon answered, whatever its answer
 * (see out->error); a negative PROF_E_* when it could not be asked
 * (PROF_E_INVALID_REQUEST: NULL arguments or a size too small;
 * PROF_E_UNKNOWN: connection lost).
 */
int prof_get_budget(prof_client *c, enum prof_type type, const struct prof_params *params,
		    struct prof_budget *out, size_t size);

/* A static string for a PROF_E_* code, positive or negative. */
const char *prof_strerror(int error);

#ifdef __cplusplus
}
#endif
#endif

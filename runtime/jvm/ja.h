/*
 * profilingd-jattach: the HotSpot dynamic attach protocol (docs/JVM.md),
 * spoken by the daemon's helper so that unmodified JVMs need nothing added.
 *
 * Everything that parses bytes from the target JVM is in here with a
 * length cap, and is what tests/fuzz/fuzz_jattach.c calls: the reply
 * framing, the Thread.print text and the java command line. The JVM is
 * the app's process, so all of it is untrusted.
 */
#ifndef PD_JA_H
#define PD_JA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define JA_PROTOCOL_VERSION "1"
#define JA_MAX_REPLY   (16u << 20) /* Thread.print of many threads; more is cut, counted */
#define JA_MAX_ARG     1024        /* one command argument, NUL included */
#define JA_MAX_THREADS 4096        /* threads kept from one Thread.print */
#define JA_MAX_FRAMES  1024        /* frames kept per thread (HotSpot's default depth) */

/* ----------------------------------------------------------- ja_attach.c */

/*
 * Where the attach socket of pid is, as seen from here: the JVM's /tmp
 * through /proc/<pid>/root, named by its pid in its own namespace.
 */
int ja_paths(pid_t pid, pid_t nspid, char *sock, size_t ns, char *trigger, size_t nt);
/* The innermost (namespace) pid of pid, from /proc/<pid>/status NSpid
 * (-ENOENT: no such line, -EINVAL: not a pid there). */
int ja_nspid(pid_t pid, pid_t *nspid);
/*
 * Connect to pid's attach listener, starting it (trigger file + SIGQUIT)
 * when it does not run yet. The caller runs as the JVM's uid and gid.
 * Returns a connected fd or -errno (-ETIMEDOUT: no listener came up;
 * -EADDRINUSE: another user's file holds the socket's name, and no listener
 * came up, or the trigger's name).
 */
int ja_connect(pid_t pid, int timeout_ms);
/* Send one command: "1\0" cmd "\0" and three arguments (missing ones empty). */
int ja_send(int fd, const char *cmd, const char *a0, const char *a1, const char *a2);
/*
 * Read the whole reply (until EOF or the timeout) into a malloc'd,
 * NUL-terminated buffer of at most JA_MAX_REPLY bytes. *cut is set when
 * more came. 0 or -errno.
 */
int ja_read_reply(int fd, int timeout_ms, char **buf, size_t *len, bool *cut);

/* ------------------------------------------------------------ ja_stale.c */

/*
 * Run as root, before the switch to the JVM's user (the one privileged
 * step of the helper). Clears the names of pid's attach socket and
 * trigger file where another user's leftovers hold them, which neither
 * the VM nor the helper could replace (/tmp is sticky); the conditions
 * are at the top of ja_stale.c. start: pid's start time as the daemon
 * admitted it (0: whatever pid is now); jvm_uid: its euid as the caller
 * read it. 0, with out->removed the JA_STALE_* bits of what went and
 * out->owner[] the owners of the socket's and the trigger's names
 * ((uid_t)-1: none); -EADDRINUSE when another user's live listener or a
 * directory holds the socket's name (left alone); -ESRCH when pid is no
 * longer that process or that uid; -errno otherwise.
 */
#define JA_STALE_SOCKET  1
#define JA_STALE_TRIGGER 2
struct ja_stale {
	unsigned removed;
	uid_t owner[2];
};
int ja_clear_stale(pid_t pid, uint64_t start, uid_t jvm_uid, struct ja_stale *out);

/* ------------------------------------------------------------ ja_parse.c */

/*
 * Split a reply into its status (the first line, an integer) and the text
 * after it. -EBADMSG if the first line is not a number.
 */
int ja_parse_reply(const char *buf, size_t len, int *status, const char **body, size_t *blen);
/*
 * The agent's return code in a "load" reply body: "return code: N"
 * (JDK 9+) or a bare "N" (older). -EBADMSG when neither.
 */
int ja_parse_load_rc(const char *body, size_t blen, int *rc);

struct ja_frame {
	const char *cls;     /* "java.lang.Thread" (points into the owner's text) */
	uint16_t cls_len;
	const char *method;  /* "sleep" */
	uint16_t method_len;
	const char *file;    /* "Thread.java", or NULL */
	uint16_t file_len;
	int32_t line;        /* > 0, or HPROF's 0 none, -1 unknown, -3 native */
};

struct ja_thread {
	const char *name;
	uint16_t name_len;
	const char *state;   /* "RUNNABLE", "TIMED_WAITING", ... or NULL */
	uint16_t state_len;
	uint64_t nid;        /* OS thread id */
	uint32_t first, nframes; /* into ja_threads.frames */
};

struct ja_threads {
	struct ja_thread *threads;
	uint32_t nthreads;
	struct ja_frame *frames;
	uint32_t nframes;
	uint32_t dropped_threads, dropped_frames; /* past the caps */
};

/*
 * Parse Thread.print output (JDK 8 to 25 forms). Only Java threads (those
 * with a java.lang.Thread.State line) are kept. Pointers refer into text,
 * which must outlive out. 0, -ENOMEM, or -EBADMSG when there is no thread.
 */
int ja_threads_parse(const char *text, size_t len, struct ja_threads *out);
void ja_threads_free(struct ja_threads *t);

/*
 * From a java launcher's NUL-separated command line: the main class, or the
 * jar of -jar, or module/class of -m. 0, or -ENOENT when there is none.
 */
int ja_main_class(const char *cmdline, size_t len, char *out, size_t n);

/* ------------------------------------------------------------ ja_hprof.c */

/*
 * Copy the HPROF in in_fd to out_fd and append the threads as HPROF
 * records: UTF8 names, one STACK FRAME per frame (class serial looked up
 * in the dump's LOAD CLASS records), one STACK TRACE and one START THREAD
 * per thread. The input's structure is checked only as far as walking its
 * top-level records needs. 0 or -errno (-EBADMSG: not an HPROF).
 */
int ja_hprof_with_threads(int in_fd, int out_fd, const struct ja_threads *t);

#endif

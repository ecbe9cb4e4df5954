/*
 * svc_redact: running profilingd-redact over a finished capture (DESIGN
 * §6): who "the app" is (its pid, and its threads while it is still the
 * process admitted), the format, the DLP rules, the time cap. The run
 * itself, its sandbox and its exit code are svc_helper's.
 */
#ifndef PD_SVC_REDACT_H
#define PD_SVC_REDACT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "svc_helper.h"

struct svc_config;

/* Threads named to the redactor at most; more are left out (their
 * samples are dropped as not the app's). */
#define SVC_REDACT_TIDS_MAX 1024

/*
 * The captured process for the heap formats' process metadata (issue #20,
 * docs/PERFETTO.md): read by the daemon when the capture starts, passed to
 * the redactor as numbers and hex bytes, never parsed from the artifact.
 */
#define SVC_REDACT_CMDLINE_MAX 1024 /* bytes of /proc/<pid>/cmdline kept */
struct svc_redact_proc {
	bool read;             /* svc_redact_proc_read ran and found the process */
	uint32_t uid;          /* its real uid */
	uint32_t oom_tid;      /* the thread whose Java allocation failed; 0: none */
	uint16_t cmdline_len;
	char cmdline[SVC_REDACT_CMDLINE_MAX];
};

/* Fill p (once: a later call keeps the first reading) with pid's real uid
 * and the first SVC_REDACT_CMDLINE_MAX bytes of its cmdline, when pid is
 * still the process that started at start. Nothing on any failure. */
void svc_redact_proc_read(struct svc_redact_proc *p, pid_t pid, uint64_t start);

/* Keep cfg ([redact], [dlp]) for the runs. 0. */
int svc_redact_init(const struct svc_config *cfg);
/*
 * Start redacting in_fd (rewound) into out_fd for app_pid. cb runs once.
 * kernel_fd: a trace's kernel stream (profilingd-ftrace's file, read from
 * its start), which the redactor gets on fd 3 as the only source of
 * kernel data; -1 for none.
 * app_start: the app process's start time (svc_ident); its threads are
 * named to the redactor only while app_pid is still that process (0: it is
 * gone, no threads).
 * proc: the process metadata and OOM thread for the heap formats (--uid,
 * --cmdline, --oom-tid); NULL or unread: none.
 */
int svc_redact_start(int in_fd, int kernel_fd, int out_fd, const char *format, pid_t app_pid,
		     uint64_t app_start, const struct svc_redact_proc *proc, svc_helper_cb cb,
		     void *ud, struct svc_helper **h);

#endif

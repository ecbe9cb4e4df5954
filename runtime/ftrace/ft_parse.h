/*
 * The parser of profilingd-ftrace: lines of a tracefs instance's `trace`
 * file to Perfetto FtraceEvents. The text is the kernel's, but task names
 * (comm, set by any process with prctl(PR_SET_NAME) and holding any byte
 * but NUL) and exec'd file names are chosen by unprivileged processes, so
 * the parser treats every line as untrusted: fields after a task name are
 * found from the right, numbers are parsed within the line, and copied
 * strings are cut at 63 bytes. Fuzzed by tests/fuzz/fuzz_ftrace.c.
 */
#ifndef PD_FT_PARSE_H
#define PD_FT_PARSE_H

#include <stdint.h>

#include "perfetto_trace.pb-c.h"

#define FT_BUNDLE_MAX 512  /* events per FtraceEventBundle packet */
#define FT_LINE_MAX 4096   /* longer lines are split by the reader, and fail to parse */

/* One pending bundle per CPU; events own their strings until flushed. */
struct ft_bundle {
	Perfetto__Protos__FtraceEvent ev[FT_BUNDLE_MAX];
	union {
		Perfetto__Protos__SchedSwitchFtraceEvent sw;
		Perfetto__Protos__SchedWakingFtraceEvent wk;
		Perfetto__Protos__SchedProcessForkFtraceEvent fk;
		Perfetto__Protos__SchedProcessExecFtraceEvent ex;
		Perfetto__Protos__SchedProcessExitFtraceEvent xt;
		Perfetto__Protos__TaskRenameFtraceEvent rn;
		Perfetto__Protos__MarkVictimFtraceEvent mv;
	} body[FT_BUNDLE_MAX];
	char strs[FT_BUNDLE_MAX][2][64];
	Perfetto__Protos__FtraceEvent *ptrs[FT_BUNDLE_MAX];
	unsigned n;
};

/* The header of one line: "<comm>-<pid> [<cpu>] <flags> <secs>.<usecs>: <event>: <fields>". */
struct ft_line {
	unsigned cpu;
	long pid;
	uint64_t ts;
	const char *event, *fields, *end;
};

/*
 * Split line (NUL-terminated, modified in place) into its header and the
 * event's name and fields. 0, or -EBADMSG when it is not an event line.
 */
int ft_parse_header(char *line, struct ft_line *pr);
/*
 * Append the event pr describes to b. 0, -ENOSPC when b is full (b->n ==
 * FT_BUNDLE_MAX: flush it first), or -EBADMSG for an unknown event or
 * malformed fields (b->n is unchanged).
 */
int ft_parse_event(struct ft_bundle *b, const struct ft_line *pr);

#endif

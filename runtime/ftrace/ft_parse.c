/* tracefs text -> FtraceEvents (see ft_parse.h). */
#include "ft_parse.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* The last " key=" in [s, end), or NULL. */
static const char *rfind(const char *s, const char *end, const char *key)
{
	size_t k = strlen(key);
	/* No pointer before s is ever formed: that alone would be undefined. */
	if (end < s || (size_t)(end - s) < k)
		return NULL;
	for (const char *p = end - k;; p--) {
		if (memcmp(p, key, k) == 0)
			return p;
		if (p == s)
			return NULL;
	}
}

static bool num_after(const char *p, const char *key, long *v)
{
	char *e;
	p += strlen(key);
	errno = 0;
	*v = strtol(p, &e, 10);
	return e != p && errno == 0;
}

/* Copy [a, b) into dst (64 bytes), NUL-terminated. */
static char *span(char *dst, const char *a, const char *b)
{
	size_t n = b > a ? (size_t)(b - a) : 0;
	if (n > 63)
		n = 63;
	memcpy(dst, a, n);
	dst[n] = '\0';
	return dst;
}

/*
 * The kernel prints a line's task name right-aligned in 16 columns
 * ("%16s-%-7d [%03d] ", trace_print_context), and a name of up to 15 bytes
 * may itself look like "x-1 [0]". So the header's "-<pid> [<cpu>]" is the
 * first candidate whose '-' is at column 16 or later; a candidate inside
 * the name never is. Only that one is tried (the scan stays linear).
 */
#define FT_COMM_COLS 16

/*
 * The header with its "[<cpu>]" at br. -EAGAIN when br is inside the task
 * name (try the next one). Changes line only on success.
 */
static int header_at(char *line, char *br, struct ft_line *pr)
{
	/* pid: the digits right before " [", after the task name's last '-'. */
	char *d = br;
	while (d > line && d[-1] == ' ')
		d--;
	char *ds = d;
	while (ds > line && ds[-1] >= '0' && ds[-1] <= '9')
		ds--;
	if (ds == d || ds == line || ds[-1] != '-' || ds - 1 - line < FT_COMM_COLS)
		return -EAGAIN;
	long pid = strtol(ds, NULL, 10);
	unsigned cpu = (unsigned)strtoul(br + 2, NULL, 10);
	char *p = strchr(br, ']') + 1;
	while (*p == ' ')
		p++;
	while (*p && *p != ' ')
		p++; /* flags */
	while (*p == ' ')
		p++;
	if (*p < '0' || *p > '9')
		return -EBADMSG;
	char *e;
	unsigned long long secs = strtoull(p, &e, 10);
	if (e == p || *e != '.' || e[1] < '0' || e[1] > '9')
		return -EBADMSG;
	char *u = e + 1;
	unsigned long long frac = strtoull(u, &e, 10);
	int digits = (int)(e - u);
	if (digits <= 0 || digits > 9 || *e != ':')
		return -EBADMSG;
	for (int i = digits; i < 9; i++)
		frac *= 10;
	p = e + 1;
	while (*p == ' ')
		p++;
	char *colon = strstr(p, ": ");
	if (!colon)
		return -EBADMSG;
	*colon = '\0';
	pr->pid = pid;
	pr->cpu = cpu;
	pr->ts = secs * 1000000000ull + frac;
	pr->event = p;
	pr->fields = colon + 2;
	pr->end = pr->fields + strlen(pr->fields);
	return 0;
}

/* "<comm>-<pid> [<cpu>] <flags> <secs>.<usecs>: <event>: <fields>" */
int ft_parse_header(char *line, struct ft_line *pr)
{
	for (char *p = line; (p = strstr(p, " [")) != NULL; p++) {
		char *q = p + 2;
		while (*q >= '0' && *q <= '9')
			q++;
		if (q > p + 2 && *q == ']') {
			int r = header_at(line, p, pr);
			if (r != -EAGAIN)
				return r;
		}
	}
	return -EBADMSG;
}

int ft_parse_event(struct ft_bundle *b, const struct ft_line *pr)
{
	unsigned i = b->n;
	if (i >= FT_BUNDLE_MAX)
		return -ENOSPC;
	Perfetto__Protos__FtraceEvent *ev = &b->ev[i];
	const char *f = pr->fields, *end = pr->end;
	long v1, v2, v3;

	perfetto__protos__ftrace_event__init(ev);
	ev->has_timestamp = 1;
	ev->timestamp = pr->ts;
	ev->has_pid = 1;
	ev->pid = (uint32_t)pr->pid;
	if (!strcmp(pr->event, "sched_switch")) {
		Perfetto__Protos__SchedSwitchFtraceEvent *s = &b->body[i].sw;
		perfetto__protos__sched_switch_ftrace_event__init(s);
		const char *np = rfind(f, end, " next_prio="), *npid, *nc, *arrow, *ps, *pp, *ppid;
		if (!np || !(npid = rfind(f, np, " next_pid=")) || !(nc = rfind(f, npid, " next_comm=")) ||
		    !(arrow = rfind(f, nc + 1, " ==>")) || !(ps = rfind(f, arrow, " prev_state=")) ||
		    !(pp = rfind(f, ps, " prev_prio=")) || !(ppid = rfind(f, pp, " prev_pid=")) ||
		    strncmp(f, "prev_comm=", 10) != 0)
			return -EBADMSG;
		if (!num_after(np, " next_prio=", &v1) || !num_after(npid, " next_pid=", &v2) ||
		    !num_after(pp, " prev_prio=", &v3))
			return -EBADMSG;
		s->has_next_prio = 1; s->next_prio = (int32_t)v1;
		s->has_next_pid = 1; s->next_pid = (int32_t)v2;
		s->has_prev_prio = 1; s->prev_prio = (int32_t)v3;
		if (!num_after(ppid, " prev_pid=", &v1))
			return -EBADMSG;
		s->has_prev_pid = 1; s->prev_pid = (int32_t)v1;
		s->next_comm = span(b->strs[i][0], nc + 11, npid);
		s->prev_comm = span(b->strs[i][1], f + 10, ppid);
		/* prev_state letters back to the kernel's TASK_* bits (R = 0). */
		s->has_prev_state = 1;
		s->prev_state = 0;
		for (const char *q = ps + 12; *q && *q != ' '; q++) {
			const char *letters = "SDTtXZPI";
			const char *hit = strchr(letters, *q);
			if (hit && *q)
				s->prev_state |= *q == 'I' ? 0x402 : 1 << (hit - letters);
		}
		ev->event_case = PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_SWITCH;
		ev->sched_switch = s;
	} else if (!strcmp(pr->event, "sched_waking")) {
		Perfetto__Protos__SchedWakingFtraceEvent *s = &b->body[i].wk;
		perfetto__protos__sched_waking_ftrace_event__init(s);
		const char *tc = rfind(f, end, " target_cpu="), *pr_, *pd;
		if (!tc || !(pr_ = rfind(f, tc, " prio=")) || !(pd = rfind(f, pr_, " pid=")) ||
		    strncmp(f, "comm=", 5) != 0 || !num_after(pd, " pid=", &v1) ||
		    !num_after(tc, " target_cpu=", &v2) || !num_after(pr_, " prio=", &v3))
			return -EBADMSG;
		s->has_pid = 1; s->pid = (int32_t)v1;
		s->has_target_cpu = 1; s->target_cpu = (int32_t)v2;
		s->has_prio = 1; s->prio = (int32_t)v3;
		s->comm = span(b->strs[i][0], f + 5, pd);
		ev->event_case = PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_WAKING;
		ev->sched_waking = s;
	} else if (!strcmp(pr->event, "sched_process_fork")) {
		Perfetto__Protos__SchedProcessForkFtraceEvent *s = &b->body[i].fk;
		perfetto__protos__sched_process_fork_ftrace_event__init(s);
		const char *cp = rfind(f, end, " child_pid="), *cc, *pd;
		if (!cp || !(cc = rfind(f, cp, " child_comm=")) || !(pd = rfind(f, cc, " pid=")) ||
		    strncmp(f, "comm=", 5) != 0 || !num_after(cp, " child_pid=", &v1) ||
		    !num_after(pd, " pid=", &v2))
			return -EBADMSG;
		s->has_child_pid = 1; s->child_pid = (int32_t)v1;
		s->has_parent_pid = 1; s->parent_pid = (int32_t)v2;
		s->child_comm = span(b->strs[i][0], cc + 12, cp);
		s->parent_comm = span(b->strs[i][1], f + 5, pd);
		ev->event_case = PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_PROCESS_FORK;
		ev->sched_process_fork = s;
	} else if (!strcmp(pr->event, "sched_process_exec")) {
		Perfetto__Protos__SchedProcessExecFtraceEvent *s = &b->body[i].ex;
		perfetto__protos__sched_process_exec_ftrace_event__init(s);
		const char *op = rfind(f, end, " old_pid="), *pd;
		if (!op || !(pd = rfind(f, op, " pid=")) || strncmp(f, "filename=", 9) != 0 ||
		    !num_after(op, " old_pid=", &v1) || !num_after(pd, " pid=", &v2))
			return -EBADMSG;
		s->has_old_pid = 1; s->old_pid = (int32_t)v1;
		s->has_pid = 1; s->pid = (int32_t)v2;
		s->filename = span(b->strs[i][0], f + 9, pd);
		ev->event_case = PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_PROCESS_EXEC;
		ev->sched_process_exec = s;
	} else if (!strcmp(pr->event, "sched_process_exit")) {
		Perfetto__Protos__SchedProcessExitFtraceEvent *s = &b->body[i].xt;
		perfetto__protos__sched_process_exit_ftrace_event__init(s);
		const char *pr_ = rfind(f, end, " prio="), *pd;
		if (!pr_ || !(pd = rfind(f, pr_, " pid=")) || strncmp(f, "comm=", 5) != 0 ||
		    !num_after(pd, " pid=", &v1))
			return -EBADMSG;
		s->has_pid = 1; s->pid = (int32_t)v1;
		s->comm = span(b->strs[i][0], f + 5, pd);
		ev->event_case = PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_PROCESS_EXIT;
		ev->sched_process_exit = s;
	} else if (!strcmp(pr->event, "task_rename")) {
		Perfetto__Protos__TaskRenameFtraceEvent *s = &b->body[i].rn;
		perfetto__protos__task_rename_ftrace_event__init(s);
		const char *oom = rfind(f, end, " oom_score_adj="), *nc, *oc;
		if (!oom || !(nc = rfind(f, oom, " newcomm=")) || !(oc = rfind(f, nc, " oldcomm=")) ||
		    strncmp(f, "pid=", 4) != 0 || !num_after(f - 1, " pid=", &v1))
			return -EBADMSG;
		s->has_pid = 1; s->pid = (int32_t)v1;
		s->oldcomm = span(b->strs[i][0], oc + 9, nc);
		s->newcomm = span(b->strs[i][1], nc + 9, oom);
		ev->event_case = PERFETTO__PROTOS__FTRACE_EVENT__EVENT_TASK_RENAME;
		ev->task_rename = s;
	} else if (!strcmp(pr->event, "mark_victim")) {
		Perfetto__Protos__MarkVictimFtraceEvent *s = &b->body[i].mv;
		perfetto__protos__mark_victim_ftrace_event__init(s);
		if (strncmp(f, "pid=", 4) != 0 || !num_after(f - 1, " pid=", &v1))
			return -EBADMSG;
		s->has_pid = 1; s->pid = (int32_t)v1;
		ev->event_case = PERFETTO__PROTOS__FTRACE_EVENT__EVENT_MARK_VICTIM;
		ev->mark_victim = s;
	} else {
		return -EBADMSG;
	}
	b->n++;
	return 0;
}

/*
 * Exec and exit events from the netlink proc connector (CN_IDX_PROC), so a
 * registered app's start is seen within milliseconds rather than at the
 * next poll. Messages are accepted from the kernel only (nl_pid 0). Where
 * the connector cannot be used (no CAP_NET_ADMIN, no CONFIG_PROC_EVENTS),
 * a /proc scan every TRG_SCAN_MS stands in, and the status says so.
 *
 * The connector sends every fork, exec, exit, uid/gid/sid change and comm
 * of every thread on the machine; the daemon wants only a process's exec
 * and exit. A socket filter (classic BPF) drops the rest in the kernel,
 * so a machine forking 100 processes a second wakes the daemon for two
 * events per process instead of three or more per thread, and a thread's
 * start or end not at all. Without the filter (refused), the same test
 * runs in nl_read, which keeps it either way.
 *
 * Exits matter only for the processes the daemon tracks (trg_proc_exits):
 * the filter also drops the exit of any other pid, so an idle machine's
 * every short-lived process wakes the daemon once (its exec) rather than
 * twice. The list is compiled into the filter (two instructions a pid,
 * run in the exiting task's context); past TRG_PROC_EXIT_PIDS pids every
 * exit passes, as when the filter is refused or cannot be replaced.
 *
 * The exec events also keep a cache honest (svc_jvm: an answer per
 * process image): ops->lost says when events may have gone missing (an
 * overrun, a cut datagram), and trg_proc_current() whether every exec
 * queued so far has been handed out.
 */
#include "trg.h"

#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <arpa/inet.h>
#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"

#define TRG_SCAN_MS 500
#define TRG_PROC_RCVBUF (4 << 20) /* netlink receive buffer, bytes */
/*
 * Datagrams taken per recvmmsg, and the room for each: one event is one
 * datagram of under 100 bytes. One call per wake-up (the common case is
 * a single exec or exit) instead of a recvfrom per datagram plus one that
 * finds the queue empty. A longer datagram is cut (MSG_TRUNC) and dropped.
 */
#define NL_BATCH 16
#define TRG_PROC_EXIT_PIDS 1024 /* exits filtered by pid up to this many */
#define NL_DGRAM 256

static const struct trg_ops *ops;
static struct event_base *base;
static int nl = -1;
static struct event *ev;
static char status[160];
static pid_t *known;      /* the /proc scan's last view, sorted */
static size_t nknown;
static pid_t exit_pids[TRG_PROC_EXIT_PIDS]; /* trg_proc_exits: whose exits pass */
static size_t nexit;
static bool exit_all = true; /* every exit passes (past the cap, or not told) */
static bool reading;         /* in nl_read: a batch taken is not handed out yet */

/*
 * Keep exec and exit events whose thread is its process's leader (pid ==
 * tgid). The packet is nlmsghdr, cn_msg, proc_event, in host order; BPF
 * loads words big-endian, so constants are compared as htonl() of the
 * value (equality of two loaded words needs no swap).
 */
#define EV_OFF (NLMSG_HDRLEN + sizeof(struct cn_msg))
#define WHAT_OFF (EV_OFF + offsetof(struct proc_event, what))
#define PID_OFF (EV_OFF + offsetof(struct proc_event, event_data.exec.process_pid))
#define TGID_OFF (EV_OFF + offsetof(struct proc_event, event_data.exec.process_tgid))

static int nl_filter(int s)
{
	/* exit's first two fields are exec's (process_pid, process_tgid) */
	_Static_assert(offsetof(struct proc_event, event_data.exit.process_pid) ==
			       offsetof(struct proc_event, event_data.exec.process_pid) &&
		       offsetof(struct proc_event, event_data.exit.process_tgid) ==
			       offsetof(struct proc_event, event_data.exec.process_tgid),
		       "exec and exit events lay out their ids alike");
	/* 13 fixed instructions and two a pid: well under BPF_MAXINSNS. */
	static struct sock_filter code[16 + 2 * TRG_PROC_EXIT_PIDS];
	_Static_assert(sizeof(code) / sizeof(code[0]) <= BPF_MAXINSNS, "filter too long");
	const uint32_t drop = 0, keep = 0xffffffff;
	size_t n = 0;
	code[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, WHAT_OFF);
	code[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, htonl(PROC_EVENT_EXEC), 1, 0);
	code[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, htonl(PROC_EVENT_EXIT), 0, 4);
	code[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, TGID_OFF);
	code[n++] = (struct sock_filter)BPF_STMT(BPF_MISC | BPF_TAX, 0);
	code[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, PID_OFF);
	code[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_X, 0, 1, 0);
	code[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, drop); /* not a leader's */
	/* A leader's exec, or exit of anyone when not filtering by pid. */
	code[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, WHAT_OFF);
	code[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, htonl(PROC_EVENT_EXIT),
						 exit_all ? 0 : 1, 0);
	code[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, keep);
	if (!exit_all) {
		/* An exit: kept when its pid is one of the list. */
		code[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, PID_OFF);
		for (size_t i = 0; i < nexit; i++) {
			code[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
								 htonl((uint32_t)exit_pids[i]), 0, 1);
			code[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, keep);
		}
		code[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, drop);
	}
	struct sock_fprog prog = { (unsigned short)n, code };
	return setsockopt(s, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) < 0 ? -errno : 0;
}

static int filtered = -1; /* 0: the kernel filters; else why not (-errno) */

static int nl_listen(void)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK, .nl_groups = CN_IDX_PROC };
	/* nlmsghdr, cn_msg, then the op: laid out by hand (cn_msg ends in a
	 * flexible array). */
	union {
		char b[NLMSG_SPACE(sizeof(struct cn_msg) + sizeof(enum proc_cn_mcast_op))];
		struct nlmsghdr align;
	} msg;
	int s = socket(PF_NETLINK, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_CONNECTOR);
	if (s < 0)
		return -errno;
	filtered = nl_filter(s);
	if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		goto fail;
	/*
	 * A burst of execs (a build, or one user's thousands of copies) must not
	 * overrun the default buffer and lose other processes' events (a cold
	 * start). Forced past rmem_max where we may (CAP_NET_ADMIN, which the
	 * connector needs anyway); best effort.
	 */
	int rcv = TRG_PROC_RCVBUF;
	if (setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &rcv, sizeof(rcv)) < 0)
		setsockopt(s, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
	memset(&msg, 0, sizeof(msg));
	struct nlmsghdr *nh = &msg.align;
	struct cn_msg *cn = NLMSG_DATA(nh);
	enum proc_cn_mcast_op op = PROC_CN_MCAST_LISTEN;
	nh->nlmsg_len = NLMSG_LENGTH(sizeof(*cn) + sizeof(op));
	nh->nlmsg_type = NLMSG_DONE;
	nh->nlmsg_pid = (uint32_t)getpid();
	cn->id.idx = CN_IDX_PROC;
	cn->id.val = CN_VAL_PROC;
	cn->len = sizeof(op);
	memcpy(cn->data, &op, sizeof(op));
	if (send(s, &msg, nh->nlmsg_len, 0) < 0)
		goto fail;
	return s;
fail:;
	int r = -errno;
	close(s);
	return r;
}

static void nl_event(const struct nlmsghdr *nh, size_t n)
{
	for (; NLMSG_OK(nh, n); nh = NLMSG_NEXT(nh, n)) {
		if (nh->nlmsg_type == NLMSG_ERROR || nh->nlmsg_type == NLMSG_NOOP)
			continue;
		const struct cn_msg *cn = NLMSG_DATA(nh);
		if (nh->nlmsg_len < NLMSG_LENGTH(sizeof(*cn)) || cn->id.idx != CN_IDX_PROC ||
		    cn->id.val != CN_VAL_PROC || cn->len < sizeof(struct proc_event) ||
		    cn->len > nh->nlmsg_len - NLMSG_LENGTH(sizeof(*cn)))
			continue;
		/* The event sits 4-byte aligned in the packet; copy it out. */
		struct proc_event pe;
		memcpy(&pe, cn->data, sizeof(pe));
		if (pe.what == PROC_EVENT_EXEC && ops->exec &&
		    pe.event_data.exec.process_pid == pe.event_data.exec.process_tgid)
			ops->exec(pe.event_data.exec.process_tgid);
		else if (pe.what == PROC_EVENT_EXIT && ops->exit &&
			 pe.event_data.exit.process_pid == pe.event_data.exit.process_tgid)
			ops->exit(pe.event_data.exit.process_tgid, (int)pe.event_data.exit.exit_code);
	}
}

static void nl_read(evutil_socket_t fd, short what, void *arg)
{
	/* Static: 4 KiB that would otherwise be a fresh stack page per wake-up. */
	static union {
		struct nlmsghdr nh;
		char b[NL_DGRAM];
	} buf[NL_BATCH];
	static struct sockaddr_nl from[NL_BATCH];
	struct iovec iov[NL_BATCH];
	struct mmsghdr mm[NL_BATCH];
	/* Batches of events; the kernel drops what does not fit (ENOBUFS).
	 * A full batch means more may wait: up to 8 batches a wake-up, the
	 * rest at the next turn of the loop (level-triggered). */
	for (int round = 0; round < 8; round++) {
		memset(mm, 0, sizeof(mm));
		for (int i = 0; i < NL_BATCH; i++) {
			iov[i].iov_base = &buf[i];
			iov[i].iov_len = sizeof(buf[i]);
			mm[i].msg_hdr.msg_iov = &iov[i];
			mm[i].msg_hdr.msg_iovlen = 1;
			mm[i].msg_hdr.msg_name = &from[i];
			mm[i].msg_hdr.msg_namelen = sizeof(from[i]);
		}
		int got = recvmmsg(fd, mm, NL_BATCH, MSG_DONTWAIT, NULL);
		if (got < 0) {
			if (errno == ENOBUFS) {
				LOG_W("proc connector overran: some process events were lost");
				if (ops->lost)
					ops->lost();
			}
			return;
		}
		/* Until the whole batch is handed out, an exec taken off the
		 * socket is reported nowhere: trg_proc_current says no. */
		reading = true;
		for (int i = 0; i < got; i++) {
			if (mm[i].msg_hdr.msg_namelen < sizeof(from[i]) || from[i].nl_pid != 0)
				continue; /* not the kernel's */
			if (mm[i].msg_hdr.msg_flags & MSG_TRUNC) {
				/* The kernel's, cut: it may have been an exec. */
				if (ops->lost)
					ops->lost();
				continue;
			}
			nl_event(&buf[i].nh, mm[i].msg_len);
		}
		reading = false;
		if (got < NL_BATCH)
			return;
	}
}

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
	return x < y ? -1 : x > y;
}

static size_t scan(pid_t **out)
{
	size_t n = 0, cap = 1024;
	pid_t *v = malloc(cap * sizeof(*v));
	DIR *d = opendir("/proc");
	struct dirent *de;
	if (!v || !d) {
		free(v);
		if (d)
			closedir(d);
		*out = NULL;
		return 0;
	}
	while ((de = readdir(d))) {
		pid_t p = (pid_t)atoi(de->d_name);
		if (p <= 0)
			continue;
		if (n == cap) {
			pid_t *g = realloc(v, 2 * cap * sizeof(*v));
			if (!g)
				break;
			v = g;
			cap *= 2;
		}
		v[n++] = p;
	}
	closedir(d);
	qsort(v, n, sizeof(*v), cmp_pid);
	*out = v;
	return n;
}

/* Fallback: new pids count as execs, vanished ones as exits of unknown status. */
static void scan_cb(evutil_socket_t fd, short what, void *arg)
{
	pid_t *now;
	size_t n = scan(&now), i = 0, j = 0;
	while (i < n || j < nknown) {
		if (j == nknown || (i < n && now[i] < known[j])) {
			if (ops->exec)
				ops->exec(now[i]);
			i++;
		} else if (i == n || known[j] < now[i]) {
			if (ops->exit)
				ops->exit(known[j], -1);
			j++;
		} else {
			i++;
			j++;
		}
	}
	free(known);
	known = now;
	nknown = n;
}

int trg_proc_init(struct event_base *b, const struct trg_ops *o)
{
	base = b;
	ops = o;
	nl = nl_listen();
	if (nl >= 0) {
		ev = event_new(base, nl, EV_READ | EV_PERSIST, nl_read, NULL);
		if (!ev || event_add(ev, NULL) < 0)
			return -ENOMEM;
		if (filtered)
			snprintf(status, sizeof(status), "netlink proc connector (unfiltered: %s)",
				 strerror(-filtered));
		else
			snprintf(status, sizeof(status), "netlink proc connector");
		return 0;
	}
	snprintf(status, sizeof(status), "fallback: /proc scan every %d ms (proc connector: %s)",
		 TRG_SCAN_MS, strerror(-nl));
	LOG_W("process events: %s", status);
	nknown = scan(&known);
	ev = event_new(base, -1, EV_PERSIST, scan_cb, NULL);
	struct timeval tv = { 0, TRG_SCAN_MS * 1000 };
	if (!ev || event_add(ev, &tv) < 0)
		return -ENOMEM;
	return 0;
}

void trg_proc_fini(void)
{
	if (ev)
		event_free(ev);
	ev = NULL;
	if (nl >= 0)
		close(nl);
	nl = -1;
	free(known);
	known = NULL;
	nknown = 0;
	nexit = 0;
	exit_all = true;
	reading = false;
}

bool trg_proc_current(void)
{
	if (nl < 0 || reading)
		return false;
	/* POLLERR too: an overrun not read yet (sk_err) is pending as well. */
	struct pollfd p = { .fd = nl, .events = POLLIN };
	return poll(&p, 1, 0) == 0;
}

const char *trg_proc_status(void)
{
	return status[0] ? status : "not started";
}

void trg_proc_exits(const pid_t *pids, size_t n)
{
	exit_all = n > TRG_PROC_EXIT_PIDS;
	nexit = exit_all ? 0 : n;
	if (nexit)
		memcpy(exit_pids, pids, nexit * sizeof(*pids));
	if (nl < 0 || filtered)
		return; /* no filter: nl_read sees every exit */
	/* Replacing the filter is atomic; if it fails, none at all rather than
	 * the old list, which would hide the exit of a pid just tracked. */
	int e = nl_filter(nl);
	if (e < 0) {
		setsockopt(nl, SOL_SOCKET, SO_DETACH_FILTER, NULL, 0);
		filtered = e;
		snprintf(status, sizeof(status), "netlink proc connector (unfiltered: %s)",
			 strerror(-e));
		LOG_W("process events: %s", status);
	}
}

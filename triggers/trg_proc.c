/*
 * Exec and exit events from the netlink proc connector (CN_IDX_PROC), so a
 * registered app's start is seen within milliseconds rather than at the
 * next poll. Messages are accepted from the kernel only (nl_pid 0). Where
 * the connector cannot be used (no CAP_NET_ADMIN, no CONFIG_PROC_EVENTS),
 * a /proc scan every TRG_SCAN_MS stands in, and the status says so.
 */
#include "trg.h"

#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <linux/netlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"

#define TRG_SCAN_MS 500
#define TRG_PROC_RCVBUF (4 << 20) /* netlink receive buffer, bytes */

static const struct trg_ops *ops;
static struct event_base *base;
static int nl = -1;
static struct event *ev;
static char status[160];
static pid_t *known;      /* the /proc scan's last view, sorted */
static size_t nknown;

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

static void nl_read(evutil_socket_t fd, short what, void *arg)
{
	/* Batches of events; the kernel drops what does not fit (ENOBUFS). */
	for (int i = 0; i < 64; i++) {
		union {
			struct nlmsghdr nh;
			char b[4096];
		} buf;
		struct sockaddr_nl from;
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(fd, &buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl);
		if (n < 0) {
			if (errno == ENOBUFS)
				LOG_W("proc connector overran: some process events were lost");
			return;
		}
		if (from.nl_pid != 0)
			continue; /* not from the kernel */
		for (struct nlmsghdr *nh = &buf.nh; NLMSG_OK(nh, (unsigned)n); nh = NLMSG_NEXT(nh, n)) {
			if (nh->nlmsg_type == NLMSG_ERROR || nh->nlmsg_type == NLMSG_NOOP)
				continue;
			struct cn_msg *cn = NLMSG_DATA(nh);
			if (cn->id.idx != CN_IDX_PROC || cn->id.val != CN_VAL_PROC ||
			    cn->len < sizeof(struct proc_event))
				continue;
			/* The event sits 4-byte aligned in the packet; copy it out. */
			struct proc_event pe;
			memcpy(&pe, cn->data, sizeof(pe));
			if (pe.what == PROC_EVENT_EXEC && ops->exec &&
			    pe.event_data.exec.process_pid == pe.event_data.exec.process_tgid)
				ops->exec(pe.event_data.exec.process_tgid);
			else if (pe.what == PROC_EVENT_EXIT && ops->exit &&
				 pe.event_data.exit.process_pid == pe.event_data.exit.process_tgid)
				ops->exit(pe.event_data.exit.process_tgid,
					  (int)pe.event_data.exit.exit_code);
		}
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
}

const char *trg_proc_status(void)
{
	return status[0] ? status : "not started";
}

/*
 * hostile_forged_kernel: an app whose runtime speaks for the kernel.
 *
 * It plays its own runtime on runtime.sock (PROFILING_NO_AGENT=1), asks
 * for a system trace of itself, and into the capture writes, besides a
 * few slices of its own, kernel-looking packets: ftrace_events bundles
 * with no trusted sequence id and with one no other packet declares,
 * holding a sched_process_fork whose parent is this process for every
 * pid in /proc (which used to make each of them "the app's"), and
 * sched_switch, task_rename, sched_process_exec and sched_process_exit
 * events plus a process_tree naming the victim (another user's process).
 * It prints the delivered result's path; ht_forged_kernel reads it.
 *
 *   hostile_forged_kernel RUNTIME_SOCKET VICTIM_PID VICTIM_COMM
 */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <profiling/profiling.h>

#include "perfetto_trace.pb-c.h"
#include "profilingd.pb-c.h"
#include "trace_fmt.h"
#include "util.h"
#include "wire.h"

#define CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, "hostile_forged_kernel: " __VA_ARGS__); \
	fputc('\n', stderr); exit(1); } } while (0)

#define MY_NAME "hostile-app"
#define UNDECLARED_SEQ 0x7fff1234u /* no packet of the app's declares it */
#define BUNDLE_MAX 512             /* events per forged bundle */

typedef Perfetto__Protos__FtraceEvent FEvent;

static pid_t me;
static int victim;
static char *victim_comm;
static uint64_t written;

static uint64_t boot_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One TracePacket with the Trace.packet framing. */
static void put_packet(int fd, Perfetto__Protos__TracePacket *p)
{
	size_t n = perfetto__protos__trace_packet__get_packed_size(p);
	uint8_t *buf = malloc(n + 11);
	CHECK(buf, "out of memory");
	size_t h = 0;
	buf[h++] = 0x0a;
	for (uint64_t v = n;; v >>= 7) {
		buf[h++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		if (v <= 0x7f)
			break;
	}
	perfetto__protos__trace_packet__pack(p, buf + h);
	CHECK(util_write_all(fd, buf, h + n) == 0, "write: %s", strerror(errno));
	written += h + n;
	free(buf);
}

/* seq 0: no trusted sequence id at all. */
static void put_bundle(int fd, uint32_t seq, FEvent **ev, size_t n)
{
	Perfetto__Protos__TracePacket p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	Perfetto__Protos__FtraceEventBundle b = PERFETTO__PROTOS__FTRACE_EVENT_BUNDLE__INIT;
	b.has_cpu = 1;
	b.cpu = 0;
	b.n_event = n;
	b.event = ev;
	p.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS;
	p.ftrace_events = &b;
	p.has_trusted_packet_sequence_id = seq != 0;
	p.trusted_packet_sequence_id = seq;
	put_packet(fd, &p);
}

/* A fork by this process of every pid in /proc, BUNDLE_MAX to a packet. */
static size_t forge_forks(int fd, uint32_t seq)
{
	static FEvent ev[BUNDLE_MAX];
	static Perfetto__Protos__SchedProcessForkFtraceEvent fk[BUNDLE_MAX];
	static FEvent *ptr[BUNDLE_MAX];
	size_t n = 0, total = 0;
	DIR *d = opendir("/proc");
	struct dirent *de;
	CHECK(d, "opendir /proc: %s", strerror(errno));
	while ((de = readdir(d))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		if (*end || pid <= 0 || pid == me)
			continue;
		perfetto__protos__ftrace_event__init(&ev[n]);
		perfetto__protos__sched_process_fork_ftrace_event__init(&fk[n]);
		fk[n].has_parent_pid = fk[n].has_child_pid = 1;
		fk[n].parent_pid = me;
		fk[n].parent_comm = MY_NAME;
		fk[n].child_pid = (int32_t)pid;
		fk[n].child_comm = pid == victim ? victim_comm : MY_NAME;
		ev[n].has_timestamp = ev[n].has_pid = 1;
		ev[n].timestamp = boot_ns();
		ev[n].pid = (uint32_t)me;
		ev[n].event_case = PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_PROCESS_FORK;
		ev[n].sched_process_fork = &fk[n];
		ptr[n] = &ev[n];
		total++;
		if (++n == BUNDLE_MAX) {
			put_bundle(fd, seq, ptr, n);
			n = 0;
		}
	}
	closedir(d);
	if (n)
		put_bundle(fd, seq, ptr, n);
	return total;
}

/* Events that name the victim, as if the kernel had recorded them. */
static void forge_victim(int fd, uint32_t seq)
{
	FEvent ev[5], *ptr[5];
	Perfetto__Protos__SchedSwitchFtraceEvent sw = PERFETTO__PROTOS__SCHED_SWITCH_FTRACE_EVENT__INIT;
	Perfetto__Protos__TaskRenameFtraceEvent rn = PERFETTO__PROTOS__TASK_RENAME_FTRACE_EVENT__INIT;
	Perfetto__Protos__SchedProcessExecFtraceEvent ex =
		PERFETTO__PROTOS__SCHED_PROCESS_EXEC_FTRACE_EVENT__INIT;
	Perfetto__Protos__SchedProcessExitFtraceEvent xt =
		PERFETTO__PROTOS__SCHED_PROCESS_EXIT_FTRACE_EVENT__INIT;
	Perfetto__Protos__SchedWakingFtraceEvent wk = PERFETTO__PROTOS__SCHED_WAKING_FTRACE_EVENT__INIT;

	sw.has_prev_pid = sw.has_next_pid = 1;
	sw.prev_pid = victim;
	sw.prev_comm = victim_comm;
	sw.next_pid = victim;
	sw.next_comm = victim_comm;
	rn.has_pid = 1;
	rn.pid = victim;
	rn.oldcomm = victim_comm;
	rn.newcomm = victim_comm;
	ex.has_pid = ex.has_old_pid = 1;
	ex.pid = ex.old_pid = victim;
	ex.filename = victim_comm;
	xt.has_pid = xt.has_tgid = 1;
	xt.pid = xt.tgid = victim;
	xt.comm = victim_comm;
	wk.has_pid = 1;
	wk.pid = victim;
	wk.comm = victim_comm;
	for (int i = 0; i < 5; i++) {
		perfetto__protos__ftrace_event__init(&ev[i]);
		ev[i].has_timestamp = ev[i].has_pid = 1;
		ev[i].timestamp = boot_ns();
		ev[i].pid = (uint32_t)victim;
		ptr[i] = &ev[i];
	}
	ev[0].event_case = PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_SWITCH;
	ev[0].sched_switch = &sw;
	ev[1].event_case = PERFETTO__PROTOS__FTRACE_EVENT__EVENT_TASK_RENAME;
	ev[1].task_rename = &rn;
	ev[2].event_case = PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_PROCESS_EXEC;
	ev[2].sched_process_exec = &ex;
	ev[3].event_case = PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_WAKING;
	ev[3].sched_waking = &wk;
	ev[4].event_case = PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_PROCESS_EXIT;
	ev[4].sched_process_exit = &xt;
	put_bundle(fd, seq, ptr, 5);

	/* The process list, as traced_probes would write it. */
	Perfetto__Protos__TracePacket p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	Perfetto__Protos__ProcessTree t = PERFETTO__PROTOS__PROCESS_TREE__INIT;
	Perfetto__Protos__ProcessTree__Process pr = PERFETTO__PROTOS__PROCESS_TREE__PROCESS__INIT;
	Perfetto__Protos__ProcessTree__Process *prp = &pr;
	Perfetto__Protos__ProcessTree__Thread th = PERFETTO__PROTOS__PROCESS_TREE__THREAD__INIT;
	Perfetto__Protos__ProcessTree__Thread *thp = &th;
	pr.has_pid = pr.has_ppid = 1;
	pr.pid = victim;
	pr.ppid = me;
	pr.n_cmdline = 1;
	pr.cmdline = &victim_comm;
	th.has_tid = th.has_tgid = 1;
	th.tid = th.tgid = victim;
	th.name = victim_comm;
	t.n_processes = 1;
	t.processes = &prp;
	t.n_threads = 1;
	t.threads = &thp;
	p.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_PROCESS_TREE;
	p.process_tree = &t;
	p.has_trusted_packet_sequence_id = seq != 0;
	p.trusted_packet_sequence_id = seq;
	put_packet(fd, &p);
}

/* The app's own data, as the real agent writes it: this stays. */
static void own_slices(int fd)
{
	static struct tfmt_out o;
	tfmt_init(&o, fd);
	tfmt_process(&o, me, MY_NAME, MY_NAME);
	tfmt_thread(&o, me, me, MY_NAME);
	for (int i = 0; i < 20; i++) {
		struct trc_ev e = { .ts = boot_ns(), .type = EV_BEGIN };
		e.len = (uint8_t)snprintf(e.name, sizeof(e.name), "own-slice-%d", i);
		tfmt_event(&o, me, me, &e);
		e.type = EV_END;
		e.len = 0;
		e.ts = boot_ns();
		tfmt_event(&o, me, me, &e);
	}
	uint64_t n = 0;
	CHECK(tfmt_finish(&o, &n) == 0, "write own slices");
	written += n;
}

static int runtime_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	util_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	CHECK(s >= 0, "socket");
	CHECK(connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect %s: %s", path,
	      strerror(errno));
	Pd__RuntimeMsg m = PD__RUNTIME_MSG__INIT;
	Pd__RuntimeHello h = PD__RUNTIME_HELLO__INIT;
	char *caps[] = { "trace_ring" };
	h.pid = (uint32_t)me;
	h.runtime = "native";
	h.capabilities = caps;
	h.n_capabilities = 1;
	m.msg_case = PD__RUNTIME_MSG__MSG_HELLO;
	m.hello = &h;
	CHECK(wire_send_msg(s, &m.base, WIRE_RUNTIME_MAX_MSG, -1) == 0, "send hello");
	return s;
}

/* The next daemon message that is not a HelloAck; its fd into *fd. */
static Pd__DaemonToRuntime *runtime_read(int s, int *fd)
{
	static uint8_t buf[WIRE_RUNTIME_MAX_MSG];
	for (;;) {
		struct pollfd pf = { .fd = s, .events = POLLIN };
		CHECK(poll(&pf, 1, 30000) == 1, "the daemon sent the runtime nothing");
		*fd = -1;
		ssize_t n = wire_recv(s, buf, sizeof(buf), fd);
		CHECK(n > 0, "runtime recv: %zd", n);
		Pd__DaemonToRuntime *d = pd__daemon_to_runtime__unpack(NULL, (size_t)n, buf);
		CHECK(d, "undecodable daemon message");
		if (d->msg_case != PD__DAEMON_TO_RUNTIME__MSG_HELLO_ACK)
			return d;
		pd__daemon_to_runtime__free_unpacked(d, NULL);
		if (*fd >= 0)
			close(*fd);
	}
}

struct outcome {
	int done, error;
	char path[4096], msg[256];
};

static void on_result(const struct prof_result *r, void *ud)
{
	struct outcome *o = ud;
	o->done = 1;
	o->error = r->error;
	snprintf(o->path, sizeof(o->path), "%s", r->path ? r->path : "");
	snprintf(o->msg, sizeof(o->msg), "%s", r->error_message ? r->error_message : "");
}

int main(int argc, char **argv)
{
	int err, fd;
	CHECK(argc == 4, "usage: hostile_forged_kernel RUNTIME_SOCKET VICTIM_PID VICTIM_COMM");
	me = getpid();
	victim = atoi(argv[2]);
	victim_comm = argv[3];
	CHECK(victim > 0 && victim != me, "bad victim pid %s", argv[2]);

	int rt = runtime_connect(argv[1]);
	prof_client *c = prof_connect(NULL, &err);
	CHECK(c, "prof_connect: %s", strerror(-err));
	struct outcome o = { 0 };
	struct prof_params p = PROF_PARAMS_INIT(.duration_ms = 1000, .buffer_kb = 2048);
	int r = prof_request(c, PROF_SYSTEM_TRACE, &p, "forged", on_result, &o, NULL);
	CHECK(r == 0, "system trace refused: %s", prof_strerror(r));

	Pd__DaemonToRuntime *d = runtime_read(rt, &fd);
	CHECK(d->msg_case == PD__DAEMON_TO_RUNTIME__MSG_CAPTURE && fd >= 0,
	      "no CaptureRequest with an fd (message %d)", (int)d->msg_case);
	uint64_t sid = d->capture->session_id;
	pd__daemon_to_runtime__free_unpacked(d, NULL);

	/* Let the kernel see the victim run while the capture is on. */
	usleep(300 * 1000);
	own_slices(fd);
	size_t forks = forge_forks(fd, 0);
	forks += forge_forks(fd, UNDECLARED_SEQ);
	forge_victim(fd, 0);
	forge_victim(fd, UNDECLARED_SEQ);
	close(fd);
	fprintf(stderr, "hostile_forged_kernel: pid %d forged %zu forks and the victim's events "
		"(%llu bytes)\n", (int)me, forks, (unsigned long long)written);

	Pd__RuntimeMsg m = PD__RUNTIME_MSG__INIT;
	Pd__CaptureDone dn = PD__CAPTURE_DONE__INIT;
	dn.session_id = sid;
	dn.has_bytes = 1;
	dn.bytes = written;
	m.msg_case = PD__RUNTIME_MSG__MSG_DONE;
	m.done = &dn;
	CHECK(wire_send_msg(rt, &m.base, WIRE_RUNTIME_MAX_MSG, -1) == 0, "send CaptureDone");

	uint64_t end = util_mono_ms() + 60000;
	while (!o.done && util_mono_ms() < end)
		CHECK(prof_dispatch(c, 200) >= 0, "lost the daemon");
	CHECK(o.done, "no result within 60 s");
	prof_close(c);
	close(rt);
	if (o.error) {
		fprintf(stderr, "hostile_forged_kernel: capture failed: %s: %s\n",
			prof_strerror(o.error), o.msg);
		return 2;
	}
	printf("%s\n", o.path);
	return 0;
}

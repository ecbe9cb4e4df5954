/* The hostile suite's hand-made runtime (hrt.h). */
#include "hrt.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "pprof.h"
#include "util.h"
#include "wire.h"

int hrt_runtime(const char *const *caps, size_t ncaps)
{
	const char *path = getenv("PROFILINGD_RUNTIME_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	HCHECK(path, "PROFILINGD_RUNTIME_SOCKET unset");
	util_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	HCHECK(s >= 0, "socket: %s", strerror(errno));
	HCHECK(connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect %s: %s", path,
	       strerror(errno));
	Pd__RuntimeMsg m = PD__RUNTIME_MSG__INIT;
	Pd__RuntimeHello h = PD__RUNTIME_HELLO__INIT;
	h.pid = (uint32_t)getpid();
	h.runtime = "native";
	h.capabilities = (char **)caps;
	h.n_capabilities = ncaps;
	m.msg_case = PD__RUNTIME_MSG__MSG_HELLO;
	m.hello = &h;
	HCHECK(wire_send_msg(s, &m.base, WIRE_RUNTIME_MAX_MSG, -1) == 0, "send hello");
	HCHECK(hrt_read(s, NULL, NULL, 10000) == PD__DAEMON_TO_RUNTIME__MSG_HELLO_ACK, "no HelloAck");
	return s;
}

int hrt_read(int rt, int *fd, uint64_t *sid, int ms)
{
	struct pollfd pf = { .fd = rt, .events = POLLIN };
	uint8_t buf[WIRE_RUNTIME_MAX_MSG];
	if (fd)
		*fd = -1;
	HCHECK(poll(&pf, 1, ms) == 1, "the runtime got nothing within %d ms", ms);
	ssize_t n = wire_recv(rt, buf, sizeof(buf), fd);
	HCHECK(n > 0, "runtime recv: %zd", n);
	Pd__DaemonToRuntime *d = pd__daemon_to_runtime__unpack(NULL, (size_t)n, buf);
	HCHECK(d, "undecodable daemon message");
	int which = d->msg_case;
	if (sid)
		*sid = which == PD__DAEMON_TO_RUNTIME__MSG_CAPTURE ? d->capture->session_id
		       : which == PD__DAEMON_TO_RUNTIME__MSG_CANCEL ? d->cancel->session_id : 0;
	pd__daemon_to_runtime__free_unpacked(d, NULL);
	return which;
}

void hrt_done(int rt, uint64_t sid, uint64_t bytes)
{
	Pd__RuntimeMsg m = PD__RUNTIME_MSG__INIT;
	Pd__CaptureDone d = PD__CAPTURE_DONE__INIT;
	d.session_id = sid;
	d.has_bytes = 1;
	d.bytes = bytes;
	m.msg_case = PD__RUNTIME_MSG__MSG_DONE;
	m.done = &d;
	HCHECK(wire_send_msg(rt, &m.base, WIRE_RUNTIME_MAX_MSG, -1) == 0, "send CaptureDone");
}

prof_client *hrt_client(void)
{
	int err = 0;
	prof_client *c = prof_connect(NULL, &err);
	HCHECK(c, "prof_connect: %s", strerror(-err));
	return c;
}

void hrt_on_result(const struct prof_result *r, void *ud)
{
	struct hrt_outcome *o = ud;
	o->done = 1;
	o->error = r->error;
	snprintf(o->msg, sizeof(o->msg), "%s", r->error_message ? r->error_message : "");
}

void hrt_wait(prof_client *c, struct hrt_outcome *o, int max_ms)
{
	uint64_t end = util_mono_ms() + (uint64_t)max_ms;
	while (!o->done && util_mono_ms() < end)
		HCHECK(prof_dispatch(c, 100) >= 0, "lost the daemon");
	HCHECK(o->done, "no result within %d ms", max_ms);
}

uint64_t hrt_write_pprof(int fd)
{
	struct pp_builder *b;
	uint64_t f, l, bytes = 0;
	HCHECK(pp_new(&b) == 0, "pp_new");
	pp_add_sample_type(b, "samples", "count");
	pp_add_function(b, "hostile_fn", NULL, NULL, 0, &f);
	pp_add_location(b, 0, 0x1000, f, 0, &l);
	int64_t v = 1;
	struct pp_label lab = { .key = "pid", .num = getpid() };
	HCHECK(pp_add_sample(b, &l, 1, &v, 1, &lab, 1) == 0, "pp_add_sample");
	HCHECK(pp_write_gz(b, fd, &bytes) == 0, "pp_write_gz");
	pp_free(b);
	return bytes;
}

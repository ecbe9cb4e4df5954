/*
 * svc_conn: the one transport of the three sockets, driven through roles
 * registered here (svc_conn.h): a handler is picked by the message's
 * oneof case, a message that needs a hello before it closes the peer,
 * the closed op runs only for peers the role accepted, the per-uid cap
 * of control.sock closes the extra connection at accept, and a socket
 * whose role is not registered closes every connection at accept.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "control.pb-c.h"
#include "svc_config.h"
#include "svc_proto.h"
#include "svc_conn.h"

static struct {
	struct event_base *base;
	struct svc_config cfg;
	char dir[64];
	unsigned hellos, acks, ctl_msgs, closed;
	uint64_t last_ack;
	struct svc_conn *peer[4]; /* by hello order */
} t;

/* ------------------------------------------------------------ roles */

/* A hello counted, its peer kept by hello order. */
static void saw_hello(struct svc_conn *c)
{
	if (t.hellos < 4)
		t.peer[t.hellos] = c;
	t.hellos++;
}

static int on_hello(struct svc_conn *c, const void *msg)
{
	(void)msg;
	svc_conn_hello(c);
	saw_hello(c);
	return 0;
}

/* The test's runtime role speaks the client's messages; its hello makes
 * the peer a runtime (svc_conn_set_runtime), as svc_runtime.c's does. */
static int on_rt_hello(struct svc_conn *c, const void *msg)
{
	(void)msg;
	svc_conn_set_runtime(c, 0, "native");
	saw_hello(c);
	return 0;
}

static int on_ack(struct svc_conn *c, const void *msg)
{
	(void)c;
	t.last_ack = ((const Pd__ClientMsg *)msg)->ack->result_id;
	t.acks++;
	return 0;
}

static void on_closed(struct svc_conn *c)
{
	(void)c;
	t.closed++;
}

static const struct svc_conn_handler client_handlers[] = {
	{ PD__CLIENT_MSG__MSG_HELLO, false, on_hello },
	{ PD__CLIENT_MSG__MSG_ACK, true, on_ack },
};

static const struct svc_conn_role_ops client_ops = {
	.max_in = 16384,
	.max_out = 16384,
	.decode = svc_proto_client,
	.handlers = client_handlers,
	.nhandlers = 2,
	.closed = on_closed,
};

static const struct svc_conn_handler rt_handlers[] = {
	{ PD__CLIENT_MSG__MSG_HELLO, false, on_rt_hello },
	{ PD__CLIENT_MSG__MSG_ACK, true, on_ack }, /* so the role has a hello */
};

static const struct svc_conn_role_ops rt_ops = {
	.max_in = 16384,
	.max_out = 16384,
	.decode = svc_proto_client,
	.handlers = rt_handlers,
	.nhandlers = 2,
	.closed = on_closed,
};

/* The control role answers every request with an empty reply. */
static int on_ctl(struct svc_conn *c, const void *msg)
{
	Pdctl__CtlReply rep = PDCTL__CTL_REPLY__INIT;
	(void)msg;
	t.ctl_msgs++;
	return svc_conn_send(c, &rep.base, -1);
}

static ProtobufCMessage *ctl_decode(const uint8_t *buf, size_t len, const char **why)
{
	Pdctl__CtlRequest *m = pdctl__ctl_request__unpack(NULL, len, buf);
	*why = m ? NULL : "undecodable";
	return m ? &m->base : NULL;
}

static const struct svc_conn_handler ctl_handlers[] = {
	{ SVC_CONN_ANY, false, on_ctl },
};

static const struct svc_conn_role_ops ctl_ops = {
	.max_in = 4096,
	.max_out = 65536,
	.decode = ctl_decode,
	.handlers = ctl_handlers,
	.nhandlers = 1,
	.closed = on_closed,
};

/* ------------------------------------------------------------ helpers */

static int setup(void **state)
{
	(void)state;
	memset(&t, 0, sizeof(t));
	snprintf(t.dir, sizeof(t.dir), "/tmp/test_conn.XXXXXX");
	assert_non_null(mkdtemp(t.dir));
	svc_config_defaults(&t.cfg);
	snprintf(t.cfg.client_socket, sizeof(t.cfg.client_socket), "%s/client.sock", t.dir);
	snprintf(t.cfg.runtime_socket, sizeof(t.cfg.runtime_socket), "%s/runtime.sock", t.dir);
	snprintf(t.cfg.control_socket, sizeof(t.cfg.control_socket), "%s/control.sock", t.dir);
	t.cfg.max_ctl_clients = 8;
	t.cfg.max_ctl_per_uid = 1;
	t.base = event_base_new();
	assert_non_null(t.base);
	assert_int_equal(svc_conn_init(t.base, &t.cfg), 0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	svc_conn_role_unregister(SVC_ROLE_CLIENT);
	svc_conn_role_unregister(SVC_ROLE_RUNTIME);
	svc_conn_role_unregister(SVC_ROLE_CONTROL);
	svc_conn_fini();
	event_base_free(t.base);
	svc_config_free(&t.cfg);
	rmdir(t.dir);
	return 0;
}

static int dial(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* Run the loop until *n reaches want; the loop has no timers of ours to
 * wait on, so a bounded number of rounds, not a clock, ends a failure. */
static void pump_until(const unsigned *n, unsigned want)
{
	for (int i = 0; i < 2000 && *n < want; i++) {
		event_base_loop(t.base, EVLOOP_NONBLOCK);
		if (*n < want)
			usleep(500);
	}
	/* One more round: drops are reaped on the next one. */
	event_base_loop(t.base, EVLOOP_NONBLOCK);
	assert_int_equal(*n, want);
}

/* The peer's end: 1 data waiting, 0 closed by the daemon, -1 neither yet. */
static int peer_state(int fd)
{
	char b[65536];
	for (int i = 0; i < 2000; i++) {
		ssize_t r = recv(fd, b, sizeof(b), MSG_DONTWAIT | MSG_PEEK);
		if (r > 0)
			return 1;
		if (r == 0)
			return 0;
		event_base_loop(t.base, EVLOOP_NONBLOCK);
		usleep(500);
	}
	return -1;
}

static void send_client(int fd, const Pd__ClientMsg *m)
{
	uint8_t buf[256];
	size_t n = pd__client_msg__pack(m, buf);
	assert_int_equal(send(fd, buf, n, 0), (ssize_t)n);
}

static void send_ack(int fd, uint64_t id)
{
	Pd__ClientMsg m = PD__CLIENT_MSG__INIT;
	Pd__Ack ack = PD__ACK__INIT;
	ack.result_id = id;
	m.msg_case = PD__CLIENT_MSG__MSG_ACK;
	m.ack = &ack;
	send_client(fd, &m);
}

static void send_hello(int fd)
{
	Pd__ClientMsg m = PD__CLIENT_MSG__INIT;
	Pd__ClientHello h = PD__CLIENT_HELLO__INIT;
	h.version = 1;
	m.msg_case = PD__CLIENT_MSG__MSG_HELLO;
	m.hello = &h;
	send_client(fd, &m);
}

static void send_status(int fd)
{
	uint8_t buf[64];
	Pdctl__CtlRequest rq = PDCTL__CTL_REQUEST__INIT;
	rq.version = 1;
	rq.cmd_case = PDCTL__CTL_REQUEST__CMD_STATUS;
	rq.status = 1;
	size_t n = pdctl__ctl_request__pack(&rq, buf);
	assert_int_equal(send(fd, buf, n, 0), (ssize_t)n);
}

/* ------------------------------------------------------------ tests */

static void test_dispatch_by_case(void **state)
{
	(void)state;
	assert_int_equal(svc_conn_role_register(SVC_ROLE_CLIENT, &client_ops), 0);
	int fd = dial(t.cfg.client_socket);
	send_hello(fd);
	send_ack(fd, 42);
	pump_until(&t.acks, 1);
	assert_int_equal(t.hellos, 1);
	assert_int_equal(t.last_ack, 42);
	assert_int_equal(t.closed, 0);
	/* The peer goes: its role hears of it once. */
	close(fd);
	pump_until(&t.closed, 1);
}

static void test_before_hello_closes(void **state)
{
	(void)state;
	assert_int_equal(svc_conn_role_register(SVC_ROLE_CLIENT, &client_ops), 0);
	int fd = dial(t.cfg.client_socket);
	send_ack(fd, 7);
	assert_int_equal(peer_state(fd), 0);
	assert_int_equal(t.acks, 0);
	/* Never accepted by its role (no hello): no closed op. */
	assert_int_equal(t.closed, 0);
	close(fd);
}

static void test_control_cap_and_reply(void **state)
{
	(void)state;
	assert_int_equal(svc_conn_role_register(SVC_ROLE_CONTROL, &ctl_ops), 0);
	int a = dial(t.cfg.control_socket);
	send_status(a);
	pump_until(&t.ctl_msgs, 1);
	assert_int_equal(peer_state(a), 1); /* the reply came */
	/* max_control_per_uid = 1: a second one of this uid is closed at accept. */
	int b = dial(t.cfg.control_socket);
	assert_int_equal(peer_state(b), 0);
	close(b);
	/* Control peers are accepted at once (no hello): closed runs for a. */
	close(a);
	pump_until(&t.closed, 1);
}

static void test_unregistered_role_refused(void **state)
{
	(void)state;
	int fd = dial(t.cfg.runtime_socket);
	assert_int_equal(peer_state(fd), 0);
	close(fd);
	assert_int_equal(svc_conn_role_register(SVC_ROLE_RUNTIME, NULL), -EINVAL);
}

/*
 * The lookups kept in tables (svc_conn.c): by id, the runtime by pid, and
 * the uid's listener, whose count must follow the flag and the peer's end.
 */
static void test_lookups(void **state)
{
	(void)state;
	assert_int_equal(svc_conn_role_register(SVC_ROLE_CLIENT, &client_ops), 0);
	assert_int_equal(svc_conn_role_register(SVC_ROLE_RUNTIME, &rt_ops), 0);
	int a = dial(t.cfg.client_socket);
	send_hello(a);
	pump_until(&t.hellos, 1);
	int b = dial(t.cfg.client_socket);
	send_hello(b);
	pump_until(&t.hellos, 2);
	struct svc_conn *ca = t.peer[0], *cb = t.peer[1];
	uid_t uid = svc_conn_uid(ca);

	assert_ptr_equal(svc_conn_by_id(svc_conn_id(ca)), ca);
	assert_ptr_equal(svc_conn_by_id(svc_conn_id(cb)), cb);
	assert_null(svc_conn_by_id(svc_conn_id(cb) + 256)); /* same bucket, no peer */
	/* No runtime yet: clients of the pid are not one. */
	assert_null(svc_conn_runtime_for(getpid()));
	assert_null(svc_conn_listener_for(uid));
	svc_conn_set_listener(cb, true);
	svc_conn_set_listener(cb, true); /* counted once */
	assert_ptr_equal(svc_conn_listener_for(uid), cb);
	assert_null(svc_conn_listener_for(uid + 1));
	svc_conn_set_listener(cb, false);
	assert_null(svc_conn_listener_for(uid));
	svc_conn_set_listener(cb, true);
	svc_conn_set_listener(ca, true);
	/* A listener that goes leaves the other one found. */
	close(b);
	pump_until(&t.closed, 1);
	assert_null(svc_conn_by_id(svc_conn_id(ca) + 1));
	assert_ptr_equal(svc_conn_listener_for(uid), ca);
	svc_conn_set_listener(ca, false);
	assert_null(svc_conn_listener_for(uid));

	/* A runtime: found by this process's pid once it said hello, not after. */
	int r = dial(t.cfg.runtime_socket);
	pump_until(&t.hellos, 2); /* accepted, no hello yet */
	assert_null(svc_conn_runtime_for(getpid()));
	send_hello(r);
	pump_until(&t.hellos, 3);
	struct svc_conn *cr = t.peer[2];
	assert_ptr_equal(svc_conn_runtime_for(getpid()), cr);
	assert_ptr_equal(svc_conn_by_id(svc_conn_id(cr)), cr);
	assert_null(svc_conn_runtime_for(getpid() + 256));
	close(r);
	pump_until(&t.closed, 2);
	assert_null(svc_conn_runtime_for(getpid()));
	close(a);
	pump_until(&t.closed, 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_dispatch_by_case, setup, teardown),
		cmocka_unit_test_setup_teardown(test_before_hello_closes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_control_cap_and_reply, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unregistered_role_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lookups, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

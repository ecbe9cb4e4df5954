/*
 * flood_connect CLIENT_SOCK SECONDS FLOODERS: while one uid floods the
 * daemon, how long does another uid wait?
 *
 * As root: FLOODERS processes under uid FLOOD_UID each hold a client
 * connection and send requests of an unknown type (refused at once) as
 * fast as the daemon answers, 8 in flight. Meanwhile one process under
 * uid PROBE_UID repeats: connect, ClientHello, wait for the Welcome, a
 * request the daemon refuses, wait for its RequestReply, close. Each
 * round trip is timed; first SECONDS without the flood (baseline), then
 * SECONDS with it. Prints p50/p99/max per phase beside the goal (p99 under
 * 5 ms) and the flooders' request rate. Asserts nothing.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "profilingd.pb-c.h"
#include "util.h"
#include "wire.h"

#define FLOOD_UID 40100
#define PROBE_UID 40101
#define MAX_SAMPLES 100000

static const char *path;

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static int connect_to(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	util_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		return s;
	int r = -errno;
	close(s);
	return r;
}

static int recv_ms(int s, int ms)
{
	uint8_t buf[WIRE_CLIENT_MAX_MSG];
	struct pollfd pf = { .fd = s, .events = POLLIN };
	if (poll(&pf, 1, ms) <= 0)
		return -ETIMEDOUT;
	ssize_t n = wire_recv(s, buf, sizeof(buf), NULL);
	return n > 0 ? 0 : n == 0 ? -EPIPE : (int)n;
}

static int hello(int s)
{
	Pd__ClientMsg m = PD__CLIENT_MSG__INIT;
	Pd__ClientHello h = PD__CLIENT_HELLO__INIT;
	m.msg_case = PD__CLIENT_MSG__MSG_HELLO;
	m.hello = &h;
	return wire_send_msg(s, &m.base, WIRE_CLIENT_MAX_MSG, -1);
}

/* A request of an unknown type: refused synchronously, nothing charged. */
static int refused_request(int s, uint64_t token)
{
	Pd__ClientMsg m = PD__CLIENT_MSG__INIT;
	Pd__Request rq = PD__REQUEST__INIT;
	rq.token = token;
	rq.type = 99;
	rq.tag = "flood";
	m.msg_case = PD__CLIENT_MSG__MSG_REQUEST;
	m.request = &rq;
	return wire_send_msg(s, &m.base, WIRE_CLIENT_MAX_MSG, -1);
}

static int as_uid(uid_t uid)
{
	return setresgid(uid, uid, uid) == 0 && setresuid(uid, uid, uid) == 0 ? 0 : -errno;
}

static void flooder(int seconds, int report)
{
	uint64_t end = now_us() + (uint64_t)seconds * 1000000u, sent = 0;
	int s = -1;
	while (now_us() < end) {
		if (s < 0) {
			if ((s = connect_to()) < 0 || hello(s) < 0 || recv_ms(s, 1000) < 0) {
				if (s >= 0)
					close(s);
				s = -1;
				usleep(1000);
				continue;
			}
		}
		for (int i = 0; i < 8; i++)
			if (refused_request(s, sent + 1) == 0)
				sent++;
		for (int i = 0; i < 8; i++)
			if (recv_ms(s, 1000) < 0) {
				close(s);
				s = -1;
				break;
			}
	}
	ssize_t w = write(report, &sent, sizeof(sent));
	(void)w;
	_exit(0);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The probe: round trips for seconds; prints one line, writes p99 (us) to out. */
/*
 * The probe: round trips for seconds; prints one line, writes p50, p99 and
 * max (us) to out. Each round trip is also split into its three waits
 * (connect returns, the Welcome arrives, the refusal arrives) so that a
 * slow p99 shows which step it sat in.
 */
enum { PH_CONNECT, PH_WELCOME, PH_REPLY, PH_N };
static const char *const phase_name[PH_N] = { "connect", "welcome", "reply" };

static uint64_t pct(uint64_t *v, size_t n, unsigned p)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(v[0]), cmp_u64);
	return p >= 100 ? v[n - 1] : v[n * p / 100];
}

static void probe(const char *phase, int seconds, int out)
{
	static uint64_t lat[MAX_SAMPLES], ph[PH_N][MAX_SAMPLES];
	size_t n = 0;
	unsigned failed = 0;
	uint64_t end = now_us() + (uint64_t)seconds * 1000000u;
	while (now_us() < end && n < MAX_SAMPLES) {
		uint64_t t[PH_N + 1];
		t[0] = now_us();
		int s = connect_to();
		t[1] = now_us();
		int ok = s >= 0 && hello(s) == 0 && recv_ms(s, 5000) == 0;
		t[2] = now_us();
		ok = ok && refused_request(s, n + 1) == 0 && recv_ms(s, 5000) == 0;
		t[3] = now_us();
		if (s >= 0)
			close(s);
		if (ok) {
			for (int i = 0; i < PH_N; i++)
				ph[i][n] = t[i + 1] - t[i];
			lat[n++] = t[3] - t[0];
		} else {
			failed++;
		}
		usleep(5000);
	}
	uint64_t p50 = pct(lat, n, 50), p99 = pct(lat, n, 99), max = pct(lat, n, 100);
	printf("  %-9s connect+hello+refused request: %zu round trips, %u failed; "
	       "p50 %.2f ms  p99 %.2f ms  max %.2f ms  (goal: p99 < 5 ms)\n", phase, n, failed,
	       p50 / 1000.0, p99 / 1000.0, max / 1000.0);
	for (int i = 0; i < PH_N; i++) {
		uint64_t a = pct(ph[i], n, 50), b = pct(ph[i], n, 99), c = pct(ph[i], n, 100);
		printf("  %-9s   %-8s p50 %.2f ms  p99 %.2f ms  max %.2f ms\n", "", phase_name[i],
		       a / 1000.0, b / 1000.0, c / 1000.0);
	}
	fflush(stdout);
	uint64_t res[3] = { p50, p99, max };
	ssize_t w = write(out, res, sizeof(res));
	(void)w;
}

static pid_t fork_probe(const char *phase, int seconds, int out)
{
	pid_t p = fork();
	if (p == 0) {
		if (as_uid(PROBE_UID) < 0)
			_exit(1);
		probe(phase, seconds, out);
		_exit(0);
	}
	return p;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: flood_connect CLIENT_SOCK SECONDS FLOODERS (as root)\n");
		return 2;
	}
	path = argv[1];
	int seconds = atoi(argv[2]), nflood = atoi(argv[3]);
	int rep[2], res[2];
	uint64_t base[3] = { 0 }, flood[3] = { 0 };
	if (seconds <= 0 || nflood <= 0 || pipe(rep) < 0 || pipe(res) < 0)
		return 2;

	waitpid(fork_probe("baseline", seconds, res[1]), NULL, 0);
	if (read(res[0], base, sizeof(base)) != sizeof(base))
		return 1;
	for (int i = 0; i < nflood; i++) {
		if (fork() == 0) {
			if (as_uid(FLOOD_UID) < 0)
				_exit(1);
			flooder(seconds + 1, rep[1]);
		}
	}
	usleep(500000); /* the flood is on */
	waitpid(fork_probe("flooded", seconds, res[1]), NULL, 0);
	if (read(res[0], flood, sizeof(flood)) != sizeof(flood))
		return 1;
	close(rep[1]);
	uint64_t total = 0, n;
	while (read(rep[0], &n, sizeof(n)) == sizeof(n))
		total += n;
	while (wait(NULL) > 0)
		;
	printf("  flood: %d connections of uid %d sent %llu refused requests in %d s (%.0f/s)\n",
	       nflood, FLOOD_UID, (unsigned long long)total, seconds + 1,
	       (double)total / (seconds + 1));
	printf("RESULT p50_us %llu p99_us %llu max_us %llu base_p99_us %llu rate %.0f\n",
	       (unsigned long long)flood[0], (unsigned long long)flood[1],
	       (unsigned long long)flood[2], (unsigned long long)base[1],
	       (double)total / (seconds + 1));
	return 0;
}

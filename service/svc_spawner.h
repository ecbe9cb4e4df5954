/*
 * svc_spawner: the privileged, unfiltered side of the spawner (privsep),
 * and the wire both sides speak. The daemon forks it during init
 * (svc_spawn.h is the daemon's side); it then starts helpers from the
 * fixed table it was forked with and reports their exits.
 *
 * Caps: SVC_SPAWN_HELPERS_MAX table entries; requests carry at most
 * SVC_SPAWN_ARGS_MAX arguments of at most SVC_SPAWN_ARG_LEN_MAX bytes in a
 * packet of at most SVC_SPAWN_MSG_MAX; at most SVC_SPAWN_CHILDREN_MAX
 * helpers run at once (past it a spawn is refused with -EAGAIN). A packet
 * carries at most SVC_SPAWN_FDS_MAX fds. docs/SANDBOX.md has the protocol.
 */
#ifndef PD_SVC_SPAWNER_H
#define PD_SVC_SPAWNER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SVC_SPAWN_HELPERS_MAX 8
#define SVC_SPAWN_ARGS_MAX 128
#define SVC_SPAWN_ARG_LEN_MAX 16384
#define SVC_SPAWN_MSG_MAX 65536
#define SVC_SPAWN_CHILDREN_MAX 256
#define SVC_SPAWN_FDS_MAX 4
#define SVC_SPAWN_HDR_LEN 32 /* a fixed-size message (KILL, REPLY, EXITED) */
#define SVC_SPAWN_F_REDACT 1u /* drop to the redact user, rlimits, no_new_privs */
#define SVC_SPAWN_F_STDIN  2u /* an input fd comes first (else /dev/null) */
#define SVC_SPAWN_F_FD3    4u /* one more fd comes last: the helper's fd 3 */

enum svc_spawn_type { SVC_SPAWN_REQ = 1, SVC_SPAWN_KILL, SVC_SPAWN_REPLY, SVC_SPAWN_EXITED };

struct svc_spawn_msg {
	uint32_t type;
	uint64_t id;      /* the daemon's handle for the helper */
	uint32_t helper;  /* REQ: index into the spawner's table */
	uint32_t flags;   /* REQ: SVC_SPAWN_F_* */
	int32_t value;    /* REPLY: pid or -errno; EXITED: wait status */
	uint32_t argc;
	const char *argv[SVC_SPAWN_ARGS_MAX + 1];
};

/* What the spawner is forked with; it never takes a path from the daemon. */
struct svc_spawn_setup {
	const char *helpers[SVC_SPAWN_HELPERS_MAX]; /* index -> path; NULL or "" = none */
	unsigned nhelpers;
	bool drop_privs;        /* F_REDACT helpers run as uid/gid */
	uid_t uid;
	gid_t gid;
	uint64_t redact_as_bytes;
	uint64_t redact_cpu_s;
};

/* Wire codec of the spawner's socketpairs. 0, -E2BIG (encode), -EBADMSG
 * (decode: anything but a well-formed message; argv point into buf). */
int svc_spawn_encode(const struct svc_spawn_msg *m, uint8_t *buf, size_t cap, size_t *len);
int svc_spawn_decode(const uint8_t *buf, size_t len, struct svc_spawn_msg *m);
/*
 * One packet with up to maxfds fds (close-on-exec). Returns its length,
 * 0 at EOF or -errno; more fds than maxfds, or a truncated packet or fd
 * list, gives -EMSGSIZE with every received fd closed.
 */
ssize_t svc_spawner_recv(int sock, uint8_t *buf, size_t cap, int *fds, int maxfds, int *nfds,
			 int flags);
/* One packet with nfds (<= SVC_SPAWN_FDS_MAX) fds. 0 or -errno. */
int svc_spawner_send(int sock, const uint8_t *buf, size_t len, const int *fds, int nfds);
/* A fixed-size message (KILL, REPLY, EXITED). 0 or -errno. */
int svc_spawner_send_short(int sock, uint32_t type, uint64_t id, int32_t value);

/* The spawner's loop on its two sockets; returns at EOF (helpers killed). */
int svc_spawner_serve(int req_fd, int evt_fd, const struct svc_spawn_setup *s);
/*
 * The forked spawner's whole life: keep only req and evt (as fds 3 and 4),
 * die with parent, no dumps, the bounding set cut to what helpers need,
 * then serve. Never returns.
 */
void svc_spawner_main(int req, int evt, pid_t parent, const struct svc_spawn_setup *s)
	__attribute__((noreturn));

#endif

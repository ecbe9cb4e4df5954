/*
 * svc_spawn: the daemon's side of the spawner (svc_spawner.h). It forks
 * the spawner before the sandbox goes on, asks it to start or kill
 * helpers, and turns its exit reports into callbacks in the event loop.
 * A spawner that dies or breaks the protocol stops the daemon (non-zero
 * exit): no helper could start any more.
 */
#ifndef PD_SVC_SPAWN_H
#define PD_SVC_SPAWN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "svc_spawner.h"

struct event_base;

typedef void (*svc_spawn_exit_fn)(uint64_t id, int status);
/* Fork the spawner (before the sandbox). fn gets every helper's exit. */
int svc_spawn_init(struct event_base *base, const struct svc_spawn_setup *s, svc_spawn_exit_fn fn);
/* Close its sockets (it kills its helpers at EOF) and reap it. */
void svc_spawn_fini(void);
/*
 * Start helper with argv and fds (in_fd < 0: /dev/null; fd3 < 0: none, else
 * the helper's fd 3, e.g. the redactor's kernel stream). 0 and *pid, or -errno.
 */
int svc_spawn_start(unsigned helper, char *const argv[], int in_fd, int out_fd, int err_fd,
		    int fd3, uint32_t flags, uint64_t id, pid_t *pid);
/* SIGKILL helper id; its exit is reported as usual. */
int svc_spawn_kill(uint64_t id);
/* The spawner died or broke its protocol: the daemon stops (non-zero exit). */
bool svc_spawn_lost(void);

#endif

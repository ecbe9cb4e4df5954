/*
 * svc_ctl_view: the read-only answers of control.sock, private to the
 * control role (svc_ctl.c): status, apps, triggers, ratelimit, results,
 * show and open. Each shows a uid other than root only what is its own;
 * an app filter naming another uid's app is refused (PROF_E_PERMISSION).
 * Replies are cut to CTL_MAX_REPLY (lists halved until they fit, with
 * truncated set); results at most 200, apps at most 512.
 */
#ifndef PD_SVC_CTL_VIEW_H
#define PD_SVC_CTL_VIEW_H

#include "control.pb-c.h"

struct svc_conn;

/* Start the uptime clock (svc_ctl_init). */
void svc_ctl_view_init(void);
/* Answer m (any command but request). 0 or -errno of the send; -EINVAL
 * for a command that is not a view. */
int svc_ctl_view(struct svc_conn *c, const Pdctl__CtlRequest *m);
/* Send a reply (with fd, -1: none) or an error reply to a control peer. */
int svc_ctl_send(struct svc_conn *c, const Pdctl__CtlReply *m, int fd);
int svc_ctl_error(struct svc_conn *c, int error, const char *msg);

#endif

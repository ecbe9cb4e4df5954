/*
 * svc_jvm: which processes are HotSpot JVMs, and which program they run.
 *
 * Contract: reads /proc (the process's exe, ids, cmdline, and its
 * hsperfdata file through /proc/<pid>/root) and the user database (the
 * hsperfdata directory's name); keeps no state. A process that is gone
 * reads as not a JVM.
 */
#ifndef PD_SVC_JVM_H
#define PD_SVC_JVM_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* pid runs a HotSpot JVM (a java launcher, or its hsperfdata file exists). */
bool svc_jvm_detect(pid_t pid);
/* The JVM's main class, -jar file or -m module/class. 0 or -errno. */
int svc_jvm_main(pid_t pid, char *out, size_t n);
/* main is want, or a jar path whose file name is want. */
bool svc_jvm_main_matches(const char *main, const char *want);

#endif

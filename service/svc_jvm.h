/*
 * svc_jvm: which processes are HotSpot JVMs, and which program they run.
 *
 * Contract: reads /proc (the process's exe, ids, cmdline, and its
 * hsperfdata file through /proc/<pid>/root) and the user database (the
 * hsperfdata directory's name). A process that is gone reads as not a JVM.
 *
 * svc_jvm_detect() is on every session's and trigger fire's path, so it
 * keeps two bounded caches (issue #18; each a fixed table, nothing a peer
 * can grow):
 *   - the answer per process: SVC_JVM_SLOTS slots, one per pid modulo
 *     the table size, keyed by (pid, start time, the executable's device
 *     and inode). A pid reused by a new process has another start time,
 *     and an exec another executable: neither inherits the answer. An
 *     answer from the executable's name ("java") holds while that key
 *     does; one from the perf-data file (present or not) at most
 *     SVC_JVM_PERF_TTL_MS, since an embedded VM creates that file when it
 *     starts and removes it when it ends. At the cap: a new process takes
 *     its slot from whichever process had it (that one is looked at again).
 *   - the user name per uid (the hsperfdata directory's name, and "no
 *     such user" too): SVC_JVM_USERS slots, one per uid modulo the table
 *     size, each at most SVC_JVM_USER_TTL_S old, and all forgotten by
 *     svc_jvm_forget() (SIGHUP), since a uid's name can change. At the
 *     cap: a uid takes its slot from the uid that had it.
 * One status read (/proc/<pid>/status) per look: the real uid and the
 * innermost pid (NSpid) come from the same read.
 *
 * How an exec is noticed (issue #18: the stat of /proc/<pid>/exe was 2.5 us
 * of every decision). The process events (triggers/trg_proc, the netlink
 * proc connector) report every exec: svc_jvm_exec() drops that pid's
 * answer. While trg_proc_current() says every exec reported so far has
 * come here, a cached answer whose (pid, start) match is served as it is.
 * Otherwise (no connector, the /proc scan, an event waiting in the socket,
 * an overrun not read yet, a batch being handed out) the executable's
 * device and inode are compared as before: the stat stays the fallback.
 * An overrun or a cut datagram (svc_jvm_lost()) forgets every answer.
 * Every answer's device and inode are taken when it is made, so either
 * check can follow the other.
 */
#ifndef PD_SVC_JVM_H
#define PD_SVC_JVM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SVC_JVM_SLOTS 256
#define SVC_JVM_PERF_TTL_MS 1000
#define SVC_JVM_USERS 32
#define SVC_JVM_USER_TTL_S 60

/*
 * pid runs a HotSpot JVM (a java launcher, or its hsperfdata file exists).
 * start is the process's start time (svc_ident's, /proc/<pid>/stat field
 * 22), the cache's key; 0 looks without the cache.
 */
bool svc_jvm_detect(pid_t pid, uint64_t start);
/* Forget every cached answer and user name (SIGHUP). */
void svc_jvm_forget(void);
/* pid exec'd (a process event): forget its answer. */
void svc_jvm_exec(pid_t pid);
/* Process events were lost: forget every answer (not the user names). */
void svc_jvm_lost(void);
/* The JVM's main class, -jar file or -m module/class. 0 or -errno. */
int svc_jvm_main(pid_t pid, char *out, size_t n);
/* main is want, or a jar path whose file name is want. */
bool svc_jvm_main_matches(const char *main, const char *want);

#endif

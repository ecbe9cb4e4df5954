/*
 * Unit tests of profilingd-jattach's privileged step (runtime/jvm/
 * ja_stale.c), on the real /tmp with this process standing in for the
 * VM: its names are /tmp/.java_pid<getpid()> and .attach_pid<getpid()>,
 * which no VM has, and "another user's" files are chowned to FOREIGN.
 * Root only (chown); skipped otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <grp.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "ja.h"
#include "util.h"

#define FOREIGN 61997u

static char sock_path[64], trig_path[64], target_path[64], cover_path[64];
static uint64_t my_start;

/* A stream socket bound at path (listening if asked), owned by uid. */
static int bound(const char *path, bool listen_too, uid_t uid)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	util_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	assert_true(s >= 0);
	assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	if (listen_too)
		assert_int_equal(listen(s, 4), 0);
	assert_int_equal(lchown(path, uid, uid), 0);
	return s;
}

static void file_of(const char *path, uid_t uid)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(lchown(path, uid, uid), 0);
}

static bool exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

static int setup(void **state)
{
	(void)state;
	unlink(sock_path);
	rmdir(sock_path);
	unlink(trig_path);
	unlink(target_path);
	if (cover_path[0])
		unlink(cover_path);
	return 0;
}

static void test_nothing(void **state)
{
	struct ja_stale st;
	assert_int_equal(ja_clear_stale(getpid(), my_start, geteuid(), &st), 0);
	assert_int_equal(st.removed, 0);
	assert_int_equal(st.owner[0], (uid_t)-1);
	assert_int_equal(st.owner[1], (uid_t)-1);
	(void)state;
}

/* What a SIGKILLed VM of another user leaves, and another user's trigger. */
static void test_stale_removed(void **state)
{
	struct ja_stale st;
	close(bound(sock_path, false, FOREIGN));
	file_of(trig_path, FOREIGN);
	assert_int_equal(ja_clear_stale(getpid(), my_start, geteuid(), &st), 0);
	assert_int_equal(st.removed, JA_STALE_SOCKET | JA_STALE_TRIGGER);
	assert_int_equal(st.owner[0], FOREIGN);
	assert_int_equal(st.owner[1], FOREIGN);
	assert_false(exists(sock_path));
	assert_false(exists(trig_path));
	/* start 0: whatever the pid is now; the same outcome. */
	close(bound(sock_path, false, FOREIGN));
	assert_int_equal(ja_clear_stale(getpid(), 0, geteuid(), &st), 0);
	assert_int_equal(st.removed, JA_STALE_SOCKET);
	(void)state;
}

/* The VM's own user's names: the VM replaces them itself. */
static void test_own_left(void **state)
{
	struct ja_stale st;
	close(bound(sock_path, false, geteuid()));
	file_of(trig_path, geteuid());
	assert_int_equal(ja_clear_stale(getpid(), my_start, geteuid(), &st), 0);
	assert_int_equal(st.removed, 0);
	assert_int_equal(st.owner[0], geteuid());
	assert_true(exists(sock_path));
	assert_true(exists(trig_path));
	(void)state;
}

/* Another user's live listener: left, reported, and sent nothing. */
static void test_live_left(void **state)
{
	struct ja_stale st;
	char b[8];
	int l = bound(sock_path, true, FOREIGN);
	file_of(trig_path, FOREIGN);
	assert_int_equal(ja_clear_stale(getpid(), my_start, geteuid(), &st), -EADDRINUSE);
	assert_int_equal(st.owner[0], FOREIGN);
	assert_true(exists(sock_path));
	/* The trigger goes even so, and says so. */
	assert_int_equal(st.removed, JA_STALE_TRIGGER);
	assert_false(exists(trig_path));
	int c = accept(l, NULL, NULL);
	assert_true(c >= 0); /* the probe */
	assert_int_equal(read(c, b, sizeof(b)), 0);
	close(c);
	close(l);
	(void)state;
}

static void test_directory_left(void **state)
{
	struct ja_stale st;
	assert_int_equal(mkdir(sock_path, 0700), 0);
	assert_int_equal(lchown(sock_path, FOREIGN, FOREIGN), 0);
	assert_int_equal(ja_clear_stale(getpid(), my_start, geteuid(), &st), -EADDRINUSE);
	assert_true(exists(sock_path));
	(void)state;
}

/* A link at the name is removed as a link: its target is neither
 * connected to nor touched. */
static void test_link_not_followed(void **state)
{
	struct ja_stale st;
	int l = bound(target_path, true, FOREIGN);
	assert_int_equal(symlink(target_path, sock_path), 0);
	assert_int_equal(lchown(sock_path, FOREIGN, FOREIGN), 0);
	assert_int_equal(ja_clear_stale(getpid(), my_start, geteuid(), &st), 0);
	assert_int_equal(st.removed, JA_STALE_SOCKET);
	assert_false(exists(sock_path));
	assert_true(exists(target_path));
	assert_int_equal(accept(l, NULL, NULL), -1);
	assert_int_equal(errno, EAGAIN);
	close(l);
	(void)state;
}

/* Not the admitted process, or not the uid the caller read: nothing done. */
static void test_other_process(void **state)
{
	struct ja_stale st;
	close(bound(sock_path, false, FOREIGN));
	assert_int_equal(ja_clear_stale(getpid(), my_start + 1, geteuid(), &st), -ESRCH);
	assert_true(exists(sock_path));
	assert_int_equal(ja_clear_stale(getpid(), my_start, geteuid() + 1, &st), -ESRCH);
	assert_true(exists(sock_path));
	assert_int_equal(st.removed, 0);
	(void)state;
}

/*
 * A /tmp that is not sticky: the VM could replace the names itself, so
 * root leaves them. In a child with a mount namespace of its own and a
 * tmpfs of mode 0777 on /tmp.
 */
static void test_not_sticky(void **state)
{
	pid_t c = fork();
	assert_true(c >= 0);
	if (c == 0) {
		struct ja_stale st;
		if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
		    mount("tmpfs", "/tmp", "tmpfs", 0, "mode=0777,size=1m") < 0)
			_exit(77);
		char p[64];
		snprintf(p, sizeof(p), "/tmp/.java_pid%d", (int)getpid());
		int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0 || fchown(fd, FOREIGN, FOREIGN) < 0)
			_exit(3);
		close(fd);
		int r = ja_clear_stale(getpid(), 0, geteuid(), &st);
		_exit(r == 0 && st.removed == 0 && access(p, F_OK) == 0 ? 0 : 1);
	}
	int ws;
	assert_int_equal(waitpid(c, &ws, 0), c);
	assert_true(WIFEXITED(ws));
	if (WEXITSTATUS(ws) == 77)
		skip();
	assert_int_equal(WEXITSTATUS(ws), 0);
	(void)state;
}

/*
 * A stand-in VM in a child: prep() runs there (new namespaces, mounts),
 * names the pid to act on, and the child then waits until the parent
 * closes *release. Returns that pid, or 0 when prep could not run here.
 */
typedef pid_t (*prep_fn)(int release_rd);

static pid_t standin(prep_fn prep, int *release, pid_t *child)
{
	int ready[2], rel[2];
	pid_t who = 0;
	assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
	assert_int_equal(pipe2(rel, O_CLOEXEC), 0);
	*child = fork();
	assert_true(*child >= 0);
	if (*child == 0) {
		char b;
		close(ready[0]);
		close(rel[1]);
		pid_t p = prep(rel[0]);
		if (write(ready[1], &p, sizeof(p)) != (ssize_t)sizeof(p))
			_exit(2);
		close(ready[1]);
		while (read(rel[0], &b, 1) > 0)
			;
		_exit(0);
	}
	close(ready[1]);
	close(rel[0]);
	assert_int_equal(read(ready[0], &who, sizeof(who)), (ssize_t)sizeof(who));
	close(ready[0]);
	*release = rel[1];
	return who;
}

static void standin_end(int release, pid_t child)
{
	int ws;
	close(release);
	assert_int_equal(waitpid(child, &ws, 0), child);
}

/* Another user's stale socket at the name, a file of FOREIGN + 1 mounted
 * on it in the stand-in's own mount namespace. */
static pid_t prep_mount_on_name(int rel)
{
	char p[64];
	(void)rel;
	snprintf(p, sizeof(p), "/tmp/.java_pid%d", (int)getpid());
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return 0;
	close(bound(p, false, FOREIGN));
	file_of(cover_path, FOREIGN + 1);
	if (mount(cover_path, p, NULL, MS_BIND, NULL) < 0)
		return 0;
	return getpid();
}

/*
 * Runs prep in a stand-in whose name /tmp/.java_pid<child> prep made
 * another user's, and asks root to clear it: nothing may go.
 */
static void nothing_removed(prep_fn prep)
{
	struct ja_stale st = { 0 };
	char p[64];
	int rel, r = 0;
	pid_t child;
	pid_t who = standin(prep, &rel, &child);
	snprintf(p, sizeof(p), "/tmp/.java_pid%d", (int)child);
	if (who)
		r = ja_clear_stale(who, 0, geteuid(), &st);
	bool there = exists(p);
	standin_end(rel, child);
	unlink(p);
	if (!who)
		skip();
	assert_int_equal(r, 0);
	assert_int_equal(st.removed, 0);
	assert_true(there);
}

/*
 * What is mounted on the name is what root would check; the unlink would
 * remove what lies under it (here another user's socket, in the field a
 * live listener). Nothing may go.
 */
static void test_mount_on_name(void **state)
{
	snprintf(cover_path, sizeof(cover_path), "/tmp/pd-ja-stale-cover.%d", (int)getpid());
	nothing_removed(prep_mount_on_name);
	unlink(cover_path);
	(void)state;
}

/* Another user's stale socket, then a user namespace (and with it a mount
 * namespace) of the stand-in's own. */
static pid_t prep_userns(int rel)
{
	char p[64];
	(void)rel;
	snprintf(p, sizeof(p), "/tmp/.java_pid%d", (int)getpid());
	close(bound(p, false, FOREIGN));
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
		return 0;
	return getpid();
}

/* In a user namespace of its own an app can mount anything over its /tmp
 * or the names (a sticky /dev/shm, say): root leaves them alone. */
static void test_other_userns(void **state)
{
	nothing_removed(prep_userns);
	(void)state;
}

#define MANY_GROUPS 2000

/*
 * A process with 2,000 groups in a pid namespace of its own: its Groups:
 * line puts NSpid: past the first 4 KiB of its status. Another user's
 * stale socket has its host pid in the name. Returns the host pid of pid
 * 1 of the namespace, which waits for the release.
 */
static pid_t prep_groups_pidns(int rel)
{
	static gid_t g[MANY_GROUPS];
	char p[64], b;
	for (int i = 0; i < MANY_GROUPS; i++)
		g[i] = 100000 + (gid_t)i;
	if (setgroups(MANY_GROUPS, g) < 0 || unshare(CLONE_NEWPID) < 0)
		return 0;
	pid_t gc = fork();
	if (gc < 0)
		return 0;
	if (gc == 0) {
		while (read(rel, &b, 1) > 0)
			;
		_exit(0);
	}
	snprintf(p, sizeof(p), "/tmp/.java_pid%d", (int)gc);
	close(bound(p, false, FOREIGN));
	return gc;
}

static void test_nspid_past_first_page(void **state)
{
	struct ja_stale st;
	char p[64], line[64];
	int rel;
	pid_t child, nspid = 0;
	pid_t who = standin(prep_groups_pidns, &rel, &child);
	if (!who) {
		standin_end(rel, child);
		skip();
	}
	snprintf(p, sizeof(p), "/tmp/.java_pid%d", (int)who);
	char status[4096];
	snprintf(line, sizeof(line), "/proc/%d/status", (int)who);
	/* The case is what it says: NSpid: is not in the first page. */
	bool past = util_read_file(line, status, sizeof(status)) > 0 && !strstr(status, "\nNSpid:");
	int rn = ja_nspid(who, &nspid);
	int rl = util_proc_status_line(who, "NSpid:", line, sizeof(line));
	int rx = util_proc_status_line(who, "NoSuchKey:", line, sizeof(line));
	char tiny[4];
	int ro = util_proc_status_line(who, "Groups:", tiny, sizeof(tiny));
	int r = ja_clear_stale(who, 0, geteuid(), &st);
	bool there = exists(p);
	standin_end(rel, child);
	unlink(p);
	assert_true(past);
	assert_int_equal(rn, 0);
	assert_int_equal(nspid, 1);
	assert_int_equal(rl, 0);
	assert_int_equal(rx, -ENOENT);
	assert_int_equal(ro, -EOVERFLOW);
	/* Its own pid namespace: nothing done, the other user's name stays. */
	assert_int_equal(r, 0);
	assert_int_equal(st.removed, 0);
	assert_true(there);
	(void)state;
}

int main(void)
{
	if (geteuid() != 0) {
		printf("skipped: ja_stale tests need root (chown to another uid)\n");
		return 77;
	}
	snprintf(sock_path, sizeof(sock_path), "/tmp/.java_pid%d", (int)getpid());
	snprintf(trig_path, sizeof(trig_path), "/tmp/.attach_pid%d", (int)getpid());
	snprintf(target_path, sizeof(target_path), "/tmp/pd-ja-stale-target.%d", (int)getpid());
	if (util_proc_start_time(getpid(), &my_start) < 0)
		return 1;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_nothing, setup, setup),
		cmocka_unit_test_setup_teardown(test_stale_removed, setup, setup),
		cmocka_unit_test_setup_teardown(test_own_left, setup, setup),
		cmocka_unit_test_setup_teardown(test_live_left, setup, setup),
		cmocka_unit_test_setup_teardown(test_directory_left, setup, setup),
		cmocka_unit_test_setup_teardown(test_link_not_followed, setup, setup),
		cmocka_unit_test_setup_teardown(test_other_process, setup, setup),
		cmocka_unit_test_setup_teardown(test_not_sticky, setup, setup),
		cmocka_unit_test_setup_teardown(test_mount_on_name, setup, setup),
		cmocka_unit_test_setup_teardown(test_other_userns, setup, setup),
		cmocka_unit_test_setup_teardown(test_nspid_past_first_page, setup, setup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

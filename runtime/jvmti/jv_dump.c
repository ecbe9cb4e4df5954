/*
 * Heap dumps from inside the VM: HotSpotDiagnosticMXBean.dumpHeap through
 * JNI, into a private directory in /tmp, then copied into the daemon's fd.
 * The daemon prefers its attach path (GC.heap_dump, which also works when
 * the heap is full: this one allocates Java objects and can fail with an
 * OutOfMemoryError of its own); [jvm] heap_dump_via = agent selects this
 * one (docs/JVMTI.md).
 */
#include "jv.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

/* The pending exception's toString() into err, and clear it. */
static void take_exception(JNIEnv *jni, char *err, size_t n)
{
	jthrowable ex = (*jni)->ExceptionOccurred(jni);
	(*jni)->ExceptionClear(jni);
	util_strlcpy(err, "Java exception", n);
	if (!ex)
		return;
	jclass c = (*jni)->GetObjectClass(jni, ex);
	jmethodID ts = c ? (*jni)->GetMethodID(jni, c, "toString", "()Ljava/lang/String;") : NULL;
	jstring s = ts ? (jstring)(*jni)->CallObjectMethod(jni, ex, ts) : NULL;
	if ((*jni)->ExceptionCheck(jni))
		(*jni)->ExceptionClear(jni);
	const char *u = s ? (*jni)->GetStringUTFChars(jni, s, NULL) : NULL;
	if (u) {
		util_strlcpy(err, u, n);
		(*jni)->ReleaseStringUTFChars(jni, s, u);
	}
}

static int call_dump(JNIEnv *jni, const char *path, char *err, size_t n)
{
	int r = -EIO;
	if ((*jni)->PushLocalFrame(jni, 16) < 0) {
		take_exception(jni, err, n);
		return -ENOMEM;
	}
	jclass mf = (*jni)->FindClass(jni, "java/lang/management/ManagementFactory");
	jclass hsd = mf ? (*jni)->FindClass(jni, "com/sun/management/HotSpotDiagnosticMXBean") : NULL;
	jmethodID get = hsd ? (*jni)->GetStaticMethodID(jni, mf, "getPlatformMXBean",
		"(Ljava/lang/Class;)Ljava/lang/management/PlatformManagedObject;") : NULL;
	jobject bean = get ? (*jni)->CallStaticObjectMethod(jni, mf, get, hsd) : NULL;
	jmethodID dump = bean ? (*jni)->GetMethodID(jni, hsd, "dumpHeap", "(Ljava/lang/String;Z)V")
			      : NULL;
	jstring jpath = dump ? (*jni)->NewStringUTF(jni, path) : NULL;
	if (jpath) {
		/* live = true: like GC.heap_dump, only reachable objects. */
		(*jni)->CallVoidMethod(jni, bean, dump, jpath, JNI_TRUE);
		if (!(*jni)->ExceptionCheck(jni))
			r = 0;
	}
	if (r < 0) {
		if ((*jni)->ExceptionCheck(jni))
			take_exception(jni, err, n);
		else
			util_strlcpy(err, "HotSpotDiagnosticMXBean is not available", n);
	}
	(*jni)->PopLocalFrame(jni, NULL);
	return r;
}

int jvd_heap_dump(JNIEnv *jni, int fd, uint64_t *bytes, char *err, size_t n)
{
	char dir[] = "/tmp/profilingd-agent-XXXXXX", path[sizeof(dir) + 16];
	*bytes = 0;
	if (!mkdtemp(dir)) {
		util_fmt(err, n, "cannot create a dump directory in /tmp: %s", strerror(errno));
		return -errno;
	}
	util_fmt(path, sizeof(path), "%s/heap.hprof", dir);
	int r = call_dump(jni, path, err, n);
	int in = r == 0 ? open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) : -1;
	if (r == 0 && in < 0) {
		r = -errno;
		util_fmt(err, n, "cannot open the dump: %s", strerror(errno));
	}
	while (in >= 0) {
		ssize_t k = copy_file_range(in, NULL, fd, NULL, 1 << 30, 0);
		if (k < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS)) {
			char buf[1 << 16];
			k = read(in, buf, sizeof(buf));
			if (k > 0 && util_write_all(fd, buf, (size_t)k) < 0)
				k = -1;
		}
		if (k < 0) {
			r = -errno;
			util_fmt(err, n, "copying the dump: %s", strerror(errno));
			break;
		}
		if (k == 0)
			break;
		*bytes += (uint64_t)k;
	}
	if (in >= 0)
		close(in);
	unlink(path);
	rmdir(dir);
	return r;
}

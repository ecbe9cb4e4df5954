/*
 * The native half of tests/java/JniMixed.java: nativeWork() alternates a
 * C loop (pd_native_spin, exported and never inlined, so the profile can
 * name it through the dynamic symbol table) and a call back into Java.
 */
#include <jni.h>
#include <stdint.h>

uint64_t pd_native_spin(uint64_t x);
JNIEXPORT jlong JNICALL Java_JniMixed_nativeWork(JNIEnv *env, jclass cls, jlong x, jint rounds);

__attribute__((noinline, visibility("default"))) uint64_t pd_native_spin(uint64_t x)
{
	for (int i = 0; i < 400000; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		__asm__ volatile("" : "+r"(x)); /* keep the loop a loop */
	}
	return x;
}

JNIEXPORT jlong JNICALL Java_JniMixed_nativeWork(JNIEnv *env, jclass cls, jlong x, jint rounds)
{
	jmethodID cb = (*env)->GetStaticMethodID(env, cls, "javaCallback", "(J)J");
	if (!cb)
		return x;
	for (jint i = 0; i < rounds; i++) {
		x = (jlong)pd_native_spin((uint64_t)x);
		x = (*env)->CallStaticLongMethod(env, cls, cb, x);
		if ((*env)->ExceptionCheck(env))
			return x;
	}
	return x;
}

/*
 * bench/jvm_method_events' peer: the naive way to see a method's calls,
 * JVMTI MethodEntry events. Once can_generate_method_entry_events is held
 * and the event is on, HotSpot runs every thread interpreted and posts an
 * event at every method entry; this agent counts those of one method.
 *   -agentpath:libpd_method_entry.so=CLASS.METHOD   (CLASS in internal form)
 * It prints "method_entry hits=N" at VM death. A benchmark's tool: never
 * part of profilingd.
 */
#include <jvmti.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

static char want_cls[256], want_name[128];
static jmethodID target;
static _Atomic long hits;

static void JNICALL on_entry(jvmtiEnv *j, JNIEnv *jni, jthread t, jmethodID m)
{
	if (m == target)
		atomic_fetch_add_explicit(&hits, 1, memory_order_relaxed);
}

/* Resolve the target's jmethodID once its class is prepared. */
static void JNICALL on_prepare(jvmtiEnv *j, JNIEnv *jni, jthread t, jclass c)
{
	char *sig = NULL;
	if ((*j)->GetClassSignature(j, c, &sig, NULL) != JVMTI_ERROR_NONE || !sig)
		return;
	size_t l = strlen(sig);
	int match = l == strlen(want_cls) + 2 && !strncmp(sig + 1, want_cls, l - 2);
	(*j)->Deallocate(j, (unsigned char *)sig);
	jint n = 0;
	jmethodID *ms = NULL;
	if (!match || (*j)->GetClassMethods(j, c, &n, &ms) != JVMTI_ERROR_NONE)
		return;
	for (jint i = 0; i < n; i++) {
		char *name = NULL;
		if ((*j)->GetMethodName(j, ms[i], &name, NULL, NULL) == JVMTI_ERROR_NONE && name) {
			if (!strcmp(name, want_name))
				target = ms[i];
			(*j)->Deallocate(j, (unsigned char *)name);
		}
	}
	(*j)->Deallocate(j, (unsigned char *)ms);
}

static void JNICALL on_death(jvmtiEnv *j, JNIEnv *jni)
{
	fprintf(stderr, "method_entry hits=%ld\n", atomic_load(&hits));
}

JNIEXPORT jint JNICALL Agent_OnLoad(JavaVM *vm, char *options, void *reserved)
{
	jvmtiEnv *j = NULL;
	const char *dot = options ? strrchr(options, '.') : NULL;
	if (!dot || (size_t)(dot - options) >= sizeof(want_cls) || strlen(dot + 1) >= sizeof(want_name))
		return JNI_ERR;
	memcpy(want_cls, options, (size_t)(dot - options));
	strcpy(want_name, dot + 1);
	if ((*vm)->GetEnv(vm, (void **)&j, JVMTI_VERSION_1_2) != JNI_OK)
		return JNI_ERR;
	jvmtiCapabilities caps;
	memset(&caps, 0, sizeof(caps));
	caps.can_generate_method_entry_events = 1;
	if ((*j)->AddCapabilities(j, &caps) != JVMTI_ERROR_NONE)
		return JNI_ERR;
	jvmtiEventCallbacks cb;
	memset(&cb, 0, sizeof(cb));
	cb.MethodEntry = on_entry;
	cb.ClassPrepare = on_prepare;
	cb.VMDeath = on_death;
	(*j)->SetEventCallbacks(j, &cb, (jint)sizeof(cb));
	(*j)->SetEventNotificationMode(j, JVMTI_ENABLE, JVMTI_EVENT_METHOD_ENTRY, NULL);
	(*j)->SetEventNotificationMode(j, JVMTI_ENABLE, JVMTI_EVENT_CLASS_PREPARE, NULL);
	(*j)->SetEventNotificationMode(j, JVMTI_ENABLE, JVMTI_EVENT_VM_DEATH, NULL);
	return JNI_OK;
}

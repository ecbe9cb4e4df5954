/*
 * Java heap profile: HotSpot's allocation sampler (SampledObjectAlloc, JDK
 * 11+) posts about one event per sampling interval of allocated bytes, on
 * the allocating thread. The callback takes that thread's stack and adds
 * the sample to its site, (stack, class of the object), under a mutex.
 *
 * Each sample stands for 1 / (1 - exp(-size / interval)) objects (the
 * sampler's Poisson process, as in Go's and heapprofd's profiles), so the
 * alloc_* and inuse_* values estimate totals, not sample counts.
 *
 * In use: where the JVM grants can_tag_objects and ObjectFree, a sampled
 * object is tagged with (generation, site, size) and its ObjectFree event
 * (no JNI, no locks there: one atomic subtraction) takes it off its site.
 * HotSpot posts ObjectFree after the GC that found the object dead, so
 * in-use figures lag by up to one collection. Tags from an earlier capture
 * carry an older generation and are ignored. At most JVH_MAX_TAGGED sampled
 * objects are tagged at once; past that in-use is under-counted and the
 * profile's comment says so.
 *
 * Caps: JVH_MAX_SITES sites per capture (more samples: `dropped`),
 * JVH_MAX_FRAMES frames per stack (the root end is cut).
 */
#include "jv.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "pprof.h"

#define JVH_TAB_CAP    (2 * JVH_MAX_SITES)
#define JVH_MAX_TAGGED (1u << 20)
#define FP_ONE         256.0 /* fixed point of the in-use atomics */

struct jvh_site {
	uint64_t hash;
	uint32_t nframes;
	bool used;
	char *cls;               /* malloc'd with the frames, at first use */
	jvmtiFrameInfo *frames;
	double alloc_objects, alloc_bytes;
	_Atomic int64_t inuse_objects_fp, inuse_bytes_fp;
};

static pthread_mutex_t H_lock = PTHREAD_MUTEX_INITIALIZER;
static struct jvh_site *H_tab;  /* allocated once, kept for late ObjectFree events */
static uint32_t H_nsites;
static uint64_t H_interval;
static struct jvh_stats H_st;
static _Atomic bool H_on;
static _Atomic uint32_t H_gen;   /* 12 bits, in every tag */
static _Atomic uint32_t H_tagged;
static _Atomic bool H_tag_full;

static double weight(uint64_t size)
{
	double p = 1.0 - exp(-(double)size / (double)(H_interval ? H_interval : 1));
	return p > 0 ? 1.0 / p : 1.0;
}

/* tag: generation (12 bits) | site + 1 (16 bits) | size (36 bits, clamped) */
static jlong make_tag(uint32_t gen, uint32_t site, uint64_t size)
{
	if (size > (1ull << 36) - 1)
		size = (1ull << 36) - 1;
	return (jlong)(((uint64_t)(gen & 0xfff) << 52) | ((uint64_t)(site + 1) << 36) | size);
}

int jvh_start(uint32_t interval_bytes)
{
	jvmtiEnv *j = jv_jvmti;
	if (!jv_caps.sampled_alloc)
		return -ENOTSUP;
	pthread_mutex_lock(&H_lock);
	if (!H_tab && !(H_tab = calloc(JVH_TAB_CAP, sizeof(*H_tab)))) {
		pthread_mutex_unlock(&H_lock);
		return -ENOMEM;
	}
	/* A new generation first: frees of older tags no longer touch the table. */
	atomic_store(&H_gen, (atomic_load(&H_gen) + 1) & 0xfff);
	for (uint32_t i = 0; i < JVH_TAB_CAP; i++) {
		free(H_tab[i].frames);
		H_tab[i].frames = NULL;
		H_tab[i].cls = NULL;
		H_tab[i].used = false;
		H_tab[i].alloc_objects = H_tab[i].alloc_bytes = 0;
		atomic_store(&H_tab[i].inuse_objects_fp, 0);
		atomic_store(&H_tab[i].inuse_bytes_fp, 0);
	}
	H_nsites = 0;
	memset(&H_st, 0, sizeof(H_st));
	H_interval = interval_bytes ? interval_bytes : JVH_DEFAULT_INTERVAL;
	atomic_store(&H_tag_full, false);
	pthread_mutex_unlock(&H_lock);

	jvmtiError e = (*j)->SetHeapSamplingInterval(j, (jint)H_interval);
	if (e == JVMTI_ERROR_NONE && jv_caps.tag_objects && jv_caps.object_free)
		e = (*j)->SetEventNotificationMode(j, JVMTI_ENABLE, JVMTI_EVENT_OBJECT_FREE, NULL);
	atomic_store(&H_on, true);
	if (e == JVMTI_ERROR_NONE)
		e = (*j)->SetEventNotificationMode(j, JVMTI_ENABLE,
						   JVMTI_EVENT_SAMPLED_OBJECT_ALLOC, NULL);
	if (e != JVMTI_ERROR_NONE) {
		atomic_store(&H_on, false);
		LOG_W("cannot start allocation sampling: JVMTI error %d", (int)e);
		return -EIO;
	}
	return 0;
}

void jvh_stop(void)
{
	if (!atomic_exchange(&H_on, false))
		return;
	(*jv_jvmti)->SetEventNotificationMode(jv_jvmti, JVMTI_DISABLE,
					      JVMTI_EVENT_SAMPLED_OBJECT_ALLOC, NULL);
	/* ObjectFree stays on: tagged samples still alive are taken off as they die. */
}

static uint64_t site_hash(const char *cls, const jvmtiFrameInfo *f, jint n)
{
	uint64_t h = 1469598103934665603ull;
	for (const char *c = cls; *c; c++) {
		h ^= (uint8_t)*c;
		h *= 1099511628211ull;
	}
	for (jint i = 0; i < n; i++) {
		h ^= (uint64_t)(uintptr_t)f[i].method;
		h *= 1099511628211ull;
		h ^= (uint64_t)f[i].location;
		h *= 1099511628211ull;
	}
	return h;
}

void JNICALL jvh_on_alloc(jvmtiEnv *j, JNIEnv *jni, jthread thread, jobject object,
			  jclass klass, jlong size)
{
	jvmtiFrameInfo f[JVH_MAX_FRAMES];
	jint n = 0;
	char *sig = NULL, cls[128];

	if (!atomic_load(&H_on))
		return;
	if ((*j)->GetStackTrace(j, NULL, 0, JVH_MAX_FRAMES, f, &n) != JVMTI_ERROR_NONE)
		n = 0;
	if ((*j)->GetClassSignature(j, klass, &sig, NULL) == JVMTI_ERROR_NONE) {
		jvm_class_name(sig, cls, sizeof(cls));
		(*j)->Deallocate(j, (unsigned char *)sig);
	} else {
		snprintf(cls, sizeof(cls), "(unknown)");
	}
	uint64_t h = site_hash(cls, f, n);
	uint64_t sz = size > 0 ? (uint64_t)size : 0;
	int32_t site = -1;
	uint32_t gen = 0;
	double w = weight(sz);

	pthread_mutex_lock(&H_lock);
	if (!atomic_load(&H_on))
		goto out;
	for (uint32_t i = (uint32_t)h & (JVH_TAB_CAP - 1);; i = (i + 1) & (JVH_TAB_CAP - 1)) {
		struct jvh_site *s = &H_tab[i];
		if (!s->used) {
			size_t clen = strlen(cls) + 1, flen = (size_t)n * sizeof(f[0]);
			/* One block: the frames, then the class name. */
			if (H_nsites >= JVH_MAX_SITES || !(s->frames = malloc(flen + clen))) {
				H_st.dropped++;
				goto out;
			}
			s->used = true;
			s->hash = h;
			s->nframes = (uint32_t)n;
			memcpy(s->frames, f, flen);
			s->cls = (char *)s->frames + flen;
			memcpy(s->cls, cls, clen);
			H_nsites++;
		} else if (s->hash != h || s->nframes != (uint32_t)n || strcmp(s->cls, cls) ||
			   memcmp(s->frames, f, (size_t)n * sizeof(f[0]))) {
			continue;
		}
		H_st.samples++;
		s->alloc_objects += w;
		s->alloc_bytes += w * (double)sz;
		site = (int32_t)i;
		break;
	}
	gen = atomic_load(&H_gen);
out:
	pthread_mutex_unlock(&H_lock);
	if (site < 0 || !jv_caps.tag_objects || !jv_caps.object_free)
		return;
	if (atomic_fetch_add(&H_tagged, 1) >= JVH_MAX_TAGGED) {
		atomic_fetch_sub(&H_tagged, 1);
		atomic_store(&H_tag_full, true);
		return;
	}
	if ((*j)->SetTag(j, object, make_tag(gen, (uint32_t)site, sz)) != JVMTI_ERROR_NONE) {
		atomic_fetch_sub(&H_tagged, 1);
		return;
	}
	/* Counted once tagged, so every ObjectFree has a matching add. */
	atomic_fetch_add(&H_tab[site].inuse_objects_fp, (int64_t)(w * FP_ONE));
	atomic_fetch_add(&H_tab[site].inuse_bytes_fp, (int64_t)(w * (double)sz * FP_ONE));
}

/* ObjectFree: no JNI, no locks; only our own tags reach here. */
void JNICALL jvh_on_free(jvmtiEnv *j, jlong tag)
{
	uint64_t t = (uint64_t)tag;
	uint32_t gen = (uint32_t)(t >> 52), site = (uint32_t)((t >> 36) & 0xffff);
	uint64_t sz = t & ((1ull << 36) - 1);
	atomic_fetch_sub(&H_tagged, 1);
	if (!H_tab || gen != atomic_load(&H_gen) || site == 0 || site > JVH_TAB_CAP)
		return;
	double w = weight(sz);
	atomic_fetch_sub(&H_tab[site - 1].inuse_objects_fp, (int64_t)(w * FP_ONE));
	atomic_fetch_sub(&H_tab[site - 1].inuse_bytes_fp, (int64_t)(w * (double)sz * FP_ONE));
}

static int64_t fp_val(_Atomic int64_t *a)
{
	int64_t v = atomic_load(a);
	return v > 0 ? (int64_t)((double)v / FP_ONE + 0.5) : 0;
}

int jvh_write_pprof(JNIEnv *jni, int fd, int64_t start_ns, int64_t dur_ns, struct jvh_stats *st,
		    uint64_t *bytes)
{
	struct pp_builder *b = NULL;
	struct jvm_names *names = NULL;
	int r;

	jvh_stop();
	pthread_mutex_lock(&H_lock);
	*st = H_st;
	if (!H_tab) {
		r = -EINVAL;
		goto out;
	}
	if ((r = pp_new(&b)) < 0 || (r = jvm_names_new(jni, b, &names)) < 0)
		goto out;
	if ((r = pp_add_sample_type(b, "alloc_objects", "count")) < 0 ||
	    (r = pp_add_sample_type(b, "alloc_space", "bytes")) < 0 ||
	    (r = pp_add_sample_type(b, "inuse_objects", "count")) < 0 ||
	    (r = pp_add_sample_type(b, "inuse_space", "bytes")) < 0 ||
	    (r = pp_set_period(b, "space", "bytes", (int64_t)H_interval)) < 0 ||
	    (r = pp_set_default_sample_type(b, "alloc_space")) < 0)
		goto out;
	pp_set_time(b, start_ns, dur_ns);
	char comment[160];
	snprintf(comment, sizeof(comment),
		 "profilingd JVMTI agent: SampledObjectAlloc every %llu bytes on average%s",
		 (unsigned long long)H_interval,
		 !(jv_caps.tag_objects && jv_caps.object_free) ? "; no in-use data (no object tags)"
		 : atomic_load(&H_tag_full) ? "; in-use under-counted (tag cap reached)" : "");
	pp_add_comment(b, comment);
	int64_t pid = getpid();
	for (uint32_t i = 0; i < JVH_TAB_CAP; i++) {
		struct jvh_site *s = &H_tab[i];
		uint64_t locs[JVH_MAX_FRAMES];
		if (!s->used)
			continue;
		for (uint32_t k = 0; k < s->nframes; k++)
			if ((r = jvm_location(names, s->frames[k].method, s->frames[k].location,
					      &locs[k])) < 0)
				goto out;
		int64_t vals[4] = { (int64_t)(s->alloc_objects + 0.5), (int64_t)(s->alloc_bytes + 0.5),
				    fp_val(&s->inuse_objects_fp), fp_val(&s->inuse_bytes_fp) };
		/* The redactor keeps a sample by its pid label. */
		struct pp_label labels[2] = {
			{ .key = "pid", .num = pid },
			{ .key = "object_class", .str = s->cls },
		};
		if ((r = pp_add_sample(b, locs, s->nframes, vals, 4, labels, 2)) < 0)
			goto out;
	}
	r = pp_write_gz_level(b, fd, PP_GZ_HOP, bytes);
out:
	pthread_mutex_unlock(&H_lock);
	jvm_names_free(names);
	pp_free(b);
	return r;
}

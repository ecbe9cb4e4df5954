/*
 * rdc_pbw: the protobuf writer of the Perfetto converters (rdc_heapgraph,
 * rdc_heapprofile; issue #20). A growable byte buffer with the few
 * encoders they need (varint fields, length-delimited fields, packed
 * repeated varints, nested messages copied from another writer), plus the
 * Perfetto field numbers they use (enum rdc_pf), each one checked against
 * upstream's .proto files and pinned by tests/unit/test_rdc_heapgraph.c.
 *
 * Every buffer has a cap (max, set at init): a write past it sets err to
 * -E2BIG and is dropped, and so is every later write; a failed allocation
 * sets -ENOMEM. Callers check err once, where they flush. A writer is only
 * ever fed by the converter itself, never by a peer's length.
 */
#ifndef PD_RDC_PBW_H
#define PD_RDC_PBW_H

#include <stddef.h>
#include <stdint.h>

/* Field numbers from upstream Perfetto (docs/PERFETTO.md, "Heap formats"). */
enum rdc_pf {
	/* protos/perfetto/trace/trace.proto */
	RDC_PF_TRACE_PACKET = 1,
	/* protos/perfetto/trace/trace_packet.proto */
	RDC_PF_PACKET_TIMESTAMP = 8,
	RDC_PF_PACKET_SEQ_ID = 10,          /* trusted_packet_sequence_id */
	RDC_PF_PACKET_SEQ_FLAGS = 13,       /* sequence_flags */
	RDC_PF_PACKET_PROFILE_PACKET = 37,
	RDC_PF_PACKET_HEAP_GRAPH = 56,      /* extension, third_party/android/art */
	RDC_PF_PACKET_PROCESS_TREE = 2,
	RDC_PF_PACKET_INTERNED_DATA = 12,
	RDC_PF_PACKET_PERF_SAMPLE = 66,
	RDC_PF_PACKET_ART_PROCESS_METADATA = 131,
	/* protos/perfetto/trace/ps/process_tree.proto */
	RDC_PF_PT_PROCESSES = 1,
	RDC_PF_PT_THREADS = 2,
	RDC_PF_PTP_PID = 1,                 /* ProcessTree.Process */
	RDC_PF_PTP_CMDLINE = 3,             /* repeated string: one per argument */
	RDC_PF_PTP_UID = 5,
	RDC_PF_PTT_TID = 1,                 /* ProcessTree.Thread */
	RDC_PF_PTT_NAME = 2,
	RDC_PF_PTT_TGID = 3,
	/* protos/perfetto/trace/profiling/art_process_metadata.proto */
	RDC_PF_APM_PID = 1,                 /* ArtProcessMetadata */
	RDC_PF_APM_UID = 2,
	RDC_PF_APM_PROCESS_NAME = 3,        /* argv[0] */
	RDC_PF_APM_OOM_ALLOCATION_SIZE = 5, /* its presence marks an OOME dump */
	RDC_PF_APM_OOM_THREAD_JAVA_STACK = 8,
	RDC_PF_JSTACK_FRAMES = 1,           /* JavaStack: leaf first */
	RDC_PF_JFRAME_METHOD_NAME = 1,      /* JavaFrame */
	RDC_PF_JFRAME_SOURCE_FILE = 2,
	RDC_PF_JFRAME_LINE_NUMBER = 3,
	/* protos/perfetto/trace/interned_data/interned_data.proto */
	RDC_PF_ID_FUNCTION_NAMES = 5,
	RDC_PF_ID_FRAMES = 6,
	RDC_PF_ID_CALLSTACKS = 7,
	/* protos/perfetto/trace/profiling/profile_packet.proto: PerfSample */
	RDC_PF_PS_PID = 2,
	RDC_PF_PS_TID = 3,
	RDC_PF_PS_CALLSTACK_IID = 4,
	/* protos/third_party/android/art/heap_graph.proto: HeapGraph */
	RDC_PF_HG_PID = 1,
	RDC_PF_HG_OBJECTS = 2,
	RDC_PF_HG_FIELD_NAMES = 4,
	RDC_PF_HG_CONTINUED = 5,
	RDC_PF_HG_INDEX = 6,
	RDC_PF_HG_ROOTS = 7,
	RDC_PF_HG_TYPES = 9,
	/* HeapGraphObject */
	RDC_PF_HGO_ID = 1,
	RDC_PF_HGO_TYPE_ID = 2,
	RDC_PF_HGO_SELF_SIZE = 3,
	RDC_PF_HGO_REF_FIELD_ID = 4,        /* packed */
	RDC_PF_HGO_REF_OBJECT_ID = 5,       /* packed */
	RDC_PF_HGO_ID_DELTA = 7,
	/* HeapGraphType */
	RDC_PF_HGT_ID = 1,
	RDC_PF_HGT_CLASS_NAME = 3,
	RDC_PF_HGT_OBJECT_SIZE = 4,
	RDC_PF_HGT_SUPERCLASS_ID = 5,
	RDC_PF_HGT_KIND = 7,
	RDC_PF_HGT_CLASSLOADER_ID = 8,
	/* HeapGraphRoot */
	RDC_PF_HGR_OBJECT_IDS = 1,          /* packed */
	RDC_PF_HGR_ROOT_TYPE = 2,
	/* protos/perfetto/trace/profiling/profile_common.proto */
	RDC_PF_ISTR_IID = 1,                /* InternedString */
	RDC_PF_ISTR_STR = 2,
	RDC_PF_MAP_IID = 1,                 /* Mapping */
	RDC_PF_MAP_BUILD_ID = 2,
	RDC_PF_MAP_START_OFFSET = 3,
	RDC_PF_MAP_START = 4,
	RDC_PF_MAP_END = 5,
	RDC_PF_MAP_PATH_STRING_IDS = 7,
	RDC_PF_FRAME_IID = 1,               /* Frame */
	RDC_PF_FRAME_FUNCTION_NAME_ID = 2,
	RDC_PF_FRAME_MAPPING_ID = 3,
	RDC_PF_FRAME_REL_PC = 4,
	RDC_PF_CS_IID = 1,                  /* Callstack */
	RDC_PF_CS_FRAME_IDS = 2,
	/* protos/perfetto/trace/profiling/profile_packet.proto: ProfilePacket */
	RDC_PF_PP_STRINGS = 1,
	RDC_PF_PP_FRAMES = 2,
	RDC_PF_PP_CALLSTACKS = 3,
	RDC_PF_PP_MAPPINGS = 4,
	RDC_PF_PP_PROCESS_DUMPS = 5,
	RDC_PF_PP_CONTINUED = 6,
	RDC_PF_PP_INDEX = 7,
	/* ProcessHeapSamples */
	RDC_PF_PHS_PID = 1,
	RDC_PF_PHS_SAMPLES = 2,
	RDC_PF_PHS_TIMESTAMP = 9,
	RDC_PF_PHS_HEAP_NAME = 11,
	RDC_PF_PHS_SAMPLING_INTERVAL = 12,  /* sampling_interval_bytes */
	/* HeapSample */
	RDC_PF_HS_CALLSTACK_ID = 1,
	RDC_PF_HS_SELF_ALLOCATED = 2,
	RDC_PF_HS_SELF_FREED = 3,
	RDC_PF_HS_ALLOC_COUNT = 5,
	RDC_PF_HS_FREE_COUNT = 6,
};

/* HeapGraphType.Kind and HeapGraphRoot.Type values used. */
enum { RDC_PF_KIND_NORMAL = 1, RDC_PF_KIND_STRING = 3, RDC_PF_KIND_ARRAY = 4,
       RDC_PF_KIND_CLASS = 5 };

struct rdc_pbw {
	uint8_t *b;
	size_t n, cap, max;
	int err; /* 0, -E2BIG or -ENOMEM: sticky */
};

void rdc_pbw_init(struct rdc_pbw *w, size_t max);
void rdc_pbw_free(struct rdc_pbw *w);
void rdc_pbw_reset(struct rdc_pbw *w); /* empty; err kept */
void rdc_pbw_raw(struct rdc_pbw *w, const void *p, size_t n);
void rdc_pbw_varint(struct rdc_pbw *w, uint64_t v);
/* Field f as a varint. */
void rdc_pbw_u64(struct rdc_pbw *w, uint32_t f, uint64_t v);
/* Field f, length-delimited: n bytes of p. */
void rdc_pbw_bytes(struct rdc_pbw *w, uint32_t f, const void *p, size_t n);
/* Field f, the bytes written to sub (a nested message). */
void rdc_pbw_msg(struct rdc_pbw *w, uint32_t f, const struct rdc_pbw *sub);
/* Field f, packed repeated varints (nothing when n is 0). */
void rdc_pbw_packed(struct rdc_pbw *w, uint32_t f, const uint64_t *v, size_t n);
/* Write all of w to fd and empty it. 0, w->err, -ENOSPC/-EDQUOT or -errno;
 * *total (may be NULL) grows by the bytes written. */
int rdc_pbw_flush(struct rdc_pbw *w, int fd, uint64_t *total);

struct rdc_proc;
/* One ProcessTree.Process of pid into w: pid, then, from proc (may be
 * NULL), each cmdline argument (split at NULs, an empty last one dropped)
 * and the uid (issue #20, process metadata). */
void rdc_pbw_process(struct rdc_pbw *w, int32_t pid, const struct rdc_proc *proc);

#endif

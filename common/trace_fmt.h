/*
 * The flight recorder's event layout and its Perfetto encoding, shared by
 * the client (trc_snapshot) and the redactor (crash ring dumps), so both
 * write the same tracks.
 *
 * A ring dump (written by the agent's fatal-signal handler with write()
 * only) is: struct tfmt_dump_hdr, then nrings times { struct
 * tfmt_dump_ring, ring_events x struct trc_ev }. Events of ring r are in
 * slot order; slot k holds event seq - 1 when its seq is not 0.
 */
#ifndef PD_TRACE_FMT_H
#define PD_TRACE_FMT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define TRC_NAME_MAX 40

enum { EV_BEGIN = 1, EV_END, EV_INSTANT, EV_COUNTER };

struct trc_ev {
	/* i + 1 once slot holds event i; 0 while it is being written. */
	_Atomic uint64_t seq;
	uint64_t ts;
	int64_t value;
	uint8_t type, len;
	char name[TRC_NAME_MAX];
};

#define TFMT_DUMP_MAGIC "PDRING01"

/* The flight recorder's rings (client/trace.h takes its caps from here):
 * the daemon sizes the crash memfd to the largest dump they make. */
#define TFMT_RING_EVENTS 4096
#define TFMT_MAX_RINGS 256

struct tfmt_dump_hdr {
	char magic[8];
	uint32_t version;     /* 1 */
	uint32_t pid;
	uint32_t nrings;
	uint32_t ring_events;
	uint32_t ev_size;     /* sizeof(struct trc_ev) of the writer */
	uint32_t pad;
};

struct tfmt_dump_ring {
	int32_t tid;
	char comm[16];
	uint32_t pad;
	uint64_t head;
};

/* The largest ring dump the agent writes: every ring in use. */
#define TFMT_DUMP_MAX_BYTES                                                              \
	(sizeof(struct tfmt_dump_hdr) +                                                  \
	 (size_t)TFMT_MAX_RINGS *                                                        \
		 (sizeof(struct tfmt_dump_ring) + (size_t)TFMT_RING_EVENTS * sizeof(struct trc_ev)))

/* A buffered TracePacket stream writer. */
struct tfmt_out {
	int fd;
	int err;
	uint64_t total;
	size_t len;
	uint64_t counters[64];
	unsigned ncounters;
	uint8_t buf[1 << 16];
};

void tfmt_init(struct tfmt_out *o, int fd);
/* Flush; 0 or the first write error. */
int tfmt_finish(struct tfmt_out *o, uint64_t *bytes);
/* The process track: name and argv0 may be NULL. */
void tfmt_process(struct tfmt_out *o, pid_t pid, const char *name, const char *argv0);
void tfmt_thread(struct tfmt_out *o, pid_t pid, pid_t tid, const char *comm);
/* One event on tid's track (counters get a track of their own). */
void tfmt_event(struct tfmt_out *o, pid_t pid, pid_t tid, const struct trc_ev *e);

#endif

/*
 * pprof redaction: keep only samples of the app's processes, strip kernel
 * frames, drop labels that name other processes, and write a new profile
 * whose string table holds only what the kept samples, their frames and
 * the header use, so no string of a dropped sample survives.
 *
 * A sample is the app's when its numeric "pid" label is one of the app's
 * pids. A sample with no pid label is dropped: every producer in profilingd
 * labels its samples. Kernel addresses are those at or above
 * RDC_KERNEL_START (the upper half on x86-64 and arm64).
 *
 * Streaming. The profile is walked on the wire, field by field; nothing
 * unpacks it whole. A sample can be judged only once the string table
 * says which label key is "pid" and its frames' locations are read, so:
 *   pass 1  the tables: mappings, locations and functions (their numbers,
 *           by id), a flag byte per string ("pid", "tid", empty...) and
 *           the strings' text up to PR_HELD_MAX, the header (sample
 *           types, period, comments). When the strings and sample types
 *           came before the first sample (common/pprof.c writes the
 *           samples last), samples are judged here, one at a time, until
 *           one names a string, location, mapping or function not read
 *           yet: from it on they wait for pass 2.
 *   pass 2  only when samples waited (every profile whose tables follow
 *           its samples, as protobuf-c and Go order them): the input is
 *           inflated again and the samples not yet judged are, their
 *           frames and labels renumbered into the output's tables as
 *           first used, and written out at once.
 *   strings from what pass 1 held; past PR_HELD_MAX copied as they go by
 *           again (by their input index, so no string content is held
 *           before it is known to be kept), in pass 2 when they follow
 *           the samples, else in a pass of their own.
 * A profile in common/pprof.c's order is inflated once.
 * The output is written in field order (sample types, samples, mappings,
 * locations, functions, strings, header; the sample types after the
 * samples when pass 1 wrote them) and gzip'd at the fastest level.
 *
 * gzip: ISA-L's igzip when the build found libisal (RDC_HAVE_ISAL; its
 * level 1 deflates ~8x and inflates ~1.4x faster than zlib here), else
 * zlib at Z_BEST_SPEED. Both read one gzip member, check its CRC and
 * length, and ignore what follows it; tests/unit runs both builds.
 *
 * Threads: two, the parser and one gzip worker (gz_worker, from the first
 * src_rewind or sink_open to the end of rdc_pprof). Inflating the input
 * (from src_rewind to src_stop) and deflating and writing the output
 * (from sink_open to sink_finish) are two jobs, each a codec under a
 * mutex and an rdc_bufq (PR_IN_QBUFS x PR_CHUNK in, PR_OUT_QBUFS x
 * PR_OUT_STAGE out); the worker runs whichever
 * has work, a buffer at a time, and the parser, rather than wait on a
 * queue, runs one itself when its mutex is free (trylock). Both wait on
 * one bell that both queues ring. The parser reads an inflated buffer in
 * place when it can (src_lend) and copies only a field that straddles
 * two. Errors come back through the queues. The worker is joined before
 * rdc_pprof returns.
 *
 * Where the time goes (perf record, cpu-clock, on bench/redact_throughput's
 * 200k-sample profile: 9.3 MB gzip'd, 16.0 MB inflated, half the samples
 * kept). Before issue #18's last round: ISA-L inflate 30-36 % of the
 * samples, sample() 23-27 % (an eighth of it counting the packed frames
 * of every sample, kept or not), ISA-L deflate 19-20 %, memcpy 4 %. After
 * it: inflate 31 %, sample() with packed_check 25 %, deflate 19 %. The
 * codecs are at their floor: inflating with these buffers on one thread
 * takes what redact_gen's floor does (~30 ms); the ~36 ms the inflater
 * thread showed was two busy threads sharing the caches. Measured and left
 * as they are: PR_CHUNK x the queues' depth (one for both) from 64 KiB
 * x 6 to 1 MiB x 2 (no
 * change past the noise), ISA-L level 0 (not faster past the noise here,
 * 24 % more output), level 1's level_buf size and hist_bits (no faster),
 * and an eight-bytes-at-a-time frame decoder (slower than sample()'s byte
 * loop). pp18c (three threads -> two): the same split of CPU (inflate
 * 32-37 %, sample() 20-22 %, deflate 15 % + 5 %, memmove 4 %), ~90 -> ~77
 * ms of CPU and 106-204 -> 62-68 context switches a run, as three
 * threads no longer take turns on two cores; the wall time follows the
 * CPU where the jobs overlap (figures in the commit and
 * bench/redact_throughput). pp18d (instructions per sample, callgrind on
 * rdc_pprof alone: 939.0 -> 880.0 M, ISA-L's 561.4 M unchanged, ours and
 * libc's 377.2 -> 318.2 M): a kept sample is encoded in the output
 * buffer it goes to (sink_room), not copied in; its frames go through
 * frames_fast (a code stored as one word, a kernel frame a code of
 * length 0: no branch); a label is written in place and its fields set
 * by index; str_use inline; pass 1 hands a sample already in the window
 * straight to sample(). ISA-L is now ~58 % of the CPU (inflate 35 %,
 * deflate 19 %), sample() ~22 %; the frame loop (~31 instructions a
 * frame, 2.3 M kept frames) is a quarter of sample().
 * Measured and left: a frame table of 1024 entries (so the lookup would
 * hit L1: no faster, so not the cache), a 16-bit load of a frame's two
 * bytes (more instructions), ISA-L level 0 again (deflating what is
 * kept: 16.5 vs 18.5 ms, 24 % more bytes: left at level 1). The queues'
 * shape was changed (PR_IN_QBUFS, PR_OUT_QBUFS: the worker's waits).
 * The input's inflate, the largest share left and one thread's work
 * however the rest is split, is gone for profilingd's own runtimes: they
 * send stored blocks (PP_GZ_HOP, common/pprof.h). The same profile then is
 * 16.0 MB in, ~50 ms and ~90 ms of CPU a run where level 6's 9.3 MB took
 * ~75 and ~140 (sample() 40 %, deflate 33 %, memmove 5 %, crc32 3 %);
 * other producers' gzip of any level is read as before.
 *
 * Same rules as the unpack-and-rebuild redactor this replaced (kept in
 * tests/unit/rdc_pprof_ref.c, and test_rdc_pprof_diff holds them equal):
 * functions are merged by (name, file), locations by (mapping, address),
 * a location's last (outermost) line is its function, a label with a
 * string has no number, at most PP_MAX_LABELS labels per sample, comments
 * DLP-scrubbed (cut to 511 bytes), and so are the strings of "arg<N>"
 * labels (method events' recorded arguments; cut to PR_ARG_MAX - 1 bytes;
 * a string also used elsewhere is scrubbed there too: over-redaction,
 * never under), drop_frames/keep_frames and unknown
 * fields not carried. Stricter: a table entry whose id repeats is
 * malformed (-EBADMSG), and so is a function name or sample type out of
 * the string table (was -EINVAL).
 *
 * Memory: never the samples. The input's tables by position (a mapping 56
 * bytes, a location 52, a function 48, a string 5), its strings' text up
 * to PR_HELD_MAX (3 MiB with 8 bytes each; past it dropped), the output's tables
 * sized by what is kept, one inflate window, one field at a time, and the
 * two queues (6 x 256 KiB in, 12 x 64 KiB out) and threads' stacks (256
 * KiB each). Caps,
 * each -E2BIG when passed (exit 66): input 256 MiB gzip'd and 1 GiB
 * inflated; one top-level field (a sample, a string...) 16 MiB; 2^16
 * frames and 4096 labels in one sample (the agents write at most 512 and
 * 8); 2^20 strings, locations and functions, 2^16 mappings
 * (vm.max_map_count is 65530), 4096 comments, 64 MiB of kept strings.
 */
#include "rdc.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef RDC_HAVE_ISAL
#include <isa-l/igzip_lib.h>
#else
#include <zlib.h>
#endif

#include "pprof.h"
#include "rdc_bufq.h"
#include "util.h"

#define RDC_PPROF_MAX_IN  (256ull << 20)
#define RDC_PPROF_MAX_RAW (1024ull << 20)
#define RDC_KERNEL_START  0xffff800000000000ull

#define PR_MAX_FIELD    (16u << 20)
#define PR_MAX_STRINGS  (1u << 20)
#define PR_MAX_ENTRIES  (1u << 20)
#define PR_MAX_MAPPINGS (1u << 16)
#define PR_MAX_COMMENTS 4096u
#define PR_MAX_FRAMES   (1u << 16)   /* location ids of one sample */
#define PR_MAX_SLABELS  4096u        /* labels of one sample */
#define PR_MAX_CHARS    (64u << 20)
#define PR_CHUNK        (256u << 10) /* pread and inflate granule */
/*
 * The queues between the parser and the gzip worker (pp18d): six input
 * buffers of PR_CHUNK, so the worker inflates ahead through a stretch of
 * slow parsing instead of idling with a full queue, and twelve output
 * buffers of 64 KiB, so a full one to deflate comes four times as often.
 * With 3 x 256 KiB each way the worker waited ~8 ms a run (in-process,
 * the bench's 200k-sample profile) and the parser ran the codecs the
 * rest of the time; now ~1.6 ms: wall medians 52.3 -> 47.2 ms to
 * /dev/null, 60.5 -> 52.9 ms to a file (21 and 15 rounds alternating,
 * load 0.5-0.6), CPU the same. Peak RSS 6.0 -> 6.5 MiB. The cost:
 * ISA-L's deflate copies its 32 KiB history once a call, four times as
 * many calls (callgrind: 880.0 -> 893.8 M instructions in all).
 */
#define PR_OUT_STAGE    (64u << 10)
#define PR_IN_QBUFS     6
#define PR_OUT_QBUFS    12
#define PR_THREAD_STACK (256u << 10)
#define PR_COMMENT_MAX  512          /* a scrubbed comment, with its NUL */
#ifndef PR_HELD_MAX /* tests/unit builds one with a small cap */
#define PR_HELD_MAX     (3u << 20)   /* input strings held by pass 1, with 8 B each */
#endif
/* loc_out's code of a kernel frame: a length of 0 (put_code writes
 * nothing that stays), nonzero so it reads as "made". */
#define LOC_KERNEL      0x00ffffffu

/* Wire types. */
enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

/* ---- flags of an input string, from its text up to a first NUL (the old
 * redactor compared C strings, and so does every pprof reader in C) */
enum {
	S_EMPTY = 1, /* "" : written as index 0 */
	S_PID = 2,   /* "pid": the sample's process */
	S_OWNID = 4, /* "pid", "tid" or "thread_id": the sample's own ids */
	S_IDKEY = 8, /* holds "pid" or "tid": may name another process */
	S_COMMENT = 16, /* a comment's text, wanted for DLP */
	S_ARGKEY = 32,  /* "arg<N>": a method event's recorded argument (docs/METHOD_EVENTS.md) */
	S_ARGVAL = 64,  /* the string of an "arg<N>" label, scrubbed by DLP when copied */
};
/* The flags capture_string does not read from the text itself. */
#define S_MARKS (S_COMMENT | S_ARGVAL)
/* An argument string is scrubbed up to this many bytes; longer ones are cut
 * (the agents write at most 64; an app's own writer may not). */
#define PR_ARG_MAX 512

/* ---- the gzip worker: one thread beside the parser for both codecs
 *
 * Inflating the input, parsing and deflating the output are three serial
 * jobs; on two cores, three threads (one per job) left a core idle
 * whenever one of them waited on a queue and fought over the cores when
 * all three ran. So there are two threads: the parser, and gz_worker,
 * which takes whichever codec has work (a free input buffer to inflate
 * into, a full output buffer to deflate). Each codec has a mutex whose
 * holder alone runs it, one buffer at a time; a thread that would wait
 * (the parser for input, or for room in the output) first tries the
 * other jobs with trylock, so whichever thread is free runs them.
 * Buffers still go through the queues in order: a codec's holder takes
 * and pushes its buffers while holding it. Waits are on one bell that
 * both queues ring (rdc_bufq.h). */
struct src;
struct sink;

struct gzw {
	struct rdc_bufq_bell *bell;
	pthread_mutex_t imu, omu; /* the inflate and the deflate codec */
	bool mu_on;
	struct src *src;          /* the inflate job (under imu); NULL: none */
	struct sink *sink;        /* the deflate job (under omu); NULL: none */
	pthread_t th;
	bool th_on;
	bool stop;                /* __atomic: the worker leaves */
};

static int gz_inflate_step(struct gzw *g);
static int gz_deflate_step(struct gzw *g);

/* ---- the input, inflated through one window */

struct src {
	int fd;
	off_t base;          /* where the artifact starts in fd */
	uint8_t *mem;        /* a pipe's bytes, read whole; NULL for a file */
	uint64_t size;       /* its bytes, from fstat */
	uint64_t in_off;     /* bytes of it consumed */
	bool gz, zinit, zend;
#ifdef RDC_HAVE_ISAL
	struct inflate_state *iz; /* ~90 KiB: on the heap */
#else
	z_stream z;
#endif
	uint8_t *in;         /* PR_CHUNK compressed bytes */
	uint8_t *buf;        /* the window: inflated bytes [pos, end) unread */
	size_t cap, pos, end;
	uint8_t *own;        /* the window's own buffer, own_cap bytes */
	size_t own_cap;
	bool lent;           /* buf is the rest of cur, lent by the queue */
	uint64_t raw_base;   /* inflated offset of buf[0] */
	/* gzip: whoever holds gz->imu alone touches the codec, in and the fd
	 * from src_rewind to src_stop (the inflate job); its output in iq,
	 * cur[cur_off..) not yet copied into the window. */
	struct rdc_bufq *iq;
	struct gzw *gw;
	bool job_on;
	struct rdc_bufq_buf *cur;
	size_t cur_off;
};

static int src_pread(struct src *s, uint8_t *dst, size_t want, size_t *got)
{
	uint64_t left = s->size - s->in_off;

	/* Set on every path: a caller reads it after any r >= 0. */
	*got = 0;
	if (want > left)
		want = (size_t)left;
	if (s->mem) {
		memcpy(dst, s->mem + s->in_off, want);
		s->in_off += want;
		*got = want;
		return 0;
	}
	for (;;) {
		ssize_t n = pread(s->fd, dst, want, s->base + (off_t)s->in_off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		s->in_off += (uint64_t)n;
		*got = (size_t)n;
		return 0;
	}
}

/*
 * A pipe cannot be read twice: its bytes are read whole into memory, up to
 * the input cap, as the old redactor did with every input. The daemon
 * always hands a file; a pipe is for people and tests.
 */
static int src_slurp(struct src *s)
{
	size_t cap = 1 << 16, n = 0;

	s->mem = malloc(cap);
	if (!s->mem)
		return -ENOMEM;
	for (;;) {
		if (n == cap) {
			if (cap >= RDC_PPROF_MAX_IN)
				return -E2BIG;
			uint8_t *g = realloc(s->mem, cap * 2);
			if (!g)
				return -ENOMEM;
			s->mem = g;
			cap *= 2;
		}
		ssize_t r = read(s->fd, s->mem + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		n += (size_t)r;
	}
	s->size = n;
	return 0;
}

static int src_open(struct src *s, int fd)
{
	struct stat sb;
	int r;

	s->fd = fd;
	s->base = lseek(fd, 0, SEEK_CUR);
	if (s->base < 0 && errno != ESPIPE)
		return -errno;
	if (s->base < 0) {
		s->base = 0;
		if ((r = src_slurp(s)))
			return r;
	} else {
		if (fstat(fd, &sb) < 0)
			return -errno;
		s->size = (uint64_t)sb.st_size > (uint64_t)s->base ?
			  (uint64_t)(sb.st_size - s->base) : 0;
		if (s->size > RDC_PPROF_MAX_IN)
			return -E2BIG;
	}
	uint8_t magic[2];
	size_t n = 0;
	if (s->size >= 2 && (r = src_pread(s, magic, 2, &n)) < 0)
		return r;
	s->in_off = 0;
	s->gz = n == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
	s->cap = s->own_cap = PR_CHUNK;
	s->buf = s->own = malloc(s->cap);
	s->in = s->gz ? malloc(PR_CHUNK) : NULL;
	if (!s->buf || (s->gz && !s->in))
		return -ENOMEM;
	return 0;
}

/* End the inflate job, if it runs: waits for the buffer being inflated,
 * at most PR_CHUNK of inflating away. */
static void src_stop(struct src *s)
{
	if (!s->job_on)
		return;
	pthread_mutex_lock(&s->gw->imu);
	s->gw->src = NULL;
	pthread_mutex_unlock(&s->gw->imu);
	s->job_on = false;
	s->cur = NULL;
	s->buf = s->own;
	s->cap = s->own_cap;
	s->lent = false;
}

static void src_close(struct src *s)
{
	src_stop(s);
	rdc_bufq_free(s->iq);
#ifdef RDC_HAVE_ISAL
	free(s->iz);
#else
	if (s->zinit)
		inflateEnd(&s->z);
#endif
	free(s->own);
	free(s->in);
	free(s->mem);
}

/*
 * Inflate into dst[0..room): 1 with *made > 0 bytes, 0 the gzip member
 * ended (*made may be > 0), -EBADMSG (corrupt, or the file ended first).
 * One gzip member is read; whatever follows it is ignored, with either
 * library. Only under gzw.imu (the inflate job's holder).
 */
#ifdef RDC_HAVE_ISAL
static int src_zin(struct src *s, uint8_t *dst, size_t room, size_t *made)
{
	struct inflate_state *z = s->iz;
	size_t got;
	int r;

	*made = 0;
	for (;;) {
		if (!z->avail_in) {
			if ((r = src_pread(s, s->in, PR_CHUNK, &got)) < 0)
				return r;
			if (!got)
				return -EBADMSG; /* the file ended before the stream did */
			z->next_in = s->in;
			z->avail_in = (uint32_t)got;
		}
		uint32_t had = z->avail_in;
		z->next_out = dst;
		z->avail_out = (uint32_t)room;
		int zr = isal_inflate(z);
		*made = room - z->avail_out;
		/* Anything but "more input" or "more room" is a bad stream: a
		 * header field overflow cannot happen with no header buffers. */
		if (zr != ISAL_DECOMP_OK && zr != ISAL_END_INPUT && zr != ISAL_OUT_OVERFLOW)
			return -EBADMSG;
		if (z->block_state == ISAL_BLOCK_FINISH)
			return 0;
		if (*made)
			return 1;
		if (z->avail_in == had && had)
			return -EBADMSG; /* no progress on either side */
	}
}
#else
static int src_zin(struct src *s, uint8_t *dst, size_t room, size_t *made)
{
	size_t got;
	int r;

	*made = 0;
	for (;;) {
		if (!s->z.avail_in) {
			if ((r = src_pread(s, s->in, PR_CHUNK, &got)) < 0)
				return r;
			if (!got)
				return -EBADMSG; /* the file ended before the stream did */
			s->z.next_in = s->in;
			s->z.avail_in = (uInt)got;
		}
		s->z.next_out = dst;
		s->z.avail_out = (uInt)room;
		int zr = inflate(&s->z, Z_NO_FLUSH);
		*made = room - s->z.avail_out;
		if (zr == Z_STREAM_END)
			return 0;
		if (zr == Z_MEM_ERROR)
			return -ENOMEM;
		if (zr != Z_OK && (zr != Z_BUF_ERROR || s->z.avail_in))
			return -EBADMSG;
		if (*made)
			return 1;
	}
}
#endif

/*
 * One buffer of the inflate job, by whichever thread gets the codec: 1
 * done, 0 nothing to do (the codec busy, no job, or no free buffer). The
 * buffers are filled in order, each whole but the last, whose status says
 * how the stream ended (0, or -errno), and which ends the job. Inflating
 * runs ahead of the parser by at most PR_IN_QBUFS buffers (the queue's cap),
 * so memory stays flat and a gzip bomb costs the parser's own cap check
 * (RDC_PPROF_MAX_RAW), not more.
 */
static int gz_inflate_step(struct gzw *g)
{
	struct rdc_bufq_buf *b;
	int did = 0;

	if (pthread_mutex_trylock(&g->imu))
		return 0;
	struct src *s = g->src;
	if (s && (b = rdc_bufq_try_free(s->iq, NULL))) {
		size_t size = rdc_bufq_size(s->iq);
		int r = 1;
		while (r > 0 && b->len < size) {
			size_t made;
			r = src_zin(s, b->data + b->len, size - b->len, &made);
			b->len += made;
		}
		b->status = r;
		if (r <= 0)
			g->src = NULL;
		rdc_bufq_push(s->iq, b);
		did = 1;
	}
	pthread_mutex_unlock(&g->imu);
	return did;
}


/* The gzip worker's loop: a buffer of each job that has work, else wait
 * on the bell until a queue moves. */
static void *gz_worker(void *arg)
{
	struct gzw *g = arg;

	for (;;) {
		uint64_t seq = rdc_bufq_bell_seq(g->bell);
		if (__atomic_load_n(&g->stop, __ATOMIC_ACQUIRE))
			break;
		int did = gz_inflate_step(g);
		did |= gz_deflate_step(g);
		if (!did)
			rdc_bufq_bell_wait(g->bell, seq);
	}
	return NULL;
}

/* The bell, the codecs' mutexes and the worker, once per redaction. */
static int gz_start(struct gzw *g)
{
	int r;

	if (g->th_on)
		return 0;
	if (!g->bell && (r = rdc_bufq_bell_new(&g->bell)))
		return r;
	if (!g->mu_on) {
		if (pthread_mutex_init(&g->imu, NULL))
			return -ENOMEM;
		if (pthread_mutex_init(&g->omu, NULL)) {
			pthread_mutex_destroy(&g->imu);
			return -ENOMEM;
		}
		g->mu_on = true;
	}
	if ((r = rdc_thread_start(&g->th, PR_THREAD_STACK, gz_worker, g)))
		return r;
	g->th_on = true;
	return 0;
}

/* The worker joined (it leaves between two buffers); the jobs' owners
 * end theirs after (src_stop, sink_close). */
static void gz_stop(struct gzw *g)
{
	if (!g->th_on)
		return;
	__atomic_store_n(&g->stop, true, __ATOMIC_RELEASE);
	rdc_bufq_bell_ring(g->bell);
	pthread_join(g->th, NULL);
	g->th_on = false;
}

static void gz_free(struct gzw *g)
{
	gz_stop(g);
	if (g->mu_on) {
		pthread_mutex_destroy(&g->imu);
		pthread_mutex_destroy(&g->omu);
	}
	rdc_bufq_bell_free(g->bell);
}

/* Back to the first byte, for the next pass. */
static int src_rewind(struct src *s)
{
	int r;

	src_stop(s);
	s->in_off = 0;
	s->pos = s->end = 0;
	s->raw_base = 0;
	s->zend = false;
	if (!s->gz)
		return 0;
#ifdef RDC_HAVE_ISAL
	if (!s->iz && !(s->iz = malloc(sizeof(*s->iz))))
		return -ENOMEM;
	/* ISAL_GZIP: the gzip header is parsed (its name and comment skipped)
	 * and the trailer's CRC and length checked, as zlib's 15 + 16 does. */
	isal_inflate_init(s->iz);
	s->iz->crc_flag = ISAL_GZIP;
	s->zinit = true;
#else
	s->z.next_in = NULL;
	s->z.avail_in = 0;
	if (s->zinit) {
		if (inflateReset(&s->z) != Z_OK)
			return -ENOMEM;
	} else {
		memset(&s->z, 0, sizeof(s->z));
		/* windowBits 15 + 16: gzip only, which is what the magic promised. */
		if (inflateInit2(&s->z, 15 + 16) != Z_OK)
			return -ENOMEM;
		s->zinit = true;
	}
#endif
	/* Inflating overlaps parsing: the gzip worker's job (ISA-L's inflate
	 * is a third of the time on one core), PR_IN_QBUFS x PR_CHUNK ahead. */
	if ((r = gz_start(s->gw)))
		return r;
	if (!s->iq) {
		if ((r = rdc_bufq_new(&s->iq, PR_IN_QBUFS, PR_CHUNK)))
			return r;
		rdc_bufq_set_bell(s->iq, s->gw->bell);
	}
	rdc_bufq_reset(s->iq);
	s->cur = NULL;
	pthread_mutex_lock(&s->gw->imu);
	s->gw->src = s;
	pthread_mutex_unlock(&s->gw->imu);
	s->job_on = true;
	rdc_bufq_bell_ring(s->gw->bell);
	return 0;
}

/* The oldest inflated buffer; while there is none, the parser runs a
 * codec itself (inflating first: that is what it waits for), else waits
 * on the bell. NULL only if the queue was closed. */
static struct rdc_bufq_buf *src_take(struct src *s)
{
	for (;;) {
		uint64_t seq = rdc_bufq_bell_seq(s->gw->bell);
		bool closed;
		struct rdc_bufq_buf *b = rdc_bufq_try_full(s->iq, &closed);
		if (b || closed)
			return b;
		if (!gz_inflate_step(s->gw) && !gz_deflate_step(s->gw))
			rdc_bufq_bell_wait(s->gw->bell, seq);
	}
}

/* Up to room inflated bytes into buf[end..): 1 some came, 0 the stream
 * ended with none, -EBADMSG, -E2BIG (the inflated cap), -errno. */
static int src_inflate(struct src *s, size_t room)
{
	for (;;) {
		if (!s->cur) {
			if (!(s->cur = src_take(s)))
				return -EIO; /* not closed while we read */
			s->cur_off = 0;
		}
		struct rdc_bufq_buf *b = s->cur;
		if (b->status < 0)
			return b->status;
		size_t k = b->len - s->cur_off;
		if (k > room)
			k = room;
		memcpy(s->buf + s->end, b->data + s->cur_off, k);
		s->end += k;
		s->cur_off += k;
		if (s->raw_base + s->end > RDC_PPROF_MAX_RAW)
			return -E2BIG;
		if (s->cur_off == b->len) {
			int st = b->status;
			rdc_bufq_release(s->iq, b);
			s->cur = NULL;
			if (st == 0) {
				s->zend = true;
				return k > 0;
			}
		}
		if (k)
			return 1;
	}
}

/*
 * More inflated bytes at buf[end..cap), the window its own: 1 some came,
 * 0 end of data, -errno. From the inflater, at most want (copied: the
 * window goes back to being lent as soon as it drains); from a file, as
 * many as fit.
 */
static int src_fill(struct src *s, size_t want)
{
	size_t room = s->cap - s->end, got;
	int r;

	if (!room)
		return -E2BIG;
	if (!s->gz) {
		if ((r = src_pread(s, s->buf + s->end, room, &got)) < 0)
			return r;
		s->end += got;
		return got > 0;
	}
	if (s->zend)
		return 0;
	return src_inflate(s, want < room ? want : room);
}

/*
 * The window drained: lend it the rest of the inflater's current buffer
 * (or the next), no copy; most of the input is read so, only a field
 * that straddles two buffers is copied (src_unlend). 1, 0 at the end of
 * the data, -errno.
 */
static int src_lend(struct src *s)
{
	s->raw_base += s->end;
	s->pos = s->end = 0;
	if (s->lent) {
		rdc_bufq_release(s->iq, s->cur);
		s->cur = NULL;
		s->lent = false;
		s->buf = s->own;
		s->cap = s->own_cap;
	}
	for (;;) {
		if (s->zend)
			return 0;
		if (!s->cur) {
			if (!(s->cur = src_take(s)))
				return -EIO; /* not closed while we read */
			s->cur_off = 0;
		}
		struct rdc_bufq_buf *b = s->cur;
		if (b->status < 0)
			return b->status;
		size_t k = b->len - s->cur_off;
		if (k) {
			s->buf = b->data + s->cur_off;
			s->end = s->cap = k;
			s->cur_off = b->len;
			s->lent = true;
			if (s->raw_base + s->end > RDC_PPROF_MAX_RAW)
				return -E2BIG;
			if (b->status == 0)
				s->zend = true; /* the stream's last bytes */
			return 1;
		}
		int st = b->status;
		rdc_bufq_release(s->iq, b);
		s->cur = NULL;
		if (st == 0)
			s->zend = true;
	}
}

/* The lent window's unread bytes into the window's own buffer (at most
 * PR_CHUNK, which it holds), the queue's buffer given back. */
static void src_unlend(struct src *s)
{
	size_t k = s->end - s->pos;

	memcpy(s->own, s->buf + s->pos, k);
	rdc_bufq_release(s->iq, s->cur);
	s->cur = NULL;
	s->raw_base += s->pos;
	s->pos = 0;
	s->end = k;
	s->buf = s->own;
	s->cap = s->own_cap;
	s->lent = false;
}

/* Slide the unread bytes to the front of the window. */
static void src_slide(struct src *s)
{
	if (!s->pos)
		return;
	memmove(s->buf, s->buf + s->pos, s->end - s->pos);
	s->raw_base += s->pos;
	s->end -= s->pos;
	s->pos = 0;
}

/*
 * At least n unread bytes in the window (fewer only at the end of the
 * data, when *short_ok). 0, -EBADMSG (the data ended), -E2BIG, -errno.
 */
static int src_want(struct src *s, size_t n, bool short_ok)
{
	int r;

	if (s->end - s->pos >= n)
		return 0;
	if (n > PR_MAX_FIELD)
		return -E2BIG;
	if (s->iq && !s->lent && s->pos == s->end) {
		if ((r = src_lend(s)) < 0)
			return r;
		if (s->end - s->pos >= n)
			return 0;
	}
	if (s->lent)
		src_unlend(s);
	if (s->cap - s->pos < n + 16 || s->cap - s->end < PR_CHUNK / 4)
		src_slide(s);
	if (s->cap < n + 16) {
		size_t ncap = s->cap;
		while (ncap < n + 16)
			ncap *= 2;
		uint8_t *g = realloc(s->own, ncap);
		if (!g)
			return -ENOMEM;
		s->buf = s->own = g;
		s->cap = s->own_cap = ncap;
	}
	while (s->end - s->pos < n) {
		r = src_fill(s, n - (s->end - s->pos));
		if (r < 0)
			return r;
		if (!r)
			return short_ok ? 0 : -EBADMSG;
	}
	return 0;
}

/* Consume n bytes without needing them contiguous. */
static int src_skip(struct src *s, uint64_t n)
{
	while (n) {
		if (s->pos == s->end) {
			int r;
			if (s->iq) {
				r = src_lend(s);
			} else {
				s->raw_base += s->end;
				s->pos = s->end = 0;
				r = src_fill(s, SIZE_MAX);
			}
			if (r < 0)
				return r;
			if (!r)
				return -EBADMSG;
		}
		size_t k = s->end - s->pos;
		if (k > n)
			k = (size_t)n;
		s->pos += k;
		n -= k;
	}
	return 0;
}

/* ---- wire reading from a contiguous buffer */

struct rd {
	const uint8_t *p, *e;
};

static inline int rd_varint(struct rd *r, uint64_t *v)
{
	const uint8_t *p = r->p;
	uint64_t x = 0;

	/* Most numbers here (ids, string indices, tags) fit in one byte,
	 * most others (pids, label numbers, ids past 127) in two. */
	if (p < r->e && *p < 0x80) {
		*v = *p;
		r->p = p + 1;
		return 0;
	}
	if (r->e - p >= 2 && p[1] < 0x80) {
		*v = (uint64_t)(p[0] & 0x7f) | (uint64_t)p[1] << 7;
		r->p = p + 2;
		return 0;
	}
	for (unsigned i = 0; i < 10 && p < r->e; i++) {
		uint8_t b = *p++;
		x |= (uint64_t)(b & 0x7f) << (7 * i);
		if (!(b & 0x80)) {
			r->p = p;
			*v = x;
			return 0;
		}
	}
	return -EBADMSG;
}

/*
 * One field: its number, wire type, and the varint value or, for a
 * length-delimited one, its length with *data at its bytes. Groups, field
 * 0 and anything running past the end are malformed, as for protobuf-c.
 */
static inline int rd_field(struct rd *r, uint32_t *num, unsigned *wt, uint64_t *v,
			   const uint8_t **data)
{
	uint64_t tag;

	if (rd_varint(r, &tag) || (tag >> 3) == 0 || (tag >> 3) > 0x1fffffff)
		return -EBADMSG;
	*num = (uint32_t)(tag >> 3);
	*wt = tag & 7;
	switch (*wt) {
	case WT_VARINT:
		return rd_varint(r, v);
	case WT_I64:
	case WT_I32: {
		size_t w = *wt == WT_I64 ? 8 : 4;
		if ((size_t)(r->e - r->p) < w)
			return -EBADMSG;
		r->p += w;
		*v = 0;
		return 0;
	}
	case WT_LEN:
		if (rd_varint(r, v) || *v > (uint64_t)(r->e - r->p))
			return -EBADMSG;
		*data = r->p;
		r->p += *v;
		return 0;
	default:
		return -EBADMSG;
	}
}

/* A known scalar field must come as a varint. */
#define WANT_VARINT(wt) do { if ((wt) != WT_VARINT) return -EBADMSG; } while (0)
#define WANT_LEN(wt) do { if ((wt) != WT_LEN) return -EBADMSG; } while (0)

/* ---- input tables */

struct in_map {
	uint64_t id, start, limit, offset;
	int64_t file, build_id;
	bool has_functions, has_line_numbers;
	uint32_t out; /* output id, 0 not yet */
};

struct in_loc {
	uint64_t id, mapping_id, address, function_id;
	int64_t line;
	uint32_t out;
	bool has_line;
};

struct in_fn {
	uint64_t id;
	int64_t name, system_name, file, start_line;
	uint32_t out;
};

/* id -> position: positions themselves when ids are 1..n in order (every
 * writer's case), else a hash of the ids. */
struct id_index {
	bool dense;
	uint32_t *slot; /* position + 1, 0 empty */
	size_t mask;
};

/* ---- output tables */

struct out_map {
	uint64_t start, limit, offset;
	uint32_t file, build_id;
	bool has_functions, has_line_numbers;
};

struct out_loc {
	uint64_t mapping_id, address, function_id;
	int64_t line;
};

struct out_fn {
	uint32_t name, system_name, file;
	int64_t start_line;
};

/* Open addressing over an output array: slot holds index + 1. */
struct htab {
	uint32_t *slot;
	size_t cap, used;
};

struct kstr {
	uint32_t off, len;
};

/* ---- the gzip'd output */

struct sink {
	int fd;
#ifdef RDC_HAVE_ISAL
	struct isal_zstream *z;
	uint8_t *level_buf;
#else
	z_stream z;
#endif
	bool zinit;
	uint8_t *zout;
	uint64_t written;
	/* Whoever holds gz->omu alone touches the codec, zout, fd, written
	 * and zdone from sink_open to sink_finish (the deflate job); the
	 * parser fills cur and hands it over through oq. */
	struct rdc_bufq *oq;
	struct gzw *gw;
	bool job_on;
	bool zdone;   /* the last buffer deflated, or deflating failed */
	struct rdc_bufq_buf *cur;
};

struct pr {
	const struct rdc_policy *p;
	struct rdc_stats *st;
	struct src src;

	/* pass 1 */
	uint8_t *sflags;
	size_t nstr, sflags_cap;
	struct in_map *maps;
	size_t nmaps, maps_cap;
	struct in_loc *locs;
	size_t nlocs, locs_cap;
	struct in_fn *fns;
	size_t nfns, fns_cap;
	struct id_index map_ix, loc_ix, fn_ix;
	/* Output id of each input location by position, as loc_code encodes
	 * it (0 not made yet, LOC_KERNEL: a kernel frame, dropped), apart from
	 * the tables so the lookup per frame stays in cache. */
	uint32_t *loc_out;
	int64_t types[PP_MAX_VALUES][2];
	size_t ntypes;
	int64_t period_type[2], period, default_type, time_nanos, duration_nanos;
	bool has_period;
	int64_t *comments;
	size_t ncomments;
	uint64_t samples_end;  /* inflated offset past the last sample field */
	uint64_t nsamples;     /* sample fields seen by pass 1 */
	uint64_t strings_start;
	bool any_string;

	/* pass 2: input string -> output string (0: not used yet; "" is 0) */
	uint32_t *snew;
	struct kstr *kstr;
	size_t nk, kstr_cap;
	char *chars;
	size_t nchars, chars_cap;
	char **comment_text; /* with DLP: the comments' input text */

	struct out_map *omaps;
	size_t nomaps, omaps_cap;
	struct out_loc *olocs;
	size_t nolocs, olocs_cap;
	struct htab oloc_ht;
	struct out_fn *ofns;
	size_t nofns, ofns_cap;
	struct htab ofn_ht;

	/* one sample's fields, reused */
	uint64_t *sl;
	size_t sl_cap;
	/* A label's fields by name, and by field number - 1 (lab_set). */
	struct lab {
		union {
			struct { int64_t key, str, num, unit; };
			int64_t f[4];
		};
	} *lab;
	size_t lab_cap;
	uint8_t *enc;
	size_t enc_cap;

	struct sink out;
	int out_fd;
	struct gzw gz;

	/* One pass (strings and tables first): the input's strings as pass 1
	 * read them, up to PR_HELD_MAX, and the samples judged in pass 1 */
	bool held_ok;        /* every string so far is in held */
	char *held;
	size_t nheld, held_cap;
	struct kstr *hoff;   /* by input index */
	size_t hoff_cap;
	bool online, online_tried;
	uint64_t nonline;    /* the first nonline samples are written */
	size_t snew_n, loc_out_n;
};

/* Room for need elements in *arr (doubling, at most max). */
static int grow(void *arr, size_t *cap, size_t need, size_t elem, size_t max)
{
	void **a = arr;
	size_t n = *cap ? *cap : 64;

	if (need <= *cap)
		return 0;
	if (need > max)
		return -E2BIG;
	while (n < need)
		n *= 2;
	if (n > max)
		n = max;
	void *g = realloc(*a, n * elem);
	if (!g)
		return -ENOMEM;
	*a = g;
	*cap = n;
	return 0;
}

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

/* ---- pass 1: the tables */

static uint8_t str_flags(const uint8_t *s, size_t len)
{
	const uint8_t *nul = memchr(s, 0, len);
	if (nul)
		len = (size_t)(nul - s);
	uint8_t f = 0;
	if (!len)
		f |= S_EMPTY;
	if (len == 3 && !memcmp(s, "pid", 3))
		f |= S_PID | S_OWNID;
	if ((len == 3 && !memcmp(s, "tid", 3)) || (len == 9 && !memcmp(s, "thread_id", 9)))
		f |= S_OWNID;
	if (memmem(s, len, "pid", 3) || memmem(s, len, "tid", 3))
		f |= S_IDKEY;
	if (len >= 4 && len <= 6 && !memcmp(s, "arg", 3)) {
		size_t d = 3;
		while (d < len && s[d] >= '0' && s[d] <= '9')
			d++;
		if (d == len)
			f |= S_ARGKEY;
	}
	return f;
}

static int str_classify(struct pr *c, const uint8_t *s, size_t len)
{
	int r = grow(&c->sflags, &c->sflags_cap, c->nstr + 1, 1, PR_MAX_STRINGS);
	if (r)
		return r;
	uint8_t f = str_flags(s, len);
	/* pprof requires string_table[0] == "". */
	if (c->nstr == 0 && !(f & S_EMPTY))
		return -EBADMSG;
	c->sflags[c->nstr++] = f;
	return 0;
}

static int parse_vt(const uint8_t *p, size_t n, int64_t vt[2])
{
	struct rd r = { p, p + n };
	while (r.p < r.e) {
		uint32_t num;
		unsigned wt;
		uint64_t v;
		const uint8_t *d;
		if (rd_field(&r, &num, &wt, &v, &d))
			return -EBADMSG;
		if (num == 1 || num == 2) {
			WANT_VARINT(wt);
			vt[num - 1] = (int64_t)v;
		}
	}
	return 0;
}

static int parse_mapping(struct pr *c, const uint8_t *p, size_t n)
{
	int r = grow(&c->maps, &c->maps_cap, c->nmaps + 1, sizeof(*c->maps), PR_MAX_MAPPINGS);
	if (r)
		return r;
	struct in_map *m = &c->maps[c->nmaps];
	memset(m, 0, sizeof(*m));
	struct rd d = { p, p + n };
	while (d.p < d.e) {
		uint32_t num;
		unsigned wt;
		uint64_t v;
		const uint8_t *x;
		if (rd_field(&d, &num, &wt, &v, &x))
			return -EBADMSG;
		if (num > 10)
			continue;
		WANT_VARINT(wt);
		switch (num) {
		case 1: m->id = v; break;
		case 2: m->start = v; break;
		case 3: m->limit = v; break;
		case 4: m->offset = v; break;
		case 5: m->file = (int64_t)v; break;
		case 6: m->build_id = (int64_t)v; break;
		case 7: m->has_functions = v != 0; break;
		case 9: m->has_line_numbers = v != 0; break;
		default: break; /* has_filenames, has_inline_frames: not carried */
		}
	}
	c->nmaps++;
	return 0;
}

static int parse_location(struct pr *c, const uint8_t *p, size_t n)
{
	int r = grow(&c->locs, &c->locs_cap, c->nlocs + 1, sizeof(*c->locs), PR_MAX_ENTRIES);
	if (r)
		return r;
	struct in_loc *l = &c->locs[c->nlocs];
	memset(l, 0, sizeof(*l));
	struct rd d = { p, p + n };
	while (d.p < d.e) {
		uint32_t num;
		unsigned wt;
		uint64_t v;
		const uint8_t *x = NULL;
		if (rd_field(&d, &num, &wt, &v, &x))
			return -EBADMSG;
		switch (num) {
		case 1: WANT_VARINT(wt); l->id = v; break;
		case 2: WANT_VARINT(wt); l->mapping_id = v; break;
		case 3: WANT_VARINT(wt); l->address = v; break;
		case 5: WANT_VARINT(wt); break; /* is_folded */
		case 4: {
			/* The last line is the outermost: the real function. */
			WANT_LEN(wt);
			struct rd ln = { x, x + v };
			uint64_t fid = 0, line = 0;
			while (ln.p < ln.e) {
				uint32_t lnum;
				unsigned lwt;
				uint64_t lv;
				const uint8_t *y;
				if (rd_field(&ln, &lnum, &lwt, &lv, &y))
					return -EBADMSG;
				if (lnum == 1 || lnum == 2)
					WANT_VARINT(lwt);
				if (lnum == 1)
					fid = lv;
				else if (lnum == 2)
					line = lv;
			}
			l->function_id = fid;
			l->line = (int64_t)line;
			l->has_line = true;
			break;
		}
		default: break;
		}
	}
	c->nlocs++;
	return 0;
}

static int parse_function(struct pr *c, const uint8_t *p, size_t n)
{
	int r = grow(&c->fns, &c->fns_cap, c->nfns + 1, sizeof(*c->fns), PR_MAX_ENTRIES);
	if (r)
		return r;
	struct in_fn *f = &c->fns[c->nfns];
	memset(f, 0, sizeof(*f));
	struct rd d = { p, p + n };
	while (d.p < d.e) {
		uint32_t num;
		unsigned wt;
		uint64_t v;
		const uint8_t *x;
		if (rd_field(&d, &num, &wt, &v, &x))
			return -EBADMSG;
		if (num > 5)
			continue;
		WANT_VARINT(wt);
		switch (num) {
		case 1: f->id = v; break;
		case 2: f->name = (int64_t)v; break;
		case 3: f->system_name = (int64_t)v; break;
		case 4: f->file = (int64_t)v; break;
		case 5: f->start_line = (int64_t)v; break;
		}
	}
	c->nfns++;
	return 0;
}

static int add_comment(struct pr *c, int64_t idx)
{
	if (c->ncomments >= PR_MAX_COMMENTS)
		return -E2BIG;
	if (!c->comments && !(c->comments = malloc(PR_MAX_COMMENTS * sizeof(*c->comments))))
		return -ENOMEM;
	c->comments[c->ncomments++] = idx;
	return 0;
}

/*
 * The next top-level field's header. 1 a field (for WT_LEN, *v is its
 * length, its bytes next in the source), 0 the end, or -errno.
 */
static int next_field(struct src *s, uint32_t *num, unsigned *wt, uint64_t *v)
{
	/* src_want is 0 or -errno: "< 0" says so to the compiler, whose
	 * Release build otherwise sees a return > 0 that leaves *num unset. */
	int r = src_want(s, 32, true);
	if (r < 0)
		return r;
	if (s->pos == s->end)
		return 0;
	struct rd d = { s->buf + s->pos, s->buf + s->end };
	uint64_t tag;
	if (rd_varint(&d, &tag) || (tag >> 3) == 0 || (tag >> 3) > 0x1fffffff)
		return -EBADMSG;
	*num = (uint32_t)(tag >> 3);
	*wt = tag & 7;
	*v = 0;
	switch (*wt) {
	case WT_VARINT:
	case WT_LEN:
		if (rd_varint(&d, v))
			return -EBADMSG;
		break;
	case WT_I64:
		if (d.e - d.p < 8)
			return -EBADMSG;
		d.p += 8;
		break;
	case WT_I32:
		if (d.e - d.p < 4)
			return -EBADMSG;
		d.p += 4;
		break;
	default:
		return -EBADMSG;
	}
	s->pos = (size_t)(d.p - s->buf);
	return 1;
}

/* The field's bytes, contiguous in the window, consumed. */
static int field_bytes(struct src *s, uint64_t len, const uint8_t **p)
{
	if (len > PR_MAX_FIELD)
		return -E2BIG;
	int r = src_want(s, (size_t)len, false);
	if (r)
		return r;
	*p = s->buf + s->pos;
	s->pos += (size_t)len;
	return 0;
}

static uint64_t src_offset(const struct src *s)
{
	return s->raw_base + s->pos;
}

/* Packed or single repeated int64: the comments. */
static int take_comments(struct pr *c, unsigned wt, uint64_t v)
{
	if (wt == WT_VARINT)
		return add_comment(c, (int64_t)v);
	if (wt != WT_LEN)
		return -EBADMSG;
	const uint8_t *p;
	int r = field_bytes(&c->src, v, &p);
	if (r)
		return r;
	struct rd d = { p, p + v };
	while (d.p < d.e) {
		uint64_t x;
		if (rd_varint(&d, &x))
			return -EBADMSG;
		if ((r = add_comment(c, (int64_t)x)))
			return r;
	}
	return 0;
}

/* A field nobody reads in this pass: checked and passed over. */
static int skip_field(struct src *s, unsigned wt, uint64_t v)
{
	return wt == WT_LEN ? src_skip(s, v) : 0;
}

/*
 * Keep input string i's text (up to a first NUL, as str_flags reads it)
 * while all of them fit in PR_HELD_MAX: then no pass needs to come back
 * for them. Past the cap they are dropped at once, and a pass copies the
 * used ones as they go by again (pass_out).
 */
static int hold_string(struct pr *c, const uint8_t *p, size_t len)
{
	const uint8_t *nul = memchr(p, 0, len);
	if (nul)
		len = (size_t)(nul - p);
	if (!c->held_ok)
		return 0;
	if (c->nheld + len + c->nstr * sizeof(*c->hoff) > PR_HELD_MAX) {
		c->held_ok = false;
		free(c->held);
		free(c->hoff);
		c->held = NULL;
		c->hoff = NULL;
		c->nheld = c->held_cap = c->hoff_cap = 0;
		return 0;
	}
	int r = grow(&c->hoff, &c->hoff_cap, c->nstr, sizeof(*c->hoff), PR_MAX_STRINGS);
	if (r || (r = grow(&c->held, &c->held_cap, c->nheld + len + 1, 1, PR_HELD_MAX)))
		return r;
	memcpy(c->held + c->nheld, p, len);
	c->hoff[c->nstr - 1] = (struct kstr){ (uint32_t)c->nheld, (uint32_t)len };
	c->nheld += len;
	return 0;
}

static int online_start(struct pr *c);
static int sample(struct pr *c, const uint8_t *p, size_t n);

/*
 * A sample judged in pass 1 (one pass): 0, or -errno. When it names what
 * has not come yet, it and the samples after it wait for pass 2.
 */
static inline int sample_online(struct pr *c, const uint8_t *p, size_t n)
{
	int r = sample(c, p, n);
	if (r < 0)
		return r;
	if (r == 1)
		c->online = false;
	else
		c->nonline++;
	return 0;
}

static int pass1(struct pr *c)
{
	struct src *s = &c->src;
	int r;

	for (;;) {
		uint32_t num;
		unsigned wt;
		uint64_t v;
		const uint8_t *p;

		/* A sample judged here whose tag, length (under 2^14) and
		 * bytes are all in the window: straight to sample(), as the
		 * general path below would take it, without its calls. */
		if (c->online && s->end - s->pos >= 3 && s->buf[s->pos] == (2 << 3 | WT_LEN)) {
			const uint8_t *b = s->buf + s->pos;
			size_t len = b[1], hl = 2;
			if (len >= 0x80) {
				len = (len & 0x7f) | (size_t)b[2] << 7;
				hl = b[2] < 0x80 ? 3 : 0;
			}
			if (hl && s->end - s->pos - hl >= len) {
				s->pos += hl + len;
				if ((r = sample_online(c, b + hl, len)))
					return r;
				c->samples_end = src_offset(s);
				c->nsamples++;
				continue;
			}
		}
		uint64_t at = src_offset(s);
		if ((r = next_field(s, &num, &wt, &v)) <= 0)
			return r;
		switch (num) {
		case 1: { /* sample_type */
			int64_t vt[2] = { 0, 0 };
			WANT_LEN(wt);
			/* Samples written with one value fewer than there are
			 * types: what pass 2 would refuse too. */
			if (c->nonline)
				return -EBADMSG;
			if ((r = field_bytes(s, v, &p)) || (r = parse_vt(p, (size_t)v, vt)))
				return r;
			if (c->ntypes < PP_MAX_VALUES) {
				c->types[c->ntypes][0] = vt[0];
				c->types[c->ntypes][1] = vt[1];
			}
			if (c->ntypes <= PP_MAX_VALUES)
				c->ntypes++; /* one too many is enough to refuse */
			break;
		}
		case 2: /* sample: pass 2's, unless judged here (one pass) */
			WANT_LEN(wt);
			if (!c->online_tried) {
				c->online_tried = true;
				if ((r = online_start(c)))
					return r;
			}
			if (c->online) {
				if ((r = field_bytes(s, v, &p)) || (r = sample_online(c, p, (size_t)v)))
					return r;
			} else if ((r = src_skip(s, v))) {
				return r;
			}
			c->samples_end = src_offset(s);
			c->nsamples++;
			break;
		case 3:
		case 4:
		case 5:
			WANT_LEN(wt);
			c->online = false; /* the tables grow: pass 2 for the rest */
			if ((r = field_bytes(s, v, &p)))
				return r;
			r = num == 3 ? parse_mapping(c, p, (size_t)v) :
			    num == 4 ? parse_location(c, p, (size_t)v) : parse_function(c, p, (size_t)v);
			if (r)
				return r;
			break;
		case 6: /* string_table */
			WANT_LEN(wt);
			c->online = false;
			if (!c->any_string) {
				c->any_string = true;
				c->strings_start = at;
			}
			if ((r = field_bytes(s, v, &p)) || (r = str_classify(c, p, (size_t)v)) ||
			    (r = hold_string(c, p, (size_t)v)))
				return r;
			break;
		case 7: /* drop_frames, keep_frames: not carried */
		case 8:
			WANT_VARINT(wt);
			break;
		case 9:
			WANT_VARINT(wt);
			c->time_nanos = (int64_t)v;
			break;
		case 10:
			WANT_VARINT(wt);
			c->duration_nanos = (int64_t)v;
			break;
		case 11: /* period_type: a second one merges into the first */
			WANT_LEN(wt);
			if ((r = field_bytes(s, v, &p)) || (r = parse_vt(p, (size_t)v, c->period_type)))
				return r;
			c->has_period = true;
			break;
		case 12:
			WANT_VARINT(wt);
			c->period = (int64_t)v;
			break;
		case 13:
			if ((r = take_comments(c, wt, v)))
				return r;
			break;
		case 14:
			WANT_VARINT(wt);
			c->default_type = (int64_t)v;
			break;
		default:
			if ((r = skip_field(s, wt, v)))
				return r;
		}
	}
}

/* Index the ids of one table; a repeated id is malformed. */
static int index_ids(struct id_index *ix, const void *arr, size_t n, size_t elem)
{
	/* Every table struct starts with its uint64 id. */
#define ID_AT(i) (*(const uint64_t *)((const char *)arr + (i) * elem))
	ix->dense = true;
	for (size_t i = 0; i < n && ix->dense; i++)
		ix->dense = ID_AT(i) == i + 1;
	if (ix->dense)
		return 0;
	size_t cap = 64;
	while (cap < n * 2)
		cap *= 2;
	ix->slot = calloc(cap, sizeof(*ix->slot));
	if (!ix->slot)
		return -ENOMEM;
	ix->mask = cap - 1;
	for (size_t i = 0; i < n; i++) {
		size_t j = mix64(ID_AT(i)) & ix->mask;
		for (; ix->slot[j]; j = (j + 1) & ix->mask)
			if (ID_AT(ix->slot[j] - 1) == ID_AT(i))
				return -EBADMSG;
		ix->slot[j] = (uint32_t)(i + 1);
	}
	return 0;
}

/* Position of id in its table, or -1. */
static ssize_t find_id(const struct id_index *ix, const void *arr, size_t n, size_t elem,
		       uint64_t id)
{
	if (ix->dense)
		return id >= 1 && id <= n ? (ssize_t)(id - 1) : -1;
	for (size_t j = mix64(id) & ix->mask; ix->slot[j]; j = (j + 1) & ix->mask)
		if (ID_AT(ix->slot[j] - 1) == id)
			return (ssize_t)(ix->slot[j] - 1);
	return -1;
#undef ID_AT
}

/* ---- output strings */

static bool in_table(const struct pr *c, int64_t i)
{
	return i >= 0 && (uint64_t)i < c->nstr;
}

/* str_use for a string not used yet: its output index given now. */
static int64_t str_first_use(struct pr *c, int64_t i)
{
	int r = grow(&c->kstr, &c->kstr_cap, c->nk + 1, sizeof(*c->kstr), PR_MAX_STRINGS);
	if (r)
		return r;
	c->kstr[c->nk] = (struct kstr){ UINT32_MAX, 0 }; /* copied when it goes by */
	c->snew[i] = (uint32_t)c->nk;
	return (int64_t)c->nk++;
}

/* Output index of input string i (marked for copying), 0 for "", or
 * -EBADMSG when i is not in the table. Inline: a kept sample's labels
 * call it twice each (400k calls on the bench), almost always for a
 * string already used. */
static inline int64_t str_use(struct pr *c, int64_t i)
{
	if (!in_table(c, i))
		return -EBADMSG;
	if (c->sflags[i] & S_EMPTY)
		return 0;
	if (c->snew[i])
		return c->snew[i];
	return str_first_use(c, i);
}

/* Like str_use, but an index out of the table is "" (the old NULL). */
static int64_t str_use_or_empty(struct pr *c, int64_t i)
{
	int64_t r = str_use(c, i);
	return r == -EBADMSG ? 0 : r;
}

static int chars_put(struct pr *c, const void *s, size_t len, uint32_t *off)
{
	int r = grow(&c->chars, &c->chars_cap, c->nchars + len + 1, 1, PR_MAX_CHARS);
	if (r)
		return r;
	memcpy(c->chars + c->nchars, s, len);
	*off = (uint32_t)c->nchars;
	c->nchars += len;
	return 0;
}

/* A new output string of our own making (a scrubbed comment). */
static int64_t str_new(struct pr *c, const char *s)
{
	size_t len = strlen(s);
	uint32_t off;
	int r;

	if (!len)
		return 0;
	if ((r = grow(&c->kstr, &c->kstr_cap, c->nk + 1, sizeof(*c->kstr), PR_MAX_STRINGS)) ||
	    (r = chars_put(c, s, len, &off)))
		return r;
	c->kstr[c->nk] = (struct kstr){ off, (uint32_t)len };
	return (int64_t)c->nk++;
}

/* ---- output: staged, deflated, written */

/* Deflate in[0..n) (and end the stream when finish) and write what comes
 * out. Only under gzw.omu (the deflate job's holder). */
#ifdef RDC_HAVE_ISAL
static int sink_pump(struct sink *o, const uint8_t *in, size_t n, bool finish)
{
	struct isal_zstream *z = o->z;
	unsigned idle = 0;

	z->next_in = (uint8_t *)in;
	z->avail_in = (uint32_t)n;
	z->end_of_stream = finish;
	z->flush = NO_FLUSH;
	for (;;) {
		z->next_out = o->zout;
		z->avail_out = PR_OUT_STAGE;
		uint32_t had = z->avail_in;
		if (isal_deflate(z) != COMP_OK)
			return -EIO;
		size_t have = PR_OUT_STAGE - z->avail_out;
		if (have) {
			int r = util_write_all(o->fd, o->zout, have);
			if (r)
				return r;
			o->written += have;
		}
		/* Done when all was taken and, to finish, the trailer is out. */
		if (z->avail_out && !z->avail_in &&
		    (!finish || z->internal_state.state == ZSTATE_END))
			break;
		/* Neither side moved, time after time: a stuck stream. */
		idle = !have && z->avail_in == had ? idle + 1 : 0;
		if (idle > 8)
			return -EIO;
	}
	return 0;
}
#else
static int sink_pump(struct sink *o, const uint8_t *in, size_t n, bool finish)
{
	int flush = finish ? Z_FINISH : Z_NO_FLUSH, zr;

	o->z.next_in = (Bytef *)in;
	o->z.avail_in = (uInt)n;
	do {
		o->z.next_out = o->zout;
		o->z.avail_out = PR_OUT_STAGE;
		zr = deflate(&o->z, flush);
		if (zr == Z_STREAM_ERROR)
			return -EIO;
		size_t have = PR_OUT_STAGE - o->z.avail_out;
		if (have) {
			int r = util_write_all(o->fd, o->zout, have);
			if (r)
				return r;
			o->written += have;
		}
	} while (o->z.avail_out == 0);
	if (finish && zr != Z_STREAM_END)
		return -EIO;
	return 0;
}
#endif

/*
 * One buffer of the deflate job, by whichever thread gets the codec: 1
 * done, 0 nothing to do. The full buffers are deflated and written in
 * order; status 1 marks the last (the stream ends with it, and so does
 * the job). A failure closes the queue with its error, which the parser
 * reads at its next handoff. Memory: PR_OUT_QBUFS x PR_OUT_STAGE (the
 * queue's cap); at the cap the parser deflates or waits.
 */
static int gz_deflate_step(struct gzw *g)
{
	struct rdc_bufq_buf *b;
	int did = 0;

	if (pthread_mutex_trylock(&g->omu))
		return 0;
	struct sink *o = g->sink;
	if (o && (b = rdc_bufq_try_full(o->oq, NULL))) {
		bool last = b->status == 1;
		int r = sink_pump(o, b->data, b->len, last);
		if (r || last) {
			o->zdone = true;
			g->sink = NULL;
		}
		/* Both ring the bell after zdone is set: sink_finish sees it. */
		rdc_bufq_release(o->oq, b);
		if (r)
			rdc_bufq_close(o->oq, r);
		did = 1;
	}
	pthread_mutex_unlock(&g->omu);
	return did;
}

/* A free output buffer; while there is none, the parser deflates itself
 * (what it waits for), else inflates ahead, else waits on the bell. NULL
 * once deflating failed. */
static struct rdc_bufq_buf *sink_take(struct sink *o)
{
	for (;;) {
		uint64_t seq = rdc_bufq_bell_seq(o->gw->bell);
		bool closed;
		struct rdc_bufq_buf *b = rdc_bufq_try_free(o->oq, &closed);
		if (b || closed)
			return b;
		if (!gz_deflate_step(o->gw) && !gz_inflate_step(o->gw))
			rdc_bufq_bell_wait(o->gw->bell, seq);
	}
}

/* The error that stopped the deflater, or -EIO when it stopped unasked. */
static int sink_err(struct sink *o)
{
	int r = rdc_bufq_err(o->oq);
	return r ? r : -EIO;
}

static int sink_put(struct sink *o, const void *p, size_t n)
{
	const uint8_t *b = p;
	size_t size = PR_OUT_STAGE;

	while (n) {
		if (!o->cur && !(o->cur = sink_take(o)))
			return sink_err(o);
		size_t k = size - o->cur->len;
		if (k > n)
			k = n;
		memcpy(o->cur->data + o->cur->len, b, k);
		o->cur->len += k;
		b += k;
		n -= k;
		if (o->cur->len == size) {
			rdc_bufq_push(o->oq, o->cur);
			o->cur = NULL;
		}
	}
	return 0;
}

/*
 * Room for n bytes in the buffer being filled, to write in place and
 * then sink_commit: NULL when it has less left (or no buffer came: a
 * failed deflate, which sink_put then reports), so what is written
 * through the sink is cut into buffers the same way either route.
 */
static uint8_t *sink_room(struct sink *o, size_t n)
{
	if (!o->cur && !(o->cur = sink_take(o)))
		return NULL;
	if (PR_OUT_STAGE - o->cur->len < n)
		return NULL;
	return o->cur->data + o->cur->len;
}

/* The n bytes written at sink_room's pointer, handed on when it is full. */
static void sink_commit(struct sink *o, size_t n)
{
	o->cur->len += n;
	if (o->cur->len == PR_OUT_STAGE) {
		rdc_bufq_push(o->oq, o->cur);
		o->cur = NULL;
	}
}

/* The last bytes and the stream's end, the parser deflating beside the
 * worker until the job is done: 0 when every byte was deflated and
 * written. */
static int sink_finish(struct sink *o)
{
	if (!o->cur && !(o->cur = sink_take(o)))
		return sink_err(o);
	o->cur->status = 1;
	rdc_bufq_push(o->oq, o->cur);
	o->cur = NULL;
	for (;;) {
		uint64_t seq = rdc_bufq_bell_seq(o->gw->bell);
		pthread_mutex_lock(&o->gw->omu);
		bool done = o->zdone;
		pthread_mutex_unlock(&o->gw->omu);
		if (done)
			break;
		if (!gz_deflate_step(o->gw))
			rdc_bufq_bell_wait(o->gw->bell, seq);
	}
	o->job_on = false;
	return rdc_bufq_err(o->oq);
}

static int sink_open(struct sink *o, int fd)
{
	int r;

	o->fd = fd;
	o->zout = malloc(PR_OUT_STAGE);
	if (!o->zout)
		return -ENOMEM;
#ifdef RDC_HAVE_ISAL
	/* ISA-L's level 1 (its fastest with a real hash): ~8x zlib's level 1
	 * here for a few % more bytes (redact/README.md). */
	o->z = malloc(sizeof(*o->z));
	o->level_buf = malloc(ISAL_DEF_LVL1_DEFAULT);
	if (!o->z || !o->level_buf)
		return -ENOMEM;
	isal_deflate_init(o->z);
	o->z->level = 1;
	o->z->level_buf = o->level_buf;
	o->z->level_buf_size = ISAL_DEF_LVL1_DEFAULT;
	o->z->gzip_flag = IGZIP_GZIP;
#else
	/* Fastest level: half of deflate-6's time for ~6 % more bytes, and
	 * deflate is most of this redactor's time (bench/redact_throughput). */
	if (deflateInit2(&o->z, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
#endif
	o->zinit = true;
	/* Deflating overlaps parsing: the gzip worker's job. */
	if ((r = gz_start(o->gw)) || (r = rdc_bufq_new(&o->oq, PR_OUT_QBUFS, PR_OUT_STAGE)))
		return r;
	rdc_bufq_set_bell(o->oq, o->gw->bell);
	pthread_mutex_lock(&o->gw->omu);
	o->gw->sink = o;
	pthread_mutex_unlock(&o->gw->omu);
	o->job_on = true;
	return 0;
}

static void sink_close(struct sink *o)
{
	/* An error in the parser: the job ends after the buffer being
	 * deflated, what is not taken yet left undeflated. */
	if (o->job_on) {
		pthread_mutex_lock(&o->gw->omu);
		o->gw->sink = NULL;
		pthread_mutex_unlock(&o->gw->omu);
		o->job_on = false;
	}
	rdc_bufq_free(o->oq);
#ifdef RDC_HAVE_ISAL
	free(o->z);
	free(o->level_buf);
#else
	if (o->zinit)
		deflateEnd(&o->z);
#endif
	free(o->zout);
}

static inline uint8_t *put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

static inline size_t varint_len(uint64_t v)
{
	/* 7 bits a byte: (bits + 6) / 7, one byte for 0. */
	return v < 0x80 ? 1 : (size_t)(64 - __builtin_clzll(v) + 6) / 7;
}

/*
 * An output location id as loc_out holds it: its varint bytes (ids are
 * under 2^20, PR_MAX_ENTRIES: at most three) in the low bytes, their
 * count in the top one; put_code writes it without a loop. Nonzero, and
 * never LOC_KERNEL (count 0: the frame loop skips a kernel frame without
 * a branch, put_code moving by nothing).
 */
static uint32_t loc_code(uint32_t id)
{
	uint8_t b[10];
	size_t n = (size_t)(put_varint(b, id) - b);
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)n << 24;
}

/* Three bytes stored whatever the length: the caller has the room. */
static inline uint8_t *put_code(uint8_t *e, uint32_t x)
{
	e[0] = (uint8_t)x;
	e[1] = (uint8_t)(x >> 8);
	e[2] = (uint8_t)(x >> 16);
	return e + (x >> 24);
}

/* A scalar field, left out when zero (proto3, as protobuf-c writes it). */
static inline uint8_t *put_uint(uint8_t *p, unsigned num, uint64_t v)
{
	if (!v)
		return p;
	*p++ = (uint8_t)(num << 3);
	return put_varint(p, v);
}

/* Top-level field num (< 16) holding body[0..n). */
static int put_msg(struct pr *c, unsigned num, const uint8_t *body, size_t n)
{
	uint8_t hdr[11], *h = hdr;
	*h++ = (uint8_t)(num << 3 | WT_LEN);
	h = put_varint(h, n);
	int r = sink_put(&c->out, hdr, (size_t)(h - hdr));
	return r ? r : sink_put(&c->out, body, n);
}

/* Scratch space for one encoded message of at most n bytes. */
static int enc_room(struct pr *c, size_t n)
{
	return grow(&c->enc, &c->enc_cap, n, 1, SIZE_MAX / 2);
}

/* ---- pass 2: the samples */

static bool is_foreign_label(const struct pr *c, uint8_t kf, int64_t num)
{
	if ((kf & S_OWNID) || !(kf & S_IDKEY))
		return false;
	return !rdc_is_app_pid(c->p, (int32_t)num) && !rdc_is_app_tid(c->p, (int32_t)num);
}

static uint32_t loc_hash(const struct out_loc *k)
{
	uint64_t h = 0x9e3779b97f4a7c15ull;
	h = mix64(h ^ k->mapping_id) + 0x9e3779b97f4a7c15ull;
	h = mix64(h ^ k->address) + 0x9e3779b97f4a7c15ull;
	h = mix64(h ^ k->function_id) + 0x9e3779b97f4a7c15ull;
	h = mix64(h ^ (uint64_t)k->line);
	return (uint32_t)(h ^ (h >> 32));
}

/* Room for one more at load <= 1/2: 0, or 1 when the table was replaced
 * by an empty one twice the size (the caller re-inserts), or -ENOMEM. */
static int ht_reserve(struct htab *h)
{
	if ((h->used + 1) * 2 <= h->cap)
		return 0;
	size_t ncap = h->cap ? h->cap * 2 : 256;
	uint32_t *ns = calloc(ncap, sizeof(*ns));
	if (!ns)
		return -ENOMEM;
	free(h->slot);
	h->slot = ns;
	h->cap = ncap;
	h->used = 0;
	return 1; /* rehash needed */
}

static uint32_t fn_hash(uint32_t name, uint32_t file)
{
	uint64_t h = mix64(((uint64_t)name << 32 | file) ^ 0x9e3779b97f4a7c15ull);
	return (uint32_t)(h ^ (h >> 32));
}

static void ht_insert(struct htab *h, uint32_t hash, size_t idx)
{
	size_t j = hash & (h->cap - 1);
	while (h->slot[j])
		j = (j + 1) & (h->cap - 1);
	h->slot[j] = (uint32_t)(idx + 1);
	h->used++;
}

/* Output function for (name, file), made from input function f if new. */
static int out_function(struct pr *c, const struct in_fn *f, uint32_t *id)
{
	int64_t name = str_use(c, f->name), file, sys;
	int r;

	if (name < 0)
		return (int)name; /* a function with no name: malformed */
	if ((file = str_use_or_empty(c, f->file)) < 0)
		return (int)file;
	uint32_t h = fn_hash((uint32_t)name, (uint32_t)file);
	if ((r = ht_reserve(&c->ofn_ht)) < 0)
		return r;
	if (r)
		for (size_t i = 0; i < c->nofns; i++)
			ht_insert(&c->ofn_ht, fn_hash(c->ofns[i].name, c->ofns[i].file), i);
	size_t j = h & (c->ofn_ht.cap - 1);
	for (; c->ofn_ht.slot[j]; j = (j + 1) & (c->ofn_ht.cap - 1)) {
		const struct out_fn *o = &c->ofns[c->ofn_ht.slot[j] - 1];
		if (o->name == (uint32_t)name && o->file == (uint32_t)file) {
			*id = c->ofn_ht.slot[j];
			return 0;
		}
	}
	/* system_name out of the table means "same as name", as it did. */
	sys = f->system_name < 0 || (uint64_t)f->system_name >= c->nstr ? name :
	      str_use(c, f->system_name);
	if (sys < 0)
		return (int)sys;
	if ((r = grow(&c->ofns, &c->ofns_cap, c->nofns + 1, sizeof(*c->ofns), PR_MAX_ENTRIES)))
		return r;
	c->ofns[c->nofns] = (struct out_fn){ (uint32_t)name, (uint32_t)sys, (uint32_t)file,
					     f->start_line };
	ht_insert(&c->ofn_ht, h, c->nofns);
	*id = (uint32_t)++c->nofns;
	return 0;
}

static int out_mapping(struct pr *c, struct in_map *m, uint32_t *id)
{
	int64_t file, bid;
	int r;

	if (m->out) {
		*id = m->out;
		return 0;
	}
	if (m->limit < m->start)
		return -EBADMSG;
	if ((file = str_use_or_empty(c, m->file)) < 0)
		return (int)file;
	if ((bid = str_use_or_empty(c, m->build_id)) < 0)
		return (int)bid;
	if ((r = grow(&c->omaps, &c->omaps_cap, c->nomaps + 1, sizeof(*c->omaps), PR_MAX_MAPPINGS)))
		return r;
	c->omaps[c->nomaps] = (struct out_map){ m->start, m->limit, m->offset, (uint32_t)file,
						(uint32_t)bid, m->has_functions,
						m->has_line_numbers };
	m->out = *id = (uint32_t)++c->nomaps;
	return 0;
}

/* Output location of input location l, 0 for a kernel frame. */
static int out_location(struct pr *c, struct in_loc *l, uint64_t *id)
{
	uint32_t mid = 0, fid = 0;
	int r;

	if (l->out) {
		*id = l->out;
		return 0;
	}
	*id = 0;
	if (l->address >= RDC_KERNEL_START)
		return 0;
	if (l->mapping_id) {
		ssize_t mi = find_id(&c->map_ix, c->maps, c->nmaps, sizeof(*c->maps), l->mapping_id);
		if (mi < 0)
			return -EBADMSG;
		if (c->maps[mi].start >= RDC_KERNEL_START)
			return 0;
		if ((r = out_mapping(c, &c->maps[mi], &mid)))
			return r;
	}
	struct out_loc k = { mid, l->address, 0, 0 };
	if (l->has_line) {
		ssize_t fi = find_id(&c->fn_ix, c->fns, c->nfns, sizeof(*c->fns), l->function_id);
		if (fi < 0)
			return -EBADMSG;
		struct in_fn *f = &c->fns[fi];
		if (!f->out && (r = out_function(c, f, &f->out)))
			return r;
		fid = f->out;
		k.function_id = fid;
		k.line = l->line;
	}
	/* Keyed by (mapping, address); address 0 (no real address) by its
	 * function and line too, as common/pprof.c does. */
	struct out_loc key = { mid, l->address, l->address ? 0 : fid, l->address ? 0 : k.line };
	uint32_t h = loc_hash(&key);
	if ((r = ht_reserve(&c->oloc_ht)) < 0)
		return r;
	if (r)
		for (size_t i = 0; i < c->nolocs; i++) {
			const struct out_loc *o = &c->olocs[i];
			struct out_loc ok = { o->mapping_id, o->address, o->address ? 0 : o->function_id,
					      o->address ? 0 : o->line };
			ht_insert(&c->oloc_ht, loc_hash(&ok), i);
		}
	size_t j = h & (c->oloc_ht.cap - 1);
	for (; c->oloc_ht.slot[j]; j = (j + 1) & (c->oloc_ht.cap - 1)) {
		const struct out_loc *o = &c->olocs[c->oloc_ht.slot[j] - 1];
		if (o->mapping_id == key.mapping_id && o->address == key.address &&
		    (key.address || (o->function_id == key.function_id && o->line == key.line))) {
			l->out = c->oloc_ht.slot[j];
			*id = l->out;
			return 0;
		}
	}
	if ((r = grow(&c->olocs, &c->olocs_cap, c->nolocs + 1, sizeof(*c->olocs), PR_MAX_ENTRIES)))
		return r;
	c->olocs[c->nolocs] = k;
	ht_insert(&c->oloc_ht, h, c->nolocs);
	l->out = (uint32_t)++c->nolocs;
	*id = l->out;
	return 0;
}

static bool labels_settled(const struct pr *c, size_t nv, size_t nlab);
static bool frames_settled(struct pr *c, size_t nl);

/* Label field f (1 key, 2 str, 3 num, 4 num_unit) of lb: an indexed
 * store, not a switch (whose branch the key/num/key/str mix of every
 * sample's labels mispredicted). */
static inline void lab_set(struct lab *lb, unsigned f, int64_t v)
{
	lb->f[(f - 1) & 3] = v;
}

/*
 * Frames of one packed location_id field: their count, or -EBADMSG when
 * a varint runs past the field or over 10 bytes (what rd_varint refuses).
 * Checked for every sample, kept or not, so a malformed one is refused
 * whoever it belongs to, as when every frame was decoded.
 */
static ssize_t packed_count(const uint8_t *p, const uint8_t *e)
{
	const uint64_t top = 0x8080808080808080ull;
	size_t n = 0, run = 0; /* run: continuation bytes since the last end */

	/*
	 * Eight bytes at a time (this was a fifth of sample() a byte at a
	 * time): a byte under 0x80 ends a varint. A run of 10 continuation
	 * bytes cannot fit inside one word past its first end, so it is seen
	 * where words meet: the run carried in, plus the word's leading
	 * continuation bytes (all 8 when it has no end).
	 */
	while (e - p >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
		w = __builtin_bswap64(w);
#endif
		uint64_t ends = ~w & top;
		n += (size_t)(((ends >> 7) * 0x0101010101010101ull) >> 56);
		if (!ends) {
			run += 8;
		} else {
			run += (size_t)__builtin_ctzll(ends) >> 3;
			if (run >= 10)
				return -EBADMSG;
			run = (size_t)__builtin_clzll(ends) >> 3;
		}
		if (run >= 10)
			return -EBADMSG;
		p += 8;
	}
	for (; p < e; p++) {
		size_t more = *p >> 7;
		run = (run + 1) * more;
		n += more ^ 1;
		if (run >= 10)
			return -EBADMSG;
	}
	return run ? -EBADMSG : (ssize_t)n;
}

/* packed_count, and the frames cap: 0 with *n, or -errno. */
static int packed_check(const uint8_t *p, const uint8_t *e, size_t *n)
{
	ssize_t k = packed_count(p, e);

	if (k < 0)
		return (int)k;
	if ((size_t)k > PR_MAX_FRAMES)
		return -E2BIG;
	*n = (size_t)k;
	return 0;
}

/* Decode a packed field checked by packed_count into c->sl[nl..). */
static int packed_decode(struct pr *c, const uint8_t *p, const uint8_t *e, size_t *nl,
			 size_t n)
{
	struct rd pk = { p, e };
	int r;

	if (*nl + n > c->sl_cap &&
	    (r = grow(&c->sl, &c->sl_cap, *nl + n, sizeof(*c->sl), PR_MAX_FRAMES)))
		return r;
	while (pk.p < pk.e)
		if (rd_varint(&pk, &c->sl[(*nl)++]))
			return -EBADMSG;
	return 0;
}

/*
 * A kept sample's packed frames [x, pe) straight into output ids at e,
 * while every one is a location already made: the end of what it wrote,
 * or NULL for the general path (a location not made yet, an id out of
 * the table, a bad varint: sample() then checks the field as
 * packed_check does, and refuses it there). The table and its length
 * come as arguments: read through c in sample() they were loaded again
 * per frame, as the stores through e may alias c (callgrind on the
 * bench profile: 931 -> 910 M instructions with the labels below).
 *
 * Ids under 2^14 (a profile's first 16383 locations) are read without
 * a branch on their length, which the mix of one- and two-byte ids
 * mispredicts; longer ones through rd_varint. A code is stored as four
 * bytes at once: what passes its length is overwritten by what follows
 * (the room is there, sample()'s bound), so a kernel frame (length 0)
 * needs no branch either.
 */
static uint8_t *frames_fast(const uint8_t *x, const uint8_t *pe, const uint32_t *lo,
			    size_t nlocs, uint8_t *e, size_t *kernel)
{
	size_t k = 0;

	while (x < pe) {
		uint64_t lid;
		if (pe - x >= 2 && !(x[0] & x[1] & 0x80)) {
			uint64_t two = x[0] >> 7;
			lid = (x[0] & 0x7fu) | (((uint64_t)x[1] << 7) & (0 - two));
			x += 1 + two;
		} else {
			struct rd pk = { x, pe };
			if (rd_varint(&pk, &lid))
				return NULL;
			x = pk.p;
		}
		uint32_t o = lid - 1 < nlocs ? lo[lid - 1] : 0;
		if (!o)
			return NULL;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
		memcpy(e, &o, sizeof(o));
		e += o >> 24;
#else
		e = put_code(e, o);
#endif
		k += !(o >> 24);
	}
	*kernel = k;
	return e;
}

/*
 * One sample: judged, and written when it is the app's (0); in pass 1,
 * 1 when it cannot be judged yet.
 *
 * Cheapest first, as half the samples or more are not the app's: the
 * fields are walked once, a packed location_id field (every writer's)
 * only counted; the pid label decides; only a kept sample's frames are
 * decoded, straight into output ids while every one is a location
 * already made (the common case once the hot frames have been seen).
 */
static int sample(struct pr *c, const uint8_t *p, size_t n)
{
	size_t nl = 0, nv = 0, nlab = 0, npk = 0;
	int64_t values[PP_MAX_VALUES];
	struct rd d = { p, p + n };
	/* The one packed location_id field, not yet decoded into c->sl. */
	const uint8_t *pk_p = NULL, *pk_e = NULL;
	int r;

	while (d.p < d.e) {
		uint32_t num;
		unsigned wt;
		uint64_t v;
		const uint8_t *x = NULL;
		/* Fields 1-3 with a one-byte length, every writer's sample:
		 * read without the general path. */
		uint8_t tag = *d.p;
		if ((tag == 0x0a || tag == 0x12 || tag == 0x1a) && d.e - d.p >= 2 && d.p[1] < 0x80 &&
		    d.p[1] <= d.e - d.p - 2) {
			num = tag >> 3;
			wt = WT_LEN;
			v = d.p[1];
			x = d.p + 2;
			d.p = x + v;
		} else if (rd_field(&d, &num, &wt, &v, &x)) {
			return -EBADMSG;
		}
		if (num == 1 && wt == WT_LEN && !nl && !pk_p) {
			/* Counted and checked once the sample is judged: a kept
			 * one's frames are checked as they are decoded. */
			pk_p = x;
			pk_e = x + v;
		} else if (num == 1 || num == 2) {
			/* Packed, or one number per field: both are valid. */
			struct rd pk = { NULL, NULL };
			uint64_t one = v;
			if (wt != WT_LEN && wt != WT_VARINT)
				return -EBADMSG;
			/* A second location_id field: the frames in order. */
			if (num == 1 && pk_p) {
				if ((r = packed_check(pk_p, pk_e, &npk)) ||
				    (r = packed_decode(c, pk_p, pk_e, &nl, npk)))
					return r;
				pk_p = pk_e = NULL;
				npk = 0;
			}
			if (wt == WT_LEN)
				pk = (struct rd){ x, x + v };
			/* Room for as many ids as bytes, at most the cap, once:
			 * not a call per frame. */
			if (num == 1 && wt == WT_LEN && nl + v > c->sl_cap &&
			    (r = grow(&c->sl, &c->sl_cap, nl + v < PR_MAX_FRAMES ? nl + v : PR_MAX_FRAMES,
				      sizeof(*c->sl), PR_MAX_FRAMES)))
				return r;
			while (wt == WT_VARINT || pk.p < pk.e) {
				if (wt == WT_LEN && rd_varint(&pk, &one))
					return -EBADMSG;
				if (num == 1) {
					if (nl == c->sl_cap &&
					    (r = grow(&c->sl, &c->sl_cap, nl + 1, sizeof(*c->sl),
						      PR_MAX_FRAMES)))
						return r;
					c->sl[nl++] = one;
				} else {
					if (nv < PP_MAX_VALUES)
						values[nv] = (int64_t)one;
					nv++;
				}
				if (wt == WT_VARINT)
					break;
			}
		} else if (num == 3) {
			WANT_LEN(wt);
			if (nlab == c->lab_cap &&
			    (r = grow(&c->lab, &c->lab_cap, nlab + 1, sizeof(*c->lab), PR_MAX_SLABELS)))
				return r;
			/* Straight into the label, field by field: a copy of a
			 * local array made here waited on its own stores. */
			struct lab *lb = &c->lab[nlab];
			lb->key = lb->str = lb->num = lb->unit = 0;
			struct rd lr = { x, x + v };
			while (lr.p < lr.e) {
				uint32_t ln;
				unsigned lwt;
				uint64_t lval;
				const uint8_t *y;
				/* Fields 1-4 as varints (tags 0x08..0x20): every
				 * writer's label, read without the general path. */
				uint8_t t = *lr.p;
				if ((t & 7) == WT_VARINT && t >= 0x08 && t <= 0x20) {
					lr.p++;
					if (rd_varint(&lr, &lval))
						return -EBADMSG;
					lab_set(lb, t >> 3, (int64_t)lval);
					continue;
				}
				if (rd_field(&lr, &ln, &lwt, &lval, &y))
					return -EBADMSG;
				if (ln >= 1 && ln <= 4) {
					WANT_VARINT(lwt);
					lab_set(lb, ln, (int64_t)lval);
				}
			}
			nlab++;
		}
	}
	/* In pass 1, a sample that names what has not come yet waits. A
	 * sample not the app's reaches nothing of its frames: judged on its
	 * labels alone. */
	if (c->online && !labels_settled(c, nv, nlab))
		return 1;
	if (nv != c->ntypes)
		return -EBADMSG;

	/* The sample's process: its first numeric "pid" label. */
	int64_t pid = -1;
	for (size_t i = 0; i < nlab; i++) {
		int64_t k = c->lab[i].key;
		if (in_table(c, k) && (c->sflags[k] & S_PID) && !c->lab[i].str) {
			pid = c->lab[i].num;
			break;
		}
	}
	if (pid < 0 || !rdc_is_app_pid(c->p, (int32_t)pid)) {
		if (pk_p && (r = packed_check(pk_p, pk_e, &npk)))
			return r;
		c->st->dropped++;
		return 0;
	}

	/* The packed frames not counted yet: at most one per byte, and at
	 * most the cap (more is refused below before it is written). */
	npk = pk_p ? (size_t)(pk_e - pk_p) : 0;
	if (npk > PR_MAX_FRAMES)
		npk = PR_MAX_FRAMES;
	size_t nf = nl + npk;
	/* Worst case: every frame, value and label a 10-byte varint. */
	size_t bound = 32 + nf * 10 + PP_MAX_VALUES * 10 + PP_MAX_LABELS * 48;
	/*
	 * The sample is encoded where it goes: in the output buffer being
	 * filled when the worst case fits there (all but one sample a
	 * buffer), else in enc and copied in by sink_put as before. Its
	 * location ids are written first, at base + hdr; their tag and
	 * length and the sample's go in front once the lengths are known.
	 * hdr guesses them from the input's (the output's sample is the
	 * input's less its kernel frames and foreign labels, mostly in the
	 * same varint length); a wrong guess moves the body once. Each
	 * length is < 2^28 (PR_MAX_FIELD): a header is at most 2 x 5 bytes.
	 */
	enum { HDR_MAX = 10 };
	uint8_t *base = sink_room(&c->out, bound + HDR_MAX);
	bool direct = base != NULL;
	if (!direct) {
		if ((r = enc_room(c, bound + HDR_MAX)))
			return r;
		base = c->enc;
	}
	size_t hdr = 1 + varint_len(n) + (pk_p ? 1 + varint_len((uint64_t)(pk_e - pk_p)) : 0);
	uint8_t *ids = base + hdr, *e = ids, *q;
	size_t kernel = 0;
	bool fast = false;
	if (pk_p && !nl && c->loc_ix.dense && (size_t)(pk_e - pk_p) <= PR_MAX_FRAMES) {
		/* Every frame a location already made, or fall through to
		 * the general path, which checks and counts the field. A
		 * field of no more bytes than the cap allows frames needs no
		 * count. */
		uint8_t *fe = frames_fast(pk_p, pk_e, c->loc_out, c->nlocs, e, &kernel);
		if (fe) {
			e = fe;
			fast = true;
		}
	}
	if (fast) {
		c->st->anonymised += kernel;
	} else {
		e = ids;
		if (pk_p && ((r = packed_check(pk_p, pk_e, &npk)) ||
			     (r = packed_decode(c, pk_p, pk_e, &nl, npk))))
			return r;
		if (c->online && !frames_settled(c, nl))
			return 1;
	}
	for (size_t i = 0; !fast && i < nl; i++) {
		uint64_t lid = c->sl[i];
		ssize_t li = c->loc_ix.dense && lid - 1 < c->nlocs ? (ssize_t)(lid - 1) :
			     find_id(&c->loc_ix, c->locs, c->nlocs, sizeof(*c->locs), lid);
		if (li < 0)
			return -EBADMSG;
		uint32_t o = c->loc_out[li];
		if (!o) {
			uint64_t id;
			if ((r = out_location(c, &c->locs[li], &id)))
				return r;
			o = c->loc_out[li] = id ? loc_code((uint32_t)id) : LOC_KERNEL;
		}
		if (o != LOC_KERNEL)
			e = put_code(e, o);
		else
			c->st->anonymised++; /* a kernel frame removed */
	}

	/* location_id and value, packed, as protobuf-c writes proto3. */
	size_t blen = (size_t)(e - ids);
	*e++ = 0x12;
	q = e++;
	uint8_t *vs = e;
	for (size_t i = 0; i < nv; i++)
		e = put_varint(e, (uint64_t)values[i]);
	/* nv == ntypes <= 8, at most 80 bytes: one length byte suffices */
	*q = (uint8_t)(e - vs);

	size_t kept_labels = 0;
	for (size_t i = 0; i < nlab && kept_labels < PP_MAX_LABELS; i++) {
		int64_t key = c->lab[i].key, str = 0, unit = 0, num = 0;
		/* A string index past the table is malformed, not "no string":
		 * read as a numeric label it would slip a foreign pid past
		 * is_foreign_label. Checked before anything is marked used, so
		 * a dropped label leaves no string behind. */
		if (!in_table(c, key) || (c->lab[i].str && !in_table(c, c->lab[i].str)) ||
		    (c->lab[i].unit && !in_table(c, c->lab[i].unit)))
			return -EBADMSG;
		if (!c->lab[i].str && is_foreign_label(c, c->sflags[key], c->lab[i].num)) {
			c->st->anonymised++;
			continue;
		}
		/* A method event's string argument: its text gets the DLP rules
		 * when the strings are copied, after every sample is written. */
		if (c->lab[i].str && c->p->dlp && (c->sflags[key] & S_ARGKEY))
			c->sflags[c->lab[i].str] |= S_ARGVAL;
		if ((key = str_use(c, key)) < 0)
			return (int)key;
		if (c->lab[i].str) {
			if ((str = str_use(c, c->lab[i].str)) < 0)
				return (int)str;
		} else {
			num = c->lab[i].num;
			if (c->lab[i].unit && (unit = str_use(c, c->lab[i].unit)) < 0)
				return (int)unit;
		}
		/* A label is either a string or a number (with its unit). Its
		 * fields go in place after a length byte set once they are
		 * written (four varints, at most 44 bytes: one byte), not
		 * through a buffer and a memcpy call per label. */
		*e++ = 0x1a;
		uint8_t *lenp = e++, *b = e;
		e = put_uint(e, 1, (uint64_t)key);
		e = put_uint(e, 2, (uint64_t)str);
		e = put_uint(e, 3, (uint64_t)num);
		e = put_uint(e, 4, (uint64_t)unit);
		*lenp = (uint8_t)(e - b);
		kept_labels++;
	}
	/* The headers in front: the sample's tag and length, the ids' (none
	 * when every frame was the kernel's), the body moved when hdr
	 * guessed wrong (room for HDR_MAX in front was kept). */
	size_t ihdr = blen ? 1 + varint_len(blen) : 0;
	size_t mlen = ihdr + (size_t)(e - ids);
	size_t need = 1 + varint_len(mlen) + ihdr;
	if (need != hdr) {
		memmove(base + need, ids, (size_t)(e - ids));
		e = e - hdr + need;
	}
	uint8_t *h = base;
	*h++ = 2 << 3 | WT_LEN;
	h = put_varint(h, mlen);
	if (blen) {
		*h++ = 0x0a;
		put_varint(h, blen);
	}
	if (direct)
		sink_commit(&c->out, (size_t)(e - base));
	else if ((r = sink_put(&c->out, base, (size_t)(e - base))))
		return r;
	c->st->kept++;
	return 0;
}

/*
 * The input's tables as read so far, ready for sample(): ids indexed, and
 * snew and loc_out as long as the tables. Again after pass 1 when the
 * tables grew after the first sample (output ids already given stay).
 */
static int tables_ready(struct pr *c)
{
	int r;

	free(c->map_ix.slot);
	free(c->loc_ix.slot);
	free(c->fn_ix.slot);
	c->map_ix.slot = c->loc_ix.slot = c->fn_ix.slot = NULL;
	if ((r = index_ids(&c->map_ix, c->maps, c->nmaps, sizeof(*c->maps))) ||
	    (r = index_ids(&c->loc_ix, c->locs, c->nlocs, sizeof(*c->locs))) ||
	    (r = index_ids(&c->fn_ix, c->fns, c->nfns, sizeof(*c->fns))))
		return r;
	if (c->nstr > c->snew_n) {
		uint32_t *g = realloc(c->snew, c->nstr * sizeof(*g));
		if (!g)
			return -ENOMEM;
		memset(g + c->snew_n, 0, (c->nstr - c->snew_n) * sizeof(*g));
		c->snew = g;
		c->snew_n = c->nstr;
	}
	if (c->nlocs + 1 > c->loc_out_n) {
		uint32_t *g = realloc(c->loc_out, (c->nlocs + 1) * sizeof(*g));
		if (!g)
			return -ENOMEM;
		memset(g + c->loc_out_n, 0, (c->nlocs + 1 - c->loc_out_n) * sizeof(*g));
		c->loc_out = g;
		c->loc_out_n = c->nlocs + 1;
	}
	if (!c->nk) {
		if ((r = grow(&c->kstr, &c->kstr_cap, 1, sizeof(*c->kstr), PR_MAX_STRINGS)))
			return r;
		c->kstr[0] = (struct kstr){ 0, 0 };
		c->nk = 1;
	}
	return 0;
}

/*
 * At the first sample: judge the samples in pass 1 when the strings (all
 * held) and the sample types came before it, as common/pprof.c writes
 * them. The output starts here; its sample types follow its samples.
 */
static int online_start(struct pr *c)
{
	int r;

	if (!c->held_ok || !c->nstr || !c->ntypes || c->ntypes > PP_MAX_VALUES)
		return 0;
	if ((r = tables_ready(c)) || (r = sink_open(&c->out, c->out_fd)))
		return r;
	c->online = true;
	return 0;
}

/* An index whose meaning cannot change: negative, or in the table now. */
static bool settled(const struct pr *c, int64_t i)
{
	return i < 0 || (uint64_t)i < c->nstr;
}

/*
 * In pass 1, whether the sample just parsed can be judged on what came
 * so far, exactly as pass 2 would: its values and every string its labels
 * name are already read (here), and for a kept sample every location,
 * mapping, function and string its frames reach (frames_settled). Pure:
 * nothing is marked or counted.
 */
static bool labels_settled(const struct pr *c, size_t nv, size_t nlab)
{
	if (nv != c->ntypes)
		return false;
	for (size_t i = 0; i < nlab; i++)
		if (!settled(c, c->lab[i].key) || !settled(c, c->lab[i].str) ||
		    !settled(c, c->lab[i].unit))
			return false;
	return true;
}

/* The same for a kept sample's frames, c->sl[0..nl). */
static bool frames_settled(struct pr *c, size_t nl)
{
	for (size_t i = 0; i < nl; i++) {
		uint64_t lid = c->sl[i];
		/* The common case first: dense ids, a location already made. */
		if (c->loc_ix.dense && lid - 1 < c->nlocs && c->loc_out[lid - 1])
			continue;
		ssize_t li = find_id(&c->loc_ix, c->locs, c->nlocs, sizeof(*c->locs), lid);
		if (li < 0)
			return false;
		const struct in_loc *l = &c->locs[li];
		if (c->loc_out[li] || l->address >= RDC_KERNEL_START)
			continue;
		if (l->mapping_id) {
			ssize_t mi = find_id(&c->map_ix, c->maps, c->nmaps, sizeof(*c->maps),
					     l->mapping_id);
			if (mi < 0)
				return false;
			const struct in_map *m = &c->maps[mi];
			if (m->start >= RDC_KERNEL_START)
				continue;
			if (!m->out && (!settled(c, m->file) || !settled(c, m->build_id)))
				return false;
		}
		if (l->has_line) {
			ssize_t fi = find_id(&c->fn_ix, c->fns, c->nfns, sizeof(*c->fns), l->function_id);
			if (fi < 0)
				return false;
			const struct in_fn *f = &c->fns[fi];
			if (!f->out && (!settled(c, f->name) || !settled(c, f->file) ||
					!settled(c, f->system_name)))
				return false;
		}
	}
	return true;
}

/* Copy input string i if the output uses it. */
static int capture_string(struct pr *c, size_t i, const uint8_t *p, size_t len)
{
	/* The samples were judged by pass 1's reading of the strings: a file
	 * that says something else now (it is root's alone, but) is refused. */
	if (i >= c->nstr || str_flags(p, len) != (c->sflags[i] & ~S_MARKS))
		return -EBADMSG;
	if (c->comment_text && (c->sflags[i] & S_COMMENT)) {
		for (size_t k = 0; k < c->ncomments; k++) {
			if (c->comments[k] != (int64_t)i || c->comment_text[k])
				continue;
			const uint8_t *nul = memchr(p, 0, len);
			size_t l = nul ? (size_t)(nul - p) : len;
			if (!(c->comment_text[k] = malloc(l + 1)))
				return -ENOMEM;
			memcpy(c->comment_text[k], p, l);
			c->comment_text[k][l] = '\0';
		}
	}
	if (!c->snew[i])
		return 0;
	const uint8_t *nul = memchr(p, 0, len);
	if (nul)
		len = (size_t)(nul - p);
	struct kstr *k = &c->kstr[c->snew[i]];
	if (c->p->dlp && (c->sflags[i] & S_ARGVAL)) {
		/* Cut to PR_ARG_MAX, scrubbed; a scrub that fails leaves the
		 * replacement alone, never the text unchecked. */
		char in[PR_ARG_MAX], out[PR_ARG_MAX * 2];
		size_t l = len < sizeof(in) - 1 ? len : sizeof(in) - 1;
		int changed = 0;
		memcpy(in, p, l);
		in[l] = '\0';
		if (rdc_dlp_scrub(c->p->dlp, in, out, sizeof(out), &changed) < 0) {
			snprintf(out, sizeof(out), "%s", RDC_DLP_REPLACEMENT);
			changed = 1;
		}
		c->st->scrubbed += (uint64_t)changed;
		int r = chars_put(c, out, strlen(out), &k->off);
		if (!r)
			k->len = (uint32_t)strlen(out);
		return r;
	}
	int r = chars_put(c, p, len, &k->off);
	if (!r)
		k->len = (uint32_t)len;
	return r;
}

/* Pass 2 (samples, and strings when want_strings) or 3 (strings only). */
static int pass_out(struct pr *c, bool want_samples, bool want_strings)
{
	struct src *s = &c->src;
	size_t si = 0;
	uint64_t sn = 0;
	int r;

	if ((r = src_rewind(s)))
		return r;
	for (;;) {
		uint32_t num;
		unsigned wt;
		uint64_t v;
		const uint8_t *p;

		if ((r = next_field(s, &num, &wt, &v)) < 0)
			return r;
		if (!r) /* the same number of strings as pass 1 saw, or refused */
			return want_strings && si != c->nstr ? -EBADMSG : 0;
		if (num == 2 && want_samples && sn++ >= c->nonline) {
			if ((r = field_bytes(s, v, &p)) || (r = sample(c, p, (size_t)v)))
				return r;
		} else if (num == 6 && want_strings) {
			if ((r = field_bytes(s, v, &p)) || (r = capture_string(c, si++, p, (size_t)v)))
				return r;
		} else if ((r = skip_field(s, wt, v))) {
			return r;
		}
		/* Pass 1 has seen everything: stop once nothing more is wanted. */
		if ((!want_samples || src_offset(s) >= c->samples_end) &&
		    (!want_strings || si == c->nstr))
			return 0;
	}
}

/* ---- the rest of the output, once the samples are written */

static int write_tables(struct pr *c)
{
	uint8_t buf[128], *b;
	int r;

	for (size_t i = 0; i < c->nomaps; i++) {
		const struct out_map *m = &c->omaps[i];
		b = put_uint(buf, 1, i + 1);
		b = put_uint(b, 2, m->start);
		b = put_uint(b, 3, m->limit);
		b = put_uint(b, 4, m->offset);
		b = put_uint(b, 5, m->file);
		b = put_uint(b, 6, m->build_id);
		b = put_uint(b, 7, m->has_functions);
		/* Our symbolisers yield file names exactly when they yield lines. */
		b = put_uint(b, 8, m->has_line_numbers);
		b = put_uint(b, 9, m->has_line_numbers);
		if ((r = put_msg(c, 3, buf, (size_t)(b - buf))))
			return r;
	}
	for (size_t i = 0; i < c->nolocs; i++) {
		const struct out_loc *l = &c->olocs[i];
		b = put_uint(buf, 1, i + 1);
		b = put_uint(b, 2, l->mapping_id);
		b = put_uint(b, 3, l->address);
		if (l->function_id) {
			uint8_t ln[24], *e = put_uint(ln, 1, l->function_id);
			e = put_uint(e, 2, (uint64_t)l->line);
			*b++ = 0x22;
			*b++ = (uint8_t)(e - ln);
			memcpy(b, ln, (size_t)(e - ln));
			b += e - ln;
		}
		if ((r = put_msg(c, 4, buf, (size_t)(b - buf))))
			return r;
	}
	for (size_t i = 0; i < c->nofns; i++) {
		const struct out_fn *f = &c->ofns[i];
		b = put_uint(buf, 1, i + 1);
		b = put_uint(b, 2, f->name);
		b = put_uint(b, 3, f->system_name);
		b = put_uint(b, 4, f->file);
		b = put_uint(b, 5, (uint64_t)f->start_line);
		if ((r = put_msg(c, 5, buf, (size_t)(b - buf))))
			return r;
	}
	for (size_t i = 0; i < c->nk; i++) {
		const struct kstr *k = &c->kstr[i];
		if (i && k->off == UINT32_MAX)
			return -EBADMSG; /* used but never went by: cannot be */
		if ((r = put_msg(c, 6, i ? (const uint8_t *)c->chars + k->off : buf, i ? k->len : 0)))
			return r;
	}
	b = put_uint(buf, 9, (uint64_t)c->time_nanos);
	b = put_uint(b, 10, (uint64_t)c->duration_nanos);
	if ((r = sink_put(&c->out, buf, (size_t)(b - buf))))
		return r;
	if (c->has_period) {
		uint8_t vt[24], *e = put_uint(vt, 1, (uint64_t)c->period_type[0]);
		e = put_uint(e, 2, (uint64_t)c->period_type[1]);
		if ((r = put_msg(c, 11, vt, (size_t)(e - vt))))
			return r;
		b = put_uint(buf, 12, (uint64_t)c->period);
		if ((r = sink_put(&c->out, buf, (size_t)(b - buf))))
			return r;
	}
	return 0;
}

/* Comments (scrubbed: new strings) and the default sample type. */
static int write_trailer(struct pr *c, const int64_t *cidx)
{
	uint8_t buf[16], *b;
	int r;

	if (c->ncomments) {
		size_t blen = 0;
		uint8_t *enc, *e;
		if ((r = enc_room(c, c->ncomments * 10)))
			return r;
		enc = e = c->enc;
		for (size_t i = 0; i < c->ncomments; i++)
			if (cidx[i] >= 0)
				e = put_varint(e, (uint64_t)cidx[i]);
		blen = (size_t)(e - enc);
		if (blen && (r = put_msg(c, 13, enc, blen)))
			return r;
	}
	b = put_uint(buf, 14, (uint64_t)c->default_type);
	return sink_put(&c->out, buf, (size_t)(b - buf));
}

/* The header's strings, first into the output's table as they were. */
static int header_strings(struct pr *c, int64_t vt_out[PP_MAX_VALUES][2], int64_t *def_out,
			  int64_t *cidx)
{
	int64_t v = 0;

	for (size_t i = 0; i < c->ntypes; i++) {
		if ((v = str_use(c, c->types[i][0])) < 0)
			return (int)v; /* a sample type with no name */
		vt_out[i][0] = v;
		if ((v = str_use_or_empty(c, c->types[i][1])) < 0)
			return (int)v;
		vt_out[i][1] = v;
	}
	if (c->has_period) {
		if ((v = str_use(c, c->period_type[0])) < 0)
			return (int)v;
		c->period_type[0] = v;
		if ((v = str_use_or_empty(c, c->period_type[1])) < 0)
			return (int)v;
		c->period_type[1] = v;
	}
	if (c->default_type && (v = str_use_or_empty(c, c->default_type)) < 0)
		return (int)v;
	*def_out = c->default_type ? v : 0;
	for (size_t i = 0; i < c->ncomments; i++) {
		int64_t k = c->comments[i];
		cidx[i] = -1; /* out of the table: no comment, as before */
		if (k < 0 || (uint64_t)k >= c->nstr)
			continue;
		/* With DLP the text is scrubbed later into a string of its own;
		 * the input's is then never copied. */
		if (c->p->dlp) {
			cidx[i] = 0;
			c->sflags[k] |= S_COMMENT;
		}
		else if ((cidx[i] = str_use(c, k)) < 0)
			return (int)cidx[i];
	}
	return 0;
}

static int scrub_comments(struct pr *c, int64_t *cidx)
{
	for (size_t i = 0; c->p->dlp && i < c->ncomments; i++) {
		char clean[PR_COMMENT_MAX];
		const char *t = c->comment_text[i];
		int changed = 0;
		if (cidx[i] < 0 || !t)
			continue;
		int64_t v;
		if (rdc_dlp_scrub(c->p->dlp, t, clean, sizeof(clean), &changed) == 0) {
			c->st->scrubbed += (uint64_t)changed;
			v = str_new(c, clean);
		} else {
			v = str_new(c, t);
		}
		if (v < 0)
			return (int)v;
		cidx[i] = v;
	}
	return 0;
}

/* The used strings from what pass 1 held: no pass over the input. */
static int strings_from_held(struct pr *c)
{
	for (size_t i = 0; i < c->nstr; i++) {
		const struct kstr *h = &c->hoff[i];
		int r = capture_string(c, i, (const uint8_t *)c->held + h->off, h->len);
		if (r)
			return r;
	}
	return 0;
}

static int run(struct pr *c, int in_fd, int out_fd)
{
	int64_t vt[PP_MAX_VALUES][2], def = 0, *cidx = NULL;
	int r;

	if ((r = src_open(&c->src, in_fd)))
		return r;
	c->st->in_bytes = c->src.size;
	c->out_fd = out_fd;
	c->held_ok = true;
	if ((r = src_rewind(&c->src)) || (r = pass1(c)))
		return r;
	c->online = false;
	if (c->nstr == 0 || c->ntypes == 0 || c->ntypes > PP_MAX_VALUES)
		return -EBADMSG;
	if ((r = tables_ready(c)))
		return r;
	if (c->ncomments && c->p->dlp &&
	    !(c->comment_text = calloc(c->ncomments, sizeof(*c->comment_text))))
		return -ENOMEM;
	if (c->ncomments && !(cidx = calloc(c->ncomments, sizeof(*cidx))))
		return -ENOMEM;
	if ((r = header_strings(c, vt, &def, cidx)))
		goto out;
	c->default_type = def;

	/* Opened by pass 1 when it wrote samples: the types follow them. */
	if (!c->out.zinit && (r = sink_open(&c->out, out_fd)))
		goto out;
	for (size_t i = 0; i < c->ntypes; i++) {
		uint8_t b[24], *e = put_uint(b, 1, (uint64_t)vt[i][0]);
		e = put_uint(e, 2, (uint64_t)vt[i][1]);
		if ((r = put_msg(c, 1, b, (size_t)(e - b))))
			goto out;
	}
	/* Pass 2 for the samples pass 1 left; the used strings from what pass
	 * 1 held, else copied as they go by after the last sample (the old
	 * writers' order) in pass 2, else in a pass of their own. */
	bool strings_late = !c->any_string || c->strings_start >= c->samples_end;
	bool strings_in_2 = !c->held_ok && strings_late;
	bool samples_left = c->nonline < c->nsamples;
	if (samples_left && (r = pass_out(c, true, strings_in_2)))
		goto out;
	if (c->held_ok)
		r = strings_from_held(c);
	else if (!samples_left || !strings_in_2)
		r = pass_out(c, false, true);
	if (r)
		goto out;
	/*
	 * Samples, none of them the app's: refused, never written empty. A
	 * capture that sampled nothing at all (an idle process) holds nothing
	 * of anyone: it is delivered as a valid empty profile, its header
	 * only, and the daemon's note says why.
	 */
	if (c->st->kept == 0 && c->nsamples > 0) {
		r = -ENODATA;
		goto out;
	}
	if ((r = scrub_comments(c, cidx)) || (r = write_tables(c)) || (r = write_trailer(c, cidx)))
		goto out;
	if (c->out.zinit && !(r = sink_finish(&c->out)))
		c->st->out_bytes = c->out.written;
out:
	free(cidx);
	return r;
}

int rdc_pprof(int in_fd, int out_fd, const struct rdc_policy *p, struct rdc_stats *st)
{
	struct rdc_stats dummy;
	struct pr *c;
	int r;

	if (!st)
		st = &dummy;
	memset(st, 0, sizeof(*st));
	if (!p || in_fd < 0 || out_fd < 0)
		return -EINVAL;
	if (!(c = calloc(1, sizeof(*c))))
		return -ENOMEM;
	c->p = p;
	c->st = st;
	c->src.gw = c->out.gw = &c->gz;
	r = run(c, in_fd, out_fd);
	/* The worker first: then no other thread touches a job. */
	gz_stop(&c->gz);
	src_close(&c->src);
	sink_close(&c->out);
	gz_free(&c->gz);
	if (c->comment_text)
		for (size_t i = 0; i < c->ncomments; i++)
			free(c->comment_text[i]);
	free(c->comment_text);
	free(c->sflags);
	free(c->maps);
	free(c->locs);
	free(c->fns);
	free(c->map_ix.slot);
	free(c->loc_ix.slot);
	free(c->fn_ix.slot);
	free(c->comments);
	free(c->snew);
	free(c->loc_out);
	free(c->kstr);
	free(c->chars);
	free(c->omaps);
	free(c->olocs);
	free(c->oloc_ht.slot);
	free(c->ofns);
	free(c->ofn_ht.slot);
	free(c->sl);
	free(c->lab);
	free(c->enc);
	free(c->held);
	free(c->hoff);
	free(c);
	return r;
}

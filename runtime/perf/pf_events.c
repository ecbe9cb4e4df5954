/*
 * One perf event per thread of the target: a software cpu-clock event
 * sampling user mode only, each with its own ring. Per-thread events cannot
 * inherit into threads created later (an inherited per-task event cannot be
 * mmap'd), so /proc/<pid>/task is rescanned every PF_RESCAN_MS.
 */
#include "pf.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <asm/perf_regs.h>
#endif

#include "log.h"
#include "util.h"

#define PF_SAMPLE_TYPE (PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_PERIOD | \
			PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER)

/* Ring data per event: room for three samples, two once many threads are open. */
#define PF_RING_BYTES       (64u * 1024)
#define PF_RING_BYTES_SMALL (32u * 1024)
#define PF_RING_SMALL_AFTER 256
/*
 * Method events: a loop that calls the target writes a stack (~17.5 KiB)
 * per hit as fast as the trap allows (~4 us on an emulated first
 * instruction), faster than the helper unwinds (~10 us), so the ring must
 * hold a whole burst: 8 MiB (~470 stacks) for each of the first
 * PF_RING_HUGE_THREADS threads, 2 MiB (~115) for the next ones up to
 * PF_RING_BIG_THREADS, 256 KiB up to PF_RING_SMALL_AFTER, 32 KiB past it:
 * 144 MiB locked at most, past perf_event_mlock_kb, which CAP_IPC_LOCK
 * lifts. The helper is woken when
 * a quarter of the ring is filled (wakeup_watermark), not per sample: one
 * wakeup drains many stacks and the rest of the ring absorbs the burst
 * meanwhile; what stays below the mark is drained at each rescan.
 */
#define PF_RING_BYTES_UPROBE     (256u * 1024)
#define PF_RING_BYTES_UPROBE_BIG (2048u * 1024)
#define PF_RING_BIG_THREADS      32
#define PF_RING_BYTES_UPROBE_HUGE (8192u * 1024)
#define PF_RING_HUGE_THREADS     4

#define PF_TID_SLOTS 8192 /* hash of tids, twice PF_MAX_TIDS */
/*
 * A new thread usually names itself just after it starts, often after we
 * opened it: its name is read again on the next scans, then at the end.
 */
#define PF_COMM_READS 4

struct pf_thread {
	uint32_t tid;
	int fd;               /* the ring's event; -1 once closed (or never opened) */
	/* Method events: fd is a dummy software event that only owns the ring;
	 * each target's uprobe writes into it, pfd[k] (-1 closed), and its
	 * samples carry pid_[k], the kernel's id of that event. Probes stay
	 * separate events so one can be closed alone (its budget). */
	int pfd[PF_MAX_UPROBES];
	uint64_t pid_[PF_MAX_UPROBES];
	struct pf_ring ring;
	size_t map_len;
	char comm[16];
	uint8_t comm_reads;
};

struct pf_events {
	pid_t pid;
	unsigned hz;
	int epfd;
	long page;
	struct pf_thread *threads;
	unsigned nthreads, nopen, skipped;
	bool tids_full;
	int16_t *slots;       /* tid hash: index into threads, -1 empty */
	uint8_t *scratch;
	struct pf_ring_stats st;
	/* Method events: uprobes instead of the CPU clock (pf_events_open_uprobes). */
	unsigned nup;
	uint32_t up_type;
	uint64_t up_every;
	uint64_t up_limit;    /* samples each probe may write, 0: no limit */
	struct pf_uprobe up[PF_MAX_UPROBES];
	uint64_t hits;        /* the probes' own counts, read as each closes */
	uint64_t hits_k[PF_MAX_UPROBES]; /* the same per target */
	uint64_t expected;    /* samples the probes meant to write: count / every each */
	bool up_closed[PF_MAX_UPROBES];  /* pf_events_close_probe: not opened again */
	bool up_disabled;     /* pf_events_disable: new threads get no probes */
};

/* A probe's count of hits: exact, whether or not its samples fit the ring. */
static uint64_t probe_count(int fd)
{
	uint64_t v = 0;
	return read(fd, &v, sizeof(v)) == (ssize_t)sizeof(v) ? v : 0;
}

#if defined(__x86_64__)
/*
 * The registers asked for, in perf's bit order (the order the sample
 * carries them), and each one's DWARF number. All sixteen GPRs and rip:
 * CFI only needs rsp, rip and the callee-saved ones, but a register rule
 * may name any GPR, and the cost is 8 bytes each per sample.
 */
static const struct { uint8_t perf, dwarf; } pf_regmap[] = {
	{ PERF_REG_X86_AX, 0 },  { PERF_REG_X86_BX, 3 },  { PERF_REG_X86_CX, 2 },
	{ PERF_REG_X86_DX, 1 },  { PERF_REG_X86_SI, 4 },  { PERF_REG_X86_DI, 5 },
	{ PERF_REG_X86_BP, 6 },  { PERF_REG_X86_SP, 7 },  { PERF_REG_X86_IP, 16 },
	{ PERF_REG_X86_R8, 8 },  { PERF_REG_X86_R9, 9 },  { PERF_REG_X86_R10, 10 },
	{ PERF_REG_X86_R11, 11 }, { PERF_REG_X86_R12, 12 }, { PERF_REG_X86_R13, 13 },
	{ PERF_REG_X86_R14, 14 }, { PERF_REG_X86_R15, 15 },
};
#define PF_NREGMAP (sizeof(pf_regmap) / sizeof(pf_regmap[0]))
#else
static const struct { uint8_t perf, dwarf; } pf_regmap[1];
#define PF_NREGMAP 0
#endif

uint64_t pf_regs_mask(void)
{
	uint64_t m = 0;
	for (size_t i = 0; i < PF_NREGMAP; i++)
		m |= 1ull << pf_regmap[i].perf;
	return m;
}

/* Bounded reads from a record. */
struct pf_cur {
	const uint8_t *p;
	size_t left;
};

static bool cur_u64(struct pf_cur *c, uint64_t *v)
{
	if (c->left < 8)
		return false;
	memcpy(v, c->p, 8);
	c->p += 8;
	c->left -= 8;
	return true;
}

static bool cur_skip(struct pf_cur *c, uint64_t n, const uint8_t **at)
{
	if (n > c->left)
		return false;
	*at = c->p;
	c->p += n;
	c->left -= (size_t)n;
	return true;
}

int pf_parse_sample(const uint8_t *rec, size_t len, struct pf_sample *out)
{
	return pf_parse_sample_ident(rec, len, false, out);
}

int pf_parse_sample_ident(const uint8_t *rec, size_t len, bool ident, struct pf_sample *out)
{
	struct pf_cur c = { rec, len };
	const uint8_t *at;
	uint64_t v, n;

	memset(out, 0, sizeof(*out));
	if (!cur_skip(&c, sizeof(struct perf_event_header), &at))
		return -EBADMSG;
	if (ident && !cur_u64(&c, &out->id))
		return -EBADMSG;
	if (!cur_u64(&c, &v))
		return -EBADMSG;
	out->pid = (uint32_t)v;
	out->tid = (uint32_t)(v >> 32);
	if (!cur_u64(&c, &out->time_ns) || !cur_u64(&c, &out->period) || !cur_u64(&c, &n))
		return -EBADMSG;
	if (n > c.left / 8 || !cur_skip(&c, n * 8, &out->callchain))
		return -EBADMSG;
	out->ncallchain = n;
	uint64_t abi;
	if (!cur_u64(&c, &abi))
		return -EBADMSG;
	if (abi != PERF_SAMPLE_REGS_ABI_NONE) {
		/* The kernel writes every requested register whatever the ABI. */
		for (size_t i = 0; i < PF_NREGMAP; i++) {
			if (!cur_u64(&c, &v))
				return -EBADMSG;
			out->regs[pf_regmap[i].dwarf] = v;
		}
		out->has_regs = abi == PERF_SAMPLE_REGS_ABI_64 && PF_NREGMAP > 0;
	}
	uint64_t size;
	if (!cur_u64(&c, &size))
		return -EBADMSG;
	if (size) {
		uint64_t dyn;
		if (!cur_skip(&c, size, &out->stack) || !cur_u64(&c, &dyn))
			return -EBADMSG;
		out->stack_size = dyn < size ? dyn : size;
	}
	return 0;
}

/* Copy len bytes at ring position pos, across the end of the buffer. */
static void ring_copy(const struct pf_ring *r, uint64_t pos, void *dst, size_t len)
{
	uint64_t off = pos & (r->size - 1);
	size_t first = len < r->size - off ? len : (size_t)(r->size - off);
	memcpy(dst, r->data + off, first);
	memcpy((uint8_t *)dst + first, r->data, len - first);
}

static void ring_record(const uint8_t *rec, const struct perf_event_header *h, bool ident,
			pf_sample_fn fn, void *arg, struct pf_ring_stats *st)
{
	struct pf_sample s;
	uint64_t v[2];

	switch (h->type) {
	case PERF_RECORD_SAMPLE:
		if (pf_parse_sample_ident(rec, h->size, ident, &s) < 0) {
			st->bad++;
			return;
		}
		st->samples++;
		fn(&s, arg);
		break;
	case PERF_RECORD_LOST: /* u64 id, u64 lost */
		if (h->size >= sizeof(*h) + 16) {
			memcpy(v, rec + sizeof(*h), 16);
			st->lost += v[1];
		}
		break;
	case PERF_RECORD_LOST_SAMPLES: /* u64 lost */
		if (h->size >= sizeof(*h) + 8) {
			memcpy(v, rec + sizeof(*h), 8);
			st->lost += v[0];
		}
		break;
	case PERF_RECORD_THROTTLE:
		st->throttled++;
		break;
	default:
		break;
	}
}

void pf_ring_drain(struct pf_ring *r, uint8_t *scratch, pf_sample_fn fn, void *arg,
		   struct pf_ring_stats *st)
{
	struct perf_event_mmap_page *m = r->meta;
	/* Acquire pairs with the kernel's write barrier before it moves head. */
	uint64_t head = __atomic_load_n(&m->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = m->data_tail;

	while (head != tail) {
		struct perf_event_header h;
		uint64_t avail = head - tail;
		if (avail < sizeof(h) || avail > r->size)
			goto corrupt;
		ring_copy(r, tail, &h, sizeof(h));
		if (h.size < sizeof(h) || h.size > avail)
			goto corrupt;
		uint64_t off = tail & (r->size - 1);
		const uint8_t *rec = r->data + off;
		if (off + h.size > r->size) {
			ring_copy(r, tail, scratch, h.size);
			rec = scratch;
		}
		ring_record(rec, &h, r->ident, fn, arg, st);
		tail += h.size;
		/* Release each record at once: a slow unwind must not stall the kernel. */
		__atomic_store_n(&m->data_tail, tail, __ATOMIC_RELEASE);
	}
	return;
corrupt:
	/* Not something the kernel writes; drop what is there and go on. */
	st->bad++;
	__atomic_store_n(&m->data_tail, head, __ATOMIC_RELEASE);
}

static long pf_perf_event_open(struct perf_event_attr *a, pid_t tid)
{
	return syscall(SYS_perf_event_open, a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

static int read_int_file(const char *path, long *v)
{
	char buf[64];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	int e = errno;
	close(fd);
	if (n <= 0)
		return n < 0 ? -e : -EINVAL;
	buf[n] = '\0';
	char *end;
	errno = 0;
	*v = strtol(buf, &end, 10);
	if (errno || end == buf)
		return -EINVAL;
	return 0;
}

/* Effective capabilities of this process, for the refusal message. */
static uint64_t cap_effective(void)
{
	char line[256];
	unsigned long long caps = 0;
	FILE *f = fopen("/proc/self/status", "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &caps) == 1)
			break;
	fclose(f);
	return caps;
}

static void read_comm(pid_t pid, uint32_t tid, char comm[16])
{
	char path[64], buf[32];
	snprintf(path, sizeof(path), "/proc/%d/task/%" PRIu32 "/comm", (int)pid, tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return; /* gone: keep the name read before */
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	util_strlcpy(comm, buf, 16);
}

/* The slot of tid in the hash: its entry, or the empty slot where it goes. */
static uint32_t tid_slot(const struct pf_events *ev, uint32_t tid)
{
	uint32_t h = (tid * 2654435761u) & (PF_TID_SLOTS - 1);
	while (ev->slots[h] >= 0 && ev->threads[ev->slots[h]].tid != tid)
		h = (h + 1) & (PF_TID_SLOTS - 1);
	return h;
}

static void close_probe(struct pf_events *ev, struct pf_thread *t, unsigned k)
{
	if (t->pfd[k] < 0)
		return;
	uint64_t n = probe_count(t->pfd[k]);
	ev->hits += n;
	ev->hits_k[k] += n;
	/* Every up_every-th hit of this event overflowed into a sample. */
	ev->expected += n / ev->up_every;
	close(t->pfd[k]);
	t->pfd[k] = -1;
}

static void close_thread(struct pf_events *ev, struct pf_thread *t)
{
	if (t->fd < 0)
		return;
	epoll_ctl(ev->epfd, EPOLL_CTL_DEL, t->fd, NULL);
	/* The probes first: they write into the ring unmapped below. */
	for (unsigned k = 0; k < PF_MAX_UPROBES; k++)
		close_probe(ev, t, k);
	munmap(t->ring.meta, t->map_len);
	close(t->fd);
	t->fd = -1;
	ev->nopen--;
}

/*
 * Open tid's event, map its ring and enable it. 0, or negative errno
 * (-ESRCH: the thread has already gone).
 */
static int open_thread(struct pf_events *ev, struct pf_thread *t)
{
	struct perf_event_attr a;
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_CPU_CLOCK;
	a.freq = 1;
	a.sample_freq = ev->hz;
	a.sample_type = PF_SAMPLE_TYPE;
	a.sample_regs_user = pf_regs_mask();
	a.sample_stack_user = PF_STACK_BYTES;
	a.exclude_kernel = 1;
	a.exclude_hv = 1;
	a.exclude_callchain_kernel = 1;
	a.disabled = 1; /* enabled once the ring exists, so nothing is lost before it */
	a.wakeup_events = 1;
	a.use_clockid = 1;
	a.clockid = CLOCK_MONOTONIC;
	size_t want = ev->nopen >= PF_RING_SMALL_AFTER ? PF_RING_BYTES_SMALL : PF_RING_BYTES;
	if (ev->nup && ev->nopen < PF_RING_SMALL_AFTER)
		want = ev->nopen < PF_RING_HUGE_THREADS ? PF_RING_BYTES_UPROBE_HUGE :
		       ev->nopen < PF_RING_BIG_THREADS ? PF_RING_BYTES_UPROBE_BIG : PF_RING_BYTES_UPROBE;
	struct perf_event_attr owner = a;
	if (ev->nup) {
		/*
		 * The ring's owner: a software event that never fires (the
		 * dummy), so every probe below is an event of its own that
		 * can be closed alone. SET_OUTPUT needs the same task and
		 * clock, which it has.
		 */
		owner.type = PERF_TYPE_SOFTWARE;
		owner.config = PERF_COUNT_SW_DUMMY;
		owner.freq = 0;
		owner.sample_period = 1;
		owner.sample_type = PF_SAMPLE_TYPE | PERF_SAMPLE_IDENTIFIER;
		owner.wakeup_events = 0;
		owner.watermark = 1;
		owner.wakeup_watermark = (uint32_t)(want / 4);
		/*
		 * A uprobe PMU event: the kernel resolves config1 (a path, here
		 * /proc/self/fd/N of a file the caller opened as the target's
		 * user) at open, and config2 is the file offset. Every Nth hit is
		 * a sample; the kernel's own breakpoint is only in the target's
		 * memory (a per-task event filters the others out). IDENTIFIER
		 * first in each sample: the event's id, hence the target. No
		 * wakeup of its own: the owner's watermark wakes the helper.
		 */
		a.type = ev->up_type;
		a.freq = 0;
		a.sample_period = ev->up_every;
		a.sample_type = PF_SAMPLE_TYPE | PERF_SAMPLE_IDENTIFIER;
		a.config = 0;
		a.wakeup_events = 0;
		a.watermark = 1;
		a.wakeup_watermark = owner.wakeup_watermark;
	}

	long fd = pf_perf_event_open(&owner, (pid_t)t->tid);
	if (fd < 0)
		return -errno;
	size_t pages = 1;
	while (pages * (size_t)ev->page < want)
		pages <<= 1;
	size_t len = (pages + 1) * (size_t)ev->page;
	void *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, (int)fd, 0);
	if (map == MAP_FAILED) {
		int e = errno;
		close((int)fd);
		return -e;
	}
	struct perf_event_mmap_page *m = map;
	t->ring.meta = map;
	if (m->data_size) {
		t->ring.data = (uint8_t *)map + m->data_offset;
		t->ring.size = m->data_size;
	} else { /* kernels before 4.1: data follows the first page */
		t->ring.data = (uint8_t *)map + ev->page;
		t->ring.size = pages * (size_t)ev->page;
	}
	t->map_len = len;
	t->fd = (int)fd;
	t->ring.ident = ev->nup > 0;
	for (unsigned k = 0; k < PF_MAX_UPROBES; k++)
		t->pfd[k] = -1;
	/* The targets: one probe each, writing into this thread's one ring. */
	for (unsigned k = 0; k < ev->nup && !ev->up_disabled; k++) {
		if (ev->up_closed[k])
			continue;
		a.config1 = (uint64_t)(uintptr_t)ev->up[k].path;
		a.config2 = ev->up[k].offset;
		long x = pf_perf_event_open(&a, (pid_t)t->tid);
		if (x >= 0 && (ioctl((int)x, PERF_EVENT_IOC_SET_OUTPUT, t->fd) < 0 ||
			       ioctl((int)x, PERF_EVENT_IOC_ID, &t->pid_[k]) < 0)) {
			int e = errno;
			close((int)x);
			errno = e;
			x = -1;
		}
		/*
		 * With a limit (--max-hits), REFRESH enables the probe for that
		 * many samples: the kernel disables it itself at the last one,
		 * in the target's trap, so a single-threaded target's probe
		 * stops exactly at the cap, before the helper even wakes.
		 */
		if (x < 0 || (ev->up_limit ?
			      ioctl((int)x, PERF_EVENT_IOC_REFRESH, (int)ev->up_limit) :
			      ioctl((int)x, PERF_EVENT_IOC_ENABLE, 0)) < 0) {
			int e = errno;
			if (x >= 0)
				close((int)x);
			ev->nopen++;
			close_thread(ev, t);
			return -e;
		}
		t->pfd[k] = (int)x;
	}
	struct epoll_event ee = { .events = EPOLLIN, .data.u32 = (uint32_t)(t - ev->threads) };
	if (epoll_ctl(ev->epfd, EPOLL_CTL_ADD, t->fd, &ee) < 0 ||
	    ioctl(t->fd, PERF_EVENT_IOC_ENABLE, 0) < 0) {
		int e = errno;
		ev->nopen++;
		close_thread(ev, t);
		return -e;
	}
	ev->nopen++;
	return 0;
}

/*
 * Remember tid and open its event. A thread that cannot be opened stays
 * remembered (so it is counted as skipped once), except one that has gone.
 */
static int add_thread(struct pf_events *ev, uint32_t tid)
{
	uint32_t slot = tid_slot(ev, tid);
	if (ev->slots[slot] >= 0)
		return 0;
	if (ev->nthreads >= PF_MAX_TIDS) {
		if (!ev->tids_full)
			LOG_W("more than %u threads seen: later ones are not sampled", PF_MAX_TIDS);
		ev->tids_full = true;
		return -ENOSPC;
	}
	struct pf_thread *t = &ev->threads[ev->nthreads];
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	t->fd = -1;
	for (unsigned k = 0; k < PF_MAX_UPROBES; k++)
		t->pfd[k] = -1;
	read_comm(ev->pid, tid, t->comm);
	t->comm_reads = 1;
	int r = ev->nopen >= PF_MAX_EVENTS ? -ENOSPC : open_thread(ev, t);
	if (r == -ESRCH)
		return r; /* exited between readdir and open: forget it */
	ev->slots[slot] = (int16_t)ev->nthreads++;
	if (r < 0) {
		ev->skipped++;
		LOG_D("thread %" PRIu32 ": %s", tid, strerror(-r));
	}
	return r;
}

/* Scan /proc/<pid>/task; the first error seen is returned (for the open). */
static int scan(struct pf_events *ev)
{
	char path[64];
	int first = 0;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)ev->pid);
	DIR *d = opendir(path);
	if (!d)
		return -errno;
	struct dirent *de;
	while ((de = readdir(d))) {
		char *end;
		unsigned long tid = strtoul(de->d_name, &end, 10);
		if (de->d_name[0] < '0' || de->d_name[0] > '9' || *end || tid == 0 || tid > INT32_MAX)
			continue;
		int r = add_thread(ev, (uint32_t)tid);
		if (r < 0 && r != -ESRCH && !first)
			first = r;
	}
	closedir(d);
	return first;
}

static void explain(int err, char *why, size_t whylen)
{
	long paranoid = 0;
	uint64_t caps = cap_effective();
	bool perfmon = caps & (1ull << 38), sysadmin = caps & (1ull << 21);
	read_int_file("/proc/sys/kernel/perf_event_paranoid", &paranoid);

	switch (err) {
	case -EACCES:
	case -EPERM:
		snprintf(why, whylen,
			 "perf_event_open not permitted (%s): perf_event_paranoid=%ld, %s; "
			 "needs CAP_PERFMON or CAP_SYS_ADMIN, or paranoid <= 2 and ptrace access to the target",
			 strerror(-err), paranoid,
			 perfmon || sysadmin ? "CAP_PERFMON/CAP_SYS_ADMIN held" : "no CAP_PERFMON/CAP_SYS_ADMIN");
		break;
	case -ENOENT:
	case -ENODEV:
	case -EOPNOTSUPP:
	case -ENOSYS:
		snprintf(why, whylen, "perf events unavailable: cpu-clock sampling not supported (%s)",
			 strerror(-err));
		break;
	case -EINVAL:
	case -EOVERFLOW:
		snprintf(why, whylen,
			 "perf_event_open rejected the sampling attributes (%s): kernel without user "
			 "stack sampling, or --hz above perf_event_max_sample_rate", strerror(-err));
		break;
	default:
		snprintf(why, whylen, "perf_event_open: %s", strerror(-err));
		break;
	}
}

static int events_open(pid_t pid, unsigned hz, const struct pf_uprobe *up, unsigned nup,
		       uint64_t every, uint64_t limit, struct pf_events **out, char *why,
		       size_t whylen)
{
	long paranoid;
	int r;

	*out = NULL;
	snprintf(why, whylen, "out of memory");
	if (PF_NREGMAP == 0) {
		snprintf(why, whylen, "unsupported architecture: only x86-64 register maps are built in");
		return -ENOTSUP;
	}
	if (read_int_file("/proc/sys/kernel/perf_event_paranoid", &paranoid) < 0) {
		snprintf(why, whylen, "perf events unavailable: this kernel has no "
			 "/proc/sys/kernel/perf_event_paranoid (CONFIG_PERF_EVENTS off)");
		return -ENOSYS;
	}
	struct pf_events *ev = calloc(1, sizeof(*ev));
	if (!ev)
		return -ENOMEM;
	ev->pid = pid;
	ev->hz = hz;
	if (nup) {
		long t;
		if (read_int_file("/sys/bus/event_source/devices/uprobe/type", &t) < 0 || t <= 0 ||
		    t > INT32_MAX) {
			snprintf(why, whylen, "uprobes unavailable: no "
				 "/sys/bus/event_source/devices/uprobe/type (kernel without "
				 "CONFIG_UPROBE_EVENTS, or before 4.17)");
			free(ev);
			return -ENOSYS;
		}
		ev->up_type = (uint32_t)t;
		ev->nup = nup;
		ev->up_every = every ? every : 1;
		ev->up_limit = limit > INT32_MAX ? 0 : limit;
		memcpy(ev->up, up, nup * sizeof(*up));
	}
	ev->page = sysconf(_SC_PAGESIZE);
	ev->threads = calloc(PF_MAX_TIDS, sizeof(*ev->threads));
	ev->slots = malloc(PF_TID_SLOTS * sizeof(*ev->slots));
	ev->scratch = malloc(1u << 16); /* header.size is 16 bits: no record is bigger */
	ev->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (!ev->threads || !ev->slots || !ev->scratch || ev->epfd < 0 || ev->page <= 0) {
		r = -ENOMEM;
		goto fail;
	}
	memset(ev->slots, 0xff, PF_TID_SLOTS * sizeof(*ev->slots));
	r = scan(ev);
	if (ev->nopen == 0) {
		if (r == 0 || r == -ENOENT || r == -ESRCH) {
			r = -ESRCH;
			snprintf(why, whylen, "process %d not found or has no threads", (int)pid);
		} else if (ev->nthreads == 0) { /* opendir failed */
			snprintf(why, whylen, "cannot list /proc/%d/task: %s", (int)pid, strerror(-r));
		} else if (nup && (r == -EACCES || r == -EPERM)) {
			snprintf(why, whylen, "uprobe not permitted (%s): creating one needs "
				 "CAP_PERFMON (or CAP_SYS_ADMIN), which the helper keeps only as root's "
				 "child", strerror(-r));
		} else if (nup && (r == -ENOENT || r == -EINVAL || r == -ENOEXEC)) {
			snprintf(why, whylen, "the kernel refused the uprobe (%s): bad path or "
				 "offset", strerror(-r));
		} else {
			explain(r, why, whylen);
		}
		goto fail;
	}
	if (r < 0)
		LOG_W("%u of the target's threads not sampled: %s", ev->skipped, strerror(-r));
	*out = ev;
	return 0;
fail:
	pf_events_close(ev);
	return r < 0 ? r : -ENOMEM;
}

int pf_events_open(pid_t pid, unsigned hz, struct pf_events **out, char *why, size_t whylen)
{
	return events_open(pid, hz, NULL, 0, 0, 0, out, why, whylen);
}

int pf_events_open_uprobes(pid_t pid, const struct pf_uprobe *up, unsigned nup, uint64_t every,
			   uint64_t limit, struct pf_events **out, char *why, size_t whylen)
{
	*out = NULL;
	if (!up || nup == 0 || nup > PF_MAX_UPROBES) {
		snprintf(why, whylen, "1..%d method targets", PF_MAX_UPROBES);
		return -EINVAL;
	}
	return events_open(pid, 0, up, nup, every, limit, out, why, whylen);
}

void pf_events_rescan(struct pf_events *ev)
{
	for (unsigned i = 0; i < ev->nthreads; i++) {
		struct pf_thread *t = &ev->threads[i];
		if (t->fd >= 0 && t->comm_reads < PF_COMM_READS) {
			read_comm(ev->pid, t->tid, t->comm);
			t->comm_reads++;
		}
	}
	scan(ev);
}

int pf_events_poll(struct pf_events *ev, int timeout_ms, pf_sample_fn fn, void *arg)
{
	struct epoll_event evs[64];
	int n = epoll_wait(ev->epfd, evs, 64, timeout_ms < 0 ? 0 : timeout_ms);
	for (int i = 0; i < n; i++) {
		uint32_t idx = evs[i].data.u32;
		if (idx >= ev->nthreads || ev->threads[idx].fd < 0)
			continue;
		struct pf_thread *t = &ev->threads[idx];
		pf_ring_drain(&t->ring, ev->scratch, fn, arg, &ev->st);
		/* HUP: the thread exited; its ring has been drained above. */
		if (evs[i].events & (EPOLLHUP | EPOLLERR)) {
			LOG_D("thread %" PRIu32 " exited", t->tid);
			close_thread(ev, t);
		}
	}
	return (int)ev->nopen;
}

void pf_events_stop(struct pf_events *ev, pf_sample_fn fn, void *arg)
{
	for (unsigned i = 0; i < ev->nthreads; i++) {
		struct pf_thread *t = &ev->threads[i];
		if (t->fd < 0)
			continue;
		ioctl(t->fd, PERF_EVENT_IOC_DISABLE, 0);
		for (unsigned k = 0; k < PF_MAX_UPROBES; k++)
			if (t->pfd[k] >= 0)
				ioctl(t->pfd[k], PERF_EVENT_IOC_DISABLE, 0);
	}
	for (unsigned i = 0; i < ev->nthreads; i++) {
		struct pf_thread *t = &ev->threads[i];
		if (t->fd < 0)
			continue;
		pf_ring_drain(&t->ring, ev->scratch, fn, arg, &ev->st);
		/* Threads often name themselves after they start: take the last name. */
		read_comm(ev->pid, t->tid, t->comm);
		close_thread(ev, t);
	}
}

const char *pf_events_comm(const struct pf_events *ev, uint32_t tid)
{
	int16_t i = ev->slots[tid_slot(ev, tid)];
	return i >= 0 ? ev->threads[i].comm : "";
}

uint64_t pf_events_hits(const struct pf_events *ev)
{
	return ev ? ev->hits : 0;
}

uint64_t pf_events_expected(const struct pf_events *ev)
{
	return ev ? ev->expected : 0;
}

uint64_t pf_events_probe_hits(const struct pf_events *ev, unsigned k)
{
	return ev && k < PF_MAX_UPROBES ? ev->hits_k[k] : 0;
}

int pf_events_probe_of(const struct pf_events *ev, uint32_t tid, uint64_t id)
{
	int16_t i = ev->slots[tid_slot(ev, tid)];
	if (i < 0)
		return -1;
	const struct pf_thread *t = &ev->threads[i];
	for (unsigned k = 0; k < ev->nup; k++)
		if (t->pid_[k] == id)
			return (int)k;
	return -1;
}

void pf_events_disable(struct pf_events *ev)
{
	ev->up_disabled = true;
	for (unsigned i = 0; i < ev->nthreads; i++)
		for (unsigned k = 0; k < PF_MAX_UPROBES; k++)
			if (ev->threads[i].pfd[k] >= 0)
				ioctl(ev->threads[i].pfd[k], PERF_EVENT_IOC_DISABLE, 0);
}

unsigned pf_events_close_probe(struct pf_events *ev, unsigned k)
{
	if (k >= ev->nup || ev->up_closed[k])
		return 0;
	ev->up_closed[k] = true;
	for (unsigned i = 0; i < ev->nthreads; i++)
		close_probe(ev, &ev->threads[i], k);
	unsigned left = 0;
	for (unsigned j = 0; j < ev->nup; j++)
		left += !ev->up_closed[j];
	return left;
}

void pf_events_drain(struct pf_events *ev, pf_sample_fn fn, void *arg)
{
	for (unsigned i = 0; i < ev->nthreads; i++)
		if (ev->threads[i].fd >= 0)
			pf_ring_drain(&ev->threads[i].ring, ev->scratch, fn, arg, &ev->st);
}

void pf_events_stats(const struct pf_events *ev, struct pf_ring_stats *st,
		     unsigned *threads_seen, unsigned *threads_skipped)
{
	*st = ev->st;
	*threads_seen = ev->nthreads;
	*threads_skipped = ev->skipped;
}

void pf_events_close(struct pf_events *ev)
{
	if (!ev)
		return;
	if (ev->threads)
		for (unsigned i = 0; i < ev->nthreads; i++)
			close_thread(ev, &ev->threads[i]);
	if (ev->epfd >= 0)
		close(ev->epfd);
	free(ev->threads);
	free(ev->slots);
	free(ev->scratch);
	free(ev);
}

/* SPDX-License-Identifier: GPL-2.0 */
/*
 * twostep: the shared internal header. The types of a device's context,
 * its chunks and its live allocations, used by counters.c, chunk.c,
 * slot.c and ctx.c, with the lock-free lookups of the IOVA calls; and the
 * calls of ctx.c (contexts and allocations), used by iova.c, hmm.c and
 * module.c.
 */
#ifndef _TWOSTEP_CTX_H
#define _TWOSTEP_CTX_H

#include <linux/atomic.h>
#include <linux/hash.h>
#include <linux/iommu.h>
#include <linux/iova.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/rcupdate.h>
#include <linux/workqueue.h>
#include <linux/percpu.h>
#include <linux/xarray.h>
#include <linux/sizes.h>
#include <linux/spinlock.h>
#include <linux/timer.h>

#include "compat.h"
#include "links.h"
#include "twostep.h"

/**
 * struct twostep_chunk - one range reserved from the DMA API
 * @node: entry in &twostep_ctx.chunks (RCU)
 * @start: first address
 * @size: size in bytes
 * @last_pfn: last granule (inclusive)
 * @nr: granules
 * @free: granules not allocated nor counted on by an allocation under way
 * @gone: entry in the give-back worker's list
 * @idle_since: jiffies when it last became wholly free
 * @iovad: private allocator over exactly this range
 */
struct twostep_chunk {
	struct list_head node;
	dma_addr_t start;
	u64 size;
	unsigned long last_pfn;
	unsigned long nr;
	atomic_long_t free;
	struct list_head gone;
	unsigned long idle_since;
	struct iova_domain iovad;
};

/*
 * Every live allocation of a device has a slot number, kept in bits 48-62
 * of &twostep_iova_state.__size: the calls find it without a search, and
 * since slots are handed out round robin, a stale copy of a state does not
 * match a new allocation until its slot comes round again.
 */
#define TWOSTEP_SLOT_SHIFT	48
#define TWOSTEP_SLOTS		BIT(15)
#define TWOSTEP_SLOTS_PER_PAGE	(PAGE_SIZE / sizeof(void *))
#define TWOSTEP_SLOT_PAGES	(TWOSTEP_SLOTS / TWOSTEP_SLOTS_PER_PAGE)

/*
 * Per-CPU caches of freed ranges of 64 to 512 granules (256 KiB to 2 MiB
 * of 4 KiB granules), by power of two: what the kernel's own per-CPU IOVA
 * caches (which twostep's chunks also use) leave out, and what GPU faults
 * and large requests allocate and free over and over. At most
 * TWOSTEP_PCPU_BYTES of IOVA per CPU and size; drained by the give-back
 * worker, and by an allocation that finds no room (as the kernel's own
 * caches are flushed then).
 */
#define TWOSTEP_PCPU_MIN_ORDER	6
#define TWOSTEP_PCPU_ORDERS	4
#define TWOSTEP_PCPU_DEPTH	8
#define TWOSTEP_PCPU_BYTES	SZ_4M

struct twostep_chunk;
struct twostep_fq;

/**
 * struct twostep_pcpu - one CPU's cache of freed ranges of one context
 * @lock: taken on its own CPU, or by the worker that drains it
 * @n: ranges held, per order
 * @chunk: the chunk of each range held
 * @pfn: the first granule of each range held
 */
struct twostep_pcpu {
	spinlock_t lock;	/* @n, @chunk, @pfn */
	unsigned int n[TWOSTEP_PCPU_ORDERS];
	struct twostep_chunk *chunk[TWOSTEP_PCPU_ORDERS][TWOSTEP_PCPU_DEPTH];
	unsigned long pfn[TWOSTEP_PCPU_ORDERS][TWOSTEP_PCPU_DEPTH];
};

/**
 * struct twostep_ctx - what twostep holds for one device
 * @node: entry in the global context list (RCU)
 * @hnode: entry in its bucket of the look-up table (RCU)
 * @dev: the device (a reference is held)
 * @domain: its DMA-API domain
 * @shift: log2 of the IOVA granule
 * @pgsize_large: smallest page size above the granule (U64_MAX: none)
 * @probed: @unit_maps is known
 * @unit_maps: the IOMMU driver keeps each map call as one mapping that an
 *             unmap cannot split (virtio-iommu): found by a probe of the
 *             first chunk (chunk.c)
 * @big_min: links of this many granules or more may be one mapping larger
 *           than a granule: their head, length and protection are recorded
 *           so that an unlink can cut them (iova.c)
 * @prot_extra: IOMMU_* flags added to every mapping (cache coherency)
 * @attached: twostep_attach() was called
 * @chunks: the reservation (RCU list, added to under @grow_lock)
 * @nchunks: entries in @chunks
 * @reserved: bytes in @chunks
 * @next_chunk: bytes the next growth reserves at least
 * @chunk_max: @next_chunk stops doubling here
 * @keep_free: bytes of wholly free chunks the device keeps
 * @grow_lock: serialises growth
 * @grow_work: growth for try_alloc() calls that could not sleep
 * @grow_want: bytes the worker is asked to find room for
 * @grow_more: the worker is asked for one more chunk (lazy mode: the flush
 *             queues held much of the reservation when it ran out)
 * @grow_ns: duration of the last growth
 * @shrink_work: gives wholly free chunks back to the DMA API
 * @dying: the context is being torn down: no more give-back work
 * @domain_gone: @domain was replaced (group type changed): never touch it
 * @bound: made while a driver was bound to the device: the group's domain
 *         cannot change before that driver unbinds, and the unbind
 *         destroys the context (module.c), so calls need not check
 * @users: sleeping try_alloc() calls under way (detach waits for them)
 * @slot_next: where the search for a free slot starts (round robin)
 * @slot_used: one bit per slot, set while the slot is taken
 * @slot_page: live allocations by slot number, in pages of pointers
 *             allocated on demand; read under RCU
 * @linked: granules mapped through this context, per CPU
 * @pcpu: the per-CPU caches of freed ranges
 * @fq: lazy domain: the per-CPU flush queues of destroyed ranges (chunk.c),
 *      or NULL: every destroy syncs at once
 * @fq_timer: flushes the queues TWOSTEP_FQ_TIMEOUT after a range was queued
 * @misuse: refused calls
 * @deferred: try_alloc() calls that left growth to the worker
 */
struct twostep_ctx {
	struct list_head node;
	struct hlist_node hnode;
	struct device *dev;
	struct iommu_domain *domain;
	/* the device's DMA ops at set-up, to give back with (reserve.c) */
	const struct dma_map_ops *dma_ops;
	unsigned int shift;
	u64 pgsize_large;
	bool probed;
	bool unit_maps;
	unsigned long big_min;
	int prot_extra;
	bool attached;
	struct list_head chunks;
	unsigned int nchunks;
	u64 reserved;
	u64 next_chunk;
	u64 chunk_max;
	u64 keep_free;
	struct mutex grow_lock;		/* serialises growth */
	struct work_struct grow_work;
	atomic64_t grow_want;
	bool grow_more;
	u64 grow_ns;
	struct delayed_work shrink_work;
	bool dying;
	bool domain_gone;
	bool bound;
	atomic_t users;
	unsigned int slot_next;
	unsigned long *slot_used;
	struct twostep_alloc __rcu **slot_page[TWOSTEP_SLOT_PAGES];
	long __percpu *linked;
	struct twostep_pcpu __percpu *pcpu;
	struct twostep_fq __percpu *fq;
	struct timer_list fq_timer;
	atomic_long_t misuse;
	atomic_long_t deferred;
};

/**
 * struct twostep_alloc - one live IOVA range
 * @rcu: frees it after lookups that may still see it are done
 * @free_next: the next record of its batch waiting for that (ctx.c)
 * @ctx: its context
 * @chunk: the chunk it lies in
 * @pfn: its first granule in the chunk's allocator
 * @base: granule-aligned first address of the range
 * @addr: address handed to the caller (@base plus the phys offset)
 * @size: &twostep_iova_state.__size handed out (size and slot)
 * @slot: slot number
 * @nr: granules in the range
 * @links: which granules are linked
 * @inflight: link and unlink calls under way on the range (the low
 *            TWOSTEP_INFLIGHT_BITS), and how many left it (the rest)
 * @raced: an unlink overlapped another call on the range: a link whose
 *         granules it cleared may have mapped after its unmap, so the
 *         teardown looks at the page table of [@raced_lo, @raced_hi)
 * @raced_lo: first granule of the raced unlinks' spans
 * @raced_hi: one past their last granule
 * @dead: set before the range is torn down: later links and unlinks fail
 * @big_one: the first such link, inline (TWOSTEP_BIG_ONE()), or 0; the
 *           others go to @big
 * @big: the head granule of every link that may be mapped with pages
 *       larger than a granule, with its IOMMU_* protection as a value, so
 *       that an unlink that cuts such a link can map its outside part again
 * @dbg: the checker's record (debug.c), or NULL: not tracked
 * @map_space: the link map of a range of up to LINKS_INLINE_MAX granules
 */
struct twostep_alloc {
	struct rcu_head rcu;
	struct twostep_alloc *free_next;
	struct twostep_ctx *ctx;
	struct twostep_chunk *chunk;
	unsigned long pfn;
	dma_addr_t base;
	dma_addr_t addr;
	u64 size;
	unsigned int slot;
	unsigned long nr;
	struct twostep_links *links;
	atomic_long_t inflight;
	bool dead;
	bool raced;
	unsigned long raced_lo;
	unsigned long raced_hi;
	unsigned long big_one;
	struct xarray big;
	struct twostep_dbg_range *dbg;
	unsigned long map_space[LINKS_INLINE_SIZE / sizeof(unsigned long)];
};

/* @big_one of a link at granule @g with protection @prot (8 bits) */
#define TWOSTEP_BIG_ONE(g, prot)	(((g) + 1) << 8 | (prot))
#define TWOSTEP_BIG_ONE_HEAD(v)		(((v) >> 8) - 1)
#define TWOSTEP_BIG_ONE_PROT(v)		((int)((v) & 0xff))

extern struct list_head twostep_ctxs;
extern spinlock_t twostep_ctxs_lock;
extern struct work_struct twostep_stale_work;

/* Contexts by device, for the calls' look-up: one bucket, not a list walk */
#define TWOSTEP_CTX_HASH_BITS	6
extern struct hlist_head twostep_ctx_hash[BIT(TWOSTEP_CTX_HASH_BITS)];

static inline struct hlist_head *twostep_ctx_bucket(struct device *dev)
{
	return &twostep_ctx_hash[hash_ptr(dev, TWOSTEP_CTX_HASH_BITS)];
}

/*
 * The context of @dev, or NULL. Call under rcu_read_lock(),
 * rcu_read_lock_sched() or with twostep_ctxs_lock held; the context stays
 * valid until then.
 */
static inline struct twostep_ctx *twostep_ctx_find(struct device *dev)
{
	struct twostep_ctx *ctx;

	hlist_for_each_entry_rcu(ctx, twostep_ctx_bucket(dev), hnode,
				 lockdep_is_held(&twostep_ctxs_lock))
		if (ctx->dev == dev)
			return ctx;
	return NULL;
}

/* Make @ctx findable, or not; under twostep_ctxs_lock. */
static inline void twostep_ctx_list(struct twostep_ctx *ctx)
{
	list_add_tail_rcu(&ctx->node, &twostep_ctxs);
	hlist_add_head_rcu(&ctx->hnode, twostep_ctx_bucket(ctx->dev));
}

static inline void twostep_ctx_unlist_one(struct twostep_ctx *ctx)
{
	list_del_rcu(&ctx->node);
	hlist_del_rcu(&ctx->hnode);
}

extern char twostep_domain_tag;

/*
 * Has the device's domain been replaced under @ctx (sysfs type, possible
 * only while no driver of the group is bound)? By address and by
 * twostep's mark (compat.h), which a new domain at the old one's address
 * does not have. Never touches @ctx->domain unless it is the device's.
 */
static inline bool twostep_ctx_stale(struct twostep_ctx *ctx)
{
	struct iommu_domain *now = iommu_get_domain_for_dev(ctx->dev);

	return READ_ONCE(ctx->domain_gone) || now != ctx->domain ||
	       !twostep_compat_domain_marked(now, &twostep_domain_tag);
}

/*
 * May a call use @ctx->domain? A context made while a driver was bound
 * may while one is (@driver: look whether one still is; the link path
 * does not, since its driver's unbind destroys the context and a driver
 * links only into a device it drives: that look made a link 20% slower
 * in make bench under TCG); any other is checked (a group reference on
 * 6.1).
 */
static inline bool twostep_ctx_usable(struct twostep_ctx *ctx, bool driver)
{
	if (likely(ctx->bound) && (!driver || READ_ONCE(ctx->dev->driver)))
		return true;
	if (!twostep_ctx_stale(ctx))
		return true;
	WRITE_ONCE(ctx->domain_gone, true);
	return false;
}

void twostep_ctx_destroy(struct twostep_ctx *ctx, const char *why,
			 bool keep_hint);
bool twostep_ctx_remove(struct device *dev, const char *why, bool keep_hint);
bool twostep_alloc_new(struct device *dev, phys_addr_t phys, u64 size,
		       struct twostep_iova_state *state, unsigned long ip);

/*
 * The live allocation a state describes, or NULL. Under
 * rcu_read_lock_sched(); the result stays valid until it is dropped.
 */
static inline struct twostep_alloc *
twostep_alloc_find(struct twostep_ctx *ctx, dma_addr_t addr, u64 size)
{
	unsigned int slot = size >> TWOSTEP_SLOT_SHIFT;
	struct twostep_alloc __rcu **page;
	struct twostep_alloc *a;

	/* any bit pattern may come in: bit 63 set gives a slot past the table */
	if (slot >= TWOSTEP_SLOTS)
		return NULL;
	page = READ_ONCE(ctx->slot_page[slot / TWOSTEP_SLOTS_PER_PAGE]);
	if (!page)
		return NULL;
	a = rcu_dereference_sched(page[slot % TWOSTEP_SLOTS_PER_PAGE]);
	if (!a || a->addr != addr || a->size != size)
		return NULL;
	return a;
}

/* Granules linked (@n > 0) or unlinked (@n < 0) through @ctx. */
static inline void twostep_linked_add(struct twostep_ctx *ctx, long n)
{
	this_cpu_add(*ctx->linked, n);
}

/* @inflight: calls under way in the low bits, calls that left above them */
#define TWOSTEP_INFLIGHT_BITS	20
#define TWOSTEP_INFLIGHT_MASK	(BIT(TWOSTEP_INFLIGHT_BITS) - 1)
#define TWOSTEP_INFLIGHT_EXIT	BIT(TWOSTEP_INFLIGHT_BITS)

/*
 * Enter a call that maps or unmaps in @a: false when the range is being
 * torn down (the call must then touch nothing). Pairs with the barrier in
 * twostep_alloc_finish(): either the call sees @dead, or the teardown sees
 * the call and waits for it. @seq gets @inflight as the call entered.
 */
static inline bool twostep_alloc_enter(struct twostep_alloc *a, long *seq)
{
	/* a value-returning atomic: fully ordered, before the look at @dead */
	*seq = atomic_long_inc_return(&a->inflight);
	if (likely(!READ_ONCE(a->dead)))
		return true;
	atomic_long_dec(&a->inflight);
	return false;
}

/* Leave: one fewer under way, one more that left. */
static inline void twostep_alloc_exit(struct twostep_alloc *a)
{
	/* what the call mapped or unmapped, before it counts itself out */
	smp_mb__before_atomic();
	atomic_long_add(TWOSTEP_INFLIGHT_EXIT - 1, &a->inflight);
}

/*
 * Did another call run on @a while this one, which entered with @seq,
 * was under way? Any call under way as it entered or now, or one that
 * left meanwhile. Call after the last change to the link map.
 */
static inline bool twostep_alloc_overlapped(struct twostep_alloc *a,
					    long seq)
{
	long now;

	/* the link map's changes before the look at the count */
	smp_mb();
	now = atomic_long_read(&a->inflight);
	return (seq & TWOSTEP_INFLIGHT_MASK) > 1 ||
	       (now & TWOSTEP_INFLIGHT_MASK) > 1 ||
	       (now >> TWOSTEP_INFLIGHT_BITS) != (seq >> TWOSTEP_INFLIGHT_BITS);
}

/*
 * Is another call under way on @a now? Read after the link map: a link
 * that claimed granules seen there entered (a fully ordered increment)
 * before its claim, so it is counted until it has mapped them.
 */
static inline bool twostep_alloc_busy(struct twostep_alloc *a)
{
	/* the link map read before the count: pairs with the enter */
	smp_rmb();
	return (atomic_long_read(&a->inflight) & TWOSTEP_INFLIGHT_MASK) > 1;
}

int twostep_ctx_init(void);
void twostep_ctx_exit(void);
bool twostep_alloc_finish(struct twostep_ctx *ctx, struct twostep_alloc *a,
			  unsigned long keep_first, bool *extra);

#endif /* _TWOSTEP_CTX_H */

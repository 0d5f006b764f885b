// SPDX-License-Identifier: GPL-2.0
/*
 * twostep: per-device contexts and the allocations made in them. A device
 * gets a context the first time twostep_iova_try_alloc() (or
 * twostep_attach()) is called for it, if its DMA-API domain translates.
 * The context reserves IOVA in chunks (chunk.c), gives every live
 * allocation a slot (slot.c) and a link map (links.c). Detach, unbinding
 * the driver, removing the device or unloading twostep gives it all back.
 * Calls reserve.c (its block size), links.c, counters.c, debug.c (the
 * checker's leak report), chunk.c and slot.c.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/device.h>
#include <linux/dma-map-ops.h>
#include <linux/dma-mapping.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/poison.h>
#include <linux/preempt.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/wait_bit.h>

#include "chunk.h"
#include "counters.h"
#include "ctx.h"
#include "debug.h"
#include "reserve.h"
#include "slot.h"

LIST_HEAD(twostep_ctxs);
struct hlist_head twostep_ctx_hash[BIT(TWOSTEP_CTX_HASH_BITS)];
DEFINE_SPINLOCK(twostep_ctxs_lock);

/* Range records, each with room for the link map of a range up to 2 MiB. */
static struct kmem_cache *twostep_alloc_cache;

/*
 * A constructor, so that the slab does not zero each record it hands out
 * (init_on_alloc, on by default in Debian's kernels, skips caches that
 * have one): twostep_alloc_new() sets every field it reads.
 */
static void twostep_alloc_ctor(void *obj)
{
	struct twostep_alloc *a = obj;

	atomic_long_set(&a->inflight, 0);
	a->dbg = NULL;
}

/*
 * poison=1, a test aid: SLUB does not poison the objects of a cache with
 * a constructor, so twostep poisons its freed range records itself, and
 * keeps the last TWOSTEP_QUARANTINE of them from reuse. A call that reads
 * a freed record finds the poison (its pointers fault), one that writes
 * it leaves a mark twostep_debug_poison_check() finds.
 */
static bool twostep_poison;
module_param_named(poison, twostep_poison, bool, 0444);
MODULE_PARM_DESC(poison,
		 "test aid: poison freed range records and keep the last 1024 from reuse, to see a use after free (default 0)");

#define TWOSTEP_QUARANTINE	1024
static DEFINE_SPINLOCK(twostep_q_lock);	/* the ring */
static struct twostep_alloc *twostep_q[TWOSTEP_QUARANTINE];
static unsigned int twostep_q_next;
static atomic_long_t twostep_q_written = ATOMIC_LONG_INIT(0);

/*
 * Let a kept record go: was it written since it was poisoned? Then say
 * where, and count. Freed as the constructor left it, for the next user.
 */
static void twostep_poison_release(struct twostep_alloc *a)
{
	u8 *bad = memchr_inv(a, POISON_FREE, sizeof(*a));

	if (bad) {
		atomic_long_inc(&twostep_q_written);
		pr_err("a freed range record was written after its free, at offset %td\n",
		       bad - (u8 *)a);
	}
	twostep_alloc_ctor(a);
	kmem_cache_free(twostep_alloc_cache, a);
}

/* Poison @a and keep it; free the oldest record kept, checked. */
static void twostep_poison_keep(struct twostep_alloc *a)
{
	struct twostep_alloc *old;
	unsigned long flags;

	memset(a, POISON_FREE, sizeof(*a));
	spin_lock_irqsave(&twostep_q_lock, flags);
	old = twostep_q[twostep_q_next];
	twostep_q[twostep_q_next] = a;
	twostep_q_next = (twostep_q_next + 1) % TWOSTEP_QUARANTINE;
	spin_unlock_irqrestore(&twostep_q_lock, flags);
	if (old)
		twostep_poison_release(old);
}

/* Check and free every record kept. */
static void twostep_poison_drain(void)
{
	struct twostep_alloc *a;
	unsigned long flags;
	unsigned int i;

	for (i = 0; i < TWOSTEP_QUARANTINE; i++) {
		spin_lock_irqsave(&twostep_q_lock, flags);
		a = twostep_q[i];
		twostep_q[i] = NULL;
		spin_unlock_irqrestore(&twostep_q_lock, flags);
		if (a)
			twostep_poison_release(a);
	}
}

/*
 * Retired range records wait for their grace period in per-CPU batches:
 * one call_rcu() per TWOSTEP_FREE_BATCH destroys instead of one each, the
 * largest piece of a small range's destroy after the unmap (about 140 of
 * its 1750 instructions). A batch goes to RCU after its last record was
 * retired, so its grace period covers every record in it.
 */
#define TWOSTEP_FREE_BATCH	16

struct twostep_free_batch {
	spinlock_t lock;	/* @head, @n: its CPU, or the flush */
	struct twostep_alloc *head;
	unsigned int n;
};

static DEFINE_PER_CPU(struct twostep_free_batch, twostep_free_batches);

/* The link map of @a, unless it is the one inside the record. */
static void twostep_alloc_links_free(struct twostep_alloc *a)
{
	if (a->links != (struct twostep_links *)a->map_space)
		twostep_links_free(a->links);
}

/*
 * Records whose grace period is over, kept per CPU for the next
 * try_alloc() there: a pop with interrupts off instead of a slab
 * allocation (about 90 instructions of a one-page try_alloc's 630, counted
 * under -icount), as the IOVA allocator keeps freed ranges per CPU.
 */
#define TWOSTEP_RECYCLE_MAX	32

struct twostep_recycle {
	struct twostep_alloc *head;	/* chained by @free_next */
	unsigned int n;
};

static DEFINE_PER_CPU(struct twostep_recycle, twostep_recycled);

/* A record to fill in: a recycled one, or a new one. */
static struct twostep_alloc *twostep_alloc_get(gfp_t gfp)
{
	struct twostep_recycle *r;
	struct twostep_alloc *a;
	unsigned long flags;

	local_irq_save(flags);
	r = this_cpu_ptr(&twostep_recycled);
	a = r->head;
	if (a) {
		r->head = a->free_next;
		r->n--;
	}
	local_irq_restore(flags);
	return a ?: kmem_cache_alloc(twostep_alloc_cache, gfp | __GFP_NOWARN);
}

/* Keep @a for this CPU's next try_alloc(), or free it. */
static void twostep_alloc_put(struct twostep_alloc *a)
{
	struct twostep_recycle *r;
	unsigned long flags;
	bool kept = false;

	local_irq_save(flags);
	r = this_cpu_ptr(&twostep_recycled);
	if (r->n < TWOSTEP_RECYCLE_MAX) {
		a->free_next = r->head;
		r->head = a;
		r->n++;
		kept = true;
	}
	local_irq_restore(flags);
	if (!kept)
		kmem_cache_free(twostep_alloc_cache, a);
}

/* At unload: the records kept on every CPU. */
static void twostep_alloc_recycled_free(void)
{
	struct twostep_recycle *r;
	struct twostep_alloc *a;
	int cpu;

	for_each_possible_cpu(cpu) {
		r = per_cpu_ptr(&twostep_recycled, cpu);
		while ((a = r->head)) {
			r->head = a->free_next;
			kmem_cache_free(twostep_alloc_cache, a);
		}
		r->n = 0;
	}
}

static void twostep_alloc_free(struct twostep_alloc *a)
{
	if (!xa_empty(&a->big))
		xa_destroy(&a->big);
	twostep_dbg_free(a);
	twostep_alloc_links_free(a);
	if (unlikely(twostep_poison))
		twostep_poison_keep(a);
	else
		twostep_alloc_put(a);
}

static void twostep_alloc_free_rcu(struct rcu_head *head)
{
	twostep_alloc_free(container_of(head, struct twostep_alloc, rcu));
}

/* A batch whose grace period is over: its records, chained. */
static void twostep_alloc_free_batch_rcu(struct rcu_head *head)
{
	struct twostep_alloc *a, *next;

	for (a = container_of(head, struct twostep_alloc, rcu); a; a = next) {
		next = a->free_next;
		twostep_alloc_free(a);
	}
}

/*
 * Free @a, which no lookup can find any more, once none can see it. A
 * batch holds records of ranges up to 2 MiB only, their link maps inside
 * them: what a CPU's partial batch keeps is bounded, a few KiB.
 */
static void twostep_alloc_retire(struct twostep_alloc *a)
{
	struct twostep_free_batch *b;
	struct twostep_alloc *full = NULL;
	unsigned long flags;

	/* poison=1: each as soon as it may be, where a late write shows */
	if (a->links != (struct twostep_links *)a->map_space ||
	    unlikely(twostep_poison)) {
		call_rcu(&a->rcu, twostep_alloc_free_rcu);
		return;
	}
	local_irq_save(flags);
	b = this_cpu_ptr(&twostep_free_batches);
	spin_lock(&b->lock);
	a->free_next = b->head;
	b->head = a;
	if (++b->n == TWOSTEP_FREE_BATCH) {
		full = b->head;
		b->head = NULL;
		b->n = 0;
	}
	spin_unlock(&b->lock);
	local_irq_restore(flags);
	if (full)
		call_rcu(&full->rcu, twostep_alloc_free_batch_rcu);
}

int twostep_ctx_init(void)
{
	int cpu;

	for_each_possible_cpu(cpu)
		spin_lock_init(&per_cpu_ptr(&twostep_free_batches, cpu)->lock);
	twostep_alloc_cache = kmem_cache_create("twostep_alloc",
						sizeof(struct twostep_alloc),
						__alignof__(struct twostep_alloc),
						0, twostep_alloc_ctor);
	return twostep_alloc_cache ? 0 : -ENOMEM;
}

/* The partial batches to RCU too, and every record freed by its end. */
static void twostep_alloc_flush_batches(void)
{
	struct twostep_free_batch *b;
	struct twostep_alloc *head;
	unsigned long flags;
	int cpu;

	for_each_possible_cpu(cpu) {
		b = per_cpu_ptr(&twostep_free_batches, cpu);
		spin_lock_irqsave(&b->lock, flags);
		head = b->head;
		b->head = NULL;
		b->n = 0;
		spin_unlock_irqrestore(&b->lock, flags);
		if (head)
			call_rcu(&head->rcu, twostep_alloc_free_batch_rcu);
	}
	rcu_barrier();
}

/**
 * twostep_debug_poison_check - look for writes to freed range records
 *
 * Return: records found written after their free since load, each also
 * reported in the kernel log, or -EOPNOTSUPP without poison=1.
 */
long twostep_debug_poison_check(void)
{
	might_sleep();
	if (!twostep_poison)
		return -EOPNOTSUPP;
	twostep_alloc_flush_batches();
	twostep_poison_drain();
	return atomic_long_read(&twostep_q_written);
}
EXPORT_SYMBOL_GPL(twostep_debug_poison_check);

/*
 * At unload, when no caller is left: every record is freed before its
 * cache goes.
 */
void twostep_ctx_exit(void)
{
	twostep_alloc_flush_batches();
	twostep_poison_drain();
	twostep_alloc_recycled_free();
	kmem_cache_destroy(twostep_alloc_cache);
}

/*
 * May this call sleep? Only when the kernel can tell (preemption counted):
 * preemption and IRQs on, and no RCU read lock held. Else we never sleep.
 */
static bool twostep_may_sleep(void)
{
	return preemptible() && !rcu_preempt_depth();
}

static void twostep_ctx_put_user(struct twostep_ctx *ctx)
{
	if (atomic_dec_and_test(&ctx->users))
		wake_up_var(&ctx->users);
}

/* Can twostep serve @dev? 0, or why not. */
static int twostep_dev_check(struct device *dev, struct iommu_domain **domp)
{
	struct iommu_domain *domain = iommu_get_domain_for_dev(dev);

	if (!domain || !(domain->type & __IOMMU_DOMAIN_PAGING) ||
	    !iommu_is_dma_domain(domain))
		return -ENODEV;
	if (!dev_is_dma_coherent(dev) ||
	    (dev_is_pci(dev) && to_pci_dev(dev)->untrusted))
		return -EOPNOTSUPP;
	if ((1UL << __ffs(domain->pgsize_bitmap)) > PAGE_SIZE)
		return -EOPNOTSUPP;
	/* a domain with a fault handler of someone's cannot carry the mark */
	if (!twostep_compat_domain_mark(domain, &twostep_domain_tag))
		return -EOPNOTSUPP;
	*domp = domain;
	return 0;
}

/* Free a context's memory; it holds no allocation and no chunk. */
static void twostep_ctx_free(struct twostep_ctx *ctx)
{
	unsigned int i;

	if (!ctx)
		return;
	for (i = 0; i < TWOSTEP_SLOT_PAGES; i++)
		free_page((unsigned long)ctx->slot_page[i]);
	free_percpu(ctx->linked);
	free_percpu(ctx->pcpu);
	free_percpu(ctx->fq);
	bitmap_free(ctx->slot_used);
	kfree(ctx);
}

/* twostep's mark on the domains it reserves in (twostep_ctx_stale()) */
char twostep_domain_tag;

/*
 * Unlist the context of @dev (only if stale, with @stale_only) and destroy
 * it; false when there is none.
 */
static bool twostep_ctx_unlist(struct device *dev, const char *why,
			       bool keep_hint, bool stale_only)
{
	struct twostep_ctx *ctx;
	unsigned long flags;

	spin_lock_irqsave(&twostep_ctxs_lock, flags);
	ctx = twostep_ctx_find(dev);
	if (ctx && stale_only && !twostep_ctx_stale(ctx))
		ctx = NULL;
	if (ctx)
		twostep_ctx_unlist_one(ctx);
	spin_unlock_irqrestore(&twostep_ctxs_lock, flags);
	if (!ctx)
		return false;
	synchronize_rcu();
	twostep_ctx_destroy(ctx, why, keep_hint);
	return true;
}

/* Unlist the context of @dev and destroy it; false when there is none. */
bool twostep_ctx_remove(struct device *dev, const char *why, bool keep_hint)
{
	return twostep_ctx_unlist(dev, why, keep_hint, false);
}

/* Drop every context whose domain changed: for callers that may not sleep. */
static void twostep_stale_fn(struct work_struct *work)
{
	struct twostep_ctx *ctx;
	struct device *dev;

	do {
		dev = NULL;
		rcu_read_lock();
		list_for_each_entry_rcu(ctx, &twostep_ctxs, node) {
			if (twostep_ctx_stale(ctx)) {
				dev = get_device(ctx->dev);
				break;
			}
		}
		rcu_read_unlock();
		if (dev) {
			twostep_ctx_unlist(dev, "domain changed", true, true);
			put_device(dev);
		}
	} while (dev);
}

DECLARE_WORK(twostep_stale_work, twostep_stale_fn);

/*
 * The context of @dev, made if there is none, with a user reference held;
 * NULL (and why in @err) when twostep cannot serve the device.
 */
static struct twostep_ctx *twostep_ctx_get(struct device *dev, gfp_t gfp,
					   int *err)
{
	struct iommu_domain *domain;
	struct twostep_ctx *ctx, *old;
	unsigned long flags, larger;
	bool stale;
	int cpu;

	/* the _sched flavour: inline, where rcu_read_lock() is a call */
	rcu_read_lock_sched();
	ctx = twostep_ctx_find(dev);
	stale = ctx && !twostep_ctx_usable(ctx, true);
	if (ctx && !stale)
		atomic_inc(&ctx->users);
	rcu_read_unlock_sched();
	if (ctx && !stale)
		return ctx;
	if (stale) {
		/*
		 * The group's domain changed under the context (sysfs type,
		 * with no driver bound): drop it, touching nothing of the
		 * old domain, and start afresh. Dropping sleeps: a caller
		 * that may not is refused and leaves the drop to a worker.
		 */
		if (!twostep_may_sleep()) {
			schedule_work(&twostep_stale_work);
			*err = -EAGAIN;
			return NULL;
		}
		twostep_ctx_unlist(dev, "domain changed", true, true);
	}
	*err = twostep_dev_check(dev, &domain);
	if (*err)
		return NULL;
	ctx = kzalloc(sizeof(*ctx), gfp | __GFP_NOWARN);
	if (ctx) {
		ctx->slot_used = bitmap_zalloc(TWOSTEP_SLOTS,
					       gfp | __GFP_NOWARN);
		ctx->linked = alloc_percpu_gfp(long, gfp | __GFP_NOWARN);
		ctx->pcpu = alloc_percpu_gfp(struct twostep_pcpu,
					     gfp | __GFP_NOWARN);
	}
	if (!ctx || !ctx->slot_used || !ctx->linked || !ctx->pcpu) {
		twostep_ctx_free(ctx);
		*err = -ENOMEM;
		return NULL;
	}
	for_each_possible_cpu(cpu)
		spin_lock_init(&per_cpu_ptr(ctx->pcpu, cpu)->lock);
	/* a driver bound: see twostep_ctx_usable() */
	ctx->bound = !!READ_ONCE(dev->driver);
	ctx->dev = get_device(dev);
	ctx->domain = domain;
	ctx->dma_ops = get_dma_ops(dev);
	ctx->shift = __ffs(domain->pgsize_bitmap);
	larger = domain->pgsize_bitmap & ~GENMASK(ctx->shift, 0);
	ctx->pgsize_large = larger ? BIT(__ffs(larger)) : U64_MAX;
	/* until the first chunk's probe says the driver keeps maps whole */
	ctx->big_min = larger ? max(2UL, ctx->pgsize_large >> ctx->shift) :
				ULONG_MAX;
	ctx->prot_extra = IOMMU_CACHE;
	twostep_fq_init(ctx, gfp);
	INIT_LIST_HEAD(&ctx->chunks);
	ctx->next_chunk = max_t(u64, TWOSTEP_CHUNK_FIRST,
				twostep_reserve_block());
	ctx->chunk_max = max_t(u64, TWOSTEP_CHUNK_MAX, ctx->next_chunk);
	ctx->keep_free = TWOSTEP_KEEP_FREE;
	mutex_init(&ctx->grow_lock);
	INIT_WORK(&ctx->grow_work, twostep_grow_work);
	INIT_DELAYED_WORK(&ctx->shrink_work, twostep_shrink_work);
	twostep_slot_hint_load(ctx);
	atomic_set(&ctx->users, 1);

	spin_lock_irqsave(&twostep_ctxs_lock, flags);
	old = twostep_ctx_find(dev);
	if (old) {
		/* lost a race with another first call for the device */
		atomic_inc(&old->users);
	} else {
		twostep_ctx_list(ctx);
		atomic_inc(&twostep_live_contexts);
	}
	spin_unlock_irqrestore(&twostep_ctxs_lock, flags);
	if (old) {
		put_device(ctx->dev);
		twostep_ctx_free(ctx);
		return old;
	}
	return ctx;
}

/**
 * twostep_alloc_new - allocate an IOVA range for a device
 * @dev: device
 * @phys: its offset inside a granule is kept in the address
 * @size: bytes, 1 to 2^48 - 1
 * @state: filled in with the range (left as it is on failure)
 * @ip: the caller, for the checker
 *
 * The range is findable as soon as it is in its slot: a detach may free it
 * once the context's user reference is dropped, so everything is read
 * from it before that.
 *
 * Return: true when the range is allocated.
 */
bool twostep_alloc_new(struct device *dev, phys_addr_t phys, u64 size,
		       struct twostep_iova_state *state, unsigned long ip)
{
	bool may_sleep = twostep_may_sleep();
	/* reclaim without I/O at most: see twostep_ctx_grow() */
	gfp_t gfp = may_sleep ? GFP_NOIO : GFP_ATOMIC;
	struct twostep_chunk *chunk = NULL;
	struct twostep_alloc *a = NULL;
	struct twostep_ctx *ctx;
	unsigned long nr, pfn;
	int err, slot;
	u64 pad;

	ctx = twostep_ctx_get(dev, gfp, &err);
	if (!ctx)
		return false;
	pad = phys & ((1UL << ctx->shift) - 1);
	nr = (size + pad + (1UL << ctx->shift) - 1) >> ctx->shift;
	if (twostep_should_fail(TWOSTEP_FAIL_IOVA))
		goto out_put_user;
	/* not zeroed: every field is set below, the link map up to @nr */
	a = twostep_alloc_get(gfp);
	if (!a)
		goto out_put_user;
	if (nr <= LINKS_INLINE_MAX) {
		a->links = (struct twostep_links *)a->map_space;
		twostep_links_init(a->links, nr);
	} else {
		a->links = twostep_links_alloc(nr, gfp);
		if (!a->links)
			goto out_free_alloc;
	}
	atomic_long_set(&a->inflight, 0);
	a->dead = false;
	a->raced = false;
	a->big_one = 0;
	a->dbg = NULL;
	xa_init_flags(&a->big, XA_FLAGS_LOCK_IRQ);
	slot = twostep_slot_get(ctx, gfp);
	if (slot < 0)
		goto out_free_links;
	pfn = twostep_iova_get(ctx, nr, may_sleep, &chunk);
	if (!pfn)
		goto out_put_slot;
	a->ctx = ctx;
	a->chunk = chunk;
	a->pfn = pfn;
	a->nr = nr;
	a->base = (dma_addr_t)pfn << ctx->shift;
	a->addr = a->base + pad;
	a->slot = slot;
	a->size = size | (u64)slot << TWOSTEP_SLOT_SHIFT;
	/* before it is findable: the checker's record, read by every call */
	twostep_dbg(alloc, a, ip);
	state->addr = a->addr;
	state->__size = a->size;
	rcu_assign_pointer(*twostep_slot_ptr(ctx, slot), a);
	this_cpu_inc(twostep_live_allocs);
	twostep_ctx_put_user(ctx);
	return true;

out_put_slot:
	twostep_slot_put(ctx, slot);
out_free_links:
	twostep_alloc_links_free(a);
out_free_alloc:
	twostep_alloc_put(a);
out_put_user:
	twostep_ctx_put_user(ctx);
	return false;
}

/*
 * A raced unlink (twostep_raced()) may have left entries the link map does
 * not know: unmap whatever still translates in its span, by the page
 * table, into @gather. Returns the granules unmapped.
 */
static noinline unsigned long twostep_alloc_sweep(struct twostep_ctx *ctx,
						  struct twostep_alloc *a,
						  struct iommu_iotlb_gather *gather)
{
	unsigned long g, n = 0, end = min(a->raced_hi, a->nr);
	size_t gran = 1UL << ctx->shift, unmapped;
	dma_addr_t iova;

	for (g = a->raced_lo; g < end; g++) {
		iova = a->base + ((dma_addr_t)g << ctx->shift);
		if (!iommu_iova_to_phys(ctx->domain, iova))
			continue;
		unmapped = iommu_unmap_fast(ctx->domain, iova, gran, gather);
		WARN_ONCE(!unmapped, "twostep: could not unmap a stray entry at %pad\n",
			  &iova);
		n++;
	}
	if (n)
		dev_warn_ratelimited(ctx->dev, "twostep: %lu granule(s) left mapped by a link racing an unlink of the same range: unmapped\n",
				     n);
	return n;
}

/*
 * Unmap whatever @a still has linked with one flush and give its IOVA back
 * to the chunk; the caller frees @a once no lookup can see it. Returns the
 * granules unmapped; @extra gets those at or past @keep_first.
 */
static unsigned long twostep_alloc_release(struct twostep_ctx *ctx,
					   struct twostep_alloc *a,
					   unsigned long keep_first,
					   unsigned long *extra)
{
	struct iommu_iotlb_gather gather;
	unsigned long g, len = 0, total = 0, swept = 0;
	size_t bytes, unmapped;

	*extra = 0;
	iommu_iotlb_gather_init(&gather);
	for (g = twostep_links_next_run(a->links, 0, &len);
	     g < a->nr && !ctx->domain_gone;
	     g = twostep_links_next_run(a->links, g + len, &len)) {
		bytes = (size_t)len << ctx->shift;
		unmapped = iommu_unmap_fast(ctx->domain,
					    a->base + ((dma_addr_t)g << ctx->shift),
					    bytes, &gather);
		/* a raced unlink may have left the table and map apart */
		WARN_ONCE(unmapped != bytes && !READ_ONCE(a->raced),
			  "twostep: unmapped %zu of %zu bytes\n", unmapped,
			  bytes);
		total += len;
		if (g + len > keep_first)
			*extra += g + len - max(g, keep_first);
	}
	if (unlikely(READ_ONCE(a->raced)) && !ctx->domain_gone)
		swept = twostep_alloc_sweep(ctx, a, &gather);
	/*
	 * No stale IOTLB entry may outlive the IOVA's return to the chunk:
	 * sync now, or in a lazy domain, leave the IOVA to the flush queue
	 * (with the page-table pages the unmap freed, where they can wait;
	 * not after a raced unlink, which is rare and swept here).
	 */
	if (total && !swept && ctx->fq &&
	    twostep_compat_gather_keepable(&gather)) {
		twostep_fq_queue(ctx, a->chunk, a->pfn, a->nr, &gather);
	} else {
		if (total || swept)
			iommu_iotlb_sync(ctx->domain, &gather);
		twostep_iova_put(ctx, a->chunk, a->pfn, a->nr);
	}
	twostep_slot_put(ctx, a->slot);
	this_cpu_dec(twostep_live_allocs);
	twostep_linked_add(ctx, -(long)total);
	return total;
}

/*
 * A teardown that found a link or unlink under way in interrupt context,
 * where it cannot wait for it: done once every such call has ended.
 */
static void twostep_alloc_release_rcu(struct rcu_head *head)
{
	struct twostep_alloc *a = container_of(head, struct twostep_alloc,
					       rcu);
	unsigned long past;

	twostep_alloc_release(a->ctx, a, 0, &past);
	twostep_alloc_free_rcu(head);
}

/**
 * twostep_alloc_finish - take an allocation out and release it
 * @ctx: its context
 * @a: the allocation, found under rcu_read_lock_sched(), still held
 * @keep_first: granules from the start that may be linked
 * @extra: set when granules past @keep_first were still linked
 *
 * The range is marked dead first, so that a link or unlink racing with
 * this (the caller's bug) either fails or is waited for: nothing stays
 * mapped in IOVA that goes back to the chunk.
 *
 * Return: false when a racing destroy or free of the same state won.
 */
bool twostep_alloc_finish(struct twostep_ctx *ctx, struct twostep_alloc *a,
			  unsigned long keep_first, bool *extra)
{
	struct twostep_alloc **slot;
	unsigned long past;

	slot = (struct twostep_alloc __force **)twostep_slot_ptr(ctx, a->slot);
	if (cmpxchg(slot, a, NULL) != a)
		return false;
	WRITE_ONCE(a->dead, true);
	/* pairs with twostep_alloc_enter(): we see its count or it sees @dead */
	smp_mb();
	*extra = false;
	if (unlikely(atomic_long_read(&a->inflight) &
		     TWOSTEP_INFLIGHT_MASK)) {
		if (!in_task()) {
			/* it may be the call this interrupt interrupted */
			call_rcu(&a->rcu, twostep_alloc_release_rcu);
			return true;
		}
		/* a call on another CPU, with preemption off: short */
		while (atomic_long_read(&a->inflight) & TWOSTEP_INFLIGHT_MASK)
			cpu_relax();
		/* its links' bits, set before it left (twostep_alloc_exit()) */
		smp_rmb();
	}
	twostep_alloc_release(ctx, a, keep_first, &past);
	twostep_alloc_retire(a);
	*extra = past;
	return true;
}

/*
 * Give back everything of a context that no lookup can see any more and
 * that no try_alloc() is using, and free it.
 */
void twostep_ctx_destroy(struct twostep_ctx *ctx, const char *why,
			 bool keep_hint)
{
	unsigned long left = 0, granules = 0, past;
	struct twostep_chunk *c, *next;
	struct twostep_alloc *a;
	unsigned int slot;

	/* first the users: a try_alloc() under way may still queue growth */
	wait_var_event(&ctx->users, !atomic_read(&ctx->users));
	cancel_work_sync(&ctx->grow_work);
	/*
	 * The group's domain changed under a context left without a driver
	 * (sysfs type): the old domain is gone with everything mapped in it,
	 * so nothing of it may be touched. Only memory is freed.
	 */
	if (twostep_ctx_stale(ctx)) {
		ctx->domain_gone = true;
		dev_warn(ctx->dev, "twostep: %s: the device's domain changed; its old reservation went with it\n",
			 why);
	}
	for (slot = 0; slot < TWOSTEP_SLOTS; slot++) {
		if (!ctx->slot_page[slot / TWOSTEP_SLOTS_PER_PAGE])
			continue;
		a = rcu_dereference_protected(*twostep_slot_ptr(ctx, slot), 1);
		if (!a)
			continue;
		RCU_INIT_POINTER(*twostep_slot_ptr(ctx, slot), NULL);
		WRITE_ONCE(a->dead, true);
		twostep_dbg(leak, ctx, a, why);
		left++;
		granules += twostep_alloc_release(ctx, a, 0, &past);
		twostep_alloc_retire(a);
	}
	/* teardowns left to RCU use the chunks and the domain */
	rcu_barrier();
	WRITE_ONCE(ctx->dying, true);
	cancel_delayed_work_sync(&ctx->shrink_work);
	/* what waits for a lazy flush goes back to the chunks first */
	twostep_fq_exit(ctx);
	if (left)
		dev_warn(ctx->dev, "twostep: %s: %lu live allocation(s) with %lu linked granule(s) unmapped and freed\n",
			 why, left, granules);
	list_for_each_entry_safe(c, next, &ctx->chunks, node) {
		list_del(&c->node);
		twostep_chunk_put(ctx, c);
	}
	/*
	 * A lazy domain flushes its IOTLB for what went back later: do it
	 * now, so that no stale entry reaches the zero block once it is
	 * freed at unload.
	 */
	if (!ctx->domain_gone)
		iommu_flush_iotlb_all(ctx->domain);
	atomic_dec(&twostep_live_contexts);
	if (keep_hint)
		twostep_slot_hint_keep(ctx);
	else
		twostep_slot_hint_drop(ctx->dev);
	dev_info(ctx->dev, "twostep: %s: reservation returned\n", why);
	put_device(ctx->dev);
	/* allocations freed above may still be in RCU callbacks: no matter */
	twostep_ctx_free(ctx);
}

/**
 * twostep_attach - reserve IOVA for a device up front (optional)
 * @dev: device whose DMA-API domain is used
 * @reserve: bytes to reserve now (0: none, grow on demand)
 * @chunk: bytes to reserve each time the reservation grows (0: default)
 *
 * Return: 0 or a negative errno (see include/twostep.h).
 */
int twostep_attach(struct device *dev, u64 reserve, u64 chunk)
{
	u64 block = twostep_reserve_block(), next, max;
	struct twostep_ctx *ctx;
	int ret = 0;

	might_sleep();
	if (!dev)
		return -EINVAL;
	ctx = twostep_ctx_get(dev, GFP_KERNEL, &ret);
	if (!ctx)
		return ret;
	mutex_lock(&ctx->grow_lock);
	if (ctx->attached) {
		mutex_unlock(&ctx->grow_lock);
		dev_err(dev, "twostep: attach: already attached\n");
		ret = -EBUSY;
		goto out_put_user;
	}
	ctx->attached = true;
	next = ctx->next_chunk;
	max = ctx->chunk_max;
	/* what was reserved up front stays, free or not */
	ctx->keep_free = max_t(u64, TWOSTEP_KEEP_FREE, round_up(reserve, block));
	if (chunk) {
		ctx->next_chunk = round_up(chunk, block);
		ctx->chunk_max = ctx->next_chunk;
	}
	mutex_unlock(&ctx->grow_lock);
	if (reserve && !twostep_has_room(ctx, reserve >> ctx->shift)) {
		ret = twostep_ctx_grow(ctx, reserve, READ_ONCE(ctx->nchunks),
				       true);
		if (ret == -EIO)
			ret = -ENOSPC;
	}
	if (ret) {
		/* a failed attach leaves nothing behind: attach may be retried */
		mutex_lock(&ctx->grow_lock);
		ctx->attached = false;
		ctx->next_chunk = next;
		ctx->chunk_max = max;
		ctx->keep_free = TWOSTEP_KEEP_FREE;
		mutex_unlock(&ctx->grow_lock);
	}
out_put_user:
	twostep_ctx_put_user(ctx);
	return ret;
}
EXPORT_SYMBOL_GPL(twostep_attach);

/**
 * twostep_detach - give back everything twostep holds for a device
 * @dev: device
 */
void twostep_detach(struct device *dev)
{
	might_sleep();
	if (!dev || !twostep_ctx_remove(dev, "detach", true))
		twostep_misuse(NULL, dev, "detach: twostep holds nothing for the device");
}
EXPORT_SYMBOL_GPL(twostep_detach);

/**
 * twostep_get_stats - read the live figures of a device
 * @dev: device
 * @stats: filled in on success
 *
 * Return: 0, -EINVAL or -ENODEV.
 */
int twostep_get_stats(struct device *dev, struct twostep_stats *stats)
{
	struct twostep_ctx *ctx;
	long linked = 0;
	int cpu;

	if (!stats)
		return -EINVAL;
	memset(stats, 0, sizeof(*stats));
	stats->misuse_all = atomic_read(&twostep_misuse_all);
	rcu_read_lock();
	ctx = dev ? twostep_ctx_find(dev) : NULL;
	if (ctx) {
		stats->reserved = READ_ONCE(ctx->reserved);
		stats->chunks = READ_ONCE(ctx->nchunks);
		stats->granule = 1UL << ctx->shift;
		stats->live_allocs = twostep_slots_used(ctx);
		for_each_possible_cpu(cpu)
			linked += *per_cpu_ptr(ctx->linked, cpu);
		stats->linked_granules = linked;
		stats->misuse = atomic_long_read(&ctx->misuse);
		stats->deferred = atomic_long_read(&ctx->deferred);
		stats->grow_ns = READ_ONCE(ctx->grow_ns);
	}
	rcu_read_unlock();
	return ctx ? 0 : -ENODEV;
}
EXPORT_SYMBOL_GPL(twostep_get_stats);

/**
 * twostep_get_chunk - where the reservation of a device lies
 * @dev: device
 * @i: index of the chunk, from 0
 * @start: first device address of the chunk
 * @size: size of the chunk in bytes
 *
 * Return: 0, -ENODEV or -ENOENT.
 */
int twostep_get_chunk(struct device *dev, unsigned int i, u64 *start,
		      u64 *size)
{
	struct twostep_chunk *c;
	struct twostep_ctx *ctx;
	int ret = -ENODEV;

	rcu_read_lock();
	ctx = dev ? twostep_ctx_find(dev) : NULL;
	if (ctx) {
		ret = -ENOENT;
		list_for_each_entry_rcu(c, &ctx->chunks, node) {
			if (i--)
				continue;
			*start = c->start;
			*size = c->size;
			ret = 0;
			break;
		}
	}
	rcu_read_unlock();
	return ret;
}
EXPORT_SYMBOL_GPL(twostep_get_chunk);

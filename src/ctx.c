// SPDX-License-Identifier: GPL-2.0
/*
 * twostep: per-device contexts. A device gets a context the first time
 * twostep_iova_try_alloc() (or twostep_attach()) is called for it, if its
 * DMA-API domain translates. The context reserves IOVA from the DMA API in
 * chunks grown on demand (reserve.c), runs a private iova_domain inside
 * each chunk, and tracks the live allocations. Detach, unbinding the
 * driver, removing the device or unloading twostep gives it all back.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/device.h>
#include <linux/dma-map-ops.h>
#include <linux/dma-mapping.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/platform_device.h>
#include <linux/preempt.h>
#include <linux/sched/mm.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/wait_bit.h>

#include "ctx.h"
#include "reserve.h"

#define TWOSTEP_CHUNK_FIRST	SZ_4M
#define TWOSTEP_CHUNK_MAX	SZ_256M
/* Wholly free chunks a device keeps, in bytes: the first growth's size. */
#define TWOSTEP_KEEP_FREE	SZ_4M
/*
 * How long a chunk stays wholly free before it goes back to the DMA API:
 * long enough that a burst of allocations and frees does not reserve and
 * return the same space over and over (a reservation costs 0.1-3 ms), short
 * enough that the space is back before another device misses it.
 */
#define TWOSTEP_GIVE_BACK_DELAY	HZ
/* &twostep_chunk.free of a chunk being given back: no allocation fits */
#define TWOSTEP_CHUNK_CLOSED	(LONG_MIN / 2)

LIST_HEAD(twostep_ctxs);
DEFINE_SPINLOCK(twostep_ctxs_lock);

/*
 * Where the round robin of slot numbers stands for each device whose
 * context was given back (detach, unbind), so that its next context goes
 * on from there: a state from before is no more likely to match a new
 * allocation than within one context. Dropped when the device goes away.
 */
static DEFINE_XARRAY(twostep_slot_hints);

/* Live objects and refusals, readable in /sys/module/twostep/parameters. */
static atomic_t twostep_live_contexts = ATOMIC_INIT(0);
static atomic_t twostep_live_allocs = ATOMIC_INIT(0);
static atomic_t twostep_live_chunks = ATOMIC_INIT(0);
static atomic_t twostep_misuse_all = ATOMIC_INIT(0);
static atomic64_t twostep_reserved_all = ATOMIC64_INIT(0);

static int twostep_counter_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%d\n", atomic_read(kp->arg));
}

static const struct kernel_param_ops twostep_counter_ops = {
	.get = twostep_counter_get,
};

static int twostep_counter64_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%lld\n", atomic64_read(kp->arg));
}

static const struct kernel_param_ops twostep_counter64_ops = {
	.get = twostep_counter64_get,
};

module_param_cb(live_contexts, &twostep_counter_ops, &twostep_live_contexts,
		0444);
MODULE_PARM_DESC(live_contexts, "devices twostep holds IOVA for");
module_param_cb(live_allocs, &twostep_counter_ops, &twostep_live_allocs,
		0444);
MODULE_PARM_DESC(live_allocs, "IOVA ranges allocated and not yet freed");
module_param_cb(live_chunks, &twostep_counter_ops, &twostep_live_chunks,
		0444);
MODULE_PARM_DESC(live_chunks, "chunks of IOVA reserved from the DMA API");
module_param_cb(reserved_bytes, &twostep_counter64_ops, &twostep_reserved_all,
		0444);
MODULE_PARM_DESC(reserved_bytes, "bytes of IOVA reserved from the DMA API now");
module_param_cb(refused_calls, &twostep_counter_ops, &twostep_misuse_all,
		0444);
MODULE_PARM_DESC(refused_calls, "calls with bad input (refused or cleaned up)");

/* Fault injection: countdowns to the failing operation, 0 when disarmed. */
atomic_t twostep_fail_countdown[3];

/**
 * twostep_debug_fail - fault injection for tests
 * @what: which operation fails
 * @nth: the nth such operation from now fails (1: the next one); 0 disarms
 */
void twostep_debug_fail(enum twostep_fail what, unsigned int nth)
{
	if (what < ARRAY_SIZE(twostep_fail_countdown))
		atomic_set(&twostep_fail_countdown[what], nth);
}
EXPORT_SYMBOL_GPL(twostep_debug_fail);

bool twostep_should_fail(enum twostep_fail what)
{
	atomic_t *c = &twostep_fail_countdown[what];

	return atomic_read(c) && atomic_dec_and_test(c);
}

/* Report bad input: one rate-limited line, counted per device. */
void twostep_misuse(struct twostep_ctx *ctx, struct device *dev,
		    const char *fmt, ...)
{
	struct va_format vaf;
	va_list args;

	atomic_inc(&twostep_misuse_all);
	if (ctx)
		atomic_long_inc(&ctx->misuse);
	va_start(args, fmt);
	vaf.fmt = fmt;
	vaf.va = &args;
	if (dev)
		dev_warn_ratelimited(dev, "twostep: bad input: %pV\n", &vaf);
	else
		pr_warn_ratelimited("bad input: %pV\n", &vaf);
	va_end(args);
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
	*domp = domain;
	return 0;
}

static void twostep_grow_work(struct work_struct *work);
static void twostep_shrink_work(struct work_struct *work);

/* Free a context's memory; it holds no allocation and no chunk. */
static void twostep_ctx_free(struct twostep_ctx *ctx)
{
	unsigned int i;

	if (!ctx)
		return;
	for (i = 0; i < TWOSTEP_SLOT_PAGES; i++)
		free_page((unsigned long)ctx->slot_page[i]);
	free_percpu(ctx->linked);
	bitmap_free(ctx->slot_used);
	kfree(ctx);
}

static void twostep_slot_put(struct twostep_ctx *ctx, unsigned int slot)
{
	unsigned long flags;

	spin_lock_irqsave(&ctx->slot_lock, flags);
	__clear_bit(slot, ctx->slot_used);
	spin_unlock_irqrestore(&ctx->slot_lock, flags);
}

/*
 * A free slot, its page of pointers allocated, or -1 when the device has
 * TWOSTEP_SLOTS live allocations (or no memory for the page).
 */
static int twostep_slot_get(struct twostep_ctx *ctx, gfp_t gfp)
{
	struct twostep_alloc __rcu **page, **fresh;
	unsigned long flags;
	unsigned int slot;

	spin_lock_irqsave(&ctx->slot_lock, flags);
	slot = find_next_zero_bit(ctx->slot_used, TWOSTEP_SLOTS,
				  ctx->slot_next);
	if (slot >= TWOSTEP_SLOTS)
		slot = find_first_zero_bit(ctx->slot_used, TWOSTEP_SLOTS);
	if (slot < TWOSTEP_SLOTS) {
		__set_bit(slot, ctx->slot_used);
		ctx->slot_next = slot + 1;
	}
	spin_unlock_irqrestore(&ctx->slot_lock, flags);
	if (slot >= TWOSTEP_SLOTS)
		return -1;
	page = READ_ONCE(ctx->slot_page[slot / TWOSTEP_SLOTS_PER_PAGE]);
	if (!page) {
		fresh = (void *)get_zeroed_page(gfp | __GFP_NOWARN);
		if (fresh) {
			page = cmpxchg(&ctx->slot_page[slot /
						       TWOSTEP_SLOTS_PER_PAGE],
				       NULL, fresh);
			if (page)
				free_page((unsigned long)fresh);
			else
				page = fresh;
		}
	}
	if (!page) {
		twostep_slot_put(ctx, slot);
		return -1;
	}
	return slot;
}

static struct twostep_alloc __rcu **twostep_slot_ptr(struct twostep_ctx *ctx,
						     unsigned int slot)
{
	return &ctx->slot_page[slot / TWOSTEP_SLOTS_PER_PAGE]
			      [slot % TWOSTEP_SLOTS_PER_PAGE];
}

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
	void *hint;

	rcu_read_lock();
	ctx = twostep_ctx_find(dev);
	if (ctx)
		atomic_inc(&ctx->users);
	rcu_read_unlock();
	if (ctx)
		return ctx;
	*err = twostep_dev_check(dev, &domain);
	if (*err)
		return NULL;
	ctx = kzalloc(sizeof(*ctx), gfp | __GFP_NOWARN);
	if (ctx) {
		ctx->slot_used = bitmap_zalloc(TWOSTEP_SLOTS,
					       gfp | __GFP_NOWARN);
		ctx->linked = alloc_percpu_gfp(long, gfp | __GFP_NOWARN);
	}
	if (!ctx || !ctx->slot_used || !ctx->linked) {
		twostep_ctx_free(ctx);
		*err = -ENOMEM;
		return NULL;
	}
	ctx->dev = get_device(dev);
	ctx->domain = domain;
	ctx->shift = __ffs(domain->pgsize_bitmap);
	larger = domain->pgsize_bitmap & ~GENMASK(ctx->shift, 0);
	ctx->pgsize_large = larger ? BIT(__ffs(larger)) : U64_MAX;
	ctx->prot_extra = IOMMU_CACHE;
	INIT_LIST_HEAD(&ctx->chunks);
	ctx->next_chunk = max_t(u64, TWOSTEP_CHUNK_FIRST,
				twostep_reserve_block());
	ctx->chunk_max = max_t(u64, TWOSTEP_CHUNK_MAX, ctx->next_chunk);
	ctx->keep_free = TWOSTEP_KEEP_FREE;
	mutex_init(&ctx->grow_lock);
	INIT_WORK(&ctx->grow_work, twostep_grow_work);
	INIT_DELAYED_WORK(&ctx->shrink_work, twostep_shrink_work);
	spin_lock_init(&ctx->slot_lock);
	hint = xa_load(&twostep_slot_hints, (unsigned long)dev);
	if (hint)
		ctx->slot_next = xa_to_value(hint) % TWOSTEP_SLOTS;
	atomic_set(&ctx->users, 1);

	spin_lock_irqsave(&twostep_ctxs_lock, flags);
	old = twostep_ctx_find(dev);
	if (old) {
		/* lost a race with another first call for the device */
		atomic_inc(&old->users);
	} else {
		list_add_tail_rcu(&ctx->node, &twostep_ctxs);
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

/*
 * Highest granule the device may be given now: its DMA mask may have been
 * lowered since chunks were reserved under a wider one.
 */
static unsigned long twostep_limit_pfn(struct twostep_ctx *ctx)
{
	return dma_get_mask(ctx->dev) >> ctx->shift;
}

/* Is there a chunk under the device's mask with @nr granules free? */
static bool twostep_has_room(struct twostep_ctx *ctx, unsigned long nr)
{
	unsigned long limit = twostep_limit_pfn(ctx);
	struct twostep_chunk *c;
	bool room = false;

	rcu_read_lock();
	list_for_each_entry_rcu(c, &ctx->chunks, node)
		if (atomic_long_read(&c->free) >= nr &&
		    c->last_pfn <= limit)
			room = true;
	rcu_read_unlock();
	return room;
}

/*
 * Reserve one more chunk with room for @need bytes (just that when
 * @exact), unless another caller grew the reservation since this one saw
 * @seen chunks. Runs in a memalloc_noio scope: drivers call try_alloc from
 * writeback and swap paths, so growth never waits on I/O.
 */
static int twostep_ctx_grow(struct twostep_ctx *ctx, u64 need,
			    unsigned int seen, bool exact)
{
	u64 block = twostep_reserve_block(), size, reach, t0 = ktime_get_ns();
	struct twostep_chunk *c;
	unsigned int noio;
	dma_addr_t start;
	int ret;

	need = round_up(need, block);
	/* more than the device or its domain can address: do not even try */
	reach = dma_get_mask(ctx->dev);
	if (ctx->domain->geometry.force_aperture)
		reach = min_t(u64, reach, ctx->domain->geometry.aperture_end);
	/* nor more than twostep serves in one range: the cost is bounded */
	if (need - 1 > reach || need > TWOSTEP_IOVA_MAX_SIZE + block)
		return -ENOSPC;
	noio = memalloc_noio_save();
	mutex_lock(&ctx->grow_lock);
	ret = 0;
	if (ctx->nchunks != seen)
		goto out_unlock;
	c = kzalloc(sizeof(*c), GFP_KERNEL);
	ret = -ENOMEM;
	if (!c)
		goto out_unlock;
	/*
	 * No chunk takes more than 1/64 of what the device can address now
	 * (32 MiB of a 32-bit space), unless one request needs it.
	 */
	size = exact ? need :
	       max(need, min_t(u64, ctx->next_chunk,
			       max_t(u64, block,
				     rounddown_pow_of_two(reach >> 6))));
	ret = twostep_reserve(ctx->dev, ctx->domain, size, &start);
	if (ret == -ENOSPC && size > need) {
		size = need;
		ret = twostep_reserve(ctx->dev, ctx->domain, size, &start);
	}
	if (ret) {
		dev_warn_ratelimited(ctx->dev, "twostep: reserving %llu bytes of IOVA failed: %d\n",
				     size, ret);
		kfree(c);
		goto out_unlock;
	}
	c->start = start;
	c->size = size;
	c->last_pfn = (start + (size - 1)) >> ctx->shift;
	c->nr = size >> ctx->shift;
	atomic_long_set(&c->free, c->nr);
	/* free, but reserved for a request under way: not idle yet */
	c->idle_since = jiffies;
	init_iova_domain(&c->iovad, 1UL << ctx->shift, start >> ctx->shift);
	list_add_tail_rcu(&c->node, &ctx->chunks);
	WRITE_ONCE(ctx->nchunks, ctx->nchunks + 1);
	WRITE_ONCE(ctx->reserved, ctx->reserved + size);
	atomic64_add(size, &twostep_reserved_all);
	atomic_inc(&twostep_live_chunks);
	if (size >= ctx->next_chunk)
		ctx->next_chunk = min(ctx->next_chunk * 2, ctx->chunk_max);
	WRITE_ONCE(ctx->grow_ns, ktime_get_ns() - t0);
	dev_dbg(ctx->dev, "twostep: reserved [%pad + %#llx] in %llu ns\n",
		&start, size, ctx->grow_ns);
out_unlock:
	mutex_unlock(&ctx->grow_lock);
	memalloc_noio_restore(noio);
	return ret;
}

static struct iova *twostep_chunk_alloc(struct twostep_ctx *ctx,
					unsigned long nr,
					struct twostep_chunk **chunkp);

/* Could a range of @nr granules be allocated now? Tries it. */
static bool twostep_can_alloc(struct twostep_ctx *ctx, unsigned long nr)
{
	struct twostep_chunk *c;
	struct iova *iova;

	rcu_read_lock();
	iova = twostep_chunk_alloc(ctx, nr, &c);
	if (iova) {
		__free_iova(&c->iovad, iova);
		atomic_long_add(nr, &c->free);
	}
	rcu_read_unlock();
	return iova;
}

static void twostep_grow_work(struct work_struct *work)
{
	struct twostep_ctx *ctx = container_of(work, struct twostep_ctx,
					       grow_work);
	u64 want = atomic64_xchg(&ctx->grow_want, 0);

	/* a free run of the size asked, not just as many free granules */
	if (want && !twostep_can_alloc(ctx, want >> ctx->shift))
		twostep_ctx_grow(ctx, want, READ_ONCE(ctx->nchunks), true);
}

/* Give one chunk back to the DMA API; it is off the list, unseen by all. */
static void twostep_chunk_put(struct twostep_ctx *ctx, struct twostep_chunk *c)
{
	put_iova_domain(&c->iovad);
	if (!ctx->domain_gone)
		twostep_unreserve(ctx->dev, ctx->domain, c->start, c->size);
	atomic64_sub(c->size, &twostep_reserved_all);
	atomic_dec(&twostep_live_chunks);
	kfree(c);
}

/*
 * Chunks that stayed wholly free go back to the DMA API, but for
 * TWOSTEP_KEEP_FREE bytes of them, so that a device that keeps using
 * twostep does not reserve afresh for every burst.
 */
static void twostep_shrink_work(struct work_struct *work)
{
	struct twostep_ctx *ctx = container_of(to_delayed_work(work),
					       struct twostep_ctx,
					       shrink_work);
	unsigned long limit = twostep_limit_pfn(ctx);
	struct twostep_chunk *c, *next;
	unsigned long due = 0;
	unsigned int noio;
	LIST_HEAD(gone);
	u64 kept = 0;

	noio = memalloc_noio_save();
	mutex_lock(&ctx->grow_lock);
	list_for_each_entry_safe(c, next, &ctx->chunks, node) {
		if (atomic_long_read(&c->free) != c->nr)
			continue;
		/* free, but not for long enough yet: look again then */
		if (time_before(jiffies, READ_ONCE(c->idle_since) +
				TWOSTEP_GIVE_BACK_DELAY)) {
			due = READ_ONCE(c->idle_since) + TWOSTEP_GIVE_BACK_DELAY;
			continue;
		}
		/* keep a small chunk the device can still use */
		if (c->last_pfn <= limit && kept + c->size <= ctx->keep_free) {
			kept += c->size;
			continue;
		}
		/* only while no allocation holds or counts on it */
		if (atomic_long_cmpxchg(&c->free, c->nr,
					TWOSTEP_CHUNK_CLOSED) != c->nr)
			continue;
		list_del_rcu(&c->node);
		list_add(&c->gone, &gone);
		WRITE_ONCE(ctx->nchunks, ctx->nchunks - 1);
		WRITE_ONCE(ctx->reserved, ctx->reserved - c->size);
		ctx->next_chunk = max3(ctx->next_chunk / 2,
				       (u64)TWOSTEP_CHUNK_FIRST,
				       twostep_reserve_block());
	}
	if (due && !READ_ONCE(ctx->dying))
		queue_delayed_work(system_unbound_wq, &ctx->shrink_work,
				   max_t(long, due - jiffies, 1));
	mutex_unlock(&ctx->grow_lock);
	if (!list_empty(&gone)) {
		/* allocators walk the list under RCU */
		synchronize_rcu();
		list_for_each_entry_safe(c, next, &gone, gone)
			twostep_chunk_put(ctx, c);
		iommu_flush_iotlb_all(ctx->domain);
	}
	memalloc_noio_restore(noio);
}

/* Take @nr granules from the first chunk under the mask that has them. */
static struct iova *twostep_chunk_alloc(struct twostep_ctx *ctx,
					unsigned long nr,
					struct twostep_chunk **chunkp)
{
	unsigned long limit = twostep_limit_pfn(ctx);
	struct twostep_chunk *c;
	struct iova *iova = NULL;

	rcu_read_lock();
	list_for_each_entry_rcu(c, &ctx->chunks, node) {
		/* a chunk reserved under a wider mask than today's is skipped */
		if (atomic_long_read(&c->free) < nr || c->last_pfn > limit)
			continue;
		/* count first: a chunk is given back only at its full count */
		if (atomic_long_sub_return(nr, &c->free) < 0) {
			atomic_long_add(nr, &c->free);
			continue;
		}
		/*
		 * Size-aligned, as upstream's allocator gives every range: a
		 * range never crosses a boundary of its size rounded up to a
		 * power of two (64 KiB, 4 GiB), and a physically contiguous
		 * link can use large pages.
		 */
		iova = alloc_iova(&c->iovad, nr, c->last_pfn, true);
		if (iova) {
			*chunkp = c;
			break;
		}
		atomic_long_add(nr, &c->free);
	}
	rcu_read_unlock();
	return iova;
}

/* IOVA for @nr granules: grow the reservation, or ask the worker to. */
static struct iova *twostep_iova_get(struct twostep_ctx *ctx,
				     unsigned long nr, bool may_sleep,
				     struct twostep_chunk **chunkp)
{
	unsigned int seen;
	struct iova *iova;
	u64 want;

	for (;;) {
		seen = READ_ONCE(ctx->nchunks);
		iova = twostep_chunk_alloc(ctx, nr, chunkp);
		if (iova)
			return iova;
		want = (u64)nr << ctx->shift;
		if (!may_sleep) {
			/* keep the largest request that is waiting */
			u64 old = atomic64_read(&ctx->grow_want);

			while (old < want &&
			       !atomic64_try_cmpxchg(&ctx->grow_want, &old,
						     want))
				;
			queue_work(system_unbound_wq, &ctx->grow_work);
			atomic_long_inc(&ctx->deferred);
			return NULL;
		}
		if (twostep_ctx_grow(ctx, want, seen, false))
			return NULL;
	}
}

/**
 * twostep_alloc_new - allocate an IOVA range for a device
 * @dev: device
 * @phys: its offset inside a granule is kept in the address
 * @size: bytes, 1 to 2^48 - 1
 *
 * Return: the live allocation, already findable, or NULL.
 */
struct twostep_alloc *twostep_alloc_new(struct device *dev, phys_addr_t phys,
					u64 size)
{
	bool may_sleep = twostep_may_sleep();
	/* reclaim without I/O at most: see twostep_ctx_grow() */
	gfp_t gfp = may_sleep ? GFP_NOIO : GFP_ATOMIC;
	struct twostep_chunk *chunk = NULL;
	struct twostep_alloc *a = NULL;
	struct twostep_ctx *ctx;
	struct iova *iova;
	unsigned long nr;
	int err, slot;
	u64 pad;

	ctx = twostep_ctx_get(dev, gfp, &err);
	if (!ctx)
		return NULL;
	pad = phys & ((1UL << ctx->shift) - 1);
	nr = (size + pad + (1UL << ctx->shift) - 1) >> ctx->shift;
	if (twostep_should_fail(TWOSTEP_FAIL_IOVA))
		goto out_put_user;
	a = kzalloc(sizeof(*a), gfp | __GFP_NOWARN);
	if (!a)
		goto out_put_user;
	a->links = twostep_links_alloc(nr, gfp);
	if (!a->links)
		goto out_free_alloc;
	xa_init_flags(&a->big, XA_FLAGS_LOCK_IRQ);
	slot = twostep_slot_get(ctx, gfp);
	if (slot < 0)
		goto out_free_links;
	iova = twostep_iova_get(ctx, nr, may_sleep, &chunk);
	if (!iova)
		goto out_put_slot;
	a->ctx = ctx;
	a->chunk = chunk;
	a->iova = iova;
	a->nr = nr;
	a->base = (dma_addr_t)iova->pfn_lo << ctx->shift;
	a->addr = a->base + pad;
	a->slot = slot;
	a->size = size | (u64)slot << TWOSTEP_SLOT_SHIFT;
	rcu_assign_pointer(*twostep_slot_ptr(ctx, slot), a);
	atomic_long_inc(&ctx->live_allocs);
	atomic_inc(&twostep_live_allocs);
	twostep_ctx_put_user(ctx);
	return a;

out_put_slot:
	twostep_slot_put(ctx, slot);
out_free_links:
	twostep_links_free(a->links);
out_free_alloc:
	kfree(a);
out_put_user:
	twostep_ctx_put_user(ctx);
	return NULL;
}

static void twostep_alloc_free_rcu(struct rcu_head *head)
{
	struct twostep_alloc *a = container_of(head, struct twostep_alloc,
					       rcu);

	if (!xa_empty(&a->big))
		xa_destroy(&a->big);
	twostep_links_free(a->links);
	kfree(a);
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
	unsigned long g, len = 0, total = 0;
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
		WARN_ONCE(unmapped != bytes,
			  "twostep: unmapped %zu of %zu bytes\n", unmapped,
			  bytes);
		total += len;
		if (g + len > keep_first)
			*extra += g + len - max(g, keep_first);
	}
	/* No stale IOTLB entry may outlive the IOVA's return to the chunk. */
	if (total)
		iommu_iotlb_sync(ctx->domain, &gather);
	__free_iova(&a->chunk->iovad, a->iova);
	if (atomic_long_add_return(a->nr, &a->chunk->free) == a->chunk->nr) {
		/* wholly free from now: a test_bit when the worker is due */
		WRITE_ONCE(a->chunk->idle_since, jiffies);
		if (!READ_ONCE(ctx->dying) &&
		    !delayed_work_pending(&ctx->shrink_work))
			queue_delayed_work(system_unbound_wq, &ctx->shrink_work,
					   TWOSTEP_GIVE_BACK_DELAY);
	}
	twostep_slot_put(ctx, a->slot);
	atomic_dec(&twostep_live_allocs);
	atomic_long_dec(&ctx->live_allocs);
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
	if (unlikely(atomic_read(&a->inflight))) {
		if (!in_task()) {
			/* it may be the call this interrupt interrupted */
			call_rcu(&a->rcu, twostep_alloc_release_rcu);
			return true;
		}
		/* a call on another CPU, with preemption off: short */
		while (atomic_read(&a->inflight))
			cpu_relax();
		/* its links' bits, set before it left (twostep_alloc_exit()) */
		smp_rmb();
	}
	twostep_alloc_release(ctx, a, keep_first, &past);
	call_rcu(&a->rcu, twostep_alloc_free_rcu);
	*extra = past;
	return true;
}

/*
 * Give back everything of a context that no lookup can see any more and
 * that no try_alloc() is using, and free it.
 */
static void twostep_ctx_destroy(struct twostep_ctx *ctx, const char *why,
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
	if (iommu_get_domain_for_dev(ctx->dev) != ctx->domain) {
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
		left++;
		granules += twostep_alloc_release(ctx, a, 0, &past);
		call_rcu(&a->rcu, twostep_alloc_free_rcu);
	}
	/* teardowns left to RCU use the chunks and the domain */
	rcu_barrier();
	WRITE_ONCE(ctx->dying, true);
	cancel_delayed_work_sync(&ctx->shrink_work);
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
		xa_store(&twostep_slot_hints, (unsigned long)ctx->dev,
			 xa_mk_value(ctx->slot_next), GFP_KERNEL);
	else
		xa_erase(&twostep_slot_hints, (unsigned long)ctx->dev);
	dev_info(ctx->dev, "twostep: %s: reservation returned\n", why);
	put_device(ctx->dev);
	/* allocations freed above may still be in RCU callbacks: no matter */
	twostep_ctx_free(ctx);
}

/* Unlist the context of @dev and destroy it; false when there is none. */
static bool twostep_ctx_remove(struct device *dev, const char *why,
			       bool keep_hint)
{
	struct twostep_ctx *ctx;
	unsigned long flags;

	spin_lock_irqsave(&twostep_ctxs_lock, flags);
	ctx = twostep_ctx_find(dev);
	if (ctx)
		list_del_rcu(&ctx->node);
	spin_unlock_irqrestore(&twostep_ctxs_lock, flags);
	if (!ctx)
		return false;
	synchronize_rcu();
	twostep_ctx_destroy(ctx, why, keep_hint);
	return true;
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
		stats->live_allocs = atomic_long_read(&ctx->live_allocs);
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

/* A driver unbound or a device removed: give back what it left. */
static int twostep_bus_notify(struct notifier_block *nb, unsigned long action,
			      void *data)
{
	struct device *dev = data;

	switch (action) {
	case BUS_NOTIFY_UNBOUND_DRIVER:
		/* after the driver's remove(): its DMA is over */
		twostep_ctx_remove(dev, "driver unbound", true);
		break;
	case BUS_NOTIFY_DRIVER_NOT_BOUND:
		/* a probe failed (or deferred) after using twostep */
		twostep_ctx_remove(dev, "probe failed", true);
		break;
	case BUS_NOTIFY_DEL_DEVICE:
		/*
		 * Sent before the driver's remove(), while DMA may be in
		 * flight: a bound device is left to the unbind that follows.
		 */
		if (!READ_ONCE(dev->driver))
			twostep_ctx_remove(dev, "device removed", false);
		/* a new device may come at the same address */
		xa_erase(&twostep_slot_hints, (unsigned long)dev);
		break;
	}
	return NOTIFY_DONE;
}

static struct notifier_block twostep_pci_nb = {
	.notifier_call = twostep_bus_notify,
};

static struct notifier_block twostep_platform_nb = {
	.notifier_call = twostep_bus_notify,
};

static int __init twostep_init(void)
{
	int ret;

	ret = iova_cache_get();
	if (ret)
		return ret;
	ret = twostep_reserve_init();
	if (ret)
		goto err_put_cache;
	ret = bus_register_notifier(&pci_bus_type, &twostep_pci_nb);
	if (ret)
		goto err_reserve_exit;
	ret = bus_register_notifier(&platform_bus_type, &twostep_platform_nb);
	if (ret)
		goto err_unregister_pci;
	pr_info("loaded, reservation block %llu KiB\n",
		twostep_reserve_block() >> 10);
	return 0;

err_unregister_pci:
	bus_unregister_notifier(&pci_bus_type, &twostep_pci_nb);
err_reserve_exit:
	twostep_reserve_exit();
err_put_cache:
	iova_cache_put();
	return ret;
}

static void __exit twostep_exit(void)
{
	struct twostep_ctx *ctx;
	unsigned long flags;

	/* contexts first: a device removed meanwhile is still heard of */
	for (;;) {
		spin_lock_irqsave(&twostep_ctxs_lock, flags);
		ctx = list_first_entry_or_null(&twostep_ctxs,
					       struct twostep_ctx, node);
		if (ctx)
			list_del_rcu(&ctx->node);
		spin_unlock_irqrestore(&twostep_ctxs_lock, flags);
		if (!ctx)
			break;
		synchronize_rcu();
		twostep_ctx_destroy(ctx, "unload", false);
	}
	bus_unregister_notifier(&platform_bus_type, &twostep_platform_nb);
	bus_unregister_notifier(&pci_bus_type, &twostep_pci_nb);
	rcu_barrier();
	xa_destroy(&twostep_slot_hints);
	twostep_reserve_exit();
	iova_cache_put();
	pr_info("unloaded\n");
}

module_init(twostep_init);
module_exit(twostep_exit);

MODULE_LICENSE("GPL");
MODULE_AUTHOR("The twostep developers");
MODULE_DESCRIPTION("DMA two-step IOVA API (dma_iova_*) for kernels without it");
MODULE_VERSION(TWOSTEP_VERSION);

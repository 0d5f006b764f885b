// SPDX-License-Identifier: GPL-2.0
/*
 * twostep: the chunks of a context. The reservation grows by one chunk at
 * a time, reserved from the DMA API (reserve.c), on demand or by a worker
 * for calls that cannot sleep; a private iova_domain inside each chunk
 * hands out the ranges, and per-CPU caches keep freed ranges of 256 KiB
 * to 2 MiB for the next allocation of their size there; chunks that stay
 * wholly free go back to the DMA API from the give-back worker, which
 * drains those caches first. In a lazy domain, destroyed ranges wait in a
 * flush queue for one IOTLB flush of many before they go back. Calls
 * reserve.c and counters.c.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/device.h>
#include <linux/dma-mapping.h>
#include <linux/iommu.h>
#include <linux/iova.h>
#include <linux/jiffies.h>
#include <linux/ktime.h>
#include <linux/log2.h>
#include <linux/rculist.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/timer.h>
#include <linux/workqueue.h>

#include "chunk.h"
#include "compat.h"
#include "counters.h"
#include "ctx.h"
#include "reserve.h"

/*
 * How long a chunk stays wholly free before it goes back to the DMA API:
 * long enough that a burst of allocations and frees does not reserve and
 * return the same space over and over (a reservation costs 0.1-3 ms), short
 * enough that the space is back before another device misses it.
 */
#define TWOSTEP_GIVE_BACK_DELAY	HZ
/* &twostep_chunk.free of a chunk being given back: no allocation fits */
#define TWOSTEP_CHUNK_CLOSED	(LONG_MIN / 2)

/*
 * Highest granule the device may be given now: its DMA mask may have been
 * lowered since chunks were reserved under a wider one.
 */
static unsigned long twostep_limit_pfn(struct twostep_ctx *ctx)
{
	return dma_get_mask(ctx->dev) >> ctx->shift;
}

static void twostep_chunk_give(struct twostep_ctx *ctx,
			       struct twostep_chunk *c, unsigned long pfn,
			       unsigned long nr);
static void twostep_pcpu_drain(struct twostep_ctx *ctx);
static unsigned long twostep_fq_drain(struct twostep_ctx *ctx);

/* Is there a chunk under the device's mask with @nr granules free? */
bool twostep_has_room(struct twostep_ctx *ctx, unsigned long nr)
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
int twostep_ctx_grow(struct twostep_ctx *ctx, u64 need, unsigned int seen,
		     bool exact)
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
	/* the first reservation tells how the driver keeps mappings */
	if (!ctx->probed) {
		ctx->unit_maps = twostep_reserve_probe_units(ctx->domain, start,
							     ctx->shift);
		if (ctx->unit_maps)
			ctx->big_min = 2;
		ctx->probed = true;
	}
	c->start = start;
	c->size = size;
	c->last_pfn = (start + (size - 1)) >> ctx->shift;
	c->nr = size >> ctx->shift;
	atomic_long_set(&c->free, c->nr);
	/* free, but reserved for a request under way: not idle yet */
	c->idle_since = jiffies;
	init_iova_domain(&c->iovad, 1UL << ctx->shift, start >> ctx->shift);
	/* per-CPU caches of freed ranges, as the DMA API's own domain has */
	ret = iova_domain_init_rcaches(&c->iovad);
	if (ret) {
		put_iova_domain(&c->iovad);
		twostep_unreserve(ctx->dev, ctx->domain, ctx->dma_ops, start,
				  size);
		kfree(c);
		goto out_unlock;
	}
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

static unsigned long twostep_chunk_alloc(struct twostep_ctx *ctx,
					 unsigned long nr,
					 struct twostep_chunk **chunkp);

/* Could a range of @nr granules be allocated now? Tries it. */
static bool twostep_can_alloc(struct twostep_ctx *ctx, unsigned long nr)
{
	struct twostep_chunk *c;
	unsigned long pfn;

	rcu_read_lock();
	pfn = twostep_chunk_alloc(ctx, nr, &c);
	if (pfn) {
		free_iova_fast(&c->iovad, pfn, nr);
		atomic_long_add(nr, &c->free);
	}
	rcu_read_unlock();
	return pfn;
}

void twostep_grow_work(struct work_struct *work)
{
	struct twostep_ctx *ctx = container_of(work, struct twostep_ctx,
					       grow_work);
	u64 want = atomic64_xchg(&ctx->grow_want, 0);

	/* the domain replaced under a context left without a driver */
	if (!twostep_ctx_usable(ctx, true)) {
		schedule_work(&twostep_stale_work);
		return;
	}
	/* a free run of the size asked, not just as many free granules */
	if (want && !twostep_can_alloc(ctx, want >> ctx->shift))
		twostep_ctx_grow(ctx, want, READ_ONCE(ctx->nchunks), true);
	/* a chunk of the next size, for what waits in the flush queues */
	if (READ_ONCE(ctx->grow_more) && xchg(&ctx->grow_more, false))
		twostep_ctx_grow(ctx, twostep_reserve_block(),
				 READ_ONCE(ctx->nchunks), false);
}

/* Give one chunk back to the DMA API; it is off the list, unseen by all. */
void twostep_chunk_put(struct twostep_ctx *ctx, struct twostep_chunk *c)
{
	put_iova_domain(&c->iovad);
	if (!ctx->domain_gone)
		twostep_unreserve(ctx->dev, ctx->domain, ctx->dma_ops,
				  c->start, c->size);
	atomic64_sub(c->size, &twostep_reserved_all);
	atomic_dec(&twostep_live_chunks);
	kfree(c);
}

/*
 * Chunks that stayed wholly free go back to the DMA API, but for
 * TWOSTEP_KEEP_FREE bytes of them, so that a device that keeps using
 * twostep does not reserve afresh for every burst.
 */
void twostep_shrink_work(struct work_struct *work)
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

	if (!twostep_ctx_usable(ctx, true)) {
		schedule_work(&twostep_stale_work);
		return;
	}
	/* what the per-CPU caches hold goes back to the chunks first */
	twostep_pcpu_drain(ctx);
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

/*
 * Take @nr granules from the first chunk under the mask that has them:
 * their first granule, or 0.
 */
static unsigned long twostep_chunk_alloc(struct twostep_ctx *ctx,
					 unsigned long nr,
					 struct twostep_chunk **chunkp)
{
	unsigned long limit = twostep_limit_pfn(ctx), pfn = 0;
	struct twostep_chunk *c;

	rcu_read_lock_sched();
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
		 * link can use large pages. Ranges up to 32 granules come
		 * from per-CPU caches of freed ones when they can, as the DMA
		 * API's do; a miss empties them into the tree and retries.
		 */
		pfn = alloc_iova_fast(&c->iovad, nr, c->last_pfn, true);
		if (pfn) {
			*chunkp = c;
			break;
		}
		atomic_long_add(nr, &c->free);
	}
	rcu_read_unlock_sched();
	return pfn;
}

/* The order of a per-CPU cache of ranges of @nr granules, or -1: none. */
static int twostep_pcpu_order(unsigned long nr)
{
	int o;

	if (!is_power_of_2(nr))
		return -1;
	o = ilog2(nr) - TWOSTEP_PCPU_MIN_ORDER;
	return o >= 0 && o < TWOSTEP_PCPU_ORDERS ? o : -1;
}

/* How many ranges of order @o one CPU's cache holds at most. */
static unsigned int twostep_pcpu_depth(struct twostep_ctx *ctx, int o)
{
	unsigned int shift = o + TWOSTEP_PCPU_MIN_ORDER + ctx->shift;

	return clamp_t(unsigned long, TWOSTEP_PCPU_BYTES >> shift, 1,
		       TWOSTEP_PCPU_DEPTH);
}

/*
 * A range of @nr granules this CPU freed lately, its first granule, or 0.
 * One under the device's mask now; one that is not goes back.
 */
static unsigned long twostep_pcpu_pop(struct twostep_ctx *ctx,
				      unsigned long nr,
				      struct twostep_chunk **chunkp)
{
	int o = twostep_pcpu_order(nr);
	struct twostep_chunk *c = NULL;
	struct twostep_pcpu *p;
	unsigned long flags, pfn = 0;

	if (o < 0)
		return 0;
	local_irq_save(flags);
	p = this_cpu_ptr(ctx->pcpu);
	spin_lock(&p->lock);
	if (p->n[o]) {
		p->n[o]--;
		c = p->chunk[o][p->n[o]];
		pfn = p->pfn[o][p->n[o]];
	}
	spin_unlock(&p->lock);
	local_irq_restore(flags);
	if (c && c->last_pfn > twostep_limit_pfn(ctx)) {
		twostep_chunk_give(ctx, c, pfn, nr);
		return 0;
	}
	*chunkp = c;
	return pfn;
}

/*
 * Keep a range of @nr granules freed on this CPU for the next allocation
 * of its size there; false when it is not of a cached size or the cache
 * is full. The give-back worker drains the caches: it is queued here.
 */
static bool twostep_pcpu_push(struct twostep_ctx *ctx, struct twostep_chunk *c,
			      unsigned long pfn, unsigned long nr)
{
	int o = twostep_pcpu_order(nr);
	struct twostep_pcpu *p;
	unsigned long flags;
	bool kept = false;

	if (o < 0 || READ_ONCE(ctx->dying))
		return false;
	local_irq_save(flags);
	p = this_cpu_ptr(ctx->pcpu);
	spin_lock(&p->lock);
	if (p->n[o] < twostep_pcpu_depth(ctx, o)) {
		p->chunk[o][p->n[o]] = c;
		p->pfn[o][p->n[o]] = pfn;
		p->n[o]++;
		kept = true;
	}
	spin_unlock(&p->lock);
	local_irq_restore(flags);
	if (kept && !delayed_work_pending(&ctx->shrink_work))
		queue_delayed_work(system_unbound_wq, &ctx->shrink_work,
				   TWOSTEP_GIVE_BACK_DELAY);
	return kept;
}

/* Give every range the per-CPU caches hold back to its chunk. */
static void twostep_pcpu_drain(struct twostep_ctx *ctx)
{
	struct twostep_pcpu *p;
	unsigned long flags;
	int cpu, o;

	for_each_possible_cpu(cpu) {
		p = per_cpu_ptr(ctx->pcpu, cpu);
		spin_lock_irqsave(&p->lock, flags);
		for (o = 0; o < TWOSTEP_PCPU_ORDERS; o++) {
			while (p->n[o]) {
				p->n[o]--;
				twostep_chunk_give(ctx, p->chunk[o][p->n[o]],
						   p->pfn[o][p->n[o]],
						   1UL << (o +
							   TWOSTEP_PCPU_MIN_ORDER));
			}
		}
		spin_unlock_irqrestore(&p->lock, flags);
	}
}

/*
 * IOVA for @nr granules, its first granule: grow the reservation, or ask
 * the worker to. 0 when there is none now.
 */
unsigned long twostep_iova_get(struct twostep_ctx *ctx, unsigned long nr,
			       bool may_sleep, struct twostep_chunk **chunkp)
{
	bool drained = false;
	unsigned long pfn;
	unsigned int seen;
	u64 want;

	pfn = twostep_pcpu_pop(ctx, nr, chunkp);
	if (pfn)
		return pfn;
	for (;;) {
		seen = READ_ONCE(ctx->nchunks);
		pfn = twostep_chunk_alloc(ctx, nr, chunkp);
		if (pfn)
			return pfn;
		/* the room missing may sit in the per-CPU caches: once */
		if (!drained) {
			drained = true;
			/*
			 * Lazy mode: where the flush queues held a quarter of
			 * the reservation, let it grow in the background, so
			 * that allocations do not flush them before their time
			 */
			if (twostep_fq_drain(ctx) >
			    (READ_ONCE(ctx->reserved) >> ctx->shift) / 4) {
				WRITE_ONCE(ctx->grow_more, true);
				queue_work(system_unbound_wq, &ctx->grow_work);
			}
			twostep_pcpu_drain(ctx);
			continue;
		}
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
			return 0;
		}
		if (twostep_ctx_grow(ctx, want, seen, false))
			return 0;
	}
}

/*
 * Give the @nr granules from @pfn back to chunk @c; a chunk wholly free
 * from now is left to the give-back worker.
 */
static void twostep_chunk_give(struct twostep_ctx *ctx,
			       struct twostep_chunk *c, unsigned long pfn,
			       unsigned long nr)
{
	free_iova_fast(&c->iovad, pfn, nr);
	if (atomic_long_add_return(nr, &c->free) == c->nr) {
		/* wholly free from now: a test_bit when the worker is due */
		WRITE_ONCE(c->idle_since, jiffies);
		if (!READ_ONCE(ctx->dying) &&
		    !delayed_work_pending(&ctx->shrink_work))
			queue_delayed_work(system_unbound_wq, &ctx->shrink_work,
					   TWOSTEP_GIVE_BACK_DELAY);
	}
}

/*
 * Give the @nr granules from @pfn back: to this CPU's cache when they are
 * of a size it keeps, else to chunk @c.
 */
void twostep_iova_put(struct twostep_ctx *ctx, struct twostep_chunk *c,
		      unsigned long pfn, unsigned long nr)
{
	if (!twostep_pcpu_push(ctx, c, pfn, nr))
		twostep_chunk_give(ctx, c, pfn, nr);
}

/*
 * Lazy mode, a domain of type IOMMU_DOMAIN_DMA_FQ, as the DMA API's own
 * flush queue does it: a destroy unmaps without an IOTLB invalidation and
 * queues its IOVA on its CPU; one flush_iotlb_all() when a CPU's queue is
 * full (TWOSTEP_FQ_SIZE ranges, or TWOSTEP_FQ_BYTES of IOVA: space the
 * chunks must hold), or TWOSTEP_FQ_TIMEOUT after a range was queued, lets
 * the queued ranges go back. A range goes back only after a flush that
 * started after its unmap had completed, so a device never reaches an old
 * page through a stale IOTLB entry of an address handed out again.
 */
#define TWOSTEP_FQ_SIZE		256
#define TWOSTEP_FQ_BYTES	SZ_32M	/* of IOVA a CPU's queue holds */
#define TWOSTEP_FQ_TIMEOUT	msecs_to_jiffies(10)

struct twostep_fq_entry {
	struct twostep_chunk *chunk;
	unsigned long pfn;
	unsigned long nr;
	struct list_head freelist;	/* page-table pages to free after */
};

/**
 * struct twostep_fq - one CPU's flush queue of a context
 * @lock: taken on its CPU, or by the timer and the drains
 * @n: entries queued
 * @granules: granules of IOVA they hold, at most TWOSTEP_FQ_BYTES' worth
 * @e: the ranges unmapped and not yet flushed
 */
struct twostep_fq {
	spinlock_t lock;	/* @n, @granules, @e */
	unsigned int n;
	unsigned long granules;
	struct twostep_fq_entry e[TWOSTEP_FQ_SIZE];
};

/*
 * Flush the IOTLB and give every range of @fq back; @fq->lock held. Where
 * the domain was replaced (@ctx->domain_gone), only the private allocator
 * is touched. Returns the granules given back.
 */
static unsigned long twostep_fq_flush_locked(struct twostep_ctx *ctx,
					     struct twostep_fq *fq)
{
	unsigned long granules = 0;
	unsigned int i;

	if (!fq->n)
		return 0;
	if (!READ_ONCE(ctx->domain_gone)) {
		iommu_flush_iotlb_all(ctx->domain);
		atomic64_inc(&twostep_lazy_flushes);
	}
	for (i = 0; i < fq->n; i++) {
		twostep_compat_free_kept(&fq->e[i].freelist);
		twostep_iova_put(ctx, fq->e[i].chunk, fq->e[i].pfn,
				 fq->e[i].nr);
		granules += fq->e[i].nr;
	}
	fq->n = 0;
	fq->granules = 0;
	return granules;
}

/* Flush every CPU's queue of @ctx that holds ranges: granules given back. */
static unsigned long twostep_fq_drain(struct twostep_ctx *ctx)
{
	unsigned long flags, granules = 0;
	struct twostep_fq *fq;
	int cpu;

	if (!ctx->fq)
		return 0;
	for_each_possible_cpu(cpu) {
		fq = per_cpu_ptr(ctx->fq, cpu);
		if (!READ_ONCE(fq->n))
			continue;
		spin_lock_irqsave(&fq->lock, flags);
		granules += twostep_fq_flush_locked(ctx, fq);
		spin_unlock_irqrestore(&fq->lock, flags);
	}
	return granules;
}

static void twostep_fq_timeout(struct timer_list *t)
{
	struct twostep_ctx *ctx = container_of(t, struct twostep_ctx,
					       fq_timer);

	/* as the workers: a domain replaced under the context is not used */
	if (!twostep_ctx_usable(ctx, true))
		schedule_work(&twostep_stale_work);
	twostep_fq_drain(ctx);
}

/**
 * twostep_fq_init - set up the flush queue of a lazy domain's context
 * @ctx: the context, not yet findable
 * @gfp: how to allocate
 *
 * Without a queue (a strict domain, or no memory for it) every destroy
 * syncs at once.
 */
void twostep_fq_init(struct twostep_ctx *ctx, gfp_t gfp)
{
	int cpu;

	timer_setup(&ctx->fq_timer, twostep_fq_timeout, 0);
	if (ctx->domain->type != IOMMU_DOMAIN_DMA_FQ ||
	    !ctx->domain->ops->flush_iotlb_all)
		return;
	ctx->fq = alloc_percpu_gfp(struct twostep_fq, gfp | __GFP_NOWARN);
	if (!ctx->fq)
		return;
	for_each_possible_cpu(cpu)
		spin_lock_init(&per_cpu_ptr(ctx->fq, cpu)->lock);
}

/* Flush and give back all that is queued, for good: nothing queues now. */
void twostep_fq_exit(struct twostep_ctx *ctx)
{
	timer_delete_sync(&ctx->fq_timer);
	twostep_fq_drain(ctx);
	free_percpu(ctx->fq);
	ctx->fq = NULL;
}

/**
 * twostep_fq_queue - give a range back after the next IOTLB flush
 * @ctx: its context, which has a flush queue
 * @c: its chunk
 * @pfn: its first granule
 * @nr: its granules, unmapped without an IOTLB sync
 * @gather: what the unmap gathered (twostep_compat_gather_keepable())
 */
void twostep_fq_queue(struct twostep_ctx *ctx, struct twostep_chunk *c,
		      unsigned long pfn, unsigned long nr,
		      struct iommu_iotlb_gather *gather)
{
	struct twostep_fq *fq;
	unsigned long flags;

	local_irq_save(flags);
	fq = this_cpu_ptr(ctx->fq);
	spin_lock(&fq->lock);
	if (fq->n == TWOSTEP_FQ_SIZE ||
	    fq->granules + nr > TWOSTEP_FQ_BYTES >> ctx->shift)
		twostep_fq_flush_locked(ctx, fq);
	fq->e[fq->n].chunk = c;
	fq->e[fq->n].pfn = pfn;
	fq->e[fq->n].nr = nr;
	twostep_compat_gather_keep(&fq->e[fq->n].freelist, gather);
	fq->n++;
	fq->granules += nr;
	spin_unlock(&fq->lock);
	__this_cpu_inc(twostep_lazy_queued);
	local_irq_restore(flags);
	if (!timer_pending(&ctx->fq_timer))
		mod_timer(&ctx->fq_timer, jiffies + TWOSTEP_FQ_TIMEOUT);
}

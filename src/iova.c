// SPDX-License-Identifier: GPL-2.0
/*
 * twostep: the IOVA calls. Every live range is tracked with two bitmaps,
 * one bit per granule: "linked" (mapped) and "head" (a link starts here).
 * They let every call check its input against what really is mapped, and
 * let unlink, destroy and detach unmap exactly what was linked with one
 * gathered IOTLB flush.
 *
 * The hot path takes no lock: the device's context and the range are
 * found under RCU (an RCU list and an xarray), and links claim their
 * granules with atomic word operations on the bitmap, so concurrent calls
 * on different states of one device, or from interrupt context, never
 * wait for each other.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bitmap.h>
#include <linux/bitops.h>
#include <linux/dma-mapping.h>
#include <linux/overflow.h>
#include <linux/slab.h>

#include "compat.h"
#include "twostep_internal.h"

static inline unsigned long twostep_granule(struct twostep_ctx *ctx)
{
	return 1UL << ctx->shift;
}

/*
 * xarray index of the range starting at granule @pfn: counted down from
 * the top of the window, where the allocator hands out ranges first, so
 * the tree stays shallow.
 */
static inline unsigned long twostep_index(struct twostep_ctx *ctx,
					  unsigned long pfn)
{
	return ctx->limit_pfn - pfn;
}

/*
 * Atomically set bits [start, start + count) unless one of them is set
 * already; then leave the bitmap as it was and return false.
 */
static bool twostep_bits_claim(unsigned long *map, unsigned long start,
			       unsigned long count)
{
	unsigned long end = start + count, i = start, old, mask;

	while (i < end) {
		unsigned long word = BIT_WORD(i);
		unsigned long last = min(end, (word + 1) * BITS_PER_LONG);

		mask = BITMAP_FIRST_WORD_MASK(i) & BITMAP_LAST_WORD_MASK(last);
		old = atomic_long_fetch_or(mask, (atomic_long_t *)&map[word]);
		if (old & mask) {
			/* undo what this call set, in this word and before */
			atomic_long_andnot(mask & ~old,
					   (atomic_long_t *)&map[word]);
			while (word-- > BIT_WORD(start)) {
				unsigned long first = max(start,
							  word * BITS_PER_LONG);

				atomic_long_andnot(BITMAP_FIRST_WORD_MASK(first),
						   (atomic_long_t *)&map[word]);
			}
			return false;
		}
		i = last;
	}
	return true;
}

/* Atomically clear bits [start, start + count), a word at a time. */
static void twostep_bits_clear(unsigned long *map, unsigned long start,
			       unsigned long count)
{
	unsigned long end = start + count, i = start;

	while (i < end) {
		unsigned long word = BIT_WORD(i);
		unsigned long last = min(end, (word + 1) * BITS_PER_LONG);

		atomic_long_andnot(BITMAP_FIRST_WORD_MASK(i) &
				   BITMAP_LAST_WORD_MASK(last),
				   (atomic_long_t *)&map[word]);
		i = last;
	}
}

static int twostep_prot(struct twostep_ctx *ctx, enum dma_data_direction dir,
			unsigned long attrs)
{
	int prot = ctx->prot_extra;

	if (attrs & DMA_ATTR_PRIVILEGED)
		prot |= IOMMU_PRIV;
	switch (dir) {
	case DMA_BIDIRECTIONAL:
		return prot | IOMMU_READ | IOMMU_WRITE;
	case DMA_TO_DEVICE:
		return prot | IOMMU_READ;
	case DMA_FROM_DEVICE:
		return prot | IOMMU_WRITE;
	default:
		return -EINVAL;
	}
}

/* Translate [offset, offset + size) of an allocation into granules. */
static int twostep_granules(struct twostep_ctx *ctx, struct twostep_alloc *a,
			    size_t offset, size_t size, unsigned long *first,
			    unsigned long *count, const char **why)
{
	u64 pad = a->addr - a->base;
	u64 end;

	if (!size) {
		*why = "size 0";
		return -EINVAL;
	}
	if (check_add_overflow((u64)offset, (u64)size, &end)) {
		*why = "offset + size overflows";
		return -ERANGE;
	}
	if (end > a->size) {
		*why = "range reaches past the allocation";
		return -ERANGE;
	}
	*first = (pad + offset) >> ctx->shift;
	*count = ((pad + end - 1) >> ctx->shift) - *first + 1;
	return 0;
}

/*
 * Resolve @dev and @state into a context and a live allocation. Called
 * under rcu_read_lock(); the results stay valid until rcu_read_unlock().
 */
static int twostep_resolve(struct device *dev,
			   const struct twostep_iova_state *state,
			   struct twostep_ctx **ctxp, struct twostep_alloc **ap,
			   const char **why)
{
	struct twostep_ctx *ctx = dev ? twostep_ctx_find(dev) : NULL;
	struct twostep_alloc *a;

	*ctxp = ctx;
	if (!ctx) {
		*why = "device not attached";
		return -ENODEV;
	}
	if (!state || !state->__size) {
		*why = "state holds no allocation";
		return -ENOENT;
	}
	if (state->addr < ctx->win_start || state->addr > ctx->win_end) {
		*why = "state does not match a live allocation";
		return -ENOENT;
	}
	a = xa_load(&ctx->allocs,
		    twostep_index(ctx, state->addr >> ctx->shift));
	if (!a || a->addr != state->addr || a->size != state->__size) {
		*why = "state does not match a live allocation";
		return -ENOENT;
	}
	*ap = a;
	return 0;
}

/* Map [iova, iova + size) to paddr without any IOTLB sync. */
static int twostep_map(struct twostep_ctx *ctx, unsigned long iova,
		       phys_addr_t paddr, size_t size, int prot)
{
	const struct iommu_domain_ops *ops = ctx->domain->ops;
	atomic_t *fail = &twostep_fail_countdown[TWOSTEP_FAIL_MAP];
	struct iommu_iotlb_gather gather;
	size_t done = 0;
	int ret = 0;

	while (done < size) {
		size_t count = (size - done) >> ctx->shift, mapped = 0;

		if (unlikely(atomic_read(fail))) {
			/* fault injection: one granule at a time */
			if (twostep_should_fail(TWOSTEP_FAIL_MAP)) {
				ret = -ENOMEM;
				break;
			}
			count = 1;
		}
		if (ops->map_pages) {
			ret = ops->map_pages(ctx->domain, iova + done,
					     paddr + done, twostep_granule(ctx),
					     count, prot, GFP_ATOMIC, &mapped);
		} else {
			mapped = count << ctx->shift;
			ret = twostep_compat_map_atomic(ctx->domain,
							iova + done,
							paddr + done, mapped,
							prot);
			if (ret)
				mapped = 0;
		}
		done += mapped;
		if (ret)
			break;
		if (!mapped) {
			ret = -EIO;
			break;
		}
	}
	if (ret && done) {
		iommu_iotlb_gather_init(&gather);
		iommu_unmap_fast(ctx->domain, iova, done, &gather);
		iommu_iotlb_sync(ctx->domain, &gather);
	}
	return ret;
}

/*
 * Add every linked run of @a to @gather; the caller syncs when this
 * returns true. Some drivers (virtio-iommu) queue unmaps without touching
 * the gather, so whether to sync is known from the calls, not the gather.
 */
static bool twostep_unmap_linked(struct twostep_ctx *ctx,
				 struct twostep_alloc *a,
				 struct iommu_iotlb_gather *gather)
{
	unsigned long start, end = 0;
	size_t len, unmapped;
	bool any = false;

	for (;;) {
		start = find_next_bit(a->linked, a->nr, end);
		if (start >= a->nr)
			break;
		end = find_next_zero_bit(a->linked, a->nr, start);
		len = (size_t)(end - start) << ctx->shift;
		unmapped = iommu_unmap_fast(ctx->domain,
					    a->base + (start << ctx->shift),
					    len, gather);
		WARN_ONCE(unmapped != len,
			  "twostep: unmapped %zu of %zu bytes\n", unmapped, len);
		any = true;
	}
	return any;
}

/*
 * Unmap everything @a still has with one flush, return its IOVA and free
 * it once no lookup can see it any more. @a is already out of the xarray.
 */
static void twostep_alloc_release(struct twostep_ctx *ctx,
				  struct twostep_alloc *a)
{
	struct iommu_iotlb_gather gather;

	iommu_iotlb_gather_init(&gather);
	/* No stale IOTLB entry may outlive the IOVA's return to the pool. */
	if (twostep_unmap_linked(ctx, a, &gather))
		iommu_iotlb_sync(ctx->domain, &gather);
	__free_iova(&ctx->iovad, a->iova);
	atomic_dec(&twostep_live_allocs);
	kfree_rcu(a, rcu);
}

/* Detach: release every range left; reports them once. */
void twostep_ctx_release_all(struct twostep_ctx *ctx)
{
	unsigned long left = 0, granules = 0, index;
	struct twostep_alloc *a;

	xa_for_each(&ctx->allocs, index, a) {
		xa_erase_irq(&ctx->allocs, index);
		left++;
		granules += bitmap_weight(a->linked, a->nr);
		twostep_alloc_release(ctx, a);
	}
	atomic_long_set(&ctx->live_allocs, 0);
	atomic_long_set(&ctx->linked_granules, 0);
	if (left)
		dev_warn_once(ctx->dev, "twostep: detach: %lu live allocation(s) with %lu linked granule(s) unmapped and freed\n",
			      left, granules);
}

bool twostep_iova_try_alloc(struct device *dev,
			    struct twostep_iova_state *state,
			    phys_addr_t phys, size_t size)
{
	struct twostep_ctx *ctx;
	struct twostep_alloc *a;
	unsigned long nr, flags;
	size_t bitmap_bytes;
	struct iova *iova;
	u64 pad, window;
	void *old;

	if (!state)
		return false;
	memset(state, 0, sizeof(*state));
	ctx = twostep_ctx_find(dev);
	if (!ctx)
		return false;
	if (!size || ((u64)size & TWOSTEP_IOVA_SIZE_RESERVED)) {
		twostep_misuse(ctx, dev, "try_alloc: size %#llx", (u64)size);
		return false;
	}
	if (dma_get_mask(dev) >= ctx->win_start ||
	    dev->coherent_dma_mask >= ctx->win_start) {
		twostep_misuse(ctx, dev,
			       "try_alloc: DMA-API mask raised into the window");
		return false;
	}
	might_sleep();

	pad = phys & (twostep_granule(ctx) - 1);
	nr = DIV_ROUND_UP((u64)size + pad, twostep_granule(ctx));
	window = ((ctx->win_end - ctx->win_start) >> ctx->shift) + 1;
	if (nr > window)
		return false;

	bitmap_bytes = BITS_TO_LONGS(nr) * sizeof(unsigned long);
	a = kzalloc(sizeof(*a) + 2 * bitmap_bytes, GFP_KERNEL | __GFP_NOWARN);
	if (!a)
		return false;
	iova = twostep_should_fail(TWOSTEP_FAIL_IOVA) ? NULL :
	       alloc_iova(&ctx->iovad, nr, ctx->limit_pfn, false);
	if (!iova)
		goto err_free_alloc;
	a->iova = iova;
	a->nr = nr;
	a->base = (dma_addr_t)iova->pfn_lo << ctx->shift;
	a->addr = a->base + pad;
	a->size = size;
	a->linked = (unsigned long *)(a + 1);
	a->head = a->linked + BITS_TO_LONGS(nr);

	xa_lock_irqsave(&ctx->allocs, flags);
	old = __xa_store(&ctx->allocs, twostep_index(ctx, iova->pfn_lo), a,
			 GFP_ATOMIC);
	xa_unlock_irqrestore(&ctx->allocs, flags);
	if (xa_is_err(old))
		goto err_free_iova;
	atomic_long_inc(&ctx->live_allocs);
	atomic_inc(&twostep_live_allocs);

	state->addr = a->addr;
	state->__size = size;
	return true;

err_free_iova:
	__free_iova(&ctx->iovad, iova);
err_free_alloc:
	kfree(a);
	return false;
}
EXPORT_SYMBOL_GPL(twostep_iova_try_alloc);

int twostep_iova_link(struct device *dev, struct twostep_iova_state *state,
		      phys_addr_t phys, size_t offset, size_t size,
		      enum dma_data_direction dir, unsigned long attrs)
{
	unsigned long first, count, mask;
	const char *why = NULL;
	struct twostep_ctx *ctx;
	struct twostep_alloc *a;
	dma_addr_t iova;
	int prot, ret;

	rcu_read_lock();
	ret = twostep_resolve(dev, state, &ctx, &a, &why);
	if (ret)
		goto refused;
	mask = twostep_granule(ctx) - 1;
	prot = twostep_prot(ctx, dir, attrs);
	ret = twostep_granules(ctx, a, offset, size, &first, &count, &why);
	if (ret)
		goto refused;
	iova = a->addr + offset;
	if (prot < 0) {
		why = "bad DMA direction";
		ret = -EINVAL;
	} else if (offset && (iova & mask)) {
		why = "only the first link may start inside a granule";
		ret = -EINVAL;
	} else if ((phys & mask) != (iova & mask)) {
		why = "phys offset inside the granule differs from the IOVA's";
		ret = -EINVAL;
	} else if (!twostep_bits_claim(a->linked, first, count)) {
		why = "range is already linked";
		ret = -EBUSY;
	}
	if (ret)
		goto refused;
	set_bit(first, a->head);
	atomic_long_add(count, &ctx->linked_granules);

	ret = twostep_map(ctx, a->base + ((dma_addr_t)first << ctx->shift),
			  phys & ~(phys_addr_t)mask, (size_t)count << ctx->shift,
			  prot);
	if (ret) {
		clear_bit(first, a->head);
		twostep_bits_clear(a->linked, first, count);
		atomic_long_sub(count, &ctx->linked_granules);
		dev_err_ratelimited(dev, "twostep: link: IOMMU map failed: %d\n",
				    ret);
	}
	rcu_read_unlock();
	return ret;

refused:
	rcu_read_unlock();
	twostep_misuse(ctx, dev, "link: %s (%d)", why, ret);
	return ret;
}
EXPORT_SYMBOL_GPL(twostep_iova_link);

int twostep_iova_sync(struct device *dev, struct twostep_iova_state *state,
		      size_t offset, size_t size)
{
	const struct iommu_domain_ops *ops;
	unsigned long first, count;
	const char *why = NULL;
	struct twostep_ctx *ctx;
	struct twostep_alloc *a;
	int ret;

	rcu_read_lock();
	ret = twostep_resolve(dev, state, &ctx, &a, &why);
	if (!ret)
		ret = twostep_granules(ctx, a, offset, size, &first, &count,
				       &why);
	if (ret) {
		rcu_read_unlock();
		twostep_misuse(ctx, dev, "sync: %s (%d)", why, ret);
		return ret;
	}
	ops = ctx->domain->ops;
	if (ops->map_pages && ops->iotlb_sync_map)
		ops->iotlb_sync_map(ctx->domain,
				    a->base + ((dma_addr_t)first << ctx->shift),
				    (size_t)count << ctx->shift);
	rcu_read_unlock();
	return 0;
}
EXPORT_SYMBOL_GPL(twostep_iova_sync);

void twostep_iova_unlink(struct device *dev, struct twostep_iova_state *state,
			 size_t offset, size_t size,
			 enum dma_data_direction dir, unsigned long attrs)
{
	unsigned long first, count, end, mask;
	struct iommu_iotlb_gather gather;
	const char *why = NULL;
	struct twostep_ctx *ctx;
	struct twostep_alloc *a;
	dma_addr_t iova;
	size_t len;
	int ret;

	rcu_read_lock();
	ret = twostep_resolve(dev, state, &ctx, &a, &why);
	if (ret)
		goto refused;
	mask = twostep_granule(ctx) - 1;
	ret = twostep_granules(ctx, a, offset, size, &first, &count, &why);
	if (ret)
		goto refused;
	end = first + count;
	if (!valid_dma_direction(dir)) {
		why = "bad DMA direction";
		ret = -EINVAL;
	} else if (offset && ((a->addr + offset) & mask)) {
		why = "range does not start on a granule";
		ret = -EINVAL;
	} else if (find_next_zero_bit(a->linked, end, first) < end) {
		why = "range is not (entirely) linked";
		ret = -EINVAL;
	} else if (!test_bit(first, a->head) ||
		   (end < a->nr && test_bit(end, a->linked) &&
		    !test_bit(end, a->head))) {
		why = "range splits a link";
		ret = -EINVAL;
	}
	if (ret)
		goto refused;

	iova = a->base + ((dma_addr_t)first << ctx->shift);
	len = (size_t)count << ctx->shift;
	iommu_iotlb_gather_init(&gather);
	WARN_ONCE(iommu_unmap_fast(ctx->domain, iova, len, &gather) != len,
		  "twostep: unlink unmapped less than %zu bytes\n", len);
	iommu_iotlb_sync(ctx->domain, &gather);
	/* only now may the granules be linked again */
	twostep_bits_clear(a->head, first, count);
	twostep_bits_clear(a->linked, first, count);
	atomic_long_sub(count, &ctx->linked_granules);
	rcu_read_unlock();
	return;

refused:
	rcu_read_unlock();
	twostep_misuse(ctx, dev, "unlink: %s (%d)", why, ret);
}
EXPORT_SYMBOL_GPL(twostep_iova_unlink);

/*
 * Take @a out of the context and release it. @keep_first granules from the
 * start may be linked without a complaint. Called under rcu_read_lock().
 */
static void twostep_alloc_finish(struct device *dev, struct twostep_ctx *ctx,
				 struct twostep_alloc *a,
				 unsigned long keep_first, const char *call)
{
	unsigned long linked, extra, flags;
	void *old;

	xa_lock_irqsave(&ctx->allocs, flags);
	old = __xa_cmpxchg(&ctx->allocs, twostep_index(ctx, a->iova->pfn_lo),
			   a, NULL, 0);
	xa_unlock_irqrestore(&ctx->allocs, flags);
	if (old != a) {
		/* a racing destroy or free of the same state won */
		twostep_misuse(ctx, dev, "%s: allocation already gone", call);
		return;
	}
	linked = bitmap_weight(a->linked, a->nr);
	extra = linked;
	if (keep_first)
		extra -= bitmap_weight(a->linked, min(keep_first, a->nr));
	atomic_long_dec(&ctx->live_allocs);
	atomic_long_sub(linked, &ctx->linked_granules);
	if (extra)
		twostep_misuse(ctx, dev,
			       "%s: %lu granule(s) still linked, unmapping them",
			       call, extra);
	twostep_alloc_release(ctx, a);
}

void twostep_iova_free(struct device *dev, struct twostep_iova_state *state)
{
	const char *why = NULL;
	struct twostep_ctx *ctx;
	struct twostep_alloc *a;
	int ret;

	rcu_read_lock();
	ret = twostep_resolve(dev, state, &ctx, &a, &why);
	if (ret) {
		rcu_read_unlock();
		twostep_misuse(ctx, dev, "free: %s (%d)", why, ret);
		return;
	}
	twostep_alloc_finish(dev, ctx, a, 0, "free");
	rcu_read_unlock();
	memset(state, 0, sizeof(*state));
}
EXPORT_SYMBOL_GPL(twostep_iova_free);

void twostep_iova_destroy(struct device *dev, struct twostep_iova_state *state,
			  size_t mapped_len, enum dma_data_direction dir,
			  unsigned long attrs)
{
	const char *why = NULL;
	struct twostep_ctx *ctx;
	struct twostep_alloc *a;
	unsigned long keep = 0;
	int ret;

	rcu_read_lock();
	ret = twostep_resolve(dev, state, &ctx, &a, &why);
	if (!ret && mapped_len > a->size) {
		why = "mapped_len is past the allocation";
		ret = -ERANGE;
	} else if (!ret && !valid_dma_direction(dir)) {
		why = "bad DMA direction";
		ret = -EINVAL;
	}
	if (ret) {
		rcu_read_unlock();
		twostep_misuse(ctx, dev, "destroy: %s (%d)", why, ret);
		return;
	}
	if (mapped_len)
		keep = ((a->addr - a->base + mapped_len - 1) >> ctx->shift) + 1;
	twostep_alloc_finish(dev, ctx, a, keep, "destroy");
	rcu_read_unlock();
	memset(state, 0, sizeof(*state));
}
EXPORT_SYMBOL_GPL(twostep_iova_destroy);

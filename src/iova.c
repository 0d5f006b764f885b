// SPDX-License-Identifier: GPL-2.0
/*
 * twostep: the IOVA calls. Every live range is tracked with two bitmaps,
 * one bit per granule: "linked" (mapped) and "head" (a link starts here).
 * They let every call check its input against what really is mapped, and
 * let unlink, destroy and detach unmap exactly what was linked with one
 * gathered IOTLB flush.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bitmap.h>
#include <linux/dma-mapping.h>
#include <linux/overflow.h>
#include <linux/slab.h>

#include "compat.h"
#include "twostep_internal.h"

static inline unsigned long twostep_granule(struct twostep_ctx *ctx)
{
	return 1UL << ctx->shift;
}

/* Called with ctx->lock held. */
static struct twostep_alloc *twostep_alloc_lookup(struct twostep_ctx *ctx,
				const struct twostep_iova_state *state)
{
	dma_addr_t base = state->addr & ~(dma_addr_t)(twostep_granule(ctx) - 1);
	struct rb_node *rb = ctx->allocs.rb_node;
	struct twostep_alloc *a;

	while (rb) {
		a = rb_entry(rb, struct twostep_alloc, node);
		if (base < a->base) {
			rb = rb->rb_left;
		} else if (base > a->base) {
			rb = rb->rb_right;
		} else {
			if (a->addr == state->addr && a->size == state->__size)
				return a;
			return NULL;
		}
	}
	return NULL;
}

/* Called with ctx->lock held. */
static void twostep_alloc_insert(struct twostep_ctx *ctx,
				 struct twostep_alloc *new)
{
	struct rb_node **link = &ctx->allocs.rb_node, *parent = NULL;
	struct twostep_alloc *a;

	while (*link) {
		parent = *link;
		a = rb_entry(parent, struct twostep_alloc, node);
		link = new->base < a->base ? &parent->rb_left : &parent->rb_right;
	}
	rb_link_node(&new->node, parent, link);
	rb_insert_color(&new->node, &ctx->allocs);
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

/*
 * Translate [offset, offset + size) of an allocation into granules.
 * Called with ctx->lock held.
 */
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
 * Resolve @dev and @state. On success returns 0 with ctx->lock held and
 * *@ap set; on failure returns the errno with the lock released.
 */
static int twostep_resolve(struct device *dev,
			   const struct twostep_iova_state *state,
			   struct twostep_ctx **ctxp, struct twostep_alloc **ap,
			   unsigned long *flags, const char **why)
{
	struct twostep_ctx *ctx = twostep_ctx_find(dev);

	*ctxp = ctx;
	if (!ctx) {
		*why = "device not attached";
		return -ENODEV;
	}
	if (!state || !state->__size) {
		*why = "state holds no allocation";
		return -ENOENT;
	}
	spin_lock_irqsave(&ctx->lock, *flags);
	*ap = twostep_alloc_lookup(ctx, state);
	if (!*ap) {
		spin_unlock_irqrestore(&ctx->lock, *flags);
		*why = "state does not match a live allocation";
		return -ENOENT;
	}
	return 0;
}

/* Flush what @gather collected; an empty gather costs nothing. */
static void twostep_gather_sync(struct twostep_ctx *ctx,
				struct iommu_iotlb_gather *gather)
{
	if (gather->start <= gather->end)
		iommu_iotlb_sync(ctx->domain, gather);
}

/* Map [iova, iova + size) to paddr without any IOTLB sync. */
static int twostep_map(struct twostep_ctx *ctx, unsigned long iova,
		       phys_addr_t paddr, size_t size, int prot)
{
	const struct iommu_domain_ops *ops = ctx->domain->ops;
	struct iommu_iotlb_gather gather;
	size_t done = 0;
	int ret = 0;

	if (!ops->map_pages && !atomic_read(&twostep_fail_countdown[TWOSTEP_FAIL_MAP]))
		return twostep_compat_map_atomic(ctx->domain, iova, paddr,
						 size, prot);
	while (done < size) {
		size_t count = (size - done) >> ctx->shift, mapped = 0;

		if (unlikely(atomic_read(&twostep_fail_countdown[TWOSTEP_FAIL_MAP]))) {
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
		twostep_gather_sync(ctx, &gather);
	}
	return ret;
}

/* Add every linked run of @a to @gather; the caller syncs. */
static void twostep_unmap_linked(struct twostep_ctx *ctx,
				 struct twostep_alloc *a,
				 struct iommu_iotlb_gather *gather)
{
	unsigned long start, end = 0;
	size_t len, unmapped;

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
	}
}

/*
 * Unmap everything @a still has into @gather, sync, and return its IOVA.
 * @a must already be out of ctx->allocs.
 */
void twostep_alloc_release(struct twostep_ctx *ctx, struct twostep_alloc *a,
			   struct iommu_iotlb_gather *gather)
{
	twostep_unmap_linked(ctx, a, gather);
	/* No stale IOTLB entry may outlive the IOVA's return to the pool. */
	twostep_gather_sync(ctx, gather);
	__free_iova(&ctx->iovad, a->iova);
	atomic_dec(&twostep_live_allocs);
	kfree(a);
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
	if (!iova) {
		kfree(a);
		return false;
	}
	a->iova = iova;
	a->nr = nr;
	a->base = (dma_addr_t)iova->pfn_lo << ctx->shift;
	a->addr = a->base + pad;
	a->size = size;
	a->linked = (unsigned long *)(a + 1);
	a->head = a->linked + BITS_TO_LONGS(nr);

	spin_lock_irqsave(&ctx->lock, flags);
	twostep_alloc_insert(ctx, a);
	ctx->live_allocs++;
	atomic_inc(&twostep_live_allocs);
	spin_unlock_irqrestore(&ctx->lock, flags);

	state->addr = a->addr;
	state->__size = size;
	return true;
}
EXPORT_SYMBOL_GPL(twostep_iova_try_alloc);

int twostep_iova_link(struct device *dev, struct twostep_iova_state *state,
		      phys_addr_t phys, size_t offset, size_t size,
		      enum dma_data_direction dir, unsigned long attrs)
{
	unsigned long first, count, flags, mask;
	const char *why = NULL;
	struct twostep_ctx *ctx;
	struct twostep_alloc *a;
	dma_addr_t iova;
	int prot, ret;

	ret = twostep_resolve(dev, state, &ctx, &a, &flags, &why);
	if (ret)
		goto refused;
	mask = twostep_granule(ctx) - 1;
	prot = twostep_prot(ctx, dir, attrs);
	ret = twostep_granules(ctx, a, offset, size, &first, &count, &why);
	if (ret)
		goto refused_locked;
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
	} else if (find_next_bit(a->linked, first + count, first) <
		   first + count) {
		why = "range is already linked";
		ret = -EBUSY;
	}
	if (ret)
		goto refused_locked;
	bitmap_set(a->linked, first, count);
	__set_bit(first, a->head);
	ctx->linked_granules += count;
	iova = a->base + ((dma_addr_t)first << ctx->shift);
	spin_unlock_irqrestore(&ctx->lock, flags);

	ret = twostep_map(ctx, iova, phys & ~(phys_addr_t)mask,
			  (size_t)count << ctx->shift, prot);
	if (ret) {
		spin_lock_irqsave(&ctx->lock, flags);
		bitmap_clear(a->linked, first, count);
		__clear_bit(first, a->head);
		ctx->linked_granules -= count;
		spin_unlock_irqrestore(&ctx->lock, flags);
		dev_err_ratelimited(dev, "twostep: link: IOMMU map failed: %d\n",
				    ret);
	}
	return ret;

refused_locked:
	spin_unlock_irqrestore(&ctx->lock, flags);
refused:
	twostep_misuse(ctx, dev, "link: %s (%d)", why, ret);
	return ret;
}
EXPORT_SYMBOL_GPL(twostep_iova_link);

int twostep_iova_sync(struct device *dev, struct twostep_iova_state *state,
		      size_t offset, size_t size)
{
	unsigned long first, count, flags;
	const struct iommu_domain_ops *ops;
	const char *why = NULL;
	struct twostep_ctx *ctx;
	struct twostep_alloc *a;
	dma_addr_t iova;
	int ret;

	ret = twostep_resolve(dev, state, &ctx, &a, &flags, &why);
	if (ret)
		goto refused;
	ret = twostep_granules(ctx, a, offset, size, &first, &count, &why);
	iova = a->base + ((dma_addr_t)first << ctx->shift);
	spin_unlock_irqrestore(&ctx->lock, flags);
	if (ret)
		goto refused;

	ops = ctx->domain->ops;
	if (ops->map_pages && ops->iotlb_sync_map)
		ops->iotlb_sync_map(ctx->domain, iova,
				    (size_t)count << ctx->shift);
	return 0;

refused:
	twostep_misuse(ctx, dev, "sync: %s (%d)", why, ret);
	return ret;
}
EXPORT_SYMBOL_GPL(twostep_iova_sync);

void twostep_iova_unlink(struct device *dev, struct twostep_iova_state *state,
			 size_t offset, size_t size,
			 enum dma_data_direction dir, unsigned long attrs)
{
	unsigned long first, count, end, flags, mask;
	struct iommu_iotlb_gather gather;
	const char *why = NULL;
	struct twostep_ctx *ctx;
	struct twostep_alloc *a;
	dma_addr_t iova;
	size_t len;
	int ret;

	ret = twostep_resolve(dev, state, &ctx, &a, &flags, &why);
	if (ret)
		goto refused;
	mask = twostep_granule(ctx) - 1;
	ret = twostep_granules(ctx, a, offset, size, &first, &count, &why);
	if (ret)
		goto refused_locked;
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
		goto refused_locked;
	bitmap_clear(a->linked, first, count);
	bitmap_clear(a->head, first, count);
	ctx->linked_granules -= count;
	iova = a->base + ((dma_addr_t)first << ctx->shift);
	spin_unlock_irqrestore(&ctx->lock, flags);

	len = (size_t)count << ctx->shift;
	iommu_iotlb_gather_init(&gather);
	WARN_ONCE(iommu_unmap_fast(ctx->domain, iova, len, &gather) != len,
		  "twostep: unlink unmapped less than %zu bytes\n", len);
	twostep_gather_sync(ctx, &gather);
	return;

refused_locked:
	spin_unlock_irqrestore(&ctx->lock, flags);
refused:
	twostep_misuse(ctx, dev, "unlink: %s (%d)", why, ret);
}
EXPORT_SYMBOL_GPL(twostep_iova_unlink);

/*
 * Take @a out of the context and release it. Called with ctx->lock held;
 * returns with it released. @keep_first granules from the start may be
 * linked without a complaint.
 */
static void twostep_alloc_finish(struct device *dev, struct twostep_ctx *ctx,
				 struct twostep_alloc *a, unsigned long flags,
				 unsigned long keep_first, const char *call)
{
	struct iommu_iotlb_gather gather;
	unsigned long linked, extra;

	linked = bitmap_weight(a->linked, a->nr);
	extra = linked;
	if (keep_first)
		extra -= bitmap_weight(a->linked, min(keep_first, a->nr));
	rb_erase(&a->node, &ctx->allocs);
	ctx->live_allocs--;
	ctx->linked_granules -= linked;
	spin_unlock_irqrestore(&ctx->lock, flags);

	if (extra)
		twostep_misuse(ctx, dev,
			       "%s: %lu granule(s) still linked, unmapping them",
			       call, extra);
	iommu_iotlb_gather_init(&gather);
	twostep_alloc_release(ctx, a, &gather);
}

void twostep_iova_free(struct device *dev, struct twostep_iova_state *state)
{
	const char *why = NULL;
	struct twostep_ctx *ctx;
	struct twostep_alloc *a;
	unsigned long flags;
	int ret;

	ret = twostep_resolve(dev, state, &ctx, &a, &flags, &why);
	if (ret) {
		twostep_misuse(ctx, dev, "free: %s (%d)", why, ret);
		return;
	}
	twostep_alloc_finish(dev, ctx, a, flags, 0, "free");
	memset(state, 0, sizeof(*state));
}
EXPORT_SYMBOL_GPL(twostep_iova_free);

void twostep_iova_destroy(struct device *dev, struct twostep_iova_state *state,
			  size_t mapped_len, enum dma_data_direction dir,
			  unsigned long attrs)
{
	unsigned long flags, keep = 0;
	const char *why = NULL;
	struct twostep_ctx *ctx;
	struct twostep_alloc *a;
	int ret;

	ret = twostep_resolve(dev, state, &ctx, &a, &flags, &why);
	if (ret)
		goto refused;
	if (mapped_len > a->size) {
		why = "mapped_len is past the allocation";
		ret = -ERANGE;
	} else if (!valid_dma_direction(dir)) {
		why = "bad DMA direction";
		ret = -EINVAL;
	}
	if (ret) {
		spin_unlock_irqrestore(&ctx->lock, flags);
		goto refused;
	}
	if (mapped_len)
		keep = ((a->addr - a->base + mapped_len - 1) >> ctx->shift) + 1;
	twostep_alloc_finish(dev, ctx, a, flags, keep, "destroy");
	memset(state, 0, sizeof(*state));
	return;

refused:
	twostep_misuse(ctx, dev, "destroy: %s (%d)", why, ret);
}
EXPORT_SYMBOL_GPL(twostep_iova_destroy);

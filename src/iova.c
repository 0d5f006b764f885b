// SPDX-License-Identifier: GPL-2.0
/*
 * twostep: the IOVA calls. Each checks its input against what really is
 * allocated and linked (ctx.c, links.c), maps with the domain's own
 * map_pages callback at the largest page sizes the domain supports, and
 * unmaps with one gathered IOTLB flush.
 *
 * After try_alloc the hot path takes no lock: the device's context and the
 * range are found under RCU (a hash table by device, and the range's slot
 * number carried in the state), and links claim their granules with
 * atomic word operations, so concurrent calls on one device, or from
 * interrupt context, never wait for each other.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dma-mapping.h>
#include <linux/overflow.h>

#include "compat.h"
#include "counters.h"
#include "ctx.h"
#include "debug.h"
#include "iova.h"

/*
 * Resolve @dev and @state into a context and a live allocation. Called
 * with preemption off (rcu_read_lock_sched(): cheaper than rcu_read_lock()
 * on preemptible kernels, and synchronize_rcu() waits for it as well); the
 * results stay valid until it is on again.
 */
static __always_inline int
twostep_resolve(struct device *dev, const struct twostep_iova_state *state,
		struct twostep_ctx **ctxp, struct twostep_alloc **ap,
		const char **why)
{
	struct twostep_ctx *ctx = dev ? twostep_ctx_find(dev) : NULL;

	*ctxp = ctx;
	if (!ctx) {
		*why = "twostep holds nothing for the device";
		return -ENODEV;
	}
	if (unlikely(!twostep_ctx_usable(ctx, false))) {
		schedule_work(&twostep_stale_work);
		*why = "the device's domain was replaced";
		return -ENODEV;
	}
	if (!state || !state->__size) {
		*why = "state holds no allocation";
		return -ENOENT;
	}
	*ap = twostep_alloc_find(ctx, state->addr, state->__size);
	if (!*ap) {
		*why = "state does not match a live allocation";
		return -ENOENT;
	}
	return 0;
}

/* Translate [offset, offset + size) of an allocation into granules. */
static __always_inline int
twostep_granules(struct twostep_ctx *ctx, struct twostep_alloc *a,
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
	if (end > (a->size & TWOSTEP_IOVA_SIZE_MASK)) {
		*why = "range reaches past the allocation";
		return -ERANGE;
	}
	*first = (pad + offset) >> ctx->shift;
	*count = ((pad + end - 1) >> ctx->shift) - *first + 1;
	return 0;
}

/*
 * The attributes a link may carry: what upstream's dma_iova_link() acts on
 * and the ones that change nothing here. Anything else is refused.
 */
#define TWOSTEP_LINK_ATTRS (DMA_ATTR_PRIVILEGED | TWOSTEP_DMA_ATTR_MMIO | \
			    TWOSTEP_DMA_ATTR_REQUIRE_COHERENT | \
			    DMA_ATTR_SKIP_CPU_SYNC | DMA_ATTR_WEAK_ORDERING | \
			    DMA_ATTR_NO_WARN)

static int twostep_prot(struct twostep_ctx *ctx, enum dma_data_direction dir,
			unsigned long attrs)
{
	int prot = ctx->prot_extra;

	if (attrs & DMA_ATTR_PRIVILEGED)
		prot |= IOMMU_PRIV;
	/* a peer's BAR: uncached, as upstream maps it */
	if (attrs & TWOSTEP_DMA_ATTR_MMIO)
		prot = (prot & ~IOMMU_CACHE) | IOMMU_MMIO;
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
 * The largest page size the domain supports for mapping at @iova from
 * @paddr with @size left, and how many such pages to map: all that fit,
 * but where @iova and @paddr agree modulo a larger page size, only up to
 * the next boundary of that size, so that the rest can use it.
 */
static size_t twostep_pgsize(struct twostep_ctx *ctx, unsigned long iova,
			     phys_addr_t paddr, size_t size, size_t *count)
{
	unsigned long bitmap = ctx->domain->pgsize_bitmap, sizes, larger;
	unsigned long addr_merge = iova | paddr;
	unsigned int shift;

	/* no larger than what is left, nor than both addresses' alignment */
	sizes = bitmap & GENMASK(__fls(size), 0);
	if (addr_merge)
		sizes &= GENMASK(__ffs(addr_merge), 0);
	shift = __fls(sizes);
	*count = size >> shift;
	larger = bitmap & ~GENMASK(shift, 0);
	if (larger) {
		unsigned long next = BIT(__ffs(larger));

		if (!((iova ^ paddr) & (next - 1)) && (iova & (next - 1)))
			*count = min_t(size_t, *count,
				       (next - (iova & (next - 1))) >> shift);
	}
	return BIT(shift);
}

/* Unmap with one flush; out of line, off the link path's stack frame. */
static noinline void twostep_unmap_sync(struct twostep_ctx *ctx,
					unsigned long iova, size_t size)
{
	struct iommu_iotlb_gather gather;

	iommu_iotlb_gather_init(&gather);
	iommu_unmap_fast(ctx->domain, iova, size, &gather);
	iommu_iotlb_sync(ctx->domain, &gather);
}

/*
 * twostep_map() in pieces: any page size, fault injection, drivers that
 * keep map calls whole, and what the one call did not finish.
 */
static noinline int twostep_map_pieces(struct twostep_ctx *ctx,
				       unsigned long iova, phys_addr_t paddr,
				       size_t size, int prot, bool big)
{
	const struct iommu_domain_ops *ops = ctx->domain->ops;
	size_t done = 0, pgsize, count, mapped;
	int ret = 0;

	while (done < size) {
		mapped = 0;
		if (!big || size - done < ctx->pgsize_large) {
			/* nothing larger than a granule can fit */
			pgsize = 1UL << ctx->shift;
			count = (size - done) >> ctx->shift;
			/*
			 * Unrecorded, on a driver that keeps each map call
			 * whole: one call per granule, so that an unlink can
			 * cut anywhere.
			 */
			if (!big && ctx->unit_maps)
				count = 1;
		} else {
			pgsize = twostep_pgsize(ctx, iova + done, paddr + done,
						size - done, &count);
		}
		if (unlikely(atomic_read(&twostep_fail_countdown[TWOSTEP_FAIL_MAP]))) {
			/* fault injection: one granule at a time */
			if (twostep_should_fail(TWOSTEP_FAIL_MAP)) {
				ret = -ENOMEM;
				break;
			}
			pgsize = 1UL << ctx->shift;
			count = 1;
		}
		/*
		 * The paths below choose page sizes for what they are given:
		 * hand them what cannot hold a large page, or one granule.
		 */
		if (!big && !ops->map_pages && size - done >= ctx->pgsize_large)
			count = 1;
		if (ops->map_pages) {
			ret = ops->map_pages(ctx->domain, iova + done,
					     paddr + done, pgsize, count, prot,
					     GFP_ATOMIC, &mapped);
		} else if (twostep_compat_has_pt(ctx->domain)) {
			ret = twostep_compat_pt_map(ctx->domain, iova + done,
						    paddr + done,
						    pgsize * count, prot,
						    &mapped);
		} else {
			ret = twostep_compat_map_atomic(ctx->domain,
							iova + done,
							paddr + done,
							pgsize * count, prot);
			mapped = ret ? 0 : pgsize * count;
		}
		done += mapped;
		if (ret)
			break;
		if (!mapped) {
			ret = -EIO;
			break;
		}
	}
	if (unlikely(ret && done))
		twostep_unmap_sync(ctx, iova, done);
	return ret;
}

/*
 * Map [iova, iova + size) to paddr without any IOTLB sync; in pages larger
 * than a granule only when @big. The common link, granules that cannot
 * hold a larger page (fewer than @big_min) on a driver that may map them
 * in one call, is that one call, inline: a scattered page's link is the
 * page-table write and little else.
 */
static __always_inline int twostep_map(struct twostep_ctx *ctx,
				       unsigned long iova, phys_addr_t paddr,
				       size_t size, int prot, bool big)
{
	struct iommu_domain *domain = ctx->domain;
	unsigned long count = size >> ctx->shift;
	size_t mapped = 0;
	int ret;

	if (big || count >= ctx->big_min || (ctx->unit_maps && count > 1) ||
	    unlikely(atomic_read(&twostep_fail_countdown[TWOSTEP_FAIL_MAP])))
		return twostep_map_pieces(ctx, iova, paddr, size, prot, big);
	if (twostep_compat_has_pt(domain))
		ret = twostep_compat_pt_map(domain, iova, paddr, size, prot,
					    &mapped);
	else if (domain->ops->map_pages)
		ret = domain->ops->map_pages(domain, iova, paddr,
					     1UL << ctx->shift, count, prot,
					     GFP_ATOMIC, &mapped);
	else
		return twostep_map_pieces(ctx, iova, paddr, size, prot, big);
	if (likely(!ret && mapped == size))
		return 0;
	/* the driver stopped short: the rest as twostep_map_pieces() can */
	if (!ret && mapped && mapped < size)
		ret = twostep_map_pieces(ctx, iova + mapped, paddr + mapped,
					 size - mapped, prot, big);
	else if (!ret)
		ret = -EIO;
	if (ret && mapped)
		twostep_unmap_sync(ctx, iova, mapped);
	return ret;
}

/* Make mappings just made visible, where the IOMMU driver needs it. */
static int twostep_sync_map(struct twostep_ctx *ctx, unsigned long iova,
			    size_t size)
{
	if ((ctx->domain->ops->map_pages ||
	     twostep_compat_has_pt(ctx->domain)) &&
	    ctx->domain->ops->iotlb_sync_map)
		return twostep_compat_sync_map(ctx->domain, iova, size);
	return 0;
}

/*
 * A link of @count granules at @g may be one mapping larger than a granule
 * (a large page, or on a driver that keeps map calls whole, the whole
 * link) when its protection is recorded, so that an unlink cutting it can
 * map its outside part again (twostep_split()). Returns whether it may;
 * if not, twostep_map() maps it in pieces any unmap can cut.
 */
static bool twostep_big_set(struct twostep_ctx *ctx, struct twostep_alloc *a,
			    unsigned long g, unsigned long count, int prot)
{
	unsigned long flags;
	void *old;

	if (count < ctx->big_min)
		return false;
	/* fault injection: as if the record could not be stored */
	if (unlikely(twostep_should_fail(TWOSTEP_FAIL_RECORD)))
		return false;
	/* the first such link of the range, the common case: inline */
	if (!(prot & ~0xff) && !READ_ONCE(a->big_one) &&
	    !cmpxchg(&a->big_one, 0, TWOSTEP_BIG_ONE(g, prot)))
		return true;
	xa_lock_irqsave(&a->big, flags);
	old = __xa_store(&a->big, g, xa_mk_value(prot), GFP_ATOMIC);
	xa_unlock_irqrestore(&a->big, flags);
	return !xa_is_err(old);
}

/*
 * Forget the recorded links whose heads lie in [g, end). Before those
 * granules are unlinked: a link that claims them next records its own.
 */
static void twostep_big_clear(struct twostep_alloc *a, unsigned long g,
			      unsigned long end)
{
	unsigned long flags, idx, one = READ_ONCE(a->big_one);
	void *entry;

	if (one && TWOSTEP_BIG_ONE_HEAD(one) >= g &&
	    TWOSTEP_BIG_ONE_HEAD(one) < end)
		cmpxchg(&a->big_one, one, 0);
	if (xa_empty(&a->big))
		return;
	xa_lock_irqsave(&a->big, flags);
	xa_for_each_range(&a->big, idx, entry, g, end - 1)
		__xa_erase(&a->big, idx);
	xa_unlock_irqrestore(&a->big, flags);
}

static inline dma_addr_t twostep_g2iova(struct twostep_ctx *ctx,
					struct twostep_alloc *a,
					unsigned long g)
{
	return a->base + ((dma_addr_t)g << ctx->shift);
}

/*
 * Map granules [g, end) of a link that was cut again, from @phys, and make
 * them visible. What cannot be mapped is unlinked: the link map follows
 * the page table.
 */
static void twostep_relink(struct twostep_ctx *ctx, struct twostep_alloc *a,
			   unsigned long g, unsigned long end,
			   phys_addr_t phys, int prot)
{
	size_t len = (size_t)(end - g) << ctx->shift;
	bool big = twostep_big_set(ctx, a, g, end - g, prot);
	int ret;

	ret = twostep_map(ctx, twostep_g2iova(ctx, a, g), phys, len, prot,
			  big);
	if (!ret) {
		twostep_sync_map(ctx, twostep_g2iova(ctx, a, g), len);
		return;
	}
	twostep_big_clear(a, g, end);
	twostep_links_clear(a->links, g, end - g);
	twostep_linked_add(ctx, -(long)(end - g));
	dev_err_ratelimited(ctx->dev, "twostep: unlink: could not map the %lu granule(s) of a cut link outside the range again (%d): they are unlinked\n",
			    end - g, ret);
}

/*
 * Granules [cs, ce) of the link [h, t) are being unlinked; the part from
 * @ce on becomes a link of its own. When the link may hold pages larger
 * than a granule, all of it is unmapped into @gather and the parts outside
 * [cs, ce) are mapped again. Returns true when it unmapped the link.
 */
static bool twostep_split(struct twostep_ctx *ctx, struct twostep_alloc *a,
			  unsigned long h, unsigned long t, unsigned long cs,
			  unsigned long ce, struct iommu_iotlb_gather *gather,
			  bool *shortp)
{
	size_t len = (size_t)(t - h) << ctx->shift, unmapped;
	unsigned long one = READ_ONCE(a->big_one);
	phys_addr_t phys;
	void *entry;
	int prot;

	if (ce < t)
		twostep_links_set_head(a->links, ce);
	if (one && TWOSTEP_BIG_ONE_HEAD(one) == h) {
		prot = TWOSTEP_BIG_ONE_PROT(one);
	} else {
		entry = xa_empty(&a->big) ? NULL : xa_load(&a->big, h);
		if (!entry)
			return false;
		prot = xa_to_value(entry);
	}
	phys = iommu_iova_to_phys(ctx->domain, twostep_g2iova(ctx, a, h));
	if (!phys)
		return false;
	unmapped = iommu_unmap_fast(ctx->domain, twostep_g2iova(ctx, a, h),
				    len, gather);
	/* a link racing this unlink (the caller's bug): see twostep_raced() */
	if (unmapped != len)
		*shortp = true;
	if (cs > h)
		twostep_relink(ctx, a, h, cs, phys, prot);
	if (ce < t)
		twostep_relink(ctx, a, ce, t,
			       phys + ((phys_addr_t)(ce - h) << ctx->shift),
			       prot);
	return true;
}

/* Linked granules in [s, e). */
static unsigned long twostep_linked_in(struct twostep_alloc *a,
				       unsigned long s, unsigned long e)
{
	unsigned long g, len, n = 0;

	for (g = twostep_links_next_run(a->links, s, &len); g < e;
	     g = twostep_links_next_run(a->links, g + len, &len))
		n += min(g + len, e) - g;
	return n;
}

/*
 * Unmap what translates of [iova, iova + bytes), run by run: where a link
 * racing this unlink (a caller's bug) claimed granules it has not mapped
 * yet. Unmapping a hole is harmless to most drivers, but io-pgtable-arm
 * WARNs at every one. Returns false when something mapped stayed.
 */
static noinline bool twostep_unmap_mapped(struct twostep_ctx *ctx,
					  dma_addr_t iova, size_t bytes,
					  struct iommu_iotlb_gather *gather)
{
	size_t gran = 1UL << ctx->shift, off, run;
	bool whole = true;

	for (off = 0; off < bytes; off += run) {
		bool mapped = iommu_iova_to_phys(ctx->domain, iova + off);

		for (run = gran; off + run < bytes; run += gran)
			if (!!iommu_iova_to_phys(ctx->domain,
						 iova + off + run) != mapped)
				break;
		if (mapped && iommu_unmap_fast(ctx->domain, iova + off, run,
					       gather) != run)
			whole = false;
	}
	return whole;
}

/*
 * Unmap every linked granule of [s, e) into @gather, whatever else is or
 * is not linked there; a link that crosses @s or @e keeps its part outside
 * mapped (split where it may hold a large page). The link map is left to
 * twostep_unmap_done(), after the IOTLB flush. Returns false when the
 * page table held less than the link map says: only a link racing this
 * unlink over the same granules (the caller's bug) does that.
 */
static bool twostep_unmap_span(struct twostep_ctx *ctx,
			       struct twostep_alloc *a, unsigned long s,
			       unsigned long e, struct iommu_iotlb_gather *gather)
{
	unsigned long lo = s, hi = e, g, len, h, t;
	size_t bytes, unmapped;
	bool short_unmap = false;

	if (twostep_links_inside(a->links, s)) {
		h = twostep_links_head(a->links, s);
		t = twostep_links_end(a->links, s);
		if (twostep_split(ctx, a, h, t, s, min(t, e), gather,
				  &short_unmap))
			lo = min(t, e);
	}
	if (lo < hi && twostep_links_inside(a->links, e)) {
		h = twostep_links_head(a->links, e);
		t = twostep_links_end(a->links, e);
		if (twostep_split(ctx, a, h, t, h, e, gather, &short_unmap))
			hi = max(h, lo);
	}
	for (g = twostep_links_next_run(a->links, lo, &len); g < hi;
	     g = twostep_links_next_run(a->links, g + len, &len)) {
		bytes = (size_t)(min(g + len, hi) - g) << ctx->shift;
		if (unlikely(twostep_alloc_busy(a))) {
			/* the caller sees the overlap: twostep_raced() */
			if (!twostep_unmap_mapped(ctx, twostep_g2iova(ctx, a, g),
						  bytes, gather))
				short_unmap = true;
			continue;
		}
		unmapped = iommu_unmap_fast(ctx->domain,
					    twostep_g2iova(ctx, a, g), bytes,
					    gather);
		if (unmapped != bytes)
			short_unmap = true;
	}
	return !short_unmap;
}

/* After the flush: [s, e) may be linked again; @n granules were linked. */
static void twostep_unmap_done(struct twostep_ctx *ctx,
			       struct twostep_alloc *a, unsigned long s,
			       unsigned long e, unsigned long n)
{
	twostep_big_clear(a, s, e);
	twostep_links_clear(a->links, s, e - s);
	twostep_linked_add(ctx, -(long)n);
}

/*
 * An unlink of granules [s, e) overlapped another call on the range: a
 * link that claimed granules it then cleared may have mapped them after
 * its unmap. The teardown looks at the page table there (ctx.c).
 */
static noinline void twostep_raced(struct twostep_alloc *a, unsigned long s,
				   unsigned long e)
{
	unsigned long flags;

	xa_lock_irqsave(&a->big, flags);
	if (!a->raced) {
		a->raced_lo = s;
		a->raced_hi = e;
	} else {
		a->raced_lo = min(a->raced_lo, s);
		a->raced_hi = max(a->raced_hi, e);
	}
	WRITE_ONCE(a->raced, true);
	xa_unlock_irqrestore(&a->big, flags);
}

/**
 * twostep_iova_try_alloc - try to allocate an IOVA range for a device
 * @dev: device
 * @state: IOVA state, zeroed first and filled in on success
 * @phys: only its offset inside an IOVA granule is used
 * @size: size of the range in bytes
 *
 * Return: true when the range is allocated, false when the caller must use
 * the regular DMA API instead.
 */
bool twostep_iova_try_alloc(struct device *dev,
			    struct twostep_iova_state *state,
			    phys_addr_t phys, size_t size)
{
	if (!state)
		return false;
	memset(state, 0, sizeof(*state));
	if (!dev)
		return false;
	if (!size || ((u64)size & TWOSTEP_IOVA_SIZE_RESERVED)) {
		rcu_read_lock();
		twostep_misuse(twostep_ctx_find(dev), dev,
			       "try_alloc: size %#llx", (u64)size);
		rcu_read_unlock();
		return false;
	}
	/*
	 * Larger than twostep serves: reserving costs a scatterlist entry
	 * per 2 MiB (dma_map_sgtable()) and the link map a pointer per
	 * 64 MiB, so the cost of a range must stay bounded.
	 */
	if ((u64)size > TWOSTEP_IOVA_MAX_SIZE)
		return false;
	/* a device whose DMA the IOMMU does not translate: native's test */
	if (!twostep_compat_dma_iommu(dev))
		return false;
	return twostep_alloc_new(dev, phys, size, state, _RET_IP_);
}
EXPORT_SYMBOL_GPL(twostep_iova_try_alloc);

/**
 * twostep_iova_link - map a physical range into an allocated IOVA range
 * @dev: device
 * @state: state filled in by twostep_iova_try_alloc()
 * @phys: physical address to map
 * @offset: offset into the IOVA range
 * @size: bytes to map
 * @dir: DMA direction; sets the IOMMU permissions
 * @attrs: DMA attributes (see include/twostep.h)
 *
 * Return: 0 or a negative errno (see include/twostep.h).
 */
int twostep_iova_link(struct device *dev, struct twostep_iova_state *state,
		      phys_addr_t phys, size_t offset, size_t size,
		      enum dma_data_direction dir, unsigned long attrs)
{
	unsigned long first, count, mask;
	struct twostep_alloc *a = NULL;
	const char *why = NULL;
	struct twostep_ctx *ctx;
	dma_addr_t iova;
	int prot, ret;
	long seq;

	rcu_read_lock_sched();
	ret = twostep_resolve(dev, state, &ctx, &a, &why);
	if (ret)
		goto refused;
	mask = (1UL << ctx->shift) - 1;
	ret = twostep_granules(ctx, a, offset, size, &first, &count, &why);
	if (ret)
		goto refused;
	prot = twostep_prot(ctx, dir, attrs);
	iova = a->addr + offset;
	if (prot < 0) {
		why = "bad DMA direction";
		ret = -EINVAL;
	} else if (attrs & ~TWOSTEP_LINK_ATTRS) {
		why = "unknown DMA attribute";
		ret = -EINVAL;
	} else if (offset && (iova & mask)) {
		why = "only the first link may start inside a granule";
		ret = -EINVAL;
	} else if ((phys & mask) != (iova & mask)) {
		why = "phys offset inside the granule differs from the IOVA's";
		ret = -EINVAL;
	}
	if (ret)
		goto refused;
	if (unlikely(!twostep_alloc_enter(a, &seq))) {
		why = "the range is being freed";
		ret = -ENOENT;
		goto refused;
	}
	ret = twostep_links_claim(a->links, first, count);
	if (ret == -EBUSY) {
		twostep_alloc_exit(a);
		why = "range is already linked";
		goto refused;
	}
	if (!ret) {
		bool big = twostep_big_set(ctx, a, first, count, prot);

		ret = twostep_map(ctx, twostep_g2iova(ctx, a, first),
				  phys & ~(phys_addr_t)mask,
				  (size_t)count << ctx->shift, prot, big);
		if (ret) {
			if (big)
				twostep_big_clear(a, first, first + 1);
			twostep_links_clear(a->links, first, count);
		} else {
			twostep_linked_add(ctx, count);
		}
	}
	twostep_alloc_exit(a);
	if (ret)
		dev_err_ratelimited(dev, "twostep: link: mapping failed: %d\n",
				    ret);
	twostep_dbg(link, a, ret, dir, _RET_IP_);
	rcu_read_unlock_sched();
	return ret;

refused:
	twostep_misuse(ctx, dev, "link: %s (%d)", why, ret);
	if (a)
		twostep_dbg(link, a, ret, dir, _RET_IP_);
	else
		twostep_dbg(state, dev, state, "link", _RET_IP_);
	rcu_read_unlock_sched();
	return ret;
}
EXPORT_SYMBOL_GPL(twostep_iova_link);

/**
 * twostep_iova_sync - make linked ranges visible to the device
 * @dev: device
 * @state: state filled in by twostep_iova_try_alloc()
 * @offset: offset into the IOVA range
 * @size: bytes to sync
 *
 * Return: 0, a negative errno (see include/twostep.h) or the IOMMU
 * driver's error.
 */
int twostep_iova_sync(struct device *dev, struct twostep_iova_state *state,
		      size_t offset, size_t size)
{
	struct twostep_alloc *a = NULL;
	unsigned long first, count;
	const char *why = NULL;
	struct twostep_ctx *ctx;
	int ret;

	rcu_read_lock_sched();
	ret = twostep_resolve(dev, state, &ctx, &a, &why);
	if (!ret)
		ret = twostep_granules(ctx, a, offset, size, &first, &count,
				       &why);
	if (ret) {
		twostep_misuse(ctx, dev, "sync: %s (%d)", why, ret);
		if (!a)
			twostep_dbg(state, dev, state, "sync", _RET_IP_);
		rcu_read_unlock_sched();
		return ret;
	}
	if (unlikely(twostep_should_fail(TWOSTEP_FAIL_SYNC)))
		ret = -EIO;
	else
		ret = twostep_sync_map(ctx, twostep_g2iova(ctx, a, first),
				       (size_t)count << ctx->shift);
	twostep_dbg(sync, a);
	rcu_read_unlock_sched();
	return ret;
}
EXPORT_SYMBOL_GPL(twostep_iova_sync);

/**
 * twostep_iova_unlink - unmap linked ranges from an IOVA range
 * @dev: device
 * @state: state filled in by twostep_iova_try_alloc()
 * @offset: offset into the IOVA range
 * @size: bytes to unmap
 * @dir: DMA direction used for the links (not needed to unmap)
 * @attrs: DMA attributes used for the links
 */
void twostep_iova_unlink(struct device *dev, struct twostep_iova_state *state,
			 size_t offset, size_t size,
			 enum dma_data_direction dir, unsigned long attrs)
{
	struct iommu_iotlb_gather gather;
	struct twostep_alloc *a = NULL;
	unsigned long first, end, n;
	const char *why = NULL;
	struct twostep_ctx *ctx;
	u64 asize, last;
	bool past, whole;
	long seq;
	int ret;

	rcu_read_lock_sched();
	ret = twostep_resolve(dev, state, &ctx, &a, &why);
	if (ret)
		goto refused;
	asize = a->size & TWOSTEP_IOVA_SIZE_MASK;
	ret = -EINVAL;
	why = "size 0";
	if (!size)
		goto refused;
	ret = -ERANGE;
	why = "range starts past the allocation";
	if (offset >= asize)
		goto refused;
	/* what reaches past the allocation is not ours: unmap up to its end */
	past = check_add_overflow((u64)offset, (u64)size - 1, &last) ||
	       last >= asize;
	if (past)
		last = asize - 1;
	first = (a->addr - a->base + offset) >> ctx->shift;
	end = ((a->addr - a->base + last) >> ctx->shift) + 1;
	why = "the range is being freed";
	ret = -ENOENT;
	if (unlikely(!twostep_alloc_enter(a, &seq)))
		goto refused;
	n = twostep_linked_in(a, first, end);
	if (n) {
		iommu_iotlb_gather_init(&gather);
		whole = twostep_unmap_span(ctx, a, first, end, &gather);
		iommu_iotlb_sync(ctx->domain, &gather);
		/* only now may the granules be linked again */
		twostep_unmap_done(ctx, a, first, end, n);
		if (unlikely(!whole || twostep_alloc_overlapped(a, seq)))
			twostep_raced(a, first, end);
	}
	twostep_alloc_exit(a);
	twostep_dbg(unlink, ctx, a, n, dir, _RET_IP_);
	/* under the guard still: a detach may free the context after it */
	if (past || n < end - first)
		twostep_misuse(ctx, dev, "unlink: %s%s: unmapped the %lu linked granule(s) of %lu",
			       past ? "range reaches past the allocation" : "",
			       n < end - first ? (past ? ", not wholly linked" :
						  "range not wholly linked") : "",
			       n, end - first);
	rcu_read_unlock_sched();
	return;

refused:
	twostep_misuse(ctx, dev, "unlink: %s (%d)", why, ret);
	if (!a)
		twostep_dbg(state, dev, state, "unlink", _RET_IP_);
	rcu_read_unlock_sched();
}
EXPORT_SYMBOL_GPL(twostep_iova_unlink);

/* Add what @one gathered to @all, for a single flush of their hull. */
static void twostep_gather_merge(struct iommu_iotlb_gather *all,
				 struct iommu_iotlb_gather *one)
{
	if (one->start > one->end)
		return;
	all->start = min(all->start, one->start);
	all->end = max(all->end, one->end);
	if (!all->pgsize)
		all->pgsize = one->pgsize;
	twostep_compat_gather_splice(all, one);
}

/**
 * twostep_iova_unlink_bitmap - unlink many entries with one IOTLB flush
 * @dev: device
 * @state: state filled in by twostep_iova_try_alloc() with phys 0
 * @bitmap: bit i set: entry i, [i * @entry, (i + 1) * @entry) of the
 *          range, is to be unmapped
 * @first: first entry to look at
 * @count: entries to look at
 * @entry: bytes per entry, a multiple of the granule
 *
 * Every run of set bits in [@first, @first + @count) is unmapped into its
 * own gather, as twostep_iova_unlink() unmaps a range: whatever is linked
 * there, whatever is not (a contiguous run is added without a flush of its
 * own); the hull of all of them is flushed once. Only then may the
 * granules be linked again. The bitmap is not changed.
 *
 * Return: entries whose bits were set, or a negative errno (nothing
 * unlinked).
 */
long twostep_iova_unlink_bitmap(struct device *dev,
				struct twostep_iova_state *state,
				const unsigned long *bitmap,
				unsigned long first, unsigned long count,
				size_t entry)
{
	struct iommu_iotlb_gather all, one;
	unsigned long rs, re, end, per, mask, n = 0, want = 0;
	bool whole = true;
	const char *why = NULL;
	struct twostep_ctx *ctx;
	struct twostep_alloc *a;
	long done = 0, seq;
	u64 bytes;
	int ret;

	rcu_read_lock_sched();
	ret = twostep_resolve(dev, state, &ctx, &a, &why);
	if (ret)
		goto refused;
	mask = (1UL << ctx->shift) - 1;
	ret = -EINVAL;
	if (a->addr != a->base) {
		why = "range does not start on a granule";
		goto refused;
	}
	if (!entry || (entry & mask) || !count) {
		why = "bad entry size or count";
		goto refused;
	}
	per = entry >> ctx->shift;
	ret = -ERANGE;
	if (check_add_overflow(first, count, &end) ||
	    check_mul_overflow((u64)end, (u64)entry, &bytes) ||
	    bytes > (a->size & TWOSTEP_IOVA_SIZE_MASK)) {
		why = "entries reach past the allocation";
		goto refused;
	}
	ret = -ENOENT;
	why = "the range is being freed";
	if (unlikely(!twostep_alloc_enter(a, &seq)))
		goto refused;
	iommu_iotlb_gather_init(&all);
	rs = first;
	for_each_set_bitrange_from(rs, re, bitmap, end) {
		want += (re - rs) * per;
		n += twostep_linked_in(a, rs * per, re * per);
		iommu_iotlb_gather_init(&one);
		if (!twostep_unmap_span(ctx, a, rs * per, re * per, &one))
			whole = false;
		twostep_gather_merge(&all, &one);
		done += re - rs;
	}
	if (n)
		iommu_iotlb_sync(ctx->domain, &all);
	rs = first;
	for_each_set_bitrange_from(rs, re, bitmap, end)
		twostep_unmap_done(ctx, a, rs * per, re * per, 0);
	twostep_linked_add(ctx, -(long)n);
	/* every set run's map was cleared, linked or not */
	if (unlikely(!whole || twostep_alloc_overlapped(a, seq)))
		twostep_raced(a, first * per, end * per);
	twostep_alloc_exit(a);
	/* under the guard still: a detach may free the context after it */
	if (n < want)
		twostep_misuse(ctx, dev, "unlink: entries not wholly linked: %lu of %lu granules",
			       n, want);
	rcu_read_unlock_sched();
	return done;

refused:
	twostep_misuse(ctx, dev, "unlink: %s (%d)", why, ret);
	rcu_read_unlock_sched();
	return ret;
}

/*
 * Free or destroy: @mapped_len bytes from the start may be linked; @dir
 * and @ip (the caller) for the checker.
 */
static void twostep_finish(struct device *dev,
			   struct twostep_iova_state *state,
			   size_t mapped_len, enum dma_data_direction dir,
			   const char *call, unsigned long ip)
{
	const char *why = NULL;
	struct twostep_ctx *ctx;
	struct twostep_alloc *a;
	unsigned long keep = 0;
	bool extra;
	u64 size;
	int ret;

	rcu_read_lock_sched();
	ret = twostep_resolve(dev, state, &ctx, &a, &why);
	if (ret) {
		twostep_misuse(ctx, dev, "%s: %s (%d)", call, why, ret);
		twostep_dbg(state, dev, state, call, ip);
		goto out_unlock;
	}
	size = a->size & TWOSTEP_IOVA_SIZE_MASK;
	if (mapped_len > size) {
		twostep_misuse(ctx, dev,
			       "%s: mapped_len %zu is past the allocation's %llu bytes: unmapping it all",
			       call, mapped_len, size);
		mapped_len = size;
	}
	if (mapped_len)
		keep = ((a->addr - a->base + mapped_len - 1) >> ctx->shift) + 1;
	twostep_dbg(finish, ctx, a, mapped_len, dir, *call == 'd', ip);
	if (!twostep_alloc_finish(ctx, a, keep, &extra)) {
		twostep_misuse(ctx, dev, "%s: allocation already gone", call);
		goto out_unlock;
	}
	if (extra)
		twostep_misuse(ctx, dev, "%s: links left past %zu bytes, unmapped them",
			       call, mapped_len);
	memset(state, 0, sizeof(*state));
out_unlock:
	rcu_read_unlock_sched();
}

/**
 * twostep_iova_free - free an IOVA range without unmapping
 * @dev: device
 * @state: state filled in by twostep_iova_try_alloc()
 */
void twostep_iova_free(struct device *dev, struct twostep_iova_state *state)
{
	twostep_finish(dev, state, 0, DMA_NONE, "free", _RET_IP_);
}
EXPORT_SYMBOL_GPL(twostep_iova_free);

/**
 * twostep_iova_destroy - unmap everything and free an IOVA range
 * @dev: device
 * @state: state filled in by twostep_iova_try_alloc()
 * @mapped_len: bytes linked from offset 0; 0 only frees the range
 * @dir: DMA direction used for the links (not needed to unmap)
 * @attrs: DMA attributes used for the links
 */
void twostep_iova_destroy(struct device *dev, struct twostep_iova_state *state,
			  size_t mapped_len, enum dma_data_direction dir,
			  unsigned long attrs)
{
	twostep_finish(dev, state, mapped_len, dir, "destroy", _RET_IP_);
}
EXPORT_SYMBOL_GPL(twostep_iova_destroy);

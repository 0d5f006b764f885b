// SPDX-License-Identifier: GPL-2.0
/*
 * twostep: reserving IOVA space from the DMA API's own allocator.
 *
 * We cannot call dma-iommu's allocator, but we can make it allocate for
 * us: dma_map_sgtable() of a scatterlist whose entries all point at one
 * zeroed block gives one contiguous IOVA range, allocated from the domain's
 * own iova_domain under the device's DMA mask and bus limit, outside the
 * PCI host-bridge windows and the reserved regions, and never handed out
 * again until it is unmapped. We then remove its page-table entries with
 * the IOMMU API and keep the range: twostep maps into it privately.
 *
 * The only memory the device can ever see through a reservation is the
 * zero block, read-only (DMA_TO_DEVICE), between the map and the unmap.
 * Entries are zero-block sized (2 MiB when such a block can be had), so a
 * reservation costs one entry and one large-page PTE per 2 MiB, not per
 * 4 KiB page: 32,768 entries for 64 GiB.
 *
 * Giving a range back maps the zero block over it again and unmaps it
 * with dma_unmap_page(): dma-iommu unmaps and frees the IOVA by address
 * and size, and unlike dma_unmap_sgtable() it computes no end address, so
 * a range that ends at 2^64 (AMD, forcedac) is returned too.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dma-map-ops.h>
#include <linux/dma-mapping.h>
#include <linux/gfp.h>
#include <linux/iommu.h>
#include <linux/mm.h>
#include <linux/scatterlist.h>
#include <linux/sizes.h>

#include "compat.h"
#include "reserve.h"

#define TWOSTEP_ZERO_ORDER_MAX	get_order(SZ_2M)

static struct page *twostep_zero;
static unsigned int twostep_zero_order;

/* The zero block: 2 MiB if the buddy allocator has one, else smaller. */
int twostep_reserve_init(void)
{
	int order;

	for (order = TWOSTEP_ZERO_ORDER_MAX; order >= 0; order -= 3) {
		twostep_zero = alloc_pages(GFP_KERNEL | __GFP_ZERO |
					   __GFP_NOWARN, order);
		if (twostep_zero) {
			twostep_zero_order = order;
			return 0;
		}
	}
	twostep_zero = alloc_page(GFP_KERNEL | __GFP_ZERO);
	twostep_zero_order = 0;
	return twostep_zero ? 0 : -ENOMEM;
}

void twostep_reserve_exit(void)
{
	__free_pages(twostep_zero, twostep_zero_order);
}

/* Reservations are made of whole blocks of this size. */
u64 twostep_reserve_block(void)
{
	return PAGE_SIZE << twostep_zero_order;
}

/*
 * Map the zero block over [start, start + size) through the IOMMU API,
 * read-only; returns the bytes mapped.
 */
static u64 twostep_zero_map(struct iommu_domain *domain, dma_addr_t start,
			    u64 size)
{
	u64 block = twostep_reserve_block(), done;

	for (done = 0; done < size; done += block)
		if (twostep_compat_map(domain, start + done,
				       page_to_phys(twostep_zero), block,
				       IOMMU_READ | IOMMU_CACHE))
			break;
	return done;
}

/*
 * Hand a range back to the DMA API; its PTEs must all be present. @ops:
 * the device's DMA ops when the range was reserved, or NULL. arm64 (6.1)
 * clears a device's DMA ops in the driver core's unbind clean-up, before
 * the unbound and not-bound notifications that give a context back:
 * dma_unmap_page_attrs() would then take the direct path and unmap
 * nothing, so the ops the range was reserved through unmap it.
 */
static void twostep_give_back(struct device *dev,
			      const struct dma_map_ops *ops,
			      dma_addr_t start, u64 size)
{
#ifndef TWOSTEP_HAVE_USE_DMA_IOMMU
	/* 6.12 and later keep the IOMMU's DMA path in a bit of the device */
	if (ops && !twostep_compat_dma_iommu(dev) && ops->unmap_page) {
		ops->unmap_page(dev, start, size, DMA_TO_DEVICE,
				DMA_ATTR_SKIP_CPU_SYNC);
		return;
	}
#endif
	dma_unmap_page_attrs(dev, start, size, DMA_TO_DEVICE,
			     DMA_ATTR_SKIP_CPU_SYNC);
}

/**
 * twostep_reserve - reserve IOVA from the DMA API of a device
 * @dev: device; its DMA-API domain is @domain
 * @domain: the device's DMA-API domain
 * @size: bytes, a multiple of twostep_reserve_block()
 * @start: first address of the range on success
 *
 * On success nothing of the range is mapped.
 *
 * Context: process context, may sleep.
 * Return: 0, -ENOMEM, or -ENOSPC when the DMA API has no such range.
 */
int twostep_reserve(struct device *dev, struct iommu_domain *domain,
		    u64 size, dma_addr_t *start)
{
	u64 block = twostep_reserve_block(), unmapped;
	unsigned int nents, i;
	struct scatterlist *sg;
	struct sg_table sgt;
	dma_addr_t first = 0;
	int ret;

	might_sleep();
	if (!size || size % block || size / block > UINT_MAX)
		return -EINVAL;
	nents = size / block;
	ret = sg_alloc_table(&sgt, nents, GFP_KERNEL | __GFP_NOWARN);
	if (ret)
		return ret;
	for_each_sgtable_sg(&sgt, sg, i)
		sg_set_page(sg, twostep_zero, block, 0);
	ret = dma_map_sgtable(dev, &sgt, DMA_TO_DEVICE,
			      DMA_ATTR_SKIP_CPU_SYNC | DMA_ATTR_NO_WARN);
	if (ret) {
		ret = -ENOSPC;
		goto out_free_table;
	}
	/*
	 * iommu-dma maps a scatterlist into one contiguous IOVA allocation.
	 * Its segment lengths cannot be trusted for the total: 6.1 merges
	 * entries longer than the maximum segment size up to the segment
	 * boundary, and a 4 GiB segment's 32-bit length wraps to 0. So check
	 * where the segments lie and that both ends translate to the block.
	 */
	first = sg_dma_address(sgt.sgl);
	for_each_sgtable_dma_sg(&sgt, sg, i)
		if (sg_dma_address(sg) < first ||
		    sg_dma_address(sg) - first >= size)
			break;
	if (i != sgt.nents ||
	    iommu_iova_to_phys(domain, first) != page_to_phys(twostep_zero) ||
	    iommu_iova_to_phys(domain, first + (size - PAGE_SIZE)) !=
	    page_to_phys(twostep_zero) + block - PAGE_SIZE) {
		dev_err(dev, "twostep: reserve: DMA API gave %u segment(s) from %pad, not %llu contiguous bytes\n",
			sgt.nents, &first, size);
		/* the DMA API's own inverse, whatever it did */
		dma_unmap_sgtable(dev, &sgt, DMA_TO_DEVICE,
				  DMA_ATTR_SKIP_CPU_SYNC);
		ret = -EIO;
		goto out_free_table;
	}
	unmapped = iommu_unmap(domain, first, size);
	if (unmapped != size) {
		/* cannot happen with a sane IOMMU driver: put it back whole */
		WARN_ONCE(1, "twostep: reserve: unmapped %llu of %llu bytes\n",
			  unmapped, size);
		if (twostep_zero_map(domain, first, size) == size)
			twostep_give_back(dev, NULL, first, size);
		ret = -EIO;
		goto out_free_table;
	}
	*start = first;
out_free_table:
	sg_free_table(&sgt);
	return ret;
}

/**
 * twostep_reserve_probe_units - does the driver keep map calls whole?
 * @domain: the domain
 * @start: two free granules of a reservation, mapped by nothing
 * @shift: log2 of the granule
 *
 * Maps two granules of the zero block, read-only, in one map_pages call,
 * as a link does, and unmaps one. A page-table driver unmaps that one
 * granule; virtio-iommu keeps each map request as one mapping that an
 * unmap cannot split, and unmaps both or nothing. Both are unmapped after.
 * Drivers without map_pages (7.x's generic page table) are page tables.
 *
 * Context: process context, may sleep.
 * Return: true when an unmap cannot cut what one map call mapped.
 */
bool twostep_reserve_probe_units(struct iommu_domain *domain,
				 dma_addr_t start, unsigned int shift)
{
	const struct iommu_domain_ops *ops = domain->ops;
	size_t gran = 1UL << shift, mapped = 0, unmapped;

	might_sleep();
	if (!ops->map_pages)
		return false;
	if (ops->map_pages(domain, start, page_to_phys(twostep_zero), gran, 2,
			   IOMMU_READ | IOMMU_CACHE, GFP_KERNEL, &mapped) ||
	    mapped != 2 * gran) {
		/* cannot tell: take the careful side */
		if (mapped)
			iommu_unmap(domain, start, mapped);
		return true;
	}
	unmapped = iommu_unmap(domain, start, gran);
	if (unmapped < 2 * gran)
		iommu_unmap(domain, start + unmapped, 2 * gran - unmapped);
	return unmapped != gran;
}

/**
 * twostep_unreserve - return a range reserved by twostep_reserve()
 * @dev: device it was reserved for
 * @domain: the device's DMA-API domain
 * @ops: the device's DMA ops when it was reserved (get_dma_ops()), or NULL
 * @start: first address
 * @size: size in bytes
 *
 * Nothing may be mapped in the range. Should mapping the zero block fail
 * (out of page-table memory) the range stays reserved and a warning says
 * so: it is lost to the DMA API but never reachable by the device.
 *
 * Context: process context, may sleep.
 */
void twostep_unreserve(struct device *dev, struct iommu_domain *domain,
		       const struct dma_map_ops *ops, dma_addr_t start,
		       u64 size)
{
	u64 mapped;

	might_sleep();
	mapped = twostep_zero_map(domain, start, size);
	if (mapped != size) {
		if (mapped)
			iommu_unmap(domain, start, mapped);
		dev_warn(dev, "twostep: could not return [%pad + %#llx] to the DMA API; it stays reserved\n",
			 &start, size);
		return;
	}
	twostep_give_back(dev, ops, start, size);
}

// SPDX-License-Identifier: GPL-2.0
/*
 * twostep: the classic calls around the two-step API that drivers of
 * newer kernels use on their fallback path: dma_map_phys(),
 * dma_unmap_phys() (Linux 6.18, with DMA_ATTR_MMIO for a peer's BAR and,
 * from 7.0, DMA_ATTR_REQUIRE_COHERENT) and dma_need_unmap() (6.16), built
 * on dma_map_page_attrs() and dma_map_resource(). Where the kernel has its
 * own, they call it. Calls counters.c only.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dma-direct.h>
#include <linux/dma-map-ops.h>
#include <linux/dma-mapping.h>
#include <linux/iommu.h>
#include <linux/mm.h>
#include <linux/pci.h>
#include <linux/swiotlb.h>

#include "counters.h"
#include "twostep.h"

/* upstream's values, checked where the kernel has them */
#ifdef DMA_ATTR_MMIO
static_assert(TWOSTEP_DMA_ATTR_MMIO == DMA_ATTR_MMIO);
#endif
#ifdef DMA_ATTR_REQUIRE_COHERENT
static_assert(TWOSTEP_DMA_ATTR_REQUIRE_COHERENT == DMA_ATTR_REQUIRE_COHERENT);
#endif

#define TWOSTEP_OUR_ATTRS	(TWOSTEP_DMA_ATTR_MMIO | \
				 TWOSTEP_DMA_ATTR_REQUIRE_COHERENT)
/* what a classic mapping may carry; anything else is refused */
#define TWOSTEP_PHYS_ATTRS	(TWOSTEP_OUR_ATTRS | DMA_ATTR_PRIVILEGED | \
				 DMA_ATTR_SKIP_CPU_SYNC | \
				 DMA_ATTR_WEAK_ORDERING | DMA_ATTR_NO_WARN)

#if !defined(TWOSTEP_HAVE_DMA_MAP_PHYS) || !defined(TWOSTEP_HAVE_DMA_NEED_UNMAP)
/* Does @dev's DMA go through an IOMMU translation of the DMA API? */
static bool twostep_phys_translates(struct device *dev)
{
	struct iommu_domain *domain = iommu_get_domain_for_dev(dev);

	return domain && iommu_is_dma_domain(domain);
}
#endif

#ifndef TWOSTEP_HAVE_DMA_MAP_PHYS
/*
 * Would the DMA API bounce [phys, phys + size) through swiotlb for @dev?
 * Behind an IOMMU only an untrusted device's unaligned range is bounced;
 * without one, everything when bouncing is forced, else RAM the device
 * cannot reach.
 */
static bool twostep_phys_would_bounce(struct device *dev, phys_addr_t phys,
				      size_t size, bool mmio)
{
	u64 limit;

	if (twostep_phys_translates(dev))
		return dev_is_pci(dev) && to_pci_dev(dev)->untrusted &&
		       !PAGE_ALIGNED(phys | size);
	if (get_dma_ops(dev))
		return false;
	if (is_swiotlb_force_bounce(dev))
		return true;
	limit = min_not_zero(dma_get_mask(dev), dev->bus_dma_limit);
	return !mmio && phys_to_dma(dev, phys) + size - 1 > limit;
}

/* dma_map_phys() of 6.18 on a kernel without it; @attrs are known */
static dma_addr_t twostep_map_phys(struct device *dev, phys_addr_t phys,
				   size_t size, enum dma_data_direction dir,
				   unsigned long attrs)
{
	unsigned long kattrs = attrs & ~TWOSTEP_OUR_ATTRS;
	bool mmio = attrs & TWOSTEP_DMA_ATTR_MMIO;

	if ((attrs & TWOSTEP_DMA_ATTR_REQUIRE_COHERENT) &&
	    !dev_is_dma_coherent(dev))
		return DMA_MAPPING_ERROR;
	/* neither MMIO nor what must stay coherent is ever bounced */
	if ((attrs & TWOSTEP_OUR_ATTRS) &&
	    twostep_phys_would_bounce(dev, phys, size, mmio))
		return DMA_MAPPING_ERROR;
	if (mmio)
		return dma_map_resource(dev, phys, size, dir, kattrs);
	return dma_map_page_attrs(dev, pfn_to_page(PHYS_PFN(phys)),
				  offset_in_page(phys), size, dir, kattrs);
}
#endif

/**
 * twostep_dma_map_phys - map a physical range for DMA, the classic way
 * @dev: device
 * @phys: physical address: RAM, or with TWOSTEP_DMA_ATTR_MMIO a peer's BAR
 * @size: bytes
 * @dir: DMA direction
 * @attrs: DMA attributes
 *
 * Return: the DMA address, or DMA_MAPPING_ERROR.
 */
dma_addr_t twostep_dma_map_phys(struct device *dev, phys_addr_t phys,
				size_t size, enum dma_data_direction dir,
				unsigned long attrs)
{
	if (attrs & ~TWOSTEP_PHYS_ATTRS) {
		twostep_misuse(NULL, dev, "map_phys: unknown DMA attribute %#lx",
			       attrs & ~TWOSTEP_PHYS_ATTRS);
		return DMA_MAPPING_ERROR;
	}
	if (!valid_dma_direction(dir)) {
		twostep_misuse(NULL, dev, "map_phys: bad DMA direction %d",
			       dir);
		return DMA_MAPPING_ERROR;
	}
#ifdef TWOSTEP_HAVE_DMA_MAP_PHYS
	return dma_map_phys(dev, phys, size, dir, attrs);
#else
	return twostep_map_phys(dev, phys, size, dir, attrs);
#endif
}
EXPORT_SYMBOL_GPL(twostep_dma_map_phys);

/**
 * twostep_dma_unmap_phys - unmap what twostep_dma_map_phys() mapped
 * @dev: device
 * @addr: DMA address twostep_dma_map_phys() returned
 * @size: bytes, as mapped
 * @dir: DMA direction, as mapped
 * @attrs: DMA attributes, as mapped
 *
 * Unknown attributes are reported, and the range is unmapped all the same.
 */
void twostep_dma_unmap_phys(struct device *dev, dma_addr_t addr, size_t size,
			    enum dma_data_direction dir, unsigned long attrs)
{
	if (attrs & ~TWOSTEP_PHYS_ATTRS) {
		twostep_misuse(NULL, dev, "unmap_phys: unknown DMA attribute %#lx",
			       attrs & ~TWOSTEP_PHYS_ATTRS);
		attrs &= TWOSTEP_PHYS_ATTRS;
	}
#ifdef TWOSTEP_HAVE_DMA_MAP_PHYS
	dma_unmap_phys(dev, addr, size, dir, attrs);
#else
	if (attrs & TWOSTEP_DMA_ATTR_MMIO)
		dma_unmap_resource(dev, addr, size, dir,
				   attrs & ~TWOSTEP_OUR_ATTRS);
	else
		dma_unmap_page_attrs(dev, addr, size, dir,
				     attrs & ~TWOSTEP_OUR_ATTRS);
#endif
}
EXPORT_SYMBOL_GPL(twostep_dma_unmap_phys);

/**
 * twostep_dma_need_unmap - must the device's classic mappings be unmapped?
 * @dev: device
 *
 * Return: true when the driver must unmap what it maps.
 */
bool twostep_dma_need_unmap(struct device *dev)
{
#ifdef TWOSTEP_HAVE_DMA_NEED_UNMAP
	return dma_need_unmap(dev);
#else
	if (get_dma_ops(dev) || twostep_phys_translates(dev))
		return true;
#ifdef TWOSTEP_HAVE_DMA_DEV_NEED_SYNC
	/* upstream's own test: syncs, hence bounces, may be needed */
	if (dma_dev_need_sync(dev))
		return true;
#else
	if (!dev_is_dma_coherent(dev) || is_swiotlb_active(dev))
		return true;
#endif
	return IS_ENABLED(CONFIG_DMA_API_DEBUG);
#endif
}
EXPORT_SYMBOL_GPL(twostep_dma_need_unmap);

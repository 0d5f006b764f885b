/* SPDX-License-Identifier: GPL-2.0 */
/*
 * twostep: the one place that knows how kernel APIs differ between the
 * kernels twostep builds for. Decisions come from feature probes run at
 * build time by src/conftest.sh (TWOSTEP_HAVE_* macros), never from
 * kernel version numbers, since distributions backport.
 */
#ifndef _TWOSTEP_COMPAT_H
#define _TWOSTEP_COMPAT_H

#include <linux/device.h>
#include <linux/dma-map-ops.h>
#include <linux/iommu.h>
#include <linux/mm.h>
#ifdef TWOSTEP_HAVE_IOMMUPT
#include <linux/generic_pt/iommu.h>
#endif
#ifdef TWOSTEP_HAVE_USE_DMA_IOMMU
#include <linux/iommu-dma.h>
#endif

/*
 * Domains on the generic page table (7.x: Intel, AMD, ...) have no
 * ->map_pages; their table's map_range maps without the IOTLB sync that
 * iommu_map() adds, as upstream's own dma_iova_link() does.
 */
static inline bool twostep_compat_has_pt(struct iommu_domain *domain)
{
#ifdef TWOSTEP_HAVE_IOMMUPT
	return iommupt_from_domain(domain);
#else
	return false;
#endif
}

/* Map without sleeping and without a sync; only if _has_pt(). */
static inline int twostep_compat_pt_map(struct iommu_domain *domain,
					unsigned long iova, phys_addr_t paddr,
					size_t size, int prot, size_t *mapped)
{
#ifdef TWOSTEP_HAVE_IOMMUPT
	struct pt_iommu *pt = iommupt_from_domain(domain);

	return pt->ops->map_range(pt, iova, paddr, size, prot, GFP_ATOMIC,
				  mapped);
#else
	return -EOPNOTSUPP;
#endif
}

/* Map without sleeping, for domains that lack ->map_pages. */
static inline int twostep_compat_map_atomic(struct iommu_domain *domain,
					    unsigned long iova,
					    phys_addr_t paddr, size_t size,
					    int prot)
{
#ifdef TWOSTEP_HAVE_IOMMU_MAP_ATOMIC
	return iommu_map_atomic(domain, iova, paddr, size, prot);
#else
	return iommu_map(domain, iova, paddr, size, prot, GFP_ATOMIC);
#endif
}

/* Map, possibly sleeping, with the IOTLB sync iommu_map() always does. */
static inline int twostep_compat_map(struct iommu_domain *domain,
				     unsigned long iova, phys_addr_t paddr,
				     size_t size, int prot)
{
#ifdef TWOSTEP_HAVE_IOMMU_MAP_ATOMIC
	return iommu_map(domain, iova, paddr, size, prot);
#else
	return iommu_map(domain, iova, paddr, size, prot, GFP_KERNEL);
#endif
}

/* The driver's sync after map; 6.1's returns nothing, later ones an error. */
static inline int twostep_compat_sync_map(struct iommu_domain *domain,
					  unsigned long iova, size_t size)
{
#ifdef TWOSTEP_HAVE_SYNC_MAP_INT
	return domain->ops->iotlb_sync_map(domain, iova, size);
#else
	domain->ops->iotlb_sync_map(domain, iova, size);
	return 0;
#endif
}

/* Move the page-table pages @from gathered for freeing to @to. */
static inline void twostep_compat_gather_splice(struct iommu_iotlb_gather *to,
						struct iommu_iotlb_gather *from)
{
#ifdef TWOSTEP_HAVE_IOMMU_PAGES_LIST
	list_splice_init(&from->freelist.pages, &to->freelist.pages);
#else
	list_splice_init(&from->freelist, &to->freelist);
#endif
}

/*
 * The page-table pages that the unmaps gathered in @g freed, which may be
 * freed only after an IOTLB flush, kept for a later one: possible where
 * the IOMMU drivers free them as a plain list of pages (put_pages_list(),
 * 6.1). From 6.11 their freeing also takes them off the kernel's count of
 * IOMMU pages (NR_IOMMU_PAGES), which only the drivers' own, private code
 * does: there only an unmap that freed none may wait.
 */
#if !defined(TWOSTEP_HAVE_IOMMU_PAGES_LIST) && \
	!defined(TWOSTEP_HAVE_IOMMU_PAGE_COUNT)
#define TWOSTEP_KEEP_PT_PAGES
#endif

static inline bool twostep_compat_gather_keepable(struct iommu_iotlb_gather *g)
{
#if defined(TWOSTEP_KEEP_PT_PAGES)
	return true;
#elif defined(TWOSTEP_HAVE_IOMMU_PAGES_LIST)
	return list_empty(&g->freelist.pages);
#else
	return list_empty(&g->freelist);
#endif
}

static inline void twostep_compat_gather_keep(struct list_head *to,
					      struct iommu_iotlb_gather *g)
{
	INIT_LIST_HEAD(to);
#ifdef TWOSTEP_KEEP_PT_PAGES
	list_splice_init(&g->freelist, to);
#endif
}

/* After the IOTLB flush: free what twostep_compat_gather_keep() kept. */
static inline void twostep_compat_free_kept(struct list_head *pages)
{
#ifdef TWOSTEP_KEEP_PT_PAGES
	if (!list_empty(pages))
		put_pages_list(pages);
#endif
}

/*
 * May @dev's DMA go through the DMA API's IOMMU domain? False only where
 * it surely does not (an identity domain, no IOMMU), in a load or two:
 * upstream's use_dma_iommu() where the kernel has it (6.12 and later:
 * one bit), else (6.1) the device's DMA ops, which the IOMMU sets for its
 * DMA domains and which a device whose DMA is direct does not have.
 */
static inline bool twostep_compat_dma_iommu(struct device *dev)
{
#ifdef TWOSTEP_HAVE_USE_DMA_IOMMU
	return use_dma_iommu(dev);
#else
	return get_dma_ops(dev);
#endif
}

/*
 * twostep's mark on a domain it reserves in, so that a domain allocated
 * later at the same address (a group's type switched away and back) is
 * not taken for it: the fault handler's token, which the DMA API's own
 * domains leave unused (no handler); a new domain is zeroed. Where the
 * token shares a union with the DMA cookie (6.15 and later) there is no
 * mark, and only the domain's address is compared.
 */
static inline bool twostep_compat_domain_mark(struct iommu_domain *domain,
					      void *tag)
{
#ifdef TWOSTEP_HAVE_DOMAIN_TAG
	if (domain->handler)
		return false;
	if (READ_ONCE(domain->handler_token) != tag)
		iommu_set_fault_handler(domain, NULL, tag);
#endif
	return true;
}

static inline bool twostep_compat_domain_marked(struct iommu_domain *domain,
						void *tag)
{
#ifdef TWOSTEP_HAVE_DOMAIN_TAG
	return READ_ONCE(domain->handler_token) == tag;
#else
	return true;
#endif
}

#endif /* _TWOSTEP_COMPAT_H */

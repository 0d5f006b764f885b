/* SPDX-License-Identifier: GPL-2.0 */
/*
 * twostep self-test: kernel differences the self-test itself meets, from
 * the same feature probes as twostep's (src/conftest.sh, TWOSTEP_HAVE_*).
 */
#ifndef _TWOSTEP_SELFTEST_KCOMPAT_H
#define _TWOSTEP_SELFTEST_KCOMPAT_H

#include <linux/iommu.h>
#ifdef TWOSTEP_HAVE_IOMMUPT
#include <linux/generic_pt/iommu.h>
#endif

/* iommu_map() with the sync it always does; 6.1 takes no gfp flags. */
static inline int ts_iommu_map(struct iommu_domain *domain,
			       unsigned long iova, phys_addr_t paddr,
			       size_t size, int prot)
{
#ifdef TWOSTEP_HAVE_IOMMU_MAP_ATOMIC
	return iommu_map(domain, iova, paddr, size, prot);
#else
	return iommu_map(domain, iova, paddr, size, prot, GFP_KERNEL);
#endif
}

/*
 * The page-table write alone, no sync: the domain's ->map_pages, or on the
 * generic page table (7.x) its map_range. The benchmark's floor.
 */
static inline bool ts_can_map_nosync(struct iommu_domain *domain)
{
#ifdef TWOSTEP_HAVE_IOMMUPT
	if (iommupt_from_domain(domain))
		return true;
#endif
	return domain->ops->map_pages;
}

static inline int ts_map_nosync(struct iommu_domain *domain,
				unsigned long iova, phys_addr_t paddr,
				size_t size, int prot, size_t *mapped)
{
#ifdef TWOSTEP_HAVE_IOMMUPT
	struct pt_iommu *pt = iommupt_from_domain(domain);

	if (pt)
		return pt->ops->map_range(pt, iova, paddr, size, prot,
					  GFP_ATOMIC, mapped);
#endif
	return domain->ops->map_pages(domain, iova, paddr, size, 1, prot,
				      GFP_ATOMIC, mapped);
}

#endif /* _TWOSTEP_SELFTEST_KCOMPAT_H */

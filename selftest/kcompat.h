/* SPDX-License-Identifier: GPL-2.0 */
/*
 * twostep self-test: kernel differences the self-test itself meets, from
 * the same feature probes as twostep's (src/conftest.sh, TWOSTEP_HAVE_*).
 */
#ifndef _TWOSTEP_SELFTEST_KCOMPAT_H
#define _TWOSTEP_SELFTEST_KCOMPAT_H

#include <linux/iommu.h>

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

#endif /* _TWOSTEP_SELFTEST_KCOMPAT_H */

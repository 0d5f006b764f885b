/* SPDX-License-Identifier: GPL-2.0 */
/*
 * twostep: IOVA space reserved from the DMA API's own allocator
 * (reserve.c). The lowest layer: it calls only the kernel.
 */
#ifndef _TWOSTEP_RESERVE_H
#define _TWOSTEP_RESERVE_H

#include <linux/dma-map-ops.h>
#include <linux/types.h>

struct device;
struct iommu_domain;

int twostep_reserve_init(void);
void twostep_reserve_exit(void);
u64 twostep_reserve_block(void);
int twostep_reserve(struct device *dev, struct iommu_domain *domain,
		    u64 size, dma_addr_t *start);
bool twostep_reserve_probe_units(struct iommu_domain *domain,
				 dma_addr_t start, unsigned int shift);
void twostep_unreserve(struct device *dev, struct iommu_domain *domain,
		       const struct dma_map_ops *ops, dma_addr_t start,
		       u64 size);

#endif /* _TWOSTEP_RESERVE_H */

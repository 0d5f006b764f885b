#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Feature probes for src/compat.h: prints -DTWOSTEP_HAVE_* flags for the
# kernel build tree given as $1 (its Module.symvers lists exported symbols)
# and its source tree $2 (headers).
objtree=$1
srctree=${2:-$1}
symvers=$objtree/Module.symvers

have_symbol() {
	[ -r "$symvers" ] && awk -v s="$1" '$2 == s { f = 1 } END { exit !f }' \
		"$symvers"
}

# the member's declaration may wrap: join the lines first
have_decl() {
	[ -r "$srctree/$1" ] &&
		tr '\n\t' '  ' <"$srctree/$1" | grep -q -- "$2"
}

have_symbol iommu_map_atomic && printf ' -DTWOSTEP_HAVE_IOMMU_MAP_ATOMIC'
have_decl include/linux/iommu.h 'int (\*iotlb_sync_map)' &&
	printf ' -DTWOSTEP_HAVE_SYNC_MAP_INT'
have_decl include/linux/generic_pt/iommu.h 'iommupt_from_domain' &&
	printf ' -DTWOSTEP_HAVE_IOMMUPT'
have_decl include/linux/dma-mapping.h 'bool dma_dev_need_sync(' &&
	printf ' -DTWOSTEP_HAVE_DMA_DEV_NEED_SYNC'
have_decl include/linux/dma-mapping.h 'dma_addr_t dma_map_phys(' &&
	printf ' -DTWOSTEP_HAVE_DMA_MAP_PHYS'
have_decl include/linux/dma-mapping.h 'bool dma_need_unmap(' &&
	printf ' -DTWOSTEP_HAVE_DMA_NEED_UNMAP'
have_decl include/linux/iommu.h 'struct iommu_pages_list' &&
	printf ' -DTWOSTEP_HAVE_IOMMU_PAGES_LIST'
# the kernel counts IOMMU page-table pages (6.11 and later)
have_decl include/linux/mmzone.h 'NR_IOMMU_PAGES,' &&
	printf ' -DTWOSTEP_HAVE_IOMMU_PAGE_COUNT'
# use_dma_iommu(): the device's DMA goes through iommu-dma (6.12 and later)
have_decl include/linux/iommu-dma.h 'static inline bool use_dma_iommu(' &&
	printf ' -DTWOSTEP_HAVE_USE_DMA_IOMMU'
# the fault handler's token as a member of its own (6.1, 6.12), not in a
# union with the DMA cookie (cookie_type, 6.15 and later)
have_decl include/linux/iommu.h 'void \*handler_token;' &&
	! have_decl include/linux/iommu.h 'cookie_type;' &&
	printf ' -DTWOSTEP_HAVE_DOMAIN_TAG'
echo

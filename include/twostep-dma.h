/* SPDX-License-Identifier: GPL-2.0 */
/*
 * twostep-dma.h: upstream's two-step DMA API names on every kernel.
 *
 * Include it after <linux/dma-mapping.h> and write the driver against
 * upstream's names only:
 *
 * - the two-step calls (Linux 6.16): struct dma_iova_state, dma_use_iova(),
 *   dma_iova_size(), dma_iova_try_alloc(), dma_iova_free(), dma_iova_link(),
 *   dma_iova_sync(), dma_iova_unlink(), dma_iova_destroy();
 * - hmm's (6.16): struct hmm_dma_map, hmm_dma_map_alloc(),
 *   hmm_dma_map_free(), hmm_dma_map_pfn(), hmm_dma_unmap_pfn(),
 *   hmm_pfn_to_phys(), HMM_PFN_DMA_MAPPED, HMM_PFN_P2PDMA,
 *   HMM_PFN_P2PDMA_BUS;
 * - dma_need_unmap() (6.16);
 * - dma_map_phys(), dma_unmap_phys() and DMA_ATTR_MMIO (6.18);
 * - DMA_ATTR_REQUIRE_COHERENT (7.0).
 *
 * Each group is added only where the kernel's own headers lack it, tested
 * with a macro the kernel defines beside it (DMA_IOVA_USE_SWIOTLB for the
 * 6.16 names, DMA_ATTR_MMIO for 6.18's, DMA_ATTR_REQUIRE_COHERENT for
 * 7.0's), so the consumer needs no configure probe: on 7.3 the header adds
 * nothing and the driver calls the kernel. Elsewhere the names are backed
 * by twostep.ko (see twostep.h for its error codes and where it differs
 * from upstream), and the driver's module needs twostep's symbols:
 * BUILD_DEPENDS="twostep" in the driver's dkms.conf, or
 * KBUILD_EXTRA_SYMBOLS=<twostep>/Module.symvers for a plain build.
 *
 * The attribute bits are upstream's (DMA_ATTR_MMIO 1 << 10,
 * DMA_ATTR_REQUIRE_COHERENT 1 << 12); dma_iova_link() and dma_map_phys()
 * refuse bits twostep does not know rather than ignore them.
 * DMA_ATTR_REQUIRE_COHERENT is defined only where twostep backs the
 * two-step calls: a 6.16 to 6.19 kernel's own calls would ignore it.
 *
 * struct dma_iova_state is twostep's: code that reads its __size directly
 * (wrong upstream too) sees the size in bits 0-47 and twostep's flags
 * above, where upstream keeps the size and its DMA_IOVA_USE_SWIOTLB flag.
 *
 * On 6.1 and 6.12 hmm_range_fault() rewrites every flag of an entry, and
 * the bits of HMM_PFN_DMA_MAPPED, HMM_PFN_P2PDMA and HMM_PFN_P2PDMA_BUS
 * lie inside hmm_pfn_to_map_order()'s field there: twostep's hmm helpers
 * therefore keep the mapped state in the map itself (hmm_dma_unmap_pfn()
 * returns it, twostep_hmm_dma_mapped() reads it) and never write these
 * flags into pfn_list. Debian's 6.1 and 6.12 kernels have no
 * CONFIG_PCI_P2PDMA, so no entry is a P2P page there; twostep's
 * hmm_dma_map_pfn() refuses device pages and ignores @p2pdma_state.
 *
 * TWOSTEP_DMA_IOVA_NATIVE is 1 when the kernel's two-step calls are used,
 * 0 when twostep's are; TWOSTEP_DMA_MAP_PHYS_NATIVE likewise for
 * dma_map_phys().
 */
#ifndef _TWOSTEP_DMA_H
#define _TWOSTEP_DMA_H

#include <linux/dma-mapping.h>
#include <linux/hmm.h>

#ifdef DMA_IOVA_USE_SWIOTLB

#define TWOSTEP_DMA_IOVA_NATIVE 1
/* hmm_dma_* came with dma_iova_* (Linux 6.16) */
#include <linux/hmm-dma.h>

#else /* !DMA_IOVA_USE_SWIOTLB: the kernel lacks the API, twostep backs it */

#include "twostep.h"

#define TWOSTEP_DMA_IOVA_NATIVE 0

/* upstream's state type is twostep's, under upstream's name */
#define dma_iova_state twostep_iova_state

static inline bool dma_use_iova(struct dma_iova_state *state)
{
	return twostep_use_iova(state);
}

static inline size_t dma_iova_size(struct dma_iova_state *state)
{
	return twostep_iova_size(state);
}

static inline bool dma_iova_try_alloc(struct device *dev,
				      struct dma_iova_state *state,
				      phys_addr_t phys, size_t size)
{
	return twostep_iova_try_alloc(dev, state, phys, size);
}

static inline void dma_iova_free(struct device *dev,
				 struct dma_iova_state *state)
{
	twostep_iova_free(dev, state);
}

static inline int dma_iova_link(struct device *dev,
				struct dma_iova_state *state,
				phys_addr_t phys, size_t offset, size_t size,
				enum dma_data_direction dir,
				unsigned long attrs)
{
	return twostep_iova_link(dev, state, phys, offset, size, dir, attrs);
}

static inline int dma_iova_sync(struct device *dev,
				struct dma_iova_state *state,
				size_t offset, size_t size)
{
	return twostep_iova_sync(dev, state, offset, size);
}

static inline void dma_iova_unlink(struct device *dev,
				   struct dma_iova_state *state,
				   size_t offset, size_t size,
				   enum dma_data_direction dir,
				   unsigned long attrs)
{
	twostep_iova_unlink(dev, state, offset, size, dir, attrs);
}

static inline void dma_iova_destroy(struct device *dev,
				    struct dma_iova_state *state,
				    size_t mapped_len,
				    enum dma_data_direction dir,
				    unsigned long attrs)
{
	twostep_iova_destroy(dev, state, mapped_len, dir, attrs);
}

/* upstream's hmm_dma_* (Linux 6.16), backed by twostep's helpers */
#define hmm_dma_map twostep_hmm_dma_map

struct pci_p2pdma_map_state;

static inline int hmm_dma_map_alloc(struct device *dev,
				    struct hmm_dma_map *map,
				    size_t nr_entries, size_t dma_entry_size)
{
	return twostep_hmm_dma_map_alloc(dev, map, nr_entries,
					 dma_entry_size);
}

static inline void hmm_dma_map_free(struct device *dev,
				    struct hmm_dma_map *map)
{
	twostep_hmm_dma_map_free(dev, map);
}

/* twostep maps no peer-to-peer memory: @p2pdma_state is not used */
static inline dma_addr_t
hmm_dma_map_pfn(struct device *dev, struct hmm_dma_map *map, size_t idx,
		struct pci_p2pdma_map_state *p2pdma_state)
{
	return twostep_hmm_dma_map_pfn(dev, map, idx);
}

static inline bool hmm_dma_unmap_pfn(struct device *dev,
				     struct hmm_dma_map *map, size_t idx)
{
	return twostep_hmm_dma_unmap_pfn(dev, map, idx);
}

/* upstream's values; twostep never writes them (see the top) */
#define HMM_PFN_DMA_MAPPED	(1UL << (BITS_PER_LONG - 4))
#define HMM_PFN_P2PDMA		(1UL << (BITS_PER_LONG - 5))
#define HMM_PFN_P2PDMA_BUS	(1UL << (BITS_PER_LONG - 6))

static inline phys_addr_t hmm_pfn_to_phys(unsigned long hmm_pfn)
{
	return __pfn_to_phys(hmm_pfn & ~HMM_PFN_FLAGS);
}

static inline bool dma_need_unmap(struct device *dev)
{
	return twostep_dma_need_unmap(dev);
}

/* 7.0's: met by every range twostep gives (see twostep_iova_link()) */
#ifndef DMA_ATTR_REQUIRE_COHERENT
#define DMA_ATTR_REQUIRE_COHERENT TWOSTEP_DMA_ATTR_REQUIRE_COHERENT
#endif

#endif /* DMA_IOVA_USE_SWIOTLB */

#ifdef DMA_ATTR_MMIO

#define TWOSTEP_DMA_MAP_PHYS_NATIVE 1

#else /* !DMA_ATTR_MMIO: 6.18's classic calls, backed by twostep */

#include "twostep.h"

#define TWOSTEP_DMA_MAP_PHYS_NATIVE 0

#define DMA_ATTR_MMIO TWOSTEP_DMA_ATTR_MMIO

static inline dma_addr_t dma_map_phys(struct device *dev, phys_addr_t phys,
				      size_t size,
				      enum dma_data_direction dir,
				      unsigned long attrs)
{
	return twostep_dma_map_phys(dev, phys, size, dir, attrs);
}

static inline void dma_unmap_phys(struct device *dev, dma_addr_t addr,
				  size_t size, enum dma_data_direction dir,
				  unsigned long attrs)
{
	twostep_dma_unmap_phys(dev, addr, size, dir, attrs);
}

#endif /* DMA_ATTR_MMIO */

#endif /* _TWOSTEP_DMA_H */

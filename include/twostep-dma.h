/* SPDX-License-Identifier: GPL-2.0 */
/*
 * twostep-dma.h: upstream's two-step DMA API names on every kernel.
 *
 * Include it after <linux/dma-mapping.h> and write the driver against
 * upstream's names only: struct dma_iova_state, dma_use_iova(),
 * dma_iova_size(), dma_iova_try_alloc(), dma_iova_free(), dma_iova_link(),
 * dma_iova_sync(), dma_iova_unlink() and dma_iova_destroy().
 *
 * On a kernel whose <linux/dma-mapping.h> has the API (Linux 6.16 and
 * later, and any kernel it was backported to) this header adds nothing and
 * the driver calls the kernel's own implementation. The test is the
 * header's own DMA_IOVA_USE_SWIOTLB, which upstream defines next to
 * struct dma_iova_state, so the consumer needs no configure probe.
 * Elsewhere the names are backed by twostep.ko (see twostep.h for its
 * error codes and where it deliberately differs from upstream), and the
 * driver's module needs twostep's symbols: BUILD_DEPENDS="twostep" in the
 * driver's dkms.conf, or KBUILD_EXTRA_SYMBOLS=<twostep>/Module.symvers for
 * a plain build.
 *
 * Upstream's hmm_dma_map_alloc(), hmm_dma_map_free(), hmm_dma_map_pfn()
 * and hmm_dma_unmap_pfn() with struct hmm_dma_map come the same way: the
 * kernel's <linux/hmm-dma.h>, which came with the API, where it has it,
 * twostep's helpers elsewhere.
 *
 * TWOSTEP_DMA_IOVA_NATIVE is 1 when the kernel's implementation is used,
 * 0 when twostep's is.
 */
#ifndef _TWOSTEP_DMA_H
#define _TWOSTEP_DMA_H

#include <linux/dma-mapping.h>

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

#endif /* DMA_IOVA_USE_SWIOTLB */

#endif /* _TWOSTEP_DMA_H */

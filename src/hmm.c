// SPDX-License-Identifier: GPL-2.0
/*
 * twostep: DMA mapping of ranges mirrored with HMM, the hmm_dma_* helpers
 * of Linux 6.16 on top of the IOVA calls: one IOVA range per map, linked
 * one entry at a time as pages are faulted in, and unlinked one entry or
 * one whole invalidated range at a time. Without a translating domain each
 * entry is mapped with dma_map_page() into the map's dma_list.
 *
 * Upstream marks a mapped entry with a flag in the pfn_list that its
 * hmm_range_fault() preserves; here hmm_range_fault() rewrites every flag,
 * so the mapped state is a bitmap of the map's own.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bitmap.h>
#include <linux/dma-map-ops.h>
#include <linux/dma-mapping.h>
#include <linux/hmm.h>
#include <linux/mm.h>
#include <linux/overflow.h>
#include <linux/pci.h>
#include <linux/slab.h>
#include <linux/swiotlb.h>

#include "compat.h"
#include "counters.h"
#include "ctx.h"
#include "iova.h"

/*
 * Would the DMA API have to sync or bounce for @dev? Pages are reached
 * where the CPU has them, with no ownership hand-over, so such devices
 * cannot be served (upstream checks the same with dma_need_sync state).
 */
static bool twostep_hmm_need_sync(struct device *dev)
{
#ifdef TWOSTEP_HAVE_DMA_DEV_NEED_SYNC
	if (dma_dev_need_sync(dev))
		return true;
#endif
	return !dev_is_dma_coherent(dev) || is_swiotlb_force_bounce(dev) ||
	       (dev_is_pci(dev) && to_pci_dev(dev)->untrusted);
}

static __printf(2, 3) void twostep_hmm_misuse(struct device *dev,
					     const char *fmt, ...)
{
	struct va_format vaf;
	va_list args;

	va_start(args, fmt);
	vaf.fmt = fmt;
	vaf.va = &args;
	rcu_read_lock();
	twostep_misuse(dev ? twostep_ctx_find(dev) : NULL, dev, "hmm: %pV",
		       &vaf);
	rcu_read_unlock();
	va_end(args);
}

/**
 * twostep_hmm_dma_map_alloc - set up the DMA mapping of a mirrored range
 * @dev: device
 * @map: filled in; zeroed first
 * @nr_entries: pages (PAGE_SIZE) in the range, as upstream counts them
 * @dma_entry_size: bytes per entry
 *
 * Return: 0 or a negative errno (see include/twostep.h).
 */
int twostep_hmm_dma_map_alloc(struct device *dev,
			      struct twostep_hmm_dma_map *map,
			      size_t nr_entries, size_t dma_entry_size)
{
	size_t bytes, nr;

	if (!map)
		return -EINVAL;
	memset(map, 0, sizeof(*map));
	/* upstream reserves nr_entries pages, whatever the entry size */
	if (!dev || !nr_entries || dma_entry_size < PAGE_SIZE ||
	    !is_power_of_2(dma_entry_size) ||
	    check_mul_overflow(nr_entries, (size_t)PAGE_SIZE, &bytes) ||
	    ((u64)bytes & ~TWOSTEP_IOVA_SIZE_MASK))
		return -EINVAL;
	nr = bytes / dma_entry_size;
	if (!nr)
		return -EINVAL;
	if (twostep_hmm_need_sync(dev) || dma_addressing_limited(dev))
		return -EOPNOTSUPP;

	map->pfn_list = kvcalloc(nr_entries, sizeof(*map->pfn_list),
				 GFP_KERNEL | __GFP_NOWARN);
	if (!map->pfn_list)
		return -ENOMEM;
	map->__mapped = kvcalloc(BITS_TO_LONGS(nr),
				 sizeof(unsigned long),
				 GFP_KERNEL | __GFP_NOWARN);
	if (!map->__mapped)
		goto err_free_pfns;
	map->dma_entry_size = dma_entry_size;
	map->__nr = nr;
	if (twostep_iova_try_alloc(dev, &map->state, 0, bytes))
		return 0;
	map->dma_list = kvcalloc(nr, sizeof(*map->dma_list),
				 GFP_KERNEL | __GFP_NOWARN);
	if (!map->dma_list)
		goto err_free_mapped;
	return 0;

err_free_mapped:
	kvfree(map->__mapped);
err_free_pfns:
	kvfree(map->pfn_list);
	memset(map, 0, sizeof(*map));
	return -ENOMEM;
}
EXPORT_SYMBOL_GPL(twostep_hmm_dma_map_alloc);

/**
 * twostep_hmm_dma_map_free - tear down a map
 * @dev: device
 * @map: map filled in by twostep_hmm_dma_map_alloc()
 */
void twostep_hmm_dma_map_free(struct device *dev,
			      struct twostep_hmm_dma_map *map)
{
	size_t left;

	if (!map || !map->__mapped)
		return;
	left = bitmap_weight(map->__mapped, map->__nr);
	if (left) {
		twostep_hmm_misuse(dev, "map_free: %zu entries still mapped, unmapping them",
				   left);
		twostep_hmm_dma_unmap_range(dev, map, 0, map->__nr);
	}
	if (twostep_use_iova(&map->state))
		twostep_iova_free(dev, &map->state);
	kvfree(map->dma_list);
	kvfree(map->__mapped);
	kvfree(map->pfn_list);
	memset(map, 0, sizeof(*map));
}
EXPORT_SYMBOL_GPL(twostep_hmm_dma_map_free);

/* Map entry @idx, with the IOTLB sync when @sync. */
static dma_addr_t twostep_hmm_map(struct device *dev,
				  struct twostep_hmm_dma_map *map, size_t idx,
				  bool sync)
{
	size_t size = map ? map->dma_entry_size : 0, offset;
	unsigned long pfn;
	struct page *page;
	phys_addr_t phys;
	dma_addr_t addr;
	int ret;

	if (!map || !map->__mapped || idx >= map->__nr) {
		twostep_hmm_misuse(dev, "map_pfn: no such entry %zu", idx);
		return DMA_MAPPING_ERROR;
	}
	offset = idx * size;
	if (test_bit(idx, map->__mapped))
		return map->dma_list ? map->dma_list[idx] :
		       map->state.addr + offset;
	pfn = map->pfn_list[idx];
	if (!(pfn & HMM_PFN_VALID) || (pfn & HMM_PFN_ERROR)) {
		twostep_hmm_misuse(dev, "map_pfn: entry %zu holds no valid pfn",
				   idx);
		return DMA_MAPPING_ERROR;
	}
	page = hmm_pfn_to_page(pfn);
	phys = page_to_phys(page);
	if (is_zone_device_page(page) || (phys & (size - 1))) {
		twostep_hmm_misuse(dev, "map_pfn: entry %zu: device page or misaligned",
				   idx);
		return DMA_MAPPING_ERROR;
	}

	if (twostep_use_iova(&map->state)) {
		ret = twostep_iova_link(dev, &map->state, phys, offset, size,
					DMA_BIDIRECTIONAL, 0);
		if (ret)
			return DMA_MAPPING_ERROR;
		if (sync) {
			ret = twostep_iova_sync(dev, &map->state, offset, size);
			if (ret)
				goto err_unlink;
		}
		addr = map->state.addr + offset;
	} else {
		addr = dma_map_page(dev, page, 0, size, DMA_BIDIRECTIONAL);
		if (dma_mapping_error(dev, addr))
			return DMA_MAPPING_ERROR;
		map->dma_list[idx] = addr;
	}
	set_bit(idx, map->__mapped);
	return addr;

err_unlink:
	twostep_iova_unlink(dev, &map->state, offset, size, DMA_BIDIRECTIONAL,
			    0);
	return DMA_MAPPING_ERROR;
}

/**
 * twostep_hmm_dma_map_pfn - map one entry for the device
 * @dev: device
 * @map: map filled in by twostep_hmm_dma_map_alloc()
 * @idx: entry
 *
 * Return: the device address of the entry, or DMA_MAPPING_ERROR.
 */
dma_addr_t twostep_hmm_dma_map_pfn(struct device *dev,
				   struct twostep_hmm_dma_map *map,
				   size_t idx)
{
	return twostep_hmm_map(dev, map, idx, true);
}
EXPORT_SYMBOL_GPL(twostep_hmm_dma_map_pfn);

/**
 * twostep_hmm_dma_link_pfn - map one entry without the IOTLB sync
 * @dev: device
 * @map: map filled in by twostep_hmm_dma_map_alloc()
 * @idx: entry
 *
 * Return: the device address of the entry, or DMA_MAPPING_ERROR.
 */
dma_addr_t twostep_hmm_dma_link_pfn(struct device *dev,
				    struct twostep_hmm_dma_map *map,
				    size_t idx)
{
	return twostep_hmm_map(dev, map, idx, false);
}
EXPORT_SYMBOL_GPL(twostep_hmm_dma_link_pfn);

/**
 * twostep_hmm_dma_sync - make linked entries visible to the device
 * @dev: device
 * @map: map filled in by twostep_hmm_dma_map_alloc()
 * @first: first entry
 * @count: entries
 *
 * Return: 0 or a negative errno.
 */
int twostep_hmm_dma_sync(struct device *dev, struct twostep_hmm_dma_map *map,
			 size_t first, size_t count)
{
	if (!map || !map->__mapped || !count) {
		twostep_hmm_misuse(dev, "sync: no map or no entries");
		return -EINVAL;
	}
	if (first >= map->__nr || count > map->__nr - first) {
		twostep_hmm_misuse(dev, "sync: entries %zu + %zu past %zu",
				   first, count, map->__nr);
		return -ERANGE;
	}
	if (!twostep_use_iova(&map->state))
		return 0;
	return twostep_iova_sync(dev, &map->state,
				 first * map->dma_entry_size,
				 count * map->dma_entry_size);
}
EXPORT_SYMBOL_GPL(twostep_hmm_dma_sync);

/**
 * twostep_hmm_dma_unmap_pfn - unmap one entry
 * @dev: device
 * @map: map filled in by twostep_hmm_dma_map_alloc()
 * @idx: entry
 *
 * Return: true when the entry was mapped and is unmapped now.
 */
bool twostep_hmm_dma_unmap_pfn(struct device *dev,
			       struct twostep_hmm_dma_map *map, size_t idx)
{
	size_t size;

	if (!map || !map->__mapped || idx >= map->__nr)
		return false;
	if (!test_bit(idx, map->__mapped))
		return false;
	size = map->dma_entry_size;
	if (twostep_use_iova(&map->state))
		twostep_iova_unlink(dev, &map->state, idx * size, size,
				    DMA_BIDIRECTIONAL, 0);
	else
		dma_unmap_page(dev, map->dma_list[idx], size,
			       DMA_BIDIRECTIONAL);
	clear_bit(idx, map->__mapped);
	return true;
}
EXPORT_SYMBOL_GPL(twostep_hmm_dma_unmap_pfn);

/**
 * twostep_hmm_dma_unmap_range - unmap the mapped entries of a range
 * @dev: device
 * @map: map filled in by twostep_hmm_dma_map_alloc()
 * @first: first entry
 * @count: entries
 *
 * Return: the number of entries unmapped.
 */
size_t twostep_hmm_dma_unmap_range(struct device *dev,
				   struct twostep_hmm_dma_map *map,
				   size_t first, size_t count)
{
	unsigned long rs, re, end;
	size_t done = 0, i;
	long ret;

	if (!map || !map->__mapped || first >= map->__nr || !count)
		return 0;
	end = first + min(count, map->__nr - first);
	if (twostep_use_iova(&map->state)) {
		ret = twostep_iova_unlink_bitmap(dev, &map->state,
						 map->__mapped, first,
						 end - first,
						 map->dma_entry_size);
		if (ret <= 0)
			return 0;
		/*
		 * One atomic bit operation per entry: the words are shared
		 * with entries outside the range that others map and unmap.
		 */
		rs = first;
		for_each_set_bitrange_from(rs, re, map->__mapped, end)
			for (i = rs; i < re; i++)
				clear_bit(i, map->__mapped);
		return ret;
	}
	for (i = first; i < end; i++) {
		if (!test_bit(i, map->__mapped))
			continue;
		dma_unmap_page(dev, map->dma_list[i], map->dma_entry_size,
			       DMA_BIDIRECTIONAL);
		clear_bit(i, map->__mapped);
		done++;
	}
	return done;
}
EXPORT_SYMBOL_GPL(twostep_hmm_dma_unmap_range);

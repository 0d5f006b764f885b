/* SPDX-License-Identifier: GPL-2.0 */
/*
 * twostep: the "DMA two-step" IOVA API (allocate an IOVA range first, then
 * link and unlink physical ranges into it, one IOTLB sync per batch) for
 * kernels that do not provide dma_iova_*() themselves.
 *
 * The calls mirror upstream's dma_iova_*() one for one. A device must be
 * attached with twostep_attach() first; twostep_iova_try_alloc() returns
 * false for any device that is not attached, and the caller then falls back
 * to dma_map_page() or dma_map_sg() exactly as with the upstream API.
 *
 * Error codes returned by the int-returning calls:
 *   -ENODEV  the device is not attached
 *   -ENOENT  the state does not describe a live allocation (never allocated,
 *            already freed or destroyed, or copied from a stale state)
 *   -EINVAL  malformed request (size 0, bad direction, misaligned link)
 *   -ERANGE  the range overflows or reaches past the allocation
 *   -EBUSY   the range overlaps a range that is already linked
 * The void calls report misuse with a rate-limited kernel log line, count it
 * in &struct twostep_stats.misuse and return without touching any mapping.
 */
#ifndef _TWOSTEP_H
#define _TWOSTEP_H

#include <linux/bits.h>
#include <linux/types.h>
#include <linux/dma-direction.h>

struct device;

/**
 * struct twostep_iova_state - an IOVA range handed out by twostep
 * @addr: device address of the first byte; carries the offset of @phys
 *        inside an IOVA granule as given to twostep_iova_try_alloc()
 * @__size: size in bytes as requested; private, use twostep_iova_size()
 *
 * Owned by the caller, filled in by twostep_iova_try_alloc() and cleared
 * again by twostep_iova_free() and twostep_iova_destroy().
 */
struct twostep_iova_state {
	dma_addr_t addr;
	u64 __size;
};

/* Sizes with this bit set are refused, as upstream reserves it. */
#define TWOSTEP_IOVA_SIZE_RESERVED	BIT_ULL(63)

/**
 * twostep_use_iova - does this state hold a two-step IOVA range?
 * @state: IOVA state
 *
 * Return: true after a successful twostep_iova_try_alloc(), until the range
 * is freed or destroyed.
 */
static inline bool twostep_use_iova(const struct twostep_iova_state *state)
{
	return state->__size != 0;
}

/**
 * twostep_iova_size - size of the IOVA range held by a state
 * @state: IOVA state
 *
 * Return: the size passed to twostep_iova_try_alloc(), or 0.
 */
static inline size_t twostep_iova_size(const struct twostep_iova_state *state)
{
	return state->__size & ~TWOSTEP_IOVA_SIZE_RESERVED;
}

/**
 * struct twostep_stats - live figures of one attached device
 * @window_start: first device address of the private IOVA window
 * @window_end: last device address of the private IOVA window (inclusive)
 * @granule: IOVA granule in bytes
 * @live_allocs: IOVA ranges allocated and not yet freed
 * @linked_granules: granules currently mapped through twostep
 * @misuse: calls refused because of bad input since attach
 * @misuse_all: calls refused since twostep was loaded, for any device or
 *              none (detached or NULL devices included)
 */
struct twostep_stats {
	u64 window_start;
	u64 window_end;
	unsigned long granule;
	unsigned long live_allocs;
	unsigned long linked_granules;
	unsigned long misuse;
	unsigned long misuse_all;
};

/**
 * enum twostep_fail - what twostep_debug_fail() can make fail
 * @TWOSTEP_FAIL_MAP: one granule-sized IOMMU page-table insertion of a link
 * @TWOSTEP_FAIL_IOVA: the IOVA allocation of twostep_iova_try_alloc()
 */
enum twostep_fail {
	TWOSTEP_FAIL_MAP,
	TWOSTEP_FAIL_IOVA,
};

/**
 * twostep_attach - enable the two-step API for a device
 * @dev: device whose IOMMU domain is used
 * @hw_dma_limit: highest address the device hardware can really generate
 *
 * Sets up a private IOVA allocator over @dev's own IOMMU domain. Its window
 * lies above the device's DMA-API masks, so the regular DMA API can never
 * hand out an address twostep uses, and reaches up to @hw_dma_limit clipped
 * to the domain's aperture. IOMMU reserved regions are kept out. The device
 * must not raise its DMA-API mask into the window afterwards.
 *
 * Context: process context, may sleep.
 * Return: 0 on success; -ENODEV when the device has no translating DMA
 * domain (no IOMMU, identity or passthrough), -EOPNOTSUPP for a device or
 * domain twostep cannot serve, -ERANGE when the window is empty, -EBUSY when
 * the device is already attached, -ENOMEM. A log line says why.
 */
int twostep_attach(struct device *dev, u64 hw_dma_limit);

/**
 * twostep_detach - disable the two-step API for a device
 * @dev: device passed to twostep_attach()
 *
 * Ranges still allocated are reported once, unmapped and freed.
 *
 * Context: process context, may sleep. No other twostep call for @dev may
 * run at the same time.
 */
void twostep_detach(struct device *dev);

/**
 * twostep_get_stats - read the live figures of an attached device
 * @dev: device
 * @stats: filled in on success
 *
 * Return: 0, or -ENODEV when @dev is not attached.
 */
int twostep_get_stats(struct device *dev, struct twostep_stats *stats);

/**
 * twostep_debug_fail - fault injection for tests
 * @what: which operation fails
 * @nth: the nth such operation from now fails (1: the next one); 0 disarms
 *
 * While a map failure is armed, links map one granule at a time so that a
 * failure can strike in the middle of a link. The failure is reported to
 * the caller as -ENOMEM (link) or false (try_alloc).
 */
void twostep_debug_fail(enum twostep_fail what, unsigned int nth);

/**
 * twostep_iova_try_alloc - try to allocate an IOVA range for a device
 * @dev: device
 * @state: IOVA state, zeroed first and filled in on success
 * @phys: only its offset inside an IOVA granule is used: @state->addr gets
 *        the same low bits. Pass 0 for granule-aligned transfers.
 * @size: size of the range in bytes
 *
 * Context: process context, may sleep.
 * Return: true when the range is allocated; false when the caller must use
 * the regular DMA API instead (device not attached, size 0, size with bit 63
 * set, larger than the window, or no space left).
 */
bool twostep_iova_try_alloc(struct device *dev,
			    struct twostep_iova_state *state,
			    phys_addr_t phys, size_t size);

/**
 * twostep_iova_free - free an IOVA range without unmapping
 * @dev: device
 * @state: state filled in by twostep_iova_try_alloc()
 *
 * Undoes twostep_iova_try_alloc(); every link should be unlinked first.
 * Ranges still linked are reported, unmapped and the range freed anyway, so
 * the device is never left able to reach memory through a freed range.
 * @state is cleared.
 *
 * Context: any context.
 */
void twostep_iova_free(struct device *dev, struct twostep_iova_state *state);

/**
 * twostep_iova_link - map a physical range into an allocated IOVA range
 * @dev: device
 * @state: state filled in by twostep_iova_try_alloc()
 * @phys: physical address to map
 * @offset: offset into the IOVA range
 * @size: bytes to map
 * @dir: DMA direction; sets the IOMMU permissions (DMA_TO_DEVICE is device
 *       read-only, DMA_FROM_DEVICE device write-only)
 * @attrs: DMA attributes; DMA_ATTR_PRIVILEGED is honoured
 *
 * The mapping is not visible to the device before twostep_iova_sync().
 * Only the first link (@offset 0) may start inside an IOVA granule, and
 * then @phys must have the offset @state->addr has. A link that fails part
 * way unmaps what it mapped.
 *
 * Context: any context.
 * Return: 0, or a negative errno listed at the top of this header, or the
 * IOMMU driver's error.
 */
int twostep_iova_link(struct device *dev, struct twostep_iova_state *state,
		      phys_addr_t phys, size_t offset, size_t size,
		      enum dma_data_direction dir, unsigned long attrs);

/**
 * twostep_iova_sync - make linked ranges visible to the device
 * @dev: device
 * @state: state filled in by twostep_iova_try_alloc()
 * @offset: offset into the IOVA range
 * @size: bytes to sync
 *
 * One IOTLB/write-buffer sync for the whole range, whatever was linked.
 *
 * Context: any context.
 * Return: 0, or a negative errno listed at the top of this header.
 */
int twostep_iova_sync(struct device *dev, struct twostep_iova_state *state,
		      size_t offset, size_t size);

/**
 * twostep_iova_unlink - unmap linked ranges from an IOVA range
 * @dev: device
 * @state: state filled in by twostep_iova_try_alloc()
 * @offset: offset into the IOVA range
 * @size: bytes to unmap
 * @dir: DMA direction used for the links
 * @attrs: DMA attributes used for the links
 *
 * The range must be made of whole links. It is unmapped with one gathered
 * IOTLB flush; when this returns the device can no longer reach it. The IOVA
 * range itself stays allocated.
 *
 * Context: any context.
 */
void twostep_iova_unlink(struct device *dev, struct twostep_iova_state *state,
			 size_t offset, size_t size,
			 enum dma_data_direction dir, unsigned long attrs);

/**
 * twostep_iova_destroy - unmap everything and free an IOVA range
 * @dev: device
 * @state: state filled in by twostep_iova_try_alloc()
 * @mapped_len: bytes linked from offset 0; 0 only frees the range
 * @dir: DMA direction used for the links
 * @attrs: DMA attributes used for the links
 *
 * Unmaps with one gathered IOTLB flush and frees the range. Links found past
 * @mapped_len are reported and unmapped too. @state is cleared.
 *
 * Context: any context.
 */
void twostep_iova_destroy(struct device *dev, struct twostep_iova_state *state,
			  size_t mapped_len, enum dma_data_direction dir,
			  unsigned long attrs);

#endif /* _TWOSTEP_H */

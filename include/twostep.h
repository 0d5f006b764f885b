/* SPDX-License-Identifier: GPL-2.0 */
/*
 * twostep: the "DMA two-step" IOVA API (allocate an IOVA range first, then
 * link and unlink physical ranges into it, one IOTLB sync per batch) for
 * kernels that do not provide dma_iova_*() themselves.
 *
 * The calls mirror upstream's dma_iova_*() one for one and need no set-up:
 * twostep_iova_try_alloc() works on any device whose DMA-API domain
 * translates (an IOMMU in DMA or DMA-FQ mode), whatever its DMA mask. The
 * IOVA comes from space twostep reserves from the DMA API's own allocator
 * of that domain, so the DMA API never hands out an address twostep uses,
 * for this device or any other device of its IOMMU group. Where the domain
 * does not translate (no IOMMU, identity or passthrough) try_alloc returns
 * false and the caller falls back to dma_map_page() or dma_map_sg(), as
 * with the upstream API. twostep_attach() is optional; twostep_detach(),
 * unbinding the driver or removing the device gives everything back. When
 * the group's domain changes (sysfs type, with no driver bound), the next
 * try_alloc() or attach() drops what twostep held in the old domain
 * without touching it and starts afresh, and the other calls refuse
 * states from before (-ENODEV). On 6.1 and 6.12 this holds also when
 * the new domain has the old one's address.
 *
 * Error codes returned by the int-returning calls:
 *   -ENODEV  twostep holds nothing for the device (never used, detached,
 *            or the device does not translate), or what it held is of a
 *            domain that was replaced
 *   -ENOENT  the state does not describe a live allocation of the device
 *            (never allocated, already freed or destroyed, a forged copy,
 *            or a stale copy: see struct twostep_iova_state)
 *   -EINVAL  malformed request (size 0, bad direction, misaligned link)
 *   -ERANGE  the range overflows or reaches past the allocation
 *   -EBUSY   the range overlaps a range that is already linked
 * The void calls report bad input with a rate-limited kernel log line and
 * count it in &struct twostep_stats.misuse. They never leave less unmapped
 * than upstream would, since the caller frees its pages next: unlink()
 * unmaps whatever its range covers inside the allocation (also when part
 * of the range is not linked or lies past the allocation: both counted),
 * and touches nothing outside the allocation. free() and destroy() of a
 * live state always unmap and free all of it, so that nothing stays
 * mapped or allocated: links left past @mapped_len (or any, for free())
 * and a @mapped_len past the allocation are bad input, counted, and
 * cleaned up all the same. A state of any bit pattern that is not a live
 * allocation of the device is refused (-ENOENT, or counted for the void
 * calls) without being dereferenced.
 *
 * What twostep reserves goes back: a chunk of the reservation that has
 * been wholly free for a second is returned to the DMA API (a device keeps
 * at most 4 MiB of such chunks, or what twostep_attach() reserved), and no
 * chunk takes more than 1/64 of what the device's DMA mask can address (or
 * 256 MiB) unless one range needs it.
 */
#ifndef _TWOSTEP_H
#define _TWOSTEP_H

#include <linux/bitops.h>
#include <linux/bits.h>
#include <linux/types.h>
#include <linux/dma-direction.h>

struct device;

/**
 * struct twostep_iova_state - an IOVA range handed out by twostep
 * @addr: device address of the first byte; carries the offset of @phys
 *        inside an IOVA granule as given to twostep_iova_try_alloc()
 * @__size: private, use twostep_iova_size(): the size in bits 0-47 and the
 *          range's slot number in bits 48-62
 *
 * Owned by the caller, filled in by twostep_iova_try_alloc() and cleared
 * again by twostep_iova_free() and twostep_iova_destroy(). A copy of a
 * state taken before its range was freed ("stale") is refused with
 * -ENOENT, also when a later allocation got the same address and size:
 * slots are handed out round robin among a device's 32768, so a stale copy
 * could only match once its slot came round again, at least 32768 - L
 * allocations later (L: the device's live allocations then). The round
 * robin goes on across twostep_detach() and driver unbinding, so a state
 * from before them is no more likely to match; it restarts only when the
 * device is removed or twostep is unloaded.
 *
 * Code that reads @__size directly (wrong with upstream's API too) sees
 * the slot number above the size.
 */
struct twostep_iova_state {
	dma_addr_t addr;
	u64 __size;
};

/* Sizes with this bit set are refused, as upstream reserves it. */
#define TWOSTEP_IOVA_SIZE_RESERVED	BIT_ULL(63)
/* The bits of &twostep_iova_state.__size that hold the size. */
#define TWOSTEP_IOVA_SIZE_MASK		GENMASK_ULL(47, 0)
/* The largest range twostep_iova_try_alloc() serves: 64 GiB. */
#define TWOSTEP_IOVA_MAX_SIZE		BIT_ULL(36)

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
	return state->__size & TWOSTEP_IOVA_SIZE_MASK;
}

/**
 * struct twostep_stats - live figures of one device
 * @reserved: bytes of IOVA reserved from the DMA API for the device now
 *            (it shrinks when wholly free chunks are given back)
 * @chunks: number of reserved chunks
 * @granule: IOVA granule in bytes
 * @live_allocs: IOVA ranges allocated and not yet freed
 * @linked_granules: granules currently mapped through twostep
 * @misuse: calls with bad input for this device: refused, or (free and
 *          destroy) carried out in full all the same
 * @misuse_all: calls with bad input since twostep was loaded, for any
 *              device or none (NULL devices included)
 * @deferred: try_alloc() calls that found no space in a context that may
 *            not sleep, returned false and left the growth to a worker
 * @grow_ns: how long the last growth of the reservation took
 */
struct twostep_stats {
	u64 reserved;
	unsigned int chunks;
	unsigned long granule;
	unsigned long live_allocs;
	unsigned long linked_granules;
	unsigned long misuse;
	unsigned long misuse_all;
	unsigned long deferred;
	u64 grow_ns;
};

/**
 * enum twostep_fail - what twostep_debug_fail() can make fail
 * @TWOSTEP_FAIL_MAP: one granule-sized IOMMU page-table insertion of a link
 * @TWOSTEP_FAIL_IOVA: the IOVA allocation of twostep_iova_try_alloc()
 * @TWOSTEP_FAIL_SYNC: the IOMMU driver's sync in twostep_iova_sync(), as if
 *                     the driver had returned -EIO
 * @TWOSTEP_FAIL_RECORD: the record of a link of several granules (what an
 *                       unlink needs to cut it), as if memory had run out:
 *                       the link is then mapped so that any cut works
 */
enum twostep_fail {
	TWOSTEP_FAIL_MAP,
	TWOSTEP_FAIL_IOVA,
	TWOSTEP_FAIL_SYNC,
	TWOSTEP_FAIL_RECORD,
};

/**
 * twostep_attach - reserve IOVA for a device up front (optional)
 * @dev: device whose DMA-API domain is used
 * @reserve: bytes to reserve now (0: none, grow on demand)
 * @chunk: bytes to reserve each time the reservation grows (0: default;
 *         rounded up to twostep's reservation block, 2 MiB at most)
 *
 * Not needed before twostep_iova_try_alloc(), which sets a device up by
 * itself. Use it to take the cost of the first reservation out of the I/O
 * path, or to tune how the reservation grows. What it reserves is kept
 * even while wholly free (other chunks go back after a second's idle).
 *
 * Context: process context, may sleep.
 * Return: 0 on success; -EINVAL for a NULL device; -ENODEV when the device
 * has no translating DMA-API domain (no IOMMU, identity or passthrough);
 * -EOPNOTSUPP for a device twostep cannot serve (non-coherent, untrusted,
 * granule above PAGE_SIZE); -EBUSY when the device is attached already;
 * -ENOSPC when the DMA API has no room for @reserve; -ENOMEM.
 */
int twostep_attach(struct device *dev, u64 reserve, u64 chunk);

/**
 * twostep_detach - give back everything twostep holds for a device
 * @dev: device
 *
 * Ranges still allocated are reported once, unmapped and freed; the
 * reservation is returned to the DMA API. The next try_alloc() starts
 * afresh. Unbinding the device's driver or removing the device does the
 * same (PCI and platform devices).
 *
 * Context: process context, may sleep. Calls for @dev racing with it are
 * refused cleanly (-ENODEV or -ENOENT) or complete before it; states they
 * hold are stale afterwards.
 */
void twostep_detach(struct device *dev);

/**
 * twostep_get_stats - read the live figures of a device
 * @dev: device
 * @stats: filled in on success
 *
 * Return: 0, -EINVAL for a NULL @stats, or -ENODEV when twostep holds
 * nothing for @dev.
 */
int twostep_get_stats(struct device *dev, struct twostep_stats *stats);

/**
 * twostep_get_chunk - where the reservation of a device lies
 * @dev: device
 * @i: index of the chunk, from 0
 * @start: first device address of the chunk
 * @size: size of the chunk in bytes
 *
 * For diagnostics and tests: every IOVA range of @dev lies inside one
 * chunk, and the DMA API never hands out an address inside a chunk.
 *
 * Return: 0, -ENODEV as twostep_get_stats(), or -ENOENT past the last chunk.
 */
int twostep_get_chunk(struct device *dev, unsigned int i, u64 *start,
		      u64 *size);

/**
 * twostep_debug_fail - fault injection for tests
 * @what: which operation fails
 * @nth: the nth such operation from now fails (1: the next one); 0 disarms
 *
 * While a map failure is armed, links map one granule at a time so that a
 * failure can strike in the middle of a link. The failure is reported to
 * the caller as -ENOMEM (link), false (try_alloc) or -EIO (sync).
 */
void twostep_debug_fail(enum twostep_fail what, unsigned int nth);

/**
 * twostep_debug_poison_check - writes to freed range records, for tests
 *
 * With twostep's module parameter poison=1, the record of a range is
 * filled with a poison pattern when it is freed (once no call can see it
 * any more) and kept from reuse among the last 1024 freed: a call that
 * reads a freed record finds the pattern, one that writes it changes it.
 * This frees every record whose free is under way, checks each one kept
 * and lets them go.
 *
 * Context: process context, may sleep.
 * Return: the records found written after their free since twostep was
 * loaded (each is also reported in the kernel log), or -EOPNOTSUPP
 * without poison=1.
 */
long twostep_debug_poison_check(void);

/**
 * enum twostep_finding - what the checker (module parameter debug=1) reports
 * @TWOSTEP_FINDING_STALE_STATE: a call with a state whose range this device
 *                               freed already
 * @TWOSTEP_FINDING_FOREIGN_STATE: a call with a state that holds (or held)
 *                                 a range of another device
 * @TWOSTEP_FINDING_NOT_LINKED: unlink of a span with nothing linked in it,
 *                              or destroy with a @mapped_len over nothing
 *                              linked
 * @TWOSTEP_FINDING_UNSYNCED_DESTROY: destroy of links never synced, when no
 *                                    link of the range failed since
 * @TWOSTEP_FINDING_DIR_MISMATCH: unlink or destroy with a direction none of
 *                                the range's links used
 * @TWOSTEP_FINDING_LEAK: a range still live when the driver unbinds, the
 *                        device goes, twostep_detach() or unload
 * @TWOSTEP_FINDING_FAILED_LINK_LEAK: as @TWOSTEP_FINDING_LEAK, for a range
 *                                    one of whose links failed
 * @TWOSTEP_FINDING_KINDS: number of kinds; to twostep_debug_findings(): all
 */
enum twostep_finding {
	TWOSTEP_FINDING_STALE_STATE,
	TWOSTEP_FINDING_FOREIGN_STATE,
	TWOSTEP_FINDING_NOT_LINKED,
	TWOSTEP_FINDING_UNSYNCED_DESTROY,
	TWOSTEP_FINDING_DIR_MISMATCH,
	TWOSTEP_FINDING_LEAK,
	TWOSTEP_FINDING_FAILED_LINK_LEAK,
	TWOSTEP_FINDING_KINDS,
};

/**
 * twostep_debug_findings - what the checker found
 * @dev: count the findings of this device only; NULL: of every device
 * @kind: count this kind only; %TWOSTEP_FINDING_KINDS: every kind
 * @site: NULL, or filled in with the call site of the last such finding
 *        as "%pS" printed it when it was found (for a leak: the range's
 *        try_alloc); "" when there is none
 * @len: size of @site
 *
 * The checker runs while twostep's module parameter debug is 1 (at load or
 * later through /sys/module/twostep/parameters/debug). Findings are kept
 * until twostep is unloaded or "reset" is written to
 * /sys/kernel/debug/twostep/checker, whose table lists them all; a device
 * is told apart by its name.
 *
 * Context: any context.
 * Return: the number of findings; those past the table's capacity are
 * counted only where @dev is NULL.
 */
unsigned long twostep_debug_findings(struct device *dev,
				     enum twostep_finding kind, char *site,
				     size_t len);

/**
 * twostep_debug_set - turn the checker on or off
 * @on: true: on, as the module parameter debug=1
 *
 * The same as writing /sys/module/twostep/parameters/debug: for a test
 * that seeds bugs and must not depend on how twostep was loaded. Ranges
 * allocated while the checker was off are not tracked.
 *
 * Context: process context, may sleep.
 * Return: whether the checker was on.
 */
bool twostep_debug_set(bool on);

/**
 * twostep_iova_try_alloc - try to allocate an IOVA range for a device
 * @dev: device
 * @state: IOVA state, zeroed first and filled in on success
 * @phys: only its offset inside an IOVA granule is used: @state->addr gets
 *        the same low bits. Pass 0 for granule-aligned transfers.
 * @size: size of the range in bytes
 *
 * The first call for a device sets it up and reserves IOVA from the DMA
 * API; later calls grow the reservation when it is full. Both may sleep,
 * and do so only when the caller may: in atomic context (IRQs or
 * preemption off, a spinlock or the RCU read lock held) a call that would
 * have to reserve returns false and leaves the growth to a worker, so that
 * a later call succeeds. On a kernel built without CONFIG_PREEMPTION
 * twostep cannot tell, and always leaves growth to the worker (use
 * twostep_attach() to reserve up front there).
 *
 * A growth reserves at least @size bytes (rounded up to 2 MiB), and a
 * growth a call in atomic context left to the worker reserves just what it
 * asked for. Growth runs in a memalloc_noio scope, and the other
 * allocations of a call that may sleep use GFP_NOIO: try_alloc may enter
 * reclaim that does no I/O and wait for the DMA API's own locks, never for
 * I/O, so it may be called from writeback, swap and dma-fence signalling
 * paths. The range is aligned to its size rounded up to a power of two,
 * as upstream aligns it: it never crosses a boundary of that size.
 *
 * Context: any context.
 * Return: true when the range is allocated; false when the caller must use
 * the regular DMA API instead (no translating domain, size 0, size with bit
 * 63 set, more than TWOSTEP_IOVA_MAX_SIZE bytes, no space under the
 * device's DMA mask, no space yet in atomic context, or 32768 ranges of
 * the device live already).
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
 * Ranges still linked are reported (counted in &twostep_stats.misuse),
 * unmapped, and the range freed anyway, so the device is never left able
 * to reach memory through a freed range. The range is marked dead before
 * it is torn down: a link or unlink racing with it (the caller's bug)
 * fails with -ENOENT or is waited for, and leaves nothing mapped.
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
 * @attrs: DMA attributes (see below)
 *
 * The mapping is not visible to the device before twostep_iova_sync().
 * Only the first link (@offset 0) may start inside an IOVA granule, and
 * then @phys must have the offset @state->addr has. Physically contiguous
 * ranges are mapped with the largest page sizes the domain supports. A
 * link that fails part way unmaps what it mapped.
 *
 * @attrs as upstream's: DMA_ATTR_PRIVILEGED maps for privileged accesses
 * only; TWOSTEP_DMA_ATTR_MMIO (upstream's DMA_ATTR_MMIO) says @phys is not
 * RAM but, say, a peer device's BAR reached through the host bridge: the
 * link is mapped with IOMMU_MMIO and without IOMMU_CACHE, and @phys is
 * never touched by the CPU; TWOSTEP_DMA_ATTR_REQUIRE_COHERENT (upstream's
 * DMA_ATTR_REQUIRE_COHERENT) is always met, since twostep gives ranges only
 * to devices that need neither CPU syncs nor bouncing. DMA_ATTR_SKIP_CPU_SYNC,
 * DMA_ATTR_WEAK_ORDERING and DMA_ATTR_NO_WARN are accepted and change
 * nothing. Any other bit is refused with -EINVAL, not ignored.
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
 * Return: 0, a negative errno listed at the top of this header, or the
 * IOMMU driver's error from its sync.
 */
int twostep_iova_sync(struct device *dev, struct twostep_iova_state *state,
		      size_t offset, size_t size);

/**
 * twostep_iova_unlink - unmap linked ranges from an IOVA range
 * @dev: device
 * @state: state filled in by twostep_iova_try_alloc()
 * @offset: offset into the IOVA range
 * @size: bytes to unmap
 * @dir: DMA direction used for the links; not needed to unmap, any value
 *       is accepted
 * @attrs: DMA attributes used for the links
 *
 * Every granule the range touches is unmapped, whatever is or is not linked
 * there, with one gathered IOTLB flush; when this returns the device can
 * no longer reach any of it. A link that crosses an end of the range keeps
 * its part outside mapped, to the same pages, and goes on as a link of its
 * own (where it was mapped with a page larger than a granule, that page
 * is split: the link is unmapped and its outside part mapped again). A
 * range that is not wholly linked, or reaches past the allocation, is
 * reported and counted as bad input, and what it covers inside the
 * allocation is unmapped all the same. The IOVA range itself stays
 * allocated.
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
 * @dir: DMA direction used for the links; any value is accepted
 * @attrs: DMA attributes used for the links
 *
 * Unmaps with one gathered IOTLB flush and frees the range. Links found
 * past @mapped_len, and a @mapped_len past the allocation, are reported
 * and counted as bad input, and the whole range is unmapped and freed all
 * the same. @state is cleared.
 *
 * In a lazy domain (%IOMMU_DOMAIN_DMA_FQ, iommu.strict=0) the flush is
 * left to a flush queue, as the DMA API's own unmaps there: one IOTLB
 * flush for up to 256 destroys of a CPU, at most 10 ms later. Until then
 * the device may still reach the pages through its IOTLB, as after a lazy
 * dma_unmap_page(); the range's IOVA is handed out again only after that
 * flush.
 *
 * Context: any context.
 */
void twostep_iova_destroy(struct device *dev, struct twostep_iova_state *state,
			  size_t mapped_len, enum dma_data_direction dir,
			  unsigned long attrs);

/**
 * struct twostep_hmm_dma_map - DMA mapping of a range mirrored with HMM
 * @state: the one IOVA range of the map, when the device translates
 *         (twostep_use_iova()); unused otherwise
 * @pfn_list: one entry per @dma_entry_size bytes: pass it to
 *            hmm_range_fault() as &hmm_range.hmm_pfns
 * @dma_list: the dma_map_page() address of each mapped entry when @state
 *            holds no range (no IOMMU, identity or passthrough); NULL
 *            otherwise
 * @dma_entry_size: bytes mapped per entry, PAGE_SIZE or a larger power of
 *                  two
 * @__nr: private: number of entries
 * @__mapped: private: one bit per mapped entry. Upstream keeps it as a
 *            flag in @pfn_list that hmm_range_fault() preserves; the
 *            kernels twostep serves overwrite every flag bit there, so
 *            the mapped state lives here, where nothing else writes.
 *
 * Filled in by twostep_hmm_dma_map_alloc(), cleared by
 * twostep_hmm_dma_map_free(). The caller serialises calls on the same
 * entries (as with upstream's hmm_dma_*: the driver's mutex that also
 * guards the mmu_interval_read_retry() check).
 */
struct twostep_hmm_dma_map {
	struct twostep_iova_state state;
	unsigned long *pfn_list;
	dma_addr_t *dma_list;
	size_t dma_entry_size;
	size_t __nr;
	unsigned long *__mapped;
};

/**
 * twostep_hmm_dma_map_alloc - set up the DMA mapping of a mirrored range
 * @dev: device
 * @map: filled in; zeroed first
 * @nr_entries: pages (PAGE_SIZE) in the range, as upstream counts them
 * @dma_entry_size: bytes per entry: PAGE_SIZE or a larger power of two
 *
 * As upstream's hmm_dma_map_alloc(): one IOVA range of @nr_entries *
 * PAGE_SIZE bytes when the device translates, otherwise a @dma_list for
 * dma_map_page() of each entry. The map has @nr_entries * PAGE_SIZE /
 * @dma_entry_size entries. Pages are mapped as the
 * CPU finds them, with no ownership hand-over, so devices that need CPU
 * cache syncs or bounce buffering are refused.
 *
 * Context: process context, may sleep.
 * Return: 0; -EINVAL for a NULL device or map, no entries, a bad entry
 * size or a range whose size overflows; -EOPNOTSUPP for a device that
 * needs CPU syncs (non-coherent, bounced through swiotlb, untrusted) or is
 * addressing-limited; -ENOMEM.
 */
int twostep_hmm_dma_map_alloc(struct device *dev,
			      struct twostep_hmm_dma_map *map,
			      size_t nr_entries, size_t dma_entry_size);

/**
 * twostep_hmm_dma_map_free - tear down what twostep_hmm_dma_map_alloc() set up
 * @dev: device
 * @map: map filled in by twostep_hmm_dma_map_alloc()
 *
 * Entries still mapped are bad input: reported once, unmapped and counted
 * like any refused call, so that nothing stays mapped or allocated. @map
 * is cleared.
 *
 * Context: process context, may sleep.
 */
void twostep_hmm_dma_map_free(struct device *dev,
			      struct twostep_hmm_dma_map *map);

/**
 * twostep_hmm_dma_map_pfn - map one entry of @map->pfn_list for the device
 * @dev: device
 * @map: map filled in by twostep_hmm_dma_map_alloc()
 * @idx: entry
 *
 * As upstream's hmm_dma_map_pfn() (without P2P): the entry must hold a
 * valid pfn from hmm_range_fault(), of ordinary memory. It is linked into
 * the map's IOVA range read-write and synced, or mapped with
 * dma_map_page(). An entry mapped already is not mapped again: its
 * address is returned, whatever hmm_range_fault() has since written into
 * @map->pfn_list. The caller must unmap an entry before its page can
 * change (from its mmu_interval_notifier's invalidate callback).
 *
 * Context: any context for the IOVA path; as dma_map_page() otherwise.
 * Return: the device address of the entry, or DMA_MAPPING_ERROR (bad
 * index, no valid pfn, a device page, mapping failed).
 */
dma_addr_t twostep_hmm_dma_map_pfn(struct device *dev,
				   struct twostep_hmm_dma_map *map,
				   size_t idx);

/**
 * twostep_hmm_dma_link_pfn - map one entry without making it visible yet
 * @dev: device
 * @map: map filled in by twostep_hmm_dma_map_alloc()
 * @idx: entry
 *
 * twostep_hmm_dma_map_pfn() without the IOTLB sync: map many entries, then
 * call twostep_hmm_dma_sync() once before the device uses them.
 *
 * Context: as twostep_hmm_dma_map_pfn().
 * Return: as twostep_hmm_dma_map_pfn().
 */
dma_addr_t twostep_hmm_dma_link_pfn(struct device *dev,
				    struct twostep_hmm_dma_map *map,
				    size_t idx);

/**
 * twostep_hmm_dma_sync - make entries linked by twostep_hmm_dma_link_pfn() visible
 * @dev: device
 * @map: map filled in by twostep_hmm_dma_map_alloc()
 * @first: first entry
 * @count: entries
 *
 * One sync for all of them; nothing to do without an IOVA range.
 *
 * Context: any context.
 * Return: 0, -EINVAL or -ERANGE for entries outside the map, or the error
 * of twostep_iova_sync().
 */
int twostep_hmm_dma_sync(struct device *dev, struct twostep_hmm_dma_map *map,
			 size_t first, size_t count);

/**
 * twostep_hmm_dma_unmap_pfn - unmap one entry
 * @dev: device
 * @map: map filled in by twostep_hmm_dma_map_alloc()
 * @idx: entry
 *
 * As upstream's hmm_dma_unmap_pfn(): one IOTLB flush per entry. Unmapping
 * many entries at once is cheaper with twostep_hmm_dma_unmap_range().
 *
 * Context: any context for the IOVA path; as dma_unmap_page() otherwise.
 * Return: true when the entry was mapped and is unmapped now; false when
 * it was not mapped (or @idx is out of range).
 */
bool twostep_hmm_dma_unmap_pfn(struct device *dev,
			       struct twostep_hmm_dma_map *map, size_t idx);

/**
 * twostep_hmm_dma_unmap_range - unmap the mapped entries of a range
 * @dev: device
 * @map: map filled in by twostep_hmm_dma_map_alloc()
 * @first: first entry
 * @count: entries
 *
 * For an invalidate callback: every mapped entry in the range is unlinked
 * and the IOMMU's TLB flushed once for all of them, where upstream's
 * per-entry hmm_dma_unmap_pfn() flushes once per entry. When this returns
 * the device can reach none of them. Without an IOVA range each entry is
 * unmapped with dma_unmap_page().
 *
 * Context: any context for the IOVA path; as dma_unmap_page() otherwise.
 * Return: the number of entries unmapped.
 */
size_t twostep_hmm_dma_unmap_range(struct device *dev,
				   struct twostep_hmm_dma_map *map,
				   size_t first, size_t count);

/**
 * twostep_hmm_dma_mapped - is an entry mapped?
 * @map: map filled in by twostep_hmm_dma_map_alloc()
 * @idx: entry
 *
 * Return: true between a successful map or link of the entry and its unmap.
 */
static inline bool twostep_hmm_dma_mapped(const struct twostep_hmm_dma_map *map,
					  size_t idx)
{
	return idx < map->__nr && test_bit(idx, map->__mapped);
}

/*
 * Upstream's DMA attributes that the kernels twostep builds for lack, with
 * upstream's values (Linux 6.18 and 7.0); twostep-dma.h gives them
 * upstream's names where the kernel has none.
 */
#define TWOSTEP_DMA_ATTR_MMIO			BIT(10)
#define TWOSTEP_DMA_ATTR_REQUIRE_COHERENT	BIT(12)

/**
 * twostep_dma_map_phys - map a physical range for DMA, the classic way
 * @dev: device
 * @phys: physical address: RAM, or with TWOSTEP_DMA_ATTR_MMIO a peer's BAR
 * @size: bytes
 * @dir: DMA direction
 * @attrs: DMA attributes
 *
 * Upstream's dma_map_phys() (Linux 6.18) on kernels without it, for the
 * fallback path of a driver whose twostep_iova_try_alloc() said no. RAM is
 * mapped as dma_map_page_attrs() maps it; with TWOSTEP_DMA_ATTR_MMIO the
 * range is mapped as dma_map_resource() maps it (IOMMU_MMIO behind an
 * IOMMU, the physical address as is without one) and never bounced or
 * synced. As upstream, the call fails rather than bounce through swiotlb
 * or need CPU syncs when @attrs holds TWOSTEP_DMA_ATTR_REQUIRE_COHERENT
 * (a non-coherent device, forced bouncing, an untrusted device with an
 * unaligned range, a range the device cannot reach directly), and an MMIO
 * range is never bounced. Attributes twostep does not know are refused.
 *
 * Context: as dma_map_page_attrs().
 * Return: the DMA address, or DMA_MAPPING_ERROR (test it with
 * dma_mapping_error()).
 */
dma_addr_t twostep_dma_map_phys(struct device *dev, phys_addr_t phys,
				size_t size, enum dma_data_direction dir,
				unsigned long attrs);

/**
 * twostep_dma_unmap_phys - unmap what twostep_dma_map_phys() mapped
 * @dev: device
 * @addr: DMA address twostep_dma_map_phys() returned
 * @size: bytes, as mapped
 * @dir: DMA direction, as mapped
 * @attrs: DMA attributes, as mapped (TWOSTEP_DMA_ATTR_MMIO must match)
 *
 * Context: as dma_unmap_page_attrs().
 */
void twostep_dma_unmap_phys(struct device *dev, dma_addr_t addr, size_t size,
			    enum dma_data_direction dir, unsigned long attrs);

/**
 * twostep_dma_need_unmap - must the device's classic mappings be unmapped?
 * @dev: device
 *
 * Upstream's dma_need_unmap() on kernels without it: false only when
 * dma_unmap_*() of the device's mappings would do nothing (no IOMMU
 * translation, no DMA ops, coherent, no swiotlb, no DMA-API debugging), so
 * a driver may skip keeping the addresses it would unmap.
 *
 * Return: true when the driver must unmap what it maps.
 */
bool twostep_dma_need_unmap(struct device *dev);

#endif /* _TWOSTEP_H */

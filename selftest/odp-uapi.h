/* SPDX-License-Identifier: GPL-2.0 */
/*
 * twostep self-test: the interface of /dev/twostep_odp, shared by the
 * driver (odp.c) and the guest program that drives it (qemu/odp-test.c).
 *
 * A process registers a range of its own address space as a region and
 * asks the edu device to read or write at an offset of it; the driver
 * faults the pages in with hmm_range_fault(), maps them through one
 * twostep_hmm_dma_map per region and unmaps what an MMU notifier
 * invalidates.
 */
#ifndef _TWOSTEP_ODP_UAPI_H
#define _TWOSTEP_ODP_UAPI_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define TS_ODP_MAX_REGIONS	64
#define TS_ODP_MAX_REGION	(64UL << 20)
#define TS_ODP_MAX_XFER		0x100000

/* Register [addr, addr + len) (page aligned); @id is returned. */
struct ts_odp_reg {
	__u64 addr;
	__u64 len;
	__u32 id;
	__u32 pad;
};

/* The device writes into the region (else it reads from it). */
#define TS_ODP_XFER_WRITE	0x1

/*
 * Move @len bytes between the region at @offset and the buffer at @buf:
 * the device reads the region into @buf, or writes @buf into the region.
 */
struct ts_odp_xfer {
	__u32 id;
	__u32 flags;
	__u64 offset;
	__u64 len;
	__u64 buf;
};

/* Figures of the device since it was loaded. */
struct ts_odp_stats {
	__u64 faults;		/* hmm_range_fault() calls */
	__u64 fault_retries;	/* of them, retried (-EBUSY or seq changed) */
	__u64 pages_mapped;	/* entries newly mapped */
	__u64 syncs;		/* IOTLB syncs after mapping */
	__u64 invalidations;	/* invalidate callbacks on a region */
	__u64 pages_unmapped;	/* entries unmapped by them */
	__u64 dmas;		/* edu transfers */
	__u64 iova_regions;	/* regions served by one IOVA range */
	__u64 list_regions;	/* regions served by dma_list */
	__u64 late_irqs;	/* transfers found done before their IRQ */
};

/* How invalidations unmap: one range call, or entry by entry. */
#define TS_ODP_UNMAP_RANGE	0
#define TS_ODP_UNMAP_PER_ENTRY	1

#define TS_ODP_REGISTER		_IOWR('T', 1, struct ts_odp_reg)
#define TS_ODP_UNREGISTER	_IOW('T', 2, __u32)
#define TS_ODP_XFER		_IOW('T', 3, struct ts_odp_xfer)
#define TS_ODP_STATS		_IOR('T', 4, struct ts_odp_stats)
#define TS_ODP_UNMAP_MODE	_IOW('T', 5, __u32)

#endif /* _TWOSTEP_ODP_UAPI_H */

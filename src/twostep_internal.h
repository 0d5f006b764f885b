/* SPDX-License-Identifier: GPL-2.0 */
/*
 * twostep: private structures shared by the context registry (core.c) and
 * the IOVA calls (iova.c).
 */
#ifndef _TWOSTEP_INTERNAL_H
#define _TWOSTEP_INTERNAL_H

#include <linux/atomic.h>
#include <linux/iommu.h>
#include <linux/iova.h>
#include <linux/list.h>
#include <linux/rcupdate.h>
#include <linux/spinlock.h>
#include <linux/xarray.h>

#include "twostep.h"

/**
 * struct twostep_ctx - one attached device
 * @node: entry in the global context list (RCU)
 * @dev: the device (a reference is held)
 * @domain: the device's own IOMMU domain
 * @iovad: private IOVA allocator covering only the window
 * @shift: log2 of the IOVA granule
 * @win_start: first address of the window
 * @win_end: last address of the window (inclusive)
 * @limit_pfn: last granule alloc_iova() may hand out (inclusive)
 * @prot_extra: IOMMU_* flags added to every mapping (cache coherency)
 * @allocs: live allocations indexed by @limit_pfn minus their base granule;
 *          looked up under RCU,
 *          changed under its own lock with interrupts off
 * @live_allocs: number of entries in @allocs
 * @linked_granules: granules mapped through this context
 * @misuse: refused calls
 */
struct twostep_ctx {
	struct list_head node;
	struct device *dev;
	struct iommu_domain *domain;
	struct iova_domain iovad;
	unsigned int shift;
	dma_addr_t win_start;
	dma_addr_t win_end;
	unsigned long limit_pfn;
	int prot_extra;
	struct xarray allocs;
	atomic_long_t live_allocs;
	atomic_long_t linked_granules;
	atomic_long_t misuse;
};

/**
 * struct twostep_alloc - one live IOVA range
 * @rcu: frees it after lookups that may still see it are done
 * @iova: the range in the private allocator
 * @base: granule-aligned first address of the range
 * @addr: address handed to the caller (@base plus the phys offset)
 * @size: size the caller asked for
 * @nr: number of granules in the range
 * @linked: one bit per granule: mapped (changed with atomic word ops)
 * @head: one bit per granule: a link starts here (atomic word ops)
 */
struct twostep_alloc {
	struct rcu_head rcu;
	struct iova *iova;
	dma_addr_t base;
	dma_addr_t addr;
	u64 size;
	unsigned long nr;
	unsigned long *linked;
	unsigned long *head;
};

extern atomic_t twostep_live_allocs;
extern atomic_t twostep_fail_countdown[2];

struct twostep_ctx *twostep_ctx_find(struct device *dev);
void twostep_ctx_release_all(struct twostep_ctx *ctx);
bool twostep_should_fail(enum twostep_fail what);
void twostep_misuse(struct twostep_ctx *ctx, struct device *dev,
		    const char *fmt, ...) __printf(3, 4);

#endif /* _TWOSTEP_INTERNAL_H */

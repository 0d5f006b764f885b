/* SPDX-License-Identifier: GPL-2.0 */
/*
 * twostep: the chunks of a context: growth, the private allocator inside
 * each chunk and the give-back worker (chunk.c). Calls reserve.c and
 * counters.c; used by ctx.c.
 */
#ifndef _TWOSTEP_CHUNK_H
#define _TWOSTEP_CHUNK_H

#include <linux/gfp.h>
#include <linux/sizes.h>
#include <linux/types.h>

#define TWOSTEP_CHUNK_FIRST	SZ_4M
#define TWOSTEP_CHUNK_MAX	SZ_256M
/* Wholly free chunks a device keeps, in bytes: the first growth's size. */
#define TWOSTEP_KEEP_FREE	SZ_4M

struct twostep_chunk;
struct twostep_ctx;
struct work_struct;
struct iommu_iotlb_gather;

bool twostep_has_room(struct twostep_ctx *ctx, unsigned long nr);
int twostep_ctx_grow(struct twostep_ctx *ctx, u64 need, unsigned int seen,
		     bool exact);
void twostep_grow_work(struct work_struct *work);
void twostep_shrink_work(struct work_struct *work);
void twostep_chunk_put(struct twostep_ctx *ctx, struct twostep_chunk *c);
unsigned long twostep_iova_get(struct twostep_ctx *ctx, unsigned long nr,
			       bool may_sleep, struct twostep_chunk **chunkp);
void twostep_iova_put(struct twostep_ctx *ctx, struct twostep_chunk *c,
		      unsigned long pfn, unsigned long nr);
void twostep_fq_init(struct twostep_ctx *ctx, gfp_t gfp);
void twostep_fq_exit(struct twostep_ctx *ctx);
void twostep_fq_queue(struct twostep_ctx *ctx, struct twostep_chunk *c,
		      unsigned long pfn, unsigned long nr,
		      struct iommu_iotlb_gather *gather);

#endif /* _TWOSTEP_CHUNK_H */

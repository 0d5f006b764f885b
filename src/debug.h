/* SPDX-License-Identifier: GPL-2.0 */
/*
 * twostep: the checker of the two-step API (debug.c), on while the module
 * parameter debug is 1. The IOVA calls (iova.c) and the teardown of a
 * context (ctx.c) call the hooks below, through twostep_dbg(): while the
 * checker is off each hook costs one static branch, a NOP.
 */
#ifndef _TWOSTEP_DEBUG_H
#define _TWOSTEP_DEBUG_H

#include <linux/dma-direction.h>
#include <linux/jump_label.h>
#include <linux/types.h>

#include "twostep.h"

struct device;
struct twostep_alloc;
struct twostep_ctx;

DECLARE_STATIC_KEY_FALSE(twostep_debug_on);

/* Call twostep_dbg_<hook>(...) only while the checker is on. */
#define twostep_dbg(hook, ...)						\
	do {								\
		if (static_branch_unlikely(&twostep_debug_on))		\
			twostep_dbg_##hook(__VA_ARGS__);		\
	} while (0)

void twostep_dbg_alloc(struct twostep_alloc *a, unsigned long ip);
void twostep_dbg_link(struct twostep_alloc *a, int ret,
		      enum dma_data_direction dir, unsigned long ip);
void twostep_dbg_sync(struct twostep_alloc *a);
void twostep_dbg_unlink(struct twostep_ctx *ctx, struct twostep_alloc *a,
			unsigned long linked, enum dma_data_direction dir,
			unsigned long ip);
void twostep_dbg_finish(struct twostep_ctx *ctx, struct twostep_alloc *a,
			size_t mapped_len, enum dma_data_direction dir,
			bool destroy, unsigned long ip);
void twostep_dbg_state(struct device *dev,
		       const struct twostep_iova_state *state,
		       const char *call, unsigned long ip);
void twostep_dbg_leak(struct twostep_ctx *ctx, struct twostep_alloc *a,
		      const char *why);

/* Not behind the static branch: records outlive a checker turned off. */
void twostep_dbg_free(struct twostep_alloc *a);
void twostep_debug_init(void);
void twostep_debug_exit(void);

#endif /* _TWOSTEP_DEBUG_H */

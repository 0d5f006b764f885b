/* SPDX-License-Identifier: GPL-2.0 */
/*
 * twostep: the slot table of a context and the slot hints (slot.c). Calls
 * nothing of twostep's; used by ctx.c and module.c.
 */
#ifndef _TWOSTEP_SLOT_H
#define _TWOSTEP_SLOT_H

#include <linux/gfp.h>

#include "ctx.h"

struct device;

int twostep_slot_get(struct twostep_ctx *ctx, gfp_t gfp);
void twostep_slot_put(struct twostep_ctx *ctx, unsigned int slot);
unsigned long twostep_slots_used(struct twostep_ctx *ctx);
void twostep_slot_hint_load(struct twostep_ctx *ctx);
void twostep_slot_hint_keep(struct twostep_ctx *ctx);
void twostep_slot_hint_drop(struct device *dev);
void twostep_slot_hints_exit(void);

static inline struct twostep_alloc __rcu **
twostep_slot_ptr(struct twostep_ctx *ctx, unsigned int slot)
{
	return &ctx->slot_page[slot / TWOSTEP_SLOTS_PER_PAGE]
			      [slot % TWOSTEP_SLOTS_PER_PAGE];
}

#endif /* _TWOSTEP_SLOT_H */

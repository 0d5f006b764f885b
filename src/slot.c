// SPDX-License-Identifier: GPL-2.0
/*
 * twostep: the slot table of a context. Every live allocation of a device
 * has a slot number, handed out round robin without a lock; its pointer
 * lives in pages of the table allocated on demand. The round robin goes
 * on across the contexts of one device (the slot hints). Calls nothing of
 * twostep's.
 */
#include <linux/bitmap.h>
#include <linux/device.h>
#include <linux/gfp.h>
#include <linux/xarray.h>

#include "ctx.h"
#include "slot.h"

/*
 * Where the round robin of slot numbers stands for each device whose
 * context was given back (detach, unbind), so that its next context goes
 * on from there: a state from before is no more likely to match a new
 * allocation than within one context. Dropped when the device goes away.
 */
static DEFINE_XARRAY(twostep_slot_hints);

/* After its pointer was cleared: the slot may be taken again. */
void twostep_slot_put(struct twostep_ctx *ctx, unsigned int slot)
{
	clear_bit_unlock(slot, ctx->slot_used);
}

/* Live allocations of @ctx: its slots taken. */
unsigned long twostep_slots_used(struct twostep_ctx *ctx)
{
	return bitmap_weight(ctx->slot_used, TWOSTEP_SLOTS);
}

/*
 * A free slot, its page of pointers allocated, or -1 when the device has
 * TWOSTEP_SLOTS live allocations (or no memory for the page). No lock: a
 * slot is taken with one atomic test-and-set; a caller that lost the race
 * for it looks further on, a bounded number of times.
 */
int twostep_slot_get(struct twostep_ctx *ctx, gfp_t gfp)
{
	struct twostep_alloc __rcu **page, **fresh;
	unsigned int slot, from = READ_ONCE(ctx->slot_next), tries;

	/* the round robin's next slot is free but for a wrap: take it */
	slot = from % TWOSTEP_SLOTS;
	if (!test_bit(slot, ctx->slot_used) &&
	    !test_and_set_bit_lock(slot, ctx->slot_used))
		goto got;
	for (tries = 0; tries < 64; tries++) {
		slot = find_next_zero_bit(ctx->slot_used, TWOSTEP_SLOTS,
					  from % TWOSTEP_SLOTS);
		if (slot >= TWOSTEP_SLOTS)
			slot = find_first_zero_bit(ctx->slot_used,
						   TWOSTEP_SLOTS);
		if (slot >= TWOSTEP_SLOTS)
			return -1;
		if (!test_and_set_bit_lock(slot, ctx->slot_used))
			break;
		from = slot + 1;
	}
	if (tries == 64)
		return -1;
got:
	/* the round robin's hint; racing updates only move it */
	WRITE_ONCE(ctx->slot_next, slot + 1);
	page = READ_ONCE(ctx->slot_page[slot / TWOSTEP_SLOTS_PER_PAGE]);
	if (!page) {
		fresh = (void *)get_zeroed_page(gfp | __GFP_NOWARN);
		if (fresh) {
			page = cmpxchg(&ctx->slot_page[slot /
						       TWOSTEP_SLOTS_PER_PAGE],
				       NULL, fresh);
			if (page)
				free_page((unsigned long)fresh);
			else
				page = fresh;
		}
	}
	if (!page) {
		twostep_slot_put(ctx, slot);
		return -1;
	}
	return slot;
}

/* The next context of @ctx's device starts where the slot hint says. */
void twostep_slot_hint_load(struct twostep_ctx *ctx)
{
	void *hint;

	hint = xa_load(&twostep_slot_hints, (unsigned long)ctx->dev);
	if (hint)
		ctx->slot_next = xa_to_value(hint) % TWOSTEP_SLOTS;
}

/* @ctx goes away: keep where its round robin stands for its device. */
void twostep_slot_hint_keep(struct twostep_ctx *ctx)
{
	xa_store(&twostep_slot_hints, (unsigned long)ctx->dev,
		 xa_mk_value(ctx->slot_next), GFP_KERNEL);
}

/* @dev goes away: forget its hint. */
void twostep_slot_hint_drop(struct device *dev)
{
	xa_erase(&twostep_slot_hints, (unsigned long)dev);
}

/* At unload: forget every hint. */
void twostep_slot_hints_exit(void)
{
	xa_destroy(&twostep_slot_hints);
}

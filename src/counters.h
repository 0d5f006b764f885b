/* SPDX-License-Identifier: GPL-2.0 */
/*
 * twostep: the module-wide counters, the report of bad input and fault
 * injection (counters.c). Calls nothing of twostep's; used by every file
 * above it.
 */
#ifndef _TWOSTEP_COUNTERS_H
#define _TWOSTEP_COUNTERS_H

#include <linux/atomic.h>
#include <linux/compiler_attributes.h>
#include <linux/percpu.h>

#include "twostep.h"

struct device;
struct twostep_ctx;

extern atomic_t twostep_live_contexts;
DECLARE_PER_CPU(long, twostep_live_allocs);
extern atomic_t twostep_live_chunks;
extern atomic_t twostep_misuse_all;
extern atomic64_t twostep_reserved_all;
DECLARE_PER_CPU(long, twostep_lazy_queued);
extern atomic64_t twostep_lazy_flushes;
extern atomic_t twostep_fail_countdown[TWOSTEP_FAIL_RECORD + 1];

bool __twostep_should_fail(enum twostep_fail what);

/*
 * Should the fault point @what fail now (twostep_debug_fail())? Inline:
 * off, each point costs the hot path one load.
 */
static __always_inline bool twostep_should_fail(enum twostep_fail what)
{
	return unlikely(atomic_read(&twostep_fail_countdown[what])) &&
	       __twostep_should_fail(what);
}

void twostep_misuse(struct twostep_ctx *ctx, struct device *dev,
		    const char *fmt, ...) __printf(3, 4);

#endif /* _TWOSTEP_COUNTERS_H */

// SPDX-License-Identifier: GPL-2.0
/*
 * twostep: the module-wide counters, readable as module parameters in
 * /sys/module/twostep/parameters, and the two calls that count: the report
 * of bad input (twostep_misuse()) and fault injection for tests
 * (twostep_debug_fail()). The files above update the counters; this one
 * calls nothing of twostep's.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/device.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/sysfs.h>

#include "counters.h"
#include "ctx.h"

/* Live objects and refusals, readable in /sys/module/twostep/parameters. */
atomic_t twostep_live_contexts = ATOMIC_INIT(0);
DEFINE_PER_CPU(long, twostep_live_allocs);
atomic_t twostep_live_chunks = ATOMIC_INIT(0);
atomic_t twostep_misuse_all = ATOMIC_INIT(0);
atomic64_t twostep_reserved_all = ATOMIC64_INIT(0);
/* lazy mode: destroys that left their invalidation to a flush queue */
DEFINE_PER_CPU(long, twostep_lazy_queued);
atomic64_t twostep_lazy_flushes = ATOMIC64_INIT(0);

static int twostep_counter_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%d\n", atomic_read(kp->arg));
}

static const struct kernel_param_ops twostep_counter_ops = {
	.get = twostep_counter_get,
};

/* A counter kept per CPU, summed (live ranges: the parts may be negative). */
static long twostep_percpu_sum(long __percpu *counter)
{
	long sum = 0;
	int cpu;

	for_each_possible_cpu(cpu)
		sum += *per_cpu_ptr(counter, cpu);
	return sum;
}

static int twostep_live_allocs_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%ld\n", twostep_percpu_sum(&twostep_live_allocs));
}

static const struct kernel_param_ops twostep_live_allocs_ops = {
	.get = twostep_live_allocs_get,
};

static int twostep_lazy_queued_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%ld\n", twostep_percpu_sum(&twostep_lazy_queued));
}

static const struct kernel_param_ops twostep_lazy_queued_ops = {
	.get = twostep_lazy_queued_get,
};

static int twostep_counter64_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%lld\n", atomic64_read(kp->arg));
}

static const struct kernel_param_ops twostep_counter64_ops = {
	.get = twostep_counter64_get,
};

module_param_cb(live_contexts, &twostep_counter_ops, &twostep_live_contexts,
		0444);
MODULE_PARM_DESC(live_contexts, "devices twostep holds IOVA for");
module_param_cb(live_allocs, &twostep_live_allocs_ops, NULL, 0444);
MODULE_PARM_DESC(live_allocs, "IOVA ranges allocated and not yet freed");
module_param_cb(live_chunks, &twostep_counter_ops, &twostep_live_chunks,
		0444);
MODULE_PARM_DESC(live_chunks, "chunks of IOVA reserved from the DMA API");
module_param_cb(reserved_bytes, &twostep_counter64_ops, &twostep_reserved_all,
		0444);
MODULE_PARM_DESC(reserved_bytes, "bytes of IOVA reserved from the DMA API now");
module_param_cb(refused_calls, &twostep_counter_ops, &twostep_misuse_all,
		0444);
MODULE_PARM_DESC(refused_calls, "calls with bad input (refused or cleaned up)");
module_param_cb(lazy_destroys, &twostep_lazy_queued_ops, NULL, 0444);
MODULE_PARM_DESC(lazy_destroys, "lazy mode: destroys whose IOTLB invalidation went to a flush queue");
module_param_cb(lazy_flushes, &twostep_counter64_ops, &twostep_lazy_flushes,
		0444);
MODULE_PARM_DESC(lazy_flushes, "lazy mode: IOTLB flushes of the flush queues");

/* Fault injection: countdowns to the failing operation, 0 when disarmed. */
atomic_t twostep_fail_countdown[TWOSTEP_FAIL_RECORD + 1];

/**
 * twostep_debug_fail - fault injection for tests
 * @what: which operation fails
 * @nth: the nth such operation from now fails (1: the next one); 0 disarms
 */
void twostep_debug_fail(enum twostep_fail what, unsigned int nth)
{
	if (what < ARRAY_SIZE(twostep_fail_countdown))
		atomic_set(&twostep_fail_countdown[what], nth);
}
EXPORT_SYMBOL_GPL(twostep_debug_fail);

/* A fault point counted down to its failure; see twostep_should_fail(). */
bool __twostep_should_fail(enum twostep_fail what)
{
	return atomic_dec_and_test(&twostep_fail_countdown[what]);
}

/* Report bad input: one rate-limited line, counted per device. */
void twostep_misuse(struct twostep_ctx *ctx, struct device *dev,
		    const char *fmt, ...)
{
	struct va_format vaf;
	va_list args;

	atomic_inc(&twostep_misuse_all);
	if (ctx)
		atomic_long_inc(&ctx->misuse);
	va_start(args, fmt);
	vaf.fmt = fmt;
	vaf.va = &args;
	if (dev)
		dev_warn_ratelimited(dev, "twostep: bad input: %pV\n", &vaf);
	else
		pr_warn_ratelimited("bad input: %pV\n", &vaf);
	va_end(args);
}

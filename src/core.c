// SPDX-License-Identifier: GPL-2.0
/*
 * twostep: per-device contexts. Attach builds a private IOVA allocator over
 * the device's own IOMMU domain, restricted to a window above the device's
 * DMA-API masks; detach tears it down and reclaims whatever is left.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/device.h>
#include <linux/dma-map-ops.h>
#include <linux/dma-mapping.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/slab.h>

#include "twostep_internal.h"

static LIST_HEAD(twostep_ctxs);
static DEFINE_SPINLOCK(twostep_ctxs_lock);

/* Live objects and refusals, readable in /sys/module/twostep/parameters. */
static atomic_t twostep_live_contexts = ATOMIC_INIT(0);
atomic_t twostep_live_allocs = ATOMIC_INIT(0);
static atomic_t twostep_misuse_all = ATOMIC_INIT(0);

static int twostep_counter_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%d\n", atomic_read(kp->arg));
}

static const struct kernel_param_ops twostep_counter_ops = {
	.get = twostep_counter_get,
};

module_param_cb(live_contexts, &twostep_counter_ops, &twostep_live_contexts,
		0444);
MODULE_PARM_DESC(live_contexts, "attached devices");
module_param_cb(live_allocs, &twostep_counter_ops, &twostep_live_allocs,
		0444);
MODULE_PARM_DESC(live_allocs, "IOVA ranges allocated and not yet freed");
module_param_cb(refused_calls, &twostep_counter_ops, &twostep_misuse_all,
		0444);
MODULE_PARM_DESC(refused_calls, "calls refused because of bad input");

/* Fault injection: countdowns to the failing operation, 0 when disarmed. */
atomic_t twostep_fail_countdown[2];

void twostep_debug_fail(enum twostep_fail what, unsigned int nth)
{
	if (what < ARRAY_SIZE(twostep_fail_countdown))
		atomic_set(&twostep_fail_countdown[what], nth);
}
EXPORT_SYMBOL_GPL(twostep_debug_fail);

bool twostep_should_fail(enum twostep_fail what)
{
	atomic_t *c = &twostep_fail_countdown[what];

	return atomic_read(c) && atomic_dec_and_test(c);
}

/* Called with twostep_ctxs_lock held or under rcu_read_lock(). */
static struct twostep_ctx *twostep_ctx_lookup(struct device *dev)
{
	struct twostep_ctx *ctx;

	list_for_each_entry_rcu(ctx, &twostep_ctxs, node,
				lockdep_is_held(&twostep_ctxs_lock))
		if (ctx->dev == dev)
			return ctx;
	return NULL;
}

/*
 * Look up the context of @dev. The IOVA calls run under rcu_read_lock();
 * attach, detach and stats run in process context, where a concurrent
 * detach of the same device is the caller's bug.
 */
struct twostep_ctx *twostep_ctx_find(struct device *dev)
{
	struct twostep_ctx *ctx;

	if (!dev)
		return NULL;
	rcu_read_lock();
	ctx = twostep_ctx_lookup(dev);
	rcu_read_unlock();
	return ctx;
}

/* Report a refused call: one rate-limited line, counted per device. */
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
		dev_warn_ratelimited(dev, "twostep: refused: %pV\n", &vaf);
	else
		pr_warn_ratelimited("refused: %pV\n", &vaf);
	va_end(args);
}

static bool twostep_dev_untrusted(struct device *dev)
{
	return dev_is_pci(dev) && to_pci_dev(dev)->untrusted;
}

/* Keep the IOMMU's reserved regions out of the private allocator. */
static int twostep_reserve_regions(struct twostep_ctx *ctx)
{
	struct iommu_resv_region *region, *next;
	struct iommu_group *group;
	LIST_HEAD(regions);
	int ret;

	group = iommu_group_get(ctx->dev);
	if (!group)
		return -ENODEV;
	ret = iommu_get_group_resv_regions(group, &regions);
	iommu_group_put(group);

	list_for_each_entry_safe(region, next, &regions, list) {
		u64 lo = region->start;
		u64 hi = region->start + region->length - 1;

		if (!ret && region->length && hi >= ctx->win_start &&
		    lo <= ctx->win_end) {
			lo = max_t(u64, lo, ctx->win_start);
			hi = min_t(u64, hi, ctx->win_end);
			if (!reserve_iova(&ctx->iovad, lo >> ctx->shift,
					  hi >> ctx->shift))
				ret = -ENOMEM;
		}
		list_del(&region->list);
		kfree(region);
	}
	return ret;
}

int twostep_attach(struct device *dev, u64 hw_dma_limit)
{
	struct iommu_domain *domain;
	struct twostep_ctx *ctx;
	unsigned long granule;
	u64 api_limit, end;
	unsigned long flags;
	int ret;

	might_sleep();
	if (!dev)
		return -EINVAL;
	if (twostep_ctx_find(dev)) {
		dev_err(dev, "twostep: attach: already attached\n");
		return -EBUSY;
	}
	domain = iommu_get_domain_for_dev(dev);
	if (!domain) {
		dev_info(dev, "twostep: attach: no IOMMU domain\n");
		return -ENODEV;
	}
	if (!(domain->type & __IOMMU_DOMAIN_PAGING)) {
		dev_info(dev, "twostep: attach: domain type %#x does not translate (identity or passthrough)\n",
			 domain->type);
		return -ENODEV;
	}
	if (!iommu_is_dma_domain(domain)) {
		dev_err(dev, "twostep: attach: domain is not managed by the DMA API\n");
		return -EOPNOTSUPP;
	}
	if (!dev_is_dma_coherent(dev) || twostep_dev_untrusted(dev)) {
		dev_err(dev, "twostep: attach: non-coherent or untrusted devices need bouncing, not supported\n");
		return -EOPNOTSUPP;
	}
	granule = 1UL << __ffs(domain->pgsize_bitmap);
	if (granule > PAGE_SIZE) {
		dev_err(dev, "twostep: attach: IOMMU granule %lu exceeds PAGE_SIZE\n",
			granule);
		return -EOPNOTSUPP;
	}

	api_limit = max_t(u64, dma_get_mask(dev), dev->coherent_dma_mask);
	end = hw_dma_limit;
	if (domain->geometry.force_aperture)
		end = min_t(u64, end, domain->geometry.aperture_end);
	if (api_limit == U64_MAX || ALIGN(api_limit + 1, granule) == 0 ||
	    ALIGN(api_limit + 1, granule) > end ||
	    end - ALIGN(api_limit + 1, granule) + 1 < granule) {
		dev_err(dev, "twostep: attach: empty window: DMA-API mask %#llx, hardware limit %#llx, aperture end %#llx\n",
			api_limit, hw_dma_limit,
			(u64)domain->geometry.aperture_end);
		return -ERANGE;
	}

	ctx = kzalloc(sizeof(*ctx), GFP_KERNEL);
	if (!ctx)
		return -ENOMEM;
	ctx->dev = get_device(dev);
	ctx->domain = domain;
	ctx->shift = __ffs(granule);
	ctx->win_start = ALIGN(api_limit + 1, granule);
	ctx->win_end = end;
	/* last whole granule: alloc_iova() takes an inclusive limit */
	ctx->limit_pfn = end == U64_MAX ? U64_MAX >> ctx->shift :
			 ((end + 1) >> ctx->shift) - 1;
	ctx->prot_extra = IOMMU_CACHE;
	xa_init_flags(&ctx->allocs, XA_FLAGS_LOCK_IRQ);

	ret = iova_cache_get();
	if (ret)
		goto err_put_device;
	init_iova_domain(&ctx->iovad, granule, ctx->win_start >> ctx->shift);
	ret = twostep_reserve_regions(ctx);
	if (ret) {
		dev_err(dev, "twostep: attach: reading reserved regions failed: %d\n",
			ret);
		goto err_put_iovad;
	}

	spin_lock_irqsave(&twostep_ctxs_lock, flags);
	if (twostep_ctx_lookup(dev)) {
		/* lost a race with another attach of the same device */
		spin_unlock_irqrestore(&twostep_ctxs_lock, flags);
		dev_err(dev, "twostep: attach: already attached\n");
		ret = -EBUSY;
		goto err_put_iovad;
	}
	list_add_tail_rcu(&ctx->node, &twostep_ctxs);
	atomic_inc(&twostep_live_contexts);
	spin_unlock_irqrestore(&twostep_ctxs_lock, flags);
	dev_info(dev, "twostep: attached: window [%#llx, %#llx], granule %lu\n",
		 (u64)ctx->win_start, (u64)ctx->win_end, granule);
	return 0;

err_put_iovad:
	put_iova_domain(&ctx->iovad);
	iova_cache_put();
err_put_device:
	put_device(ctx->dev);
	kfree(ctx);
	return ret;
}
EXPORT_SYMBOL_GPL(twostep_attach);

/*
 * Unlink and free every live range. The context is already unlisted and
 * no lookup can still see it.
 */
static void twostep_ctx_destroy(struct twostep_ctx *ctx)
{
	twostep_ctx_release_all(ctx);
	xa_destroy(&ctx->allocs);
	put_iova_domain(&ctx->iovad);
	iova_cache_put();
	atomic_dec(&twostep_live_contexts);
	dev_info(ctx->dev, "twostep: detached\n");
	put_device(ctx->dev);
	kfree(ctx);
}

void twostep_detach(struct device *dev)
{
	struct twostep_ctx *ctx;
	unsigned long flags;

	might_sleep();
	spin_lock_irqsave(&twostep_ctxs_lock, flags);
	ctx = dev ? twostep_ctx_lookup(dev) : NULL;
	if (ctx)
		list_del_rcu(&ctx->node);
	spin_unlock_irqrestore(&twostep_ctxs_lock, flags);
	if (!ctx) {
		twostep_misuse(NULL, dev, "detach: device not attached");
		return;
	}
	synchronize_rcu();
	twostep_ctx_destroy(ctx);
}
EXPORT_SYMBOL_GPL(twostep_detach);

int twostep_get_stats(struct device *dev, struct twostep_stats *stats)
{
	struct twostep_ctx *ctx = twostep_ctx_find(dev);

	if (!stats)
		return -EINVAL;
	memset(stats, 0, sizeof(*stats));
	stats->misuse_all = atomic_read(&twostep_misuse_all);
	if (!ctx)
		return -ENODEV;
	stats->window_start = ctx->win_start;
	stats->window_end = ctx->win_end;
	stats->granule = 1UL << ctx->shift;
	stats->live_allocs = atomic_long_read(&ctx->live_allocs);
	stats->linked_granules = atomic_long_read(&ctx->linked_granules);
	stats->misuse = atomic_long_read(&ctx->misuse);
	return 0;
}
EXPORT_SYMBOL_GPL(twostep_get_stats);

static int __init twostep_init(void)
{
	pr_info("loaded\n");
	return 0;
}

static void __exit twostep_exit(void)
{
	struct twostep_ctx *ctx;
	unsigned long flags;

	for (;;) {
		spin_lock_irqsave(&twostep_ctxs_lock, flags);
		ctx = list_first_entry_or_null(&twostep_ctxs,
					       struct twostep_ctx, node);
		if (ctx)
			list_del_rcu(&ctx->node);
		spin_unlock_irqrestore(&twostep_ctxs_lock, flags);
		if (!ctx)
			break;
		synchronize_rcu();
		dev_warn(ctx->dev, "twostep: unload with the device still attached: detaching\n");
		twostep_ctx_destroy(ctx);
	}
	pr_info("unloaded\n");
}

module_init(twostep_init);
module_exit(twostep_exit);

MODULE_LICENSE("GPL");
MODULE_AUTHOR("The twostep developers");
MODULE_DESCRIPTION("DMA two-step IOVA API (dma_iova_*) for kernels without it");
MODULE_VERSION(TWOSTEP_VERSION);

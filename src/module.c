// SPDX-License-Identifier: GPL-2.0
/*
 * twostep: the module's edges. Loading sets up the IOVA cache and the
 * reservation's zero block and starts listening to the PCI and platform
 * buses: a driver unbound, a probe failed or a device removed gives back
 * the device's context. Unloading gives back every context. Calls
 * reserve.c, debug.c (the checker's debugfs table), slot.c and ctx.c;
 * nothing calls it.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/device.h>
#include <linux/iova.h>
#include <linux/module.h>
#include <linux/notifier.h>
#include <linux/pci.h>
#include <linux/platform_device.h>

#include "ctx.h"
#include "debug.h"
#include "reserve.h"
#include "slot.h"

/* A driver unbound or a device removed: give back what it left. */
static int twostep_bus_notify(struct notifier_block *nb, unsigned long action,
			      void *data)
{
	struct device *dev = data;

	switch (action) {
	case BUS_NOTIFY_UNBOUND_DRIVER:
		/* after the driver's remove(): its DMA is over */
		twostep_ctx_remove(dev, "driver unbound", true);
		break;
	case BUS_NOTIFY_DRIVER_NOT_BOUND:
		/* a probe failed (or deferred) after using twostep */
		twostep_ctx_remove(dev, "probe failed", true);
		break;
	case BUS_NOTIFY_DEL_DEVICE:
		/*
		 * Sent before the driver's remove(), while DMA may be in
		 * flight: a bound device is left to the unbind that follows.
		 */
		if (!READ_ONCE(dev->driver))
			twostep_ctx_remove(dev, "device removed", false);
		/* a new device may come at the same address */
		twostep_slot_hint_drop(dev);
		break;
	}
	return NOTIFY_DONE;
}

static struct notifier_block twostep_pci_nb = {
	.notifier_call = twostep_bus_notify,
};

static struct notifier_block twostep_platform_nb = {
	.notifier_call = twostep_bus_notify,
};

static int __init twostep_init(void)
{
	int ret;

	ret = iova_cache_get();
	if (ret)
		return ret;
	ret = twostep_ctx_init();
	if (ret)
		goto err_put_cache;
	ret = twostep_reserve_init();
	if (ret)
		goto err_ctx_exit;
	ret = bus_register_notifier(&pci_bus_type, &twostep_pci_nb);
	if (ret)
		goto err_reserve_exit;
	ret = bus_register_notifier(&platform_bus_type, &twostep_platform_nb);
	if (ret)
		goto err_unregister_pci;
	twostep_debug_init();
	pr_info("loaded, reservation block %llu KiB\n",
		twostep_reserve_block() >> 10);
	return 0;

err_unregister_pci:
	bus_unregister_notifier(&pci_bus_type, &twostep_pci_nb);
err_reserve_exit:
	twostep_reserve_exit();
err_ctx_exit:
	twostep_ctx_exit();
err_put_cache:
	iova_cache_put();
	return ret;
}

static void __exit twostep_exit(void)
{
	struct twostep_ctx *ctx;
	unsigned long flags;

	twostep_debug_exit();
	/* no caller is left to queue it again */
	cancel_work_sync(&twostep_stale_work);
	/* contexts first: a device removed meanwhile is still heard of */
	for (;;) {
		spin_lock_irqsave(&twostep_ctxs_lock, flags);
		ctx = list_first_entry_or_null(&twostep_ctxs,
					       struct twostep_ctx, node);
		if (ctx)
			twostep_ctx_unlist_one(ctx);
		spin_unlock_irqrestore(&twostep_ctxs_lock, flags);
		if (!ctx)
			break;
		synchronize_rcu();
		twostep_ctx_destroy(ctx, "unload", false);
	}
	bus_unregister_notifier(&platform_bus_type, &twostep_platform_nb);
	bus_unregister_notifier(&pci_bus_type, &twostep_pci_nb);
	rcu_barrier();
	twostep_slot_hints_exit();
	twostep_reserve_exit();
	twostep_ctx_exit();
	iova_cache_put();
	pr_info("unloaded\n");
}

module_init(twostep_init);
module_exit(twostep_exit);

MODULE_LICENSE("GPL");
MODULE_AUTHOR("The twostep developers");
MODULE_DESCRIPTION("DMA two-step IOVA API (dma_iova_*) for kernels without it");
MODULE_VERSION(TWOSTEP_VERSION);

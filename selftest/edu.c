// SPDX-License-Identifier: GPL-2.0
/*
 * twostep self-test: the edu PCI driver. Binds up to two devices (the
 * second one, where QEMU has it, is a peer in the same IOMMU group for the
 * group case), checks they are alive, sets the DMA mask to what the device
 * really drives, enables bus mastering and MSI and offers one guarded DMA
 * primitive, edu_dma(). Like a real user of the two-step API it does no
 * twostep set-up at all.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dma-mapping.h>
#include <linux/interrupt.h>
#include <linux/io.h>
#include <linux/module.h>
#include <linux/pci.h>

#include "edu.h"
#include "twostep.h"

/* Generous: a transfer takes 100 ms of the guest's virtual clock. */
#define EDU_DMA_TIMEOUT_MS	10000
/* how often a transfer whose interrupt is late is checked on */
#define EDU_DMA_POLL_MS		250

#define EDU_MAX_DEVS	2

static struct edu_dev *edu_bound[EDU_MAX_DEVS];
static unsigned int edu_hw_dma_bits;
static bool edu_detach_on_remove;

/*
 * The first probe uses twostep, then defers, as a driver whose probe
 * fails after its set-up does; the probe that follows must find the
 * device as if it had never been seen (twostep_attach() says 0 again).
 */
static struct pci_dev *edu_deferred;
static int edu_defer_ret[2] = { 1, 1 };
/* the deferred device keeps its slot: edu 0 stays the first one probed */
static int edu_deferred_slot = -1;

/* The @i-th bound device (0: the one under test, 1: its peer) or NULL. */
struct edu_dev *edu_get(unsigned int i)
{
	return i < EDU_MAX_DEVS ? edu_bound[i] : NULL;
}

static irqreturn_t edu_irq(int irq, void *data)
{
	struct edu_dev *edu = data;
	u32 status = readl(edu->regs + EDU_REG_IRQ_STATUS);

	if (!status)
		return IRQ_NONE;
	writel(status, edu->regs + EDU_REG_IRQ_ACK);
	if (status & EDU_IRQ_DMA)
		complete(&edu->done);
	return IRQ_HANDLED;
}

/**
 * edu_dma - move bytes between RAM and the device buffer
 * @edu: device
 * @ram: device address of the RAM side
 * @dev_off: offset into the device buffer
 * @len: bytes to move
 * @to_ram: true for device buffer -> RAM, false for RAM -> device buffer
 *
 * Every request is checked before it reaches the device: one that QEMU
 * would abort on, or that the device cannot address, is refused.
 *
 * Return: 0 when the device reported completion, -EINVAL for a refused
 * request, -ETIMEDOUT (and the device is not used again) or -EIO.
 */
int edu_dma(struct edu_dev *edu, dma_addr_t ram, u32 dev_off, u32 len,
	    bool to_ram)
{
	unsigned int waited;
	u64 src, dst, ram_end;
	u32 cmd, status;
	int ret = 0;

	if (!len || len > EDU_MAX_XFER || dev_off > EDU_MAX_XFER ||
	    dev_off + len > EDU_MAX_XFER)
		return -EINVAL;
	if (check_add_overflow((u64)ram, (u64)len - 1, &ram_end) ||
	    ram_end > edu->ram_limit)
		return -EINVAL;

	mutex_lock(&edu->lock);
	if (edu->dead) {
		ret = -EIO;
		goto out_unlock;
	}
	if (readl(edu->regs + EDU_REG_DMA_CMD) & EDU_DMA_START) {
		ret = -EIO;
		goto out_unlock;
	}
	src = to_ram ? EDU_BUF_ADDR + dev_off : ram;
	dst = to_ram ? ram : EDU_BUF_ADDR + dev_off;
	reinit_completion(&edu->done);
	writeq(src, edu->regs + EDU_REG_DMA_SRC);
	writeq(dst, edu->regs + EDU_REG_DMA_DST);
	writeq(len, edu->regs + EDU_REG_DMA_COUNT);
	edu->dma_started++;
	writeq(EDU_DMA_START | EDU_DMA_IRQ | (to_ram ? EDU_DMA_TO_RAM : 0),
	       edu->regs + EDU_REG_DMA_CMD);
	for (waited = 0; ; waited += EDU_DMA_POLL_MS) {
		if (wait_for_completion_timeout(&edu->done,
						msecs_to_jiffies(EDU_DMA_POLL_MS)))
			break;
		/*
		 * The interrupt is late (a loaded host) or was lost (MSI
		 * turned off under us): ask the device whether it is done.
		 */
		cmd = readl(edu->regs + EDU_REG_DMA_CMD);
		if (!(cmd & EDU_DMA_START)) {
			status = readl(edu->regs + EDU_REG_IRQ_STATUS);
			if (status)
				writel(status, edu->regs + EDU_REG_IRQ_ACK);
			edu->late_irqs++;
			break;
		}
		if (waited >= EDU_DMA_TIMEOUT_MS) {
			edu->dead = true;
			dev_err(&edu->pdev->dev,
				"DMA timed out, device disabled: cmd %#x\n",
				cmd);
			ret = -ETIMEDOUT;
			break;
		}
	}
out_unlock:
	mutex_unlock(&edu->lock);
	return ret;
}

static int edu_check_identity(struct edu_dev *edu)
{
	u32 id = readl(edu->regs + EDU_REG_ID);
	u32 probe = 0x5a5aa5a5;

	if ((id & 0xff) != EDU_ID_MAGIC) {
		dev_err(&edu->pdev->dev, "identity %#x is not edu's\n", id);
		return -ENODEV;
	}
	writel(probe, edu->regs + EDU_REG_LIVENESS);
	if (readl(edu->regs + EDU_REG_LIVENESS) != ~probe) {
		dev_err(&edu->pdev->dev, "liveness check failed\n");
		return -EIO;
	}
	return 0;
}

static int edu_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct edu_dev *edu;
	unsigned int slot;
	int ret;

	for (slot = 0; slot < EDU_MAX_DEVS; slot++)
		if (!edu_bound[slot] && (slot != edu_deferred_slot ||
					 pdev == edu_deferred))
			break;
	if (slot == EDU_MAX_DEVS)
		return -EBUSY;
	edu = devm_kzalloc(&pdev->dev, sizeof(*edu), GFP_KERNEL);
	if (!edu)
		return -ENOMEM;
	edu->pdev = pdev;
	mutex_init(&edu->lock);
	init_completion(&edu->done);
	edu->ram_limit = DMA_BIT_MASK(edu_hw_dma_bits);

	ret = pcim_enable_device(pdev);
	if (ret)
		return ret;
	ret = pcim_iomap_regions(pdev, BIT(0), KBUILD_MODNAME);
	if (ret)
		return ret;
	edu->regs = pcim_iomap_table(pdev)[0];
	ret = edu_check_identity(edu);
	if (ret)
		return ret;

	pci_set_master(pdev);
	/* all the device drives: QEMU's dma_mask property, told by the host */
	ret = dma_set_mask_and_coherent(&pdev->dev,
					DMA_BIT_MASK(edu_hw_dma_bits));
	if (ret)
		return ret;
	if (!edu_deferred) {
		edu_defer_ret[0] = twostep_attach(&pdev->dev, 0, 0);
		edu_deferred = pci_dev_get(pdev);
		edu_deferred_slot = slot;
		return -EPROBE_DEFER;
	}
	if (edu_deferred == pdev && edu_defer_ret[1] == 1) {
		edu_defer_ret[1] = twostep_attach(&pdev->dev, 0, 0);
		if (!edu_defer_ret[1])
			twostep_detach(&pdev->dev);
	}
	ret = pci_alloc_irq_vectors(pdev, 1, 1, PCI_IRQ_MSI);
	if (ret < 0)
		return ret;
	edu->irq = pci_irq_vector(pdev, 0);
	ret = request_irq(edu->irq, edu_irq, 0, KBUILD_MODNAME, edu);
	if (ret)
		goto err_free_vectors;

	pci_set_drvdata(pdev, edu);
	edu_bound[slot] = edu;
	if (pdev == edu_deferred)
		edu_deferred_slot = -1;
	dev_info(&pdev->dev, "edu %u bound, irq %d, DMA mask %u bits\n", slot,
		 edu->irq, edu_hw_dma_bits);
	return 0;

err_free_vectors:
	pci_free_irq_vectors(pdev);
	return ret;
}

static void edu_remove(struct pci_dev *pdev)
{
	struct edu_dev *edu = pci_get_drvdata(pdev);
	struct twostep_stats s;
	unsigned int i;

	/* twostep gives back at unbind by itself; detach is optional */
	if (edu_detach_on_remove && !twostep_get_stats(&pdev->dev, &s))
		twostep_detach(&pdev->dev);
	free_irq(edu->irq, edu);
	pci_free_irq_vectors(pdev);
	pci_clear_master(pdev);
	for (i = 0; i < EDU_MAX_DEVS; i++)
		if (edu_bound[i] == edu)
			edu_bound[i] = NULL;
}

static const struct pci_device_id edu_ids[] = {
	{ PCI_DEVICE(EDU_VENDOR, EDU_DEVICE) },
	{ }
};

static struct pci_driver edu_driver = {
	.name = "twostep_edu",
	.id_table = edu_ids,
	.probe = edu_probe,
	.remove = edu_remove,
};

int edu_driver_register(unsigned int hw_dma_bits, bool detach_on_remove)
{
	int ret;

	edu_hw_dma_bits = hw_dma_bits;
	edu_detach_on_remove = detach_on_remove;
	ret = pci_register_driver(&edu_driver);
	if (ret || !edu_deferred)
		return ret;
	/*
	 * The deferred probe, now rather than when the core retries it: the
	 * core's retry, which another device's probe triggers, may be under
	 * way already, so wait for it first.
	 */
	wait_for_device_probe();
	if (!edu_deferred->dev.driver && device_attach(&edu_deferred->dev) < 0)
		dev_warn(&edu_deferred->dev, "probe after the deferral failed\n");
	return 0;
}

void edu_driver_unregister(void)
{
	pci_unregister_driver(&edu_driver);
	pci_dev_put(edu_deferred);
	edu_deferred = NULL;
	edu_deferred_slot = -1;
}

/*
 * Whether remove() calls twostep_detach() (false: twostep's unbind
 * notifier gives back); returns the setting it replaces.
 */
bool edu_set_detach(bool detach)
{
	bool old = edu_detach_on_remove;

	edu_detach_on_remove = detach;
	return old;
}

/*
 * Stands for a device that could not be bound again: dead, so that every
 * case after it fails instead of using freed memory.
 */
static struct edu_dev edu_lost_dev = {
	.lock = __MUTEX_INITIALIZER(edu_lost_dev.lock),
	.dead = true,
};

struct edu_dev *edu_lost(struct pci_dev *pdev)
{
	edu_lost_dev.pdev = pdev;
	return &edu_lost_dev;
}

/* What twostep_attach() said in the deferred probe and the one after. */
void edu_defer_result(int *first, int *second)
{
	*first = edu_defer_ret[0];
	*second = edu_defer_ret[1];
}

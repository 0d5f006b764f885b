/* SPDX-License-Identifier: GPL-2.0 */
/*
 * twostep self-test: driver for QEMU's "edu" PCI device, a DMA engine with
 * a 4 KiB buffer, used to move real data through twostep mappings.
 */
#ifndef _TWOSTEP_EDU_H
#define _TWOSTEP_EDU_H

#include <linux/completion.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/types.h>

#define EDU_VENDOR		0x1234
#define EDU_DEVICE		0x11e8

#define EDU_REG_ID		0x00
#define EDU_REG_LIVENESS	0x04
#define EDU_REG_IRQ_STATUS	0x24
#define EDU_REG_IRQ_ACK		0x64
#define EDU_REG_DMA_SRC		0x80
#define EDU_REG_DMA_DST		0x88
#define EDU_REG_DMA_COUNT	0x90
#define EDU_REG_DMA_CMD		0x98

#define EDU_ID_MAGIC		0xed
#define EDU_DMA_START		0x1
#define EDU_DMA_TO_RAM		0x2
#define EDU_DMA_IRQ		0x4
#define EDU_IRQ_DMA		0x100

/* The device buffer: 4 KiB at this device address. */
#define EDU_BUF_ADDR		0x40000
#define EDU_BUF_SIZE		4096
/*
 * QEMU 7.2 aborts on a transfer that ends at or past the end of the buffer,
 * and on a count of 0: every transfer must fit in [1, EDU_BUF_SIZE - 1].
 */
#define EDU_MAX_XFER		(EDU_BUF_SIZE - 1)

/**
 * struct edu_dev - one bound edu device
 * @pdev: the PCI device
 * @regs: BAR0
 * @irq: Linux IRQ number of the MSI vector
 * @lock: one DMA at a time
 * @done: completed by the DMA interrupt
 * @ram_limit: highest RAM-side address the device can generate
 * @dead: set after a timeout; no further DMA is started
 * @dma_started: transfers handed to the device
 * @late_irqs: transfers found complete before their interrupt came
 */
struct edu_dev {
	struct pci_dev *pdev;
	void __iomem *regs;
	int irq;
	struct mutex lock;	/* one DMA at a time */
	struct completion done;
	u64 ram_limit;
	bool dead;
	unsigned long dma_started;
	unsigned long late_irqs;
};

int edu_dma(struct edu_dev *edu, dma_addr_t ram, u32 dev_off, u32 len,
	    bool to_ram);
struct edu_dev *edu_get(unsigned int i);
int edu_driver_register(unsigned int hw_dma_bits, bool detach_on_remove);
void edu_driver_unregister(void);
void edu_defer_result(int *first, int *second);
bool edu_set_detach(bool detach);
struct edu_dev *edu_lost(struct pci_dev *pdev);

#endif /* _TWOSTEP_EDU_H */

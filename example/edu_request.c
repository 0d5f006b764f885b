// SPDX-License-Identifier: GPL-2.0
/*
 * A driver written against upstream's two-step DMA API only, in the
 * pattern nvme-pci and the block layer use: one IOVA range for a whole
 * request, one link per segment, one sync, destroy at completion, and the
 * classic dma_map_phys() per segment when dma_iova_try_alloc() says no.
 * The same source builds on kernels with the native API (6.16 and later;
 * dma_map_phys() since 6.18) and, through <twostep-dma.h>, on older ones.
 *
 * The device is QEMU's "edu" (a DMA engine with a 4 KiB buffer). At load
 * the module runs requests of scattered pages through it and reports KTAP
 * lines in the kernel log.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/interrupt.h>
#include <linux/io.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/string.h>

#include <twostep-dma.h>

#define EDU_REG_ID		0x00
#define EDU_REG_IRQ_STATUS	0x24
#define EDU_REG_IRQ_ACK		0x64
#define EDU_REG_DMA_SRC		0x80
#define EDU_REG_DMA_DST		0x88
#define EDU_REG_DMA_COUNT	0x90
#define EDU_REG_DMA_CMD		0x98
#define EDU_DMA_START		0x1
#define EDU_DMA_TO_RAM		0x2
#define EDU_DMA_IRQ		0x4
#define EDU_IRQ_DMA		0x100
#define EDU_BUF_ADDR		0x40000
/* QEMU refuses a transfer that reaches the end of edu's 4 KiB buffer */
#define EDU_MAX_XFER		4095

#define REQ_MAX_SEGS		8

static int expect_iova = -1;
module_param(expect_iova, int, 0444);
MODULE_PARM_DESC(expect_iova, "1: the device translates, try_alloc must succeed; 0: it must not; -1: do not check");
static unsigned int hw_dma_bits = 64;
module_param(hw_dma_bits, uint, 0444);
MODULE_PARM_DESC(hw_dma_bits, "DMA reach of the device (QEMU's edu dma_mask)");

#define KTAP(fmt, ...) pr_info("twostep-example-ktap: " fmt "\n", ##__VA_ARGS__)

struct edu {
	struct pci_dev *pdev;
	void __iomem *regs;
	int irq;
	struct completion done;
};

static struct edu *the_edu;
/* stands for a driver's queue lock, held while a request is mapped */
static DEFINE_SPINLOCK(queue_lock);

/**
 * struct request - a transfer made of scattered page segments
 * @nsegs: number of segments
 * @pages: one page per segment
 * @dir: direction of the whole request
 * @state: the IOVA range, when dma_use_iova() says so
 * @dma: per-segment addresses of the classic fallback
 */
struct request {
	unsigned int nsegs;
	struct page *pages[REQ_MAX_SEGS];
	enum dma_data_direction dir;
	struct dma_iova_state state;
	dma_addr_t dma[REQ_MAX_SEGS];
};

static irqreturn_t edu_irq(int irq, void *data)
{
	struct edu *edu = data;
	u32 status = readl(edu->regs + EDU_REG_IRQ_STATUS);

	if (!status)
		return IRQ_NONE;
	writel(status, edu->regs + EDU_REG_IRQ_ACK);
	if (status & EDU_IRQ_DMA)
		complete(&edu->done);
	return IRQ_HANDLED;
}

/* One edu transfer between a device address and edu's buffer. */
static int edu_xfer(struct edu *edu, dma_addr_t addr, u32 buf_off, u32 len,
		    bool to_ram)
{
	u64 ram = addr, buf = EDU_BUF_ADDR + buf_off;

	if (!len || buf_off + len > EDU_MAX_XFER)
		return -EINVAL;
	reinit_completion(&edu->done);
	writeq(to_ram ? buf : ram, edu->regs + EDU_REG_DMA_SRC);
	writeq(to_ram ? ram : buf, edu->regs + EDU_REG_DMA_DST);
	writeq(len, edu->regs + EDU_REG_DMA_COUNT);
	writeq(EDU_DMA_START | EDU_DMA_IRQ | (to_ram ? EDU_DMA_TO_RAM : 0),
	       edu->regs + EDU_REG_DMA_CMD);
	if (!wait_for_completion_timeout(&edu->done, 10 * HZ))
		return -ETIMEDOUT;
	return 0;
}

/*
 * Map a request for the device: the whole request in one IOVA range when
 * the platform allows it, else segment by segment. Safe in atomic context
 * (as a queue_rq() with a lock held): nothing here sleeps.
 */
static int req_map(struct device *dev, struct request *req)
{
	size_t len = (size_t)req->nsegs * PAGE_SIZE, mapped = 0;
	unsigned int i;
	int ret;

	if (dma_iova_try_alloc(dev, &req->state, page_to_phys(req->pages[0]),
			       len)) {
		for (i = 0; i < req->nsegs; i++) {
			ret = dma_iova_link(dev, &req->state,
					    page_to_phys(req->pages[i]),
					    mapped, PAGE_SIZE, req->dir, 0);
			if (ret)
				goto out_destroy;
			mapped += PAGE_SIZE;
		}
		ret = dma_iova_sync(dev, &req->state, 0, mapped);
		if (ret)
			goto out_destroy;
		return 0;
	}

	for (i = 0; i < req->nsegs; i++) {
		req->dma[i] = dma_map_phys(dev, page_to_phys(req->pages[i]),
					   PAGE_SIZE, req->dir, 0);
		if (dma_mapping_error(dev, req->dma[i])) {
			ret = -ENOMEM;
			goto out_unmap_pages;
		}
	}
	return 0;

out_destroy:
	dma_iova_destroy(dev, &req->state, mapped, req->dir, 0);
	return ret;
out_unmap_pages:
	while (i--)
		dma_unmap_phys(dev, req->dma[i], PAGE_SIZE, req->dir, 0);
	return ret;
}

/* Completion: everything the request mapped goes away. */
static void req_unmap(struct device *dev, struct request *req)
{
	unsigned int i;

	if (dma_use_iova(&req->state)) {
		dma_iova_destroy(dev, &req->state,
				 (size_t)req->nsegs * PAGE_SIZE, req->dir, 0);
		return;
	}
	for (i = 0; i < req->nsegs; i++)
		dma_unmap_phys(dev, req->dma[i], PAGE_SIZE, req->dir, 0);
}

/*
 * Move @len bytes at request offset @off to (@to_ram) or from edu's buffer:
 * one transfer through the IOVA range, or one per page segment without it.
 */
static int req_xfer(struct edu *edu, struct request *req, size_t off,
		    u32 len, bool to_ram, unsigned int *xfers)
{
	u32 done = 0, n;
	int ret;

	if (dma_use_iova(&req->state)) {
		*xfers += 1;
		return edu_xfer(edu, req->state.addr + off, 0, len, to_ram);
	}
	while (done < len) {
		size_t seg = (off + done) / PAGE_SIZE;
		size_t in = (off + done) % PAGE_SIZE;

		n = min_t(u32, len - done, PAGE_SIZE - in);
		ret = edu_xfer(edu, req->dma[seg] + in, done, n, to_ram);
		if (ret)
			return ret;
		*xfers += 1;
		done += n;
	}
	return 0;
}

static void req_free_pages(struct request *req)
{
	unsigned int i;

	for (i = 0; i < req->nsegs; i++)
		if (req->pages[i])
			__free_page(req->pages[i]);
}

/*
 * Pages for a request, deliberately scattered: every other page of a
 * larger allocation is given back first, so no two segments are
 * physically adjacent.
 */
static int req_alloc_pages(struct request *req, unsigned int nsegs,
			   enum dma_data_direction dir)
{
	struct page *spare[REQ_MAX_SEGS];
	unsigned int i;

	memset(req, 0, sizeof(*req));
	req->nsegs = nsegs;
	req->dir = dir;
	for (i = 0; i < nsegs; i++) {
		req->pages[i] = alloc_page(GFP_KERNEL);
		spare[i] = alloc_page(GFP_KERNEL);
		if (!req->pages[i] || !spare[i])
			break;
	}
	nsegs = i;
	for (i = 0; i < req->nsegs && spare[i]; i++)
		__free_page(spare[i]);
	if (nsegs < req->nsegs) {
		req_free_pages(req);
		return -ENOMEM;
	}
	return 0;
}

/* Byte @i of the pattern a case writes: never the same as its neighbours. */
static u8 pattern(size_t i, u8 seed)
{
	return (u8)(i * 7 + (i >> 8) * 13 + seed);
}

static void req_fill(struct request *req, u8 seed)
{
	unsigned int i;
	size_t j;

	for (i = 0; i < req->nsegs; i++) {
		u8 *p = page_address(req->pages[i]);

		for (j = 0; j < PAGE_SIZE; j++)
			p[j] = pattern(i * PAGE_SIZE + j, seed);
	}
}

/* First mismatch of request bytes [off, off + len) with @want, or -1. */
static long req_compare(struct request *req, size_t off, const u8 *want,
			size_t len)
{
	size_t i;

	for (i = 0; i < len; i++) {
		size_t at = off + i;
		u8 *p = page_address(req->pages[at / PAGE_SIZE]);

		if (p[at % PAGE_SIZE] != want[i])
			return i;
	}
	return -1;
}

/*
 * Read case: the CPU fills a request; the device reads EDU_MAX_XFER bytes
 * across a segment boundary into its buffer, then writes its buffer into
 * a coherent bounce buffer the CPU compares with the pattern.
 */
static int case_read(struct edu *edu, bool atomic, const char **path)
{
	struct device *dev = &edu->pdev->dev;
	size_t off = PAGE_SIZE / 2 + 3;
	struct request req;
	unsigned int xfers = 0;
	unsigned long flags;
	dma_addr_t bounce_dma;
	u8 *bounce, *want;
	long bad;
	size_t i;
	int ret;

	ret = req_alloc_pages(&req, 3, DMA_TO_DEVICE);
	if (ret)
		return ret;
	bounce = dma_alloc_coherent(dev, PAGE_SIZE, &bounce_dma, GFP_KERNEL);
	want = kmalloc(EDU_MAX_XFER, GFP_KERNEL);
	if (!bounce || !want) {
		ret = -ENOMEM;
		goto out_free;
	}
	req_fill(&req, 0x5a);
	for (i = 0; i < EDU_MAX_XFER; i++)
		want[i] = pattern(off + i, 0x5a);

	if (atomic) {
		spin_lock_irqsave(&queue_lock, flags);
		ret = req_map(dev, &req);
		spin_unlock_irqrestore(&queue_lock, flags);
	} else {
		ret = req_map(dev, &req);
	}
	if (ret)
		goto out_free;
	*path = dma_use_iova(&req.state) ? "iova" : "classic";
	ret = req_xfer(edu, &req, off, EDU_MAX_XFER, false, &xfers);
	req_unmap(dev, &req);
	if (ret)
		goto out_free;
	memset(bounce, 0, PAGE_SIZE);
	ret = edu_xfer(edu, bounce_dma, 0, EDU_MAX_XFER, true);
	if (ret)
		goto out_free;
	bad = -1;
	for (i = 0; i < EDU_MAX_XFER && bad < 0; i++)
		if (bounce[i] != want[i])
			bad = i;
	KTAP("    # %s path, %u device transfer(s), first bad byte %ld",
	     *path, xfers, bad);
	ret = bad < 0 ? 0 : -EIO;
out_free:
	kfree(want);
	if (bounce)
		dma_free_coherent(dev, PAGE_SIZE, bounce, bounce_dma);
	req_free_pages(&req);
	return ret;
}

/*
 * Write case: the device's buffer is loaded with a pattern from a coherent
 * buffer, then written through the request across a segment boundary; the
 * CPU checks the request's pages, and that the bytes around the written
 * span are untouched.
 */
static int case_write(struct edu *edu)
{
	struct device *dev = &edu->pdev->dev;
	size_t off = PAGE_SIZE - 100;
	struct request req;
	unsigned int xfers = 0;
	dma_addr_t src_dma;
	long bad, bad_edge;
	u8 *src, old[2];
	int ret;
	size_t i;

	ret = req_alloc_pages(&req, 2, DMA_FROM_DEVICE);
	if (ret)
		return ret;
	src = dma_alloc_coherent(dev, PAGE_SIZE, &src_dma, GFP_KERNEL);
	if (!src) {
		ret = -ENOMEM;
		goto out_free;
	}
	for (i = 0; i < EDU_MAX_XFER; i++)
		src[i] = pattern(i, 0xc3);
	req_fill(&req, 0x11);
	old[0] = pattern(off - 1, 0x11);
	old[1] = pattern(off + EDU_MAX_XFER, 0x11);
	ret = edu_xfer(edu, src_dma, 0, EDU_MAX_XFER, false);
	if (ret)
		goto out_free;
	ret = req_map(dev, &req);
	if (ret)
		goto out_free;
	ret = req_xfer(edu, &req, off, EDU_MAX_XFER, true, &xfers);
	req_unmap(dev, &req);
	if (ret)
		goto out_free;
	bad = req_compare(&req, off, src, EDU_MAX_XFER);
	bad_edge = req_compare(&req, off - 1, &old[0], 1) < 0 &&
		   req_compare(&req, off + EDU_MAX_XFER, &old[1], 1) < 0 ?
		   -1 : 1;
	KTAP("    # %u device transfer(s), first bad byte %ld, bytes beside the span %s",
	     xfers, bad, bad_edge < 0 ? "untouched" : "CHANGED");
	ret = bad < 0 && bad_edge < 0 ? 0 : -EIO;
out_free:
	if (src)
		dma_free_coherent(dev, PAGE_SIZE, src, src_dma);
	req_free_pages(&req);
	return ret;
}

/*
 * Many requests mapped and completed back to back: more than an
 * implementation that leaked a range per request could serve, so every
 * request takes the path the first one took.
 */
static int case_many(struct edu *edu)
{
	struct device *dev = &edu->pdev->dev;
	struct request req;
	unsigned int i, iova = 0, n = 40000;
	int ret;

	ret = req_alloc_pages(&req, REQ_MAX_SEGS, DMA_BIDIRECTIONAL);
	if (ret)
		return ret;
	for (i = 0; i < n; i++) {
		memset(&req.state, 0, sizeof(req.state));
		ret = req_map(dev, &req);
		if (ret)
			break;
		iova += dma_use_iova(&req.state);
		req_unmap(dev, &req);
	}
	KTAP("    # %u requests of %u pages, %u through an IOVA range",
	     i, REQ_MAX_SEGS, iova);
	req_free_pages(&req);
	if (!ret && iova && iova != n)
		ret = -ENOSPC;
	return ret;
}

static unsigned int ktap_n;
static unsigned int ktap_failed;

static void report(const char *name, int ret)
{
	ktap_n++;
	if (ret) {
		ktap_failed++;
		KTAP("    # %s: error %d", name, ret);
	}
	KTAP("%sok %u %s", ret ? "not " : "", ktap_n, name);
}

static void run_cases(struct edu *edu)
{
	const char *path = "none", *apath = "none";
	int ret;

	KTAP("KTAP version 1");
	KTAP("1..5");
	KTAP("# backend: %s", TWOSTEP_DMA_IOVA_NATIVE ?
	     "the kernel's own dma_iova_*" : "twostep");
	ret = case_read(edu, false, &path);
	report("request_read", ret);
	/*
	 * Without CONFIG_PREEMPTION twostep cannot tell that a call may
	 * sleep: the first one is refused and leaves the reservation to a
	 * worker (its header). The request after it takes the IOVA path.
	 */
	if (!ret && !TWOSTEP_DMA_IOVA_NATIVE && !IS_ENABLED(CONFIG_PREEMPTION) &&
	    expect_iova > 0 && strcmp(path, "iova")) {
		KTAP("    # no CONFIG_PREEMPTION: first request %s, again in 100 ms",
		     path);
		msleep(100);
		ret = case_read(edu, false, &path);
	}
	if (!ret && expect_iova >= 0 && expect_iova != !strcmp(path, "iova")) {
		KTAP("    # took the %s path, the host expects %s", path,
		     expect_iova ? "iova" : "classic");
		ret = -EINVAL;
	}
	report("path_as_expected", ret);
	report("request_write", case_write(edu));
	ret = case_read(edu, true, &apath);
	report("request_mapped_in_atomic_context", ret);
	report("many_requests", case_many(edu));
}

static int edu_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct edu *edu;
	int ret;

	if (the_edu)
		return -EBUSY;
	edu = devm_kzalloc(&pdev->dev, sizeof(*edu), GFP_KERNEL);
	if (!edu)
		return -ENOMEM;
	edu->pdev = pdev;
	init_completion(&edu->done);
	ret = pcim_enable_device(pdev);
	if (ret)
		return ret;
	edu->regs = pcim_iomap(pdev, 0, 0);
	if (!edu->regs)
		return -ENOMEM;
	if ((readl(edu->regs + EDU_REG_ID) & 0xff) != 0xed)
		return -ENODEV;
	pci_set_master(pdev);
	ret = dma_set_mask_and_coherent(&pdev->dev,
					DMA_BIT_MASK(hw_dma_bits));
	if (ret)
		return ret;
	ret = pci_alloc_irq_vectors(pdev, 1, 1, PCI_IRQ_MSI);
	if (ret < 0)
		return ret;
	edu->irq = pci_irq_vector(pdev, 0);
	ret = request_irq(edu->irq, edu_irq, 0, KBUILD_MODNAME, edu);
	if (ret)
		goto out_free_vectors;
	pci_set_drvdata(pdev, edu);
	the_edu = edu;
	return 0;

out_free_vectors:
	pci_free_irq_vectors(pdev);
	return ret;
}

static void edu_remove(struct pci_dev *pdev)
{
	struct edu *edu = pci_get_drvdata(pdev);

	free_irq(edu->irq, edu);
	pci_free_irq_vectors(pdev);
	pci_clear_master(pdev);
	the_edu = NULL;
}

static const struct pci_device_id edu_ids[] = {
	{ PCI_DEVICE(0x1234, 0x11e8) },
	{ }
};
MODULE_DEVICE_TABLE(pci, edu_ids);

static struct pci_driver edu_driver = {
	.name = "twostep_example",
	.id_table = edu_ids,
	.probe = edu_probe,
	.remove = edu_remove,
};

static int __init example_init(void)
{
	int ret = pci_register_driver(&edu_driver);

	if (ret)
		return ret;
	if (!the_edu) {
		pci_unregister_driver(&edu_driver);
		return -ENODEV;
	}
	run_cases(the_edu);
	if (ktap_failed) {
		pci_unregister_driver(&edu_driver);
		return -EIO;
	}
	return 0;
}

static void __exit example_exit(void)
{
	pci_unregister_driver(&edu_driver);
}

module_init(example_init);
module_exit(example_exit);
MODULE_DESCRIPTION("Example: an edu driver on upstream's dma_iova_* names");
MODULE_LICENSE("GPL");

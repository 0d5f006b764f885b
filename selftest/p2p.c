// SPDX-License-Identifier: GPL-2.0
/*
 * twostep self-test: peer-to-peer DMA through the host bridge, and the
 * attributes around it. A second PCI device, QEMU's ivshmem-plain, has a
 * RAM-backed BAR (BAR 2, its shared memory); edu reads and writes it
 * through a two-step range in which BAR pages are linked with
 * DMA_ATTR_MMIO beside pages of RAM, and through dma_map_phys() with
 * DMA_ATTR_MMIO on the classic path. The CPU checks every byte against a
 * pattern it generated, reading the BAR through an uncached mapping, and
 * each page edu wrote into the BAR is announced in a "p2p backend" line
 * (offset, length, CRC32 of what was written) that the host checks in the
 * memory backend's file once the guest is gone. On 7.3 every case runs
 * against the kernel's own dma_iova_*() and dma_map_phys() as well.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/crc32.h>
#include <linux/dma-mapping.h>
#include <linux/io.h>
#include <linux/mm.h>
#include <linux/pci.h>
#include <linux/slab.h>

#include "helpers.h"
#include "ktap.h"

#define P2P_VENDOR	0x1af4	/* Red Hat, Inc. */
#define P2P_DEVICE	0x1110	/* Inter-VM shared memory */
#define P2P_BAR		2
/* BAR pages per backend and case: twostep's first, native's after */
#define P2P_SLOT_PAGES	4

/* an attribute bit twostep does not know (upstream's DEBUGGING_...) */
#define P2P_UNKNOWN_ATTR	BIT(11)

static unsigned long p2p_bytes, p2p_mismatches, p2p_via_iova, p2p_via_phys;

struct p2p_bar {
	struct pci_dev *pdev;
	phys_addr_t phys;
	resource_size_t len;
	void __iomem *va;
};

/* The ivshmem device's shared-memory BAR, mapped uncached; 0 or TS_SKIP. */
static int p2p_bar_get(struct ts *t, struct p2p_bar *b)
{
	int ret;

	memset(b, 0, sizeof(*b));
	b->pdev = pci_get_device(P2P_VENDOR, P2P_DEVICE, NULL);
	if (!b->pdev) {
		if (!TS_EXPECT(t, t->p2p != 1,
			       "no ivshmem-plain device, and one was expected"))
			return 0;
		snprintf(t->skip, sizeof(t->skip),
			 "no ivshmem-plain device (PCI %04x:%04x)", P2P_VENDOR,
			 P2P_DEVICE);
		return TS_SKIP;
	}
	ret = pci_enable_device_mem(b->pdev);
	if (!TS_EXPECT(t, !ret, "enabling ivshmem: %d", ret))
		goto put_dev;
	b->phys = pci_resource_start(b->pdev, P2P_BAR);
	b->len = pci_resource_len(b->pdev, P2P_BAR);
	if (!TS_EXPECT(t, b->len >= 4 * P2P_SLOT_PAGES * PAGE_SIZE,
		       "ivshmem BAR %d holds %pa bytes", P2P_BAR, &b->len))
		goto disable;
	b->va = ioremap(b->phys, b->len);
	if (!TS_EXPECT(t, b->va, "ioremap of the BAR failed"))
		goto disable;
	ts_diag("ivshmem %s: BAR %d at %pa, %pa bytes", pci_name(b->pdev),
		P2P_BAR, &b->phys, &b->len);
	return 0;

disable:
	pci_disable_device(b->pdev);
put_dev:
	pci_dev_put(b->pdev);
	b->pdev = NULL;
	return 0;
}

static void p2p_bar_put(struct p2p_bar *b)
{
	if (!b->pdev)
		return;
	iounmap(b->va);
	pci_disable_device(b->pdev);
	pci_dev_put(b->pdev);
}

static void p2p_pattern(u8 *buf, u32 seed)
{
	size_t i;

	for (i = 0; i < PAGE_SIZE; i++)
		buf[i] = ts_pat(seed, i);
}

/* Count @got against @want; true when every byte matches. */
static bool p2p_check(struct ts *t, const char *what, const u8 *got,
		      const u8 *want)
{
	size_t i, bad = 0;

	for (i = 0; i < PAGE_SIZE; i++)
		bad += got[i] != want[i];
	p2p_bytes += PAGE_SIZE;
	p2p_mismatches += bad;
	return TS_EXPECT(t, !bad, "%s: %zu of %lu bytes differ", what, bad,
			 PAGE_SIZE);
}

/* edu wrote @buf to BAR offset @off: the CPU reads it back; tell the host */
static void p2p_check_bar(struct ts *t, struct p2p_bar *b, size_t off,
			  const u8 *want, u8 *tmp, const char *what)
{
	memcpy_fromio(tmp, b->va + off, PAGE_SIZE);
	p2p_check(t, what, tmp, want);
	ktap_line("# p2p backend %#zx %lu crc32 %08x", off, PAGE_SIZE,
		  crc32_le(~0U, want, PAGE_SIZE) ^ ~0U);
}

/*
 * A page through edu, in two halves: a transfer must stay below edu's
 * 4 KiB buffer size (QEMU 7.2 aborts on a full one).
 */
#define P2P_HALF	(PAGE_SIZE / 2)

static int p2p_dev_read(struct ts *t, dma_addr_t addr, u8 *out)
{
	int ret = ts_dev_read(t, addr, P2P_HALF, out);

	return ret ?: ts_dev_read(t, addr + P2P_HALF, P2P_HALF,
				  out + P2P_HALF);
}

static int p2p_dev_write(struct ts *t, dma_addr_t addr, const u8 *src)
{
	int ret = ts_dev_write(t, addr, src, P2P_HALF);

	return ret ?: ts_dev_write(t, addr + P2P_HALF, src + P2P_HALF,
				   P2P_HALF);
}

/* edu copies the page at @from to @to, through its buffer */
static int p2p_dev_copy(struct ts *t, dma_addr_t from, dma_addr_t to)
{
	size_t off;
	int ret = 0;

	for (off = 0; off < PAGE_SIZE && !ret; off += P2P_HALF) {
		ret = edu_dma(t->edu, from + off, 0, P2P_HALF, false);
		if (!ret)
			ret = edu_dma(t->edu, to + off, 0, P2P_HALF, true);
	}
	return ret;
}

/* One implementation of the two-step calls and of dma_map_phys(). */
struct p2p_ops {
	const char *name;
	unsigned int backend;
	bool (*try_alloc)(struct ts *t, void *st, size_t size,
			  dma_addr_t *addr);
	int (*link)(struct ts *t, void *st, phys_addr_t phys, size_t off,
		    unsigned long attrs);
	int (*sync)(struct ts *t, void *st, size_t size);
	void (*destroy)(struct ts *t, void *st, size_t size);
	dma_addr_t (*map_phys)(struct device *dev, phys_addr_t phys,
			       size_t size, enum dma_data_direction dir,
			       unsigned long attrs);
	void (*unmap_phys)(struct device *dev, dma_addr_t addr, size_t size,
			   enum dma_data_direction dir, unsigned long attrs);
};

static bool p2p_tw_try_alloc(struct ts *t, void *st, size_t size,
			     dma_addr_t *addr)
{
	struct twostep_iova_state *s = st;

	if (!ts_try_alloc(t, s, 0, size))
		return false;
	*addr = s->addr;
	return true;
}

static int p2p_tw_link(struct ts *t, void *st, phys_addr_t phys,
		       size_t off, unsigned long attrs)
{
	return twostep_iova_link(t->dev, st, phys, off, PAGE_SIZE,
				 DMA_BIDIRECTIONAL, attrs);
}

static int p2p_tw_sync(struct ts *t, void *st, size_t size)
{
	return twostep_iova_sync(t->dev, st, 0, size);
}

static void p2p_tw_destroy(struct ts *t, void *st, size_t size)
{
	twostep_iova_destroy(t->dev, st, size, DMA_BIDIRECTIONAL, 0);
}

static const struct p2p_ops p2p_twostep = {
	.name = "twostep",
	.backend = TS_BACKEND_TWOSTEP,
	.try_alloc = p2p_tw_try_alloc,
	.link = p2p_tw_link,
	.sync = p2p_tw_sync,
	.destroy = p2p_tw_destroy,
	.map_phys = twostep_dma_map_phys,
	.unmap_phys = twostep_dma_unmap_phys,
};

#if TS_HAVE_NATIVE
static bool p2p_up_try_alloc(struct ts *t, void *st, size_t size,
			     dma_addr_t *addr)
{
	struct dma_iova_state *s = st;

	memset(s, 0, sizeof(*s));
	if (!dma_iova_try_alloc(t->dev, s, 0, size))
		return false;
	*addr = s->addr;
	return true;
}

static int p2p_up_link(struct ts *t, void *st, phys_addr_t phys,
		       size_t off, unsigned long attrs)
{
	return dma_iova_link(t->dev, st, phys, off, PAGE_SIZE,
			     DMA_BIDIRECTIONAL, attrs);
}

static int p2p_up_sync(struct ts *t, void *st, size_t size)
{
	return dma_iova_sync(t->dev, st, 0, size);
}

static void p2p_up_destroy(struct ts *t, void *st, size_t size)
{
	dma_iova_destroy(t->dev, st, size, DMA_BIDIRECTIONAL, 0);
}

static const struct p2p_ops p2p_native = {
	.name = "native",
	.backend = TS_BACKEND_NATIVE,
	.try_alloc = p2p_up_try_alloc,
	.link = p2p_up_link,
	.sync = p2p_up_sync,
	.destroy = p2p_up_destroy,
	.map_phys = dma_map_phys,
	.unmap_phys = dma_unmap_phys,
};
#endif

static const struct p2p_ops *const p2p_backends[] = {
	&p2p_twostep,
#if TS_HAVE_NATIVE
	&p2p_native,
#endif
};

union p2p_state {
	struct twostep_iova_state ts;
#if TS_HAVE_NATIVE
	struct dma_iova_state up;
#endif
};

/* Scratch of a case: two pages of RAM and three page buffers. */
struct p2p_work {
	struct ts_pages ram;
	u8 *want, *got, *tmp;
};

static int p2p_work_get(struct ts *t, struct p2p_work *w)
{
	int ret;

	memset(w, 0, sizeof(*w));
	w->want = kmalloc(3 * PAGE_SIZE, GFP_KERNEL);
	if (!TS_EXPECT(t, w->want, "no memory"))
		return -ENOMEM;
	w->got = w->want + PAGE_SIZE;
	w->tmp = w->got + PAGE_SIZE;
	ret = ts_pages_get(t, &w->ram, 2);
	if (!TS_EXPECT(t, !ret, "page allocation: %d", ret)) {
		kfree(w->want);
		return ret;
	}
	return 0;
}

static void p2p_work_put(struct p2p_work *w)
{
	ts_pages_put(&w->ram);
	kfree(w->want);
}

/*
 * One range: RAM, BAR page A (MMIO), RAM, BAR page B (MMIO). edu reads A
 * (written by the CPU through the BAR), copies A into the second RAM page
 * inside the range, and writes a pattern into B; the RAM page before A
 * still reads right.
 */
static void p2p_iova_one(struct ts *t, const struct p2p_ops *o,
			 struct p2p_bar *b, struct p2p_work *w, size_t slot)
{
	size_t size = 4 * PAGE_SIZE, a_off = slot, b_off = slot + PAGE_SIZE;
	u32 seed = t->seed + slot;
	union p2p_state st;
	dma_addr_t addr;
	int ret;

	if (!TS_EXPECT(t, o->try_alloc(t, &st, size, &addr),
		       "%s: try_alloc of 4 pages said no", o->name))
		return;
	ts_pages_fill(&w->ram, seed);
	p2p_pattern(w->want, seed + 1);
	memcpy_toio(b->va + a_off, w->want, PAGE_SIZE);
	ret = o->link(t, &st, page_to_phys(w->ram.pg[0]), 0, 0);
	if (!ret)
		ret = o->link(t, &st, b->phys + a_off, PAGE_SIZE,
			      TWOSTEP_DMA_ATTR_MMIO);
	if (!ret)
		ret = o->link(t, &st, page_to_phys(w->ram.pg[1]),
			      2 * PAGE_SIZE, 0);
	if (!ret)
		ret = o->link(t, &st, b->phys + b_off, 3 * PAGE_SIZE,
			      TWOSTEP_DMA_ATTR_MMIO);
	if (!ret)
		ret = o->sync(t, &st, size);
	if (!TS_EXPECT(t, !ret, "%s: link or sync: %d", o->name, ret))
		goto destroy;

	/* the device reads the BAR page through the range */
	ret = p2p_dev_read(t, addr + PAGE_SIZE, w->got);
	if (TS_EXPECT(t, !ret, "%s: device read: %d", o->name, ret))
		p2p_check(t, "device read of a BAR page via IOVA", w->got,
			  w->want);
	/* and copies it into RAM inside the same range */
	ret = p2p_dev_copy(t, addr + PAGE_SIZE, addr + 2 * PAGE_SIZE);
	if (TS_EXPECT(t, !ret, "%s: BAR to RAM copy: %d", o->name, ret))
		p2p_check(t, "BAR page copied to RAM by the device",
			  page_address(w->ram.pg[1]), w->want);
	/* RAM beside the BAR pages still reads right */
	ret = p2p_dev_read(t, addr, w->got);
	if (TS_EXPECT(t, !ret, "%s: device read: %d", o->name, ret))
		p2p_check(t, "device read of RAM beside the BAR",
			  w->got, page_address(w->ram.pg[0]));
	/* the device writes a BAR page through the range */
	p2p_pattern(w->want, seed + 2);
	ret = p2p_dev_write(t, addr + 3 * PAGE_SIZE, w->want);
	if (TS_EXPECT(t, !ret, "%s: device write: %d", o->name, ret))
		p2p_check_bar(t, b, b_off, w->want, w->tmp,
			      "device write of a BAR page via IOVA");
	p2p_via_iova++;
destroy:
	o->destroy(t, &st, size);
	if (o->backend == TS_BACKEND_TWOSTEP)
		TS_EXPECT(t, !ts_mapped_pages(t, addr, size),
			  "pages of the destroyed range still translate");
}

/*
 * The classic path: a BAR page mapped with dma_map_phys(DMA_ATTR_MMIO),
 * a RAM page without; edu copies the BAR page into RAM, then a pattern
 * from RAM into the BAR page.
 */
static void p2p_phys_one(struct ts *t, const struct p2p_ops *o,
			 struct p2p_bar *b, struct p2p_work *w, size_t slot)
{
	struct device *dev = t->dev;
	phys_addr_t bar = b->phys + slot, ram = page_to_phys(w->ram.pg[0]);
	u32 seed = t->seed + slot;
	dma_addr_t abar, aram;
	int ret;

	p2p_pattern(w->want, seed + 3);
	memcpy_toio(b->va + slot, w->want, PAGE_SIZE);
	memset(page_address(w->ram.pg[0]), 0, PAGE_SIZE);
	abar = o->map_phys(dev, bar, PAGE_SIZE, DMA_BIDIRECTIONAL,
			   TWOSTEP_DMA_ATTR_MMIO);
	if (!TS_EXPECT(t, !dma_mapping_error(dev, abar),
		       "%s: dma_map_phys(DMA_ATTR_MMIO) failed", o->name))
		return;
	aram = o->map_phys(dev, ram, PAGE_SIZE, DMA_BIDIRECTIONAL, 0);
	if (!TS_EXPECT(t, !dma_mapping_error(dev, aram),
		       "%s: dma_map_phys of RAM failed", o->name))
		goto unmap_bar;
	ret = p2p_dev_copy(t, abar, aram);
	if (TS_EXPECT(t, !ret, "%s: BAR to RAM copy: %d", o->name, ret))
		p2p_check(t, "BAR page copied to RAM via dma_map_phys",
			  page_address(w->ram.pg[0]), w->want);
	p2p_pattern(w->want, seed + 4);
	memcpy(page_address(w->ram.pg[0]), w->want, PAGE_SIZE);
	ret = p2p_dev_copy(t, aram, abar);
	if (TS_EXPECT(t, !ret, "%s: RAM to BAR copy: %d", o->name, ret))
		p2p_check_bar(t, b, slot, w->want, w->tmp,
			      "RAM copied to a BAR page via dma_map_phys");
	p2p_via_phys++;
	o->unmap_phys(dev, aram, PAGE_SIZE, DMA_BIDIRECTIONAL, 0);
unmap_bar:
	o->unmap_phys(dev, abar, PAGE_SIZE, DMA_BIDIRECTIONAL,
		      TWOSTEP_DMA_ATTR_MMIO);
}

static int case_p2p_data(struct ts *t)
{
	struct p2p_work w;
	struct p2p_bar b;
	unsigned int i;
	int ret;

	ret = p2p_bar_get(t, &b);
	if (ret || !b.pdev)
		return ret;
	if (p2p_work_get(t, &w))
		goto put_bar;
	for (i = 0; i < ARRAY_SIZE(p2p_backends); i++) {
		const struct p2p_ops *o = p2p_backends[i];
		size_t slot = (size_t)i * 2 * P2P_SLOT_PAGES * PAGE_SIZE;

		if (!(t->backends & o->backend))
			continue;
		if (t->api || o->backend == TS_BACKEND_NATIVE)
			p2p_iova_one(t, o, &b, &w, slot);
		p2p_phys_one(t, o, &b, &w, slot + P2P_SLOT_PAGES * PAGE_SIZE);
	}
	p2p_work_put(&w);
put_bar:
	p2p_bar_put(&b);
	return 0;
}

/*
 * What twostep refuses that upstream ignores: an attribute bit it does not
 * know, on a link and on dma_map_phys(). Nothing of the refused link may
 * translate, and the range stays usable.
 */
static int case_attrs_unknown(struct ts *t)
{
	struct twostep_iova_state st;
	struct page *pg;
	dma_addr_t a;
	int ret;

	pg = alloc_page(GFP_KERNEL);
	if (!TS_EXPECT(t, pg, "no page"))
		return 0;
	if (!TS_EXPECT(t, ts_try_alloc(t, &st, 0, PAGE_SIZE),
		       "try_alloc said no"))
		goto free_page;
	ret = twostep_iova_link(t->dev, &st, page_to_phys(pg), 0, PAGE_SIZE,
				DMA_TO_DEVICE, P2P_UNKNOWN_ATTR);
	TS_EXPECT(t, ret == -EINVAL, "link with bit 11: %d, not -EINVAL",
		  ret);
	TS_EXPECT(t, !ts_mapped_pages(t, st.addr, PAGE_SIZE),
		  "the refused link translates");
	ret = twostep_iova_link(t->dev, &st, page_to_phys(pg), 0, PAGE_SIZE,
				DMA_TO_DEVICE, TWOSTEP_DMA_ATTR_REQUIRE_COHERENT |
				DMA_ATTR_SKIP_CPU_SYNC);
	TS_EXPECT(t, !ret, "link with known attributes: %d", ret);
	TS_EXPECT(t, ts_mapped_pages(t, st.addr, PAGE_SIZE) == 1,
		  "the accepted link does not translate");
	twostep_iova_destroy(t->dev, &st, PAGE_SIZE, DMA_TO_DEVICE, 0);
	a = twostep_dma_map_phys(t->dev, page_to_phys(pg), PAGE_SIZE,
				 DMA_TO_DEVICE, P2P_UNKNOWN_ATTR);
	if (!TS_EXPECT(t, dma_mapping_error(t->dev, a),
		       "dma_map_phys with bit 11 mapped"))
		twostep_dma_unmap_phys(t->dev, a, PAGE_SIZE, DMA_TO_DEVICE, 0);
free_page:
	__free_page(pg);
	return 0;
}

/*
 * DMA_ATTR_REQUIRE_COHERENT on the classic path. An untrusted device's
 * unaligned range is bounced through swiotlb where the guest has it (the
 * amd cells: memory hotplug room above 4 GiB makes x86 set swiotlb up), so
 * dma_map_phys() with the attribute must fail where the same range maps
 * without it; an aligned page needs no bounce and maps either way. The
 * untrusted device is ivshmem, only mapped for, never a DMA master: a
 * bounce marks a device as needing syncs for good (6.12 and later), which
 * would keep edu from the hmm cases. edu reads a page mapped with the
 * attribute. Where nothing bounces (no swiotlb) a refusal cannot be told
 * from a failure, and the case says so with a skip after its other checks.
 */
static int case_require_coherent(struct ts *t)
{
	const size_t off = 64, len = 512;
	unsigned int i, bounced = 0;
	struct device *bdev;
	struct p2p_work w;
	struct p2p_bar b;
	int ret;

	ret = p2p_bar_get(t, &b);
	if (ret || !b.pdev)
		return ret;
	bdev = &b.pdev->dev;
	if (p2p_work_get(t, &w))
		goto put_bar;
	for (i = 0; i < ARRAY_SIZE(p2p_backends); i++) {
		const struct p2p_ops *o = p2p_backends[i];
		phys_addr_t phys = page_to_phys(w.ram.pg[0]);
		u8 *want = page_address(w.ram.pg[0]);
		dma_addr_t a;
		bool bounce;

		if (!(t->backends & o->backend))
			continue;
		ts_pages_fill(&w.ram, t->seed + i);
		b.pdev->untrusted = 1;
		a = o->map_phys(bdev, phys + off, len, DMA_TO_DEVICE, 0);
		bounce = !dma_mapping_error(bdev, a);
		if (bounce) {
			bounced++;
			o->unmap_phys(bdev, a, len, DMA_TO_DEVICE, 0);
		}
		a = o->map_phys(bdev, phys + off, len, DMA_TO_DEVICE,
				TWOSTEP_DMA_ATTR_REQUIRE_COHERENT);
		if (!TS_EXPECT(t, dma_mapping_error(bdev, a),
			       "%s: an unaligned range of an untrusted device mapped with REQUIRE_COHERENT (bounced without it: %d)",
			       o->name, bounce))
			o->unmap_phys(bdev, a, len, DMA_TO_DEVICE,
				      TWOSTEP_DMA_ATTR_REQUIRE_COHERENT);
		a = o->map_phys(bdev, phys, PAGE_SIZE, DMA_TO_DEVICE,
				TWOSTEP_DMA_ATTR_REQUIRE_COHERENT);
		if (TS_EXPECT(t, !dma_mapping_error(bdev, a),
			      "%s: an aligned page of an untrusted device was refused",
			      o->name))
			o->unmap_phys(bdev, a, PAGE_SIZE, DMA_TO_DEVICE,
				      TWOSTEP_DMA_ATTR_REQUIRE_COHERENT);
		b.pdev->untrusted = 0;
		a = o->map_phys(t->dev, phys, PAGE_SIZE, DMA_TO_DEVICE,
				TWOSTEP_DMA_ATTR_REQUIRE_COHERENT);
		if (TS_EXPECT(t, !dma_mapping_error(t->dev, a),
			      "%s: edu's aligned page was refused", o->name)) {
			ret = p2p_dev_read(t, a, w.got);
			TS_EXPECT(t, !ret && !memcmp(w.got, want, PAGE_SIZE),
				  "%s: the aligned page reads wrong (%d)",
				  o->name, ret);
			o->unmap_phys(t->dev, a, PAGE_SIZE, DMA_TO_DEVICE,
				      TWOSTEP_DMA_ATTR_REQUIRE_COHERENT);
		}
		ts_diag("%s: without the attribute the unaligned range was %s",
			o->name, bounce ? "bounced" : "refused too");
	}
	p2p_work_put(&w);
	p2p_bar_put(&b);
	if (!bounced) {
		snprintf(t->skip, sizeof(t->skip),
			 "no swiotlb in this guest: nothing bounces, a refusal proves nothing");
		return TS_SKIP;
	}
	return 0;

put_bar:
	p2p_bar_put(&b);
	return 0;
}

static int case_p2p_summary(struct ts *t)
{
	if (!p2p_bytes) {
		snprintf(t->skip, sizeof(t->skip), "no P2P case ran");
		return TS_SKIP;
	}
	ktap_line("# summary: p2p bytes checked %lu mismatches %lu via iova %lu via phys %lu",
		  p2p_bytes, p2p_mismatches, p2p_via_iova, p2p_via_phys);
	return 0;
}

const struct ts_case ts_p2p_cases[] = {
	{ "p2p_data", case_p2p_data, false },
	{ "attrs_unknown", case_attrs_unknown, true },
	{ "require_coherent", case_require_coherent, true },
	{ "p2p_summary", case_p2p_summary, false },
};

const unsigned int ts_p2p_ncases = ARRAY_SIZE(ts_p2p_cases);

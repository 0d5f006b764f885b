// SPDX-License-Identifier: GPL-2.0
/*
 * twostep self-test: the KTAP cases. Each moves real data with the edu DMA
 * engine through contiguous IOVA built from scattered pages and compares
 * every byte, or proves that data did not move where it must not.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dma-mapping.h>
#include <linux/iommu.h>
#include <linux/irqflags.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/vmalloc.h>

#include <linux/scatterlist.h>

#include "helpers.h"
#include "odp.h"

/* ---- cases ---- */

static int case_edu_identity(struct ts *t)
{
	u32 id = readl(t->edu->regs + EDU_REG_ID);
	u32 v;

	ts_diag("edu id %#x", id);
	TS_EXPECT(t, (id & 0xff) == EDU_ID_MAGIC, "id %#x", id);
	writel(0x12345678, t->edu->regs + EDU_REG_LIVENESS);
	v = readl(t->edu->regs + EDU_REG_LIVENESS);
	TS_EXPECT(t, v == ~0x12345678u, "liveness %#x", v);
	writel(0, t->edu->regs + EDU_REG_LIVENESS);
	v = readl(t->edu->regs + EDU_REG_LIVENESS);
	TS_EXPECT(t, v == ~0u, "liveness %#x", v);
	return 0;
}

/* Requests QEMU 7.2 would abort on never reach the device. */
static int case_edu_guard(struct ts *t)
{
	unsigned long before = t->edu->dma_started;
	u64 beyond = t->edu->ram_limit;

	TS_EXPECT(t, edu_dma(t->edu, ts_probe_dma, 0, 0, false) == -EINVAL,
		  "count 0");
	TS_EXPECT(t, edu_dma(t->edu, ts_probe_dma, 0, EDU_BUF_SIZE, false) ==
		  -EINVAL, "full 4096-byte transfer");
	TS_EXPECT(t, edu_dma(t->edu, ts_probe_dma, 1, EDU_MAX_XFER, true) ==
		  -EINVAL, "transfer ending at the buffer end");
	TS_EXPECT(t, edu_dma(t->edu, ts_probe_dma, EDU_BUF_SIZE, 1, true) ==
		  -EINVAL, "offset past the buffer");
	TS_EXPECT(t, edu_dma(t->edu, beyond, 0, 2, true) == -EINVAL,
		  "RAM range past the device's reach");
	TS_EXPECT(t, edu_dma(t->edu, U64_MAX, 0, 16, false) == -EINVAL,
		  "RAM range wrapping around");
	TS_EXPECT(t, t->edu->dma_started == before,
		  "%lu refused requests reached the device",
		  t->edu->dma_started - before);
	return 0;
}

/* The regular DMA API on the same device, both directions. */
static int case_classic_dma(struct ts *t)
{
	u8 *buf = kmalloc(EDU_MAX_XFER, GFP_KERNEL);
	struct page *pg = alloc_page(GFP_KERNEL);
	dma_addr_t addr;
	u32 i, len = 3000;
	int ret;

	if (!TS_EXPECT(t, buf && pg, "allocation"))
		goto out;
	for (i = 0; i < PAGE_SIZE; i++)
		((u8 *)page_address(pg))[i] = ts_pat(t->seed, i);
	addr = dma_map_page(t->dev, pg, 0, PAGE_SIZE, DMA_BIDIRECTIONAL);
	if (!TS_EXPECT(t, !dma_mapping_error(t->dev, addr), "dma_map_page"))
		goto out;
	ts_diag("dma_map_page address %pad", &addr);
	ret = ts_dev_read(t, addr + 100, len, buf);
	TS_EXPECT(t, !ret, "device read: %d", ret);
	TS_EXPECT(t, !memcmp(buf, page_address(pg) + 100, len),
		  "device read the wrong bytes");
	for (i = 0; i < len; i++)
		buf[i] = ts_pat(t->seed + 1, i);
	ret = ts_dev_write(t, addr + 50, buf, len);
	TS_EXPECT(t, !ret, "device write: %d", ret);
	TS_EXPECT(t, !memcmp(buf, page_address(pg) + 50, len),
		  "device wrote the wrong bytes");
	dma_unmap_page(t->dev, addr, PAGE_SIZE, DMA_BIDIRECTIONAL);
out:
	if (pg)
		__free_page(pg);
	kfree(buf);
	return 0;
}

/*
 * Detach gives the reservation back to the DMA API: reserving the same size
 * again gets the same range (the DMA API's allocator is deterministic; in
 * lazy mode the range comes back only after its flush queue drains, so
 * there the address is only reported). Also where the range ends at 2^64.
 */
static void ts_attach_again(struct ts *t)
{
	struct iommu_domain *dom = ts_domain(t);
	u64 start0, len0, start1 = 0, len1;
	int ret;

	if (!TS_EXPECT(t, !twostep_get_chunk(t->dev, 0, &start0, &len0),
		       "chunk 0"))
		return;
	twostep_detach(t->dev);
	ret = twostep_attach(t->dev, len0, len0);
	if (!TS_EXPECT(t, !ret, "attach again: %d", ret))
		return;
	TS_EXPECT(t, !twostep_get_chunk(t->dev, 0, &start1, &len1),
		  "chunk 0 again");
	ts_diag("detached and reserved again: [%#llx + %#llx], before [%#llx + %#llx]%s",
		start1, len1, start0, len0,
		start0 + (len0 - 1) == U64_MAX ? " (ends at 2^64)" : "");
	if (dom && dom->type != IOMMU_DOMAIN_DMA_FQ)
		TS_EXPECT(t, start1 == start0,
			  "the reservation did not go back to the DMA API");
}

/*
 * The API is there exactly where the domain translates, with no set-up:
 * where it is not, try_alloc says no, attach says -ENODEV and twostep
 * holds nothing. Where it is, an explicit attach reserves up front, a
 * second one is refused, and the reservation is really taken from the DMA
 * API: nothing of it translates, and none of 256 dma_map_page() addresses
 * handed out meanwhile falls inside it (a private window that the DMA API
 * does not know of would be handed out again).
 */
static int case_attach(struct ts *t)
{
	struct twostep_stats s;
	unsigned int i, inside = 0, mapped = 0, n = 256;
	struct page *pg;
	dma_addr_t *addr;
	u64 start, len;
	int ret;

	if (t->expect_api == 0 || (t->expect_api < 0 && !t->api)) {
		TS_EXPECT(t, !t->api, "try_alloc works where no IOMMU translates");
		ret = twostep_attach(t->dev, SZ_4M, 0);
		TS_EXPECT(t, ret == -ENODEV, "attach returned %d", ret);
		TS_EXPECT(t, twostep_get_stats(t->dev, &s) == -ENODEV,
			  "twostep holds something for the device");
		return 0;
	}
	if (!TS_EXPECT(t, t->api, "try_alloc says no"))
		return 0;
	twostep_detach(t->dev);
	ret = twostep_attach(t->dev, SZ_64M, SZ_16M);
	if (!TS_EXPECT(t, !ret, "attach returned %d", ret))
		return 0;
	ts_stats(t, &s);
	ts_diag("reserved %llu MiB in %u chunk(s), granule %lu, grown in %llu us",
		s.reserved >> 20, s.chunks, s.granule, s.grow_ns / 1000);
	TS_EXPECT(t, s.reserved >= SZ_64M, "reserved %llu", s.reserved);
	TS_EXPECT(t, s.granule == PAGE_SIZE / ts_gpp(t), "granule %lu",
		  s.granule);
	ret = twostep_attach(t->dev, 0, 0);
	TS_EXPECT(t, ret == -EBUSY, "second attach: %d", ret);
	for (i = 0; !twostep_get_chunk(t->dev, i, &start, &len); i++) {
		ts_diag("chunk %u: [%#llx + %#llx]", i, start, len);
		TS_EXPECT(t, start + len - 1 <= dma_get_mask(t->dev),
			  "chunk past the DMA mask");
		TS_EXPECT(t, !ts_mapped_pages(t, start, len),
			  "reserved chunk translates");
	}

	addr = kcalloc(n, sizeof(*addr), GFP_KERNEL);
	pg = alloc_page(GFP_KERNEL);
	if (!TS_EXPECT(t, addr && pg, "allocation"))
		goto out;
	for (i = 0; i < n; i++) {
		addr[i] = dma_map_page(t->dev, pg, 0, PAGE_SIZE, DMA_TO_DEVICE);
		if (dma_mapping_error(t->dev, addr[i]))
			break;
		mapped++;
		inside += ts_in_chunks(t->dev, addr[i], PAGE_SIZE);
	}
	ts_diag("%u DMA-API addresses from %pad, %u inside the reservation",
		mapped, &addr[0], inside);
	TS_EXPECT(t, mapped == n && !inside, "DMA API overlaps twostep");
	while (mapped)
		dma_unmap_page(t->dev, addr[--mapped], PAGE_SIZE,
			       DMA_TO_DEVICE);
	ts_attach_again(t);
out:
	if (pg)
		__free_page(pg);
	kfree(addr);
	return 0;
}

/* The phys offset inside a granule lands in the low bits of the IOVA. */
static int case_try_alloc_offset(struct ts *t)
{
	static const u32 offs[] = { 0, 1, 0x123, 0x800, 0xfff };
	struct twostep_iova_state st;
	struct twostep_stats s0, s1;
	u64 gran;
	struct page *pg;
	u8 buf[200];
	unsigned int i;
	int ret;

	/* the IOMMU driver's granule, a page or less */
	gran = ts_domain(t) ? 1ULL << __ffs(ts_domain(t)->pgsize_bitmap) :
			      PAGE_SIZE;
	ts_stats(t, &s0);
	for (i = 0; i < ARRAY_SIZE(offs); i++) {
		phys_addr_t phys = 0x7000 + offs[i];

		if (!TS_EXPECT(t, ts_try_alloc(t, &st, phys, 3 * PAGE_SIZE),
			       "offset %#x", offs[i]))
			continue;
		TS_EXPECT(t, (st.addr & (gran - 1)) == (phys & (gran - 1)),
			  "addr %pad for phys %pa, granule %#llx", &st.addr,
			  &phys, gran);
		TS_EXPECT(t, twostep_use_iova(&st), "use_iova");
		TS_EXPECT(t, twostep_iova_size(&st) == 3 * PAGE_SIZE, "size");
		TS_EXPECT(t, ts_in_chunks(t->dev, st.addr, 3 * PAGE_SIZE),
			  "addr %pad outside the reservation", &st.addr);
		twostep_iova_free(t->dev, &st);
		TS_EXPECT(t, !st.addr && !st.__size, "state not cleared");
	}

	/* And the device really reads at that offset. */
	pg = alloc_page(GFP_KERNEL);
	if (!TS_EXPECT(t, pg, "page"))
		return 0;
	for (i = 0; i < PAGE_SIZE; i++)
		((u8 *)page_address(pg))[i] = ts_pat(t->seed, i);
	if (TS_EXPECT(t, ts_try_alloc(t, &st, page_to_phys(pg) + 0x123,
				      sizeof(buf)), "try_alloc")) {
		ret = twostep_iova_link(t->dev, &st, page_to_phys(pg) + 0x123,
					0, sizeof(buf), DMA_TO_DEVICE, 0);
		TS_EXPECT(t, !ret, "link: %d", ret);
		ret = twostep_iova_sync(t->dev, &st, 0, sizeof(buf));
		TS_EXPECT(t, !ret, "sync: %d", ret);
		ret = ts_dev_read(t, st.addr, sizeof(buf), buf);
		TS_EXPECT(t, !ret, "device read: %d", ret);
		TS_EXPECT(t, !memcmp(buf, page_address(pg) + 0x123,
				     sizeof(buf)),
			  "device read the wrong bytes");
		twostep_iova_destroy(t->dev, &st, sizeof(buf),
				     DMA_TO_DEVICE, 0);
	}
	__free_page(pg);
	ts_stats(t, &s1);
	TS_EXPECT(t, s1.live_allocs == s0.live_allocs, "live allocations");
	return 0;
}

/* Refused sizes return false and leave a zeroed state. */
static int case_try_alloc_refuse(struct ts *t)
{
	static const u64 sizes[] = { 0, 1ULL << 63, (1ULL << 63) | PAGE_SIZE,
				     1ULL << 62 };
	struct twostep_iova_state st;
	struct twostep_stats s0, s1;
	unsigned int i;

	ts_stats(t, &s0);
	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		memset(&st, 0xab, sizeof(st));
		TS_EXPECT(t, !ts_try_alloc(t, &st, 0, sizes[i]),
			  "size %#llx accepted", sizes[i]);
		TS_EXPECT(t, !st.addr && !st.__size,
			  "state not zeroed for size %#llx", sizes[i]);
	}
	/* One granule more than the device or the domain can address. */
	memset(&st, 0xab, sizeof(st));
	TS_EXPECT(t, !ts_try_alloc(t, &st, 0, ts_too_large(t)),
		  "larger than the device can address: %#llx", ts_too_large(t));
	TS_EXPECT(t, !st.addr && !st.__size, "state not zeroed");
	/* A real device without an IOMMU group, and no device at all. */
	memset(&st, 0xab, sizeof(st));
	TS_EXPECT(t, !twostep_iova_try_alloc(ts_dev_without_iommu(t), &st, 0,
					     PAGE_SIZE), "device without IOMMU");
	TS_EXPECT(t, !st.addr && !st.__size, "state not zeroed");
	memset(&st, 0xab, sizeof(st));
	TS_EXPECT(t, !twostep_iova_try_alloc(NULL, &st, 0, PAGE_SIZE),
		  "NULL device");
	TS_EXPECT(t, !st.addr && !st.__size, "state not zeroed");
	ts_stats(t, &s1);
	TS_EXPECT(t, s1.live_allocs == s0.live_allocs, "live allocations");
	return 0;
}

/*
 * Free hands the range back: 2000 rounds of allocating and freeing 256 KiB
 * (500 MiB in all) fit in the reservation the first two allocations made,
 * without growing it; a free that leaked IOVA would make it grow. Live
 * ranges never overlap.
 */
static int case_free_returns_range(struct ts *t)
{
	struct twostep_iova_state a, b, c;
	struct twostep_stats s0, s1;
	size_t size = 64 * PAGE_SIZE;
	unsigned int i, overlaps = 0, fails = 0;

	if (!TS_EXPECT(t, ts_try_alloc(t, &a, 0, size), "a"))
		return 0;
	if (!TS_EXPECT(t, ts_try_alloc(t, &b, 0, size), "b"))
		goto out_free_a;
	TS_EXPECT(t, b.addr + size <= a.addr || a.addr + size <= b.addr,
		  "live ranges overlap: %pad %pad", &a.addr, &b.addr);
	twostep_iova_free(t->dev, &b);
	ts_stats(t, &s0);
	for (i = 0; i < 2000; i++) {
		if (!ts_try_alloc(t, &c, 0, size)) {
			fails++;
			continue;
		}
		overlaps += !(c.addr + size <= a.addr ||
			      a.addr + size <= c.addr);
		twostep_iova_free(t->dev, &c);
	}
	ts_stats(t, &s1);
	ts_diag("2000 x 256 KiB: reserved %llu -> %llu KiB, live %lu -> %lu",
		s0.reserved >> 10, s1.reserved >> 10, s0.live_allocs,
		s1.live_allocs);
	TS_EXPECT(t, !fails && !overlaps, "%u failures, %u overlaps", fails,
		  overlaps);
	TS_EXPECT(t, s1.reserved == s0.reserved, "reservation grew: leak");
	TS_EXPECT(t, s1.live_allocs == s0.live_allocs, "live allocations");
out_free_a:
	twostep_iova_free(t->dev, &a);
	return 0;
}

/*
 * Control for the platform, with the regular DMA API only: two scattered
 * pages mapped as one contiguous range by dma_map_sgtable(), and a 2-byte
 * device read and write across their boundary. QEMU 7.2's virtio-iommu
 * can lose the byte before the boundary; where it does, the case says so
 * and skips, and the contiguity case leaves such windows out.
 */
static int case_platform_cross_page(struct ts *t)
{
	static const u8 two[2] = { 0x5a, 0xa5 };
	struct scatterlist *sg;
	struct sg_table sgt;
	u8 got[2];
	struct ts_pages p;
	dma_addr_t addr;
	int ret, i;

	if (!TS_EXPECT(t, !ts_pages_get(t, &p, 2), "pages"))
		return 0;
	ts_pages_fill(&p, t->seed);
	ret = sg_alloc_table(&sgt, 2, GFP_KERNEL);
	if (!TS_EXPECT(t, !ret, "sg table"))
		goto out_pages;
	for_each_sgtable_sg(&sgt, sg, i)
		sg_set_page(sg, p.pg[i], PAGE_SIZE, 0);
	ret = dma_map_sgtable(t->dev, &sgt, DMA_BIDIRECTIONAL, 0);
	if (!TS_EXPECT(t, !ret, "dma_map_sgtable: %d", ret))
		goto out_table;
	ret = TS_SKIP;
	if (sgt.nents != 1) {
		snprintf(t->skip, sizeof(t->skip),
			 "the DMA API did not merge the pages (%u segments)",
			 sgt.nents);
		goto out_unmap;
	}
	addr = sg_dma_address(sgt.sgl);
	TS_EXPECT(t, !ts_dev_read(t, addr + PAGE_SIZE - 1, 2, got), "read");
	TS_EXPECT(t, got[1] == *ts_byte(&p, PAGE_SIZE),
		  "read: byte after the boundary lost too");
	t->edge_read_dropped = got[0] != *ts_byte(&p, PAGE_SIZE - 1);
	TS_EXPECT(t, !ts_dev_write(t, addr + PAGE_SIZE - 1, two, 2), "write");
	TS_EXPECT(t, *ts_byte(&p, PAGE_SIZE) == two[1],
		  "byte after the boundary lost too");
	t->edge_write_dropped = *ts_byte(&p, PAGE_SIZE - 1) != two[0];
	if (t->edge_write_dropped || t->edge_read_dropped)
		snprintf(t->skip, sizeof(t->skip),
			 "platform loses the byte before a page boundary in device %s%s%s (DMA API)",
			 t->edge_read_dropped ? "reads" : "",
			 t->edge_read_dropped && t->edge_write_dropped ?
			 " and " : "",
			 t->edge_write_dropped ? "writes" : "");
	else
		ret = 0;
out_unmap:
	dma_unmap_sgtable(t->dev, &sgt, DMA_BIDIRECTIONAL, 0);
out_table:
	sg_free_table(&sgt);
out_pages:
	ts_pages_put(&p);
	return ret;
}

/* Windows (offset, length) that straddle page boundaries. */
static const struct { u32 off, len; } ts_read_windows[] = {
	{ 1 * PAGE_SIZE - 1, 2 }, { 3 * PAGE_SIZE - 100, 700 },
	{ 7 * PAGE_SIZE - 2048, EDU_MAX_XFER },
	{ 8 * PAGE_SIZE - 4000, EDU_MAX_XFER },
	{ 12 * PAGE_SIZE - 3000, 3500 }, { 15 * PAGE_SIZE - 17, 2000 },
}, ts_write_windows[] = {
	{ 2 * PAGE_SIZE - 1, 2 }, { 4 * PAGE_SIZE - 100, 700 },
	{ 6 * PAGE_SIZE - 2048, EDU_MAX_XFER },
	{ 9 * PAGE_SIZE - 4000, EDU_MAX_XFER },
	{ 13 * PAGE_SIZE - 3000, 3500 }, { 16 * PAGE_SIZE - 1, 1 },
};

/*
 * Scattered pages linked one by one at consecutive offsets, one sync, then
 * DMA both ways through windows that straddle page boundaries.
 */
static int case_contiguity(struct ts *t)
{
	const unsigned int n = 16;
	struct ts_map m;
	unsigned int i, pairs;
	u8 *shadow, *buf;
	u32 seed = t->seed + 2;
	long diff;
	int ret;

	shadow = vmalloc(n * PAGE_SIZE);
	buf = kmalloc(EDU_MAX_XFER, GFP_KERNEL);
	if (!TS_EXPECT(t, shadow && buf, "allocation"))
		goto out_free;
	if (ts_map_setup(t, &m, n, DMA_BIDIRECTIONAL, seed))
		goto out_teardown;
	pairs = ts_pages_contiguous_pairs(&m.p);
	ts_diag("%u pages, %u physically adjacent pairs, IOVA %pad",
		n, pairs, &m.st.addr);
	TS_EXPECT(t, pairs < n - 1, "pages are physically contiguous");
	for (i = 0; i < n; i++)
		TS_EXPECT(t, ts_mapped_pages(t, m.st.addr + i * PAGE_SIZE, 1) &&
			  iommu_iova_to_phys(ts_domain(t),
					     m.st.addr + i * PAGE_SIZE) ==
			  page_to_phys(m.p.pg[i]),
			  "IOVA page %u does not translate to its page", i);

	for (i = 0; i < ARRAY_SIZE(ts_read_windows); i++) {
		u32 off = ts_read_windows[i].off, len = ts_read_windows[i].len;
		size_t j;

		if (t->edge_read_dropped && len > 1 &&
		    off % PAGE_SIZE == PAGE_SIZE - 1) {
			ts_diag("read %u+%u left out: %s", off, len,
				"the platform drops its first byte (see platform_cross_page)");
			continue;
		}
		ret = ts_dev_read(t, m.st.addr + off, len, buf);
		if (!TS_EXPECT(t, !ret, "read %u+%u: %d", off, len, ret))
			break;
		for (j = 0; j < len; j++)
			if (buf[j] != ts_pat(seed, off + j))
				break;
		TS_EXPECT(t, j == len, "read %u+%u: byte %zu differs",
			  off, len, j);
	}

	ts_pages_copy(&m.p, shadow);
	for (i = 0; i < ARRAY_SIZE(ts_write_windows); i++) {
		u32 off = ts_write_windows[i].off, len = ts_write_windows[i].len;
		size_t j;

		if (t->edge_write_dropped && len > 1 &&
		    off % PAGE_SIZE == PAGE_SIZE - 1) {
			ts_diag("write %u+%u left out: %s", off, len,
				"the platform drops its first byte (see platform_cross_page)");
			continue;
		}
		for (j = 0; j < len; j++)
			buf[j] = ts_pat(seed + 100 + i, j);
		ret = ts_dev_write(t, m.st.addr + off, buf, len);
		if (!TS_EXPECT(t, !ret, "write %u+%u: %d", off, len, ret))
			break;
		memcpy(shadow + off, buf, len);
		diff = ts_pages_diff(&m.p, shadow);
		TS_EXPECT(t, diff < 0, "write %u+%u: byte at %ld differs",
			  off, len, diff);
	}
out_teardown:
	ts_map_teardown(t, &m, DMA_BIDIRECTIONAL);
out_free:
	kfree(buf);
	vfree(shadow);
	return 0;
}

/* Unlink part of a range, link other pages there: the device sees them. */
static int case_unlink_relink(struct ts *t)
{
	const unsigned int n = 8, lo = 2, cnt = 4;
	struct ts_pages fresh;
	struct twostep_stats s0, s1;
	struct ts_map m;
	unsigned int i;
	u32 seed = t->seed + 3, seed2 = t->seed + 4;
	u8 *buf;
	int ret;

	buf = kmalloc(EDU_MAX_XFER, GFP_KERNEL);
	if (!TS_EXPECT(t, buf, "allocation"))
		return 0;
	fresh.n = 0;
	if (ts_map_setup(t, &m, n, DMA_BIDIRECTIONAL, seed))
		goto out;
	ts_stats(t, &s0);
	twostep_iova_unlink(t->dev, &m.st, lo * PAGE_SIZE, cnt * PAGE_SIZE,
			    DMA_BIDIRECTIONAL, 0);
	ts_stats(t, &s1);
	TS_EXPECT(t, s1.linked_granules == s0.linked_granules - cnt * ts_gpp(t),
		  "linked granules %lu -> %lu", s0.linked_granules,
		  s1.linked_granules);
	TS_EXPECT(t, s1.misuse == s0.misuse, "unlink refused");
	TS_EXPECT(t, !ts_mapped_pages(t, m.st.addr + lo * PAGE_SIZE,
				      cnt * PAGE_SIZE), "still mapped");
	TS_EXPECT(t, ts_mapped_pages(t, m.st.addr, n * PAGE_SIZE) == n - cnt,
		  "neighbours unmapped");

	if (!TS_EXPECT(t, !ts_pages_get(t, &fresh, cnt), "pages"))
		goto out;
	for (i = 0; i < cnt; i++) {
		size_t j;

		for (j = 0; j < PAGE_SIZE; j++)
			((u8 *)page_address(fresh.pg[i]))[j] =
				ts_pat(seed2, (lo + i) * PAGE_SIZE + j);
		ret = twostep_iova_link(t->dev, &m.st,
					page_to_phys(fresh.pg[i]),
					(lo + i) * PAGE_SIZE, PAGE_SIZE,
					DMA_BIDIRECTIONAL, 0);
		TS_EXPECT(t, !ret, "relink %u: %d", i, ret);
	}
	ret = twostep_iova_sync(t->dev, &m.st, lo * PAGE_SIZE, cnt * PAGE_SIZE);
	TS_EXPECT(t, !ret, "sync: %d", ret);
	for (i = 0; i < cnt; i++)
		TS_EXPECT(t, iommu_iova_to_phys(ts_domain(t), m.st.addr +
						(lo + i) * PAGE_SIZE) ==
			  page_to_phys(fresh.pg[i]), "page %u", lo + i);

	/* Boundaries old/new, new/new and new/old. */
	for (i = lo; i <= lo + cnt; i += 2) {
		u32 off = i * PAGE_SIZE - 1500, len = 3000, j;

		ret = ts_dev_read(t, m.st.addr + off, len, buf);
		if (!TS_EXPECT(t, !ret, "read: %d", ret))
			break;
		for (j = 0; j < len; j++) {
			u32 o = off + j;
			bool new = o / PAGE_SIZE >= lo &&
				   o / PAGE_SIZE < lo + cnt;

			if (buf[j] != ts_pat(new ? seed2 : seed, o))
				break;
		}
		TS_EXPECT(t, j == len, "read at %u: byte %u is not from the %s page",
			  off, j, (off + j) / PAGE_SIZE >= lo &&
			  (off + j) / PAGE_SIZE < lo + cnt ? "new" : "old");
	}
out:
	ts_map_teardown(t, &m, DMA_BIDIRECTIONAL);
	ts_pages_put(&fresh);
	kfree(buf);
	return 0;
}

/* Destroy unmaps everything with its flush: the device is locked out. */
static int case_destroy(struct ts *t)
{
	const unsigned int n = 8;
	struct twostep_stats s0, s1;
	struct ts_map m;
	dma_addr_t addr;
	u8 *buf;
	int ret;

	buf = kmalloc(EDU_MAX_XFER, GFP_KERNEL);
	if (!TS_EXPECT(t, buf, "allocation"))
		return 0;
	ts_stats(t, &s0);
	if (ts_map_setup(t, &m, n, DMA_BIDIRECTIONAL, t->seed + 5))
		goto out;
	/* Secret content, and the device reads it once (IOTLB warm). */
	{
		size_t j;

		for (j = 0; j < PAGE_SIZE; j++)
			*ts_byte(&m.p, 3 * PAGE_SIZE + j) =
				ts_secret(t->seed, j);
	}
	addr = m.st.addr;
	ret = ts_dev_read(t, addr + 3 * PAGE_SIZE, 1000, buf);
	TS_EXPECT(t, !ret && !memcmp(buf, ts_byte(&m.p, 3 * PAGE_SIZE), 1000),
		  "read before destroy: %d", ret);

	twostep_iova_destroy(t->dev, &m.st, n * PAGE_SIZE,
			     DMA_BIDIRECTIONAL, 0);
	TS_EXPECT(t, !m.st.addr && !m.st.__size, "state not cleared");
	ts_stats(t, &s1);
	TS_EXPECT(t, s1.live_allocs == s0.live_allocs, "live allocations");
	TS_EXPECT(t, s1.linked_granules == s0.linked_granules, "linked");
	TS_EXPECT(t, s1.misuse == s0.misuse, "destroy refused");
	TS_EXPECT(t, !ts_mapped_pages(t, addr, n * PAGE_SIZE), "still mapped");

	ret = ts_dev_read(t, addr + 3 * PAGE_SIZE, 1000, buf);
	TS_EXPECT(t, !ret, "read after destroy: %d", ret);
	TS_EXPECT(t, ts_nothing_moved(buf, 1000),
		  "device still read the page after destroy");
out:
	ts_map_teardown(t, &m, DMA_BIDIRECTIONAL);
	kfree(buf);
	return 0;
}

static int case_destroy_zero(struct ts *t)
{
	struct twostep_iova_state st;
	struct twostep_stats s0, s1;

	ts_stats(t, &s0);
	if (!TS_EXPECT(t, ts_try_alloc(t, &st, 0, 4 * PAGE_SIZE), "try_alloc"))
		return 0;
	ts_stats(t, &s1);
	TS_EXPECT(t, s1.live_allocs == s0.live_allocs + 1, "live");
	twostep_iova_destroy(t->dev, &st, 0, DMA_BIDIRECTIONAL, 0);
	TS_EXPECT(t, !st.addr && !st.__size, "state not cleared");
	ts_stats(t, &s1);
	TS_EXPECT(t, s1.live_allocs == s0.live_allocs, "live");
	TS_EXPECT(t, s1.misuse == s0.misuse, "destroy(0) refused");
	return 0;
}

/*
 * The consumer pattern upstream documents: try_alloc, link each page, one
 * sync, DMA, destroy; or, when try_alloc says no, dma_map_page per page.
 * The device writes every page and reads one back either way.
 */
static int ts_consumer(struct ts *t, bool allow_twostep, bool *used)
{
	const unsigned int n = 4;
	dma_addr_t addr[4];
	struct twostep_iova_state st;
	struct ts_pages p;
	unsigned int i, mapped = 0;
	u8 *buf;
	int ret;

	*used = false;
	buf = kmalloc(EDU_MAX_XFER, GFP_KERNEL);
	if (!TS_EXPECT(t, buf, "allocation"))
		return 0;
	if (!TS_EXPECT(t, !ts_pages_get(t, &p, n), "pages"))
		goto out_buf;
	ts_pages_fill(&p, t->seed + 6);

	if (allow_twostep &&
	    ts_try_alloc(t, &st, 0, n * PAGE_SIZE)) {
		*used = true;
		for (i = 0; i < n; i++) {
			ret = twostep_iova_link(t->dev, &st,
						page_to_phys(p.pg[i]),
						i * PAGE_SIZE, PAGE_SIZE,
						DMA_BIDIRECTIONAL, 0);
			if (!TS_EXPECT(t, !ret, "link %u: %d", i, ret))
				goto out_unmap;
			addr[i] = st.addr + i * PAGE_SIZE;
			mapped++;
		}
		ret = twostep_iova_sync(t->dev, &st, 0, mapped * PAGE_SIZE);
		TS_EXPECT(t, !ret, "sync: %d", ret);
	} else {
		if (!allow_twostep)
			memset(&st, 0, sizeof(st));
		TS_EXPECT(t, !st.addr && !st.__size, "state not zeroed");
		for (i = 0; i < n; i++) {
			addr[i] = dma_map_page(t->dev, p.pg[i], 0, PAGE_SIZE,
					       DMA_BIDIRECTIONAL);
			if (!TS_EXPECT(t, !dma_mapping_error(t->dev, addr[i]),
				       "dma_map_page %u", i))
				goto out_unmap;
			mapped++;
		}
	}

	for (i = 0; i < EDU_MAX_XFER; i++)
		buf[i] = ts_pat(t->seed + 7, i);
	memcpy(ts_probe, buf, 2000);
	ret = edu_dma(t->edu, ts_probe_dma, 0, 2000, false);
	TS_EXPECT(t, !ret, "load device: %d", ret);
	for (i = 0; i < n && !ret; i++) {
		ret = edu_dma(t->edu, addr[i] + 1000, 0, 2000, true);
		TS_EXPECT(t, !ret, "write page %u: %d", i, ret);
		TS_EXPECT(t, !memcmp(ts_byte(&p, i * PAGE_SIZE + 1000), buf,
				     2000), "page %u content", i);
	}
	ret = ts_dev_read(t, addr[n - 1] + 500, 3000, buf);
	TS_EXPECT(t, !ret && !memcmp(buf, ts_byte(&p, (n - 1) * PAGE_SIZE +
						  500), 3000),
		  "read back: %d", ret);

out_unmap:
	if (*used) {
		twostep_iova_destroy(t->dev, &st, mapped * PAGE_SIZE,
				     DMA_BIDIRECTIONAL, 0);
	} else {
		for (i = 0; i < mapped; i++)
			dma_unmap_page(t->dev, addr[i], PAGE_SIZE,
				       DMA_BIDIRECTIONAL);
	}
	ts_pages_put(&p);
out_buf:
	kfree(buf);
	return 0;
}

static int case_consumer_twostep(struct ts *t)
{
	bool used;

	ts_consumer(t, true, &used);
	TS_EXPECT(t, used, "try_alloc said no on an attached device");
	return 0;
}

static int case_consumer_fallback(struct ts *t)
{
	struct twostep_iova_state st;
	bool used;

	/*
	 * Where no IOMMU translates try_alloc must say no to any request;
	 * elsewhere it says no to a size upstream refuses. Either way it
	 * zeroes the state (filled with garbage here) and the consumer's
	 * fallback moves the data.
	 */
	memset(&st, 0xab, sizeof(st));
	if (!t->api) {
		TS_EXPECT(t, !ts_try_alloc(t, &st, 0, PAGE_SIZE),
			  "try_alloc where no IOMMU translates");
	} else {
		TS_EXPECT(t, !ts_try_alloc(t, &st, 0, (1ULL << 63) | PAGE_SIZE),
			  "try_alloc of a size with bit 63");
	}
	TS_EXPECT(t, !st.addr && !st.__size, "state not zeroed by try_alloc");
	ts_consumer(t, false, &used);
	TS_EXPECT(t, !used, "fallback path not taken");
	return 0;
}

/* Regular DMA-API mappings and two-step links interleaved. */
static int case_coexistence(struct ts *t)
{
	struct twostep_stats s;
	struct ts_map m;
	struct page *pg;
	dma_addr_t classic;
	u8 *buf;
	unsigned int i, round;
	int ret;

	buf = kmalloc(EDU_MAX_XFER, GFP_KERNEL);
	pg = alloc_page(GFP_KERNEL);
	if (!TS_EXPECT(t, buf && pg, "allocation"))
		goto out_free;
	ts_stats(t, &s);
	if (ts_map_setup(t, &m, 2, DMA_BIDIRECTIONAL, t->seed + 8))
		goto out_teardown;
	classic = dma_map_page(t->dev, pg, 0, PAGE_SIZE, DMA_BIDIRECTIONAL);
	if (!TS_EXPECT(t, !dma_mapping_error(t->dev, classic), "map"))
		goto out_teardown;
	ts_diag("classic %pad, two-step %pad", &classic, &m.st.addr);
	TS_EXPECT(t, !ts_in_chunks(t->dev, classic, PAGE_SIZE),
		  "DMA-API address inside twostep's reservation");
	TS_EXPECT(t, ts_in_chunks(t->dev, m.st.addr, 2 * PAGE_SIZE),
		  "two-step range outside the reservation");

	for (round = 0; round < 2; round++) {
		u32 sc = t->seed + 20 + round, s2 = t->seed + 30 + round;

		for (i = 0; i < 1500; i++)
			buf[i] = ts_pat(sc, i);
		ret = ts_dev_write(t, classic + 16, buf, 1500);
		TS_EXPECT(t, !ret && !memcmp(page_address(pg) + 16, buf, 1500),
			  "classic write, round %u: %d", round, ret);
		for (i = 0; i < 1500; i++)
			buf[i] = ts_pat(s2, i);
		ret = ts_dev_write(t, m.st.addr + PAGE_SIZE - 700, buf, 1500);
		TS_EXPECT(t, !ret && ts_pages_match(&m.p, PAGE_SIZE - 700,
						    buf, 1500),
			  "two-step write, round %u: %d", round, ret);
		for (i = 0; i < 1500; i++)
			buf[i] = ts_pat(sc, i);
		TS_EXPECT(t, !memcmp(page_address(pg) + 16, buf, 1500),
			  "classic page changed by the two-step write");
	}
	dma_unmap_page(t->dev, classic, PAGE_SIZE, DMA_BIDIRECTIONAL);
out_teardown:
	ts_map_teardown(t, &m, DMA_BIDIRECTIONAL);
out_free:
	if (pg)
		__free_page(pg);
	kfree(buf);
	return 0;
}

/* A DMA_TO_DEVICE link is device read-only. */
static int case_perm_to_device(struct ts *t)
{
	struct ts_map m;
	u8 *buf, *before;
	u32 i;
	int ret;

	buf = kmalloc(EDU_MAX_XFER, GFP_KERNEL);
	before = kmalloc(PAGE_SIZE, GFP_KERNEL);
	if (!TS_EXPECT(t, buf && before, "allocation"))
		goto out_free;
	if (ts_map_setup(t, &m, 2, DMA_TO_DEVICE, t->seed + 9))
		goto out_teardown;
	ret = ts_dev_read(t, m.st.addr + 100, 2000, buf);
	TS_EXPECT(t, !ret && !memcmp(buf, ts_byte(&m.p, 100), 2000),
		  "device cannot read a DMA_TO_DEVICE link: %d", ret);
	memcpy(before, page_address(m.p.pg[1]), PAGE_SIZE);
	for (i = 0; i < 2000; i++)
		buf[i] = ts_secret(t->seed + 10, i);
	ret = ts_dev_write(t, m.st.addr + PAGE_SIZE + 50, buf, 2000);
	TS_EXPECT(t, !ret, "write attempt: %d", ret);
	TS_EXPECT(t, !memcmp(before, page_address(m.p.pg[1]), PAGE_SIZE),
		  "device wrote through a DMA_TO_DEVICE link");
out_teardown:
	ts_map_teardown(t, &m, DMA_TO_DEVICE);
out_free:
	kfree(before);
	kfree(buf);
	return 0;
}

/* An unlinked range is out of the device's reach, both ways. */
static int case_perm_unlinked(struct ts *t)
{
	struct ts_map m;
	u8 *buf, *before;
	u32 i;
	int ret;

	buf = kmalloc(EDU_MAX_XFER, GFP_KERNEL);
	before = kmalloc(PAGE_SIZE, GFP_KERNEL);
	if (!TS_EXPECT(t, buf && before, "allocation"))
		goto out_free;
	if (ts_map_setup(t, &m, 2, DMA_BIDIRECTIONAL, t->seed + 11))
		goto out_teardown;
	for (i = 0; i < PAGE_SIZE; i++)
		*ts_byte(&m.p, PAGE_SIZE + i) = ts_secret(t->seed + 12, i);
	ret = ts_dev_read(t, m.st.addr + PAGE_SIZE, 1000, buf);
	TS_EXPECT(t, !ret && !memcmp(buf, ts_byte(&m.p, PAGE_SIZE), 1000),
		  "positive control: linked page not readable: %d", ret);

	twostep_iova_unlink(t->dev, &m.st, PAGE_SIZE, PAGE_SIZE,
			    DMA_BIDIRECTIONAL, 0);
	m.linked = 1;
	TS_EXPECT(t, !ts_mapped_pages(t, m.st.addr + PAGE_SIZE, PAGE_SIZE),
		  "unlinked page still translates");
	ret = ts_dev_read(t, m.st.addr + PAGE_SIZE, 1000, buf);
	TS_EXPECT(t, !ret, "read attempt: %d", ret);
	TS_EXPECT(t, ts_nothing_moved(buf, 1000),
		  "device read an unlinked page");
	memcpy(before, page_address(m.p.pg[1]), PAGE_SIZE);
	for (i = 0; i < 1000; i++)
		buf[i] = ts_pat(t->seed + 13, i);
	ret = ts_dev_write(t, m.st.addr + PAGE_SIZE + 8, buf, 1000);
	TS_EXPECT(t, !ret, "write attempt: %d", ret);
	TS_EXPECT(t, !memcmp(before, page_address(m.p.pg[1]), PAGE_SIZE),
		  "device wrote an unlinked page");
	/* The page still linked is untouched and reachable. */
	ret = ts_dev_read(t, m.st.addr + 10, 500, buf);
	TS_EXPECT(t, !ret && !memcmp(buf, ts_byte(&m.p, 10), 500),
		  "linked neighbour: %d", ret);
out_teardown:
	ts_map_teardown(t, &m, DMA_BIDIRECTIONAL);
out_free:
	kfree(before);
	kfree(buf);
	return 0;
}

/* Link, sync and unlink with interrupts off, as upstream allows. */
static int case_atomic_link(struct ts *t)
{
	const unsigned int n = 4;
	struct twostep_iova_state st;
	struct ts_pages p;
	unsigned long flags;
	unsigned int ok = 0;
	int ret;
	u8 *buf;

	buf = kmalloc(EDU_MAX_XFER, GFP_KERNEL);
	if (!TS_EXPECT(t, buf, "allocation"))
		return 0;
	if (!TS_EXPECT(t, !ts_pages_get(t, &p, n), "pages"))
		goto out_buf;
	ts_pages_fill(&p, t->seed + 14);
	if (!TS_EXPECT(t, ts_try_alloc(t, &st, 0, n * PAGE_SIZE), "try_alloc"))
		goto out_pages;

	local_irq_save(flags);
	ret = ts_link_pages(t, &st, &p, &ok);
	local_irq_restore(flags);
	TS_EXPECT(t, !ret && ok == n, "link/sync with IRQs off: %d", ret);

	ret = ts_dev_read(t, st.addr + PAGE_SIZE + 2000, 3000, buf);
	TS_EXPECT(t, !ret && ts_pages_match(&p, PAGE_SIZE + 2000, buf, 3000),
		  "read: %d", ret);

	local_irq_save(flags);
	twostep_iova_unlink(t->dev, &st, 0, ok * PAGE_SIZE,
			    DMA_BIDIRECTIONAL, 0);
	local_irq_restore(flags);
	TS_EXPECT(t, !ts_mapped_pages(t, st.addr, n * PAGE_SIZE),
		  "unlink with IRQs off left mappings");
	twostep_iova_free(t->dev, &st);
out_pages:
	ts_pages_put(&p);
out_buf:
	kfree(buf);
	return 0;
}

/* Bad input: exact errors, and nothing changes in the page tables. */
static int case_bad_input(struct ts *t)
{
	struct twostep_iova_state st, stale;
	struct twostep_stats s0, s1;
	struct page *pg;
	phys_addr_t phys;
	int ret;

	pg = alloc_page(GFP_KERNEL);
	if (!TS_EXPECT(t, pg, "page"))
		return 0;
	phys = page_to_phys(pg);
	if (!TS_EXPECT(t, ts_try_alloc(t, &st, 0, 4 * PAGE_SIZE), "try_alloc"))
		goto out;
	ts_stats(t, &s0);

#define BAD_LINK(want, off, size, dir) do {				\
	int __want = (want);						\
	ret = twostep_iova_link(t->dev, &st, phys, off, size, dir, 0);	\
	TS_EXPECT(t, ret == __want, "link(%s, %s): %d, expected %d",	\
		  #off, #size, ret, __want);				\
} while (0)

	BAD_LINK(-ERANGE, 4 * PAGE_SIZE, PAGE_SIZE, DMA_TO_DEVICE);
	BAD_LINK(-ERANGE, 3 * PAGE_SIZE, 2 * PAGE_SIZE, DMA_TO_DEVICE);
	BAD_LINK(-ERANGE, SIZE_MAX - 10, 100, DMA_TO_DEVICE);
	BAD_LINK(-EINVAL, 100, 100, DMA_TO_DEVICE);
	BAD_LINK(-EINVAL, 0, 0, DMA_TO_DEVICE);
	BAD_LINK(-EINVAL, 0, PAGE_SIZE, DMA_NONE);
	ret = twostep_iova_link(t->dev, &st, phys + 8, 0, PAGE_SIZE,
				DMA_TO_DEVICE, 0);
	TS_EXPECT(t, ret == -EINVAL, "phys offset mismatch: %d", ret);
	ret = twostep_iova_link(NULL, &st, phys, 0, PAGE_SIZE,
				DMA_TO_DEVICE, 0);
	TS_EXPECT(t, ret == -ENODEV, "NULL device: %d", ret);
	ts_stats(t, &s1);
	TS_EXPECT(t, s1.linked_granules == s0.linked_granules, "linked");
	TS_EXPECT(t, !ts_mapped_pages(t, st.addr, 4 * PAGE_SIZE),
		  "a refused link mapped something");

	BAD_LINK(0, 0, PAGE_SIZE, DMA_TO_DEVICE);
	BAD_LINK(-EBUSY, 0, PAGE_SIZE, DMA_TO_DEVICE);
#undef BAD_LINK
	ts_stats(t, &s0);
	twostep_iova_unlink(t->dev, &st, PAGE_SIZE, PAGE_SIZE,
			    DMA_TO_DEVICE, 0);
	ts_stats(t, &s1);
	TS_EXPECT(t, s1.misuse == s0.misuse + 1, "unlink of a hole accepted");
	TS_EXPECT(t, s1.linked_granules == s0.linked_granules, "linked");
	TS_EXPECT(t, ts_mapped_pages(t, st.addr, 4 * PAGE_SIZE) == 1,
		  "mapping changed");

	stale = st;
	stale.addr += 2 * PAGE_SIZE;
	ret = twostep_iova_sync(t->dev, &stale, 0, PAGE_SIZE);
	TS_EXPECT(t, ret == -ENOENT, "forged state: %d", ret);

	stale = st;
	twostep_iova_destroy(t->dev, &st, PAGE_SIZE, DMA_TO_DEVICE, 0);
	ret = twostep_iova_link(t->dev, &stale, phys, 0, PAGE_SIZE,
				DMA_TO_DEVICE, 0);
	TS_EXPECT(t, ret == -ENOENT, "link after destroy: %d", ret);
	ts_stats(t, &s0);
	twostep_iova_free(t->dev, &st);
	twostep_iova_free(t->dev, &stale);
	ts_stats(t, &s1);
	TS_EXPECT(t, s1.misuse == s0.misuse + 2, "double free accepted");
	TS_EXPECT(t, !ts_mapped_pages(t, stale.addr, 4 * PAGE_SIZE),
		  "mapped after destroy");
out:
	__free_page(pg);
	return 0;
}

/*
 * Detach with ranges still live reclaims them: nothing stays mapped, the
 * device is no longer attached, and a new attach starts clean.
 */
static int case_detach_live(struct ts *t)
{
	struct twostep_iova_state st, st2;
	struct twostep_stats s;
	struct page *pg;
	int ret;

	pg = alloc_page(GFP_KERNEL);
	if (!TS_EXPECT(t, pg, "page"))
		return 0;
	if (!TS_EXPECT(t, ts_try_alloc(t, &st, 0, 2 * PAGE_SIZE), "try_alloc"))
		goto out;
	ret = twostep_iova_link(t->dev, &st, page_to_phys(pg), 0, PAGE_SIZE,
				DMA_BIDIRECTIONAL, 0);
	TS_EXPECT(t, !ret, "link: %d", ret);
	twostep_iova_sync(t->dev, &st, 0, PAGE_SIZE);
	TS_EXPECT(t, ts_try_alloc(t, &st2, 0, PAGE_SIZE), "second try_alloc");
	TS_EXPECT(t, ts_mapped_pages(t, st.addr, 2 * PAGE_SIZE) == 1,
		  "link not mapped");

	twostep_detach(t->dev);
	TS_EXPECT(t, twostep_get_stats(t->dev, &s) == -ENODEV,
		  "twostep still holds something after detach");
	TS_EXPECT(t, !ts_mapped_pages(t, st.addr, 2 * PAGE_SIZE),
		  "detach left the link mapped");
	ret = twostep_iova_link(t->dev, &st, page_to_phys(pg), PAGE_SIZE,
				PAGE_SIZE, DMA_BIDIRECTIONAL, 0);
	TS_EXPECT(t, ret == -ENODEV, "link after detach: %d", ret);

	/* no set-up needed again: the next try_alloc starts afresh */
	if (TS_EXPECT(t, ts_try_alloc(t, &st2, 0, PAGE_SIZE),
		      "try_alloc after detach")) {
		ts_stats(t, &s);
		TS_EXPECT(t, s.live_allocs == 1 && !s.linked_granules,
			  "fresh context: %lu live, %lu linked",
			  s.live_allocs, s.linked_granules);
		ret = twostep_iova_link(t->dev, &st, page_to_phys(pg),
					PAGE_SIZE, PAGE_SIZE,
					DMA_BIDIRECTIONAL, 0);
		TS_EXPECT(t, ret == -ENOENT, "old state after detach: %d",
			  ret);
		twostep_iova_free(t->dev, &st2);
	}
out:
	__free_page(pg);
	return 0;
}

/*
 * Nothing left: no live range, nothing linked, nothing translated where
 * any range handed out during the run was (every try_alloc of the cases
 * goes through ts_try_alloc(), which records it), nor anywhere in the
 * reservation.
 */
static int case_no_leak(struct ts *t)
{
	struct twostep_stats s;
	unsigned int mapped, i;
	u64 start, len, in_chunks = 0, scanned = 0;

	ts_stats(t, &s);
	ts_diag("%u IOVA intervals recorded (%lu dropped), %lu bad inputs",
		ts_nused, ts_dropped, s.misuse);
	ts_diag("%u chunk(s), %llu KiB reserved", s.chunks, s.reserved >> 10);
	TS_EXPECT(t, s.live_allocs == 0, "%lu live allocations",
		  s.live_allocs);
	TS_EXPECT(t, s.linked_granules == 0, "%lu linked granules",
		  s.linked_granules);
	TS_EXPECT(t, ts_nused && !ts_dropped,
		  "%u intervals recorded, %lu dropped", ts_nused, ts_dropped);
	mapped = ts_used_mapped(t);
	TS_EXPECT(t, mapped == 0, "%u pages still mapped", mapped);
	for (i = 0; !twostep_get_chunk(t->dev, i, &start, &len); i++) {
		/* chunks of the largest-range case are gone by now */
		if (len > SZ_1G)
			continue;
		in_chunks += ts_mapped_pages(t, start, len);
		scanned += len;
	}
	ts_diag("%llu MiB of reservation scanned, %llu pages translated",
		scanned >> 20, in_chunks);
	TS_EXPECT(t, !in_chunks, "%llu pages of the reservation translate",
		  in_chunks);
	return 0;
}

static const struct ts_case ts_cases[] = {
	{ "edu_identity", case_edu_identity, false },
	{ "edu_guard", case_edu_guard, false },
	{ "classic_dma", case_classic_dma, false },
	{ "attach", case_attach, false },
	{ "try_alloc_offset", case_try_alloc_offset, true },
	{ "try_alloc_refuse", case_try_alloc_refuse, true },
	{ "free_returns_range", case_free_returns_range, true },
	{ "platform_cross_page", case_platform_cross_page, false },
	{ "contiguity", case_contiguity, true },
	{ "unlink_relink", case_unlink_relink, true },
	{ "destroy", case_destroy, true },
	{ "destroy_zero", case_destroy_zero, true },
	{ "consumer_twostep", case_consumer_twostep, true },
	{ "consumer_fallback", case_consumer_fallback, false },
	{ "coexistence", case_coexistence, true },
	{ "perm_to_device", case_perm_to_device, true },
	{ "perm_unlinked", case_perm_unlinked, true },
	{ "atomic_link", case_atomic_link, true },
	{ "bad_input", case_bad_input, true },
	{ "detach_live", case_detach_live, true },
};

/* Last, after every group: nothing may be left behind. */
static const struct ts_case ts_final_cases[] = {
	{ "no_leak", case_no_leak, true },
};

struct ts_group {
	const struct ts_case *cases;
	const unsigned int *n;
};

static const unsigned int ts_ncases = ARRAY_SIZE(ts_cases);
static const unsigned int ts_final_ncases = ARRAY_SIZE(ts_final_cases);

static const struct ts_group ts_groups[] = {
	{ ts_cases, &ts_ncases },
	{ ts_robust_cases, &ts_robust_ncases },
	{ ts_safety_cases, &ts_safety_ncases },
	{ ts_device_cases, &ts_device_ncases },
	{ ts_checker_cases, &ts_checker_ncases },
	{ ts_fidelity_cases, &ts_fidelity_ncases },
	{ ts_p2p_cases, &ts_p2p_ncases },
	{ ts_odp_cases, &ts_odp_ncases },
	{ ts_final_cases, &ts_final_ncases },
	/* after no_leak: they leave the peer unbound, with a context */
	{ ts_group_cases, &ts_group_ncases },
	{ }
};

/* Benchmark mode: the device check, then the benchmark. */
static const struct ts_group ts_bench_groups[] = {
	{ ts_cases, &ts_ncases },
	{ ts_bench_cases, &ts_bench_ncases },
	{ }
};

static bool ts_selected(const char *filter, const struct ts_case *c)
{
	const char *p = filter, *name = c->name;
	size_t len = strlen(name);

	if (!filter || !*filter)
		return !c->on_request;
	while ((p = strstr(p, name))) {
		if ((p == filter || p[-1] == ',') &&
		    (p[len] == ',' || p[len] == '\0'))
			return true;
		p += len;
	}
	return false;
}

/* Run one case and print its result line. */
static void ts_run_one(struct ts *t, const struct ts_case *c,
		       unsigned int num, unsigned int *failed,
		       unsigned int *skipped)
{
	int ret;

	t->failed = 0;
	t->skip[0] = '\0';
	t->data = c->data;
	if (c->needs_api && !t->api) {
		if (t->expect_api == 1) {
			ts_diag("try_alloc says no where the API is expected");
			t->failed++;
			ret = 0;
		} else {
			snprintf(t->skip, sizeof(t->skip),
				 "no translating IOMMU domain (try_alloc says no)");
			ret = TS_SKIP;
		}
	} else {
		ret = c->run(t);
	}
	if (t->edu->dead)
		t->failed++;
	if (t->failed) {
		(*failed)++;
		ktap_line("not ok %u %s", num, c->name);
	} else if (ret == TS_SKIP) {
		(*skipped)++;
		ktap_line("ok %u %s # SKIP %s", num, c->name, t->skip);
	} else {
		ktap_line("ok %u %s", num, c->name);
	}
}

/* Run the selected cases; returns the number that failed. */
int ts_run_all(struct ts *t, const char *filter)
{
	const struct ts_group *groups = t->bench ? ts_bench_groups : ts_groups;
	const struct ts_group *g;
	unsigned int i, n = 0, num = 0, failed = 0, skipped = 0;

	/* in benchmark mode the default selection is identity + benchmark */
	if (t->bench && (!filter || !*filter))
		filter = "edu_identity,bench";
	for (g = groups; g->cases; g++)
		for (i = 0; i < *g->n; i++)
			n += ts_selected(filter, &g->cases[i]);

	ts_probe = dma_alloc_coherent(t->dev, EDU_BUF_SIZE, &ts_probe_dma,
				      GFP_KERNEL);
	ktap_line("KTAP version 1");
	if (!ts_probe) {
		ktap_line("Bail out! no coherent buffer");
		return 1;
	}
	ktap_line("1..%u", n);
	t->api = ts_api_probe(t);
	ktap_line("# seed %u, two-step API %s, expect_api %d, DMA mask %#llx, peer %s",
		  t->seed, t->api ? "available" : "not available",
		  t->expect_api, dma_get_mask(t->dev),
		  t->peer ? pci_name(t->peer->pdev) : "none");

	for (g = groups; g->cases; g++) {
		for (i = 0; i < *g->n; i++) {
			const struct ts_case *c = &g->cases[i];

			if (ts_selected(filter, c))
				ts_run_one(t, c, ++num, &failed, &skipped);
		}
	}
	if (!IS_ENABLED(CONFIG_PREEMPTION))
		ktap_line("# no CONFIG_PREEMPTION: %u try_alloc calls waited for growth",
			  ts_growth_waits);
	ktap_line("# totals: pass:%u fail:%u skip:%u", n - failed - skipped,
		  failed, skipped);
	dma_free_coherent(t->dev, EDU_BUF_SIZE, ts_probe, ts_probe_dma);
	ts_probe = NULL;
	return failed;
}

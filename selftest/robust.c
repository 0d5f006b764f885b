// SPDX-License-Identifier: GPL-2.0
/*
 * twostep self-test: robustness and security. Bad input with exact errors
 * and untouched page tables, accesses the device must not be able to make
 * (proven with real DMA), a seeded shadow-model stress, concurrent users,
 * and fault injection into the map and allocation paths.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/iommu.h>
#include <linux/kernel.h>
#include <linux/kthread.h>
#include <linux/ktime.h>
#include <linux/mm.h>
#include <linux/panic.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/vmalloc.h>

#include "helpers.h"

/* ---- bad input ---- */

/*
 * The fixture every bad call is aimed at: 4 pages of IOVA over a physically
 * contiguous block; page 0 linked alone, pages 2-3 linked as one link,
 * page 1 never linked.
 */
struct bi_fix {
	struct twostep_iova_state st;
	struct page *block;
	phys_addr_t phys;
	phys_addr_t snap[4];
};

#define BI_BOOL_FALSE	0	/* try_alloc said false and zeroed the state */
#define BI_BOOL_WRONG	1	/* try_alloc said true or left the state */
#define BI_VOID		0

static int bi_alloc(struct device *dev, size_t size, bool null_state)
{
	struct twostep_iova_state st;
	bool ok;

	memset(&st, 0xab, sizeof(st));
	ok = twostep_iova_try_alloc(dev, null_state ? NULL : &st, 0, size);
	if (ok) {
		twostep_iova_free(dev, &st);
		return BI_BOOL_WRONG;
	}
	if (!null_state && (st.addr || st.__size))
		return BI_BOOL_WRONG;
	return BI_BOOL_FALSE;
}

static int bi_link(struct ts *t, struct bi_fix *f,
		   struct twostep_iova_state *st, phys_addr_t phys,
		   size_t off, size_t size, enum dma_data_direction dir)
{
	return twostep_iova_link(t->dev, st, phys, off, size, dir, 0);
}

/* A stale copy of a state whose range was freed. */
static int bi_stale(struct ts *t, struct twostep_iova_state *stale)
{
	struct twostep_iova_state st;

	if (!ts_try_alloc(t, &st, 0, 2 * PAGE_SIZE))
		return -ENOMEM;
	*stale = st;
	twostep_iova_free(t->dev, &st);
	return 0;
}

static const struct bi_case {
	const char *name;
	int want;		/* return value, or BI_* */
	unsigned int refusals;	/* refused-call count it must add */
	unsigned int unmaps;	/* fixture pages it must unmap, one bit each */
	bool one_granule;	/* of those, only the granule the call covers */
} bi_cases[] = {
	{ "alloc_size_zero", BI_BOOL_FALSE, 1 },
	{ "alloc_size_bit63", BI_BOOL_FALSE, 1 },
	{ "alloc_size_bit63_and_page", BI_BOOL_FALSE, 1 },
	{ "alloc_larger_than_addressable", BI_BOOL_FALSE, 0 },
	{ "alloc_null_device", BI_BOOL_FALSE, 0 },
	{ "alloc_device_without_iommu", BI_BOOL_FALSE, 0 },
	{ "alloc_null_state", BI_BOOL_FALSE, 0 },
	{ "link_size_zero", -EINVAL, 1 },
	{ "link_offset_size_overflow", -ERANGE, 1 },
	{ "link_past_allocation", -ERANGE, 1 },
	{ "link_at_allocation_end", -ERANGE, 1 },
	{ "link_misaligned_non_first", -EINVAL, 1 },
	{ "link_phys_offset_mismatch", -EINVAL, 1 },
	{ "link_dir_none", -EINVAL, 1 },
	{ "link_dir_invalid", -EINVAL, 1 },
	{ "link_same_offset_twice", -EBUSY, 1 },
	{ "link_overlapping_link", -EBUSY, 1 },
	{ "link_null_state", -ENOENT, 1 },
	{ "link_zeroed_state", -ENOENT, 1 },
	{ "link_forged_address", -ENOENT, 1 },
	{ "link_forged_size", -ENOENT, 1 },
	{ "link_null_device", -ENODEV, 1 },
	{ "link_device_without_iommu", -ENODEV, 1 },
	{ "sync_size_zero", -EINVAL, 1 },
	{ "sync_past_allocation", -ERANGE, 1 },
	{ "sync_forged_state", -ENOENT, 1 },
	{ "unlink_never_linked", BI_VOID, 1 },
	/* what the range covers inside the allocation is unmapped all the same */
	{ "unlink_past_allocation", BI_VOID, 1, 0xc },
	/* not bad input: upstream unmaps what the range covers */
	{ "unlink_splitting_a_link", BI_VOID, 0, 0x4 },
	{ "unlink_misaligned", BI_VOID, 0, 0x4, true },
	{ "unlink_size_zero", BI_VOID, 1 },
	{ "unlink_forged_state", BI_VOID, 1 },
	{ "destroy_null_state", BI_VOID, 1 },
	{ "unlink_null_device", BI_VOID, 1 },
	{ "destroy_forged_state", BI_VOID, 1 },
	{ "free_forged_state", BI_VOID, 1 },
	{ "free_null_state", BI_VOID, 1 },
	{ "link_after_free", -ENOENT, 1 },
	{ "sync_after_free", -ENOENT, 1 },
	{ "double_free", BI_VOID, 1 },
	{ "destroy_after_free", BI_VOID, 1 },
	{ "attach_twice", -EBUSY, 0 },
	{ "attach_null_device", -EINVAL, 0 },
	{ "detach_device_never_used", BI_VOID, 1 },
	{ "stats_null_device", -ENODEV, 0 },
	{ "stats_null_stats", -EINVAL, 0 },
};

/* Make bad call @i against the fixture; returns what the call returned. */
static int bi_call(struct ts *t, struct bi_fix *f, unsigned int i)
{
	struct device *other = ts_dev_without_iommu(t);
	struct twostep_iova_state st = f->st, stale;
	struct twostep_stats s;

	switch (i) {
	case 0:
		return bi_alloc(t->dev, 0, false);
	case 1:
		return bi_alloc(t->dev, 1ULL << 63, false);
	case 2:
		return bi_alloc(t->dev, (1ULL << 63) | PAGE_SIZE, false);
	case 3:
		return bi_alloc(t->dev, ts_too_large(t), false);
	case 4:
		return bi_alloc(NULL, PAGE_SIZE, false);
	case 5:
		return bi_alloc(other, PAGE_SIZE, false);
	case 6:
		return bi_alloc(t->dev, PAGE_SIZE, true);
	case 7:
		return bi_link(t, f, &st, f->phys + PAGE_SIZE, PAGE_SIZE, 0,
			       DMA_TO_DEVICE);
	case 8:
		return bi_link(t, f, &st, f->phys, SIZE_MAX - 10, 100,
			       DMA_TO_DEVICE);
	case 9:
		return bi_link(t, f, &st, f->phys + PAGE_SIZE, PAGE_SIZE,
			       4 * PAGE_SIZE, DMA_TO_DEVICE);
	case 10:
		return bi_link(t, f, &st, f->phys, 4 * PAGE_SIZE, 1,
			       DMA_TO_DEVICE);
	case 11:
		return bi_link(t, f, &st, f->phys + PAGE_SIZE + 64,
			       PAGE_SIZE + 64, 64, DMA_TO_DEVICE);
	case 12:
		return bi_link(t, f, &st, f->phys + 8, 0, PAGE_SIZE,
			       DMA_TO_DEVICE);
	case 13:
		return bi_link(t, f, &st, f->phys + PAGE_SIZE, PAGE_SIZE,
			       PAGE_SIZE, DMA_NONE);
	case 14:
		return bi_link(t, f, &st, f->phys + PAGE_SIZE, PAGE_SIZE,
			       PAGE_SIZE, (enum dma_data_direction)42);
	case 15:
		return bi_link(t, f, &st, f->phys, 0, PAGE_SIZE,
			       DMA_TO_DEVICE);
	case 16:
		return bi_link(t, f, &st, f->phys + PAGE_SIZE, PAGE_SIZE,
			       2 * PAGE_SIZE, DMA_TO_DEVICE);
	case 17:
		return bi_link(t, f, NULL, f->phys + PAGE_SIZE, PAGE_SIZE,
			       PAGE_SIZE, DMA_TO_DEVICE);
	case 18:
		memset(&st, 0, sizeof(st));
		return bi_link(t, f, &st, f->phys + PAGE_SIZE, PAGE_SIZE,
			       PAGE_SIZE, DMA_TO_DEVICE);
	case 19:
		st.addr += PAGE_SIZE;
		return bi_link(t, f, &st, f->phys + PAGE_SIZE, 0, PAGE_SIZE,
			       DMA_TO_DEVICE);
	case 20:
		st.__size = 64 * PAGE_SIZE;
		return bi_link(t, f, &st, f->phys + PAGE_SIZE, PAGE_SIZE,
			       PAGE_SIZE, DMA_TO_DEVICE);
	case 21:
		return twostep_iova_link(NULL, &st, f->phys + PAGE_SIZE,
					 PAGE_SIZE, PAGE_SIZE, DMA_TO_DEVICE,
					 0);
	case 22:
		return twostep_iova_link(other, &st, f->phys + PAGE_SIZE,
					 PAGE_SIZE, PAGE_SIZE, DMA_TO_DEVICE,
					 0);
	case 23:
		return twostep_iova_sync(t->dev, &st, 0, 0);
	case 24:
		return twostep_iova_sync(t->dev, &st, PAGE_SIZE,
					 4 * PAGE_SIZE);
	case 25:
		st.addr += 2 * PAGE_SIZE;
		return twostep_iova_sync(t->dev, &st, 0, PAGE_SIZE);
	case 26:
		twostep_iova_unlink(t->dev, &st, PAGE_SIZE, PAGE_SIZE,
				    DMA_TO_DEVICE, 0);
		return BI_VOID;
	case 27:
		twostep_iova_unlink(t->dev, &st, 2 * PAGE_SIZE, 3 * PAGE_SIZE,
				    DMA_TO_DEVICE, 0);
		return BI_VOID;
	case 28:
		twostep_iova_unlink(t->dev, &st, 2 * PAGE_SIZE, PAGE_SIZE,
				    DMA_TO_DEVICE, 0);
		return BI_VOID;
	case 29:
		twostep_iova_unlink(t->dev, &st, 2 * PAGE_SIZE + 100, 100,
				    DMA_TO_DEVICE, 0);
		return BI_VOID;
	case 30:
		twostep_iova_unlink(t->dev, &st, 0, 0, DMA_TO_DEVICE, 0);
		return BI_VOID;
	case 31:
		st.addr += PAGE_SIZE;
		twostep_iova_unlink(t->dev, &st, 0, PAGE_SIZE,
				    DMA_TO_DEVICE, 0);
		return BI_VOID;
	case 32:
		twostep_iova_destroy(t->dev, NULL, PAGE_SIZE, DMA_TO_DEVICE,
				     0);
		return BI_VOID;
	case 33:
		twostep_iova_unlink(NULL, &st, 0, PAGE_SIZE, DMA_TO_DEVICE, 0);
		return BI_VOID;
	case 34:
		st.addr += PAGE_SIZE;
		twostep_iova_destroy(t->dev, &st, PAGE_SIZE, DMA_TO_DEVICE, 0);
		return BI_VOID;
	case 35:
		st.__size += 1;
		twostep_iova_free(t->dev, &st);
		return BI_VOID;
	case 36:
		twostep_iova_free(t->dev, NULL);
		return BI_VOID;
	case 37:
		if (bi_stale(t, &stale))
			return -ENOMEM;
		return twostep_iova_link(t->dev, &stale, f->phys, 0, PAGE_SIZE,
					 DMA_TO_DEVICE, 0);
	case 38:
		if (bi_stale(t, &stale))
			return -ENOMEM;
		return twostep_iova_sync(t->dev, &stale, 0, PAGE_SIZE);
	case 39:
		if (bi_stale(t, &stale))
			return -ENOMEM;
		twostep_iova_free(t->dev, &stale);
		return BI_VOID;
	case 40:
		if (bi_stale(t, &stale))
			return -ENOMEM;
		twostep_iova_destroy(t->dev, &stale, PAGE_SIZE,
				     DMA_TO_DEVICE, 0);
		return BI_VOID;
	case 41:
		twostep_attach(t->dev, 0, 0);
		return twostep_attach(t->dev, 0, 0);
	case 42:
		return twostep_attach(NULL, 0, 0);
	case 43:
		twostep_detach(other);
		return BI_VOID;
	case 44:
		return twostep_get_stats(NULL, &s);
	case 45:
		return twostep_get_stats(t->dev, NULL);
	}
	return -EINVAL;
}

static void bi_snapshot(struct ts *t, struct bi_fix *f, phys_addr_t *out)
{
	unsigned int i;

	for (i = 0; i < 4; i++)
		out[i] = iommu_iova_to_phys(ts_domain(t),
					    f->st.addr + i * PAGE_SIZE);
}

/* Link pages 2-3 of the fixture again as one link, after a case unlinked. */
static void bi_restore(struct ts *t, struct bi_fix *f)
{
	int ret;

	twostep_iova_unlink(t->dev, &f->st, 2 * PAGE_SIZE, 2 * PAGE_SIZE,
			    DMA_TO_DEVICE, 0);
	ret = twostep_iova_link(t->dev, &f->st, f->phys + 2 * PAGE_SIZE,
				2 * PAGE_SIZE, 2 * PAGE_SIZE, DMA_TO_DEVICE, 0);
	ret = ret ?: twostep_iova_sync(t->dev, &f->st, 0, 4 * PAGE_SIZE);
	TS_EXPECT(t, !ret, "fixture links again: %d", ret);
}

static int case_bad_inputs(struct ts *t)
{
	struct twostep_stats s0, s1;
	phys_addr_t now[4], want[4];
	struct bi_fix f = { };
	unsigned int i, handled = 0, total = ARRAY_SIZE(bi_cases) + 1;
	int ret;

	f.block = alloc_pages(GFP_KERNEL, 2);
	if (!TS_EXPECT(t, f.block, "pages"))
		return 0;
	f.phys = page_to_phys(f.block);
	if (!TS_EXPECT(t, ts_try_alloc(t, &f.st, 0, 4 * PAGE_SIZE), "try_alloc"))
		goto out_pages;
	ret = twostep_iova_link(t->dev, &f.st, f.phys, 0, PAGE_SIZE,
				DMA_TO_DEVICE, 0);
	ret = ret ?: twostep_iova_link(t->dev, &f.st, f.phys + 2 * PAGE_SIZE,
				       2 * PAGE_SIZE, 2 * PAGE_SIZE,
				       DMA_TO_DEVICE, 0);
	ret = ret ?: twostep_iova_sync(t->dev, &f.st, 0, 4 * PAGE_SIZE);
	if (!TS_EXPECT(t, !ret, "fixture links: %d", ret))
		goto out_destroy;
	bi_snapshot(t, &f, f.snap);
	TS_EXPECT(t, f.snap[0] == f.phys && !f.snap[1] &&
		  f.snap[2] == f.phys + 2 * PAGE_SIZE &&
		  f.snap[3] == f.phys + 3 * PAGE_SIZE, "fixture mapping");

	for (i = 0; i < ARRAY_SIZE(bi_cases); i++) {
		const struct bi_case *c = &bi_cases[i];
		unsigned int before = t->failed, k;

		ts_stats(t, &s0);
		ret = bi_call(t, &f, i);
		ts_stats(t, &s1);
		bi_snapshot(t, &f, now);
		TS_EXPECT(t, ret == c->want, "%s: returned %d, expected %d",
			  c->name, ret, c->want);
		TS_EXPECT(t, s1.misuse_all - s0.misuse_all == c->refusals,
			  "%s: %lu refusals counted, expected %u", c->name,
			  s1.misuse_all - s0.misuse_all, c->refusals);
		for (k = 0; k < 4; k++)
			want[k] = c->unmaps & BIT(k) ? 0 : f.snap[k];
		TS_EXPECT(t, !memcmp(now, want, sizeof(now)),
			  "%s: IOMMU page tables not as expected", c->name);
		TS_EXPECT(t, s1.live_allocs == s0.live_allocs &&
			  s1.linked_granules + (c->one_granule ? 1 :
			  hweight32(c->unmaps) * ts_gpp(t)) ==
			  s0.linked_granules,
			  "%s: live %lu -> %lu, linked %lu -> %lu", c->name,
			  s0.live_allocs, s1.live_allocs,
			  s0.linked_granules, s1.linked_granules);
		TS_EXPECT(t, !test_taint(TAINT_WARN) && !test_taint(TAINT_DIE),
			  "%s: kernel tainted by a warning", c->name);
		if (t->failed == before)
			handled++;
		if (c->unmaps)
			bi_restore(t, &f);
	}
	/* The fixture still works: the page never linked can be linked. */
	ret = twostep_iova_link(t->dev, &f.st, f.phys + PAGE_SIZE, PAGE_SIZE,
				PAGE_SIZE, DMA_TO_DEVICE, 0);
	TS_EXPECT(t, !ret, "fixture unusable after the bad calls: %d", ret);
	twostep_iova_destroy(t->dev, &f.st, 4 * PAGE_SIZE, DMA_TO_DEVICE, 0);

	/* Detach twice, with nothing live; then try_alloc works again. */
	ts_stats(t, &s0);
	twostep_detach(t->dev);
	twostep_detach(t->dev);
	ret = ts_api_probe(t);
	ts_stats(t, &s1);
	if (TS_EXPECT(t, ret && s1.misuse_all - s0.misuse_all == 1,
		      "detach twice: try_alloc after it %d, %lu refusals", ret,
		      s1.misuse_all - s0.misuse_all))
		handled++;
	ktap_line("# summary: bad inputs handled %u/%u", handled, total);
	TS_EXPECT(t, handled == total, "bad inputs not handled");
	goto out_pages;

out_destroy:
	twostep_iova_destroy(t->dev, &f.st, 4 * PAGE_SIZE, DMA_TO_DEVICE, 0);
out_pages:
	__free_pages(f.block, 2);
	return 0;
}

/* ---- security ---- */

/*
 * One access the device must not be able to make. For a read the device
 * buffer must come back untouched; for a write the page (a non-zero
 * secret) must not change. Data alone cannot tell a read that was blocked
 * from one that went through to twostep's zero block (the reservation maps
 * it while a chunk is reserved and given back): QEMU's edu reads zeros
 * when the IOMMU faults, and so does a read of the zero block. So unless
 * @linked (a link whose permission forbids the access, which translates
 * by design) the address must also not translate in the device's domain.
 * Returns true when the access was blocked. *@n counts the attempts of a
 * window of DMAR faults the host counts, this one too, whatever happens.
 */
static bool sec_attempt(struct ts *t, unsigned int *n, const char *what,
			dma_addr_t addr, struct page *pg, bool write,
			bool linked)
{
	u8 *buf, *before;
	bool blocked = false;
	unsigned int mapped;
	u32 i;
	int ret;

	/*
	 * The guest's DMAR fault handler logs at most 10 lines per 5 s and
	 * spends three of them on each fault (the status, the record, the
	 * look for another): three faults, then a fresh budget, and every
	 * fault of the window is in the log the host counts. An SMMUv3
	 * logs at most 10 events per 5 s, and QEMU's raises one per 4
	 * bytes of a blocked DMA: one attempt per budget there, each after
	 * a mark, so that the host counts the attempts that raised one.
	 */
	if (*n && *n % t->faults_per_window == 0)
		msleep(5100);
	(*n)++;
	ktap_line("# fault-attempt %u", *n);
	buf = kmalloc(PAGE_SIZE, GFP_KERNEL);
	if (!buf)
		return false;
	before = buf;
	if (write) {
		u8 src[256];

		for (i = 0; i < sizeof(src); i++)
			src[i] = ts_secret(t->seed + 77, i);
		memcpy(before, page_address(pg), PAGE_SIZE);
		ret = ts_dev_write(t, addr + 64, src, sizeof(src));
		blocked = !ret && !memcmp(before, page_address(pg), PAGE_SIZE);
	} else {
		ret = ts_dev_read(t, addr + 64, 256, buf);
		blocked = !ret && ts_nothing_moved(buf, 256);
	}
	mapped = ts_mapped_pages(t, addr + 64, 256);
	if (!linked)
		blocked = blocked && !mapped;
	ts_diag("%s %s at %pad: %s%s", write ? "write" : "read", what, &addr,
		blocked ? "blocked" : "NOT BLOCKED",
		mapped && !linked ? " (the address translates)" : "");
	kfree(buf);
	return blocked;
}

static void sec_fill_secret(struct ts *t, struct page *pg)
{
	u32 i;

	for (i = 0; i < PAGE_SIZE; i++)
		((u8 *)page_address(pg))[i] = ts_secret(t->seed + 5, i);
}

static int case_security(struct ts *t)
{
	struct twostep_iova_state st;
	unsigned int blocked = 0, attempts = 0;
	struct page *pg[4];
	dma_addr_t a;
	unsigned int i;
	u8 buf[256];
	int ret;

	for (i = 0; i < ARRAY_SIZE(pg); i++) {
		pg[i] = alloc_page(GFP_KERNEL);
		if (!TS_EXPECT(t, pg[i], "page"))
			goto out_pages;
		sec_fill_secret(t, pg[i]);
	}
	if (!TS_EXPECT(t, ts_try_alloc(t, &st, 0, 4 * PAGE_SIZE), "try_alloc"))
		goto out_pages;
	a = st.addr;
	ret = twostep_iova_link(t->dev, &st, page_to_phys(pg[0]), 0,
				PAGE_SIZE, DMA_TO_DEVICE, 0);
	ret = ret ?: twostep_iova_link(t->dev, &st, page_to_phys(pg[1]),
				       PAGE_SIZE, PAGE_SIZE, DMA_FROM_DEVICE,
				       0);
	ret = ret ?: twostep_iova_link(t->dev, &st, page_to_phys(pg[3]),
				       3 * PAGE_SIZE, PAGE_SIZE,
				       DMA_BIDIRECTIONAL, 0);
	ret = ret ?: twostep_iova_sync(t->dev, &st, 0, 4 * PAGE_SIZE);
	if (!TS_EXPECT(t, !ret, "links: %d", ret))
		goto out_destroy;

	/*
	 * The guest logs DMAR faults at most 10 per 5 s: start the counted
	 * window with a fresh budget.
	 */
	msleep(5100);
	ktap_line("# dmar-window begin");
	/*
	 * QEMU reports a permission fault only when the translation misses
	 * its IOTLB: the write through the read-only link comes before the
	 * read that checks the link works.
	 */
	blocked += sec_attempt(t, &attempts, "through a DMA_TO_DEVICE link",
			       a, pg[0], true, true);
	ret = ts_dev_read(t, a + 64, sizeof(buf), buf);
	TS_EXPECT(t, !ret && !memcmp(buf, page_address(pg[0]) + 64,
				     sizeof(buf)), "read of a TO_DEVICE link");
	for (i = 0; i < sizeof(buf); i++)
		buf[i] = ts_pat(t->seed + 3, i);
	ret = ts_dev_write(t, a + PAGE_SIZE + 64, buf, sizeof(buf));
	TS_EXPECT(t, !ret && !memcmp(buf, page_address(pg[1]) + 64,
				     sizeof(buf)), "write of a FROM_DEVICE link");
	sec_fill_secret(t, pg[1]);

	blocked += sec_attempt(t, &attempts,
			       "of an allocated, never linked offset",
			       a + 2 * PAGE_SIZE, pg[2], false, false);
	blocked += sec_attempt(t, &attempts,
			       "to an allocated, never linked offset",
			       a + 2 * PAGE_SIZE, pg[2], true, false);

	twostep_iova_unlink(t->dev, &st, 3 * PAGE_SIZE, PAGE_SIZE,
			    DMA_BIDIRECTIONAL, 0);
	blocked += sec_attempt(t, &attempts, "of an unlinked range",
			       a + 3 * PAGE_SIZE, pg[3], false, false);
	blocked += sec_attempt(t, &attempts, "to an unlinked range",
			       a + 3 * PAGE_SIZE, pg[3], true, false);

	twostep_iova_destroy(t->dev, &st, 2 * PAGE_SIZE, DMA_BIDIRECTIONAL,
			     0);
	/*
	 * A lazy domain leaves the destroy's invalidation to the flush
	 * queue, as it does the DMA API's own unmaps: the freed range is
	 * unreachable once the queue is flushed (10 ms at most). That its
	 * IOVA is not handed out before: case lazy_reuse.
	 */
	if (ts_domain(t) && ts_domain(t)->type == IOMMU_DOMAIN_DMA_FQ) {
		msleep(50);
		ts_diag("lazy domain: waited for the flush queue");
	}
	blocked += sec_attempt(t, &attempts, "of a freed range", a, pg[0],
			       false, false);
	blocked += sec_attempt(t, &attempts, "to a freed range",
			       a + PAGE_SIZE, pg[1], true, false);

	/* After detach nothing of the range is reachable. */
	if (TS_EXPECT(t, ts_try_alloc(t, &st, 0, PAGE_SIZE),
		      "try_alloc") &&
	    TS_EXPECT(t, !twostep_iova_link(t->dev, &st, page_to_phys(pg[2]),
					    0, PAGE_SIZE, DMA_BIDIRECTIONAL,
					    0), "link")) {
		twostep_iova_sync(t->dev, &st, 0, PAGE_SIZE);
		twostep_detach(t->dev);
		blocked += sec_attempt(t, &attempts, "after detach",
				       st.addr, pg[2], false, false);
		blocked += sec_attempt(t, &attempts, "after detach",
				       st.addr, pg[2], true, false);
	}
	/* the fault handler logs asynchronously: let the last one land */
	msleep(1000);
	ktap_line("# dmar-window end expected=%u", attempts);
	ktap_line("# summary: unauthorized accesses blocked %u/%u", blocked,
		  attempts);
	TS_EXPECT(t, blocked == attempts, "an access was not blocked");
	goto out_pages;

out_destroy:
	twostep_iova_destroy(t->dev, &st, 4 * PAGE_SIZE, DMA_BIDIRECTIONAL, 0);
out_pages:
	for (i = 0; i < ARRAY_SIZE(pg); i++)
		if (pg[i])
			__free_page(pg[i]);
	return 0;
}

/*
 * A DMA_FROM_DEVICE link asks the IOMMU for a write-only mapping. Whether
 * a device read through it is refused is up to the IOMMU driver: Linux
 * 6.1's Intel driver sets the read bit on every present second-level entry
 * (its "present" bit is the read bit), so there the read goes through. The
 * host says which kind of platform this is (write_only=1: AMD and
 * virtio-iommu, 0: Intel): where write-only is enforced an unblocked read
 * fails the case; where it is not, a blocked read fails it too (the
 * platform is not what the host thinks) and an unblocked one is a skip
 * with that reason. Even the allowed write failing fails it.
 */
static int case_security_write_only(struct ts *t)
{
	struct twostep_iova_state st;
	struct page *pg = alloc_page(GFP_KERNEL);
	u8 buf[256];
	bool blocked;
	unsigned int i, n = 0;	/* not a counted window */
	int ret;

	if (!TS_EXPECT(t, pg, "page"))
		return 0;
	ret = TS_SKIP;
	if (!TS_EXPECT(t, ts_try_alloc(t, &st, 0, PAGE_SIZE),
		       "try_alloc"))
		goto out;
	if (TS_EXPECT(t, !twostep_iova_link(t->dev, &st, page_to_phys(pg), 0,
					    PAGE_SIZE, DMA_FROM_DEVICE, 0) &&
		      !twostep_iova_sync(t->dev, &st, 0, PAGE_SIZE), "link")) {
		for (i = 0; i < sizeof(buf); i++)
			buf[i] = ts_pat(t->seed + 4, i);
		TS_EXPECT(t, !ts_dev_write(t, st.addr + 64, buf, sizeof(buf)) &&
			  !memcmp(buf, page_address(pg) + 64, sizeof(buf)),
			  "the allowed write failed");
		sec_fill_secret(t, pg);
		blocked = sec_attempt(t, &n, "through a DMA_FROM_DEVICE link",
				      st.addr, pg, false, true);
		if (blocked) {
			ret = 0;
			TS_EXPECT(t, t->write_only != 0,
				  "blocked where the driver is known to grant reads: is the platform the one the host says?");
		} else if (t->write_only == 1) {
			ret = 0;
			TS_EXPECT(t, blocked,
				  "read through a write-only link went through where the IOMMU driver enforces write-only");
		} else {
			snprintf(t->skip, sizeof(t->skip),
				 "the IOMMU driver grants reads on write-only mappings");
		}
	}
	twostep_iova_destroy(t->dev, &st, PAGE_SIZE, DMA_FROM_DEVICE, 0);
out:
	__free_page(pg);
	return ret;
}

/* ---- shadow-model stress ---- */

#define SM_SLOTS	16
#define SM_MAX_PAGES	32
#define SM_POOL		16	/* contiguous block pages used by links */
#define SM_CHECKPOINTS	10

/* What must be true of one state; link ids mark pages of one link. */
struct sm_slot {
	struct twostep_iova_state st;
	unsigned int pages;
	unsigned int link_id[SM_MAX_PAGES];	/* 0: not linked */
	unsigned int pool_idx[SM_MAX_PAGES];
};

struct sm {
	struct ts *t;
	struct sm_slot slot[SM_SLOTS];
	struct page *block;
	u32 rnd;
	unsigned int next_id;
	unsigned long linked, live, ops, mismatches, refusals_expected;
};

static unsigned int sm_rand(struct sm *m, unsigned int n)
{
	return ts_rand(&m->rnd) % n;
}

static void sm_mismatch(struct sm *m, const char *what, long got, long want)
{
	if (m->mismatches++ < 5)
		ts_diag("stress op %lu: %s: got %ld, model says %ld", m->ops,
			what, got, want);
}

/* Is every page of [s, e) linked in the model? */
static bool sm_covered(struct sm_slot *sl, unsigned int s, unsigned int e)
{
	unsigned int i;

	for (i = s; i < e; i++)
		if (!sl->link_id[i])
			return false;
	return true;
}

static void sm_forget(struct sm *m, struct sm_slot *sl)
{
	unsigned int i;

	for (i = 0; i < sl->pages; i++)
		m->linked -= !!sl->link_id[i];
	m->live--;
	memset(sl, 0, sizeof(*sl));
}

static void sm_op(struct sm *m)
{
	struct ts *t = m->t;
	struct sm_slot *sl = &m->slot[sm_rand(m, SM_SLOTS)];
	unsigned int op = sm_rand(m, 100), s, l, i, b, e, old, linked = 0;
	int ret, want;

	if (!sl->pages) {
		/* empty slot: allocate, now and then with a bad size */
		unsigned int pages = 1 + sm_rand(m, SM_MAX_PAGES);
		bool bad = op < 3;

		ret = ts_try_alloc(t, &sl->st, 0, bad ? 0 : pages * PAGE_SIZE);
		if (bad) {
			m->refusals_expected++;
			if (ret)
				sm_mismatch(m, "try_alloc(0)", ret, 0);
		} else if (!ret) {
			sm_mismatch(m, "try_alloc", 0, 1);
		} else {
			sl->pages = pages;
			m->live++;
		}
		return;
	}
	for (i = 0; i < sl->pages; i++)
		linked += !!sl->link_id[i];

	if (op < 45) {
		/* link l pages of the block at page s */
		s = sm_rand(m, sl->pages + 1);
		l = 1 + sm_rand(m, 4);
		b = sm_rand(m, SM_POOL - l + 1);
		want = 0;
		if (s + l > sl->pages)
			want = -ERANGE;
		for (i = s; !want && i < s + l; i++)
			if (sl->link_id[i])
				want = -EBUSY;
		ret = twostep_iova_link(t->dev, &sl->st,
					page_to_phys(m->block) + b * PAGE_SIZE,
					s * PAGE_SIZE, l * PAGE_SIZE,
					DMA_BIDIRECTIONAL, 0);
		if (ret != want)
			sm_mismatch(m, "link", ret, want);
		if (want)
			m->refusals_expected++;
		if (!ret) {
			m->next_id++;
			for (i = 0; i < l; i++) {
				sl->link_id[s + i] = m->next_id;
				sl->pool_idx[s + i] = b + i;
			}
			m->linked += l;
		}
	} else if (op < 75) {
		/* unlink: mostly whole links from a link start, else junk */
		s = sm_rand(m, sl->pages);
		for (i = 0; i < 8 && s > 0 &&
		     sl->link_id[s] == sl->link_id[s - 1]; i++)
			s--;
		l = 1 + sm_rand(m, 6);
		if (op & 1) {
			/* extend to the end of a link */
			while (s + l < sl->pages && sl->link_id[s + l] &&
			       sl->link_id[s + l] == sl->link_id[s + l - 1])
				l++;
		}
		/*
		 * Whatever the range covers inside the allocation is unmapped;
		 * a link cut at the end goes on as a link of its own. Bad input
		 * (counted): part of the range past the allocation, or not
		 * linked.
		 */
		e = min(s + l, sl->pages);
		twostep_iova_unlink(t->dev, &sl->st, s * PAGE_SIZE,
				    l * PAGE_SIZE, DMA_BIDIRECTIONAL, 0);
		if (!sm_covered(sl, s, e) || s + l > sl->pages)
			m->refusals_expected++;
		if (e < sl->pages && sl->link_id[e] &&
		    sl->link_id[e] == sl->link_id[e - 1]) {
			old = sl->link_id[e];
			m->next_id++;
			for (i = e; i < sl->pages && sl->link_id[i] == old; i++)
				sl->link_id[i] = m->next_id;
		}
		for (i = s; i < e; i++) {
			m->linked -= !!sl->link_id[i];
			sl->link_id[i] = 0;
		}
	} else if (op < 88) {
		s = sm_rand(m, sl->pages + 1);
		l = 1 + sm_rand(m, 4);
		want = s + l > sl->pages ? -ERANGE : 0;
		ret = twostep_iova_sync(t->dev, &sl->st, s * PAGE_SIZE,
					l * PAGE_SIZE);
		if (ret != want)
			sm_mismatch(m, "sync", ret, want);
		if (want)
			m->refusals_expected++;
	} else {
		dma_addr_t addr = sl->st.addr;
		unsigned int pages = sl->pages, left;

		if (op < 95) {
			twostep_iova_destroy(t->dev, &sl->st,
					     pages * PAGE_SIZE,
					     DMA_BIDIRECTIONAL, 0);
		} else {
			/* free with links left is refused and cleaned up */
			if (linked)
				m->refusals_expected++;
			twostep_iova_free(t->dev, &sl->st);
		}
		left = ts_mapped_pages(t, addr, pages * PAGE_SIZE);
		if (left)
			sm_mismatch(m, "pages mapped after destroy/free",
				    left, 0);
		if (sl->st.__size)
			sm_mismatch(m, "state after destroy/free",
				    sl->st.__size, 0);
		sm_forget(m, sl);
	}
}

/* Every page of every live state translates exactly as the model says. */
static void sm_checkpoint(struct sm *m)
{
	struct ts *t = m->t;
	unsigned int k, i, pick = 0, seen = 0;
	struct sm_slot *dma_sl = NULL;
	u8 buf[128];
	int ret;

	for (k = 0; k < SM_SLOTS; k++) {
		struct sm_slot *sl = &m->slot[k];

		for (i = 0; i < sl->pages; i++) {
			phys_addr_t want = sl->link_id[i] ?
				page_to_phys(m->block) +
				sl->pool_idx[i] * PAGE_SIZE : 0;
			phys_addr_t got = iommu_iova_to_phys(ts_domain(t),
					sl->st.addr + i * PAGE_SIZE);

			if (got != want)
				sm_mismatch(m, "iova_to_phys", got, want);
			if (sl->link_id[i] && !sm_rand(m, ++seen)) {
				dma_sl = sl;
				pick = i;
			}
		}
	}
	if (!dma_sl)
		return;
	/* Real DMA spot check through one linked page. */
	ret = ts_dev_read(t, dma_sl->st.addr + pick * PAGE_SIZE + 1000,
			  sizeof(buf), buf);
	if (ret || memcmp(buf, page_address(m->block) +
			  dma_sl->pool_idx[pick] * PAGE_SIZE + 1000,
			  sizeof(buf)))
		sm_mismatch(m, "DMA spot check", ret, 0);
}

static int case_stress(struct ts *t)
{
	struct twostep_stats s0, s1;
	unsigned long every;
	struct sm *m;
	ktime_t start;
	unsigned int k;
	u64 ns;

	m = vzalloc(sizeof(*m));
	if (!TS_EXPECT(t, m, "allocation"))
		return 0;
	m->t = t;
	m->rnd = t->stress_seed;
	m->block = alloc_pages(GFP_KERNEL, ilog2(SM_POOL));
	if (!TS_EXPECT(t, m->block, "pages"))
		goto out;
	ts_pages_fill_block(m->block, SM_POOL, t->seed + 40);
	ts_stats(t, &s0);
	every = max(1U, t->stress_ops / SM_CHECKPOINTS);
	start = ktime_get();
	for (m->ops = 0; m->ops < t->stress_ops; m->ops++) {
		sm_op(m);
		ts_stats(t, &s1);
		if (s1.linked_granules - s0.linked_granules !=
		    m->linked * ts_gpp(t))
			sm_mismatch(m, "linked granules",
				    s1.linked_granules - s0.linked_granules,
				    m->linked * ts_gpp(t));
		if (s1.live_allocs - s0.live_allocs != m->live)
			sm_mismatch(m, "live allocations",
				    s1.live_allocs - s0.live_allocs, m->live);
		if ((m->ops + 1) % every == 0)
			sm_checkpoint(m);
		if ((m->ops & 1023) == 0)
			cond_resched();
	}
	ns = ktime_to_ns(ktime_sub(ktime_get(), start));
	if (s1.misuse - s0.misuse != m->refusals_expected)
		sm_mismatch(m, "refused calls", s1.misuse - s0.misuse,
			    m->refusals_expected);
	for (k = 0; k < SM_SLOTS; k++) {
		if (m->slot[k].pages) {
			twostep_iova_destroy(t->dev, &m->slot[k].st,
					     m->slot[k].pages * PAGE_SIZE,
					     DMA_BIDIRECTIONAL, 0);
			sm_forget(m, &m->slot[k]);
		}
	}
	ts_stats(t, &s1);
	ts_diag("stress: %lu ops in %llu ms, %lu refusals expected and seen",
		m->ops, ns / NSEC_PER_MSEC, m->refusals_expected);
	ktap_line("# summary: stress ops %lu mismatches %lu seed %u", m->ops,
		  m->mismatches, t->stress_seed);
	TS_EXPECT(t, !m->mismatches, "%lu mismatches", m->mismatches);
	TS_EXPECT(t, s1.live_allocs == s0.live_allocs &&
		  s1.linked_granules == s0.linked_granules,
		  "left behind: %lu live, %lu linked",
		  s1.live_allocs - s0.live_allocs,
		  s1.linked_granules - s0.linked_granules);
	__free_pages(m->block, ilog2(SM_POOL));
out:
	vfree(m);
	return 0;
}

/* ---- concurrency ---- */

struct cc_worker {
	struct ts *t;
	struct task_struct *task;
	struct completion done;
	struct ts_pages p;
	unsigned int cpu, iters, errors;
	u64 ns;
};

static int cc_thread(void *data)
{
	struct cc_worker *w = data;
	struct ts *t = w->t;
	struct twostep_iova_state st;
	ktime_t start = ktime_get();
	unsigned int it, i;
	int ret;

	for (it = 0; it < t->conc_ops && !kthread_should_stop(); it++) {
		if (!ts_try_alloc(t, &st, 0, w->p.n * PAGE_SIZE)) {
			w->errors++;
			continue;
		}
		for (i = 0; i < w->p.n; i++) {
			ret = twostep_iova_link(t->dev, &st,
						page_to_phys(w->p.pg[i]),
						i * PAGE_SIZE, PAGE_SIZE,
						DMA_BIDIRECTIONAL, 0);
			w->errors += !!ret;
		}
		w->errors += !!twostep_iova_sync(t->dev, &st, 0,
						 w->p.n * PAGE_SIZE);
		for (i = 0; i < w->p.n; i++)
			w->errors += iommu_iova_to_phys(ts_domain(t),
					st.addr + i * PAGE_SIZE) !=
				     page_to_phys(w->p.pg[i]);
		twostep_iova_unlink(t->dev, &st, 0, 2 * PAGE_SIZE,
				    DMA_BIDIRECTIONAL, 0);
		w->errors += !!iommu_iova_to_phys(ts_domain(t), st.addr);
		twostep_iova_destroy(t->dev, &st, w->p.n * PAGE_SIZE,
				     DMA_BIDIRECTIONAL, 0);
		w->iters++;
		if ((it & 63) == 0)
			cond_resched();
	}
	w->ns = ktime_to_ns(ktime_sub(ktime_get(), start));
	complete(&w->done);
	while (!kthread_should_stop())
		schedule_timeout_interruptible(1);
	return 0;
}

static int case_concurrency(struct ts *t)
{
	unsigned int nw = min(num_online_cpus(), 8U), i, dma_ok = 0,
		     dma_bad = 0, started = 0;
	struct twostep_stats s0, s1;
	struct cc_worker *w;
	struct page *pg;
	u8 buf[512];

	w = kcalloc(nw, sizeof(*w), GFP_KERNEL);
	pg = alloc_page(GFP_KERNEL);
	if (!TS_EXPECT(t, w && pg, "allocation"))
		goto out;
	ts_stats(t, &s0);
	for (i = 0; i < nw; i++) {
		w[i].t = t;
		w[i].cpu = i;
		init_completion(&w[i].done);
		if (!TS_EXPECT(t, !ts_pages_get(t, &w[i].p, 4), "pages"))
			goto out_stop;
		w[i].task = kthread_create(cc_thread, &w[i], "twostep-cc/%u",
					   i);
		if (!TS_EXPECT(t, !IS_ERR(w[i].task), "kthread")) {
			w[i].task = NULL;
			goto out_stop;
		}
		kthread_bind(w[i].task, i);
		wake_up_process(w[i].task);
		started++;
	}
	/* Regular DMA-API traffic on the same device meanwhile. */
	for (;;) {
		bool all_done = true;
		dma_addr_t addr;

		for (i = 0; i < started; i++)
			all_done &= completion_done(&w[i].done);
		if (all_done && dma_ok + dma_bad >= 2)
			break;
		for (i = 0; i < sizeof(buf); i++)
			buf[i] = ts_pat(t->seed + dma_ok, i);
		addr = dma_map_page(t->dev, pg, 0, PAGE_SIZE,
				    DMA_BIDIRECTIONAL);
		if (dma_mapping_error(t->dev, addr)) {
			dma_bad++;
			continue;
		}
		if (!ts_dev_write(t, addr + 100, buf, sizeof(buf)) &&
		    !memcmp(page_address(pg) + 100, buf, sizeof(buf)))
			dma_ok++;
		else
			dma_bad++;
		dma_unmap_page(t->dev, addr, PAGE_SIZE, DMA_BIDIRECTIONAL);
	}
out_stop:
	for (i = 0; i < nw; i++) {
		if (w[i].task) {
			wait_for_completion(&w[i].done);
			kthread_stop(w[i].task);
			ts_diag("worker %u: %u iterations (%u ops) in %llu us, %u errors",
				i, w[i].iters, w[i].iters * 8,
				w[i].ns / NSEC_PER_USEC, w[i].errors);
			TS_EXPECT(t, !w[i].errors && w[i].iters == t->conc_ops,
				  "worker %u", i);
		}
		ts_pages_put(&w[i].p);
	}
	ts_diag("concurrency: %u workers x %u iterations, DMA-API transfers verified %u, bad %u",
		started, t->conc_ops, dma_ok, dma_bad);
	TS_EXPECT(t, started == nw, "workers started");
	TS_EXPECT(t, !dma_bad && dma_ok, "DMA-API traffic");
	ts_stats(t, &s1);
	TS_EXPECT(t, s1.live_allocs == s0.live_allocs &&
		  s1.linked_granules == s0.linked_granules &&
		  s1.misuse == s0.misuse, "lost IOVA or refused calls");
out:
	if (pg)
		__free_page(pg);
	kfree(w);
	return 0;
}

/* ---- fault injection ---- */

static int case_fault_injection(struct ts *t)
{
	struct twostep_iova_state st;
	struct twostep_stats s0, s1;
	struct page *block;
	phys_addr_t phys;
	unsigned int i, n = 8;
	int ret, rets[4];

	block = alloc_pages(GFP_KERNEL, 3);
	if (!TS_EXPECT(t, block, "pages"))
		return 0;
	phys = page_to_phys(block);
	ts_stats(t, &s0);

	/* The IOVA allocation fails: false, zeroed state, nothing live. */
	twostep_debug_fail(TWOSTEP_FAIL_IOVA, 1);
	memset(&st, 0xab, sizeof(st));
	TS_EXPECT(t, !ts_try_alloc(t, &st, 0, PAGE_SIZE),
		  "try_alloc with a failing IOVA allocation");
	TS_EXPECT(t, !st.addr && !st.__size, "state not zeroed");
	ts_stats(t, &s1);
	TS_EXPECT(t, s1.live_allocs == s0.live_allocs, "live");

	/* The 5th page-table insertion of an 8-page link fails. */
	if (!TS_EXPECT(t, ts_try_alloc(t, &st, 0, n * PAGE_SIZE), "try_alloc"))
		goto out;
	twostep_debug_fail(TWOSTEP_FAIL_MAP, 5);
	ret = twostep_iova_link(t->dev, &st, phys, 0, n * PAGE_SIZE,
				DMA_BIDIRECTIONAL, 0);
	twostep_debug_fail(TWOSTEP_FAIL_MAP, 0);
	TS_EXPECT(t, ret == -ENOMEM, "link: %d", ret);
	TS_EXPECT(t, !ts_mapped_pages(t, st.addr, n * PAGE_SIZE),
		  "a failed link left %u pages mapped",
		  ts_mapped_pages(t, st.addr, n * PAGE_SIZE));
	ts_stats(t, &s1);
	TS_EXPECT(t, s1.linked_granules == s0.linked_granules, "linked");
	ret = twostep_iova_link(t->dev, &st, phys, 0, n * PAGE_SIZE,
				DMA_BIDIRECTIONAL, 0);
	TS_EXPECT(t, !ret, "link after the failure: %d", ret);
	TS_EXPECT(t, ts_mapped_pages(t, st.addr, n * PAGE_SIZE) == n,
		  "retried link incomplete");
	twostep_iova_destroy(t->dev, &st, n * PAGE_SIZE, DMA_BIDIRECTIONAL,
			     0);

	/* The 3rd of four page links fails; the others stand. */
	if (!TS_EXPECT(t, ts_try_alloc(t, &st, 0, 4 * PAGE_SIZE), "try_alloc"))
		goto out;
	/* the insertions count granules: the 3rd page's first fails */
	twostep_debug_fail(TWOSTEP_FAIL_MAP, 2 * ts_gpp(t) + 1);
	for (i = 0; i < 4; i++)
		rets[i] = twostep_iova_link(t->dev, &st, phys + i * PAGE_SIZE,
					    i * PAGE_SIZE, PAGE_SIZE,
					    DMA_BIDIRECTIONAL, 0);
	twostep_debug_fail(TWOSTEP_FAIL_MAP, 0);
	TS_EXPECT(t, !rets[0] && !rets[1] && rets[2] == -ENOMEM && !rets[3],
		  "links: %d %d %d %d", rets[0], rets[1], rets[2], rets[3]);
	TS_EXPECT(t, !iommu_iova_to_phys(ts_domain(t), st.addr +
					 2 * PAGE_SIZE), "failed page mapped");
	TS_EXPECT(t, ts_mapped_pages(t, st.addr, 4 * PAGE_SIZE) == 3,
		  "other pages");
	twostep_iova_destroy(t->dev, &st, 4 * PAGE_SIZE, DMA_BIDIRECTIONAL,
			     0);
	TS_EXPECT(t, !ts_mapped_pages(t, st.addr, 4 * PAGE_SIZE), "destroy");
	ts_stats(t, &s1);
	TS_EXPECT(t, s1.live_allocs == s0.live_allocs &&
		  s1.linked_granules == s0.linked_granules, "leak");

	/* The driver's sync fails: the error reaches the caller. */
	if (TS_EXPECT(t, ts_try_alloc(t, &st, 0, PAGE_SIZE), "try_alloc")) {
		ret = twostep_iova_link(t->dev, &st, phys, 0, PAGE_SIZE,
					DMA_BIDIRECTIONAL, 0);
		twostep_debug_fail(TWOSTEP_FAIL_SYNC, 1);
		rets[0] = twostep_iova_sync(t->dev, &st, 0, PAGE_SIZE);
		rets[1] = twostep_iova_sync(t->dev, &st, 0, PAGE_SIZE);
		TS_EXPECT(t, !ret && rets[0] == -EIO && !rets[1],
			  "link %d, failing sync %d, sync %d", ret, rets[0],
			  rets[1]);
		twostep_iova_destroy(t->dev, &st, PAGE_SIZE,
				     DMA_BIDIRECTIONAL, 0);
	}
	ts_diag("fault injection: IOVA, map at 5/8 and 3/4, sync: handled");
out:
	twostep_debug_fail(TWOSTEP_FAIL_MAP, 0);
	twostep_debug_fail(TWOSTEP_FAIL_IOVA, 0);
	twostep_debug_fail(TWOSTEP_FAIL_SYNC, 0);
	__free_pages(block, 3);
	return 0;
}

/*
 * ---- a destroyed range's IOVA handed out again ----
 *
 * In a lazy domain a destroy leaves its IOTLB invalidation to twostep's
 * flush queue. Its IOVA must not be handed out before that flush: QEMU's
 * Intel vIOMMU caches a translation until it is invalidated, and a map of
 * a new page there does not invalidate it (without caching mode), so a
 * device would reach the old page at the new range. Each round warms the
 * IOTLB with a read of an old page, destroys the range and allocates
 * until the same address comes back (at the latest after the queue's
 * flush), links a new page there and reads: the new page's bytes, never
 * the old one's. On its CPU, where the flush gives the address back to
 * the allocator's cache. First a burst of destroys between two trace
 * markers: the host counts the IOTLB invalidations of QEMU in between
 * (strict: one per destroy; lazy: batched).
 */
#define LZ_BURST	128
#define LZ_ROUNDS	6
#define LZ_TRIES	48

struct lz {
	struct ts *t;
	struct page *old, *fresh;
	unsigned int burst, reused, stale, wrong, tries;
	struct completion done;
};

/* Read 256 bytes at @addr + 64: 1 the old page's, 0 the new's, -1 else. */
static int lz_read(struct lz *z, dma_addr_t addr)
{
	u8 buf[256];

	if (ts_dev_read(z->t, addr + 64, sizeof(buf), buf))
		return -1;
	if (!memcmp(buf, page_address(z->old) + 64, sizeof(buf)))
		return 1;
	if (!memcmp(buf, page_address(z->fresh) + 64, sizeof(buf)))
		return 0;
	return -1;
}

/* A one-page range with @pg linked and synced, or false. */
static bool lz_range(struct lz *z, struct twostep_iova_state *st,
		     struct page *pg)
{
	struct ts *t = z->t;

	if (!ts_try_alloc(t, st, 0, PAGE_SIZE))
		return false;
	if (!twostep_iova_link(t->dev, st, page_to_phys(pg), 0, PAGE_SIZE,
			       DMA_BIDIRECTIONAL, 0) &&
	    !twostep_iova_sync(t->dev, st, 0, PAGE_SIZE))
		return true;
	twostep_iova_destroy(t->dev, st, PAGE_SIZE, DMA_BIDIRECTIONAL, 0);
	return false;
}

static void lz_round(struct lz *z)
{
	struct twostep_iova_state st, held[LZ_TRIES];
	struct ts *t = z->t;
	unsigned int k, n = 0;
	dma_addr_t old;

	if (!lz_range(z, &st, z->old)) {
		z->wrong++;
		return;
	}
	if (lz_read(z, st.addr) != 1)
		z->wrong++;
	old = st.addr;
	twostep_iova_destroy(t->dev, &st, PAGE_SIZE, DMA_BIDIRECTIONAL, 0);
	for (k = 0; k < LZ_TRIES; k++) {
		z->tries++;
		if (!ts_try_alloc(t, &held[n], 0, PAGE_SIZE))
			break;
		if (held[n].addr == old)
			break;
		n++;
		usleep_range(1000, 2000);
	}
	if (k < LZ_TRIES && held[n].addr == old) {
		st = held[n];
		z->reused++;
		if (twostep_iova_link(t->dev, &st, page_to_phys(z->fresh), 0,
				      PAGE_SIZE, DMA_BIDIRECTIONAL, 0) ||
		    twostep_iova_sync(t->dev, &st, 0, PAGE_SIZE)) {
			z->wrong++;
		} else {
			switch (lz_read(z, old)) {
			case 1:
				z->stale++;
				break;
			case -1:
				z->wrong++;
				break;
			}
		}
		twostep_iova_destroy(t->dev, &st, PAGE_SIZE,
				     DMA_BIDIRECTIONAL, 0);
	}
	while (n--)
		twostep_iova_free(t->dev, &held[n]);
}

static int lz_thread(void *data)
{
	struct lz *z = data;
	struct twostep_iova_state st;
	unsigned int r;

	ts_mark(z->t->edu->pdev, TS_MARK_LAZY_BEGIN, 0);
	for (r = 0; r < LZ_BURST; r++) {
		if (!lz_range(z, &st, z->old))
			break;
		twostep_iova_destroy(z->t->dev, &st, PAGE_SIZE,
				     DMA_BIDIRECTIONAL, 0);
		z->burst++;
	}
	ts_mark(z->t->edu->pdev, TS_MARK_LAZY_END, z->burst);
	for (r = 0; r < LZ_ROUNDS; r++)
		lz_round(z);
	return ts_kthread_finish(&z->done);
}

static int case_lazy_reuse(struct ts *t)
{
	struct iommu_domain *dom = ts_domain(t);
	struct task_struct *task;
	struct lz z = { .t = t };
	unsigned int i;

	init_completion(&z.done);
	z.old = alloc_page(GFP_KERNEL);
	z.fresh = alloc_page(GFP_KERNEL);
	if (!TS_EXPECT(t, z.old && z.fresh, "pages"))
		goto out;
	for (i = 0; i < PAGE_SIZE; i++) {
		((u8 *)page_address(z.old))[i] = ts_pat(t->seed + 31, i);
		((u8 *)page_address(z.fresh))[i] = ts_pat(t->seed + 32, i);
	}
	task = ts_kthread_on(lz_thread, &z, raw_smp_processor_id(),
			     "ts_lazy");
	if (!TS_EXPECT(t, task, "thread"))
		goto out;
	wait_for_completion(&z.done);
	kthread_stop(task);
	ts_diag("%s domain: a burst of %u destroys",
		dom && dom->type == IOMMU_DOMAIN_DMA_FQ ? "lazy" : "strict",
		z.burst);
	ts_diag("%u rounds: address back in %u (%u allocs), old page read %u, bad %u",
		LZ_ROUNDS, z.reused, z.tries, z.stale, z.wrong);
	ktap_line("# lazy destroys %u", z.burst);
	TS_EXPECT(t, z.burst == LZ_BURST, "burst: %u of %u", z.burst,
		  LZ_BURST);
	TS_EXPECT(t, z.reused, "the address never came back: nothing read");
	TS_EXPECT(t, !z.stale,
		  "the device reached the old page at a reused address");
	TS_EXPECT(t, !z.wrong, "a link or a read failed");
out:
	if (z.old)
		__free_page(z.old);
	if (z.fresh)
		__free_page(z.fresh);
	return 0;
}

const struct ts_case ts_robust_cases[] = {
	{ "bad_inputs", case_bad_inputs, true },
	{ "security", case_security, true },
	{ "security_write_only", case_security_write_only, true },
	{ "lazy_reuse", case_lazy_reuse, true },
	{ "stress", case_stress, true },
	{ "concurrency", case_concurrency, true },
	{ "fault_injection", case_fault_injection, true },
};

const unsigned int ts_robust_ncases = ARRAY_SIZE(ts_robust_cases);

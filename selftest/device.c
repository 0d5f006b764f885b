// SPDX-License-Identifier: GPL-2.0
/*
 * twostep self-test: the cases of "twostep for every device": try_alloc
 * from atomic context on a device twostep has never seen, neighbouring
 * links of one state from two CPUs, unmapping in any direction, destroy
 * cleaning up whatever it is given, stale copies of a state, contiguous
 * links at large page sizes, the largest range the domain holds, and a
 * second device of the same IOMMU group using the classic DMA API.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/iommu.h>
#include <linux/irqflags.h>
#include <linux/kthread.h>
#include <linux/mm.h>
#include <linux/sizes.h>
#include <linux/slab.h>

#include "helpers.h"

/*
 * try_alloc with IRQs off on a device twostep holds nothing for: it cannot
 * reserve without sleeping, so it says no (zeroed state) and has a worker
 * grow the reservation; a later call with IRQs off succeeds, and link,
 * sync, DMA and destroy work from there.
 */
static int case_atomic_try_alloc(struct ts *t)
{
	const unsigned int n = 4;
	struct twostep_iova_state st;
	struct twostep_stats s;
	unsigned long flags;
	struct ts_pages p;
	unsigned int tries, linked;
	bool ok;
	int ret;
	u8 *buf;

	buf = kmalloc(EDU_MAX_XFER, GFP_KERNEL);
	if (!TS_EXPECT(t, buf, "allocation"))
		return 0;
	if (!TS_EXPECT(t, !ts_pages_get(t, &p, n), "pages"))
		goto out_buf;
	ts_pages_fill(&p, t->seed + 40);
	if (!twostep_get_stats(t->dev, &s))
		twostep_detach(t->dev);

	memset(&st, 0xab, sizeof(st));
	local_irq_save(flags);
	ok = twostep_iova_try_alloc(t->dev, &st, 0, n * PAGE_SIZE);
	local_irq_restore(flags);
	if (ok)
		ts_note(st.addr, n * PAGE_SIZE);
	TS_EXPECT(t, !ok, "try_alloc reserved with IRQs off");
	TS_EXPECT(t, !st.addr && !st.__size, "state not zeroed");
	ts_stats(t, &s);
	TS_EXPECT(t, s.deferred >= 1, "growth not deferred: %lu", s.deferred);
	if (ok)
		twostep_iova_free(t->dev, &st);

	for (tries = 1; tries <= 100; tries++) {
		local_irq_save(flags);
		ok = twostep_iova_try_alloc(t->dev, &st, 0, n * PAGE_SIZE);
		local_irq_restore(flags);
		if (ok)
			break;
		msleep(50);
	}
	ts_stats(t, &s);
	ts_diag("worker grew the reservation to %llu KiB in %llu us",
		s.reserved >> 10, s.grow_ns / 1000);
	ts_diag("try_alloc with IRQs off succeeded on try %u", tries);
	if (!TS_EXPECT(t, ok, "try_alloc never succeeded after the growth"))
		goto out_pages;
	ts_note(st.addr, n * PAGE_SIZE);
	local_irq_save(flags);
	ret = ts_link_pages(t, &st, &p, &linked);
	local_irq_restore(flags);
	TS_EXPECT(t, !ret, "link/sync with IRQs off: %d", ret);
	ret = ts_dev_read(t, st.addr + PAGE_SIZE - 300, 3000, buf);
	TS_EXPECT(t, !ret && ts_pages_match(&p, PAGE_SIZE - 300, buf, 3000),
		  "read: %d", ret);
	local_irq_save(flags);
	twostep_iova_destroy(t->dev, &st, n * PAGE_SIZE, DMA_BIDIRECTIONAL, 0);
	local_irq_restore(flags);
	TS_EXPECT(t, !st.__size, "state not cleared");
out_pages:
	ts_pages_put(&p);
out_buf:
	kfree(buf);
	return 0;
}

struct nb_worker {
	struct ts *t;
	struct twostep_iova_state *st;
	struct task_struct *task;
	struct completion done;
	phys_addr_t phys;
	unsigned int idx, rounds, failed_links, stale;
};

/* Link and unlink one page of a shared state, over and over. */
static int nb_thread(void *data)
{
	struct nb_worker *w = data;
	struct ts *t = w->t;
	dma_addr_t iova = w->st->addr + w->idx * PAGE_SIZE;
	unsigned int r;

	for (r = 0; r < t->neighbour_rounds; r++) {
		if (twostep_iova_link(t->dev, w->st, w->phys,
				      w->idx * PAGE_SIZE, PAGE_SIZE,
				      DMA_BIDIRECTIONAL, 0)) {
			w->failed_links++;
			continue;
		}
		twostep_iova_unlink(t->dev, w->st, w->idx * PAGE_SIZE,
				    PAGE_SIZE, DMA_BIDIRECTIONAL, 0);
		w->stale += !!iommu_iova_to_phys(ts_domain(t), iova);
		w->rounds++;
		if ((r & 255) == 0)
			cond_resched();
	}
	complete(&w->done);
	while (!kthread_should_stop())
		schedule_timeout_interruptible(1);
	return 0;
}

/*
 * Two CPUs link and unlink the two neighbouring pages of ONE state. Each
 * unlink checks that its range is not part of a longer link by looking at
 * the neighbour's first granule: it must never see the neighbour half
 * linked and refuse, leaving its own page mapped.
 */
static int case_neighbour_race(struct ts *t)
{
	struct twostep_iova_state st;
	struct twostep_stats s0, s1;
	struct nb_worker w[2] = { };
	unsigned int i, rounds = 0, fails = 0, stale = 0;
	struct page *pg;

	if (num_online_cpus() < 2) {
		snprintf(t->skip, sizeof(t->skip), "needs two CPUs");
		return TS_SKIP;
	}
	pg = alloc_pages(GFP_KERNEL, 1);
	if (!TS_EXPECT(t, pg, "pages"))
		return 0;
	if (!TS_EXPECT(t, ts_try_alloc(t, &st, 0, 2 * PAGE_SIZE),
		       "try_alloc"))
		goto out_pages;
	ts_stats(t, &s0);
	for (i = 0; i < 2; i++) {
		w[i].t = t;
		w[i].st = &st;
		w[i].idx = i;
		w[i].phys = page_to_phys(pg) + i * PAGE_SIZE;
		init_completion(&w[i].done);
		w[i].task = kthread_create(nb_thread, &w[i], "twostep-nb/%u",
					   i);
		if (!TS_EXPECT(t, !IS_ERR(w[i].task), "kthread")) {
			w[i].task = NULL;
			continue;
		}
		kthread_bind(w[i].task, i);
		wake_up_process(w[i].task);
	}
	for (i = 0; i < 2; i++) {
		if (!w[i].task)
			continue;
		wait_for_completion(&w[i].done);
		kthread_stop(w[i].task);
		rounds += w[i].rounds;
		fails += w[i].failed_links;
		stale += w[i].stale;
	}
	ts_stats(t, &s1);
	ktap_line("# summary: neighbour rounds %u refusals %lu stale %u",
		  rounds, s1.misuse - s0.misuse, stale);
	TS_EXPECT(t, s1.misuse == s0.misuse, "%lu calls refused",
		  s1.misuse - s0.misuse);
	TS_EXPECT(t, !fails && !stale, "%u failed links, %u stale mappings",
		  fails, stale);
	TS_EXPECT(t, rounds == 2 * t->neighbour_rounds, "rounds %u", rounds);
	TS_EXPECT(t, !s1.linked_granules || s1.linked_granules ==
		  s0.linked_granules, "linked granules %lu", s1.linked_granules);
	twostep_iova_destroy(t->dev, &st, 2 * PAGE_SIZE, DMA_BIDIRECTIONAL, 0);
out_pages:
	__free_pages(pg, 1);
	return 0;
}

/*
 * Unmapping does not depend on the direction: unlink and destroy with
 * DMA_NONE unmap like any other call.
 */
static int case_unmap_any_direction(struct ts *t)
{
	struct twostep_stats s0, s1;
	struct ts_map m;

	if (ts_map_setup(t, &m, 3, DMA_BIDIRECTIONAL, t->seed + 41))
		goto out;
	ts_stats(t, &s0);
	twostep_iova_unlink(t->dev, &m.st, 0, PAGE_SIZE, DMA_NONE, 0);
	TS_EXPECT(t, !ts_mapped_pages(t, m.st.addr, PAGE_SIZE),
		  "unlink with DMA_NONE left the page mapped");
	twostep_iova_unlink(t->dev, &m.st, PAGE_SIZE, PAGE_SIZE,
			    (enum dma_data_direction)42, 0);
	TS_EXPECT(t, !ts_mapped_pages(t, m.st.addr + PAGE_SIZE, PAGE_SIZE),
		  "unlink with direction 42 left the page mapped");
	ts_stats(t, &s1);
	TS_EXPECT(t, s1.misuse == s0.misuse, "unlink refused");
	TS_EXPECT(t, s1.linked_granules == s0.linked_granules - 2 * ts_gpp(t),
		  "linked");
	twostep_iova_destroy(t->dev, &m.st, 3 * PAGE_SIZE, DMA_NONE, 0);
	ts_stats(t, &s1);
	TS_EXPECT(t, !m.st.__size, "destroy with DMA_NONE refused");
	TS_EXPECT(t, s1.misuse == s0.misuse, "destroy refused");
	TS_EXPECT(t, s1.live_allocs == s0.live_allocs - 1, "live");
out:
	ts_map_teardown(t, &m, DMA_BIDIRECTIONAL);
	return 0;
}

/*
 * destroy cleans up whatever it is given: a mapped_len past the allocation
 * and links past mapped_len are bad input, counted once each, and still
 * everything is unmapped and freed.
 */
static int case_destroy_cleans_up(struct ts *t)
{
	struct twostep_stats s0, s1;
	dma_addr_t addr;
	struct ts_map m;
	int pass;

	for (pass = 0; pass < 2; pass++) {
		size_t len = pass ? 2 * PAGE_SIZE : 4 * PAGE_SIZE + 1;

		if (ts_map_setup(t, &m, 4, DMA_BIDIRECTIONAL, t->seed + 42))
			break;
		addr = m.st.addr;
		ts_stats(t, &s0);
		twostep_iova_destroy(t->dev, &m.st, len, DMA_BIDIRECTIONAL, 0);
		ts_stats(t, &s1);
		TS_EXPECT(t, !m.st.__size, "mapped_len %zu: state kept", len);
		TS_EXPECT(t, !ts_mapped_pages(t, addr, 4 * PAGE_SIZE),
			  "mapped_len %zu: pages left mapped", len);
		TS_EXPECT(t, s1.live_allocs == s0.live_allocs - 1 &&
			  s1.linked_granules ==
			  s0.linked_granules - 4 * ts_gpp(t),
			  "mapped_len %zu: live %lu -> %lu, linked %lu -> %lu",
			  len, s0.live_allocs, s1.live_allocs,
			  s0.linked_granules, s1.linked_granules);
		TS_EXPECT(t, s1.misuse == s0.misuse + 1,
			  "mapped_len %zu: %lu bad inputs counted", len,
			  s1.misuse - s0.misuse);
		ts_map_teardown(t, &m, DMA_BIDIRECTIONAL);
	}
	return 0;
}

/*
 * A stale copy of a state is refused even when a new allocation got the
 * same address and size (the allocator hands a freed address out again).
 */
static int case_stale_same_address(struct ts *t)
{
	struct twostep_iova_state a, stale, b[16];
	unsigned int i, n = 0, found = ARRAY_SIZE(b);
	struct page *pg = alloc_page(GFP_KERNEL);
	int ret = 0;

	if (!TS_EXPECT(t, pg, "page"))
		return 0;
	if (!TS_EXPECT(t, ts_try_alloc(t, &a, 0, 2 * PAGE_SIZE), "a"))
		goto out;
	stale = a;
	twostep_iova_free(t->dev, &a);
	for (n = 0; n < ARRAY_SIZE(b); n++) {
		if (!TS_EXPECT(t, ts_try_alloc(t, &b[n], 0, 2 * PAGE_SIZE),
			       "b%u", n))
			break;
		if (b[n].addr == stale.addr) {
			found = n++;
			break;
		}
	}
	if (found == ARRAY_SIZE(b)) {
		snprintf(t->skip, sizeof(t->skip),
			 "the address was not handed out again in %u allocations",
			 n);
		ret = TS_SKIP;
	} else {
		ts_diag("address %pad handed out again after %u allocation(s)",
			&stale.addr, found + 1);
		TS_EXPECT(t, twostep_iova_size(&b[found]) ==
			  twostep_iova_size(&stale), "size");
		ret = twostep_iova_link(t->dev, &stale, page_to_phys(pg), 0,
					PAGE_SIZE, DMA_TO_DEVICE, 0);
		TS_EXPECT(t, ret == -ENOENT, "stale copy accepted: %d", ret);
		TS_EXPECT(t, !ts_mapped_pages(t, stale.addr, PAGE_SIZE),
			  "stale link mapped");
		ret = twostep_iova_link(t->dev, &b[found], page_to_phys(pg), 0,
					PAGE_SIZE, DMA_TO_DEVICE, 0);
		TS_EXPECT(t, !ret, "live state refused: %d", ret);
		ret = 0;
	}
	for (i = 0; i < n; i++)
		twostep_iova_destroy(t->dev, &b[i], PAGE_SIZE, DMA_TO_DEVICE, 0);
out:
	__free_page(pg);
	return ret;
}

/* Does every page of [iova, iova + len) translate to phys + its offset? */
static unsigned int cl_wrong(struct ts *t, dma_addr_t iova, phys_addr_t phys,
			     size_t len)
{
	unsigned int wrong = 0;
	size_t off;

	for (off = 0; off < len; off += PAGE_SIZE)
		wrong += iommu_iova_to_phys(ts_domain(t), iova + off) !=
			 phys + off;
	return wrong;
}

/*
 * Physically contiguous links: 2 MiB at a 2 MiB-aligned IOVA (one large
 * page where the domain has them), the same block at an IOVA that only
 * allows 4 KiB pages, and 2 MiB + 8 KiB straddling a 2 MiB boundary (small,
 * large, small). Every page translates to its own physical page and the
 * device reads and writes the right bytes.
 */
static int case_contiguous_link(struct ts *t)
{
	const size_t blk = SZ_2M;
	struct twostep_iova_state st;
	phys_addr_t phys;
	struct page *pg;
	dma_addr_t base;
	u8 buf[512];
	size_t off;
	int ret, i;
	u32 j;

	pg = alloc_pages(GFP_KERNEL | __GFP_NOWARN, get_order(2 * blk));
	if (!pg) {
		snprintf(t->skip, sizeof(t->skip), "no 4 MiB contiguous block");
		return TS_SKIP;
	}
	phys = page_to_phys(pg);
	ts_pages_fill_block(pg, 2 * blk / PAGE_SIZE, t->seed + 43);
	if (!TS_EXPECT(t, ts_try_alloc(t, &st, 0, 4 * blk), "try_alloc"))
		goto out;
	base = st.addr;
	off = round_up(base, blk) - base;

	/* aligned: one 2 MiB page */
	ret = twostep_iova_link(t->dev, &st, phys, off, blk,
				DMA_BIDIRECTIONAL, 0);
	ret = ret ?: twostep_iova_sync(t->dev, &st, off, blk);
	TS_EXPECT(t, !ret, "aligned link: %d", ret);
	TS_EXPECT(t, !cl_wrong(t, base + off, phys, blk),
		  "aligned link: %u pages translate wrong",
		  cl_wrong(t, base + off, phys, blk));
	ret = ts_dev_read(t, base + off + SZ_1M - 100, sizeof(buf), buf);
	for (j = 0; j < sizeof(buf) && !ret; j++)
		if (buf[j] != ts_pat(t->seed + 43, SZ_1M - 100 + j))
			break;
	TS_EXPECT(t, !ret && j == sizeof(buf), "aligned link: read");
	for (j = 0; j < sizeof(buf); j++)
		buf[j] = ts_pat(t->seed + 44, j);
	/* up to 72 bytes before the end of the large page */
	ret = ts_dev_write(t, base + off + blk - 200, buf, 128);
	TS_EXPECT(t, !ret && !memcmp(page_address(pg) + blk - 200, buf, 128),
		  "aligned link: write");
	twostep_iova_unlink(t->dev, &st, off, blk, DMA_BIDIRECTIONAL, 0);
	TS_EXPECT(t, !ts_mapped_pages(t, base + off, blk), "unlink");

	/*
	 * misaligned by a page: small pages only; then straddling a 2 MiB
	 * boundary with the block's second half: small, large, small
	 */
	for (i = 0; i < 2; i++) {
		size_t o = i ? off + blk - PAGE_SIZE : off + PAGE_SIZE;
		phys_addr_t p = i ? phys + blk - PAGE_SIZE : phys;
		size_t len = i ? blk + 2 * PAGE_SIZE : blk;

		if (i && o + len > 4 * blk)
			o -= blk;
		ret = twostep_iova_link(t->dev, &st, p, o, len,
					DMA_BIDIRECTIONAL, 0);
		ret = ret ?: twostep_iova_sync(t->dev, &st, o, len);
		TS_EXPECT(t, !ret, "link %d: %d", i, ret);
		TS_EXPECT(t, !cl_wrong(t, base + o, p, len),
			  "link %d: %u pages translate wrong", i,
			  cl_wrong(t, base + o, p, len));
		ret = ts_dev_read(t, base + o + len / 2, sizeof(buf), buf);
		TS_EXPECT(t, !ret && !memcmp(buf, page_address(pg) +
					     (p - phys) + len / 2,
					     sizeof(buf)), "link %d: read", i);
		twostep_iova_unlink(t->dev, &st, o, len, DMA_BIDIRECTIONAL, 0);
		TS_EXPECT(t, !ts_mapped_pages(t, base + o, len),
			  "link %d: unlink", i);
	}
	twostep_iova_free(t->dev, &st);
out:
	__free_pages(pg, get_order(2 * blk));
	return 0;
}

/*
 * The largest range: 64 GiB by default, where the device's mask and the
 * domain hold it. Sparsely linked (first page, a page past 1 GiB, last
 * page), read by the device, destroyed; then the reservation is returned.
 */
static int case_largest_range(struct ts *t)
{
	struct twostep_iova_state st;
	struct twostep_stats s;
	u64 size = t->large_range, offs[3];
	struct page *pg[3] = { };
	unsigned int i, ok = 0;
	dma_addr_t addr = 0;
	u8 buf[256];
	int ret = 0;

	if (!size || size >= ts_too_large(t)) {
		snprintf(t->skip, sizeof(t->skip),
			 "%llu bytes do not fit under the DMA mask and aperture",
			 size);
		return TS_SKIP;
	}
	offs[0] = 0;
	offs[1] = SZ_1G + 2 * PAGE_SIZE;
	offs[2] = size - PAGE_SIZE;
	for (i = 0; i < 3; i++) {
		pg[i] = alloc_page(GFP_KERNEL);
		if (!TS_EXPECT(t, pg[i], "page"))
			goto out;
		memset(page_address(pg[i]), 0x30 + i, PAGE_SIZE);
	}
	if (!TS_EXPECT(t, ts_try_alloc(t, &st, 0, size),
		       "try_alloc of %llu bytes", size))
		goto out;
	addr = st.addr;
	ts_stats(t, &s);
	ts_diag("%llu GiB at %pad, reservation %llu GiB in %u chunk(s), last growth %llu ms",
		size >> 30, &addr, s.reserved >> 30, s.chunks,
		s.grow_ns / NSEC_PER_MSEC);
	for (i = 0; i < 3; i++)
		ret = ret ?: twostep_iova_link(t->dev, &st,
					       page_to_phys(pg[i]), offs[i],
					       PAGE_SIZE, DMA_TO_DEVICE, 0);
	for (i = 0; i < 3 && !ret; i++)
		ret = twostep_iova_sync(t->dev, &st, offs[i], PAGE_SIZE);
	TS_EXPECT(t, !ret, "links: %d", ret);
	for (i = 0; i < 3 && !ret; i++) {
		ret = ts_dev_read(t, addr + offs[i] + 100, sizeof(buf), buf);
		if (!ret && buf[0] == 0x30 + i && buf[sizeof(buf) - 1] == 0x30 + i)
			ok++;
	}
	TS_EXPECT(t, ok == 3, "%u of 3 sparse pages read right", ok);
	twostep_iova_destroy(t->dev, &st, size, DMA_TO_DEVICE, 0);
	for (i = 0; i < 3; i++)
		TS_EXPECT(t, !ts_mapped_pages(t, addr + offs[i], PAGE_SIZE),
			  "page %u mapped after destroy", i);
	ts_stats(t, &s);
	TS_EXPECT(t, !s.live_allocs && !s.linked_granules, "live %lu/%lu",
		  s.live_allocs, s.linked_granules);
	if (!t->failed)
		ktap_line("# summary: largest range %llu bytes %s", size,
			  "allocated, sparsely linked, destroyed");
	/* give the reservation back to the DMA API */
	twostep_detach(t->dev);
	TS_EXPECT(t, ts_api_probe(t), "try_alloc after the detach");
out:
	for (i = 0; i < 3; i++)
		if (pg[i])
			__free_page(pg[i]);
	return 0;
}

struct dr_worker {
	struct ts *t;
	struct completion done;
	atomic_t stop;
	unsigned long calls, odd;
};

/* Calls that are refused, over and over, while the context comes and goes. */
static int dr_worker_thread(void *data)
{
	struct dr_worker *w = data;
	struct twostep_iova_state st = { };
	int ret;

	while (!atomic_read(&w->stop)) {
		ret = twostep_iova_sync(w->t->dev, &st, 0, PAGE_SIZE);
		w->odd += ret != -ENOENT && ret != -ENODEV;
		twostep_iova_unlink(w->t->dev, &st, 0, PAGE_SIZE,
				    DMA_TO_DEVICE, 0);
		w->calls++;
		if ((w->calls & 63) == 0)
			cond_resched();
	}
	complete(&w->done);
	return 0;
}

/*
 * Refused calls racing a detach: the refusal is reported and counted
 * without touching the context after it may have been freed (the
 * configuration with slub_debug poisoning catches a write to a freed
 * context), and is refused with -ENOENT or -ENODEV, nothing else.
 */
static int case_detach_race(struct ts *t)
{
	struct dr_worker w = { .t = t };
	struct task_struct *task;
	unsigned int i, rounds = 300, ok = 0;

	init_completion(&w.done);
	task = kthread_run(dr_worker_thread, &w, "twostep-dr");
	if (!TS_EXPECT(t, !IS_ERR(task), "kthread"))
		return 0;
	for (i = 0; i < rounds; i++) {
		twostep_detach(t->dev);
		ok += ts_api_probe(t);
	}
	atomic_set(&w.stop, 1);
	wait_for_completion(&w.done);
	ts_diag("%u detach/set-up rounds, %lu refused calls beside them",
		rounds, w.calls);
	TS_EXPECT(t, ok == rounds, "try_alloc failed in %u rounds",
		  rounds - ok);
	TS_EXPECT(t, !w.odd, "%lu refusals with another errno", w.odd);
	TS_EXPECT(t, w.calls, "the racing thread made no call");
	return 0;
}

/* The peer device writes @len bytes of @src to @addr. */
static int gr_peer_write(struct edu_dev *peer, u8 *probe, dma_addr_t probe_dma,
			 dma_addr_t addr, const u8 *src, u32 len)
{
	int ret;

	memcpy(probe, src, len);
	ret = edu_dma(peer, probe_dma, 0, len, false);
	return ret ?: edu_dma(peer, addr, 0, len, true);
}

/*
 * A second device of the same IOMMU group (same domain) maps pages with
 * the classic DMA API while the first one has two-step ranges live: no
 * classic address ever lies inside the first device's reservation or live
 * ranges, and both devices move the right data.
 */
static int case_group_classic(struct ts *t)
{
	struct device *pdev = t->peer ? &t->peer->pdev->dev : NULL;
	/* 1024 classic addresses live at the same time, four times over */
	const unsigned int nmaps = 1024, rounds = 4, n = 8;
	unsigned int i, r, addrs = 0, overlaps = 0, bad = 0;
	struct iommu_group *g0 = NULL, *g1 = NULL;
	dma_addr_t *classic, probe_dma = 0;
	struct page *cpage = NULL;
	struct ts_map m[4];
	u8 *probe = NULL, buf[256];
	int ret;

	if (!pdev) {
		snprintf(t->skip, sizeof(t->skip),
			 "no second edu device in the group");
		return TS_SKIP;
	}
	g0 = iommu_group_get(t->dev);
	g1 = iommu_group_get(pdev);
	TS_EXPECT(t, g0 && g0 == g1, "the two edu devices are not in one group");
	classic = kcalloc(nmaps, sizeof(*classic), GFP_KERNEL);
	cpage = alloc_page(GFP_KERNEL);
	probe = dma_alloc_coherent(pdev, EDU_BUF_SIZE, &probe_dma, GFP_KERNEL);
	memset(m, 0, sizeof(m));
	if (!TS_EXPECT(t, classic && cpage && probe, "allocation"))
		goto out;
	for (i = 0; i < ARRAY_SIZE(m); i++)
		if (ts_map_setup(t, &m[i], n, DMA_BIDIRECTIONAL,
				 t->seed + 50 + i))
			goto out_maps;
	ts_diag("peer DMA mask %#llx, probe %pad, first two-step range %pad",
		dma_get_mask(pdev), &probe_dma, &m[0].st.addr);

	for (r = 0; r < rounds; r++) {
		for (i = 0; i < nmaps; i++) {
			classic[i] = dma_map_page(pdev, cpage, 0, PAGE_SIZE,
						  DMA_BIDIRECTIONAL);
			if (dma_mapping_error(pdev, classic[i])) {
				bad++;
				classic[i] = 0;
				continue;
			}
			addrs++;
			if (ts_in_chunks(t->dev, classic[i], PAGE_SIZE))
				overlaps++;
		}
		/* real data through both devices */
		for (i = 0; i < sizeof(buf); i++)
			buf[i] = ts_pat(t->seed + 60 + r, i);
		ret = gr_peer_write(t->peer, probe, probe_dma,
				    classic[r % nmaps] + 64, buf,
				    sizeof(buf));
		if (ret || memcmp(page_address(cpage) + 64, buf,
				  sizeof(buf)))
			bad++;
		ret = ts_dev_read(t, m[r % 4].st.addr + PAGE_SIZE - 50,
				  sizeof(buf), buf);
		if (ret || !ts_pages_match(&m[r % 4].p, PAGE_SIZE - 50,
					   buf, sizeof(buf)))
			bad++;
		for (i = 0; i < nmaps; i++)
			if (classic[i])
				dma_unmap_page(pdev, classic[i], PAGE_SIZE,
					       DMA_BIDIRECTIONAL);
	}
	ktap_line("# summary: group classic addresses %u overlaps %u",
		  addrs, overlaps);
	TS_EXPECT(t, !overlaps, "classic addresses inside twostep's space");
	TS_EXPECT(t, !bad, "%u failed mappings or transfers", bad);
	TS_EXPECT(t, addrs == nmaps * rounds, "%u addresses", addrs);
out_maps:
	for (i = 0; i < ARRAY_SIZE(m); i++)
		ts_map_teardown(t, &m[i], DMA_BIDIRECTIONAL);
out:
	if (probe)
		dma_free_coherent(pdev, EDU_BUF_SIZE, probe, probe_dma);
	if (cpage)
		__free_page(cpage);
	kfree(classic);
	if (g0)
		iommu_group_put(g0);
	if (g1)
		iommu_group_put(g1);
	return 0;
}

const struct ts_case ts_device_cases[] = {
	{ "atomic_try_alloc", case_atomic_try_alloc, true },
	{ "neighbour_race", case_neighbour_race, true },
	{ "unmap_any_direction", case_unmap_any_direction, true },
	{ "destroy_cleans_up", case_destroy_cleans_up, true },
	{ "stale_same_address", case_stale_same_address, true },
	{ "contiguous_link", case_contiguous_link, true },
	{ "group_classic", case_group_classic, true },
	{ "detach_race", case_detach_race, true },
	{ "largest_range", case_largest_range, true },
};

const unsigned int ts_device_ncases = ARRAY_SIZE(ts_device_cases);

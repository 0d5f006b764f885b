// SPDX-License-Identifier: GPL-2.0
/*
 * twostep self-test: safety at the edges. An unlink leaves nothing of its
 * range reachable whatever was linked there, and keeps what lies outside
 * (large pages split); a link racing a destroy leaves nothing mapped in
 * freed IOVA; states of any bit pattern are refused; failed attaches,
 * huge sizes and stale states from an earlier context leave nothing
 * behind and match nothing.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/completion.h>
#include <linux/cpumask.h>
#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/bottom_half.h>
#include <linux/hmm.h>
#include <linux/iommu.h>
#include <linux/jiffies.h>
#include <linux/kthread.h>
#include <linux/mm.h>
#include <linux/panic.h>
#include <linux/rcupdate.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/spinlock.h>

#include "helpers.h"

/* ---- unlink coverage ---- */

struct uc {
	struct ts *t;
	unsigned int cases;
	unsigned long left;	/* granules inside an unlinked range mapped */
	unsigned long lost;	/* granules outside that stopped translating */
};

/*
 * After unlinking [lo, hi) (bytes) of a range of @pages pages whose page i
 * was linked to phys[i] (0: never linked), nothing inside may translate and
 * everything outside must translate as before.
 */
static void uc_check(struct uc *u, const char *name, dma_addr_t addr,
		     const phys_addr_t *phys, unsigned int pages, size_t lo,
		     size_t hi)
{
	struct iommu_domain *dom = ts_domain(u->t);
	unsigned long left = 0, lost = 0;
	unsigned int i;
	phys_addr_t now;

	for (i = 0; i < pages; i++) {
		now = iommu_iova_to_phys(dom, addr + (dma_addr_t)i * PAGE_SIZE);
		if ((size_t)i * PAGE_SIZE >= lo && (size_t)i * PAGE_SIZE < hi)
			left += !!now;
		else if (phys[i])
			lost += now != phys[i];
	}
	u->cases++;
	u->left += left;
	u->lost += lost;
	TS_EXPECT(u->t, !left && !lost,
		  "%s: %lu page(s) inside still mapped, %lu outside lost",
		  name, left, lost);
}

/* Pages 0, 1 and 3 linked on their own; unlink(0, 4 pages). */
static void uc_holes(struct uc *u, struct page *block)
{
	struct ts *t = u->t;
	phys_addr_t phys[4] = { }, base = page_to_phys(block);
	struct twostep_iova_state st;
	struct twostep_stats s0, s1;
	unsigned int i;
	int ret = 0;

	if (!TS_EXPECT(t, ts_try_alloc(t, &st, 0, 4 * PAGE_SIZE), "try_alloc"))
		return;
	for (i = 0; i < 4 && !ret; i++) {
		if (i == 2)
			continue;
		phys[i] = base + i * PAGE_SIZE;
		ret = twostep_iova_link(t->dev, &st, phys[i], i * PAGE_SIZE,
					PAGE_SIZE, DMA_BIDIRECTIONAL, 0);
	}
	ret = ret ?: twostep_iova_sync(t->dev, &st, 0, 4 * PAGE_SIZE);
	if (TS_EXPECT(t, !ret, "holes: links %d", ret)) {
		ts_stats(t, &s0);
		twostep_iova_unlink(t->dev, &st, 0, 4 * PAGE_SIZE,
				    DMA_BIDIRECTIONAL, 0);
		ts_stats(t, &s1);
		uc_check(u, "holes", st.addr, phys, 4, 0, 4 * PAGE_SIZE);
		TS_EXPECT(t, s0.linked_granules - s1.linked_granules ==
			  3 * ts_gpp(t) &&
			  s1.misuse == s0.misuse + 1,
			  "holes: %lu granules unlinked, %lu refusals",
			  s0.linked_granules - s1.linked_granules,
			  s1.misuse - s0.misuse);
		/* the granules are free again */
		ret = twostep_iova_link(t->dev, &st, base, 0, 4 * PAGE_SIZE,
					DMA_BIDIRECTIONAL, 0);
		TS_EXPECT(t, !ret, "holes: relink of the whole range: %d", ret);
	}
	twostep_iova_destroy(t->dev, &st, 4 * PAGE_SIZE, DMA_BIDIRECTIONAL, 0);
}

/*
 * One link of @n contiguous pages at @off of a range of @pages pages; then
 * unlink [lo, hi) of the range: a cut link (and, where the link sits on a
 * large page, a cut large page). Then the rest once more, from a cut.
 */
static void uc_cut(struct uc *u, const char *name, phys_addr_t base,
		   unsigned int pages, unsigned int off, unsigned int n,
		   size_t lo, size_t hi)
{
	struct ts *t = u->t;
	struct twostep_iova_state st;
	phys_addr_t *phys;
	unsigned int i;
	dma_addr_t addr;
	int ret;

	phys = kcalloc(pages, sizeof(*phys), GFP_KERNEL);
	if (!TS_EXPECT(t, phys, "%s: memory", name))
		return;
	if (!TS_EXPECT(t, ts_try_alloc(t, &st, 0, (size_t)pages * PAGE_SIZE),
		       "%s: try_alloc", name))
		goto out_free;
	ret = twostep_iova_link(t->dev, &st, base, (size_t)off * PAGE_SIZE,
				(size_t)n * PAGE_SIZE, DMA_BIDIRECTIONAL, 0);
	ret = ret ?: twostep_iova_sync(t->dev, &st, 0,
				       (size_t)pages * PAGE_SIZE);
	if (!TS_EXPECT(t, !ret, "%s: link %d", name, ret))
		goto out_destroy;
	for (i = 0; i < n; i++)
		phys[off + i] = base + (phys_addr_t)i * PAGE_SIZE;
	twostep_iova_unlink(t->dev, &st, lo, hi - lo, DMA_BIDIRECTIONAL, 0);
	uc_check(u, name, st.addr, phys, pages, lo, hi);
	for (i = 0; i < pages; i++)
		if ((size_t)i * PAGE_SIZE >= lo && (size_t)i * PAGE_SIZE < hi)
			phys[i] = 0;
	/* what is left is made of links that can be cut again */
	if (lo > (size_t)off * PAGE_SIZE + PAGE_SIZE) {
		twostep_iova_unlink(t->dev, &st, lo - PAGE_SIZE, PAGE_SIZE,
				    DMA_BIDIRECTIONAL, 0);
		uc_check(u, name, st.addr, phys, pages, lo - PAGE_SIZE, lo);
		phys[lo / PAGE_SIZE - 1] = 0;
	}
	if (hi + PAGE_SIZE < (size_t)(off + n) * PAGE_SIZE) {
		twostep_iova_unlink(t->dev, &st, hi, PAGE_SIZE,
				    DMA_BIDIRECTIONAL, 0);
		uc_check(u, name, st.addr, phys, pages, hi, hi + PAGE_SIZE);
	}
out_destroy:
	addr = st.addr;
	twostep_iova_destroy(t->dev, &st, (size_t)pages * PAGE_SIZE,
			     DMA_BIDIRECTIONAL, 0);
	TS_EXPECT(t, !ts_mapped_pages(t, addr, (size_t)pages * PAGE_SIZE),
		  "%s: mapped after destroy", name);
out_free:
	kfree(phys);
}

/*
 * Two links on large pages in one range, with different permissions: the
 * first link's record is kept inline, the second's in the range's xarray.
 * A 4 KiB unlink in each must find that link's own record (else the cut
 * takes its whole large page with it, or maps the rest with the other's
 * permissions) and leave the rest of both translating.
 */
static void uc_two_large(struct uc *u, phys_addr_t pb)
{
	const unsigned int np = SZ_2M / PAGE_SIZE;
	struct ts *t = u->t;
	struct twostep_iova_state st;
	phys_addr_t *phys;
	unsigned int i;
	dma_addr_t addr;
	int ret;

	phys = kcalloc(2 * np, sizeof(*phys), GFP_KERNEL);
	if (!TS_EXPECT(t, phys, "two_large: memory"))
		return;
	if (!TS_EXPECT(t, ts_try_alloc(t, &st, 0, SZ_4M), "two_large: try_alloc"))
		goto out_free;
	ret = twostep_iova_link(t->dev, &st, pb, 0, SZ_2M,
				DMA_BIDIRECTIONAL, 0);
	ret = ret ?: twostep_iova_link(t->dev, &st, pb + SZ_2M, SZ_2M, SZ_2M,
				       DMA_TO_DEVICE, 0);
	ret = ret ?: twostep_iova_sync(t->dev, &st, 0, SZ_4M);
	if (!TS_EXPECT(t, !ret, "two_large: links %d", ret))
		goto out_destroy;
	for (i = 0; i < 2 * np; i++)
		phys[i] = pb + (phys_addr_t)i * PAGE_SIZE;
	twostep_iova_unlink(t->dev, &st, SZ_2M + SZ_1M, PAGE_SIZE,
			    DMA_TO_DEVICE, 0);
	uc_check(u, "two_large_cut_second", st.addr, phys, 2 * np,
		 SZ_2M + SZ_1M, SZ_2M + SZ_1M + PAGE_SIZE);
	phys[(SZ_2M + SZ_1M) / PAGE_SIZE] = 0;
	twostep_iova_unlink(t->dev, &st, SZ_1M, PAGE_SIZE, DMA_BIDIRECTIONAL,
			    0);
	uc_check(u, "two_large_cut_first", st.addr, phys, 2 * np, SZ_1M,
		 SZ_1M + PAGE_SIZE);
out_destroy:
	addr = st.addr;
	twostep_iova_destroy(t->dev, &st, SZ_4M, DMA_BIDIRECTIONAL, 0);
	TS_EXPECT(t, !ts_mapped_pages(t, addr, SZ_4M),
		  "two_large: mapped after destroy");
out_free:
	kfree(phys);
}

/*
 * An hmm map whose bitmap holds a stray entry (mapped in the bitmap, its
 * link gone): the range unmap still unmaps every other entry.
 */
static void uc_hmm_stray(struct uc *u, struct page *block)
{
	struct twostep_hmm_dma_map map;
	struct ts *t = u->t;
	phys_addr_t phys[4];
	unsigned int i;
	size_t n;
	int ret;

	ret = twostep_hmm_dma_map_alloc(t->dev, &map, 4, PAGE_SIZE);
	if (!TS_EXPECT(t, !ret && twostep_use_iova(&map.state),
		       "hmm: map_alloc %d", ret))
		return;
	for (i = 0; i < 4; i++) {
		phys[i] = page_to_phys(block) + i * PAGE_SIZE;
		map.pfn_list[i] = (page_to_pfn(block) + i) | HMM_PFN_VALID;
		TS_EXPECT(t, twostep_hmm_dma_map_pfn(t->dev, &map, i) !=
			  DMA_MAPPING_ERROR, "hmm: map_pfn %u", i);
	}
	/* entry 2 stray: unlinked behind the map's back */
	twostep_iova_unlink(t->dev, &map.state, 2 * PAGE_SIZE, PAGE_SIZE,
			    DMA_BIDIRECTIONAL, 0);
	phys[2] = 0;
	n = twostep_hmm_dma_unmap_range(t->dev, &map, 0, 4);
	uc_check(u, "hmm_stray_entry", map.state.addr, phys, 4, 0,
		 4 * PAGE_SIZE);
	TS_EXPECT(t, n == 4, "hmm: range unmap said %zu entries", n);
	for (i = 0; i < 4; i++)
		TS_EXPECT(t, !twostep_hmm_dma_mapped(&map, i),
			  "hmm: entry %u still counted mapped", i);
	twostep_hmm_dma_map_free(t->dev, &map);
}

static int case_unlink_coverage(struct ts *t)
{
	struct page *block, *big;
	struct uc u = { .t = t };

	block = alloc_pages(GFP_KERNEL, 2);
	if (!TS_EXPECT(t, block, "pages"))
		return 0;
	uc_holes(&u, block);
	/* 4 KiB pages: a link of 4 cut in its middle, at its start, end */
	uc_cut(&u, "cut_4k_middle", page_to_phys(block), 4, 0, 4,
	       PAGE_SIZE, 3 * PAGE_SIZE);
	uc_cut(&u, "cut_4k_head", page_to_phys(block), 4, 0, 4, 0,
	       2 * PAGE_SIZE);
	uc_cut(&u, "cut_4k_tail", page_to_phys(block), 4, 0, 4,
	       3 * PAGE_SIZE, 4 * PAGE_SIZE);
	uc_hmm_stray(&u, block);

	big = alloc_pages(GFP_KERNEL | __GFP_NOWARN, get_order(SZ_4M));
	if (big) {
		phys_addr_t pb = page_to_phys(big);
		unsigned int np = SZ_2M / PAGE_SIZE;

		/* a 2 MiB link on a 2 MiB page: one 4 KiB page out of it */
		uc_cut(&u, "cut_2m_page", pb, 2 * np, 0, np, SZ_1M,
		       SZ_1M + PAGE_SIZE);
		/* a link of two 2 MiB pages cut across the boundary */
		uc_cut(&u, "cut_2m_link", pb, 2 * np, 0, 2 * np,
		       SZ_2M - 3 * PAGE_SIZE, SZ_2M + 5 * PAGE_SIZE);
		/* the edge of the unlink inside a large page */
		uc_cut(&u, "cut_large_page_edge", pb, 2 * np, 0, 2 * np, 0,
		       SZ_2M + SZ_1M);
		uc_two_large(&u, pb);
		__free_pages(big, get_order(SZ_4M));
	} else {
		ts_diag("no 4 MiB of contiguous memory: large-page cuts not run");
	}
	ktap_line("# summary: unlink coverage cases %u left mapped %lu",
		  u.cases, u.left);
	TS_EXPECT(t, big, "the large-page cases need 4 MiB of contiguous memory");
	__free_pages(block, 2);
	return 0;
}

/* ---- cut unlinks on every kind of page-size mask ---- */

/* No context for the device: the next try_alloc() starts a new one. */
static void cm_fresh(struct ts *t)
{
	struct twostep_stats s;

	if (!twostep_get_stats(t->dev, &s))
		twostep_detach(t->dev);
}

/* One link of @n pages at @off of an 8-page range, then [lo, hi) unlinked */
struct cm_cut_spec {
	const char *what;
	unsigned int off, n, lo, hi;
};

static const struct cm_cut_spec cm_cuts[] = {
	{ "middle", 1, 5, 3, 4 },
	{ "head", 1, 5, 1, 3 },
	{ "tail", 1, 5, 5, 6 },
	{ "across", 0, 8, 2, 6 },
	{ "two", 0, 2, 1, 2 },
};

/* One cut of @c, with the link's record store made to fail if @rec. */
static void cm_cut(struct uc *u, const struct cm_cut_spec *c, phys_addr_t pb,
		   unsigned long mask, bool rec)
{
	char name[48];

	snprintf(name, sizeof(name), "%s mask %#lx%s", c->what, mask,
		 rec ? " record failed" : "");
	if (rec)
		twostep_debug_fail(TWOSTEP_FAIL_RECORD, 1);
	uc_cut(u, name, pb, 8, c->off, c->n, (size_t)c->lo * PAGE_SIZE,
	       (size_t)c->hi * PAGE_SIZE);
}

/*
 * Links of several granules cut by unlinks, in a context made while the
 * domain's page sizes are its own, then narrowed to 4 KiB | 2 MiB | 1 GiB
 * (what QEMU's virtio-iommu-pci reports with that page-size-mask; Debian
 * 12's QEMU 7.2 has no such property, so the case narrows the domain as
 * such a device would), each with the link's record stored and with its
 * store made to fail. Without 8 KiB pages, a link of 2 to 511 granules
 * needs no large page, and virtio-iommu keeps a link mapped in one call
 * as one mapping that no unlink can cut.
 */
static int case_cut_masks(struct ts *t)
{
	struct iommu_domain *dom = ts_domain(t);
	unsigned long orig, narrow, masks[2];
	unsigned int nmasks = 0, m, rec, cases0, c;
	struct uc u = { .t = t };
	struct page *block;
	phys_addr_t pb;

	if (!TS_EXPECT(t, dom, "the device's domain"))
		return 0;
	block = alloc_pages(GFP_KERNEL, 3);
	if (!TS_EXPECT(t, block, "pages"))
		return 0;
	pb = page_to_phys(block);
	orig = dom->pgsize_bitmap;
	masks[nmasks++] = orig;
	narrow = orig & (SZ_4K | SZ_2M | SZ_1G);
	if (narrow != orig && (narrow & SZ_4K) && PAGE_SIZE == SZ_4K)
		masks[nmasks++] = narrow;
	for (m = 0; m < nmasks; m++) {
		for (rec = 0; rec < 2; rec++) {
			cm_fresh(t);
			WRITE_ONCE(dom->pgsize_bitmap, masks[m]);
			cases0 = u.cases;
			/* links of 5 and 8 granules cut inside, at an end */
			for (c = 0; c < ARRAY_SIZE(cm_cuts); c++)
				cm_cut(&u, &cm_cuts[c], pb, masks[m], rec);
			twostep_debug_fail(TWOSTEP_FAIL_RECORD, 0);
			TS_EXPECT(t, u.cases > cases0, "no cut ran");
			cm_fresh(t);
			WRITE_ONCE(dom->pgsize_bitmap, orig);
		}
	}
	ktap_line("# summary: cut unlinks %u on page-size masks %u left mapped %lu",
		  u.cases, nmasks, u.left);
	TS_EXPECT(t, !u.left && !u.lost, "%lu granule(s) left mapped, %lu lost",
		  u.left, u.lost);
	__free_pages(block, 3);
	return 0;
}

/* ---- an unlink racing a link of the same range ---- */

#define UL_ROUNDS	1000
#define UL_PAGES	16

struct ul {
	struct ts *t;
	struct twostep_iova_state st;
	phys_addr_t phys;
	int go;			/* round the linking thread may run */
	int ack;		/* last round it finished */
	bool stop;
	unsigned long links;
	struct completion done;
};

/*
 * Link each granule of the round's range once, one after the other: never
 * twice, so that no link maps over an entry a racing unlink left behind
 * (the IOMMU driver would warn of that, as it would under upstream's).
 */
static int ul_thread(void *data)
{
	struct ul *r = data;
	struct twostep_iova_state st;
	int seen = 0, round;
	unsigned int i;

	while (!READ_ONCE(r->stop)) {
		/* pairs with the release of a new round: its state first */
		round = smp_load_acquire(&r->go);
		if (round == seen) {
			cpu_relax();
			continue;
		}
		st = r->st;
		for (i = 0; i < UL_PAGES; i++)
			if (!twostep_iova_link(r->t->dev, &st,
					       r->phys + i * PAGE_SIZE,
					       i * PAGE_SIZE, PAGE_SIZE,
					       DMA_BIDIRECTIONAL, 0))
				r->links++;
		seen = round;
		/* its links done before the round's end shows */
		smp_store_release(&r->ack, round);
	}
	return ts_kthread_finish(&r->done);
}

/*
 * One CPU links granules of a range one by one while another unlinks the
 * whole range (a caller's bug): an unlink that cleared a link's granules
 * before that link had mapped them leaves entries the link map does not
 * know. Afterwards, an unlink of everything, alone, shows such strays;
 * destroy must leave nothing of the range translating.
 */
static int case_unlink_vs_link(struct ts *t)
{
	unsigned int round, strays = 0, left = 0;
	const size_t size = UL_PAGES * PAGE_SIZE;
	unsigned long deadline;
	struct twostep_iova_state st;
	struct task_struct *task;
	struct page *pg;
	struct ul r = { .t = t };
	dma_addr_t addr;

	if (num_online_cpus() < 2) {
		snprintf(t->skip, sizeof(t->skip), "needs two CPUs");
		return TS_SKIP;
	}
	pg = alloc_pages(GFP_KERNEL, get_order(size));
	if (!TS_EXPECT(t, pg, "pages"))
		return 0;
	r.phys = page_to_phys(pg);
	init_completion(&r.done);
	/* on another CPU than this one, so that both run at once */
	task = ts_kthread_on(ul_thread, &r,
			     cpumask_any_but(cpu_online_mask,
					     raw_smp_processor_id()),
			     "twostep-ul");
	if (!TS_EXPECT(t, task, "kthread"))
		goto out_pages;
	for (round = 1; round <= UL_ROUNDS; round++) {
		if (!ts_try_alloc(t, &st, 0, size)) {
			TS_EXPECT(t, 0, "try_alloc in round %u", round);
			break;
		}
		r.st = st;
		/* the state before the round: see ul_thread() */
		smp_store_release(&r.go, round);
		/* the whole range, over and over, while the links go on */
		deadline = jiffies + 10 * HZ;
		do {
			twostep_iova_unlink(t->dev, &st, 0, size,
					    DMA_BIDIRECTIONAL, 0);
			/* should this thread have moved to the other's CPU */
			cond_resched();
			/* pairs with ul_thread()'s release: its links done */
		} while (smp_load_acquire(&r.ack) != round &&
			 time_before(jiffies, deadline));
		/* as above */
		if (!TS_EXPECT(t, smp_load_acquire(&r.ack) == round,
			       "round %u: the linking thread did not finish in 10 s",
			       round))
			break;
		/* alone now: what the link map knows goes */
		twostep_iova_unlink(t->dev, &st, 0, size, DMA_BIDIRECTIONAL, 0);
		addr = st.addr;
		strays += ts_mapped_pages(t, addr, size);
		twostep_iova_destroy(t->dev, &st, size, DMA_BIDIRECTIONAL, 0);
		/* before the IOVA is handed out again */
		left += ts_mapped_pages(t, addr, size);
		cond_resched();
	}
	WRITE_ONCE(r.stop, true);
	wait_for_completion(&r.done);
	kthread_stop(task);
	ktap_line("# summary: unlink racing link rounds %u links %lu strays %u left mapped %u",
		  round - 1, r.links, strays, left);
	TS_EXPECT(t, !left, "%u granule(s) mapped in freed IOVA", left);
	TS_EXPECT(t, r.links, "the linking thread never linked");
out_pages:
	__free_pages(pg, get_order(size));
	return 0;
}

/* ---- a link racing a destroy ---- */

struct lr {
	struct ts *t;
	spinlock_t lock;		/* @st */
	struct twostep_iova_state st;
	phys_addr_t phys;
	bool stop;
	unsigned long links;
	struct completion done;
};

static int lr_thread(void *data)
{
	struct lr *r = data;
	struct twostep_iova_state st;
	unsigned int i = 0;

	while (!READ_ONCE(r->stop)) {
		spin_lock(&r->lock);
		st = r->st;
		spin_unlock(&r->lock);
		if (!twostep_iova_link(r->t->dev, &st, r->phys,
				       (i++ % 4) * PAGE_SIZE, PAGE_SIZE,
				       DMA_BIDIRECTIONAL, 0))
			r->links++;
		if (!(i & 255))
			cond_resched();
	}
	return ts_kthread_finish(&r->done);
}

static int case_link_vs_destroy(struct ts *t)
{
	unsigned int round, rounds = 20000, left = 0;
	struct twostep_iova_state st;
	struct task_struct *task;
	struct page *pg;
	struct lr r = { .t = t };
	dma_addr_t addr;

	if (num_online_cpus() < 2) {
		snprintf(t->skip, sizeof(t->skip), "needs two CPUs");
		return TS_SKIP;
	}
	pg = alloc_page(GFP_KERNEL);
	if (!TS_EXPECT(t, pg, "page"))
		return 0;
	r.phys = page_to_phys(pg);
	spin_lock_init(&r.lock);
	init_completion(&r.done);
	task = ts_kthread_on(lr_thread, &r, 1, "twostep-lr");
	if (!TS_EXPECT(t, task, "kthread"))
		goto out_page;
	for (round = 0; round < rounds; round++) {
		if (!ts_try_alloc(t, &st, 0, 4 * PAGE_SIZE)) {
			TS_EXPECT(t, 0, "try_alloc in round %u", round);
			break;
		}
		spin_lock(&r.lock);
		r.st = st;
		spin_unlock(&r.lock);
		udelay((round % 7) * 3);
		addr = st.addr;
		twostep_iova_destroy(t->dev, &st, 4 * PAGE_SIZE,
				     DMA_BIDIRECTIONAL, 0);
		/* nothing of the old range may translate, ever after */
		left += ts_mapped_pages(t, addr, 4 * PAGE_SIZE);
		if (!(round & 255))
			cond_resched();
	}
	WRITE_ONCE(r.stop, true);
	wait_for_completion(&r.done);
	kthread_stop(task);
	ktap_line("# summary: link racing destroy rounds %u links %lu left mapped %u",
		  round, r.links, left);
	TS_EXPECT(t, !left, "%u page(s) mapped in freed IOVA", left);
	TS_EXPECT(t, r.links, "the racing thread never linked");
out_page:
	__free_page(pg);
	return 0;
}

/* ---- states of any bit pattern ---- */

#define FZ_LIVE		4
#define FZ_CALLS	100000

static int case_fuzz(struct ts *t)
{
	struct twostep_iova_state live[FZ_LIVE], st;
	struct page *block;
	phys_addr_t phys[FZ_LIVE];
	u32 seed = t->seed;
	unsigned int i, k, bad = 0, calls = 0, wrong = 0;
	bool warned = test_taint(TAINT_WARN);
	int ret;

	block = alloc_pages(GFP_KERNEL, 2);
	if (!TS_EXPECT(t, block, "pages"))
		return 0;
	for (k = 0; k < FZ_LIVE; k++) {
		phys[k] = page_to_phys(block) + k * PAGE_SIZE;
		if (!ts_try_alloc(t, &live[k], 0, PAGE_SIZE) ||
		    twostep_iova_link(t->dev, &live[k], phys[k], 0, PAGE_SIZE,
				      DMA_BIDIRECTIONAL, 0) ||
		    twostep_iova_sync(t->dev, &live[k], 0, PAGE_SIZE)) {
			TS_EXPECT(t, 0, "live range %u", k);
			goto out;
		}
	}
	for (i = 0; i < FZ_CALLS; i++) {
		u64 r = (u64)ts_rand(&seed) << 32 | ts_rand(&seed);
		size_t off = ts_rand(&seed) % 3 ? ts_rand(&seed) % (2 * PAGE_SIZE) :
			     (size_t)r;
		size_t size = ts_rand(&seed) % 3 ? 1 + ts_rand(&seed) % PAGE_SIZE :
			      (size_t)(r >> 7);

		/* a live state with bits changed, or noise */
		st = live[ts_rand(&seed) % FZ_LIVE];
		switch (ts_rand(&seed) % 5) {
		case 0:
			st.__size |= BIT_ULL(63);
			break;
		case 1:
			st.__size ^= (u64)(ts_rand(&seed) | 1) << 48;
			break;
		case 2:
			st.__size = r;
			break;
		case 3:
			st.addr ^= (dma_addr_t)(ts_rand(&seed) | 1) << 12;
			break;
		default:
			st.addr = r;
			st.__size = ((u64)ts_rand(&seed) << 32) | ts_rand(&seed);
			break;
		}
		calls++;
		switch (ts_rand(&seed) % 5) {
		case 0:
			ret = twostep_iova_link(t->dev, &st, phys[0], off, size,
						DMA_BIDIRECTIONAL, 0);
			wrong += ret != -ENOENT;
			break;
		case 1:
			ret = twostep_iova_sync(t->dev, &st, off, size);
			wrong += ret != -ENOENT;
			break;
		case 2:
			twostep_iova_unlink(t->dev, &st, off, size,
					    DMA_BIDIRECTIONAL, 0);
			break;
		case 3:
			twostep_iova_destroy(t->dev, &st, size,
					     DMA_BIDIRECTIONAL, 0);
			break;
		default:
			twostep_iova_free(t->dev, &st);
			break;
		}
		if (!(i & 1023))
			cond_resched();
	}
	for (k = 0; k < FZ_LIVE; k++)
		bad += iommu_iova_to_phys(ts_domain(t), live[k].addr) !=
		       phys[k] || !twostep_use_iova(&live[k]);
	ktap_line("# summary: fuzz calls %u oops 0 warnings %d live ranges %s",
		  calls, !warned && test_taint(TAINT_WARN),
		  bad ? "damaged" : "intact");
	TS_EXPECT(t, !wrong, "%u calls with a forged state not refused with -ENOENT",
		  wrong);
	TS_EXPECT(t, !bad, "%u live range(s) damaged", bad);
	TS_EXPECT(t, warned || !test_taint(TAINT_WARN), "a warning");
out:
	for (k = 0; k < FZ_LIVE; k++)
		if (twostep_use_iova(&live[k]))
			twostep_iova_destroy(t->dev, &live[k], PAGE_SIZE,
					     DMA_BIDIRECTIONAL, 0);
	__free_pages(block, 2);
	return 0;
}

/* ---- contexts that may not sleep ---- */

enum ac_ctx { AC_SPINLOCK, AC_SOFTIRQ, AC_RCU, AC_N };

static const char * const ac_names[AC_N] = {
	"spinlock, IRQs on", "softirqs off", "RCU read lock",
};

static DEFINE_SPINLOCK(ac_lock);

/* try_alloc in context @c, until it says yes (at most 100 tries). */
static unsigned int ac_try(struct ts *t, enum ac_ctx c,
			   struct twostep_iova_state *st, size_t size)
{
	unsigned int tries;
	bool ok = false;

	for (tries = 1; tries <= 100; tries++) {
		switch (c) {
		case AC_SPINLOCK:
			spin_lock(&ac_lock);
			ok = twostep_iova_try_alloc(t->dev, st, 0, size);
			spin_unlock(&ac_lock);
			break;
		case AC_SOFTIRQ:
			local_bh_disable();
			ok = twostep_iova_try_alloc(t->dev, st, 0, size);
			local_bh_enable();
			break;
		default:
			rcu_read_lock();
			ok = twostep_iova_try_alloc(t->dev, st, 0, size);
			rcu_read_unlock();
			break;
		}
		if (ok)
			return tries;
		msleep(20);
	}
	return 0;
}

/*
 * In every context that may not sleep, a try_alloc that needs growth says
 * no at once and a later one says yes; and growth finds a free run of the
 * size asked, not just as many free granules.
 */
static int case_atomic_contexts(struct ts *t)
{
	struct twostep_iova_state st, *one;
	const unsigned int n = SZ_2M / PAGE_SIZE;
	struct twostep_stats s0, s1;
	unsigned int c, i, tries, held = 0;
	u64 start, size;
	int ret;

	for (c = 0; c < AC_N; c++) {
		twostep_detach(t->dev);
		tries = ac_try(t, c, &st, 4 * PAGE_SIZE);
		ts_diag("%s: try_alloc said yes on try %u", ac_names[c], tries);
		TS_EXPECT(t, tries > 1, "%s: try %u (1: it reserved, 0: never)",
			  ac_names[c], tries);
		if (tries)
			twostep_iova_free(t->dev, &st);
	}

	/* one chunk of 512 granules, every other one free */
	one = kcalloc(n, sizeof(*one), GFP_KERNEL);
	if (!TS_EXPECT(t, one, "memory"))
		return 0;
	twostep_detach(t->dev);
	ret = twostep_attach(t->dev, SZ_2M, SZ_2M);
	if (!TS_EXPECT(t, !ret, "attach: %d", ret))
		goto out_free;
	for (i = 0; i < n; i++)
		if (!twostep_iova_try_alloc(t->dev, &one[i], 0, PAGE_SIZE))
			break;
	TS_EXPECT(t, i == n && twostep_get_chunk(t->dev, 1, &start, &size),
		  "%u ranges of a page from one 2 MiB chunk", i);
	for (i = 0; i < n; i++)
		if (twostep_use_iova(&one[i]) &&
		    !((one[i].addr >> PAGE_SHIFT) & 1))
			twostep_iova_free(t->dev, &one[i]);
	ts_stats(t, &s0);
	tries = ac_try(t, AC_SPINLOCK, &st, 2 * PAGE_SIZE);
	ts_stats(t, &s1);
	ts_diag("256 free granules, none in a row: 8 KiB under a spinlock on try %u, %u chunks",
		tries, s1.chunks);
	TS_EXPECT(t, tries > 1 && s1.chunks > s0.chunks,
		  "8 KiB: try %u, chunks %u -> %u", tries, s0.chunks,
		  s1.chunks);
	/* the worker reserved what that request needed, not more */
	for (i = 0; twostep_get_chunk(t->dev, i, &start, &size) == 0; i++)
		TS_EXPECT(t, size <= SZ_2M, "a chunk of %llu KiB", size >> 10);
	if (tries)
		twostep_iova_free(t->dev, &st);
	for (i = 0; i < n; i++) {
		held += twostep_use_iova(&one[i]);
		if (twostep_use_iova(&one[i]))
			twostep_iova_free(t->dev, &one[i]);
	}
	ts_diag("%u ranges freed at the end", held);
out_free:
	kfree(one);
	twostep_detach(t->dev);
	return 0;
}

/* ---- detach and first growth against live users ---- */

/* What the other CPU calls while the detach runs. */
enum dr_racer { DR_LINK, DR_BITMAP, DR_ALLOC, DR_RACERS };

static const char *const dr_racer_name[DR_RACERS] = {
	"link and unlink", "hmm_dma_map_pfn and unmap_range",
	"try_alloc, link and destroy",
};

struct dr {
	struct ts *t;
	struct twostep_iova_state st[4];
	struct twostep_hmm_dma_map map;
	phys_addr_t phys;
	enum dr_racer racer;
	bool stop, first_growth;
	unsigned long calls, odd;
	struct completion go, done;
};

/* 0 before the detach, or what a call says of a range or device gone */
static bool dr_odd(int ret)
{
	return ret && ret != -EBUSY && ret != -ENODEV && ret != -ENOENT;
}

static void dr_call(struct dr *r, unsigned int i)
{
	struct twostep_iova_state *st = &r->st[i % 2], own;
	struct ts *t = r->t;
	int ret;

	if (r->racer == DR_ALLOC) {
		if (!twostep_iova_try_alloc(t->dev, &own, 0, PAGE_SIZE))
			return;
		ret = twostep_iova_link(t->dev, &own, r->phys, 0, PAGE_SIZE,
					DMA_BIDIRECTIONAL, 0);
		r->odd += dr_odd(ret);
		twostep_iova_destroy(t->dev, &own, ret ? 0 : PAGE_SIZE,
				     DMA_BIDIRECTIONAL, 0);
		return;
	}
	if (r->racer == DR_BITMAP) {
		/* a mapping error after the detach; the unmap of nothing */
		twostep_hmm_dma_map_pfn(t->dev, &r->map, i % 2);
		twostep_hmm_dma_unmap_range(t->dev, &r->map, i % 2, 1);
		return;
	}
	ret = twostep_iova_link(t->dev, st, r->phys, 0, PAGE_SIZE,
				DMA_BIDIRECTIONAL, 0);
	r->odd += dr_odd(ret);
	if (!ret)
		twostep_iova_unlink(t->dev, st, 0, PAGE_SIZE,
				    DMA_BIDIRECTIONAL, 0);
}

static int dr_thread(void *data)
{
	struct dr *r = data;
	struct ts *t = r->t;
	unsigned int i = 0;

	wait_for_completion(&r->go);
	if (r->first_growth) {
		/* a device twostep holds nothing for, from two CPUs at once */
		for (i = 2; i < 4; i++)
			if (!ts_try_alloc_grow(t->dev, &r->st[i], 0, SZ_1M))
				r->odd++;
		goto out;
	}
	while (!READ_ONCE(r->stop)) {
		dr_call(r, i++);
		WRITE_ONCE(r->calls, r->calls + 1);
		if (!(i & 255))
			cond_resched();
	}
out:
	return ts_kthread_finish(&r->done);
}

/*
 * Wait until the racer has made @n calls, up to 5 s: on a loaded host a
 * vCPU may not run for longer than a fixed sleep. Returns the count.
 */
static unsigned long dr_wait_calls(struct dr *r, unsigned long n)
{
	unsigned long end = jiffies + 5 * HZ;

	while (READ_ONCE(r->calls) < n && time_before(jiffies, end))
		usleep_range(500, 1000);
	return READ_ONCE(r->calls);
}

/*
 * A detach while another CPU calls on live states of the device (@racer),
 * with the checker on or off: no call oopses or returns anything but what
 * a range or device gone says, nothing stays mapped, and (twostep's
 * poison=1) no freed range record is written after its free. Returns
 * false when the thread could not start.
 */
static bool dr_round(struct ts *t, struct dr *r, enum dr_racer racer,
		     bool checker)
{
	struct task_struct *task;
	unsigned int i, mapped = 0;
	unsigned long before, after;
	dma_addr_t addr[2];
	bool was;

	r->racer = racer;
	r->stop = false;
	r->calls = 0;
	r->odd = 0;
	was = twostep_debug_set(checker);
	if (racer == DR_BITMAP) {
		struct twostep_iova_state grow;

		/* room first, where growth waits for a worker (no preemption) */
		if (ts_try_alloc_grow(t->dev, &grow, 0, 2 * PAGE_SIZE))
			twostep_iova_free(t->dev, &grow);
		if (!TS_EXPECT(t, !twostep_hmm_dma_map_alloc(t->dev, &r->map,
							     2, PAGE_SIZE) &&
			       twostep_use_iova(&r->map.state), "map_alloc")) {
			twostep_debug_set(was);
			return false;
		}
		for (i = 0; i < 2; i++)
			r->map.pfn_list[i] = PHYS_PFN(r->phys) | HMM_PFN_VALID;
		addr[0] = r->map.state.addr;
		addr[1] = addr[0] + PAGE_SIZE;
	} else {
		for (i = 0; i < 2; i++)
			TS_EXPECT(t, ts_try_alloc(t, &r->st[i], 0, PAGE_SIZE),
				  "try_alloc");
		addr[0] = r->st[0].addr;
		addr[1] = r->st[1].addr;
	}
	init_completion(&r->go);
	init_completion(&r->done);
	task = ts_kthread_on(dr_thread, r, 1, "twostep-dr");
	if (!TS_EXPECT(t, task, "kthread")) {
		if (racer == DR_BITMAP)
			twostep_hmm_dma_map_free(t->dev, &r->map);
		twostep_debug_set(was);
		return false;
	}
	/* the racer calls before the detach and goes on after it */
	complete(&r->go);
	before = dr_wait_calls(r, 64);
	twostep_detach(t->dev);
	after = dr_wait_calls(r, READ_ONCE(r->calls) + 64);
	WRITE_ONCE(r->stop, true);
	wait_for_completion(&r->done);
	kthread_stop(task);
	twostep_debug_set(was);
	for (i = 0; i < 2; i++)
		mapped += ts_mapped_pages(t, addr[i], PAGE_SIZE);
	if (racer == DR_BITMAP)
		twostep_hmm_dma_map_free(t->dev, &r->map);
	ts_diag("detach under %lu calls (%s, %lu before), checker %s: odd %lu, mapped after %u",
		r->calls, dr_racer_name[racer], before,
		checker ? "on" : "off", r->odd, mapped);
	TS_EXPECT(t, !r->odd && !mapped && before && after > before,
		  "%s: calls %lu before the detach, %lu by its end, odd results %lu, mapped after %u",
		  dr_racer_name[racer], before, after, r->odd, mapped);
	twostep_detach(t->dev);
	return true;
}

static int case_detach_races(struct ts *t)
{
	struct task_struct *task;
	struct twostep_stats s;
	struct page *pg;
	struct dr r = { .t = t };
	unsigned int i, races = 0;
	enum dr_racer racer;
	long uaf0, uaf;

	if (num_online_cpus() < 2) {
		snprintf(t->skip, sizeof(t->skip), "needs two CPUs");
		return TS_SKIP;
	}
	pg = alloc_page(GFP_KERNEL);
	if (!TS_EXPECT(t, pg, "page"))
		return 0;
	r.phys = page_to_phys(pg);

	/* detach while another CPU calls on live states */
	uaf0 = twostep_debug_poison_check();
	for (racer = 0; racer < DR_RACERS; racer++)
		for (i = 0; i < 2; i++)
			if (dr_round(t, &r, racer, i))
				races++;
	uaf = twostep_debug_poison_check();
	if (uaf >= 0) {
		ktap_line("# summary: detach races %u use after free %ld",
			  races, uaf - uaf0);
		TS_EXPECT(t, uaf == uaf0,
			  "%ld freed range records written after their free",
			  uaf - uaf0);
	} else {
		ts_diag("twostep loaded without poison=1: freed records unchecked");
		ktap_line("# summary: detach races %u use after free unchecked",
			  races);
	}

	/* the first growth of a device, from two CPUs at once */
	twostep_detach(t->dev);
	memset(&r, 0, sizeof(r));
	r.t = t;
	r.first_growth = true;
	init_completion(&r.go);
	init_completion(&r.done);
	task = ts_kthread_on(dr_thread, &r, 1, "twostep-dr");
	if (!TS_EXPECT(t, task, "kthread"))
		goto out_page;
	complete(&r.go);
	for (i = 0; i < 2; i++)
		if (!ts_try_alloc_grow(t->dev, &r.st[i], 0, SZ_1M))
			r.odd++;
	wait_for_completion(&r.done);
	kthread_stop(task);
	ts_stats(t, &s);
	TS_EXPECT(t, !r.odd && s.live_allocs == 4,
		  "first growth from two CPUs: %lu failed, %lu live", r.odd,
		  s.live_allocs);
	for (i = 0; i < 4; i++) {
		unsigned int j;

		for (j = i + 1; j < 4; j++)
			TS_EXPECT(t, !twostep_use_iova(&r.st[i]) ||
				  !twostep_use_iova(&r.st[j]) ||
				  r.st[i].addr + SZ_1M <= r.st[j].addr ||
				  r.st[j].addr + SZ_1M <= r.st[i].addr,
				  "ranges %u and %u overlap", i, j);
	}
	for (i = 0; i < 4; i++)
		if (twostep_use_iova(&r.st[i]))
			twostep_iova_free(t->dev, &r.st[i]);
out_page:
	__free_page(pg);
	return 0;
}

/* ---- hmm: one bitmap word shared by two callers ---- */

#define HB_ENTRIES	64
#define HB_ROUNDS	20000

struct hb {
	struct ts *t;
	struct twostep_hmm_dma_map *map;
	unsigned int parity, errors;
	struct completion done;
};

/* Map and unmap the entries of one parity, leaving some mapped. */
static int hb_thread(void *data)
{
	struct hb *h = data;
	u32 seed = h->parity + 1;
	unsigned int r, i;

	for (r = 0; r < HB_ROUNDS; r++) {
		i = 2 * (ts_rand(&seed) % (HB_ENTRIES / 2)) + h->parity;
		if (ts_rand(&seed) & 1) {
			if (twostep_hmm_dma_map_pfn(h->t->dev, h->map, i) ==
			    DMA_MAPPING_ERROR)
				h->errors++;
		} else {
			twostep_hmm_dma_unmap_range(h->t->dev, h->map, i, 1);
		}
		if (!(r & 255))
			cond_resched();
	}
	return ts_kthread_finish(&h->done);
}

/*
 * Two CPUs map and unmap the odd and the even entries of one bitmap word:
 * afterwards the bitmap and the page table agree on every entry. And a
 * map of 2 MiB entries reserves what upstream reserves: nr_entries pages.
 */
static int case_hmm_bitmap(struct ts *t)
{
	struct twostep_hmm_dma_map map;
	struct task_struct *task[2];
	struct hb h[2] = { };
	unsigned int i, mismatches = 0;
	struct page *block;
	bool mapped, translates;
	int ret;

	/* room first, where growth waits for a worker (no preemption) */
	if (ts_try_alloc_grow(t->dev, &map.state, 0, 512 * PAGE_SIZE))
		twostep_iova_free(t->dev, &map.state);
	ret = twostep_hmm_dma_map_alloc(t->dev, &map, 512, SZ_2M);
	if (TS_EXPECT(t, !ret, "map_alloc of 2 MiB entries: %d", ret)) {
		TS_EXPECT(t, twostep_iova_size(&map.state) == 512 * PAGE_SIZE,
			  "512 pages of 2 MiB entries reserved %zu bytes",
			  twostep_iova_size(&map.state));
		twostep_hmm_dma_map_free(t->dev, &map);
	}
	if (num_online_cpus() < 2) {
		snprintf(t->skip, sizeof(t->skip), "needs two CPUs");
		return TS_SKIP;
	}
	block = alloc_pages(GFP_KERNEL, get_order(HB_ENTRIES * PAGE_SIZE));
	if (!TS_EXPECT(t, block, "pages"))
		return 0;
	ret = twostep_hmm_dma_map_alloc(t->dev, &map, HB_ENTRIES, PAGE_SIZE);
	if (!TS_EXPECT(t, !ret, "map_alloc: %d", ret))
		goto out_pages;
	for (i = 0; i < HB_ENTRIES; i++)
		map.pfn_list[i] = (page_to_pfn(block) + i) | HMM_PFN_VALID;
	for (i = 0; i < 2; i++) {
		h[i].t = t;
		h[i].map = &map;
		h[i].parity = i;
		init_completion(&h[i].done);
		task[i] = ts_kthread_on(hb_thread, &h[i], i, "twostep-hb");
		if (!task[i])
			complete(&h[i].done);
	}
	for (i = 0; i < 2; i++) {
		wait_for_completion(&h[i].done);
		if (task[i])
			kthread_stop(task[i]);
	}
	for (i = 0; i < HB_ENTRIES; i++) {
		mapped = twostep_hmm_dma_mapped(&map, i);
		translates = iommu_iova_to_phys(ts_domain(t), map.state.addr +
						i * PAGE_SIZE) ==
			     page_to_phys(block) + i * PAGE_SIZE;
		mismatches += mapped != translates;
	}
	ktap_line("# summary: hmm bitmap races %u mismatches %u",
		  2 * HB_ROUNDS, mismatches);
	TS_EXPECT(t, task[0] && task[1] && !h[0].errors && !h[1].errors,
		  "threads, map errors %u %u", h[0].errors, h[1].errors);
	TS_EXPECT(t, !mismatches, "%u entries where bitmap and page table differ",
		  mismatches);
	twostep_hmm_dma_unmap_range(t->dev, &map, 0, HB_ENTRIES);
	twostep_hmm_dma_map_free(t->dev, &map);
out_pages:
	__free_pages(block, get_order(HB_ENTRIES * PAGE_SIZE));
	return 0;
}

/* ---- what twostep reserves goes back ---- */

#define GB_MAX_MAPS	2048	/* 2 MiB mappings: 4 GiB */
#define GB_MAX_RANGES	512	/* 16 MiB ranges: 8 GiB */

/* Bytes of 2 MiB classic mappings that fit for @dev now; all unmapped. */
static u64 gb_classic(struct device *dev, struct page *blk, dma_addr_t *addr)
{
	unsigned int n, k;

	for (n = 0; n < GB_MAX_MAPS; n++) {
		addr[n] = dma_map_page_attrs(dev, blk, 0, SZ_2M, DMA_TO_DEVICE,
					     DMA_ATTR_SKIP_CPU_SYNC |
					     DMA_ATTR_NO_WARN);
		if (dma_mapping_error(dev, addr[n]))
			break;
	}
	for (k = 0; k < n; k++)
		dma_unmap_page_attrs(dev, addr[k], SZ_2M, DMA_TO_DEVICE,
				     DMA_ATTR_SKIP_CPU_SYNC);
	/* a lazy domain frees the addresses when its flush queue drains */
	msleep(100);
	return (u64)n * SZ_2M;
}

/*
 * A 32-bit device: what fits of classic mappings before a burst of
 * two-step ranges that fills the space, and after all of them are freed
 * and twostep's idle delay has passed. @classic does the classic mappings:
 * the device itself or another device of its IOMMU group.
 */
static void gb_round(struct ts *t, struct device *classic, const char *who)
{
	struct twostep_iova_state *st;
	struct twostep_stats s;
	struct page *blk;
	dma_addr_t *addr;
	u64 before, after, peak = 0, chunk_max = 0, start, size;
	u64 mask = dma_get_mask(t->dev), cmask = dma_get_mask(classic);
	unsigned int n, i;

	blk = alloc_pages(GFP_KERNEL | __GFP_NOWARN, get_order(SZ_2M));
	addr = kcalloc(GB_MAX_MAPS, sizeof(*addr), GFP_KERNEL);
	st = kcalloc(GB_MAX_RANGES, sizeof(*st), GFP_KERNEL);
	if (!TS_EXPECT(t, blk && addr && st, "%s: memory", who))
		goto out_free;
	if (!TS_EXPECT(t, !dma_set_mask(t->dev, DMA_BIT_MASK(32)) &&
		       !dma_set_mask(classic, DMA_BIT_MASK(32)),
		       "%s: 32-bit masks", who))
		goto out_mask;
	/* what twostep held for the earlier cases goes back first */
	twostep_detach(t->dev);
	before = gb_classic(classic, blk, addr);
	for (n = 0; n < GB_MAX_RANGES; n++) {
		if (!ts_try_alloc_grow(t->dev, &st[n], 0, SZ_16M))
			break;
		ts_stats(t, &s);
		peak = max(peak, s.reserved);
	}
	for (i = 0; twostep_get_chunk(t->dev, i, &start, &size) == 0; i++)
		chunk_max = max(chunk_max, size);
	for (i = 0; i < n; i++)
		twostep_iova_free(t->dev, &st[i]);
	/* twostep's idle delay, and a lazy domain's flush queue */
	msleep(2500);
	ts_stats(t, &s);
	after = gb_classic(classic, blk, addr);
	ktap_line("# summary: give-back before %llu MiB after %llu MiB peak %llu MiB %s %llu MiB",
		  before >> 20, after >> 20, peak >> 20, "reserved",
		  s.reserved >> 20);
	ts_diag("%s: %u ranges of 16 MiB in the burst, largest chunk %llu MiB",
		who, n, chunk_max >> 20);
	TS_EXPECT(t, n > 0 && before >= SZ_256M,
		  "%s: %u ranges, %llu MiB of classic mappings", who, n,
		  before >> 20);
	TS_EXPECT(t, after * 100 >= before * 95,
		  "%s: after the burst %llu MiB fit, before %llu MiB", who,
		  after >> 20, before >> 20);
	/* no chunk takes a large share of a 32-bit space */
	TS_EXPECT(t, chunk_max <= SZ_64M, "%s: a chunk of %llu MiB", who,
		  chunk_max >> 20);

	/*
	 * Detach (what an unbind does) with the ranges of a second burst
	 * still live: the space is back at once, by its effect.
	 */
	for (i = 0; i < n; i++)
		if (!ts_try_alloc_grow(t->dev, &st[i], 0, SZ_16M))
			break;
	twostep_detach(t->dev);
	/* no idle delay: only a lazy domain's flush queue (10 ms) */
	msleep(100);
	after = gb_classic(classic, blk, addr);
	ts_diag("%s: detach with %u ranges live: %llu MiB fit after it",
		who, i, after >> 20);
	TS_EXPECT(t, i > 0 && after * 100 >= before * 95,
		  "%s: detach with %u ranges live: %llu MiB fit, before %llu MiB",
		  who, i, after >> 20, before >> 20);
out_mask:
	dma_set_mask(t->dev, mask);
	dma_set_mask(classic, cmask);
out_free:
	kfree(st);
	kfree(addr);
	if (blk)
		__free_pages(blk, get_order(SZ_2M));
}

static int case_give_back(struct ts *t)
{
	struct device *peer = t->peer ? &t->peer->pdev->dev : NULL;

	gb_round(t, t->dev, "same device");
	if (peer && iommu_get_domain_for_dev(peer) == ts_domain(t))
		gb_round(t, peer, "other device of the group");
	return 0;
}

/*
 * Room kept in the per-CPU caches of freed ranges is not lost: with a
 * 32-bit mask, fill the device's space with 2 MiB ranges and any room
 * left with 1 MiB ones, free two of the 2 MiB ranges on this CPU (they go
 * to its cache), and a 1 MiB range must still be had, from a call that
 * cannot grow the reservation (preemption off). A cache that kept its
 * ranges from an allocation that finds no room makes it fail.
 */
/* 4 GiB of 2 MiB ranges and of 1 MiB ones: more than 32 bits hold */
#define CR_MAX	((unsigned int)(SZ_4G / SZ_2M))
#define CR_ALL	(CR_MAX + (unsigned int)(SZ_4G / SZ_1M))

static int case_cache_room(struct ts *t)
{
	struct twostep_iova_state *st, one;
	u64 mask = dma_get_mask(t->dev);
	unsigned int n, m, i;
	bool got;

	st = kvcalloc(CR_ALL, sizeof(*st), GFP_KERNEL);
	if (!TS_EXPECT(t, st, "memory"))
		return 0;
	if (!TS_EXPECT(t, !dma_set_mask(t->dev, DMA_BIT_MASK(32)),
		       "32-bit mask"))
		goto out_free;
	twostep_detach(t->dev);
	for (n = 0; n < CR_MAX; n++)
		if (!ts_try_alloc_grow(t->dev, &st[n], 0, SZ_2M))
			break;
	for (m = CR_MAX; m < CR_ALL; m++)
		if (!ts_try_alloc_grow(t->dev, &st[m], 0, SZ_1M))
			break;
	if (!TS_EXPECT(t, n > 2 && n < CR_MAX && m < CR_ALL,
		       "%u ranges of 2 MiB, %u of 1 MiB fill the space", n,
		       m - CR_MAX))
		goto out_release;
	preempt_disable();
	twostep_iova_free(t->dev, &st[--n]);
	twostep_iova_free(t->dev, &st[--n]);
	got = twostep_iova_try_alloc(t->dev, &one, 0, SZ_1M);
	preempt_enable();
	ts_diag("cache room: %u ranges of 2 MiB and %u of 1 MiB filled the space",
		n + 2, m - CR_MAX);
	ts_diag("cache room: a 1 MiB range after two 2 MiB ones were freed: %s",
		got ? "had" : "refused");
	TS_EXPECT(t, got, "no 1 MiB range though 4 MiB were freed");
	if (got)
		twostep_iova_free(t->dev, &one);
out_release:
	for (i = 0; i < n; i++)
		twostep_iova_free(t->dev, &st[i]);
	for (i = CR_MAX; i < m; i++)
		twostep_iova_free(t->dev, &st[i]);
	twostep_detach(t->dev);
	dma_set_mask(t->dev, mask);
out_free:
	kvfree(st);
	return 0;
}

/* ---- lifecycle edges ---- */

static int case_lifecycle_edges(struct ts *t)
{
	struct twostep_iova_state st, stale;
	struct page *pg = alloc_page(GFP_KERNEL);
	int ret, first, second;
	ktime_t t0;
	bool ok;

	if (!TS_EXPECT(t, pg, "page"))
		return 0;
	/* a probe that deferred after twostep_attach(), then the next one */
	edu_defer_result(&first, &second);
	ts_diag("attach in the deferred probe %d, in the probe after it %d",
		first, second);
	TS_EXPECT(t, !first && !second,
		  "attach in the deferred probe %d, in the next probe %d",
		  first, second);
	/* a failed attach leaves the device as it was */
	twostep_detach(t->dev);
	ret = twostep_attach(t->dev, 1ULL << 62, 0);
	TS_EXPECT(t, ret == -ENOSPC, "attach of 2^62 bytes: %d", ret);
	ret = twostep_attach(t->dev, 0, 0);
	TS_EXPECT(t, !ret, "attach after a failed attach: %d", ret);

	/* a state from before a detach matches nothing after it */
	if (TS_EXPECT(t, ts_try_alloc(t, &st, 0, PAGE_SIZE), "try_alloc")) {
		stale = st;
		twostep_iova_destroy(t->dev, &st, 0, DMA_BIDIRECTIONAL, 0);
		twostep_detach(t->dev);
		ok = ts_try_alloc(t, &st, 0, PAGE_SIZE);
		TS_EXPECT(t, ok, "try_alloc after detach");
		ret = twostep_iova_link(t->dev, &stale, page_to_phys(pg), 0,
					PAGE_SIZE, DMA_BIDIRECTIONAL, 0);
		TS_EXPECT(t, ret == -ENOENT,
			  "stale state from the last context: link %d (same bits as the new one: %d)",
			  ret, ok && !memcmp(&st, &stale, sizeof(st)));
		if (ok)
			twostep_iova_destroy(t->dev, &st, ret ? 0 : PAGE_SIZE,
					     DMA_BIDIRECTIONAL, 0);
	}

	/* huge sizes are refused at once, costing nothing */
	t0 = ktime_get();
	ok = twostep_iova_try_alloc(t->dev, &st, 0, 1ULL << 47) ||
	     twostep_iova_try_alloc(t->dev, &st, 0, 16ULL << 40) ||
	     twostep_iova_try_alloc(t->dev, &st, 0,
				    TWOSTEP_IOVA_MAX_SIZE + PAGE_SIZE);
	TS_EXPECT(t, !ok, "a try_alloc above %llu bytes said true",
		  TWOSTEP_IOVA_MAX_SIZE);
	if (ok)
		twostep_iova_free(t->dev, &st);
	ts_diag("try_alloc of 2^47, 16 TiB, 64 GiB + 4 KiB: false in %lld us",
		ktime_us_delta(ktime_get(), t0));
	__free_page(pg);
	return 0;
}

/* ---- unbind and rebind with live ranges ---- */

struct ur {
	struct device *dev;
	bool bind;
	int ret;
	struct completion done;
};

static int ur_thread(void *data)
{
	struct ur *u = data;

	if (u->bind)
		u->ret = device_attach(u->dev);
	else
		device_release_driver(u->dev);
	return ts_kthread_finish(&u->done);
}

/*
 * Unbind @dev from its driver, or bind it (@bind: device_attach()'s
 * result), from a kthread, as sysfs or a hot unplug would, not from the
 * module's init.
 */
static int ur_run(struct device *dev, bool bind)
{
	struct ur u = { .dev = dev, .bind = bind, .ret = -ENOMEM };
	struct task_struct *task;

	init_completion(&u.done);
	task = ts_kthread_on(ur_thread, &u, 0, "twostep-ur");
	if (!task)
		return -ENOMEM;
	wait_for_completion(&u.done);
	kthread_stop(task);
	return u.ret;
}

#define UR_RANGES	4	/* the last one allocated, never linked */

/*
 * The driver is unbound with ranges live (its remove() leaves them to
 * twostep's unbind notifier) and bound again: nothing of the old ranges
 * translates, twostep holds nothing for the device, the old states are
 * refused after the rebind, and a new range moves real data.
 */
static int case_unbind_rebind(struct ts *t)
{
	struct pci_dev *pdev = to_pci_dev(t->dev);
	struct twostep_iova_state st[UR_RANGES], nst;
	unsigned int i, n, linked = 0, left = 0, counted = 0;
	struct twostep_stats s0, s1;
	struct edu_dev *edu;
	struct ts_pages p;
	struct page **pg = p.pg;
	bool detach;
	u8 buf[256];
	int ret;

	if (!TS_EXPECT(t, !ts_pages_get(t, &p, UR_RANGES - 1), "pages"))
		return 0;
	for (n = 0; n < UR_RANGES; n++) {
		if (!TS_EXPECT(t, ts_try_alloc(t, &st[n], 0, 2 * PAGE_SIZE),
			       "try_alloc"))
			goto out_ranges;
		if (n < p.n &&
		    (twostep_iova_link(t->dev, &st[n], page_to_phys(pg[n]),
				       PAGE_SIZE, PAGE_SIZE, DMA_BIDIRECTIONAL,
				       0) ||
		     twostep_iova_sync(t->dev, &st[n], PAGE_SIZE, PAGE_SIZE))) {
			TS_EXPECT(t, 0, "link %u", n);
			n++;
			goto out_ranges;
		}
		linked += ts_mapped_pages(t, st[n].addr, 2 * PAGE_SIZE);
	}
	TS_EXPECT(t, linked == p.n, "%u linked pages translate",
		  linked);

	detach = edu_set_detach(false);
	ur_run(t->dev, false);
	edu_set_detach(detach);
	TS_EXPECT(t, !t->dev->driver, "still bound after the unbind");
	for (i = 0; i < UR_RANGES; i++)
		left += ts_mapped_pages(t, st[i].addr, 2 * PAGE_SIZE);
	ret = twostep_get_stats(t->dev, &s0);
	ts_diag("unbound: %u old page(s) translate, stats %d: %lu live, %llu B",
		left, ret, s0.live_allocs, s0.reserved);
	TS_EXPECT(t, !left, "%u old page(s) translate after the unbind", left);
	TS_EXPECT(t, ret == -ENODEV, "twostep still holds the device: %d",
		  ret);

	ret = ur_run(t->dev, true);
	edu = edu_get(0);
	if (!TS_EXPECT(t, ret == 1 && edu && edu->pdev == pdev,
		       "bind again: device_attach %d", ret)) {
		t->edu = edu_lost(pdev);
		goto out_pages;
	}
	t->edu = edu;

	/* a new range: real DMA through it */
	if (!TS_EXPECT(t, ts_try_alloc(t, &nst, 0, PAGE_SIZE),
		       "try_alloc after the rebind"))
		goto out_pages;
	ret = twostep_iova_link(t->dev, &nst, page_to_phys(pg[0]), 0,
				PAGE_SIZE, DMA_BIDIRECTIONAL, 0);
	ret = ret ?: twostep_iova_sync(t->dev, &nst, 0, PAGE_SIZE);
	for (i = 0; i < sizeof(buf); i++)
		buf[i] = ts_pat(t->seed + 90, i);
	ret = ret ?: ts_dev_write(t, nst.addr + 64, buf, sizeof(buf));
	TS_EXPECT(t, !ret && !memcmp(page_address(pg[0]) + 64, buf,
				     sizeof(buf)),
		  "write through a new range after the rebind: %d", ret);

	/* the old states: refused and counted, the new range untouched */
	ret = twostep_iova_link(t->dev, &st[UR_RANGES - 1],
				page_to_phys(pg[1]), 0, PAGE_SIZE,
				DMA_BIDIRECTIONAL, 0);
	TS_EXPECT(t, ret == -ENOENT, "link of an old state: %d", ret);
	for (i = 0; i < UR_RANGES; i++) {
		ts_stats(t, &s0);
		twostep_iova_destroy(t->dev, &st[i], 2 * PAGE_SIZE,
				     DMA_BIDIRECTIONAL, 0);
		ts_stats(t, &s1);
		counted += s1.misuse_all - s0.misuse_all == 1;
	}
	TS_EXPECT(t, counted == UR_RANGES, "%u of %u old states refused",
		  counted, UR_RANGES);
	memset(buf, 0, sizeof(buf));
	ret = ts_dev_read(t, nst.addr + 64, sizeof(buf), buf);
	TS_EXPECT(t, !ret && !memcmp(page_address(pg[0]) + 64, buf,
				     sizeof(buf)),
		  "read through the new range after the old states: %d", ret);
	twostep_iova_destroy(t->dev, &nst, PAGE_SIZE, DMA_BIDIRECTIONAL, 0);
	goto out_pages;

out_ranges:
	while (n--)
		twostep_iova_destroy(t->dev, &st[n], 2 * PAGE_SIZE,
				     DMA_BIDIRECTIONAL, 0);
out_pages:
	ts_pages_put(&p);
	return 0;
}

/* ---- a context left on a device no driver is bound to ---- */

/* The second edu device, in the first one's domain, or NULL. */
static struct device *gl_peer(struct ts *t)
{
	struct device *peer = t->peer ? &t->peer->pdev->dev : NULL;

	if (peer && iommu_get_domain_for_dev(peer) == ts_domain(t))
		return peer;
	return NULL;
}

/*
 * A new domain at the old one's address, forced: what a group's type
 * switched away and back leaves when the allocator hands the old address
 * out again is a zeroed domain there, without the mark twostep puts on
 * the domains it reserves in. Clearing the mark of the unbound peer's
 * live domain makes exactly that. The context the peer holds must then
 * not serve (a link on its range is refused), and the next try_alloc
 * must start a new context. The old context's reservation is not given
 * back (its domain counts as gone): it stays reserved in the peer's
 * domain, which the guest's init switches away next (6.12) or which is
 * dropped at power-off (6.1). Leaves the peer one live range.
 */
static void gl_same_address(struct ts *t, struct device *peer)
{
#ifdef TWOSTEP_HAVE_DOMAIN_TAG
	struct iommu_domain *dom = iommu_get_domain_for_dev(peer);
	struct twostep_iova_state st, st2;
	struct twostep_stats s = { };
	int link, served, ret;

	if (!TS_EXPECT(t, twostep_iova_try_alloc(peer, &st, 0, 2 * PAGE_SIZE),
		       "same address: try_alloc on the peer"))
		return;
	iommu_set_fault_handler(dom, NULL, NULL);
	link = twostep_iova_link(peer, &st, page_to_phys(ZERO_PAGE(0)),
				 PAGE_SIZE, PAGE_SIZE, DMA_TO_DEVICE, 0);
	ret = twostep_iova_try_alloc(peer, &st2, 0, PAGE_SIZE) ? 0 : -ENOMEM;
	ret = ret ?: twostep_get_stats(peer, &s);
	/* the old context served the link, or still holds its two ranges */
	served = link != -ENODEV || s.live_allocs != 1;
	ktap_line("# summary: domain switches 1 same address 1 stale served %d",
		  served);
	TS_EXPECT(t, !ret && !served,
		  "same address: link %d, try_alloc %d, %lu live range(s)",
		  link, ret, s.live_allocs);
#else
	ts_diag("same address: not run, no mark on this kernel's domains");
#endif
}

/*
 * Unbind the peer and leave it a context with a live range (the kernel's
 * zero page linked read-only): no unbind will come for it. The guest's
 * init then unbinds the group, switches its type, runs group_revalidate
 * and unloads twostep (qemu/guest-init).
 */
static int case_group_leftover(struct ts *t)
{
	struct device *peer = gl_peer(t);
	struct twostep_iova_state st;
	struct twostep_stats s = { };
	int ret;

	if (!peer) {
		snprintf(t->skip, sizeof(t->skip),
			 "no second edu device in the group");
		return TS_SKIP;
	}
	get_device(peer);
	ur_run(peer, false);
	/* its edu_dev went with the unbind */
	t->peer = NULL;
	if (!TS_EXPECT(t, !peer->driver, "the peer is still bound"))
		goto out;
	if (!TS_EXPECT(t, twostep_iova_try_alloc(peer, &st, 0, 2 * PAGE_SIZE),
		       "try_alloc on the unbound peer"))
		goto out;
	ret = twostep_iova_link(peer, &st, page_to_phys(ZERO_PAGE(0)), 0,
				PAGE_SIZE, DMA_TO_DEVICE, 0);
	ret = ret ?: twostep_iova_sync(peer, &st, 0, PAGE_SIZE);
	ret = ret ?: twostep_get_stats(peer, &s);
	TS_EXPECT(t, !ret && s.live_allocs == 1 &&
		  s.linked_granules == ts_gpp(t),
		  "the peer's range: %d, %lu live, %lu granules linked", ret,
		  s.live_allocs, s.linked_granules);
	gl_same_address(t, peer);
	/* the domain's address, for group_revalidate to compare (guest-init) */
	ktap_line("# group leftover on %s domain %#lx", dev_name(peer),
		  (unsigned long)iommu_get_domain_for_dev(peer));
out:
	put_device(peer);
	return 0;
}

static ulong old_domain;
module_param(old_domain, ulong, 0444);
MODULE_PARM_DESC(old_domain,
		 "group_revalidate: the address of the peer's domain before the type switch");

/*
 * Run by the guest's init after group_leftover and a switch of the
 * group's type: the peer's context is of a domain that is gone. The next
 * try_alloc must drop it without touching the old domain and serve from
 * a new context: one live range, and real DMA through it.
 */
static int case_group_revalidate(struct ts *t)
{
	struct device *peer = gl_peer(t);
	struct twostep_iova_state st;
	struct twostep_stats s;
	struct page *pg;
	struct ts pt;
	u8 buf[256];
	unsigned int i;
	int ret;

	if (!peer) {
		snprintf(t->skip, sizeof(t->skip),
			 "no second edu device in the group");
		return TS_SKIP;
	}
	ret = twostep_get_stats(peer, &s);
	if (!TS_EXPECT(t, !ret && s.live_allocs == 1,
		       "no range left on the peer by group_leftover: %d", ret))
		return 0;
	pg = alloc_page(GFP_KERNEL);
	if (!TS_EXPECT(t, pg, "page"))
		return 0;
	/* the self-test's helpers, on the peer */
	pt = *t;
	pt.edu = t->peer;
	pt.dev = peer;
	if (!TS_EXPECT(t, ts_try_alloc(&pt, &st, 0, PAGE_SIZE),
		       "try_alloc on the peer"))
		goto out_page;
	ret = twostep_get_stats(peer, &s);
	/*
	 * A new domain at the old one's address must not pass for it: the
	 * old context (with its range) would then serve, from IOVA the new
	 * domain's allocator does not know is taken.
	 */
	ktap_line("# summary: domain switches 1 same address %d stale served %d",
		  (unsigned long)iommu_get_domain_for_dev(peer) == old_domain,
		  ret || s.live_allocs != 1);
	TS_EXPECT(t, !ret && s.live_allocs == 1,
		  "the old context was used: %d, %lu live ranges", ret,
		  s.live_allocs);
	ret = twostep_iova_link(peer, &st, page_to_phys(pg), 0, PAGE_SIZE,
				DMA_BIDIRECTIONAL, 0);
	ret = ret ?: twostep_iova_sync(peer, &st, 0, PAGE_SIZE);
	for (i = 0; i < sizeof(buf); i++)
		buf[i] = ts_pat(t->seed + 91, i);
	ret = ret ?: ts_dev_write(&pt, st.addr + 64, buf, sizeof(buf));
	TS_EXPECT(t, !ret && !memcmp(page_address(pg) + 64, buf, sizeof(buf)),
		  "write through the peer's new range: %d", ret);
	twostep_iova_destroy(peer, &st, PAGE_SIZE, DMA_BIDIRECTIONAL, 0);
out_page:
	__free_page(pg);
	return 0;
}

const struct ts_case ts_group_cases[] = {
	{ "group_leftover", case_group_leftover, true },
	{ .name = "group_revalidate", .run = case_group_revalidate,
	  .needs_api = true, .on_request = true },
};

const unsigned int ts_group_ncases = ARRAY_SIZE(ts_group_cases);

const struct ts_case ts_safety_cases[] = {
	{ "unlink_coverage", case_unlink_coverage, true },
	{ "link_vs_destroy", case_link_vs_destroy, true },
	{ "cut_masks", case_cut_masks, true },
	{ "unlink_vs_link", case_unlink_vs_link, true },
	{ "fuzz", case_fuzz, true },
	{ "give_back", case_give_back, true },
	{ "cache_room", case_cache_room, true },
	{ "atomic_contexts", case_atomic_contexts, true },
	{ "detach_races", case_detach_races, true },
	{ "hmm_bitmap", case_hmm_bitmap, true },
	{ "lifecycle_edges", case_lifecycle_edges, true },
	{ "unbind_rebind", case_unbind_rebind, true },
};

const unsigned int ts_safety_ncases = ARRAY_SIZE(ts_safety_cases);

// SPDX-License-Identifier: GPL-2.0
/*
 * twostep self-test: the checker (twostep's debug parameter). Each case
 * seeds one kind of bug from a function of its own, the bugs upstream's
 * users have shipped with dma_iova_*, and checks that the finding's count
 * went up by one and that the call site the checker stored is that
 * function: the stored "%pS" against the "%ps" of the function's own
 * address, never a string written here. The checker is switched on for
 * each case (twostep_debug_set()) and left as it was.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dma-mapping.h>
#include <linux/kallsyms.h>
#include <linux/ktime.h>
#include <linux/mm.h>
#include <linux/spinlock.h>
#include <linux/string.h>

#include "helpers.h"

#define CK_SITE_LEN	96

/* The figures of "# summary: checker seeded bugs ..." */
static unsigned int ck_seeded, ck_reported, ck_named;

/*
 * One bug of @kind was seeded on @dev from @fn, where @before findings of
 * that kind were counted: the count must be one more, and the last call
 * site stored must be in @fn.
 */
static void ck_expect(struct ts *t, struct device *dev,
		      enum twostep_finding kind, unsigned long before,
		      void *fn, const char *name)
{
	char site[CK_SITE_LEN], want[KSYM_NAME_LEN + 32];
	unsigned long now = twostep_debug_findings(dev, kind, site,
						   sizeof(site));
	bool named;

	/* "fn [module]": the name, then the offset the stored site has */
	snprintf(want, sizeof(want), "%ps", fn);
	strreplace(want, ' ', '\0');
	strlcat(want, "+", sizeof(want));
	named = !strncmp(site, want, strlen(want));
	ck_seeded++;
	ck_reported += now == before + 1;
	ck_named += named;
	ts_diag("%s: %lu -> %lu, call site stored: %s", name, before, now,
		site);
	TS_EXPECT(t, now == before + 1, "%s: findings %lu -> %lu", name,
		  before, now);
	TS_EXPECT(t, named, "%s: call site \"%s\" is not in %s", name, site,
		  want);
}

static unsigned long ck_count(struct device *dev, enum twostep_finding kind)
{
	return twostep_debug_findings(dev, kind, NULL, 0);
}

/* A range of two pages, @pg linked at its start with @dir and synced. */
static int ck_range(struct ts *t, struct twostep_iova_state *st,
		    struct page *pg, enum dma_data_direction dir)
{
	if (!ts_try_alloc(t, st, 0, 2 * PAGE_SIZE))
		return -ENOSPC;
	return twostep_iova_link(t->dev, st, page_to_phys(pg), 0, PAGE_SIZE,
				 dir, 0) ?:
	       twostep_iova_sync(t->dev, st, 0, PAGE_SIZE);
}

static void ck_summary(void)
{
	ktap_line("# summary: checker seeded bugs %u reported %u call sites named %u",
		  ck_seeded, ck_reported, ck_named);
}

/* ---- a stale state: destroy with a copy taken before the range went ---- */

static noinline __noipa int
ck_seed_stale(struct device *dev, struct twostep_iova_state *copy)
{
	twostep_iova_destroy(dev, copy, PAGE_SIZE, DMA_BIDIRECTIONAL, 0);
	return 0;
}

static int case_checker_stale_state(struct ts *t)
{
	bool on = twostep_debug_set(true);
	struct twostep_iova_state st, copy;
	struct page *pg = alloc_page(GFP_KERNEL);
	unsigned long before;

	if (!TS_EXPECT(t, pg, "page"))
		goto out;
	if (TS_EXPECT(t, !ck_range(t, &st, pg, DMA_BIDIRECTIONAL), "range")) {
		copy = st;
		twostep_iova_destroy(t->dev, &st, PAGE_SIZE,
				     DMA_BIDIRECTIONAL, 0);
		before = ck_count(t->dev, TWOSTEP_FINDING_STALE_STATE);
		ck_seed_stale(t->dev, &copy);
		ck_expect(t, t->dev, TWOSTEP_FINDING_STALE_STATE, before,
			  ck_seed_stale, "stale state");
	}
	__free_page(pg);
out:
	twostep_debug_set(on);
	return 0;
}

/* ---- a foreign state: a link on another device with this one's state ---- */

static noinline __noipa int
ck_seed_foreign(struct device *dev, struct twostep_iova_state *st,
		struct page *pg)
{
	return twostep_iova_link(dev, st, page_to_phys(pg), PAGE_SIZE,
				 PAGE_SIZE, DMA_BIDIRECTIONAL, 0);
}

static int case_checker_foreign_state(struct ts *t)
{
	struct device *other = t->peer ? &t->peer->pdev->dev :
			       ts_dev_without_iommu(t);
	bool on = twostep_debug_set(true);
	struct page *pg = alloc_page(GFP_KERNEL);
	struct twostep_iova_state st;
	unsigned long before;
	int ret;

	if (!TS_EXPECT(t, pg && other, "page, other device"))
		goto out;
	ts_diag("the state of %s used with %s", dev_name(t->dev),
		dev_name(other));
	if (TS_EXPECT(t, !ck_range(t, &st, pg, DMA_BIDIRECTIONAL), "range")) {
		before = ck_count(other, TWOSTEP_FINDING_FOREIGN_STATE);
		ret = ck_seed_foreign(other, &st, pg);
		TS_EXPECT(t, ret == -ENOENT || ret == -ENODEV,
			  "link with a foreign state: %d", ret);
		ck_expect(t, other, TWOSTEP_FINDING_FOREIGN_STATE, before,
			  ck_seed_foreign, "foreign state");
		twostep_iova_destroy(t->dev, &st, PAGE_SIZE,
				     DMA_BIDIRECTIONAL, 0);
	}
out:
	if (pg)
		__free_page(pg);
	twostep_debug_set(on);
	return 0;
}

/* ---- unlink and destroy of what was never linked ---- */

/* The error path that unlinks from offset 0 instead of the link's offset */
static noinline __noipa int
ck_seed_unlink_offset0(struct device *dev, struct twostep_iova_state *st)
{
	twostep_iova_unlink(dev, st, 0, PAGE_SIZE, DMA_TO_DEVICE, 0);
	return 0;
}

static noinline __noipa int
ck_seed_destroy_unlinked(struct device *dev, struct twostep_iova_state *st)
{
	twostep_iova_destroy(dev, st, PAGE_SIZE, DMA_TO_DEVICE, 0);
	return 0;
}

static int case_checker_not_linked(struct ts *t)
{
	bool on = twostep_debug_set(true);
	struct page *pg = alloc_page(GFP_KERNEL);
	struct twostep_iova_state st;
	unsigned long before;
	int ret;

	if (!TS_EXPECT(t, pg, "page"))
		goto out;
	if (TS_EXPECT(t, ts_try_alloc(t, &st, 0, 2 * PAGE_SIZE),
		      "try_alloc")) {
		/* the link is at PAGE_SIZE; the unwind unlinks at 0 */
		ret = twostep_iova_link(t->dev, &st, page_to_phys(pg),
					PAGE_SIZE, PAGE_SIZE, DMA_TO_DEVICE, 0);
		TS_EXPECT(t, !ret, "link: %d", ret);
		before = ck_count(t->dev, TWOSTEP_FINDING_NOT_LINKED);
		ck_seed_unlink_offset0(t->dev, &st);
		ck_expect(t, t->dev, TWOSTEP_FINDING_NOT_LINKED, before,
			  ck_seed_unlink_offset0, "unlink at offset 0");
		twostep_iova_unlink(t->dev, &st, PAGE_SIZE, PAGE_SIZE,
				    DMA_TO_DEVICE, 0);
		/* nothing linked any more: destroy(PAGE_SIZE) is the bug */
		before = ck_count(t->dev, TWOSTEP_FINDING_NOT_LINKED);
		ck_seed_destroy_unlinked(t->dev, &st);
		ck_expect(t, t->dev, TWOSTEP_FINDING_NOT_LINKED, before,
			  ck_seed_destroy_unlinked, "destroy of nothing linked");
	}
	__free_page(pg);
out:
	twostep_debug_set(on);
	return 0;
}

/* ---- destroy of links never synced; links and destroy with IRQs off ---- */

static DEFINE_SPINLOCK(ck_lock);

static noinline __noipa int
ck_seed_unsynced(struct device *dev, struct twostep_iova_state *st)
{
	unsigned long flags;

	spin_lock_irqsave(&ck_lock, flags);
	twostep_iova_destroy(dev, st, 2 * PAGE_SIZE, DMA_BIDIRECTIONAL, 0);
	spin_unlock_irqrestore(&ck_lock, flags);
	return 0;
}

/*
 * Link both pages of @st under a spinlock with IRQs off, the second one
 * failing to map when @fail; 0 or an error.
 */
static int ck_link2_atomic(struct ts *t, struct twostep_iova_state *st,
			   struct page **pg, bool fail)
{
	unsigned long flags;
	int ret;

	spin_lock_irqsave(&ck_lock, flags);
	ret = twostep_iova_link(t->dev, st, page_to_phys(pg[0]), 0,
				PAGE_SIZE, DMA_BIDIRECTIONAL, 0);
	if (!ret && fail)
		twostep_debug_fail(TWOSTEP_FAIL_MAP, 1);
	ret = ret ?: twostep_iova_link(t->dev, st, page_to_phys(pg[1]),
				       PAGE_SIZE, PAGE_SIZE,
				       DMA_BIDIRECTIONAL, 0);
	twostep_debug_fail(TWOSTEP_FAIL_MAP, 0);
	spin_unlock_irqrestore(&ck_lock, flags);
	return ret;
}

static int case_checker_unsynced_destroy(struct ts *t)
{
	bool on = twostep_debug_set(true);
	unsigned long before, all, now;
	struct twostep_iova_state st;
	struct ts_pages p;
	int ret;

	if (!TS_EXPECT(t, !ts_pages_get(t, &p, 2), "pages"))
		goto out;
	/* two links with no sync in between (no bug), then destroy: the bug */
	if (TS_EXPECT(t, ts_try_alloc(t, &st, 0, 2 * PAGE_SIZE),
		      "try_alloc")) {
		before = ck_count(t->dev, TWOSTEP_FINDING_UNSYNCED_DESTROY);
		all = ck_count(t->dev, TWOSTEP_FINDING_KINDS);
		ret = ck_link2_atomic(t, &st, p.pg, false);
		now = ck_count(t->dev, TWOSTEP_FINDING_KINDS);
		TS_EXPECT(t, !ret, "links with IRQs off: %d", ret);
		TS_EXPECT(t, now == all, "findings on two links: %lu -> %lu",
			  all, now);
		ck_seed_unsynced(t->dev, &st);
		ck_expect(t, t->dev, TWOSTEP_FINDING_UNSYNCED_DESTROY, before,
			  ck_seed_unsynced, "unsynced destroy");
	}
	/*
	 * Not bugs: a second link that fails to map and the unwind's
	 * destroy without a sync; link, sync, destroy.
	 */
	all = ck_count(t->dev, TWOSTEP_FINDING_KINDS);
	if (TS_EXPECT(t, ts_try_alloc(t, &st, 0, 2 * PAGE_SIZE),
		      "try_alloc")) {
		ret = ck_link2_atomic(t, &st, p.pg, true);
		TS_EXPECT(t, ret == -ENOMEM, "failed link: %d", ret);
		twostep_iova_destroy(t->dev, &st, PAGE_SIZE,
				     DMA_BIDIRECTIONAL, 0);
	}
	if (TS_EXPECT(t, ts_try_alloc(t, &st, 0, 2 * PAGE_SIZE),
		      "try_alloc")) {
		ret = ck_link2_atomic(t, &st, p.pg, false) ?:
		      twostep_iova_sync(t->dev, &st, 0, 2 * PAGE_SIZE);
		TS_EXPECT(t, !ret, "links and sync: %d", ret);
		twostep_iova_destroy(t->dev, &st, 2 * PAGE_SIZE,
				     DMA_BIDIRECTIONAL, 0);
	}
	now = ck_count(t->dev, TWOSTEP_FINDING_KINDS);
	TS_EXPECT(t, now == all, "findings on correct code: %lu -> %lu", all,
		  now);
	ts_pages_put(&p);
out:
	twostep_debug_set(on);
	return 0;
}

/* ---- a direction the links did not use ---- */

static noinline __noipa int
ck_seed_unlink_dir(struct device *dev, struct twostep_iova_state *st)
{
	twostep_iova_unlink(dev, st, 0, PAGE_SIZE, DMA_FROM_DEVICE, 0);
	return 0;
}

static noinline __noipa int
ck_seed_destroy_dir(struct device *dev, struct twostep_iova_state *st)
{
	twostep_iova_destroy(dev, st, PAGE_SIZE, DMA_FROM_DEVICE, 0);
	return 0;
}

static int case_checker_dir_mismatch(struct ts *t)
{
	bool on = twostep_debug_set(true);
	struct page *pg = alloc_page(GFP_KERNEL);
	struct twostep_iova_state st;
	unsigned long before;
	int ret;

	if (!TS_EXPECT(t, pg, "page"))
		goto out;
	if (TS_EXPECT(t, !ck_range(t, &st, pg, DMA_TO_DEVICE), "range")) {
		before = ck_count(t->dev, TWOSTEP_FINDING_DIR_MISMATCH);
		ck_seed_unlink_dir(t->dev, &st);
		ck_expect(t, t->dev, TWOSTEP_FINDING_DIR_MISMATCH, before,
			  ck_seed_unlink_dir, "unlink direction");
		ret = twostep_iova_link(t->dev, &st, page_to_phys(pg), 0,
					PAGE_SIZE, DMA_TO_DEVICE, 0) ?:
		      twostep_iova_sync(t->dev, &st, 0, PAGE_SIZE);
		TS_EXPECT(t, !ret, "link again: %d", ret);
		before = ck_count(t->dev, TWOSTEP_FINDING_DIR_MISMATCH);
		ck_seed_destroy_dir(t->dev, &st);
		ck_expect(t, t->dev, TWOSTEP_FINDING_DIR_MISMATCH, before,
			  ck_seed_destroy_dir, "destroy direction");
	}
	__free_page(pg);
out:
	twostep_debug_set(on);
	return 0;
}

/* ---- ranges left live: the leak report at detach ---- */

static noinline __noipa int
ck_seed_leak(struct ts *t, struct twostep_iova_state *st, struct page *pg)
{
	if (!twostep_iova_try_alloc(t->dev, st, 0, PAGE_SIZE))
		return -ENOSPC;
	ts_note(st->addr, PAGE_SIZE);
	return twostep_iova_link(t->dev, st, page_to_phys(pg), 0, PAGE_SIZE,
				 DMA_BIDIRECTIONAL, 0) ?:
	       twostep_iova_sync(t->dev, st, 0, PAGE_SIZE);
}

/* The failed link whose range the driver never frees */
static noinline __noipa int
ck_seed_failed_link(struct ts *t, struct twostep_iova_state *st,
		    struct page *pg)
{
	int ret;

	if (!twostep_iova_try_alloc(t->dev, st, 0, PAGE_SIZE))
		return -ENOSPC;
	ts_note(st->addr, PAGE_SIZE);
	twostep_debug_fail(TWOSTEP_FAIL_MAP, 1);
	ret = twostep_iova_link(t->dev, st, page_to_phys(pg), 0, PAGE_SIZE,
				DMA_BIDIRECTIONAL, 0);
	twostep_debug_fail(TWOSTEP_FAIL_MAP, 0);
	return ret;
}

/*
 * Both ranges are left live, as the buggy driver leaves them; detach
 * (which an unbind does the same way) reports each with its try_alloc.
 */
static int case_checker_leak(struct ts *t)
{
	unsigned long leak, failed, before, now;
	bool on = twostep_debug_set(true);
	struct page *pg = alloc_page(GFP_KERNEL);
	struct twostep_iova_state st, st2;
	int ret, ret2;

	if (!TS_EXPECT(t, pg, "page"))
		goto out;
	leak = ck_count(t->dev, TWOSTEP_FINDING_LEAK);
	failed = ck_count(t->dev, TWOSTEP_FINDING_FAILED_LINK_LEAK);
	before = ck_count(t->dev, TWOSTEP_FINDING_KINDS);
	ret = ck_seed_leak(t, &st, pg);
	ret2 = ck_seed_failed_link(t, &st2, pg);
	if (ret != -ENOSPC || ret2 != -ENOSPC)
		twostep_detach(t->dev);
	now = ck_count(t->dev, TWOSTEP_FINDING_KINDS);
	if (TS_EXPECT(t, !ret && ret2 == -ENOMEM,
		      "the leaked range: %d, the failed link: %d", ret,
		      ret2)) {
		TS_EXPECT(t, now == before + 2,
			  "findings at detach: %lu -> %lu", before, now);
		/* each kind's last call site: the try_alloc of its range */
		ck_expect(t, t->dev, TWOSTEP_FINDING_LEAK, leak, ck_seed_leak,
			  "leak at detach");
		ck_expect(t, t->dev, TWOSTEP_FINDING_FAILED_LINK_LEAK, failed,
			  ck_seed_failed_link, "failed link never freed");
	}
	/* a context again, as the cases after this one expect */
	TS_EXPECT(t, ts_api_probe(t), "try_alloc after the detach");
	__free_page(pg);
out:
	twostep_debug_set(on);
	ck_summary();
	return 0;
}

/* ---- what the checker costs: a measurement, run on request ---- */

#define CK_COST_ROUNDS	2000
#define CK_COST_REPS	5

/*
 * Nanoseconds per link, sync and unlink of one page, over @n rounds; the
 * best of CK_COST_REPS such figures is printed.
 */
static u64 ck_round_ns(struct ts *t, struct twostep_iova_state *st,
		       phys_addr_t phys, unsigned int n)
{
	ktime_t t0 = ktime_get();
	unsigned int i;

	for (i = 0; i < n; i++) {
		twostep_iova_link(t->dev, st, phys, 0, PAGE_SIZE,
				  DMA_BIDIRECTIONAL, 0);
		twostep_iova_sync(t->dev, st, 0, PAGE_SIZE);
		twostep_iova_unlink(t->dev, st, 0, PAGE_SIZE,
				    DMA_BIDIRECTIONAL, 0);
	}
	return ktime_to_ns(ktime_sub(ktime_get(), t0)) / n;
}

static int case_checker_cost(struct ts *t)
{
	bool on = twostep_debug_set(true);
	struct page *pg = alloc_page(GFP_KERNEL);
	u64 off = U64_MAX, with = U64_MAX;
	struct twostep_iova_state st;
	unsigned int rep;

	if (!TS_EXPECT(t, pg, "page"))
		goto out;
	/* allocated while on: tracked, so that "on" does all its work */
	if (TS_EXPECT(t, ts_try_alloc(t, &st, 0, PAGE_SIZE), "try_alloc")) {
		for (rep = 0; rep < CK_COST_REPS; rep++) {
			twostep_debug_set(false);
			off = min(off, ck_round_ns(t, &st, page_to_phys(pg),
						   CK_COST_ROUNDS));
			twostep_debug_set(true);
			with = min(with, ck_round_ns(t, &st, page_to_phys(pg),
						     CK_COST_ROUNDS));
		}
		twostep_iova_free(t->dev, &st);
		ts_diag("checker cost per link+sync+unlink: off %llu ns, on %llu ns",
			off, with);
	}
	__free_page(pg);
out:
	twostep_debug_set(on);
	return 0;
}

const struct ts_case ts_checker_cases[] = {
	{ "checker_stale_state", case_checker_stale_state, true },
	{ "checker_foreign_state", case_checker_foreign_state, true },
	{ "checker_not_linked", case_checker_not_linked, true },
	{ "checker_unsynced_destroy", case_checker_unsynced_destroy, true },
	{ "checker_dir_mismatch", case_checker_dir_mismatch, true },
	{ "checker_leak", case_checker_leak, true },
	{ "checker_cost", case_checker_cost, true, .on_request = true },
};

const unsigned int ts_checker_ncases = ARRAY_SIZE(ts_checker_cases);

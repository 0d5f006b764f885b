// SPDX-License-Identifier: GPL-2.0
/*
 * twostep self-test: fidelity cases. Each describes one piece of upstream's
 * documented dma_iova_*() behaviour as an outcome string written down from
 * upstream's documentation and source (drivers/iommu/dma-iommu.c), runs
 * the same scenario against each selected backend - twostep, and the
 * kernel's own implementation where the kernel has one - and compares.
 * Where twostep deliberately behaves otherwise, the case carries twostep's
 * outcome and the reason; the README lists the same differences.
 *
 * Calls that make upstream WARN are bracketed by "expect-warn" markers
 * that the host reads: a WARNING there is upstream's documented answer,
 * not a failure.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dma-mapping.h>
#include <linux/gfp.h>
#include <linux/iommu.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/sizes.h>
#include <linux/string.h>

#include "helpers.h"
#include "ktap.h"

#define FID_OUT		96
#define FID_RANGES	64

/* One state of either implementation. */
union fid_state {
	struct twostep_iova_state ts;
#if TS_HAVE_NATIVE
	struct dma_iova_state up;
#endif
};

/**
 * struct fid_backend - one implementation of the two-step API
 * @name: "twostep" or "native"
 * @try_alloc: dma_iova_try_alloc()
 * @free: dma_iova_free()
 * @link: dma_iova_link()
 * @sync: dma_iova_sync()
 * @unlink: dma_iova_unlink()
 * @destroy: dma_iova_destroy()
 * @addr: the state's device address
 * @size: dma_iova_size()
 * @use: dma_use_iova()
 */
struct fid_backend {
	const char *name;
	bool (*try_alloc)(struct ts *t, union fid_state *s, phys_addr_t phys,
			  size_t size);
	void (*free)(struct ts *t, union fid_state *s);
	int (*link)(struct ts *t, union fid_state *s, phys_addr_t phys,
		    size_t off, size_t size, enum dma_data_direction dir);
	int (*sync)(struct ts *t, union fid_state *s, size_t off, size_t size);
	void (*unlink)(struct ts *t, union fid_state *s, size_t off,
		       size_t size, enum dma_data_direction dir);
	void (*destroy)(struct ts *t, union fid_state *s, size_t mapped,
			enum dma_data_direction dir);
	dma_addr_t (*addr)(union fid_state *s);
	size_t (*size)(union fid_state *s);
	bool (*use)(union fid_state *s);
};

static bool tw_try_alloc(struct ts *t, union fid_state *s, phys_addr_t phys,
			 size_t size)
{
	return ts_try_alloc(t, &s->ts, phys, size);
}

static void tw_free(struct ts *t, union fid_state *s)
{
	twostep_iova_free(t->dev, &s->ts);
}

static int tw_link(struct ts *t, union fid_state *s, phys_addr_t phys,
		   size_t off, size_t size, enum dma_data_direction dir)
{
	return twostep_iova_link(t->dev, &s->ts, phys, off, size, dir, 0);
}

static int tw_sync(struct ts *t, union fid_state *s, size_t off, size_t size)
{
	return twostep_iova_sync(t->dev, &s->ts, off, size);
}

static void tw_unlink(struct ts *t, union fid_state *s, size_t off,
		      size_t size, enum dma_data_direction dir)
{
	twostep_iova_unlink(t->dev, &s->ts, off, size, dir, 0);
}

static void tw_destroy(struct ts *t, union fid_state *s, size_t mapped,
		       enum dma_data_direction dir)
{
	twostep_iova_destroy(t->dev, &s->ts, mapped, dir, 0);
}

static dma_addr_t tw_addr(union fid_state *s)
{
	return s->ts.addr;
}

static size_t tw_size(union fid_state *s)
{
	return twostep_iova_size(&s->ts);
}

static bool tw_use(union fid_state *s)
{
	return twostep_use_iova(&s->ts);
}

static const struct fid_backend fid_twostep = {
	.name = "twostep",
	.try_alloc = tw_try_alloc,
	.free = tw_free,
	.link = tw_link,
	.sync = tw_sync,
	.unlink = tw_unlink,
	.destroy = tw_destroy,
	.addr = tw_addr,
	.size = tw_size,
	.use = tw_use,
};

#if TS_HAVE_NATIVE
static bool up_try_alloc(struct ts *t, union fid_state *s, phys_addr_t phys,
			 size_t size)
{
	return dma_iova_try_alloc(t->dev, &s->up, phys, size);
}

static void up_free(struct ts *t, union fid_state *s)
{
	dma_iova_free(t->dev, &s->up);
}

static int up_link(struct ts *t, union fid_state *s, phys_addr_t phys,
		   size_t off, size_t size, enum dma_data_direction dir)
{
	return dma_iova_link(t->dev, &s->up, phys, off, size, dir, 0);
}

static int up_sync(struct ts *t, union fid_state *s, size_t off, size_t size)
{
	return dma_iova_sync(t->dev, &s->up, off, size);
}

static void up_unlink(struct ts *t, union fid_state *s, size_t off,
		      size_t size, enum dma_data_direction dir)
{
	dma_iova_unlink(t->dev, &s->up, off, size, dir, 0);
}

static void up_destroy(struct ts *t, union fid_state *s, size_t mapped,
		       enum dma_data_direction dir)
{
	dma_iova_destroy(t->dev, &s->up, mapped, dir, 0);
}

static dma_addr_t up_addr(union fid_state *s)
{
	return s->up.addr;
}

static size_t up_size(union fid_state *s)
{
	return dma_iova_size(&s->up);
}

static bool up_use(union fid_state *s)
{
	return dma_use_iova(&s->up);
}

static const struct fid_backend fid_native = {
	.name = "native",
	.try_alloc = up_try_alloc,
	.free = up_free,
	.link = up_link,
	.sync = up_sync,
	.unlink = up_unlink,
	.destroy = up_destroy,
	.addr = up_addr,
	.size = up_size,
	.use = up_use,
};
#endif

/* The backends the "backend" parameter selected, twostep first. */
static const struct fid_backend *fid_backends(struct ts *t, unsigned int i)
{
	if (i == 0)
		return t->backends & TS_BACKEND_TWOSTEP ? &fid_twostep : NULL;
#if TS_HAVE_NATIVE
	if (i == 1)
		return t->backends & TS_BACKEND_NATIVE ? &fid_native : NULL;
#endif
	return NULL;
}

static bool fid_mapped(struct ts *t, dma_addr_t addr, phys_addr_t phys)
{
	return iommu_iova_to_phys(ts_domain(t), addr) == phys;
}

static void fid_warn_begin(const struct fid_backend *b)
{
	if (b != &fid_twostep)
		ktap_line("# expect-warn begin");
}

static void fid_warn_end(const struct fid_backend *b)
{
	if (b != &fid_twostep)
		ktap_line("# expect-warn end");
}

/* A state full of garbage, as a caller's stack would hold. */
static void fid_garbage(union fid_state *s)
{
	memset(s, 0xa5, sizeof(*s));
}

/* try_alloc fills the state in whatever it held. */
static int fid_alloc_state(struct ts *t, const struct fid_backend *b,
			   char *out)
{
	union fid_state s;
	bool ok;

	fid_garbage(&s);
	ok = b->try_alloc(t, &s, 0, SZ_64K);
	snprintf(out, FID_OUT, "ret=%d use=%d size=%zu low=%#llx", ok,
		 b->use(&s), b->size(&s), (u64)b->addr(&s) & (PAGE_SIZE - 1));
	if (ok)
		b->free(t, &s);
	return 0;
}

/* The address carries @phys's offset inside the granule. */
static int fid_alloc_offset(struct ts *t, const struct fid_backend *b,
			    char *out)
{
	struct iommu_domain *dom = ts_domain(t);
	u64 mask = PAGE_SIZE - 1;
	union fid_state s;
	bool ok;

	/* the IOMMU driver's granule: 4 KiB, or 16 KiB with 16 KiB pages */
	if (dom)
		mask = (1ULL << __ffs(dom->pgsize_bitmap)) - 1;
	fid_garbage(&s);
	ok = b->try_alloc(t, &s, 0x1234, 3000);
	snprintf(out, FID_OUT, "ret=%d use=%d size=%zu offset_kept=%d", ok,
		 b->use(&s), b->size(&s),
		 ((u64)b->addr(&s) & mask) == (0x1234 & mask));
	if (ok)
		b->free(t, &s);
	return 0;
}

/* Size 0 and a size with bit 63 set are refused (upstream WARNs). */
static int fid_alloc_bad_size(struct ts *t, const struct fid_backend *b,
			      char *out)
{
	union fid_state s;
	bool zero, top;

	fid_warn_begin(b);
	zero = b->try_alloc(t, &s, 0, 0);
	if (zero)
		b->free(t, &s);
	top = b->try_alloc(t, &s, 0, (size_t)BIT_ULL(63) | SZ_64K);
	if (top)
		b->free(t, &s);
	fid_warn_end(b);
	snprintf(out, FID_OUT, "size0=%d bit63=%d", zero, top);
	return 0;
}

/* Ranges handed out together never overlap. */
static int fid_alloc_disjoint(struct ts *t, const struct fid_backend *b,
			      char *out)
{
	union fid_state *s;
	unsigned int i, j, n, overlaps = 0;

	s = kcalloc(FID_RANGES, sizeof(*s), GFP_KERNEL);
	if (!s)
		return -ENOMEM;
	for (n = 0; n < FID_RANGES; n++)
		if (!b->try_alloc(t, &s[n], 0, SZ_64K))
			break;
	for (i = 0; i < n; i++)
		for (j = i + 1; j < n; j++)
			overlaps += b->addr(&s[i]) < b->addr(&s[j]) + SZ_64K &&
				    b->addr(&s[j]) < b->addr(&s[i]) + SZ_64K;
	for (i = 0; i < n; i++)
		b->free(t, &s[i]);
	kfree(s);
	snprintf(out, FID_OUT, "allocated=%u overlaps=%u", n, overlaps);
	return 0;
}

/* The range honours a 32-bit DMA mask set on the device. */
static int fid_alloc_mask(struct ts *t, const struct fid_backend *b,
			  char *out)
{
	u64 mask = dma_get_mask(t->dev);
	union fid_state s;
	bool ok, below = false;
	int ret;

	ret = dma_set_mask(t->dev, DMA_BIT_MASK(32));
	if (ret)
		return ret;
	ok = b->try_alloc(t, &s, 0, SZ_1M);
	if (ok) {
		below = b->addr(&s) + SZ_1M - 1 <= DMA_BIT_MASK(32);
		b->free(t, &s);
	}
	dma_set_mask(t->dev, mask);
	snprintf(out, FID_OUT, "ret=%d below_4g=%d", ok, below);
	return 0;
}

/* Scattered pages linked one by one, one sync: the device reads them. */
static int fid_link_read(struct ts *t, const struct fid_backend *b,
			 char *out)
{
	u8 *got = kmalloc(EDU_MAX_XFER, GFP_KERNEL);
	size_t off = PAGE_SIZE + PAGE_SIZE / 2;
	struct ts_pages p;
	union fid_state s;
	int ret, lret = 0, sret = -1;
	unsigned int i;
	bool same = false;

	if (!got)
		return -ENOMEM;
	ret = ts_pages_get(t, &p, 4);
	if (ret)
		goto out_free;
	ts_pages_fill(&p, t->seed + 41);
	if (!b->try_alloc(t, &s, 0, 4 * PAGE_SIZE)) {
		snprintf(out, FID_OUT, "ret=0");
		goto out_put;
	}
	for (i = 0; i < p.n && !lret; i++)
		lret = b->link(t, &s, page_to_phys(p.pg[i]), i * PAGE_SIZE,
			       PAGE_SIZE, DMA_TO_DEVICE);
	if (!lret)
		sret = b->sync(t, &s, 0, 4 * PAGE_SIZE);
	if (!lret && !sret && !ts_dev_read(t, b->addr(&s) + off,
					   EDU_MAX_XFER, got))
		same = ts_pages_match(&p, off, got, EDU_MAX_XFER);
	b->destroy(t, &s, lret ? (i - 1) * PAGE_SIZE : 4 * PAGE_SIZE,
		   DMA_TO_DEVICE);
	snprintf(out, FID_OUT, "link=%d sync=%d device_read=%s", lret, sret,
		 same ? "same" : "different");
out_put:
	ts_pages_put(&p);
out_free:
	kfree(got);
	return ret;
}

/*
 * Only the first link may start inside a granule, then the state's
 * address has the same offset; the next link continues right after it.
 */
static int fid_link_first_offset(struct ts *t, const struct fid_backend *b,
				 char *out)
{
	size_t head = PAGE_SIZE - 0x300;
	struct ts_pages p;
	union fid_state s;
	phys_addr_t phys0;
	int ret, l0, l1 = -1, sret = -1;
	bool right = false;

	ret = ts_pages_get(t, &p, 2);
	if (ret)
		return ret;
	phys0 = page_to_phys(p.pg[0]) + 0x300;
	if (!b->try_alloc(t, &s, phys0, head + PAGE_SIZE)) {
		snprintf(out, FID_OUT, "ret=0");
		goto out_put;
	}
	l0 = b->link(t, &s, phys0, 0, head, DMA_BIDIRECTIONAL);
	if (!l0)
		l1 = b->link(t, &s, page_to_phys(p.pg[1]), head, PAGE_SIZE,
			     DMA_BIDIRECTIONAL);
	if (!l1) {
		sret = b->sync(t, &s, 0, head + PAGE_SIZE);
		right = fid_mapped(t, b->addr(&s), phys0) &&
			fid_mapped(t, b->addr(&s) + head,
				   page_to_phys(p.pg[1])) &&
			fid_mapped(t, b->addr(&s) + head + PAGE_SIZE - 1,
				   page_to_phys(p.pg[1]) + PAGE_SIZE - 1);
	}
	b->destroy(t, &s, l0 ? 0 : l1 ? head : head + PAGE_SIZE,
		   DMA_BIDIRECTIONAL);
	snprintf(out, FID_OUT, "link=%d,%d sync=%d translation=%s", l0, l1,
		 sret, right ? "right" : "wrong");
out_put:
	ts_pages_put(&p);
	return 0;
}

/* A later link starting inside a granule is refused. */
static int fid_link_later_offset(struct ts *t, const struct fid_backend *b,
				 char *out)
{
	struct ts_pages p;
	union fid_state s;
	int ret;

	ret = ts_pages_get(t, &p, 1);
	if (ret)
		return ret;
	if (!b->try_alloc(t, &s, 0, 2 * PAGE_SIZE)) {
		snprintf(out, FID_OUT, "ret=0");
		goto out_put;
	}
	fid_warn_begin(b);
	ret = b->link(t, &s, page_to_phys(p.pg[0]) + 0x100, PAGE_SIZE, 1000,
		      DMA_TO_DEVICE);
	fid_warn_end(b);
	snprintf(out, FID_OUT, "link=%d mapped=%d", ret,
		 fid_mapped(t, b->addr(&s) + PAGE_SIZE,
			    page_to_phys(p.pg[0])));
	b->destroy(t, &s, ret ? 0 : 2 * PAGE_SIZE, DMA_TO_DEVICE);
	ret = 0;
out_put:
	ts_pages_put(&p);
	return ret;
}

/*
 * A range of four pages, each linked on its own, one sync. False when that
 * failed: the outcome is written and nothing is left allocated.
 */
static bool fid_link_four(struct ts *t, const struct fid_backend *b,
			  const struct ts_pages *p, union fid_state *s,
			  char *out)
{
	unsigned int i;
	int ret = 0;

	if (!b->try_alloc(t, s, 0, 4 * PAGE_SIZE)) {
		snprintf(out, FID_OUT, "ret=0");
		return false;
	}
	for (i = 0; i < 4 && !ret; i++)
		ret = b->link(t, s, page_to_phys(p->pg[i]), i * PAGE_SIZE,
			      PAGE_SIZE, DMA_BIDIRECTIONAL);
	if (ret) {
		b->destroy(t, s, (i - 1) * PAGE_SIZE, DMA_BIDIRECTIONAL);
		snprintf(out, FID_OUT, "link=%d", ret);
		return false;
	}
	b->sync(t, s, 0, 4 * PAGE_SIZE);
	return true;
}

/*
 * Four links; @unlink() the given ranges (the last one where upstream may
 * WARN when @warn_last); which pages still translate.
 */
static int fid_links_then(struct ts *t, const struct fid_backend *b,
			  char *out, const size_t (*ranges)[2],
			  unsigned int nranges, bool destroy_all,
			  bool warn_last)
{
	struct ts_pages p;
	union fid_state s;
	unsigned int i;
	char map[5];
	int ret;

	ret = ts_pages_get(t, &p, 4);
	if (ret)
		return ret;
	if (!fid_link_four(t, b, &p, &s, out))
		goto out_put;
	for (i = 0; i < nranges; i++) {
		if (warn_last && i == nranges - 1)
			fid_warn_begin(b);
		b->unlink(t, &s, ranges[i][0], ranges[i][1],
			  DMA_BIDIRECTIONAL);
		if (warn_last && i == nranges - 1)
			fid_warn_end(b);
	}
	if (destroy_all)
		b->destroy(t, &s, 4 * PAGE_SIZE, DMA_BIDIRECTIONAL);
	for (i = 0; i < 4; i++)
		map[i] = fid_mapped(t, b->addr(&s) + i * PAGE_SIZE,
				    page_to_phys(p.pg[i])) ? '1' : '0';
	map[4] = '\0';
	if (!destroy_all) {
		/* what is left linked is pages whose map[] says 1 */
		for (i = 0; i < 4; i++)
			if (map[i] == '1')
				b->unlink(t, &s, i * PAGE_SIZE, PAGE_SIZE,
					  DMA_BIDIRECTIONAL);
		b->free(t, &s);
	}
	snprintf(out, FID_OUT, "translating=%s", map);
out_put:
	ts_pages_put(&p);
	return 0;
}

/* Unlinking one whole link leaves its neighbours. */
static int fid_unlink_one(struct ts *t, const struct fid_backend *b,
			  char *out)
{
	static const size_t r[][2] = { { PAGE_SIZE, PAGE_SIZE } };

	return fid_links_then(t, b, out, r, 1, false, false);
}

/* One unlink may span several links. */
static int fid_unlink_span(struct ts *t, const struct fid_backend *b,
			   char *out)
{
	static const size_t r[][2] = { { PAGE_SIZE, 3 * PAGE_SIZE } };

	return fid_links_then(t, b, out, r, 1, false, false);
}

/*
 * Unlink over a hole: four links, page 1 unlinked, then the whole range.
 * twostep unmaps every linked page the range covers; upstream's unmap
 * stops at the hole on Intel and AMD (7.3: WARN, the pages after it stay
 * mapped), while virtio-iommu's unmaps the whole range.
 */
static int fid_unlink_hole(struct ts *t, const struct fid_backend *b,
			   char *out)
{
	static const size_t r[][2] = {
		{ PAGE_SIZE, PAGE_SIZE }, { 0, 4 * PAGE_SIZE },
	};

	return fid_links_then(t, b, out, r, 2, false, true);
}

/* Destroy with the whole length unmaps everything. */
static int fid_destroy_all(struct ts *t, const struct fid_backend *b,
			   char *out)
{
	return fid_links_then(t, b, out, NULL, 0, true, false);
}

/*
 * Destroy with a length short of what is linked. Upstream unmaps only
 * @mapped_len and frees the whole range, leaving the rest reachable
 * through freed IOVA; twostep unmaps all of it (and counts the misuse).
 */
static int fid_destroy_short(struct ts *t, const struct fid_backend *b,
			     char *out)
{
	struct ts_pages p;
	union fid_state s;
	unsigned int i;
	dma_addr_t addr;
	char map[5];
	int ret;

	ret = ts_pages_get(t, &p, 4);
	if (ret)
		return ret;
	if (!fid_link_four(t, b, &p, &s, out))
		goto out_put;
	addr = b->addr(&s);
	b->destroy(t, &s, 2 * PAGE_SIZE, DMA_BIDIRECTIONAL);
	for (i = 0; i < 4; i++) {
		map[i] = '0';
		if (!fid_mapped(t, addr + i * PAGE_SIZE,
				page_to_phys(p.pg[i])))
			continue;
		map[i] = '1';
		/* take back what was left in the freed range */
		iommu_unmap(ts_domain(t), addr + i * PAGE_SIZE, PAGE_SIZE);
	}
	map[4] = '\0';
	snprintf(out, FID_OUT, "translating=%s", map);
out_put:
	ts_pages_put(&p);
	return 0;
}

/* Ranges of three pages are aligned to four: none crosses 64 KiB. */
static int fid_alloc_aligned(struct ts *t, const struct fid_backend *b,
			     char *out)
{
	unsigned int n, crossing = 0, misaligned = 0;
	union fid_state *s;
	dma_addr_t a;

	s = kcalloc(FID_RANGES, sizeof(*s), GFP_KERNEL);
	if (!s)
		return -ENOMEM;
	for (n = 0; n < FID_RANGES; n++) {
		if (!b->try_alloc(t, &s[n], 0, 3 * PAGE_SIZE))
			break;
		a = b->addr(&s[n]);
		crossing += (a >> 16) != ((a + 3 * PAGE_SIZE - 1) >> 16);
		misaligned += !IS_ALIGNED(a, 4 * PAGE_SIZE);
	}
	while (n--)
		b->free(t, &s[n]);
	kfree(s);
	snprintf(out, FID_OUT, "crossing_64k=%u misaligned=%u", crossing,
		 misaligned);
	return 0;
}

/*
 * Unlink of half a link (the second page of one two-page link). Both
 * unmap it where the IOMMU maps the link with 4 KiB pages; where it uses
 * one 8 KiB page, upstream cannot split it, while twostep maps the first
 * half again.
 */
static int fid_unlink_partial(struct ts *t, const struct fid_backend *b,
			      char *out)
{
	struct page *pg = alloc_pages(GFP_KERNEL, 1);
	union fid_state s;
	phys_addr_t phys;
	bool m0, m1;
	int ret;

	if (!pg)
		return -ENOMEM;
	phys = page_to_phys(pg);
	if (!b->try_alloc(t, &s, 0, 2 * PAGE_SIZE)) {
		snprintf(out, FID_OUT, "ret=0");
		goto out_free;
	}
	ret = b->link(t, &s, phys, 0, 2 * PAGE_SIZE, DMA_BIDIRECTIONAL);
	if (ret) {
		b->destroy(t, &s, 0, DMA_BIDIRECTIONAL);
		snprintf(out, FID_OUT, "link=%d", ret);
		goto out_free;
	}
	b->sync(t, &s, 0, 2 * PAGE_SIZE);
	/* an IOMMU with 8 KiB pages (AMD) unmaps both: upstream WARNs */
	fid_warn_begin(b);
	b->unlink(t, &s, PAGE_SIZE, PAGE_SIZE, DMA_BIDIRECTIONAL);
	fid_warn_end(b);
	m0 = fid_mapped(t, b->addr(&s), phys);
	m1 = fid_mapped(t, b->addr(&s) + PAGE_SIZE, phys + PAGE_SIZE);
	b->destroy(t, &s, m1 ? 2 * PAGE_SIZE : m0 ? PAGE_SIZE : 0,
		   DMA_BIDIRECTIONAL);
	snprintf(out, FID_OUT, "second_page=%s",
		 m1 ? "translating" : "unmapped");
out_free:
	__free_pages(pg, 1);
	return 0;
}

/* 2 MiB of contiguous memory in one link: aligned range, right pages. */
static int fid_link_2m(struct ts *t, const struct fid_backend *b, char *out)
{
	struct page *pg = alloc_pages(GFP_KERNEL | __GFP_NOWARN,
				      get_order(SZ_2M));
	union fid_state s;
	phys_addr_t phys;
	int lret, sret = -1;
	bool right = false, aligned;

	if (!pg) {
		snprintf(t->skip, sizeof(t->skip), "no 2 MiB of contiguous memory");
		return TS_SKIP;
	}
	phys = page_to_phys(pg);
	if (!b->try_alloc(t, &s, phys, SZ_2M)) {
		snprintf(out, FID_OUT, "ret=0");
		goto out_free;
	}
	aligned = IS_ALIGNED(b->addr(&s), SZ_2M);
	lret = b->link(t, &s, phys, 0, SZ_2M, DMA_BIDIRECTIONAL);
	if (!lret) {
		sret = b->sync(t, &s, 0, SZ_2M);
		right = fid_mapped(t, b->addr(&s), phys) &&
			fid_mapped(t, b->addr(&s) + SZ_1M + PAGE_SIZE,
				   phys + SZ_1M + PAGE_SIZE) &&
			fid_mapped(t, b->addr(&s) + SZ_2M - 1,
				   phys + SZ_2M - 1);
	}
	b->destroy(t, &s, lret ? 0 : SZ_2M, DMA_BIDIRECTIONAL);
	snprintf(out, FID_OUT, "aligned_2m=%d link=%d sync=%d translation=%s",
		 aligned, lret, sret, right ? "right" : "wrong");
out_free:
	__free_pages(pg, get_order(SZ_2M));
	return 0;
}

/**
 * struct fid_case - one fidelity case
 * @run: the scenario against one backend; writes the outcome
 * @upstream: the outcome upstream documents (and its source shows)
 * @twostep: twostep's outcome where it deliberately differs, else NULL
 * @why: the reason for the difference
 * @upstream_8k: upstream's outcome, when it differs, on an IOMMU that maps
 *               8 KiB pages (AMD's page table has every power of two)
 * @upstream_alt: another outcome upstream gives on some IOMMU drivers (what
 *                upstream leaves to the driver)
 */
struct fid_case {
	int (*run)(struct ts *t, const struct fid_backend *b, char *out);
	const char *upstream;
	const char *twostep;
	const char *why;
	const char *upstream_8k;
	const char *upstream_alt;
};

static unsigned int fid_same, fid_diff;

/* Run the case in t->data against every selected backend. */
static int fid_case_run(struct ts *t)
{
	const struct fid_case *c = t->data;
	const char *upstream = c->upstream;
	const struct fid_backend *b;
	char out[2][FID_OUT];
	unsigned int i, nb = 0;
	bool ok = true;
	int ret;

	if (c->upstream_8k && ts_domain(t)->pgsize_bitmap & SZ_8K)
		upstream = c->upstream_8k;
	for (i = 0; i < 2; i++) {
		const char *want;

		b = fid_backends(t, i);
		if (!b)
			continue;
		want = b == &fid_twostep && c->twostep ? c->twostep : upstream;
		out[i][0] = '\0';
		ret = c->run(t, b, out[i]);
		if (ret == TS_SKIP)
			return TS_SKIP;
		if (ret) {
			ts_diag("%s: error %d", b->name, ret);
			ok = false;
			continue;
		}
		nb++;
		/* what upstream leaves to the IOMMU driver */
		if (b != &fid_twostep && c->upstream_alt &&
		    !strcmp(out[i], c->upstream_alt))
			want = c->upstream_alt;
		if (strcmp(out[i], want)) {
			ts_diag("%s: %s, expected %s", b->name, out[i], want);
			ok = false;
		} else {
			ts_diag("%s: %s", b->name, out[i]);
		}
	}
	TS_EXPECT(t, ok, "an outcome is not the one documented");
	if (!ok || nb != 2)
		return 0;
	/* same verdict: both did the same; else the documented difference */
	if (!strcmp(out[0], out[1])) {
		fid_same++;
	} else {
		fid_diff++;
		ts_diag("documented difference: %s", c->why);
	}
	return 0;
}

#define FID(name, fn, up, tw, why, ...)					\
	{ "fidelity_" name, fid_case_run, true,				\
	  &(const struct fid_case){ fn, up, tw, why, ##__VA_ARGS__ } }

/*
 * Both implementations ran every case: how many agreed, how many differ
 * as documented.
 */
static int fid_summary(struct ts *t)
{
	unsigned int n = ts_fidelity_ncases - 1;

	if (!fid_backends(t, 0) || !fid_backends(t, 1)) {
		snprintf(t->skip, sizeof(t->skip),
			 "needs both backends: the kernel's own API and twostep");
		return TS_SKIP;
	}
	ktap_line("# summary: fidelity cases %u same verdicts %u documented differences %u",
		  n, fid_same, fid_diff);
	TS_EXPECT(t, fid_same + fid_diff == n,
		  "%u of %u cases agree or differ as documented",
		  fid_same + fid_diff, n);
	return 0;
}

const struct ts_case ts_fidelity_cases[] = {
	FID("alloc_fills_state", fid_alloc_state,
	    "ret=1 use=1 size=65536 low=0x0", NULL, NULL),
	FID("alloc_keeps_offset", fid_alloc_offset,
	    "ret=1 use=1 size=3000 offset_kept=1", NULL, NULL),
	FID("alloc_bad_size", fid_alloc_bad_size, "size0=0 bit63=0", NULL,
	    NULL),
	FID("alloc_disjoint", fid_alloc_disjoint, "allocated=64 overlaps=0",
	    NULL, NULL),
	FID("alloc_dma_mask", fid_alloc_mask, "ret=1 below_4g=1", NULL, NULL),
	FID("link_sync_read", fid_link_read,
	    "link=0 sync=0 device_read=same", NULL, NULL),
	FID("link_first_offset", fid_link_first_offset,
	    "link=0,0 sync=0 translation=right", NULL, NULL),
	FID("link_later_offset", fid_link_later_offset,
	    "link=-5 mapped=0", "link=-22 mapped=0",
	    "upstream WARNs and returns -EIO; twostep returns -EINVAL, logs and counts it"),
	FID("link_2m_contiguous", fid_link_2m,
	    "aligned_2m=1 link=0 sync=0 translation=right", NULL, NULL),
	FID("unlink_one_link", fid_unlink_one, "translating=1011", NULL,
	    NULL),
	FID("unlink_spans_links", fid_unlink_span, "translating=1000", NULL,
	    NULL),
	FID("unlink_part_of_link", fid_unlink_partial,
	    "second_page=unmapped", "second_page=unmapped",
	    "on an IOMMU with 8 KiB pages upstream WARNs and unmaps nothing; twostep splits the page and unmaps the half",
	    /* upstream cannot split the 8 KiB page: WARNs, unmaps nothing */
	    "second_page=translating"),
	FID("unlink_over_hole", fid_unlink_hole, "translating=0011",
	    "translating=0000",
	    "upstream WARNs at the hole and leaves the links after it mapped; twostep unmaps all",
	    /* virtio-iommu unmaps the whole range, hole or not */
	    NULL, "translating=0000"),
	FID("alloc_size_aligned", fid_alloc_aligned,
	    "crossing_64k=0 misaligned=0", NULL, NULL),
	FID("destroy_unmaps_all", fid_destroy_all, "translating=0000", NULL,
	    NULL),
	FID("destroy_short_length", fid_destroy_short, "translating=0011",
	    "translating=0000",
	    "upstream leaves links past mapped_len mapped in freed IOVA; twostep unmaps all"),
	{ "fidelity_summary", fid_summary, true },
};

const unsigned int ts_fidelity_ncases = ARRAY_SIZE(ts_fidelity_cases);

// SPDX-License-Identifier: GPL-2.0
/*
 * twostep self-test, benchmark mode: map and unmap N scattered pages with
 * twostep, with the classic DMA API (page by page and as a scatterlist)
 * and with the two floors (the domain's map_pages once per page with one
 * sync and one gathered unmap; one iommu_map of a physically contiguous
 * range). Repetitions are interleaved so that drift hits every method
 * alike. Each phase is bracketed by a write to an unused config register of
 * the device, which QEMU's pci_cfg_write trace event records, so the host
 * can count the vIOMMU's IOTLB invalidations per phase from QEMU's own
 * trace. Figures are KTAP diagnostic lines; nothing here is a timed
 * pass/fail test.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dma-mapping.h>
#include <linux/iommu.h>
#include <linux/ktime.h>
#include <linux/mm.h>
#include <linux/pci.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>

#include "kcompat.h"
#include "helpers.h"

#define BM_MARK_REG	0x40	/* unused config dword of edu */
#define BM_MARK_MAGIC	0x54000000u
#define BM_BLOCK_ORDER	10	/* 4 MiB contiguous block for floor_contig */
#define BM_REPS_MAX	64

/*
 * twostep_contig and native_contig link the pages of one physically
 * contiguous block with a single link call; the native methods exist where
 * the kernel has its own dma_iova_*().
 */
enum bm_method {
	BM_TWOSTEP,
	BM_TWOSTEP_UNLINK,
	BM_CLASSIC,
	BM_CLASSIC_SG,
	BM_FLOOR_PAGES,
	BM_FLOOR_CONTIG,
	BM_TWOSTEP_CONTIG,
	BM_NATIVE,
	BM_NATIVE_UNLINK,
	BM_NATIVE_CONTIG,
	BM_NR,
};

static const char *const bm_names[BM_NR] = {
	"twostep", "twostep_unlink", "classic", "classic_sg",
	"floor_map_pages", "floor_contig", "twostep_contig", "native",
	"native_unlink", "native_contig",
};

static bool bm_available(enum bm_method m)
{
	return TS_HAVE_NATIVE ||
	       (m != BM_NATIVE && m != BM_NATIVE_UNLINK &&
		m != BM_NATIVE_CONTIG);
}

/* 512: 2 MiB of 4 KiB pages, what GPU shared virtual memory maps per fault */
static const unsigned int bm_sizes[] = {
	1, 4, 16, 64, 256, 512, 1024, 4096
};

enum bm_phase { BM_PHASE_MAP, BM_PHASE_UNMAP, BM_PHASE_END };

/* The timed pieces of one range (bm_profile_ranges()). */
enum { BR_ALLOC, BR_LINK, BR_SYNC, BR_DESTROY, BR_WHOLE, BR_NR };

struct bm {
	struct ts *t;
	struct iommu_domain *dom;
	struct page **pages;
	struct page *block;
	dma_addr_t *addrs;
	unsigned int npages, reps;
	u64 map_ns[BM_NR][ARRAY_SIZE(bm_sizes)][BM_REPS_MAX];
	u64 unmap_ns[BM_NR][ARRAY_SIZE(bm_sizes)][BM_REPS_MAX];
	u64 piece_ns[2][BR_NR][BM_REPS_MAX];	/* the profiles' */
	unsigned int errors;
};

static void bm_mark(struct bm *b, enum bm_method m, unsigned int si,
		    enum bm_phase phase, unsigned int rep)
{
	pci_write_config_dword(b->t->edu->pdev, BM_MARK_REG,
			       BM_MARK_MAGIC | m << 16 | si << 12 |
			       phase << 8 | rep);
}

static int bm_prot(void)
{
	return IOMMU_READ | IOMMU_WRITE | IOMMU_CACHE;
}

/* Time one map and one unmap of @n pages with method @m. */
static int bm_run(struct bm *b, enum bm_method m, unsigned int si,
		  unsigned int rep)
{
	struct device *dev = b->t->dev;
	unsigned int n = bm_sizes[si], i;
	struct twostep_iova_state st;
#if TS_HAVE_NATIVE
	struct dma_iova_state nst;
#endif
	struct iommu_iotlb_gather gather;
	struct sg_table sgt = { };
	struct scatterlist *sg;
	size_t len = (size_t)n * PAGE_SIZE;
	int ret = 0;
	u64 t0, t1, t2, t3;

	if (m == BM_CLASSIC_SG) {
		ret = sg_alloc_table(&sgt, n, GFP_KERNEL);
		if (ret)
			return ret;
		for_each_sgtable_sg(&sgt, sg, i)
			sg_set_page(sg, b->pages[i], PAGE_SIZE, 0);
	}
	if (m == BM_FLOOR_PAGES || m == BM_FLOOR_CONTIG) {
		/* reserve IOVA the floors map into; not timed */
		if (!twostep_iova_try_alloc(dev, &st, 0, len))
			return -ENOMEM;
	}

	bm_mark(b, m, si, BM_PHASE_MAP, rep);
	t0 = ktime_get_ns();
	switch (m) {
	case BM_TWOSTEP:
	case BM_TWOSTEP_UNLINK:
		if (!twostep_iova_try_alloc(dev, &st, 0, len)) {
			ret = -ENOMEM;
			break;
		}
		for (i = 0; i < n && !ret; i++)
			ret = twostep_iova_link(dev, &st,
						page_to_phys(b->pages[i]),
						i * PAGE_SIZE, PAGE_SIZE,
						DMA_BIDIRECTIONAL, 0);
		ret = ret ?: twostep_iova_sync(dev, &st, 0, len);
		break;
	case BM_TWOSTEP_CONTIG:
		if (!twostep_iova_try_alloc(dev, &st, 0, len)) {
			ret = -ENOMEM;
			break;
		}
		ret = twostep_iova_link(dev, &st, page_to_phys(b->block), 0,
					len, DMA_BIDIRECTIONAL, 0);
		ret = ret ?: twostep_iova_sync(dev, &st, 0, len);
		break;
#if TS_HAVE_NATIVE
	case BM_NATIVE:
	case BM_NATIVE_UNLINK:
		if (!dma_iova_try_alloc(dev, &nst, 0, len)) {
			ret = -ENOMEM;
			break;
		}
		for (i = 0; i < n && !ret; i++)
			ret = dma_iova_link(dev, &nst,
					    page_to_phys(b->pages[i]),
					    i * PAGE_SIZE, PAGE_SIZE,
					    DMA_BIDIRECTIONAL, 0);
		ret = ret ?: dma_iova_sync(dev, &nst, 0, len);
		break;
	case BM_NATIVE_CONTIG:
		if (!dma_iova_try_alloc(dev, &nst, 0, len)) {
			ret = -ENOMEM;
			break;
		}
		ret = dma_iova_link(dev, &nst, page_to_phys(b->block), 0, len,
				    DMA_BIDIRECTIONAL, 0);
		ret = ret ?: dma_iova_sync(dev, &nst, 0, len);
		break;
#endif
	case BM_CLASSIC:
		for (i = 0; i < n; i++) {
			b->addrs[i] = dma_map_page(dev, b->pages[i], 0,
						   PAGE_SIZE,
						   DMA_BIDIRECTIONAL);
			if (dma_mapping_error(dev, b->addrs[i]))
				ret = -ENOMEM;
		}
		break;
	case BM_CLASSIC_SG:
		ret = dma_map_sgtable(dev, &sgt, DMA_BIDIRECTIONAL, 0);
		break;
	case BM_FLOOR_PAGES:
		for (i = 0; i < n && !ret; i++) {
			size_t mapped = 0;

			ret = ts_map_nosync(b->dom, st.addr + i * PAGE_SIZE,
					    page_to_phys(b->pages[i]),
					    PAGE_SIZE, bm_prot(), &mapped);
		}
		if (b->dom->ops->iotlb_sync_map)
			b->dom->ops->iotlb_sync_map(b->dom, st.addr, len);
		break;
	case BM_FLOOR_CONTIG:
		/*
		 * Beyond the 4 MiB block the physical range is not ours;
		 * nothing reaches it, only page tables are written.
		 */
		ret = ts_iommu_map(b->dom, st.addr, page_to_phys(b->block),
				   len, bm_prot());
		break;
	default:
		break;
	}
	t1 = ktime_get_ns();
	bm_mark(b, m, si, BM_PHASE_UNMAP, rep);
	t2 = ktime_get_ns();
	switch (m) {
	case BM_TWOSTEP:
	case BM_TWOSTEP_CONTIG:
		twostep_iova_destroy(dev, &st, len, DMA_BIDIRECTIONAL, 0);
		break;
#if TS_HAVE_NATIVE
	case BM_NATIVE:
	case BM_NATIVE_CONTIG:
		if (!ret)
			dma_iova_destroy(dev, &nst, len, DMA_BIDIRECTIONAL, 0);
		break;
	case BM_NATIVE_UNLINK:
		if (!ret) {
			dma_iova_unlink(dev, &nst, 0, len, DMA_BIDIRECTIONAL,
					0);
			dma_iova_free(dev, &nst);
		}
		break;
#endif
	case BM_TWOSTEP_UNLINK:
		twostep_iova_unlink(dev, &st, 0, len, DMA_BIDIRECTIONAL, 0);
		twostep_iova_free(dev, &st);
		break;
	case BM_CLASSIC:
		for (i = 0; i < n; i++)
			if (!dma_mapping_error(dev, b->addrs[i]))
				dma_unmap_page(dev, b->addrs[i], PAGE_SIZE,
					       DMA_BIDIRECTIONAL);
		break;
	case BM_CLASSIC_SG:
		if (!ret)
			dma_unmap_sgtable(dev, &sgt, DMA_BIDIRECTIONAL, 0);
		break;
	case BM_FLOOR_PAGES:
		iommu_iotlb_gather_init(&gather);
		iommu_unmap_fast(b->dom, st.addr, len, &gather);
		iommu_iotlb_sync(b->dom, &gather);
		break;
	case BM_FLOOR_CONTIG:
		iommu_unmap(b->dom, st.addr, len);
		break;
	default:
		break;
	}
	t3 = ktime_get_ns();
	bm_mark(b, m, si, BM_PHASE_END, rep);

	if (m == BM_FLOOR_PAGES || m == BM_FLOOR_CONTIG)
		twostep_iova_free(dev, &st);
	if (m == BM_CLASSIC_SG)
		sg_free_table(&sgt);
	b->map_ns[m][si][rep] = t1 - t0;
	b->unmap_ns[m][si][rep] = t3 - t2;
	return ret;
}

/* Median, minimum and maximum of @reps samples, in ns per page x 10. */
static void bm_figures(u64 *v, unsigned int reps, unsigned int n,
		       u64 out[3])
{
	out[0] = div_u64(ts_median(v, reps) * 10, n);
	out[1] = div_u64(v[0] * 10, n);
	out[2] = div_u64(v[reps - 1] * 10, n);
}

#define BM_LINE_FMT \
	"# bench method=%s n=%u reps=%u map_ns_page=%s map_min=%s map_max=%s unmap_ns_page=%s unmap_min=%s unmap_max=%s"

/* "123.4" from a value in tenths. */
static const char *bm_fix(char *buf, u64 tenths)
{
	u32 rem = do_div(tenths, 10);

	snprintf(buf, 24, "%llu.%u", tenths, rem);
	return buf;
}

static void bm_report(struct bm *b, unsigned int nsizes)
{
	char f[6][24];
	unsigned int m, si;
	u64 mf[3], uf[3];

	for (si = 0; si < nsizes; si++) {
		for (m = 0; m < BM_NR; m++) {
			if (!bm_available(m))
				continue;
			bm_figures(b->map_ns[m][si], b->reps, bm_sizes[si], mf);
			bm_figures(b->unmap_ns[m][si], b->reps, bm_sizes[si],
				   uf);
			ktap_line(BM_LINE_FMT, bm_names[m], bm_sizes[si], b->reps,
				  bm_fix(f[0], mf[0]), bm_fix(f[1], mf[1]),
				  bm_fix(f[2], mf[2]), bm_fix(f[3], uf[0]),
				  bm_fix(f[4], uf[1]), bm_fix(f[5], uf[2]));
		}
	}
}

/*
 * The pieces of a link, in ns per call over @n pages, best of @reps: the
 * whole link; a sync of one unlinked page (the call, the device and range
 * lookup and the range check, plus the driver's sync callback, a no-op on
 * Intel without caching-mode); the page-table write alone (map_pages);
 * and the sync callback alone. link - map_pages is twostep's bookkeeping.
 */
static void bm_profile(struct bm *b, unsigned int n)
{
	struct device *dev = b->t->dev;
	u64 best[4] = { U64_MAX, U64_MAX, U64_MAX, U64_MAX }, t0, t1;
	struct twostep_iova_state st;
	struct iommu_iotlb_gather gather;
	size_t len = (size_t)n * PAGE_SIZE;
	unsigned int rep, i, p;
	int ret = 0;

	for (rep = 0; rep < b->reps; rep++) {
		for (p = 0; p < 4; p++) {
			if (!twostep_iova_try_alloc(dev, &st, 0, len))
				return;
			t0 = ktime_get_ns();
			for (i = 0; i < n; i++) {
				size_t mapped = 0;
				dma_addr_t a = st.addr + i * PAGE_SIZE;
				phys_addr_t ph = page_to_phys(b->pages[i]);

				if (p == 0)
					ret |= twostep_iova_link(dev, &st, ph,
						i * PAGE_SIZE, PAGE_SIZE,
						DMA_BIDIRECTIONAL, 0);
				else if (p == 1)
					ret |= twostep_iova_sync(dev, &st,
						i * PAGE_SIZE, PAGE_SIZE);
				else if (p == 2)
					ret |= ts_map_nosync(b->dom, a, ph,
						PAGE_SIZE, bm_prot(), &mapped);
				else if (b->dom->ops->iotlb_sync_map)
					b->dom->ops->iotlb_sync_map(b->dom, a,
								    PAGE_SIZE);
			}
			t1 = ktime_get_ns();
			best[p] = min(best[p], t1 - t0);
			if (p == 2) {
				iommu_iotlb_gather_init(&gather);
				iommu_unmap_fast(b->dom, st.addr, len, &gather);
				iommu_iotlb_sync(b->dom, &gather);
				twostep_iova_free(dev, &st);
			} else {
				twostep_iova_destroy(dev, &st,
						     p ? 0 : len,
						     DMA_BIDIRECTIONAL, 0);
			}
		}
	}
	ktap_line("# profile n=%u ns/call: link %llu, %s %llu, %s %llu, %s %llu%s",
		  n, div_u64(best[0], n),
		  "sync of an unlinked page", div_u64(best[1], n),
		  "map_pages", div_u64(best[2], n),
		  "sync callback", div_u64(best[3], n),
		  ret ? " (errors)" : "");
}

/*
 * One range of @n pages of the contiguous block, the way a block driver
 * or a GPU fault maps it: try_alloc, one link, sync, destroy, each timed,
 * and the four together; @native: with the kernel's own dma_iova_*.
 * Returns an error of the link or sync, or -ENOMEM when try_alloc said no.
 */
static int bm_range_once(struct bm *b, bool native, unsigned int n,
			 u64 *t)
{
	struct device *dev = b->t->dev;
	size_t len = (size_t)n * PAGE_SIZE;
	phys_addr_t phys = page_to_phys(b->block);
	struct twostep_iova_state st;
#if TS_HAVE_NATIVE
	struct dma_iova_state nst;
#endif
	u64 t0, t1, t2, t3, t4;
	int ret;

	if (!native) {
		t0 = ktime_get_ns();
		if (!twostep_iova_try_alloc(dev, &st, 0, len))
			return -ENOMEM;
		t1 = ktime_get_ns();
		ret = twostep_iova_link(dev, &st, phys, 0, len,
					DMA_BIDIRECTIONAL, 0);
		t2 = ktime_get_ns();
		ret = ret ?: twostep_iova_sync(dev, &st, 0, len);
		t3 = ktime_get_ns();
		twostep_iova_destroy(dev, &st, len, DMA_BIDIRECTIONAL, 0);
		t4 = ktime_get_ns();
	} else {
#if TS_HAVE_NATIVE
		t0 = ktime_get_ns();
		if (!dma_iova_try_alloc(dev, &nst, 0, len))
			return -ENOMEM;
		t1 = ktime_get_ns();
		ret = dma_iova_link(dev, &nst, phys, 0, len,
				    DMA_BIDIRECTIONAL, 0);
		t2 = ktime_get_ns();
		ret = ret ?: dma_iova_sync(dev, &nst, 0, len);
		t3 = ktime_get_ns();
		dma_iova_destroy(dev, &nst, len, DMA_BIDIRECTIONAL, 0);
		t4 = ktime_get_ns();
#else
		return -EOPNOTSUPP;
#endif
	}
	t[BR_ALLOC] = t1 - t0;
	t[BR_LINK] = t2 - t1;
	t[BR_SYNC] = t3 - t2;
	t[BR_DESTROY] = t4 - t3;
	t[BR_WHOLE] = t4 - t0;
	return ret;
}

/* One "# profile range" line: the medians @t of @method at @n pages. */
static void bm_range_print(unsigned int n, const char *method, const u64 *t,
			   int err)
{
	char buf[128];

	scnprintf(buf, sizeof(buf),
		  "try_alloc %llu link %llu sync %llu destroy %llu whole %llu ns",
		  t[BR_ALLOC], t[BR_LINK], t[BR_SYNC], t[BR_DESTROY],
		  t[BR_WHOLE]);
	ktap_line("# profile range n=%u: %s %s%s", n, method, buf,
		  err ? " (errors)" : "");
}

/*
 * Small and large ranges of 1, 16 and 512 pages (4 KiB, 64 KiB, 2 MiB)
 * in one link, twostep and, where the kernel has it, native, the two
 * interleaved: "# profile range" lines of medians in ns per call.
 */
static void bm_profile_ranges(struct bm *b)
{
	static const unsigned int sizes[] = { 1, 16, 512 };
	u64 (*v)[BR_NR][BM_REPS_MAX] = b->piece_ns, t[BR_NR];
	unsigned int si, rep, m, k;
	int ret = 0;

	for (si = 0; si < ARRAY_SIZE(sizes); si++) {
		for (rep = 0; rep < b->reps; rep++)
			for (m = 0; m < 1 + TS_HAVE_NATIVE; m++) {
				unsigned int mm = (m + rep) % (1 + TS_HAVE_NATIVE);

				memset(t, 0, sizeof(t));
				ret |= bm_range_once(b, mm, sizes[si], t);
				for (k = 0; k < BR_NR; k++)
					v[mm][k][rep] = t[k];
			}
		for (m = 0; m < 1 + TS_HAVE_NATIVE; m++) {
			for (k = 0; k < BR_NR; k++)
				t[k] = ts_median(v[m][k], b->reps);
			bm_range_print(sizes[si], m ? "native" : "twostep", t,
				       ret);
		}
	}
	if (ret)
		b->errors++;
}

/*
 * In passthrough: what a refused try_alloc costs, twostep's and native's,
 * medians of batches of BM_REFUSED_BATCH calls, in ns per call.
 */
#define BM_REFUSED_BATCH	16

static void bm_profile_refused(struct bm *b)
{
	u64 (*v)[BM_REPS_MAX] = b->piece_ns[0], t0;
	struct device *dev = b->t->dev;
	struct twostep_iova_state st;
#if TS_HAVE_NATIVE
	struct dma_iova_state nst;
#endif
	unsigned int rep, i, m;
	bool yes = false;

	for (rep = 0; rep < b->reps; rep++)
		for (m = 0; m < 1 + TS_HAVE_NATIVE; m++) {
			t0 = ktime_get_ns();
			for (i = 0; i < BM_REFUSED_BATCH; i++) {
				if (!m)
					yes |= twostep_iova_try_alloc(dev, &st, 0,
								      PAGE_SIZE);
#if TS_HAVE_NATIVE
				else
					yes |= dma_iova_try_alloc(dev, &nst, 0,
								  PAGE_SIZE);
#endif
			}
			v[m][rep] = div_u64(ktime_get_ns() - t0,
					    BM_REFUSED_BATCH);
		}
	if (yes) {
		/* a range in passthrough: case_bench() fails the run */
		b->errors++;
		return;
	}
	for (m = 0; m < 1 + TS_HAVE_NATIVE; m++)
		ktap_line("# profile refused: %s %llu ns",
			  m ? "native" : "twostep", ts_median(v[m], b->reps));
}

static int case_bench(struct ts *t)
{
	unsigned int si, m, rep, i, nsizes = 0;
	struct ts_pages chunk;
	struct bm *b;
	bool pt;

	b = vzalloc(sizeof(*b));
	if (!TS_EXPECT(t, b, "allocation"))
		return 0;
	b->t = t;
	b->dom = iommu_get_domain_for_dev(t->dev);
	b->reps = clamp(t->bench_reps, 1U, (unsigned int)BM_REPS_MAX);
	while (nsizes < ARRAY_SIZE(bm_sizes) &&
	       bm_sizes[nsizes] <= t->bench_max_n)
		nsizes++;
	b->npages = nsizes ? bm_sizes[nsizes - 1] : 0;
	b->pages = vzalloc(b->npages * sizeof(*b->pages));
	b->addrs = vzalloc(b->npages * sizeof(*b->addrs));
	b->block = alloc_pages(GFP_KERNEL, BM_BLOCK_ORDER);
	pt = ts_passthrough(t->dev);
	if (!TS_EXPECT(t, nsizes && b->pages && b->addrs && b->block &&
		       b->dom && (pt || ts_can_map_nosync(b->dom)), "setup"))
		goto out;
	/* ranges exactly where the device's DMA is translated */
	if (!TS_EXPECT(t, t->api != pt, "try_alloc %s in %s",
		       t->api ? "gives a range" : "says no",
		       pt ? "passthrough" : "a translating domain"))
		goto out;
	/* scattered pages, gathered TS_PAGES_MAX at a time */
	for (i = 0; i < b->npages; i += chunk.n) {
		unsigned int want = min(b->npages - i, (unsigned int)TS_PAGES_MAX);

		if (!TS_EXPECT(t, !ts_pages_get(t, &chunk, want), "pages"))
			goto out_pages;
		memcpy(&b->pages[i], chunk.pg, want * sizeof(chunk.pg[0]));
	}

	if (pt) {
		/* nothing to translate: no page table to time */
		ktap_line("# bench: passthrough, %u repetitions: workloads only",
			  b->reps);
		goto workloads;
	}
	ktap_line("# bench: %u repetitions, N up to %u, methods interleaved",
		  b->reps, b->npages);
	for (rep = 0; rep < b->reps; rep++)
		for (si = 0; si < nsizes; si++)
			for (m = 0; m < BM_NR; m++) {
				enum bm_method mm = (m + rep) % BM_NR;

				if (!(t->bench_mask & BIT(mm)) ||
				    !bm_available(mm))
					continue;

				if (bm_run(b, mm, si, rep)) {
					b->errors++;
					ts_diag("%s n=%u failed", bm_names[mm],
						bm_sizes[si]);
				}
			}
	bm_report(b, nsizes);
	bm_profile(b, b->npages);
	bm_profile_ranges(b);
workloads:
	if (pt)
		bm_profile_refused(b);
	ts_bench_workloads(t, b->pages, b->npages, b->block, b->reps);
	TS_EXPECT(t, !b->errors, "%u runs failed", b->errors);
out_pages:
	for (i = 0; i < b->npages && b->pages[i]; i++)
		__free_page(b->pages[i]);
out:
	if (b->block)
		__free_pages(b->block, BM_BLOCK_ORDER);
	vfree(b->addrs);
	vfree(b->pages);
	vfree(b);
	return 0;
}

const struct ts_case ts_bench_cases[] = {
	/* also in passthrough, where try_alloc says no */
	{ "bench", case_bench, false },
};

const unsigned int ts_bench_ncases = ARRAY_SIZE(ts_bench_cases);

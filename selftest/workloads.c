// SPDX-License-Identifier: GPL-2.0
/*
 * twostep self-test, benchmark mode: the workloads the two-step API was
 * made for, timed whole, and its throughput on two CPUs. Each is run with
 * twostep and, where the kernel has its own dma_iova_*(), with that
 * ("native"), and with the classic DMA API of the same pages. Figures are
 * KTAP diagnostic lines ("# workload", "# smp"); nothing here is a timed
 * pass/fail test. What is asserted: every run worked, every page of a GPU
 * fault translates to the page that was linked there, which the IOMMU's
 * own page table tells (untimed), and in passthrough the fallback below
 * was taken.
 *
 * - svm_fault: what GPU shared virtual memory does per fault: a 2 MiB
 *   range of 512 scattered 4 KiB pages, try_alloc, 512 links, one sync,
 *   then destroy; microseconds per fault.
 * - block: block-layer style requests of 1 to 32 scattered segments
 *   mapped and unmapped back to back; nanoseconds per request.
 * - smp: one thread per CPU doing try_alloc + link + sync + destroy of
 *   16 KiB (4 scattered pages) and of 2 MiB (one contiguous link) ranges;
 *   ranges per second with one thread and with two.
 * - odp: an on-demand-paging region of 512 entries, about half of them
 *   mapped in scattered runs, invalidated as one range: twostep's range
 *   unmap (one IOTLB flush) against per-entry unmaps as upstream's
 *   drivers do them (twostep's own and, on 7.x, the kernel's
 *   hmm_dma_unmap_pfn()); ns per invalidation. The phases are marked in
 *   edu's config space so that the host counts the IOTLB invalidations
 *   QEMU made in each.
 *
 * In passthrough (an identity domain, iommu=pt) try_alloc says no, as
 * upstream's does for a device without translation, and the two-step
 * methods take the fallback a driver takes: the classic DMA API, page by
 * page; what they cost there is the API's price where it cannot help.
 */
#include <linux/completion.h>
#include <linux/hmm.h>
#include <linux/pci.h>
#include <linux/dma-mapping.h>
#include <linux/iommu.h>
#include <linux/kthread.h>
#include <linux/ktime.h>
#include <linux/mm.h>
#include <linux/scatterlist.h>
#include <linux/sizes.h>
#include <linux/slab.h>

#include "kcompat.h"
#include "helpers.h"

#if TS_HAVE_NATIVE
#include <linux/hmm-dma.h>
#include <linux/pci-p2pdma.h>
#endif

#define WL_SVM_PAGES	512
#define WL_BLOCK_BATCH	32	/* requests per timed batch */
#define WL_REPS_MAX	64
#define WL_SMP_MS	200	/* each throughput measurement */

enum wl_method { WL_TWOSTEP, WL_NATIVE, WL_SG, WL_CLASSIC, WL_NR };

static const char *const wl_names[WL_NR] = {
	"twostep", "native", "classic_sg", "classic",
};

struct wl {
	struct ts *t;
	struct device *dev;
	struct page **pages;
	unsigned int npages, reps;
	phys_addr_t block;	/* 4 MiB physically contiguous */
	dma_addr_t *addrs;
	unsigned long untranslated;
	unsigned int errors;
	bool passthrough;	/* identity domain: try_alloc must say no */
	unsigned int fallbacks;	/* how often it did (svm_fault, block) */
	u64 v[WL_NR][2][WL_REPS_MAX];
};

static bool wl_available(enum wl_method m)
{
	return TS_HAVE_NATIVE || m != WL_NATIVE;
}

/*
 * Untimed: does every page, at its first and its last byte, translate to
 * the page mapped there? The addresses are w->addrs[]. In a passthrough
 * (identity) domain an address translates to itself.
 */
static void wl_check_translation(struct wl *w, unsigned int n)
{
	struct iommu_domain *dom = iommu_get_domain_for_dev(w->dev);
	unsigned int i;

	for (i = 0; i < n; i++) {
		phys_addr_t p = page_to_phys(w->pages[i]);
		dma_addr_t a = w->addrs[i];

		if (!dom || iommu_iova_to_phys(dom, a) != p ||
		    iommu_iova_to_phys(dom, a + PAGE_SIZE - 1) !=
		    p + PAGE_SIZE - 1)
			w->untranslated++;
	}
}

/* Untimed: the pages of a two-step range at @base, then their check. */
static void wl_check_range(struct wl *w, dma_addr_t base, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		w->addrs[i] = base + (dma_addr_t)i * PAGE_SIZE;
	wl_check_translation(w, n);
}

/* The classic DMA API: @n pages mapped one by one into @addrs. */
static int wl_pages_map(struct wl *w, dma_addr_t *addrs, unsigned int n)
{
	int ret = 0;
	unsigned int i;

	for (i = 0; i < n; i++) {
		addrs[i] = dma_map_page(w->dev, w->pages[i], 0, PAGE_SIZE,
					DMA_BIDIRECTIONAL);
		if (dma_mapping_error(w->dev, addrs[i]))
			ret = -ENOMEM;
	}
	return ret;
}

static void wl_pages_unmap(struct wl *w, dma_addr_t *addrs, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		if (!dma_mapping_error(w->dev, addrs[i]))
			dma_unmap_page(w->dev, addrs[i], PAGE_SIZE,
				       DMA_BIDIRECTIONAL);
}

/*
 * What a driver does when try_alloc says no: the classic DMA API, page by
 * page. Only where the device has no translating domain (passthrough), the
 * one place try_alloc must say no; anywhere else its no is an error. The
 * check's time goes to *@t1 and *@t2.
 */
static int wl_fallback(struct wl *w, unsigned int n, bool check, u64 *t1,
		       u64 *t2)
{
	int ret;

	if (!w->passthrough)
		return -ENOMEM;
	w->fallbacks++;
	ret = wl_pages_map(w, w->addrs, n);
	if (check && !ret) {
		*t1 = ktime_get_ns();
		wl_check_translation(w, n);
		*t2 = ktime_get_ns();
	}
	wl_pages_unmap(w, w->addrs, n);
	return ret;
}

/*
 * Map @n scattered pages with @m and unmap them again; the time of the
 * whole in ns, less that of the translation check when @check.
 */
static u64 wl_map_unmap(struct wl *w, enum wl_method m, unsigned int n,
			bool check)
{
	size_t len = (size_t)n * PAGE_SIZE;
	struct twostep_iova_state st;
#if TS_HAVE_NATIVE
	struct dma_iova_state nst;
#endif
	struct sg_table sgt = { };
	struct scatterlist *sg;
	u64 t0, t1 = 0, t2 = 0, t3;
	unsigned int i;
	int ret = 0;

	if (m == WL_SG) {
		/* untimed: the table is the caller's, as a request's is */
		if (sg_alloc_table(&sgt, n, GFP_KERNEL)) {
			w->errors++;
			return 0;
		}
		for_each_sgtable_sg(&sgt, sg, i)
			sg_set_page(sg, w->pages[i], PAGE_SIZE, 0);
	}
	t0 = ktime_get_ns();
	switch (m) {
	case WL_TWOSTEP:
		if (!twostep_iova_try_alloc(w->dev, &st, 0, len)) {
			ret = wl_fallback(w, n, check, &t1, &t2);
			break;
		}
		for (i = 0; i < n && !ret; i++)
			ret = twostep_iova_link(w->dev, &st,
						page_to_phys(w->pages[i]),
						i * PAGE_SIZE, PAGE_SIZE,
						DMA_BIDIRECTIONAL, 0);
		ret = ret ?: twostep_iova_sync(w->dev, &st, 0, len);
		if (check) {
			t1 = ktime_get_ns();
			wl_check_range(w, st.addr, n);
			t2 = ktime_get_ns();
		}
		twostep_iova_destroy(w->dev, &st, len, DMA_BIDIRECTIONAL, 0);
		break;
#if TS_HAVE_NATIVE
	case WL_NATIVE:
		if (!dma_iova_try_alloc(w->dev, &nst, 0, len)) {
			ret = wl_fallback(w, n, check, &t1, &t2);
			break;
		}
		for (i = 0; i < n && !ret; i++)
			ret = dma_iova_link(w->dev, &nst,
					    page_to_phys(w->pages[i]),
					    i * PAGE_SIZE, PAGE_SIZE,
					    DMA_BIDIRECTIONAL, 0);
		ret = ret ?: dma_iova_sync(w->dev, &nst, 0, len);
		if (check) {
			t1 = ktime_get_ns();
			wl_check_range(w, nst.addr, n);
			t2 = ktime_get_ns();
		}
		dma_iova_destroy(w->dev, &nst, len, DMA_BIDIRECTIONAL, 0);
		break;
#endif
	case WL_SG:
		ret = dma_map_sgtable(w->dev, &sgt, DMA_BIDIRECTIONAL, 0);
		if (!ret)
			dma_unmap_sgtable(w->dev, &sgt, DMA_BIDIRECTIONAL, 0);
		break;
	case WL_CLASSIC:
		ret = wl_pages_map(w, w->addrs, n);
		wl_pages_unmap(w, w->addrs, n);
		break;
	default:
		break;
	}
	t3 = ktime_get_ns();
	if (m == WL_SG)
		sg_free_table(&sgt);
	if (ret)
		w->errors++;
	return t3 - t0 - (t2 - t1);
}

/* GPU shared virtual memory: one 2 MiB fault of 512 scattered pages. */
static void wl_svm_fault(struct wl *w)
{
	unsigned int rep, m;

	if (w->npages < WL_SVM_PAGES) {
		ts_diag("workload svm_fault: skipped, %u pages (needs %u)",
			w->npages, WL_SVM_PAGES);
		return;
	}
	for (rep = 0; rep < w->reps; rep++)
		for (m = 0; m < WL_NR; m++) {
			enum wl_method mm = (m + rep) % WL_NR;

			if (wl_available(mm))
				w->v[mm][0][rep] = wl_map_unmap(w, mm,
								WL_SVM_PAGES,
								mm <= WL_NATIVE);
		}
	for (m = 0; m < WL_NR; m++)
		if (wl_available(m))
			ktap_line("# workload svm_fault method=%s n=%u reps=%u us=%llu",
				  wl_names[m], WL_SVM_PAGES, w->reps,
				  div_u64(ts_median(w->v[m][0], w->reps),
					  1000));
}

/* Block requests of 1 to 32 segments, WL_BLOCK_BATCH back to back. */
static void wl_block(struct wl *w)
{
	static const unsigned int segs[] = { 1, 2, 4, 8, 16, 32 };
	unsigned int rep, m, si, i;
	u64 t;

	for (si = 0; si < ARRAY_SIZE(segs); si++) {
		if (segs[si] > w->npages)
			break;
		for (rep = 0; rep < w->reps; rep++)
			for (m = 0; m < WL_NR; m++) {
				enum wl_method mm = (m + rep) % WL_NR;

				if (!wl_available(mm))
					continue;
				for (t = 0, i = 0; i < WL_BLOCK_BATCH; i++)
					t += wl_map_unmap(w, mm, segs[si],
							  false);
				w->v[mm][0][rep] = t;
			}
		for (m = 0; m < WL_NR; m++)
			if (wl_available(m))
				ktap_line("# workload block method=%s n=%u reps=%u ns=%llu",
					  wl_names[m], segs[si], w->reps,
					  div_u64(ts_median(w->v[m][0],
							    w->reps),
						  WL_BLOCK_BATCH));
	}
}

/* One thread of a throughput measurement. */
struct wl_thread {
	struct wl *w;
	enum wl_method m;
	size_t len;
	atomic_t *started;
	unsigned int nthreads;
	unsigned long done;
	int err;
	struct completion finished;
};

/*
 * The fallback of one range in a throughput thread (passthrough only):
 * the block, or the 4 pages of a 16 KiB range, mapped and unmapped with
 * the classic DMA API; the addresses are the thread's own.
 */
static int wl_range_fallback(struct wl *w, size_t len)
{
	dma_addr_t a[SZ_16K / PAGE_SIZE];
	int ret;

	if (!w->passthrough)
		return -ENOMEM;
	if (len > SZ_16K) {
		a[0] = dma_map_page(w->dev, pfn_to_page(PHYS_PFN(w->block)), 0,
				    len, DMA_BIDIRECTIONAL);
		if (dma_mapping_error(w->dev, a[0]))
			return -ENOMEM;
		dma_unmap_page(w->dev, a[0], len, DMA_BIDIRECTIONAL);
		return 0;
	}
	ret = wl_pages_map(w, a, len / PAGE_SIZE);
	wl_pages_unmap(w, a, len / PAGE_SIZE);
	return ret;
}

/* One range: try_alloc, link, sync, destroy. */
static int wl_range(struct wl *w, enum wl_method m, size_t len)
{
	unsigned int n = len / PAGE_SIZE, i;
	bool contig = len > SZ_16K;
	struct twostep_iova_state st;
#if TS_HAVE_NATIVE
	struct dma_iova_state nst;
#endif
	int ret = 0;

	if (m == WL_TWOSTEP) {
		if (!twostep_iova_try_alloc(w->dev, &st, 0, len))
			return wl_range_fallback(w, len);
		if (contig)
			ret = twostep_iova_link(w->dev, &st, w->block, 0, len,
						DMA_BIDIRECTIONAL, 0);
		for (i = 0; !contig && i < n && !ret; i++)
			ret = twostep_iova_link(w->dev, &st,
						page_to_phys(w->pages[i]),
						i * PAGE_SIZE, PAGE_SIZE,
						DMA_BIDIRECTIONAL, 0);
		ret = ret ?: twostep_iova_sync(w->dev, &st, 0, len);
		twostep_iova_destroy(w->dev, &st, len, DMA_BIDIRECTIONAL, 0);
		return ret;
	}
#if TS_HAVE_NATIVE
	if (!dma_iova_try_alloc(w->dev, &nst, 0, len))
		return wl_range_fallback(w, len);
	if (contig)
		ret = dma_iova_link(w->dev, &nst, w->block, 0, len,
				    DMA_BIDIRECTIONAL, 0);
	for (i = 0; !contig && i < n && !ret; i++)
		ret = dma_iova_link(w->dev, &nst, page_to_phys(w->pages[i]),
				    i * PAGE_SIZE, PAGE_SIZE,
				    DMA_BIDIRECTIONAL, 0);
	ret = ret ?: dma_iova_sync(w->dev, &nst, 0, len);
	dma_iova_destroy(w->dev, &nst, len, DMA_BIDIRECTIONAL, 0);
#endif
	return ret;
}

static int wl_thread_fn(void *data)
{
	struct wl_thread *th = data;
	u64 end;

	/* all threads start together */
	atomic_inc(th->started);
	while (atomic_read(th->started) < th->nthreads)
		cond_resched();
	end = ktime_get_ns() + WL_SMP_MS * NSEC_PER_MSEC;
	while (!th->err && ktime_get_ns() < end) {
		th->err = wl_range(th->w, th->m, th->len);
		th->done++;
		cond_resched();
	}
	return ts_kthread_finish(&th->finished);
}

/* Ranges per second of @nthreads threads, one per CPU, doing @m. */
static unsigned long wl_throughput(struct wl *w, enum wl_method m,
				   size_t len, unsigned int nthreads)
{
	struct task_struct *task[2] = { };
	struct wl_thread th[2] = { };
	unsigned long done = 0;
	atomic_t started;
	unsigned int i;

	atomic_set(&started, 0);
	for (i = 0; i < nthreads; i++) {
		th[i].w = w;
		th[i].m = m;
		th[i].len = len;
		th[i].started = &started;
		th[i].nthreads = nthreads;
		init_completion(&th[i].finished);
		task[i] = kthread_create(wl_thread_fn, &th[i], "ts_wl/%u", i);
		if (IS_ERR(task[i])) {
			task[i] = NULL;
			break;
		}
		kthread_bind(task[i], i);
	}
	if (i < nthreads) {
		nthreads = i;
		w->errors++;
	}
	for (i = 0; i < nthreads; i++)
		wake_up_process(task[i]);
	for (i = 0; i < nthreads; i++) {
		wait_for_completion(&th[i].finished);
		kthread_stop(task[i]);
		done += th[i].done;
		if (th[i].err)
			w->errors++;
	}
	return done * MSEC_PER_SEC / WL_SMP_MS;
}

/* Throughput with one thread and with one per CPU (two). */
static void wl_smp(struct wl *w)
{
	static const size_t sizes[] = { SZ_16K, SZ_2M };
	unsigned int si, m, rep, k, reps = min(w->reps, 3U);

	if (num_online_cpus() < 2) {
		ts_diag("smp: skipped, one CPU");
		return;
	}
	for (si = 0; si < ARRAY_SIZE(sizes); si++) {
		for (rep = 0; rep < reps; rep++)
			for (m = 0; m <= WL_NATIVE; m++)
				for (k = 0; k < 2 && wl_available(m); k++)
					w->v[m][k][rep] =
						wl_throughput(w, m, sizes[si],
							      k + 1);
		for (m = 0; m <= WL_NATIVE; m++)
			if (wl_available(m))
				ktap_line("# smp method=%s size=%zu reps=%u one=%llu two=%llu",
					  wl_names[m], sizes[si], reps,
					  ts_median(w->v[m][0], reps),
					  ts_median(w->v[m][1], reps));
	}
}

/* ---- odp: invalidation of a mirrored range ---- */

#define WL_ODP_MARK_REG		0x40	/* the benchmark's marker dword */
#define WL_ODP_MARK_MAGIC	0x55000000u

enum wl_odp_method { WL_ODP_RANGE, WL_ODP_ENTRIES, WL_ODP_NATIVE, WL_ODP_NR };

static const char *const wl_odp_names[WL_ODP_NR] = {
	"twostep_range", "twostep_entries", "native_entries",
};

/* Phase 0 starts, 1 ends the invalidation of @m in repetition @rep. */
static void wl_odp_mark(struct wl *w, enum wl_odp_method m, unsigned int rep,
			unsigned int phase)
{
	pci_write_config_dword(w->t->edu->pdev, WL_ODP_MARK_REG,
			       WL_ODP_MARK_MAGIC | m << 16 | rep << 8 | phase);
}

/* Entry @i of @n is mapped: runs of 1 to 16 with gaps of 1 to 16. */
static void wl_odp_pattern(unsigned long *want, unsigned int n)
{
	unsigned int i = 0, len;
	u32 seed = 0x0d9;

	bitmap_zero(want, n);
	while (i < n) {
		len = 1 + ts_rand(&seed) % 16;
		bitmap_set(want, i, min(len, n - i));
		i += len + 1 + ts_rand(&seed) % 16;
	}
}

/* Map the entries of @want with @m, untimed; time their invalidation. */
static u64 wl_odp_one(struct wl *w, enum wl_odp_method m, unsigned int n,
		      const unsigned long *want, unsigned int rep)
{
	struct twostep_hmm_dma_map map;
#if TS_HAVE_NATIVE
	struct pci_p2pdma_map_state p2p = { };
	struct hmm_dma_map nmap;
#endif
	unsigned int i, done = 0, mapped = 0;
	u64 t0 = 0, t1 = 0;

	if (m == WL_ODP_NATIVE) {
#if TS_HAVE_NATIVE
		if (hmm_dma_map_alloc(w->dev, &nmap, n, PAGE_SIZE)) {
			w->errors++;
			return 0;
		}
		for_each_set_bit(i, want, n) {
			nmap.pfn_list[i] = page_to_pfn(w->pages[i]) |
					   HMM_PFN_VALID;
			mapped += hmm_dma_map_pfn(w->dev, &nmap, i, &p2p) !=
				  DMA_MAPPING_ERROR;
		}
		wl_odp_mark(w, m, rep, 0);
		t0 = ktime_get_ns();
		for (i = 0; i < n; i++)
			done += hmm_dma_unmap_pfn(w->dev, &nmap, i);
		t1 = ktime_get_ns();
		wl_odp_mark(w, m, rep, 1);
		hmm_dma_map_free(w->dev, &nmap);
#endif
	} else {
		if (twostep_hmm_dma_map_alloc(w->dev, &map, n, PAGE_SIZE)) {
			w->errors++;
			return 0;
		}
		for_each_set_bit(i, want, n) {
			map.pfn_list[i] = page_to_pfn(w->pages[i]) |
					  HMM_PFN_VALID;
			mapped += twostep_hmm_dma_map_pfn(w->dev, &map, i) !=
				  DMA_MAPPING_ERROR;
		}
		wl_odp_mark(w, m, rep, 0);
		t0 = ktime_get_ns();
		if (m == WL_ODP_RANGE)
			done = twostep_hmm_dma_unmap_range(w->dev, &map, 0, n);
		else
			for (i = 0; i < n; i++)
				done += twostep_hmm_dma_unmap_pfn(w->dev, &map,
								  i);
		t1 = ktime_get_ns();
		wl_odp_mark(w, m, rep, 1);
		twostep_hmm_dma_map_free(w->dev, &map);
	}
	/* every entry mapped, and every one of them unmapped */
	if (mapped != bitmap_weight(want, n) || done != mapped)
		w->errors++;
	return t1 - t0;
}

static void wl_odp(struct wl *w)
{
	DECLARE_BITMAP(want, WL_SVM_PAGES);
	unsigned int n = w->npages, rep, m;

	wl_odp_pattern(want, n);
	for (rep = 0; rep < w->reps; rep++)
		for (m = 0; m < WL_ODP_NR; m++) {
			enum wl_odp_method mm = (m + rep) % WL_ODP_NR;

			if (mm != WL_ODP_NATIVE || TS_HAVE_NATIVE)
				w->v[mm][0][rep] = wl_odp_one(w, mm, n, want,
							      rep);
		}
	for (m = 0; m < WL_ODP_NR; m++)
		if (m != WL_ODP_NATIVE || TS_HAVE_NATIVE)
			ktap_line("# workload odp method=%s n=%u mapped=%u reps=%u ns=%llu",
				  wl_odp_names[m], n, bitmap_weight(want, n),
				  w->reps, ts_median(w->v[m][0], w->reps));
}

/* Does @dev's DMA go untranslated through an identity domain (iommu=pt)? */
bool ts_passthrough(struct device *dev)
{
	struct iommu_domain *dom = iommu_get_domain_for_dev(dev);

	return dom && dom->type == IOMMU_DOMAIN_IDENTITY;
}

/*
 * The workloads over @npages scattered pages and a physically contiguous
 * block of at least 2 MiB, @reps repetitions each.
 */
void ts_bench_workloads(struct ts *t, struct page **pages,
			unsigned int npages, struct page *block,
			unsigned int reps)
{
	struct wl *w = kvzalloc(sizeof(*w), GFP_KERNEL);

	if (!TS_EXPECT(t, w, "allocation"))
		return;
	w->t = t;
	w->dev = t->dev;
	w->pages = pages;
	w->npages = min_t(unsigned int, npages, WL_SVM_PAGES);
	w->reps = clamp(reps, 1U, (unsigned int)WL_REPS_MAX);
	w->block = page_to_phys(block);
	w->passthrough = ts_passthrough(t->dev);
	w->addrs = kcalloc(w->npages, sizeof(*w->addrs), GFP_KERNEL);
	if (!TS_EXPECT(t, w->addrs && w->npages, "setup"))
		goto out;
	wl_svm_fault(w);
	wl_block(w);
	wl_odp(w);
	wl_smp(w);
	ktap_line("# workloads: svm_fault pages untranslated %lu, errors %u, fallbacks %u",
		  w->untranslated, w->errors, w->fallbacks);
	TS_EXPECT(t, !w->untranslated && !w->errors,
		  "%lu pages did not translate, %u runs failed",
		  w->untranslated, w->errors);
	/* passthrough: every two-step method took the fallback */
	TS_EXPECT(t, !w->passthrough || w->fallbacks,
		  "passthrough, but try_alloc never said no");
out:
	kfree(w->addrs);
	kvfree(w);
}

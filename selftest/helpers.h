/* SPDX-License-Identifier: GPL-2.0 */
/*
 * twostep self-test: helpers shared by the cases (helpers.c).
 */
#ifndef _TWOSTEP_HELPERS_H
#define _TWOSTEP_HELPERS_H

#include <linux/dma-direction.h>
#include <linux/types.h>

#include "edu.h"
#include "ktap.h"
#include "twostep.h"

#define TS_PAGES_MAX	32
#define TS_SCRUB	0x11	/* device buffer filler before a read */

struct page;
struct iommu_domain;
struct completion;

struct ts_pages {
	unsigned int n;
	struct page *pg[TS_PAGES_MAX];
};

/* A two-step mapping of scattered pages, one link per page. */
struct ts_map {
	struct twostep_iova_state st;
	struct ts_pages p;
	unsigned int linked;
};

/* Coherent buffer the checks use to load and read the device buffer. */
extern u8 *ts_probe;
extern dma_addr_t ts_probe_dma;
extern unsigned int ts_nused;
extern unsigned long ts_dropped;

u32 ts_rand(u32 *s);
u8 ts_pat(u32 seed, size_t idx);
u8 ts_secret(u32 seed, size_t idx);
u64 ts_median(u64 *v, unsigned int n);
void ts_note(dma_addr_t addr, size_t size);
extern unsigned int ts_growth_waits;
bool ts_try_alloc_grow(struct device *dev, struct twostep_iova_state *st,
		       phys_addr_t phys, size_t size);
bool ts_try_alloc(struct ts *t, struct twostep_iova_state *st,
		  phys_addr_t phys, size_t size);
bool ts_api_probe(struct ts *t);
struct device *ts_dev_without_iommu(struct ts *t);
u64 ts_too_large(struct ts *t);
bool ts_in_chunks(struct device *dev, dma_addr_t addr, size_t size);
struct iommu_domain *ts_domain(struct ts *t);
unsigned long ts_gpp(struct ts *t);
unsigned int ts_mapped_pages(struct ts *t, dma_addr_t addr,
			     size_t size);
void ts_pages_put(struct ts_pages *p);
int ts_pages_get(struct ts *t, struct ts_pages *p, unsigned int n);
unsigned int ts_pages_contiguous_pairs(const struct ts_pages *p);
u8 *ts_byte(const struct ts_pages *p, size_t off);
void ts_pages_fill(struct ts_pages *p, u32 seed);
bool ts_pages_match(const struct ts_pages *p, size_t off,
		    const u8 *buf, size_t len);
void ts_pages_copy(const struct ts_pages *p, u8 *out);
long ts_pages_diff(const struct ts_pages *p, const u8 *expect);
int ts_dev_read(struct ts *t, dma_addr_t addr, u32 len, u8 *out);
/*
 * A marker in QEMU's trace (pci_cfg_write of edu's unused config dword
 * 0xf0, value 0x4f000000 | kind << 20 | n), for the host to count the
 * vIOMMU's IOTLB invalidations between two: kinds 1-3 the ODP driver's
 * unmaps (odp.c), 4 and 5 the lazy_reuse case's burst of destroys.
 */
#define TS_MARK_LAZY_BEGIN	4
#define TS_MARK_LAZY_END	5	/* n: destroys */
void ts_mark(struct pci_dev *pdev, unsigned int kind, unsigned long n);
int ts_dev_write(struct ts *t, dma_addr_t addr, const u8 *src, u32 len);
bool ts_nothing_moved(const u8 *buf, u32 len);
int ts_map_setup(struct ts *t, struct ts_map *m, unsigned int n,
		 enum dma_data_direction dir, u32 seed);
int ts_link_pages(struct ts *t, struct twostep_iova_state *st,
		  const struct ts_pages *p, unsigned int *linked);
void ts_map_teardown(struct ts *t, struct ts_map *m,
		     enum dma_data_direction dir);
void ts_stats(struct ts *t, struct twostep_stats *s);
unsigned int ts_used_mapped(struct ts *t);
void ts_pages_fill_block(struct page *block, unsigned int n, u32 seed);
struct task_struct *ts_kthread_on(int (*fn)(void *data), void *data,
				  unsigned int cpu, const char *name);
int ts_kthread_finish(struct completion *done);
/* workloads.c, for the benchmark */
bool ts_passthrough(struct device *dev);
void ts_bench_workloads(struct ts *t, struct page **pages,
			unsigned int npages, struct page *block,
			unsigned int reps);

#endif /* _TWOSTEP_HELPERS_H */

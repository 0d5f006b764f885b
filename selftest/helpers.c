// SPDX-License-Identifier: GPL-2.0
/*
 * twostep self-test: helpers shared by the cases: scattered pages with
 * known patterns, device reads and writes through any address, two-step
 * mappings of page sets, and checks of what the IOMMU translates.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/iommu.h>
#include <linux/kthread.h>
#include <linux/mm.h>
#include <linux/pci.h>
#include <linux/slab.h>
#include <linux/sort.h>
#include <linux/string.h>

#include "helpers.h"

#define TS_USED_MAX	1024

/* Coherent buffer the checks use to load and read the device buffer. */
u8 *ts_probe;
dma_addr_t ts_probe_dma;

/*
 * The IOVA handed out through ts_try_alloc(), as merged intervals, for the
 * final leak check; ts_dropped counts ranges that did not fit.
 */
static struct {
	dma_addr_t addr;
	size_t size;
} ts_used[TS_USED_MAX];
static DEFINE_SPINLOCK(ts_used_lock);
unsigned int ts_nused;
unsigned long ts_dropped;

u32 ts_rand(u32 *s)
{
	u32 x = *s ? *s : 0x2545f491;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	*s = x;
	return x;
}

/* Byte @idx of the pattern named by @seed. */
u8 ts_pat(u32 seed, size_t idx)
{
	u32 x = seed ^ ((u32)idx * 0x9e3779b9u);

	x ^= x >> 16;
	x *= 0x85ebca6bu;
	x ^= x >> 13;
	return x >> 24;
}

static int ts_u64_cmp(const void *a, const void *b)
{
	u64 x = *(const u64 *)a, y = *(const u64 *)b;

	return x < y ? -1 : x > y;
}

/* The median of the @n samples @v (n >= 1), which it sorts. */
u64 ts_median(u64 *v, unsigned int n)
{
	sort(v, n, sizeof(*v), ts_u64_cmp, NULL);
	return v[n / 2];
}

/* Pattern bytes that never equal 0 or TS_SCRUB: secrets a leak would show. */
u8 ts_secret(u32 seed, size_t idx)
{
	return 0x80 | ts_pat(seed, idx);
}

/*
 * Remember [addr, addr + size): merged into a recorded interval it
 * overlaps or touches, else a new one.
 */
void ts_note(dma_addr_t addr, size_t size)
{
	dma_addr_t end = addr + size;
	unsigned long flags;
	unsigned int i;

	spin_lock_irqsave(&ts_used_lock, flags);
	for (i = 0; i < ts_nused; i++) {
		dma_addr_t lo = ts_used[i].addr;
		dma_addr_t hi = lo + ts_used[i].size;

		if (addr <= hi && lo <= end) {
			ts_used[i].addr = min(lo, addr);
			ts_used[i].size = max(hi, end) - ts_used[i].addr;
			break;
		}
	}
	if (i == ts_nused) {
		if (ts_nused < TS_USED_MAX) {
			ts_used[ts_nused].addr = addr;
			ts_used[ts_nused].size = size;
			ts_nused++;
		} else {
			ts_dropped++;
		}
	}
	spin_unlock_irqrestore(&ts_used_lock, flags);
}

/* A device with no IOMMU group: an ancestor of the device under test. */
struct device *ts_dev_without_iommu(struct ts *t)
{
	struct device *d = t->dev->parent;

	while (d && d->iommu_group)
		d = d->parent;
	return d;
}

/* try_alloc calls refused for growth and served after the worker's */
unsigned int ts_growth_waits;

/*
 * try_alloc for @dev, called where we may sleep. On a kernel without
 * CONFIG_PREEMPTION twostep cannot tell that: a call that must reserve is
 * refused and the growth left to a worker, after which a call succeeds
 * (include/twostep.h). Such a refusal, told by the device's deferred
 * count, is waited out, up to 2 s; any other refusal is returned at once.
 */
bool ts_try_alloc_grow(struct device *dev, struct twostep_iova_state *st,
		       phys_addr_t phys, size_t size)
{
	struct twostep_stats s = { };
	unsigned long deferred;
	unsigned int i;
	bool ok;

	if (!IS_ENABLED(CONFIG_PREEMPTION))
		twostep_get_stats(dev, &s);
	deferred = s.deferred;
	ok = twostep_iova_try_alloc(dev, st, phys, size);
	if (!ok && !IS_ENABLED(CONFIG_PREEMPTION) &&
	    !twostep_get_stats(dev, &s) && s.deferred != deferred) {
		for (i = 0; i < 400 && !ok; i++) {
			usleep_range(5000, 6000);
			ok = twostep_iova_try_alloc(dev, st, phys, size);
		}
		if (ok)
			ts_growth_waits++;
	}
	return ok;
}

/* try_alloc (ts_try_alloc_grow()), and remember the range for no_leak. */
bool ts_try_alloc(struct ts *t, struct twostep_iova_state *st,
		  phys_addr_t phys, size_t size)
{
	if (!ts_try_alloc_grow(t->dev, st, phys, size))
		return false;
	ts_note(st->addr, size);
	return true;
}

/* Does the two-step API work for the device under test? */
bool ts_api_probe(struct ts *t)
{
	struct twostep_iova_state st;

	if (!ts_try_alloc(t, &st, 0, PAGE_SIZE))
		return false;
	twostep_iova_free(t->dev, &st);
	return true;
}

/* One granule more than the device (DMA mask) or its domain can address. */
u64 ts_too_large(struct ts *t)
{
	struct iommu_domain *dom = ts_domain(t);
	u64 lim = dma_get_mask(t->dev);

	if (dom && dom->geometry.force_aperture)
		lim = min_t(u64, lim, dom->geometry.aperture_end);
	if (lim >= (1ULL << 47))
		return 1ULL << 48;
	return lim + 1 + PAGE_SIZE;
}

/* Does [addr, addr + size) touch a chunk twostep reserved for @dev? */
bool ts_in_chunks(struct device *dev, dma_addr_t addr, size_t size)
{
	u64 start, len;
	unsigned int i;

	for (i = 0; !twostep_get_chunk(dev, i, &start, &len); i++)
		if (addr <= start + (len - 1) && start <= addr + (size - 1))
			return true;
	return false;
}

struct iommu_domain *ts_domain(struct ts *t)
{
	return iommu_get_domain_for_dev(t->dev);
}

/*
 * IOMMU granules per CPU page: 1, or more where the domain's smallest page
 * (the DMA API's granule) is below PAGE_SIZE, as 16 KiB pages over a
 * 4 KiB granule. The cases count pages; twostep's statistics granules.
 */
unsigned long ts_gpp(struct ts *t)
{
	struct iommu_domain *d = ts_domain(t);
	unsigned long granule = PAGE_SIZE;

	if (d && d->pgsize_bitmap)
		granule = 1UL << __ffs(d->pgsize_bitmap);
	return granule < PAGE_SIZE ? PAGE_SIZE / granule : 1;
}

/* Number of granules of [addr, addr + size) the IOMMU still translates. */
unsigned int ts_mapped_pages(struct ts *t, dma_addr_t addr,
			     size_t size)
{
	struct iommu_domain *dom = ts_domain(t);
	dma_addr_t first = addr & PAGE_MASK;
	u64 i, pages = (addr - first + (u64)size + PAGE_SIZE - 1) >> PAGE_SHIFT;
	unsigned int n = 0;

	if (!dom)
		return 0;
	/* counted, not compared with an end: a range may end at 2^64 */
	for (i = 0; i < pages; i++)
		if (iommu_iova_to_phys(dom, first + i * PAGE_SIZE))
			n++;
	return n;
}

void ts_pages_put(struct ts_pages *p)
{
	while (p->n)
		__free_page(p->pg[--p->n]);
}

/*
 * Allocate @n pages one by one, with a spare page allocated between any two
 * and freed afterwards, then shuffle them: physically scattered pages.
 */
int ts_pages_get(struct ts *t, struct ts_pages *p, unsigned int n)
{
	struct page *spare[TS_PAGES_MAX];
	unsigned int i, j, nspare = 0;
	int ret = 0;

	p->n = 0;
	if (n > TS_PAGES_MAX)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		p->pg[p->n] = alloc_page(GFP_KERNEL);
		if (!p->pg[p->n]) {
			ret = -ENOMEM;
			break;
		}
		p->n++;
		spare[nspare] = alloc_page(GFP_KERNEL);
		if (spare[nspare])
			nspare++;
	}
	while (nspare)
		__free_page(spare[--nspare]);
	if (ret) {
		ts_pages_put(p);
		return ret;
	}
	for (i = n - 1; i > 0; i--) {
		struct page *tmp;

		j = ts_rand(&t->seed) % (i + 1);
		tmp = p->pg[i];
		p->pg[i] = p->pg[j];
		p->pg[j] = tmp;
	}
	return 0;
}

unsigned int ts_pages_contiguous_pairs(const struct ts_pages *p)
{
	unsigned int i, pairs = 0;

	for (i = 0; i + 1 < p->n; i++)
		if (page_to_phys(p->pg[i + 1]) ==
		    page_to_phys(p->pg[i]) + PAGE_SIZE)
			pairs++;
	return pairs;
}

u8 *ts_byte(const struct ts_pages *p, size_t off)
{
	return (u8 *)page_address(p->pg[off / PAGE_SIZE]) + off % PAGE_SIZE;
}

void ts_pages_fill(struct ts_pages *p, u32 seed)
{
	size_t off;

	for (off = 0; off < (size_t)p->n * PAGE_SIZE; off++)
		*ts_byte(p, off) = ts_pat(seed, off);
}

/* Do bytes [off, off + len) of the logical buffer equal @buf? */
bool ts_pages_match(const struct ts_pages *p, size_t off,
		    const u8 *buf, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (*ts_byte(p, off + i) != buf[i])
			return false;
	return true;
}

/* Copy the whole logical buffer out (for a shadow model of the pages). */
void ts_pages_copy(const struct ts_pages *p, u8 *out)
{
	unsigned int i;

	for (i = 0; i < p->n; i++)
		memcpy(out + i * PAGE_SIZE, page_address(p->pg[i]), PAGE_SIZE);
}

/* Offset of the first byte differing from @expect, or -1. */
long ts_pages_diff(const struct ts_pages *p, const u8 *expect)
{
	size_t off;

	for (off = 0; off < (size_t)p->n * PAGE_SIZE; off++)
		if (*ts_byte(p, off) != expect[off])
			return off;
	return -1;
}

/* The device reads [addr, addr + len) and hands the bytes back in @out. */
int ts_dev_read(struct ts *t, dma_addr_t addr, u32 len, u8 *out)
{
	int ret;

	memset(ts_probe, TS_SCRUB, len);
	ret = edu_dma(t->edu, ts_probe_dma, 0, len, false);
	if (!ret)
		ret = edu_dma(t->edu, addr, 0, len, false);
	if (ret)
		return ret;
	memset(ts_probe, 0x22, len);
	ret = edu_dma(t->edu, ts_probe_dma, 0, len, true);
	if (!ret)
		memcpy(out, ts_probe, len);
	return ret;
}

/* The device writes @src to [addr, addr + len). */
int ts_dev_write(struct ts *t, dma_addr_t addr, const u8 *src, u32 len)
{
	int ret;

	memcpy(ts_probe, src, len);
	ret = edu_dma(t->edu, ts_probe_dma, 0, len, false);
	if (!ret)
		ret = edu_dma(t->edu, addr, 0, len, true);
	return ret;
}

/* True when every byte is still the scrub filler or 0: nothing moved. */
bool ts_nothing_moved(const u8 *buf, u32 len)
{
	u32 i;

	for (i = 0; i < len; i++)
		if (buf[i] != TS_SCRUB && buf[i])
			return false;
	return true;
}

int ts_map_setup(struct ts *t, struct ts_map *m, unsigned int n,
		 enum dma_data_direction dir, u32 seed)
{
	unsigned int i;
	int ret;

	memset(m, 0, sizeof(*m));
	ret = ts_pages_get(t, &m->p, n);
	if (!TS_EXPECT(t, !ret, "page allocation: %d", ret))
		return ret;
	ts_pages_fill(&m->p, seed);
	if (!TS_EXPECT(t, ts_try_alloc(t, &m->st, 0, n * PAGE_SIZE),
		       "try_alloc of %u pages", n)) {
		ts_pages_put(&m->p);
		return -ENOMEM;
	}
	for (i = 0; i < n; i++) {
		ret = twostep_iova_link(t->dev, &m->st,
					page_to_phys(m->p.pg[i]),
					i * PAGE_SIZE, PAGE_SIZE, dir, 0);
		if (!TS_EXPECT(t, !ret, "link page %u: %d", i, ret))
			return ret;
		m->linked++;
	}
	ret = twostep_iova_sync(t->dev, &m->st, 0, n * PAGE_SIZE);
	TS_EXPECT(t, !ret, "sync: %d", ret);
	return ret;
}

/*
 * Link page i of @p at offset i * PAGE_SIZE of @st, in order, stopping at
 * the first failure, then sync them all. Makes no assertion, so that the
 * caller may run it with IRQs off. Returns the first error; @linked gets
 * the pages linked.
 */
int ts_link_pages(struct ts *t, struct twostep_iova_state *st,
		  const struct ts_pages *p, unsigned int *linked)
{
	unsigned int i;
	int ret = 0;

	for (i = 0; i < p->n && !ret; i++)
		ret = twostep_iova_link(t->dev, st, page_to_phys(p->pg[i]),
					i * PAGE_SIZE, PAGE_SIZE,
					DMA_BIDIRECTIONAL, 0);
	*linked = ret ? i - 1 : i;
	return ret ?: twostep_iova_sync(t->dev, st, 0, p->n * PAGE_SIZE);
}

void ts_map_teardown(struct ts *t, struct ts_map *m,
		     enum dma_data_direction dir)
{
	if (twostep_use_iova(&m->st))
		twostep_iova_destroy(t->dev, &m->st, m->linked * PAGE_SIZE,
				     dir, 0);
	ts_pages_put(&m->p);
}

void ts_stats(struct ts *t, struct twostep_stats *s)
{
	memset(s, 0, sizeof(*s));
	TS_EXPECT(t, !twostep_get_stats(t->dev, s), "stats");
}

/* Pages still translated anywhere a range was handed out during the run. */
unsigned int ts_used_mapped(struct ts *t)
{
	unsigned int i, mapped = 0;

	for (i = 0; i < ts_nused; i++)
		mapped += ts_mapped_pages(t, ts_used[i].addr, ts_used[i].size);
	return mapped;
}

/* Fill @n physically contiguous pages starting at @block with a pattern. */
void ts_pages_fill_block(struct page *block, unsigned int n, u32 seed)
{
	size_t off;

	for (off = 0; off < (size_t)n * PAGE_SIZE; off++)
		((u8 *)page_address(block))[off] = ts_pat(seed, off);
}

/* A test thread bound to @cpu and running, or NULL. */
struct task_struct *ts_kthread_on(int (*fn)(void *data), void *data,
				  unsigned int cpu, const char *name)
{
	struct task_struct *task = kthread_create(fn, data, "%s/%u", name,
						  cpu);

	if (IS_ERR(task))
		return NULL;
	kthread_bind(task, cpu);
	wake_up_process(task);
	return task;
}

/* A test thread's end: say it is done, then wait to be stopped. */
int ts_kthread_finish(struct completion *done)
{
	complete(done);
	while (!kthread_should_stop())
		schedule_timeout_interruptible(1);
	return 0;
}

/* an unused config dword of edu (0x40 is its MSI capability) */
#define TS_MARK_REG	0xf0
#define TS_MARK_MAGIC	0x4f000000u

void ts_mark(struct pci_dev *pdev, unsigned int kind, unsigned long n)
{
	pci_write_config_dword(pdev, TS_MARK_REG, TS_MARK_MAGIC | kind << 20 |
			       min_t(unsigned long, n, 0xfffff));
}

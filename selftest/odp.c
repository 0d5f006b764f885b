// SPDX-License-Identifier: GPL-2.0
/*
 * twostep self-test: on-demand paging (ODP) of user memory through the
 * twostep_hmm_dma_* helpers, the way an RDMA driver serves ODP memory
 * regions.
 *
 * /dev/twostep_odp lets a process register ranges of its address space
 * (one mmu_interval_notifier and one twostep_hmm_dma_map per region) and
 * have the edu device read or write at an offset of a region. The driver
 * faults the pages in with hmm_range_fault() (asking for write access when
 * the device writes), maps them, syncs once and runs the DMA under the
 * file's mutex, after mmu_interval_read_retry() said the pages are still
 * current; the invalidate callback takes the same mutex and unmaps the
 * invalidated entries with one IOTLB flush. Around each unmap it writes a
 * marker to an unused config dword of edu, so that the host can count the
 * IOTLB invalidations of each unmap in QEMU's trace.
 *
 * Also the KTAP case hmm_refault: hmm_range_fault() between map and
 * unmap must not make the helpers lose track of what they mapped.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dma-mapping.h>
#include <linux/fs.h>
#include <linux/hmm.h>
#include <linux/jiffies.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/mman.h>
#include <linux/mmu_notifier.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "helpers.h"
#include "odp.h"
#include "odp-uapi.h"

/* kinds of ts_mark() */
#define ODP_MARK_RANGE		1	/* an invalidation unmaps a range */
#define ODP_MARK_PER_ENTRY	2	/* ... entry by entry */
#define ODP_MARK_END		3	/* done; low 20 bits: entries */
#define ODP_FAULT_TIMEOUT_MS	10000

/**
 * struct odp_file - one open file: the regions of one address space
 * @ioctl_lock: one ioctl at a time
 * @lock: the regions' maps; held from mmu_interval_read_retry() until the
 *        DMA is done, and by the invalidate callback
 * @mm: the address space of the process that opened the file
 * @regions: registered regions by id
 * @unmap_mode: TS_ODP_UNMAP_RANGE or TS_ODP_UNMAP_PER_ENTRY
 */
struct odp_file {
	struct mutex ioctl_lock;	/* one ioctl at a time */
	struct mutex lock;		/* maps, retry check, DMA */
	struct mm_struct *mm;
	struct odp_region *regions[TS_ODP_MAX_REGIONS];
	u32 unmap_mode;
};

/**
 * struct odp_region - a registered range of user memory
 * @notifier: its interval notifier
 * @f: the file it belongs to
 * @start: first user address
 * @len: bytes
 * @map: its DMA mapping, one entry per page
 */
struct odp_region {
	struct mmu_interval_notifier notifier;
	struct odp_file *f;
	unsigned long start;
	unsigned long len;
	struct twostep_hmm_dma_map map;
};

static struct edu_dev *odp_edu;
static struct device *odp_dev;
/* bounce buffer between user space and edu's buffer, under odp_dev_lock */
static u8 *odp_buf;
static dma_addr_t odp_buf_dma;
/* edu's buffer from loading it to reading it back */
static DEFINE_MUTEX(odp_dev_lock);

static struct {
	atomic64_t faults, fault_retries, pages_mapped, syncs;
	atomic64_t invalidations, pages_unmapped, dmas;
	atomic64_t iova_regions, list_regions;
} odp_stats;

static void odp_mark(unsigned int kind, unsigned long n)
{
	ts_mark(odp_edu->pdev, kind, n);
}

/*
 * Fault [start, start + npages pages) in for @mni into @pfns and take
 * @lock with the result still current (mmu_interval_read_retry() false).
 * Returns 0 with @lock held, or hmm_range_fault()'s error.
 */
static int odp_fault_lock(struct mmu_interval_notifier *mni,
			  struct mm_struct *mm, struct mutex *lock,
			  unsigned long start, unsigned long npages,
			  unsigned long *pfns, bool write)
{
	unsigned long timeout = jiffies +
				msecs_to_jiffies(ODP_FAULT_TIMEOUT_MS);
	struct hmm_range range = {
		.notifier = mni,
		.start = start,
		.end = start + (npages << PAGE_SHIFT),
		.hmm_pfns = pfns,
		.default_flags = HMM_PFN_REQ_FAULT |
				 (write ? HMM_PFN_REQ_WRITE : 0),
	};
	int ret;

	if (!mmget_not_zero(mm))
		return -ESRCH;
	for (;;) {
		if (time_after(jiffies, timeout)) {
			ret = -EBUSY;
			break;
		}
		range.notifier_seq = mmu_interval_read_begin(mni);
		mmap_read_lock(mm);
		ret = hmm_range_fault(&range);
		mmap_read_unlock(mm);
		atomic64_inc(&odp_stats.faults);
		if (ret == -EBUSY) {
			atomic64_inc(&odp_stats.fault_retries);
			continue;
		}
		if (ret)
			break;
		mutex_lock(lock);
		if (!mmu_interval_read_retry(mni, range.notifier_seq))
			break;
		mutex_unlock(lock);
		atomic64_inc(&odp_stats.fault_retries);
	}
	mmput(mm);
	return ret;
}

static bool odp_invalidate(struct mmu_interval_notifier *mni,
			   const struct mmu_notifier_range *range,
			   unsigned long cur_seq)
{
	struct odp_region *r = container_of(mni, struct odp_region, notifier);
	struct odp_file *f = r->f;
	unsigned long start = max(range->start, r->start);
	unsigned long end = min(range->end, r->start + r->len);
	size_t first, count, n = 0, i;

	if (mmu_notifier_range_blockable(range))
		mutex_lock(&f->lock);
	else if (!mutex_trylock(&f->lock))
		return false;
	mmu_interval_set_seq(mni, cur_seq);
	first = (start - r->start) >> PAGE_SHIFT;
	count = ((end - r->start + PAGE_SIZE - 1) >> PAGE_SHIFT) - first;
	if (f->unmap_mode == TS_ODP_UNMAP_PER_ENTRY) {
		/* upstream's way: one unmap, one flush, per entry */
		odp_mark(ODP_MARK_PER_ENTRY, 0);
		for (i = first; i < first + count; i++)
			n += twostep_hmm_dma_unmap_pfn(odp_dev, &r->map, i);
	} else {
		odp_mark(ODP_MARK_RANGE, 0);
		n = twostep_hmm_dma_unmap_range(odp_dev, &r->map, first,
						count);
	}
	odp_mark(ODP_MARK_END, n);
	atomic64_inc(&odp_stats.invalidations);
	atomic64_add(n, &odp_stats.pages_unmapped);
	mutex_unlock(&f->lock);
	return true;
}

static const struct mmu_interval_notifier_ops odp_mni_ops = {
	.invalidate = odp_invalidate,
};

/*
 * Fault in, map and sync the pages of [off, off + len) of @r, then have
 * edu move the bytes between them and its buffer (offset 0): into the
 * region when @write. One transfer through the contiguous IOVA range, or
 * one per page through dma_list.
 */
static int odp_dma(struct odp_file *f, struct odp_region *r, u64 off,
		   u32 len, bool write)
{
	unsigned long first = off >> PAGE_SHIFT;
	unsigned long last = (off + len - 1) >> PAGE_SHIFT, i;
	u32 done, n;
	dma_addr_t addr;
	int ret;

	ret = odp_fault_lock(&r->notifier, f->mm, &f->lock,
			     r->start + (first << PAGE_SHIFT),
			     last - first + 1, r->map.pfn_list + first, write);
	if (ret)
		return ret;
	for (i = first; i <= last; i++) {
		bool was = twostep_hmm_dma_mapped(&r->map, i);

		addr = twostep_hmm_dma_link_pfn(odp_dev, &r->map, i);
		if (addr == DMA_MAPPING_ERROR) {
			ret = -EIO;
			goto out_unlock;
		}
		if (!was)
			atomic64_inc(&odp_stats.pages_mapped);
	}
	ret = twostep_hmm_dma_sync(odp_dev, &r->map, first, last - first + 1);
	if (ret)
		goto out_unlock;
	atomic64_inc(&odp_stats.syncs);

	if (twostep_use_iova(&r->map.state)) {
		atomic64_inc(&odp_stats.dmas);
		ret = edu_dma(odp_edu, r->map.state.addr + off, 0, len, write);
		goto out_unlock;
	}
	for (done = 0; done < len; done += n) {
		i = (off + done) >> PAGE_SHIFT;
		n = min_t(u32, len - done, PAGE_SIZE - ((off + done) & ~PAGE_MASK));
		atomic64_inc(&odp_stats.dmas);
		ret = edu_dma(odp_edu, r->map.dma_list[i] +
			      ((off + done) & ~PAGE_MASK), done, n, write);
		if (ret)
			break;
	}
out_unlock:
	mutex_unlock(&f->lock);
	return ret;
}

/* One piece of at most EDU_MAX_XFER bytes, under odp_dev_lock. */
static int odp_xfer_piece(struct odp_file *f, struct odp_region *r,
			  u64 off, u32 len, u8 __user *ubuf, bool write)
{
	int ret;

	if (write) {
		if (copy_from_user(odp_buf, ubuf, len))
			return -EFAULT;
		atomic64_inc(&odp_stats.dmas);
		ret = edu_dma(odp_edu, odp_buf_dma, 0, len, false);
		return ret ? ret : odp_dma(f, r, off, len, true);
	}
	/* scrub edu's buffer: a read that does not happen shows */
	memset(odp_buf, TS_SCRUB, len);
	atomic64_inc(&odp_stats.dmas);
	ret = edu_dma(odp_edu, odp_buf_dma, 0, len, false);
	if (!ret)
		ret = odp_dma(f, r, off, len, false);
	if (ret)
		return ret;
	atomic64_inc(&odp_stats.dmas);
	ret = edu_dma(odp_edu, odp_buf_dma, 0, len, true);
	if (ret)
		return ret;
	return copy_to_user(ubuf, odp_buf, len) ? -EFAULT : 0;
}

static int odp_xfer(struct odp_file *f, const struct ts_odp_xfer *x)
{
	bool write = x->flags & TS_ODP_XFER_WRITE;
	u8 __user *ubuf = u64_to_user_ptr(x->buf);
	struct odp_region *r;
	u64 end, done;
	u32 n;
	int ret = 0;

	if (x->id >= TS_ODP_MAX_REGIONS || !f->regions[x->id] ||
	    (x->flags & ~TS_ODP_XFER_WRITE) || !x->len ||
	    x->len > TS_ODP_MAX_XFER)
		return -EINVAL;
	r = f->regions[x->id];
	if (check_add_overflow(x->offset, x->len, &end) || end > r->len)
		return -ERANGE;
	mutex_lock(&odp_dev_lock);
	for (done = 0; done < x->len && !ret; done += n) {
		n = min_t(u64, x->len - done, EDU_MAX_XFER);
		ret = odp_xfer_piece(f, r, x->offset + done, n, ubuf + done,
				     write);
	}
	mutex_unlock(&odp_dev_lock);
	return ret;
}

static void odp_region_free(struct odp_file *f, struct odp_region *r)
{
	mmu_interval_notifier_remove(&r->notifier);
	mutex_lock(&f->lock);
	twostep_hmm_dma_unmap_range(odp_dev, &r->map, 0, r->map.__nr);
	mutex_unlock(&f->lock);
	twostep_hmm_dma_map_free(odp_dev, &r->map);
	kfree(r);
}

static int odp_register(struct odp_file *f, struct ts_odp_reg *reg)
{
	struct odp_region *r;
	unsigned long end;
	unsigned int id;
	int ret;

	if (!reg->len || reg->len > TS_ODP_MAX_REGION ||
	    !PAGE_ALIGNED(reg->addr) || !PAGE_ALIGNED(reg->len) ||
	    check_add_overflow((unsigned long)reg->addr,
			       (unsigned long)reg->len, &end) ||
	    end > TASK_SIZE)
		return -EINVAL;
	for (id = 0; id < TS_ODP_MAX_REGIONS && f->regions[id]; id++)
		;
	if (id == TS_ODP_MAX_REGIONS)
		return -ENOSPC;
	r = kzalloc(sizeof(*r), GFP_KERNEL);
	if (!r)
		return -ENOMEM;
	r->f = f;
	r->start = reg->addr;
	r->len = reg->len;
	ret = twostep_hmm_dma_map_alloc(odp_dev, &r->map,
					reg->len >> PAGE_SHIFT, PAGE_SIZE);
	if (ret)
		goto err_free_region;
	ret = mmu_interval_notifier_insert(&r->notifier, f->mm, r->start,
					   r->len, &odp_mni_ops);
	if (ret)
		goto err_free_map;
	if (twostep_use_iova(&r->map.state))
		atomic64_inc(&odp_stats.iova_regions);
	else
		atomic64_inc(&odp_stats.list_regions);
	f->regions[id] = r;
	reg->id = id;
	return 0;

err_free_map:
	twostep_hmm_dma_map_free(odp_dev, &r->map);
err_free_region:
	kfree(r);
	return ret;
}

static long odp_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct odp_file *f = file->private_data;
	void __user *uarg = (void __user *)arg;
	struct ts_odp_stats st;
	struct ts_odp_xfer x;
	struct ts_odp_reg reg;
	u32 id;
	long ret;

	/* a region belongs to the address space that opened the file */
	if (current->mm != f->mm)
		return -EINVAL;
	mutex_lock(&f->ioctl_lock);
	switch (cmd) {
	case TS_ODP_REGISTER:
		ret = -EFAULT;
		if (copy_from_user(&reg, uarg, sizeof(reg)))
			break;
		ret = odp_register(f, &reg);
		if (!ret && copy_to_user(uarg, &reg, sizeof(reg))) {
			odp_region_free(f, f->regions[reg.id]);
			f->regions[reg.id] = NULL;
			ret = -EFAULT;
		}
		break;
	case TS_ODP_UNREGISTER:
		ret = -EFAULT;
		if (get_user(id, (u32 __user *)uarg))
			break;
		ret = -EINVAL;
		if (id >= TS_ODP_MAX_REGIONS || !f->regions[id])
			break;
		odp_region_free(f, f->regions[id]);
		f->regions[id] = NULL;
		ret = 0;
		break;
	case TS_ODP_XFER:
		ret = -EFAULT;
		if (copy_from_user(&x, uarg, sizeof(x)))
			break;
		ret = odp_xfer(f, &x);
		break;
	case TS_ODP_STATS:
		memset(&st, 0, sizeof(st));
		st.faults = atomic64_read(&odp_stats.faults);
		st.fault_retries = atomic64_read(&odp_stats.fault_retries);
		st.pages_mapped = atomic64_read(&odp_stats.pages_mapped);
		st.syncs = atomic64_read(&odp_stats.syncs);
		st.invalidations = atomic64_read(&odp_stats.invalidations);
		st.pages_unmapped = atomic64_read(&odp_stats.pages_unmapped);
		st.dmas = atomic64_read(&odp_stats.dmas);
		st.iova_regions = atomic64_read(&odp_stats.iova_regions);
		st.list_regions = atomic64_read(&odp_stats.list_regions);
		st.late_irqs = odp_edu->late_irqs;
		ret = copy_to_user(uarg, &st, sizeof(st)) ? -EFAULT : 0;
		break;
	case TS_ODP_UNMAP_MODE:
		ret = -EFAULT;
		if (get_user(id, (u32 __user *)uarg))
			break;
		ret = -EINVAL;
		if (id > TS_ODP_UNMAP_PER_ENTRY)
			break;
		mutex_lock(&f->lock);
		f->unmap_mode = id;
		mutex_unlock(&f->lock);
		ret = 0;
		break;
	default:
		ret = -ENOTTY;
	}
	mutex_unlock(&f->ioctl_lock);
	return ret;
}

static int odp_open(struct inode *inode, struct file *file)
{
	struct odp_file *f;

	if (!current->mm)
		return -EINVAL;
	f = kzalloc(sizeof(*f), GFP_KERNEL);
	if (!f)
		return -ENOMEM;
	mutex_init(&f->ioctl_lock);
	mutex_init(&f->lock);
	f->mm = current->mm;
	mmgrab(f->mm);
	file->private_data = f;
	return 0;
}

static int odp_release(struct inode *inode, struct file *file)
{
	struct odp_file *f = file->private_data;
	unsigned int id;

	for (id = 0; id < TS_ODP_MAX_REGIONS; id++)
		if (f->regions[id])
			odp_region_free(f, f->regions[id]);
	mmdrop(f->mm);
	kfree(f);
	return 0;
}

static const struct file_operations odp_fops = {
	.owner = THIS_MODULE,
	.open = odp_open,
	.release = odp_release,
	.unlocked_ioctl = odp_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
};

static struct miscdevice odp_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "twostep_odp",
	.fops = &odp_fops,
};

/* Offer /dev/twostep_odp on @edu until ts_odp_exit(). */
int ts_odp_init(struct edu_dev *edu)
{
	int ret;

	odp_edu = edu;
	odp_dev = &edu->pdev->dev;
	odp_buf = dma_alloc_coherent(odp_dev, EDU_BUF_SIZE, &odp_buf_dma,
				     GFP_KERNEL);
	if (!odp_buf)
		return -ENOMEM;
	ret = misc_register(&odp_misc);
	if (ret)
		goto err_free_buf;
	return 0;

err_free_buf:
	dma_free_coherent(odp_dev, EDU_BUF_SIZE, odp_buf, odp_buf_dma);
	odp_buf = NULL;
	return ret;
}

void ts_odp_exit(void)
{
	if (!odp_buf)
		return;
	misc_deregister(&odp_misc);
	dma_free_coherent(odp_dev, EDU_BUF_SIZE, odp_buf, odp_buf_dma);
	odp_buf = NULL;
}

/* The KTAP case: a region of insmod's own address space. */
struct odp_case {
	struct mmu_interval_notifier mni;
	struct mutex lock;	/* the map, the retry check */
	struct twostep_hmm_dma_map map;
	struct device *dev;
	unsigned int invalidated;
};

static bool odp_case_invalidate(struct mmu_interval_notifier *mni,
				const struct mmu_notifier_range *range,
				unsigned long cur_seq)
{
	struct odp_case *c = container_of(mni, struct odp_case, mni);

	if (mmu_notifier_range_blockable(range))
		mutex_lock(&c->lock);
	else if (!mutex_trylock(&c->lock))
		return false;
	mmu_interval_set_seq(mni, cur_seq);
	if (c->map.__mapped)
		c->invalidated += twostep_hmm_dma_unmap_range(c->dev, &c->map,
							      0, c->map.__nr);
	mutex_unlock(&c->lock);
	return true;
}

static const struct mmu_interval_notifier_ops odp_case_ops = {
	.invalidate = odp_case_invalidate,
};

#define ODP_CASE_PAGES	8
#define ODP_CASE_BYTES	64	/* written by the device at each page */
/* a flag bit hmm_range_fault() does not set, where upstream has its own */
#define ODP_STICKY	BIT(BITS_PER_LONG - 8)

/* The device writes a pattern at the start of each page, CPU checks. */
static void odp_case_write_check(struct ts *t, struct odp_case *c,
				 const dma_addr_t *addr, unsigned long uaddr,
				 u32 seed)
{
	u8 want[ODP_CASE_BYTES], got[ODP_CASE_BYTES];
	unsigned int i, j;

	for (i = 0; i < ODP_CASE_PAGES; i++) {
		for (j = 0; j < ODP_CASE_BYTES; j++)
			want[j] = ts_pat(seed + i, j);
		if (!TS_EXPECT(t, !ts_dev_write(t, addr[i], want,
						ODP_CASE_BYTES),
			       "page %u", i))
			return;
		if (!TS_EXPECT(t, !copy_from_user(got, (void __user *)
						  (uaddr + i * PAGE_SIZE),
						  ODP_CASE_BYTES),
			       "page %u", i))
			return;
		TS_EXPECT(t, !memcmp(got, want, ODP_CASE_BYTES),
			  "page %u: the device's bytes are not in the process's page",
			  i);
	}
}

/* twostep's figures of the device, where it has any */
static void odp_case_stats(struct ts *t, struct twostep_stats *s)
{
	memset(s, 0, sizeof(*s));
	if (t->api)
		ts_stats(t, s);
}

static int case_hmm_refault(struct ts *t)
{
	const size_t len = ODP_CASE_PAGES * PAGE_SIZE;
	dma_addr_t addr[ODP_CASE_PAGES], again;
	struct twostep_stats s0, s1, s2;
	unsigned long uaddr, before;
	unsigned int i, kept = 0;
	struct odp_case *c;
	int ret;

	if (!current->mm) {
		snprintf(t->skip, sizeof(t->skip), "no user address space");
		return TS_SKIP;
	}
	c = kzalloc(sizeof(*c), GFP_KERNEL);
	if (!TS_EXPECT(t, c, "no memory"))
		return 0;
	mutex_init(&c->lock);
	c->dev = t->dev;
	uaddr = vm_mmap(NULL, 0, len, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, 0);
	if (!TS_EXPECT(t, !IS_ERR_VALUE(uaddr), "vm_mmap: %ld", (long)uaddr))
		goto out_free;
	ret = mmu_interval_notifier_insert(&c->mni, current->mm, uaddr, len,
					   &odp_case_ops);
	if (!TS_EXPECT(t, !ret, "notifier insert: %d", ret))
		goto out_unmap;
	odp_case_stats(t, &s0);
	ret = twostep_hmm_dma_map_alloc(t->dev, &c->map, ODP_CASE_PAGES,
					PAGE_SIZE);
	if (!TS_EXPECT(t, !ret, "map_alloc: %d", ret))
		goto out_remove;
	TS_EXPECT(t, twostep_use_iova(&c->map.state) == t->api,
		  "one IOVA range exactly when the API is available");
	TS_EXPECT(t, !c->map.dma_list == t->api,
		  "a dma_list exactly when the API is not available");
	if (twostep_use_iova(&c->map.state))
		ts_note(c->map.state.addr, len);

	/* fault the never-touched pages in, writable, and map them */
	ret = odp_fault_lock(&c->mni, current->mm, &c->lock, uaddr,
			     ODP_CASE_PAGES, c->map.pfn_list, true);
	if (!TS_EXPECT(t, !ret, "hmm_range_fault: %d", ret))
		goto out_free_map;
	for (i = 0; i < ODP_CASE_PAGES; i++) {
		addr[i] = twostep_hmm_dma_map_pfn(t->dev, &c->map, i);
		TS_EXPECT(t, addr[i] != DMA_MAPPING_ERROR, "entry %u", i);
		/* where upstream keeps its sticky mapped flag */
		c->map.pfn_list[i] |= ODP_STICKY;
	}
	mutex_unlock(&c->lock);
	if (t->failed)
		goto out_free_map;
	odp_case_stats(t, &s1);
	if (t->api)
		TS_EXPECT(t, s1.linked_granules == s0.linked_granules +
			  ODP_CASE_PAGES * ts_gpp(t), "linked %lu -> %lu",
			  s0.linked_granules, s1.linked_granules);
	odp_case_write_check(t, c, addr, uaddr, t->seed);

	/* fault again between map and unmap: the kernel rewrites pfn_list */
	before = c->invalidated;
	ret = odp_fault_lock(&c->mni, current->mm, &c->lock, uaddr,
			     ODP_CASE_PAGES, c->map.pfn_list, true);
	if (!TS_EXPECT(t, !ret, "second hmm_range_fault: %d", ret))
		goto out_free_map;
	for (i = 0; i < ODP_CASE_PAGES; i++)
		kept += !!(c->map.pfn_list[i] & ODP_STICKY);
	ts_diag("hmm_range_fault kept a flag bit of its caller in %u of %u entries",
		kept, ODP_CASE_PAGES);
	TS_EXPECT(t, c->invalidated == before,
		  "nothing invalidated the pages in between");
	for (i = 0; i < ODP_CASE_PAGES; i++) {
		TS_EXPECT(t, twostep_hmm_dma_mapped(&c->map, i),
			  "entry %u no longer counts as mapped", i);
		again = twostep_hmm_dma_map_pfn(t->dev, &c->map, i);
		TS_EXPECT(t, again == addr[i],
			  "entry %u mapped again at %pad, was %pad", i, &again,
			  &addr[i]);
	}
	mutex_unlock(&c->lock);
	odp_case_stats(t, &s2);
	if (t->api) {
		TS_EXPECT(t, s2.linked_granules == s1.linked_granules,
			  "linked granules %lu -> %lu: mapped twice",
			  s1.linked_granules, s2.linked_granules);
		TS_EXPECT(t, s2.misuse == s1.misuse,
			  "refused calls %lu -> %lu", s1.misuse, s2.misuse);
	}
	odp_case_write_check(t, c, addr, uaddr, t->seed + 100);

	/* unmap finds all of it: a range with holes, then the rest */
	mutex_lock(&c->lock);
	TS_EXPECT(t, twostep_hmm_dma_unmap_pfn(t->dev, &c->map, 2),
		  "entry 2 not found mapped");
	TS_EXPECT(t, !twostep_hmm_dma_unmap_pfn(t->dev, &c->map, 2),
		  "entry 2 unmapped twice");
	TS_EXPECT(t, twostep_hmm_dma_unmap_pfn(t->dev, &c->map, 5),
		  "entry 5 not found mapped");
	i = twostep_hmm_dma_unmap_range(t->dev, &c->map, 0, ODP_CASE_PAGES);
	TS_EXPECT(t, i == ODP_CASE_PAGES - 2, "range unmap found %u of %u",
		  i, ODP_CASE_PAGES - 2);
	TS_EXPECT(t, !twostep_hmm_dma_unmap_range(t->dev, &c->map, 0,
						  ODP_CASE_PAGES),
		  "second range unmap found entries");
	if (t->api)
		TS_EXPECT(t, !ts_mapped_pages(t, c->map.state.addr, len),
			  "pages still translate after the unmap");
	/* map one again and free with it mapped: cleaned up, counted */
	mutex_unlock(&c->lock);
	ret = odp_fault_lock(&c->mni, current->mm, &c->lock, uaddr,
			     ODP_CASE_PAGES, c->map.pfn_list, false);
	if (!TS_EXPECT(t, !ret, "third hmm_range_fault: %d", ret))
		goto out_free_map;
	odp_case_stats(t, &s1);
	TS_EXPECT(t, twostep_hmm_dma_map_pfn(t->dev, &c->map, 1) !=
		  DMA_MAPPING_ERROR, "entry 1");
	TS_EXPECT(t, twostep_hmm_dma_map_pfn(t->dev, &c->map,
					     ODP_CASE_PAGES) ==
		  DMA_MAPPING_ERROR, "entry past the end mapped");
	mutex_unlock(&c->lock);

out_free_map:
	mutex_lock(&c->lock);
	twostep_hmm_dma_map_free(t->dev, &c->map);
	mutex_unlock(&c->lock);
	odp_case_stats(t, &s2);
	if (t->api && !t->failed) {
		TS_EXPECT(t, s2.linked_granules == s0.linked_granules &&
			  s2.live_allocs == s0.live_allocs,
			  "left behind: linked %lu -> %lu, ranges %lu -> %lu",
			  s0.linked_granules, s2.linked_granules,
			  s0.live_allocs, s2.live_allocs);
		TS_EXPECT(t, s2.misuse == s1.misuse + 2,
			  "free with an entry mapped, and a bad index: %lu refusals counted, want %lu",
			  s2.misuse - s0.misuse, s1.misuse + 2 - s0.misuse);
	}
out_remove:
	mmu_interval_notifier_remove(&c->mni);
out_unmap:
	vm_munmap(uaddr, len);
out_free:
	kfree(c);
	return 0;
}

const struct ts_case ts_odp_cases[] = {
	{ "hmm_refault", case_hmm_refault, false },
};

const unsigned int ts_odp_ncases = ARRAY_SIZE(ts_odp_cases);

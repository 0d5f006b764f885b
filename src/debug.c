// SPDX-License-Identifier: GPL-2.0
/*
 * twostep: the checker of the two-step API, on while the module parameter
 * debug is 1 (set at load or at runtime). Upstream's CONFIG_DMA_API_DEBUG
 * does not look at dma_iova_*; twostep sees every call, so it records, per
 * range, the call site of its try_alloc and of its links, and reports, with
 * the caller's name: stale and foreign states, unlink or destroy of nothing
 * linked, destroy of links never synced, direction mismatches, and ranges
 * still live when the device's context goes (unbind, failed probe,
 * removal, detach, unload). Each finding is a rate-limited line in the
 * kernel log and a row of /sys/kernel/debug/twostep/checker.
 *
 * Memory is bounded and nothing here sleeps or fails a call: a record per
 * live range (GFP_NOWAIT, at most TWOSTEP_DBG_MAX_RANGES of them; a range
 * without one is "not tracked"), freed with the range; a fixed table of
 * findings and a fixed ring of freed states, under one spinlock taken with
 * IRQs off. Calls links.c; called by ctx.c, iova.c and module.c.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/debugfs.h>
#include <linux/device.h>
#include <linux/log2.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/ratelimit.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/sysfs.h>
#include <linux/uaccess.h>

#include "ctx.h"
#include "debug.h"
#include "links.h"

DEFINE_STATIC_KEY_FALSE(twostep_debug_on);

#define TWOSTEP_DBG_SITES	4	/* link call sites kept per range */
#define TWOSTEP_DBG_MAX_RANGES	65536	/* records alive at once */
#define TWOSTEP_DBG_ROWS	128	/* rows of the findings table */
#define TWOSTEP_DBG_FREED	256	/* freed states remembered */
#define TWOSTEP_DBG_SITE_LEN	96
#define TWOSTEP_DBG_DEV_LEN	32

/**
 * struct twostep_dbg_range - what the checker knows of one live range
 * @lock: protects the rest; links of one range may run on many CPUs
 * @alloc_ip: call site of its try_alloc
 * @link_ip: distinct call sites of its successful links, the first ones
 * @nsites: entries in @link_ip
 * @links: successful links
 * @unsynced: successful links since the last sync
 * @failed: failed links since the last sync
 * @failed_all: failed links
 * @dirs: BIT(dir) of every direction its successful links used
 */
struct twostep_dbg_range {
	spinlock_t lock;		/* the fields below */
	unsigned long alloc_ip;
	unsigned long link_ip[TWOSTEP_DBG_SITES];
	unsigned int nsites;
	unsigned long links;
	unsigned long unsynced;
	unsigned long failed;
	unsigned long failed_all;
	unsigned int dirs;
};

/* One row of the findings table: a kind, a device and a call site. */
struct twostep_dbg_row {
	enum twostep_finding kind;
	unsigned long ip;
	unsigned long alloc_ip;
	unsigned long count;
	u64 seq;
	char dev[TWOSTEP_DBG_DEV_LEN];
	char site[TWOSTEP_DBG_SITE_LEN];
	char alloc_site[TWOSTEP_DBG_SITE_LEN];
};

/* A freed range, to tell a stale or foreign state from a forged one. */
struct twostep_dbg_freed {
	const struct device *dev;	/* compared, never dereferenced */
	dma_addr_t addr;
	u64 size;
	unsigned long alloc_ip;
};

static const char * const twostep_dbg_names[TWOSTEP_FINDING_KINDS] = {
	[TWOSTEP_FINDING_STALE_STATE] = "stale_state",
	[TWOSTEP_FINDING_FOREIGN_STATE] = "foreign_state",
	[TWOSTEP_FINDING_NOT_LINKED] = "not_linked",
	[TWOSTEP_FINDING_UNSYNCED_DESTROY] = "unsynced_destroy",
	[TWOSTEP_FINDING_DIR_MISMATCH] = "dir_mismatch",
	[TWOSTEP_FINDING_LEAK] = "leak",
	[TWOSTEP_FINDING_FAILED_LINK_LEAK] = "failed_link_leak",
};

static DEFINE_SPINLOCK(twostep_dbg_lock);	/* the table and the ring */
static struct twostep_dbg_row twostep_dbg_rows[TWOSTEP_DBG_ROWS];
static unsigned int twostep_dbg_nrows;
static unsigned long twostep_dbg_total[TWOSTEP_FINDING_KINDS];
static unsigned long twostep_dbg_lost;	/* findings past the table */
static u64 twostep_dbg_seq;
static struct twostep_dbg_freed twostep_dbg_ring[TWOSTEP_DBG_FREED];
static unsigned int twostep_dbg_ring_next;

static atomic_t twostep_dbg_ranges = ATOMIC_INIT(0);
static atomic_long_t twostep_dbg_untracked = ATOMIC_LONG_INIT(0);
static atomic_long_t twostep_dbg_checked = ATOMIC_LONG_INIT(0);
static struct dentry *twostep_dbg_dir;

static bool twostep_debug;

static int twostep_debug_param_set(const char *val,
				   const struct kernel_param *kp)
{
	int ret = param_set_bool(val, kp);

	if (ret)
		return ret;
	if (twostep_debug)
		static_branch_enable(&twostep_debug_on);
	else
		static_branch_disable(&twostep_debug_on);
	return 0;
}

static const struct kernel_param_ops twostep_debug_ops = {
	.set = twostep_debug_param_set,
	.get = param_get_bool,
};

module_param_cb(debug, &twostep_debug_ops, &twostep_debug, 0644);
MODULE_PARM_DESC(debug,
		 "1: check every two-step call and report misuse with its call site (/sys/kernel/debug/twostep/checker); 0: off, no cost (default)");

/**
 * twostep_debug_set - turn the checker on or off
 * @on: true: on
 *
 * Return: whether the checker was on.
 */
bool twostep_debug_set(bool on)
{
	bool old;

	might_sleep();
	kernel_param_lock(THIS_MODULE);
	old = twostep_debug;
	twostep_debug = on;
	if (on)
		static_branch_enable(&twostep_debug_on);
	else
		static_branch_disable(&twostep_debug_on);
	kernel_param_unlock(THIS_MODULE);
	return old;
}
EXPORT_SYMBOL_GPL(twostep_debug_set);

static unsigned long twostep_dbg_sum(void)
{
	unsigned long flags, n = 0;
	unsigned int k;

	spin_lock_irqsave(&twostep_dbg_lock, flags);
	for (k = 0; k < TWOSTEP_FINDING_KINDS; k++)
		n += twostep_dbg_total[k];
	spin_unlock_irqrestore(&twostep_dbg_lock, flags);
	return n;
}

static int twostep_findings_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%lu\n", twostep_dbg_sum());
}

static const struct kernel_param_ops twostep_findings_ops = {
	.get = twostep_findings_get,
};

module_param_cb(debug_findings, &twostep_findings_ops, NULL, 0444);
MODULE_PARM_DESC(debug_findings,
		 "findings of the checker since load or the last reset");

static void twostep_dbg_sym(char *buf, unsigned long ip)
{
	if (ip)
		snprintf(buf, TWOSTEP_DBG_SITE_LEN, "%pS", (void *)ip);
	else
		strscpy(buf, "(not tracked)", TWOSTEP_DBG_SITE_LEN);
}

/* Leaks are listed range by range, at a rate of their own. */
static DEFINE_RATELIMIT_STATE(twostep_dbg_leak_rs, 5 * HZ, 64);

/*
 * Count a finding in its row (kind, device, call site, allocating call
 * site) and say it in the kernel log the first time and whenever the
 * row's count reaches a power of two; a leak every time, each range.
 */
static void twostep_dbg_report(enum twostep_finding kind, struct device *dev,
			       unsigned long ip, unsigned long alloc_ip,
			       const char *what)
{
	char site[TWOSTEP_DBG_SITE_LEN], alloc[TWOSTEP_DBG_SITE_LEN];
	const char *name = dev_name(dev);
	struct twostep_dbg_row *r = NULL;
	unsigned long flags, count = 0;
	unsigned int i;

	twostep_dbg_sym(site, ip);
	twostep_dbg_sym(alloc, alloc_ip);
	spin_lock_irqsave(&twostep_dbg_lock, flags);
	twostep_dbg_total[kind]++;
	for (i = 0; i < twostep_dbg_nrows; i++) {
		struct twostep_dbg_row *row = &twostep_dbg_rows[i];

		if (row->kind == kind && row->ip == ip &&
		    row->alloc_ip == alloc_ip &&
		    !strncmp(row->dev, name, sizeof(row->dev) - 1)) {
			r = row;
			break;
		}
	}
	if (!r && twostep_dbg_nrows < TWOSTEP_DBG_ROWS) {
		r = &twostep_dbg_rows[twostep_dbg_nrows++];
		r->kind = kind;
		r->ip = ip;
		r->alloc_ip = alloc_ip;
		r->count = 0;
		strscpy(r->dev, name, sizeof(r->dev));
		strscpy(r->site, site, sizeof(r->site));
		strscpy(r->alloc_site, alloc, sizeof(r->alloc_site));
	}
	if (r) {
		count = ++r->count;
		r->seq = ++twostep_dbg_seq;
	} else {
		twostep_dbg_lost++;
	}
	spin_unlock_irqrestore(&twostep_dbg_lock, flags);
	if (kind == TWOSTEP_FINDING_LEAK ||
	    kind == TWOSTEP_FINDING_FAILED_LINK_LEAK) {
		if (__ratelimit(&twostep_dbg_leak_rs))
			dev_warn(dev, "twostep-checker: %s (count %lu): %s, range allocated by %s\n",
				 twostep_dbg_names[kind], count, what, alloc);
		return;
	}
	if (r && !is_power_of_2(count))
		return;
	dev_warn_ratelimited(dev, "twostep-checker: %s (count %lu): %s, call site %s, range allocated by %s\n",
			     twostep_dbg_names[kind], count, what, site, alloc);
}

static struct twostep_dbg_range *twostep_dbg_of(struct twostep_alloc *a)
{
	return READ_ONCE(a->dbg);
}

/* Remember a range that goes away, for twostep_dbg_state(). */
static void twostep_dbg_forget(struct device *dev, struct twostep_alloc *a)
{
	struct twostep_dbg_range *r = twostep_dbg_of(a);
	struct twostep_dbg_freed *f;
	unsigned long flags;

	spin_lock_irqsave(&twostep_dbg_lock, flags);
	f = &twostep_dbg_ring[twostep_dbg_ring_next++ % TWOSTEP_DBG_FREED];
	f->dev = dev;
	f->addr = a->addr;
	f->size = a->size;
	f->alloc_ip = r ? r->alloc_ip : 0;
	spin_unlock_irqrestore(&twostep_dbg_lock, flags);
}

/**
 * twostep_dbg_alloc - a range was allocated: start its record
 * @a: the range, not yet handed to the caller
 * @ip: the caller of twostep_iova_try_alloc()
 *
 * May run in any context; without memory the range is not tracked.
 */
void twostep_dbg_alloc(struct twostep_alloc *a, unsigned long ip)
{
	struct twostep_dbg_range *r;

	if (atomic_inc_return(&twostep_dbg_ranges) > TWOSTEP_DBG_MAX_RANGES)
		goto out_untracked;
	r = kzalloc(sizeof(*r), GFP_NOWAIT | __GFP_NOWARN);
	if (!r)
		goto out_untracked;
	spin_lock_init(&r->lock);
	r->alloc_ip = ip;
	atomic_long_inc(&twostep_dbg_checked);
	/* the record's fields before the pointer: see twostep_dbg_of() */
	smp_store_release(&a->dbg, r);
	return;

out_untracked:
	atomic_dec(&twostep_dbg_ranges);
	atomic_long_inc(&twostep_dbg_untracked);
}

/**
 * twostep_dbg_free - free the record of a range that is being freed
 * @a: the range, which no lookup can see any more
 */
void twostep_dbg_free(struct twostep_alloc *a)
{
	if (!a->dbg)
		return;
	kfree(a->dbg);
	a->dbg = NULL;
	atomic_dec(&twostep_dbg_ranges);
}

/**
 * twostep_dbg_link - a link of a live range returned
 * @a: the range
 * @ret: what the link returned
 * @dir: its direction
 * @ip: the caller of twostep_iova_link()
 */
void twostep_dbg_link(struct twostep_alloc *a, int ret,
		      enum dma_data_direction dir, unsigned long ip)
{
	struct twostep_dbg_range *r = twostep_dbg_of(a);
	unsigned long flags;
	unsigned int i;

	if (!r)
		return;
	spin_lock_irqsave(&r->lock, flags);
	if (ret) {
		r->failed++;
		r->failed_all++;
		goto out_unlock;
	}
	r->links++;
	r->unsynced++;
	r->dirs |= BIT(dir & 3);
	for (i = 0; i < r->nsites && r->link_ip[i] != ip; i++)
		;
	if (i == r->nsites && i < TWOSTEP_DBG_SITES)
		r->link_ip[r->nsites++] = ip;
out_unlock:
	spin_unlock_irqrestore(&r->lock, flags);
}

/**
 * twostep_dbg_sync - a sync of a live range was called
 * @a: the range
 *
 * Whether it succeeded or not: after a failed sync the driver unwinds.
 */
void twostep_dbg_sync(struct twostep_alloc *a)
{
	struct twostep_dbg_range *r = twostep_dbg_of(a);
	unsigned long flags;

	if (!r)
		return;
	spin_lock_irqsave(&r->lock, flags);
	r->unsynced = 0;
	r->failed = 0;
	spin_unlock_irqrestore(&r->lock, flags);
}

/* Did no link of the range use @dir? False when it has no record. */
static bool twostep_dbg_dir_unused(struct twostep_dbg_range *r,
				   enum dma_data_direction dir)
{
	unsigned int dirs;

	if (!r)
		return false;
	dirs = READ_ONCE(r->dirs);
	return dirs && ((unsigned int)dir > DMA_NONE || !(dirs & BIT(dir)));
}

/**
 * twostep_dbg_unlink - an unlink of a live range was carried out
 * @ctx: the range's context
 * @a: the range
 * @linked: granules of its span that were linked
 * @dir: the unlink's direction
 * @ip: the caller of twostep_iova_unlink()
 */
void twostep_dbg_unlink(struct twostep_ctx *ctx, struct twostep_alloc *a,
			unsigned long linked, enum dma_data_direction dir,
			unsigned long ip)
{
	struct twostep_dbg_range *r = twostep_dbg_of(a);
	unsigned long alloc_ip = r ? r->alloc_ip : 0;

	if (!linked)
		twostep_dbg_report(TWOSTEP_FINDING_NOT_LINKED, ctx->dev, ip,
				   alloc_ip,
				   "unlink of a span with nothing linked in it");
	else if (twostep_dbg_dir_unused(r, dir))
		twostep_dbg_report(TWOSTEP_FINDING_DIR_MISMATCH, ctx->dev, ip,
				   alloc_ip,
				   "unlink with a direction none of the range's links used");
}

/**
 * twostep_dbg_finish - a live range is about to be destroyed or freed
 * @ctx: its context
 * @a: the range, its links still in place
 * @mapped_len: destroy's @mapped_len, clamped to the range
 * @dir: destroy's direction
 * @destroy: destroy (true) or free
 * @ip: the caller of twostep_iova_destroy() or twostep_iova_free()
 */
void twostep_dbg_finish(struct twostep_ctx *ctx, struct twostep_alloc *a,
			size_t mapped_len, enum dma_data_direction dir,
			bool destroy, unsigned long ip)
{
	struct twostep_dbg_range *r = twostep_dbg_of(a);
	unsigned long alloc_ip = r ? r->alloc_ip : 0;
	unsigned long g, len, end, linked = 0;
	bool unsynced = false;
	unsigned long flags;

	twostep_dbg_forget(ctx->dev, a);
	if (!destroy || !mapped_len)
		return;
	end = ((a->addr - a->base + mapped_len - 1) >> ctx->shift) + 1;
	for (g = twostep_links_next_run(a->links, 0, &len); g < end;
	     g = twostep_links_next_run(a->links, g + len, &len))
		linked += min(g + len, end) - g;
	if (!linked) {
		twostep_dbg_report(TWOSTEP_FINDING_NOT_LINKED, ctx->dev, ip,
				   alloc_ip,
				   "destroy with a mapped_len over nothing linked");
		return;
	}
	if (r) {
		spin_lock_irqsave(&r->lock, flags);
		unsynced = r->unsynced && !r->failed;
		spin_unlock_irqrestore(&r->lock, flags);
	}
	if (unsynced)
		twostep_dbg_report(TWOSTEP_FINDING_UNSYNCED_DESTROY, ctx->dev,
				   ip, alloc_ip,
				   "destroy of links never synced (and no link failed)");
	if (twostep_dbg_dir_unused(r, dir))
		twostep_dbg_report(TWOSTEP_FINDING_DIR_MISMATCH, ctx->dev, ip,
				   alloc_ip,
				   "destroy with a direction none of the range's links used");
}

/**
 * twostep_dbg_state - a call was given a state that is no live range of @dev
 * @dev: the device it was called for
 * @state: the state
 * @call: "link", "sync", "unlink", "destroy" or "free"
 * @ip: the caller
 *
 * Under rcu_read_lock_sched(). A state of a range freed already is stale;
 * a state of a range of another device, live or freed, is foreign; a
 * zeroed or forged state is twostep's bad input and no finding.
 */
void twostep_dbg_state(struct device *dev,
		       const struct twostep_iova_state *state,
		       const char *call, unsigned long ip)
{
	unsigned long flags, alloc_ip = 0;
	enum twostep_finding kind;
	struct twostep_ctx *ctx;
	struct twostep_alloc *a;
	const struct device *owner = NULL;
	char what[96];
	unsigned int i;

	if (!dev || !state || !state->__size)
		return;
	spin_lock_irqsave(&twostep_dbg_lock, flags);
	for (i = 1; i <= TWOSTEP_DBG_FREED; i++) {
		struct twostep_dbg_freed *f;

		f = &twostep_dbg_ring[(twostep_dbg_ring_next - i) %
				      TWOSTEP_DBG_FREED];
		if (f->dev && f->addr == state->addr &&
		    f->size == state->__size) {
			owner = f->dev;
			alloc_ip = f->alloc_ip;
			break;
		}
	}
	spin_unlock_irqrestore(&twostep_dbg_lock, flags);
	if (!owner) {
		list_for_each_entry_rcu(ctx, &twostep_ctxs, node) {
			if (ctx->dev == dev)
				continue;
			a = twostep_alloc_find(ctx, state->addr,
					       state->__size);
			if (a) {
				struct twostep_dbg_range *r = twostep_dbg_of(a);

				owner = ctx->dev;
				alloc_ip = r ? r->alloc_ip : 0;
				break;
			}
		}
		if (!owner)
			return;
		snprintf(what, sizeof(what),
			 "%s with the state of a live range of %s", call,
			 dev_name(owner));
		kind = TWOSTEP_FINDING_FOREIGN_STATE;
	} else if (owner == dev) {
		snprintf(what, sizeof(what),
			 "%s with the state of a range freed already", call);
		kind = TWOSTEP_FINDING_STALE_STATE;
	} else {
		snprintf(what, sizeof(what),
			 "%s with the state of a freed range of another device",
			 call);
		kind = TWOSTEP_FINDING_FOREIGN_STATE;
	}
	twostep_dbg_report(kind, dev, ip, alloc_ip, what);
}

/**
 * twostep_dbg_leak - a range is live when its context goes
 * @ctx: the context
 * @a: the range, still in place
 * @why: "driver unbound", "detach", "unload" ...
 */
void twostep_dbg_leak(struct twostep_ctx *ctx, struct twostep_alloc *a,
		      const char *why)
{
	struct twostep_dbg_range *r = twostep_dbg_of(a);
	enum twostep_finding kind = TWOSTEP_FINDING_LEAK;
	unsigned long flags, link_ip = 0, links = 0;
	char what[TWOSTEP_DBG_SITE_LEN + 96], site[TWOSTEP_DBG_SITE_LEN];

	if (r) {
		spin_lock_irqsave(&r->lock, flags);
		if (r->failed_all)
			kind = TWOSTEP_FINDING_FAILED_LINK_LEAK;
		links = r->links;
		link_ip = r->nsites ? r->link_ip[0] : 0;
		spin_unlock_irqrestore(&r->lock, flags);
	}
	twostep_dbg_sym(site, link_ip);
	snprintf(what, sizeof(what),
		 "range %pad + %llu bytes live at %s, %lu link(s), the first by %s",
		 &a->addr, a->size & TWOSTEP_IOVA_SIZE_MASK, why, links,
		 link_ip ? site : "none");
	twostep_dbg_forget(ctx->dev, a);
	twostep_dbg_report(kind, ctx->dev, r ? r->alloc_ip : 0,
			   r ? r->alloc_ip : 0, what);
}

/**
 * twostep_debug_findings - what the checker found
 * @dev: count the findings of this device only; NULL: of every device
 * @kind: count this kind only; %TWOSTEP_FINDING_KINDS: every kind
 * @site: NULL, or filled in with the call site of the last such finding
 * @len: size of @site
 *
 * Return: the number of findings.
 */
unsigned long twostep_debug_findings(struct device *dev,
				     enum twostep_finding kind, char *site,
				     size_t len)
{
	const char *name = dev ? dev_name(dev) : NULL;
	unsigned long flags, n = 0;
	u64 last = 0;
	unsigned int i;

	if (site && len)
		site[0] = '\0';
	spin_lock_irqsave(&twostep_dbg_lock, flags);
	for (i = 0; i < twostep_dbg_nrows; i++) {
		struct twostep_dbg_row *r = &twostep_dbg_rows[i];

		if (kind < TWOSTEP_FINDING_KINDS && r->kind != kind)
			continue;
		if (name && strncmp(r->dev, name, sizeof(r->dev) - 1))
			continue;
		n += r->count;
		if (r->seq > last) {
			last = r->seq;
			if (site && len)
				strscpy(site, r->site, len);
		}
	}
	if (!name) {
		n = 0;
		for (i = 0; i < TWOSTEP_FINDING_KINDS; i++)
			if (kind >= TWOSTEP_FINDING_KINDS || kind == i)
				n += twostep_dbg_total[i];
	}
	spin_unlock_irqrestore(&twostep_dbg_lock, flags);
	return n;
}
EXPORT_SYMBOL_GPL(twostep_debug_findings);

/* /sys/kernel/debug/twostep/checker: the table; "reset" empties it. */
static int twostep_dbg_show(struct seq_file *m, void *v)
{
	struct twostep_dbg_row *rows;
	unsigned long flags, lost, total = 0;
	unsigned int i, n;

	rows = kmalloc_array(TWOSTEP_DBG_ROWS, sizeof(*rows), GFP_KERNEL);
	if (!rows)
		return -ENOMEM;
	spin_lock_irqsave(&twostep_dbg_lock, flags);
	n = twostep_dbg_nrows;
	memcpy(rows, twostep_dbg_rows, n * sizeof(*rows));
	for (i = 0; i < TWOSTEP_FINDING_KINDS; i++)
		total += twostep_dbg_total[i];
	lost = twostep_dbg_lost;
	spin_unlock_irqrestore(&twostep_dbg_lock, flags);

	seq_printf(m, "twostep checker: debug %d, findings %lu (%lu past the table), ranges checked %ld, live %d, not tracked %ld\n",
		   static_key_enabled(&twostep_debug_on), total, lost,
		   atomic_long_read(&twostep_dbg_checked),
		   atomic_read(&twostep_dbg_ranges),
		   atomic_long_read(&twostep_dbg_untracked));
	seq_printf(m, "%-17s %7s  %-14s %s\n", "finding", "count", "device",
		   "call site; range allocated by");
	for (i = 0; i < n; i++)
		seq_printf(m, "%-17s %7lu  %-14s %s; %s\n",
			   twostep_dbg_names[rows[i].kind], rows[i].count,
			   rows[i].dev, rows[i].site, rows[i].alloc_site);
	kfree(rows);
	return 0;
}

static int twostep_dbg_open(struct inode *inode, struct file *file)
{
	return single_open(file, twostep_dbg_show, NULL);
}

static ssize_t twostep_dbg_write(struct file *file, const char __user *ubuf,
				 size_t count, loff_t *ppos)
{
	unsigned long flags;
	char buf[8] = { };

	if (count >= sizeof(buf) || copy_from_user(buf, ubuf, count))
		return -EINVAL;
	if (strcmp(strim(buf), "reset"))
		return -EINVAL;
	spin_lock_irqsave(&twostep_dbg_lock, flags);
	twostep_dbg_nrows = 0;
	twostep_dbg_lost = 0;
	memset(twostep_dbg_total, 0, sizeof(twostep_dbg_total));
	spin_unlock_irqrestore(&twostep_dbg_lock, flags);
	atomic_long_set(&twostep_dbg_checked, 0);
	atomic_long_set(&twostep_dbg_untracked, 0);
	return count;
}

static const struct file_operations twostep_dbg_fops = {
	.owner = THIS_MODULE,
	.open = twostep_dbg_open,
	.read = seq_read,
	.llseek = seq_lseek,
	.release = single_release,
	.write = twostep_dbg_write,
};

/* At load: the debugfs table (a failure leaves only the table out). */
void twostep_debug_init(void)
{
	twostep_dbg_dir = debugfs_create_dir("twostep", NULL);
	debugfs_create_file("checker", 0644, twostep_dbg_dir, NULL,
			    &twostep_dbg_fops);
}

void twostep_debug_exit(void)
{
	debugfs_remove_recursive(twostep_dbg_dir);
}

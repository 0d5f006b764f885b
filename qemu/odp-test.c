// SPDX-License-Identifier: GPL-2.0
/*
 * odp-test: the guest program of the on-demand paging (ODP) test. It
 * drives /dev/twostep_odp (selftest/odp.c): registers ranges of its own
 * address space and has the edu device read and write them, and checks
 * every byte from user space, after the address space changed under the
 * device: memory never touched, MADV_DONTNEED, fork, mprotect, munmap, a
 * shared memfd, a transparent huge page, and a seeded random stress
 * against a shadow model.
 *
 * Prints "twostep-check: ok|FAIL name" per check, figures as KTAP
 * diagnostic lines and "# summary: odp ops N mismatches M seed S", which
 * the host harness (qemu/lib.sh, ts_parse) reads from the console.
 *
 * Built on the host as a static binary:
 *   gcc -O2 -static -Wall -Wextra -o odp-test qemu/odp-test.c
 *
 * Usage: odp-test [-n stress_ops] [-s seed] [-a expect_api]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../selftest/odp-uapi.h"

#define DEV		"/dev/twostep_odp"
#define KTAP		"twostep-ktap: "

/* the CPU page (4 KiB, 16 KiB) and a transparent huge page (PMD) */
static unsigned long pg, huge_sz;

static int failures, verbose;

static void check(int ok, const char *name, const char *fmt, ...)
{
	va_list ap;

	printf("twostep-check: %s odp_%s", ok ? "ok" : "FAIL", name);
	if (!ok && fmt) {
		printf(" (");
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
		printf(")");
	}
	printf("\n");
	fflush(stdout);
	if (!ok)
		failures++;
}

static void diag(const char *fmt, ...)
{
	va_list ap;

	printf(KTAP "    # odp: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

static void die(const char *what)
{
	printf("twostep-check: FAIL odp_setup (%s: %s)\n", what,
	       strerror(errno));
	exit(1);
}

/* xorshift32: the stress sequence and the data patterns */
static uint32_t rnd(uint32_t *s)
{
	uint32_t x = *s;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return *s = x;
}

static void fill(uint8_t *p, size_t len, uint32_t seed)
{
	uint32_t s = seed | 1;
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = rnd(&s) >> 24;
}

static int odp_open(void)
{
	int fd = open(DEV, O_RDWR | O_CLOEXEC);

	if (fd < 0)
		die("open " DEV);
	return fd;
}

static int odp_reg(int fd, void *addr, size_t len)
{
	struct ts_odp_reg r = { .addr = (uintptr_t)addr, .len = len };

	if (ioctl(fd, TS_ODP_REGISTER, &r))
		return -errno;
	return r.id;
}

static void odp_unreg(int fd, int id)
{
	uint32_t v = id;

	if (ioctl(fd, TS_ODP_UNREGISTER, &v))
		die("unregister");
}

/* The device moves @len bytes: region -> @buf, or @buf -> region. */
static int dev_xfer(int fd, int id, size_t off, void *buf, size_t len,
		    int write)
{
	struct ts_odp_xfer x = {
		.id = id, .offset = off, .len = len,
		.buf = (uintptr_t)buf,
		.flags = write ? TS_ODP_XFER_WRITE : 0,
	};

	int ret = ioctl(fd, TS_ODP_XFER, &x) ? -errno : 0;

	if (verbose)
		printf("odp-test: %s region %d offset %zu len %zu: %d\n",
		       write ? "write" : "read", id, off, len, ret);
	return ret;
}

static int dev_write(int fd, int id, size_t off, const void *buf, size_t len)
{
	return dev_xfer(fd, id, off, (void *)buf, len, 1);
}

static int dev_read(int fd, int id, size_t off, void *buf, size_t len)
{
	return dev_xfer(fd, id, off, buf, len, 0);
}

static void set_mode(int fd, uint32_t mode)
{
	if (ioctl(fd, TS_ODP_UNMAP_MODE, &mode))
		die("unmap mode");
}

static void *map_anon(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		die("mmap");
	return p;
}

static int all_zero(const uint8_t *p, size_t len)
{
	while (len--)
		if (*p++)
			return 0;
	return 1;
}

/* 1. pages never touched written by the device; process data read */
static void t_untouched(int fd)
{
	const size_t npg = 16, len = npg * pg;
	uint8_t *m = map_anon(len), buf[6000], got[6000];
	int id = odp_reg(fd, m, len), ok = 1, r1, r2;

	if (id < 0)
		die("register");
	/* page 1 from byte 100, into page 3, with a piece boundary */
	fill(buf, sizeof(buf), 11);
	r1 = dev_write(fd, id, pg + 100, buf, sizeof(buf));
	ok = !r1 && !memcmp(m + pg + 100, buf, sizeof(buf)) &&
	     all_zero(m, pg + 100) &&
	     all_zero(m + pg + 100 + sizeof(buf),
		      len - pg - 100 - sizeof(buf));
	/* one byte at the very end of the region */
	r2 = dev_write(fd, id, len - 1, buf, 1);
	ok = ok && !r2 && m[len - 1] == buf[0];
	check(ok, "device_writes_untouched_pages", "write %d/%d", r1, r2);

	fill(m + 9 * pg, 3 * pg, 12);
	memset(got, 0x5a, sizeof(got));
	r1 = dev_read(fd, id, 9 * pg + 7, got, sizeof(got));
	check(!r1 && !memcmp(got, m + 9 * pg + 7, sizeof(got)),
	      "device_reads_process_data", "read %d", r1);
	/* the CPU overwrites what the device has mapped: the device sees it */
	fill(m + 9 * pg, pg, 13);
	r1 = dev_read(fd, id, 9 * pg, got, 256);
	check(!r1 && !memcmp(got, m + 9 * pg, 256), "device_reads_cpu_update",
	      "read %d", r1);
	odp_unreg(fd, id);
	munmap(m, len);
}

/* 2. MADV_DONTNEED under the device */
static void t_dontneed(int fd)
{
	const size_t len = 8 * pg;
	uint8_t *m = map_anon(len), got[pg], buf[300];
	int id = odp_reg(fd, m, len), r1, r2, r3, r4;

	if (id < 0)
		die("register");
	fill(m, len, 21);
	/* the device maps every page */
	r1 = dev_read(fd, id, 0, got, 64);
	r2 = dev_read(fd, id, 3 * pg + 5, got, pg - 5);
	if (madvise(m + 2 * pg, 3 * pg, MADV_DONTNEED))
		die("madvise");
	memset(got, 0x77, sizeof(got));
	r3 = dev_read(fd, id, 2 * pg, got, 3000);
	r4 = dev_read(fd, id, 3 * pg + 4000, got + 3000, 1000);
	check(!r1 && !r2 && !r3 && !r4 && all_zero(got, 4000),
	      "dontneed_device_reads_zeros", "%d %d %d %d", r1, r2, r3, r4);
	r1 = dev_read(fd, id, pg, got, pg);
	check(!r1 && !memcmp(got, m + pg, pg), "dontneed_rest_untouched",
	      "%d", r1);
	fill(buf, sizeof(buf), 22);
	r1 = dev_write(fd, id, 3 * pg + 40, buf, sizeof(buf));
	check(!r1 && !memcmp(m + 3 * pg + 40, buf, sizeof(buf)) &&
	      all_zero(m + 2 * pg, pg + 40),
	      "dontneed_device_write_visible", "%d", r1);
	odp_unreg(fd, id);
	munmap(m, len);
}

/* wait for one byte on @p */
static void wait_on(int p)
{
	char c;

	if (read(p, &c, 1) != 1)
		exit(3);
}

static void post(int p)
{
	if (write(p, "x", 1) != 1)
		exit(3);
}

/* 3. fork: separate views, copy-on-write broken for device writes */
static void t_fork(int fd)
{
	const size_t len = 4 * pg;
	uint8_t *m = map_anon(len), orig[4 * pg], pw[200], cw[200], got[200];
	int id = odp_reg(fd, m, len), to_child[2], to_parent[2], st, r1, r2;
	int ok;
	pid_t pid;

	if (id < 0)
		die("register");
	fill(m, len, 31);
	memcpy(orig, m, len);
	fill(pw, sizeof(pw), 32);
	fill(cw, sizeof(cw), 33);
	/* the device maps every page before the fork */
	r1 = dev_read(fd, id, 0, got, 100);
	r2 = dev_read(fd, id, pg + 50, got, 100);
	r1 = r1 ? r1 : dev_read(fd, id, 2 * pg, got, 100);
	r2 = r2 ? r2 : dev_read(fd, id, 3 * pg, got, 100);
	if (r1 || r2)
		check(0, "fork_setup", "%d %d", r1, r2);
	if (pipe(to_child) || pipe(to_parent))
		die("pipe");
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		die("fork");
	if (!pid) {
		/* the child, with its own file and region */
		int cfd = odp_open(), cid = odp_reg(cfd, m, len), bad = 0;

		if (cid < 0)
			exit(2);
		if (dev_write(cfd, cid, 10, cw, sizeof(cw)))
			bad |= 1;
		if (memcmp(m + 10, cw, sizeof(cw)))
			bad |= 2;
		post(to_parent[1]);
		wait_on(to_child[0]);
		/* the parent's device write into page 1 stays the parent's */
		if (memcmp(m + pg, orig + pg, pg))
			bad |= 4;
		if (dev_read(cfd, cid, pg, got, 200) ||
		    memcmp(got, orig + pg, 200))
			bad |= 8;
		exit(bad);
	}
	wait_on(to_parent[0]);
	/* child wrote page 0 through the device: not in the parent's */
	r1 = dev_read(fd, id, 10, got, sizeof(got));
	ok = !memcmp(m, orig, pg) && !r1 && !memcmp(got, orig + 10, 200);
	r2 = dev_write(fd, id, pg + 50, pw, sizeof(pw));
	ok = ok && !r2 && !memcmp(m + pg + 50, pw, sizeof(pw));
	post(to_child[1]);
	waitpid(pid, &st, 0);
	check(ok && WIFEXITED(st) && !WEXITSTATUS(st), "fork_child_alive",
	      "parent %d %d, child status %#x", r1, r2, st);

	/* after the child exited */
	r1 = dev_write(fd, id, 2 * pg + 1, pw, sizeof(pw));
	r2 = dev_read(fd, id, pg + 50, got, sizeof(got));
	check(!r1 && !r2 && !memcmp(m + 2 * pg + 1, pw, sizeof(pw)) &&
	      !memcmp(got, pw, sizeof(pw)) && !memcmp(m, orig, pg),
	      "fork_child_exited", "%d %d", r1, r2);
	close(to_child[0]);
	close(to_child[1]);
	close(to_parent[0]);
	close(to_parent[1]);
	odp_unreg(fd, id);
	munmap(m, len);
}

/* 4. mprotect(PROT_READ): the device may read, not write */
static void t_mprotect(int fd)
{
	const size_t len = 4 * pg;
	uint8_t *m = map_anon(len), orig[4 * pg], buf[128], got[128];
	int id = odp_reg(fd, m, len), r1, r2;

	if (id < 0)
		die("register");
	fill(m, len, 41);
	memcpy(orig, m, len);
	fill(buf, sizeof(buf), 42);
	r1 = dev_write(fd, id, 0, buf, 16);	/* mapped writable before */
	memcpy(orig, m, 16);
	if (mprotect(m, len, PROT_READ))
		die("mprotect");
	r2 = dev_write(fd, id, pg + 8, buf, sizeof(buf));
	check(!r1 && r2 < 0 && !memcmp(m, orig, len),
	      "mprotect_ro_device_write_refused", "write %d then %d", r1, r2);
	r1 = dev_read(fd, id, pg + 8, got, sizeof(got));
	check(!r1 && !memcmp(got, orig + pg + 8, sizeof(got)),
	      "mprotect_ro_device_read_works", "%d", r1);
	diag("device write to a read-only mapping refused with %s",
	     strerror(-r2));
	if (mprotect(m, len, PROT_READ | PROT_WRITE))
		die("mprotect");
	r1 = dev_write(fd, id, pg + 8, buf, sizeof(buf));
	check(!r1 && !memcmp(m + pg + 8, buf, sizeof(buf)),
	      "mprotect_rw_device_write_works", "%d", r1);
	odp_unreg(fd, id);
	munmap(m, len);
}

/* 5. munmap of part of a region */
static void t_munmap(int fd)
{
	const size_t len = 8 * pg;
	uint8_t *m = map_anon(len), buf[300], got[300];
	int id = odp_reg(fd, m, len), r1, r2, r3, r4, r5;
	void *p;

	if (id < 0)
		die("register");
	fill(m, len, 51);
	r1 = dev_read(fd, id, 4 * pg, got, 100);	/* mapped */
	if (munmap(m + 4 * pg, 2 * pg))
		die("munmap");
	r2 = dev_read(fd, id, 4 * pg, got, 100);
	fill(buf, sizeof(buf), 52);
	r3 = dev_write(fd, id, 5 * pg + 10, buf, sizeof(buf));
	r4 = dev_read(fd, id, 4 * pg - 100, got, 200);	/* straddles */
	check(!r1 && r2 == -EFAULT && r3 == -EFAULT && r4 == -EFAULT,
	      "munmap_part_access_efault", "%d %d %d %d", r1, r2, r3, r4);
	r1 = dev_write(fd, id, 3 * pg + 100, buf, sizeof(buf));
	r2 = dev_read(fd, id, 6 * pg, got, sizeof(got));
	r3 = dev_write(fd, id, 7 * pg, buf, sizeof(buf));
	r4 = dev_read(fd, id, 2 * pg, got + 100, 100);
	check(!r1 && !r2 && !r3 && !r4 &&
	      !memcmp(m + 3 * pg + 100, buf, sizeof(buf)) &&
	      !memcmp(m + 7 * pg, buf, sizeof(buf)) &&
	      !memcmp(got + 100, m + 2 * pg, 100),
	      "munmap_rest_works", "%d %d %d %d", r1, r2, r3, r4);
	/* new memory in the hole: reachable again, zeros */
	p = mmap(m + 4 * pg, 2 * pg, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	if (p == MAP_FAILED)
		die("mmap fixed");
	memset(got, 0x66, sizeof(got));
	r5 = dev_read(fd, id, 4 * pg, got, sizeof(got));
	check(!r5 && all_zero(got, sizeof(got)), "munmap_hole_refilled",
	      "%d", r5);
	odp_unreg(fd, id);
	munmap(m, len);
}

/* 6. a shared memfd mapping */
static void t_memfd(int fd)
{
	const size_t len = 4 * pg;
	uint8_t buf[500], got[500], *m1, *m2;
	int mfd = memfd_create("odp", 0), id, r1, r2;

	if (mfd < 0 || ftruncate(mfd, len))
		die("memfd");
	m1 = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	m2 = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	if (m1 == MAP_FAILED || m2 == MAP_FAILED)
		die("mmap memfd");
	id = odp_reg(fd, m1, len);
	if (id < 0)
		die("register");
	fill(buf, sizeof(buf), 61);
	r1 = dev_write(fd, id, 2 * pg - 200, buf, sizeof(buf));
	r2 = pread(mfd, got, sizeof(got), 2 * pg - 200) == sizeof(got) ?
	     0 : -errno;
	check(!r1 && !r2 && !memcmp(got, buf, sizeof(buf)) &&
	      !memcmp(m2 + 2 * pg - 200, buf, sizeof(buf)),
	      "memfd_device_write_visible", "%d %d", r1, r2);
	fill(m2 + 3 * pg, 500, 62);
	r1 = dev_read(fd, id, 3 * pg, got, sizeof(got));
	check(!r1 && !memcmp(got, m2 + 3 * pg, 500),
	      "memfd_device_reads_other_mapping", "%d", r1);
	odp_unreg(fd, id);
	munmap(m1, len);
	munmap(m2, len);
	close(mfd);
}

/* AnonHugePages of the mapping at @addr, in kB, from smaps */
static long thp_kb(void *addr)
{
	char line[256], start[32];
	long kb = -1;
	int in = 0;
	FILE *f = fopen("/proc/self/smaps", "r");

	if (!f)
		return -1;
	snprintf(start, sizeof(start), "%lx-", (unsigned long)addr);
	while (fgets(line, sizeof(line), f)) {
		if (strchr(line, '-') && strchr(line, ' ') &&
		    strchr(line, '-') < strchr(line, ' '))
			in = !strncmp(line, start, strlen(start));
		if (in && sscanf(line, "AnonHugePages: %ld kB", &kb) == 1)
			break;
	}
	fclose(f);
	return kb;
}

/* A PMD's transparent huge page: 2 MiB with 4 KiB pages, 32 MiB with 16. */
static unsigned long thp_size(void)
{
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size",
			"r");
	unsigned long sz = 0;

	if (f) {
		if (fscanf(f, "%lu", &sz) != 1)
			sz = 0;
		fclose(f);
	}
	return sz ? sz : 2UL << 20;
}

/*
 * The kernel turns THP off by default below 512 MiB of RAM, as in the
 * test guest: allow it for MADV_HUGEPAGE regions then.
 */
static void thp_allow(void)
{
	const char *path = "/sys/kernel/mm/transparent_hugepage/enabled";
	char mode[128] = "";
	FILE *f = fopen(path, "r");

	if (f) {
		if (!fgets(mode, sizeof(mode), f))
			mode[0] = 0;
		fclose(f);
	}
	mode[strcspn(mode, "\n")] = 0;
	if (!strstr(mode, "[never]"))
		return;
	f = fopen(path, "w");
	if (!f || fputs("madvise", f) < 0 || fclose(f))
		die("enabling THP");
	diag("THP was off (%s): set to madvise", mode);
}

/* 7. a transparent huge page */
static void t_thp(int fd)
{
	uint8_t *raw = map_anon(2 * huge_sz), *m, buf[1000], got[1000];
	int id, r1, r2, r3, ok = 1;
	size_t off;
	long kb;

	thp_allow();
	m = (uint8_t *)(((uintptr_t)raw + huge_sz - 1) & ~(huge_sz - 1));
	if (madvise(m, huge_sz, MADV_HUGEPAGE))
		die("madvise hugepage");
	fill(m, huge_sz, 71);
	kb = thp_kb(m);
	diag("THP region at %p: AnonHugePages %ld kB", (void *)m, kb);
	check(kb >= (long)(huge_sz >> 10), "thp_region_is_huge",
	      "AnonHugePages %ld kB", kb);
	id = odp_reg(fd, m, huge_sz);
	if (id < 0)
		die("register");
	for (off = 0; off < huge_sz; off += 257 * pg + 333) {
		r1 = dev_read(fd, id, off, got, 700);
		ok = ok && !r1 && !memcmp(got, m + off, 700);
	}
	check(ok, "thp_device_reads", NULL);
	fill(buf, sizeof(buf), 72);
	r1 = dev_write(fd, id, huge_sz / 2 - 500, buf, sizeof(buf));
	r2 = dev_write(fd, id, huge_sz - sizeof(buf), buf, sizeof(buf));
	check(!r1 && !r2 && !memcmp(m + huge_sz / 2 - 500, buf, sizeof(buf)) &&
	      !memcmp(m + huge_sz - sizeof(buf), buf, sizeof(buf)),
	      "thp_device_writes", "%d %d", r1, r2);
	/* drop 4 KiB out of the huge page: split under the device */
	if (madvise(m + 16 * pg, pg, MADV_DONTNEED))
		die("madvise");
	memset(got, 0x55, sizeof(got));
	r1 = dev_read(fd, id, 16 * pg - 100, got, 300);
	r3 = dev_write(fd, id, 16 * pg + 10, buf, 100);
	check(!r1 && !memcmp(got, m + 16 * pg - 100, 100) &&
	      all_zero(got + 100, 200) && !r3 &&
	      !memcmp(m + 16 * pg + 10, buf, 100),
	      "thp_split_under_device", "%d %d", r1, r3);
	odp_unreg(fd, id);
	munmap(raw, 2 * huge_sz);
}

/*
 * 8. unmap cost: 32 pages mapped, then invalidated, entry by entry
 * (upstream's hmm_dma_unmap_pfn) and as one range; the host counts the
 * IOTLB invalidations between the driver's markers.
 */
static void t_flush(int fd)
{
	const size_t npg = 32, len = npg * pg;
	uint8_t *m = map_anon(len), got[64];
	int id = odp_reg(fd, m, len), mode, bad = 0;
	size_t i;

	if (id < 0)
		die("register");
	fill(m, len, 81);
	for (mode = TS_ODP_UNMAP_PER_ENTRY; mode >= TS_ODP_UNMAP_RANGE;
	     mode--) {
		set_mode(fd, mode);
		/* every page but every fifth: holes in the range */
		for (i = 0; i < npg; i++)
			if (i % 5 != 4 && dev_read(fd, id, i * pg, got, 64))
				bad++;
		if (madvise(m, len, MADV_DONTNEED))
			die("madvise");
		memset(got, 1, sizeof(got));
		if (dev_read(fd, id, 7 * pg, got, 64) || !all_zero(got, 64))
			bad++;
		if (madvise(m, len, MADV_DONTNEED))
			die("madvise");
	}
	check(!bad, "flush_rounds", "%d bad accesses", bad);
	odp_unreg(fd, id);
	munmap(m, len);
}

/* 9. the stress: regions of pages against a shadow copy */
#define S_SLOTS		4
#define S_PAGES		16
#define S_LEN		(S_PAGES * pg)

struct slot {
	uint8_t *m;
	int id;
	int home;
	uint8_t *shadow;	/* S_LEN bytes */
	uint8_t present[S_PAGES];
};

static struct slot slots[S_SLOTS];
static unsigned long mismatches, s_reads, s_writes, s_efault;
/*
 * Two homes per slot in one reserved arena, and every mapping of the
 * stress placed with MAP_FIXED in its slot's homes: the holes munmap
 * leaves are never handed out to another mapping of ours.
 */
static uint8_t *arena;

static uint8_t *home_of(int slot, int home)
{
	return arena + (2 * slot + home) * S_LEN;
}

static void slot_new(int fd, struct slot *s)
{
	s->m = mmap(home_of(s - slots, s->home), S_LEN,
		    PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	if (s->m == MAP_FAILED)
		die("mmap fixed");
	s->id = odp_reg(fd, s->m, S_LEN);
	if (s->id < 0)
		die("register");
	if (!s->shadow)
		s->shadow = malloc(S_LEN);
	if (!s->shadow)
		die("malloc");
	memset(s->shadow, 0, S_LEN);
	memset(s->present, 1, S_PAGES);
}

/* unregister, and give the home back to the arena */
static void slot_drop(int fd, struct slot *s)
{
	odp_unreg(fd, s->id);
	if (mmap(s->m, S_LEN, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1,
		 0) == MAP_FAILED)
		die("mmap fixed");
}

static int span_present(const struct slot *s, size_t off, size_t len)
{
	size_t p;

	for (p = off / pg; p <= (off + len - 1) / pg; p++)
		if (!s->present[p])
			return 0;
	return 1;
}

static void mismatch(const char *what, unsigned long op, int ret)
{
	if (mismatches++ < 10)
		diag("stress mismatch at op %lu: %s (%d)", op, what, ret);
}

/* the child of a stress fork: checks its copy, writes through the device */
static int stress_child(uint32_t seed)
{
	int cfd = odp_open(), bad = 0, i, id;
	uint8_t buf[256];

	for (i = 0; i < S_SLOTS; i++) {
		struct slot *s = &slots[i];
		size_t p;

		for (p = 0; p < S_PAGES; p++)
			if (s->present[p] &&
			    memcmp(s->m + p * pg, s->shadow + p * pg, pg))
				bad |= 1;
	}
	/* a device write into its copy of slot 0's first present page */
	for (i = 0; i < S_PAGES && !slots[0].present[i]; i++)
		;
	if (i == S_PAGES)
		return bad;
	id = odp_reg(cfd, slots[0].m + i * pg, pg);
	if (id < 0)
		return bad | 2;
	fill(buf, sizeof(buf), seed);
	if (dev_write(cfd, id, 0, buf, sizeof(buf)) ||
	    memcmp(slots[0].m + i * pg, buf, sizeof(buf)))
		bad |= 4;
	return bad;
}

static void stress(int fd, unsigned long ops, uint32_t seed)
{
	uint32_t rs = seed ? seed : 1;
	uint8_t buf[4096], got[4096];
	unsigned long op, counts[8] = { 0 };
	struct timespec t0, t1;
	int i, ret;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	arena = mmap(NULL, 2 * S_SLOTS * S_LEN, PROT_NONE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (arena == MAP_FAILED)
		die("mmap arena");
	for (i = 0; i < S_SLOTS; i++)
		slot_new(fd, &slots[i]);
	for (op = 0; op < ops; op++) {
		struct slot *s = &slots[rnd(&rs) % S_SLOTS];
		unsigned int kind = rnd(&rs) % 100;
		size_t len = 1 + rnd(&rs) % 256, off, p, n;

		/* at most one edu transfer: all or nothing */
		if (rnd(&rs) % 16 == 0)
			len = 1 + rnd(&rs) % 4095;
		off = rnd(&rs) % (S_LEN - len + 1);
		p = off / pg;
		if (kind < 40) {			/* device write */
			counts[0]++;
			fill(buf, len, rnd(&rs));
			ret = dev_write(fd, s->id, off, buf, len);
			if (span_present(s, off, len)) {
				s_writes++;
				if (ret)
					mismatch("device write failed", op, ret);
				else
					memcpy(s->shadow + off, buf, len);
			} else if (ret != -EFAULT) {
				mismatch("device write into a hole", op, ret);
			} else {
				s_efault++;
			}
		} else if (kind < 80) {			/* device read */
			counts[1]++;
			ret = dev_read(fd, s->id, off, got, len);
			if (span_present(s, off, len)) {
				s_reads++;
				if (ret || memcmp(got, s->shadow + off, len))
					mismatch("device read", op, ret);
			} else if (ret != -EFAULT) {
				mismatch("device read of a hole", op, ret);
			} else {
				s_efault++;
			}
		} else if (kind < 88) {			/* CPU write */
			counts[2]++;
			if (!span_present(s, off, len))
				continue;
			fill(buf, len, rnd(&rs));
			memcpy(s->m + off, buf, len);
			memcpy(s->shadow + off, buf, len);
		} else if (kind < 93) {			/* MADV_DONTNEED */
			counts[3]++;
			n = 1 + rnd(&rs) % 4;
			n = n > S_PAGES - p ? S_PAGES - p : n;
			/* ENOMEM: part of it unmapped, the rest dropped */
			if (madvise(s->m + p * pg, n * pg, MADV_DONTNEED) &&
			    errno != ENOMEM)
				die("madvise");
			memset(s->shadow + p * pg, 0, n * pg);
		} else if (kind < 96) {			/* munmap or refill */
			counts[4]++;
			n = 1 + rnd(&rs) % 3;
			n = n > S_PAGES - p ? S_PAGES - p : n;
			if (s->present[p]) {
				if (munmap(s->m + p * pg, n * pg))
					die("munmap");
				memset(s->present + p, 0, n);
			} else if (mmap(s->m + p * pg, n * pg,
					PROT_READ | PROT_WRITE,
					MAP_PRIVATE | MAP_ANONYMOUS |
					MAP_FIXED, -1, 0) == MAP_FAILED) {
				die("mmap fixed");
			} else {
				memset(s->present + p, 1, n);
			}
			memset(s->shadow + p * pg, 0, n * pg);
		} else if (kind < 99) {			/* mremap */
			void *to = home_of(s - slots, !s->home), *moved;

			counts[5]++;
			moved = memchr(s->present, 0, S_PAGES) ? MAP_FAILED :
				mremap(s->m, S_LEN, S_LEN,
				       MREMAP_MAYMOVE | MREMAP_FIXED, to);
			if (moved == MAP_FAILED) {
				/* holes or several VMAs: a fresh region */
				slot_drop(fd, s);
				slot_new(fd, s);
				continue;
			}
			s->home = !s->home;
			/* the old range is gone under the device */
			ret = dev_read(fd, s->id, off, got, len);
			if (ret != -EFAULT)
				mismatch("device read after mremap", op, ret);
			odp_unreg(fd, s->id);
			/* the old home back to the arena */
			if (mmap(s->m, S_LEN, PROT_NONE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED |
				 MAP_NORESERVE, -1, 0) == MAP_FAILED)
				die("mmap fixed");
			s->m = moved;
			s->id = odp_reg(fd, s->m, S_LEN);
			if (s->id < 0)
				die("register");
		} else {				/* fork */
			pid_t pid;
			int st;

			counts[6]++;
			fflush(stdout);
			pid = fork();
			if (pid < 0)
				die("fork");
			if (!pid)
				_exit(stress_child(rnd(&rs)));
			waitpid(pid, &st, 0);
			if (!WIFEXITED(st) || WEXITSTATUS(st))
				mismatch("fork child", op, st);
		}
	}
	/* last: every present byte of every slot, by the CPU and device */
	for (i = 0; i < S_SLOTS; i++) {
		struct slot *s = &slots[i];
		size_t q, o, n;

		for (q = 0; q < S_PAGES; q++) {
			if (!s->present[q])
				continue;
			if (memcmp(s->m + q * pg, s->shadow + q * pg, pg))
				mismatch("final CPU view", op, (int)q);
			/* in edu transfers below 4096 bytes (QEMU 7.2's) */
			for (o = 0; o < pg; o += n) {
				n = pg - o < 4000 ? pg - o : 4000;
				ret = dev_read(fd, s->id, q * pg + o, got, n);
				if (ret ||
				    memcmp(got, s->shadow + q * pg + o, n))
					mismatch("final device view", op, ret);
			}
		}
		slot_drop(fd, s);
	}
	munmap(arena, 2 * S_SLOTS * S_LEN);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	diag("stress: %lu ops in %.1f s: device writes %lu, reads %lu, CPU writes %lu, madvise %lu, munmap/refill %lu, mremap %lu, fork %lu; checked %lu writes, %lu reads, %lu -EFAULT",
	     ops, (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9,
	     counts[0], counts[1], counts[2], counts[3], counts[4], counts[5],
	     counts[6], s_writes, s_reads, s_efault);
	printf(KTAP "# summary: odp ops %lu mismatches %lu seed %u\n", ops,
	       mismatches, seed);
	check(!mismatches, "stress_shadow_model", "%lu mismatches",
	      mismatches);
}

int main(int argc, char **argv)
{
	unsigned long ops = 20000;
	uint32_t seed = 20241110;
	struct ts_odp_stats st0, st;
	int expect_api = -1, fd, c;

	while ((c = getopt(argc, argv, "n:s:a:v")) != -1) {
		switch (c) {
		case 'v':
			verbose = 1;
			break;
		case 'n':
			ops = strtoul(optarg, NULL, 0);
			break;
		case 's':
			seed = strtoul(optarg, NULL, 0);
			break;
		case 'a':
			expect_api = atoi(optarg);
			break;
		default:
			fprintf(stderr, "usage: %s [-n ops] [-s seed] [-a expect_api]\n",
				argv[0]);
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	pg = sysconf(_SC_PAGESIZE);
	huge_sz = thp_size();
	diag("page %lu bytes, huge page %lu bytes", pg, huge_sz);
	fd = odp_open();
	if (ioctl(fd, TS_ODP_STATS, &st0))
		die("stats");
	t_untouched(fd);
	t_dontneed(fd);
	t_fork(fd);
	t_mprotect(fd);
	t_munmap(fd);
	t_memfd(fd);
	t_thp(fd);
	t_flush(fd);
	stress(fd, ops, seed);
	if (ioctl(fd, TS_ODP_STATS, &st))
		die("stats");
	diag("figures: faults %llu (retried %llu), pages mapped %llu, syncs %llu, invalidations %llu, pages unmapped %llu, edu DMAs %llu, regions through one IOVA range %llu, through dma_list %llu; edu interrupts late %llu",
	     st.faults, st.fault_retries, st.pages_mapped, st.syncs,
	     st.invalidations, st.pages_unmapped, st.dmas, st.iova_regions,
	     st.list_regions, st.late_irqs);
	if (expect_api >= 0)
		check(expect_api ? st.iova_regions && !st.list_regions :
		      st.list_regions && !st.iova_regions,
		      expect_api ? "path_one_iova_range" : "path_dma_list",
		      "iova %llu dma_list %llu", st.iova_regions,
		      st.list_regions);
	close(fd);
	return failures ? 1 : 0;
}

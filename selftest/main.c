// SPDX-License-Identifier: GPL-2.0
/*
 * twostep self-test: module entry. Binds the edu device, runs the KTAP
 * suite and fails to load when any case failed, so that both `insmod` and
 * the kernel log tell the result.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/string.h>

#include "edu.h"
#include "ktap.h"
#include "odp.h"

static int expect_api = -1;
module_param(expect_api, int, 0444);
MODULE_PARM_DESC(expect_api,
		 "1: the two-step API must be available, 0: it must not, -1: skip what cannot run (default)");

static char *cases;
module_param(cases, charp, 0444);
MODULE_PARM_DESC(cases, "comma-separated case names to run (default: all)");

static uint seed = 20241110;
module_param(seed, uint, 0444);
MODULE_PARM_DESC(seed, "seed of the data patterns and page shuffles");

static uint stress_ops = 100000;
module_param(stress_ops, uint, 0444);
MODULE_PARM_DESC(stress_ops, "operations of the shadow-model stress case");

static uint stress_seed;
module_param(stress_seed, uint, 0444);
MODULE_PARM_DESC(stress_seed,
		 "seed of the stress sequence (default: the seed parameter)");

static uint conc_ops = 2000;
module_param(conc_ops, uint, 0444);
MODULE_PARM_DESC(conc_ops, "iterations of each concurrency worker");

static bool bench;
module_param(bench, bool, 0444);
MODULE_PARM_DESC(bench, "run the benchmark instead of the test cases");

static uint bench_reps = 9;
module_param(bench_reps, uint, 0444);
MODULE_PARM_DESC(bench_reps, "repetitions of each benchmark measurement");

static uint bench_max_n = 4096;
module_param(bench_max_n, uint, 0444);
MODULE_PARM_DESC(bench_max_n, "largest number of pages benchmarked");

static uint bench_mask = 0x3ff;
module_param(bench_mask, uint, 0444);
MODULE_PARM_DESC(bench_mask, "benchmark methods to run, one bit each (default: all)");

static bool detach_on_remove = true;
module_param(detach_on_remove, bool, 0444);
MODULE_PARM_DESC(detach_on_remove,
		 "call twostep_detach() when the device is unbound (0 leaves it to twostep's unbind notifier)");

static uint hw_dma_bits = 40;
module_param(hw_dma_bits, uint, 0444);
MODULE_PARM_DESC(hw_dma_bits,
		 "address bits the edu device really drives (its dma_mask property); the DMA-API mask is set to it");

static int write_only = -1;
module_param(write_only, int, 0444);
MODULE_PARM_DESC(write_only,
		 "1: the IOMMU driver enforces write-only mappings, 0: it does not (Intel), -1: unknown");

static uint faults_per_window = 3;
module_param(faults_per_window, uint, 0444);
MODULE_PARM_DESC(faults_per_window,
		 "blocked accesses the security case makes per 5 s, the IOMMU driver's fault log's rate limit (3: Intel, three lines a fault; 1: an SMMUv3, an event per 4 bytes)");

static ulong large_range = 64UL << 30;
module_param(large_range, ulong, 0444);
MODULE_PARM_DESC(large_range, "bytes of the largest range case (0: skip it)");

static uint neighbour_rounds = 100000;
module_param(neighbour_rounds, uint, 0444);
MODULE_PARM_DESC(neighbour_rounds,
		 "link/unlink rounds of each thread of the neighbour race case");

static char *backend;
module_param(backend, charp, 0444);
MODULE_PARM_DESC(backend,
		 "implementations the fidelity cases run against: twostep, native or both (default: both where the kernel has its own)");

static int p2p = -1;
module_param(p2p, int, 0444);
MODULE_PARM_DESC(p2p,
		 "1: an ivshmem-plain device (P2P cases) must be there, -1: skip the P2P cases without one (default)");

/* The "backend" parameter as TS_BACKEND_* bits; 0 when it names nothing. */
static unsigned int ts_backends(void)
{
	bool native = TS_HAVE_NATIVE;

	if (!backend || !*backend)
		return TS_BACKEND_TWOSTEP | (native ? TS_BACKEND_NATIVE : 0);
	if (!strcmp(backend, "twostep"))
		return TS_BACKEND_TWOSTEP;
	if (native && !strcmp(backend, "native"))
		return TS_BACKEND_NATIVE;
	if (native && !strcmp(backend, "both"))
		return TS_BACKEND_TWOSTEP | TS_BACKEND_NATIVE;
	return 0;
}

static int __init twostep_selftest_init(void)
{
	struct edu_dev *edu;
	struct ts t = { };
	int ret, failed;

	if (hw_dma_bits < 33 || hw_dma_bits > 64) {
		pr_err("hw_dma_bits must be 33..64\n");
		return -EINVAL;
	}
	t.backends = ts_backends();
	if (!t.backends) {
		pr_err("backend must be twostep%s\n",
		       TS_HAVE_NATIVE ? ", native or both" :
		       " (this kernel has no dma_iova_* of its own)");
		return -EINVAL;
	}
	ret = edu_driver_register(hw_dma_bits, detach_on_remove);
	if (ret)
		return ret;
	edu = edu_get(0);
	if (!edu) {
		ktap_line("KTAP version 1");
		ktap_line("1..0");
		ktap_line("Bail out! no edu device (PCI %04x:%04x) bound",
			  EDU_VENDOR, EDU_DEVICE);
		edu_driver_unregister();
		return -ENODEV;
	}
	t.edu = edu;
	t.dev = &edu->pdev->dev;
	t.peer = edu_get(1);
	t.expect_api = expect_api;
	t.write_only = write_only;
	t.faults_per_window = max(faults_per_window, 1U);
	t.large_range = large_range;
	t.neighbour_rounds = neighbour_rounds;
	t.p2p = p2p;
	t.seed = seed;
	t.stress_ops = stress_ops;
	t.stress_seed = stress_seed ? stress_seed : seed;
	t.conc_ops = conc_ops;
	t.bench = bench;
	t.bench_reps = bench_reps;
	t.bench_max_n = bench_max_n;
	t.bench_mask = bench_mask;
	failed = ts_run_all(&t, cases);
	pr_info("self-test finished: %d case(s) failed\n", failed);
	if (failed) {
		edu_driver_unregister();
		return -EIO;
	}
	/* the ODP device, for the guest program */
	/* t.edu: the device may have been bound again by a case */
	ret = ts_odp_init(t.edu);
	if (ret) {
		pr_err("no ODP device: %d\n", ret);
		edu_driver_unregister();
		return ret;
	}
	return 0;
}

static void __exit twostep_selftest_exit(void)
{
	ts_odp_exit();
	edu_driver_unregister();
}

module_init(twostep_selftest_init);
module_exit(twostep_selftest_exit);

MODULE_LICENSE("GPL");
MODULE_AUTHOR("The twostep developers");
MODULE_DESCRIPTION("twostep self-test: DMA through two-step IOVA with QEMU's edu device");
MODULE_VERSION(TWOSTEP_VERSION);

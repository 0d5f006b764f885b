/* SPDX-License-Identifier: GPL-2.0 */
/*
 * twostep self-test: KTAP version 1 output and the case framework. Every
 * line goes to the kernel log with one fixed prefix, so a reader of dmesg or
 * of a serial console can cut the report out with a single pattern.
 */
#ifndef _TWOSTEP_KTAP_H
#define _TWOSTEP_KTAP_H

#include <linux/dma-mapping.h>
#include <linux/printk.h>
#include <linux/types.h>

#include "edu.h"

#define KTAP_PREFIX "twostep-ktap: "

#define ktap_line(fmt, ...) pr_info(KTAP_PREFIX fmt "\n", ##__VA_ARGS__)

/* Returned by a case that cannot run here; ts->skip says why. */
#define TS_SKIP 1

/**
 * struct ts - state shared by the cases of one run
 * @edu: the bound device
 * @dev: its struct device
 * @peer: a second edu device in the same IOMMU group, or NULL
 * @api: twostep_iova_try_alloc() works for @dev
 * @expect_api: 1 the platform must offer the API, 0 it must not, -1 unknown
 * @failed: assertions failed in the current case
 * @skip: reason for TS_SKIP
 * @seed: pattern seed, printed for reproduction
 * @stress_ops: operations of the shadow-model stress case
 * @stress_seed: seed of the stress sequence, printed for reproduction
 * @conc_ops: iterations of each worker of the concurrency case
 * @edge_read_dropped: the platform loses the first byte of a device read
 *                     that starts on the last byte of a page
 * @edge_write_dropped: the platform loses the first byte of a device
 *                      write that starts on the last byte of a page
 * @bench: run the benchmark instead of the cases
 * @bench_reps: repetitions of each benchmark measurement
 * @bench_max_n: largest number of pages benchmarked
 * @bench_mask: benchmark methods to run
 * @write_only: 1 the IOMMU driver enforces write-only mappings, 0 not, -1 ?
 * @faults_per_window: blocked accesses the security case makes per 5 s
 * @large_range: bytes of the largest range case
 * @neighbour_rounds: rounds of each thread of the neighbour race case
 * @backends: implementations the fidelity cases run against
 *            (TS_BACKEND_TWOSTEP, TS_BACKEND_NATIVE)
 * @p2p: 1 an ivshmem-plain device must be there for the P2P cases, 0 or -1
 *       not (skipped without one)
 * @data: the running case's &struct ts_case.data
 */
struct ts {
	struct edu_dev *edu;
	struct device *dev;
	struct edu_dev *peer;
	bool api;
	int expect_api;
	unsigned int failed;
	char skip[96];
	u32 seed;
	unsigned int stress_ops;
	u32 stress_seed;
	unsigned int conc_ops;
	bool edge_write_dropped;
	bool edge_read_dropped;
	bool bench;
	unsigned int bench_reps;
	unsigned int bench_max_n;
	unsigned int bench_mask;
	int write_only;
	unsigned int faults_per_window;
	unsigned long large_range;
	unsigned int neighbour_rounds;
	unsigned int backends;
	int p2p;
	const void *data;
};

/* The kernel has its own dma_iova_*() (upstream defines this flag beside) */
#ifdef DMA_IOVA_USE_SWIOTLB
#define TS_HAVE_NATIVE		1
#else
#define TS_HAVE_NATIVE		0
#endif

#define TS_BACKEND_TWOSTEP	BIT(0)
#define TS_BACKEND_NATIVE	BIT(1)

/**
 * struct ts_case - one KTAP case
 * @name: KTAP name, also what the "cases" parameter selects
 * @run: returns 0 (passed unless an assertion failed) or TS_SKIP
 * @needs_api: skipped (or failed, when the API is expected) without twostep
 * @data: what the case describes, for a @run shared by several cases
 * @on_request: runs only when the "cases" parameter names it
 */
struct ts_case {
	const char *name;
	int (*run)(struct ts *t);
	bool needs_api;
	const void *data;
	bool on_request;
};

extern const struct ts_case ts_robust_cases[];
extern const unsigned int ts_robust_ncases;
extern const struct ts_case ts_safety_cases[];
extern const unsigned int ts_safety_ncases;
extern const struct ts_case ts_group_cases[];
extern const unsigned int ts_group_ncases;
extern const struct ts_case ts_device_cases[];
extern const unsigned int ts_device_ncases;
extern const struct ts_case ts_fidelity_cases[];
extern const unsigned int ts_fidelity_ncases;
extern const struct ts_case ts_checker_cases[];
extern const unsigned int ts_checker_ncases;
extern const struct ts_case ts_bench_cases[];
extern const unsigned int ts_bench_ncases;
extern const struct ts_case ts_p2p_cases[];
extern const unsigned int ts_p2p_ncases;

/* Record a failed assertion with its location; evaluates to @cond. */
#define TS_EXPECT(t, cond, fmt, ...) ({					\
	bool __ok = !!(cond);						\
	if (!__ok) {							\
		ktap_line("    # %s:%d: failed: %s: " fmt, __func__,	\
			  __LINE__, #cond, ##__VA_ARGS__);		\
		(t)->failed++;						\
	}								\
	__ok;								\
})

#define ts_diag(fmt, ...) ktap_line("    # " fmt, ##__VA_ARGS__)

int ts_run_all(struct ts *t, const char *filter);

#endif /* _TWOSTEP_KTAP_H */

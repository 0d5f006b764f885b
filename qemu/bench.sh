#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The benchmark: boot the Intel vIOMMU guest in strict mode, lazy mode and
# with caching-mode=on (one vCPU, TCG, QEMU tracing IOTLB invalidations) on
# TS_BENCH_KERNEL (default 7.3, whose own dma_iova_* is timed beside
# twostep as "native"; 6.1 or 6.12 time twostep alone),
# run the self-test's benchmark mode in each, and write
#   results/bench/bench.csv, bench.md, bench-<mode>.png
# Figures are reported, never asserted. TS_BENCH_REPS (default 9) and
# TS_BENCH_MAX_N (default 4096) size the run; TS_BENCH_MODES (default
# "strict lazy cm") picks the modes. The suite's bench-smoke tier runs the
# same pipeline (ts_bench_run), small.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/bench-lib.sh"

mkdir -p "$TS_RESULTS"
ts_install_deps
ts_use_kernel "$TS_BENCH_KERNEL"
ts_build_modules
ts_build_initramfs
# shellcheck disable=SC2086 # a list of modes
ts_bench_run "$TS_RESULTS/bench" ${TS_BENCH_MODES:-strict lazy cm}

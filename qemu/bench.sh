#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The benchmark: boot the Intel vIOMMU guest in strict mode, lazy mode,
# with caching-mode=on and in passthrough (iommu=pt: the workloads only,
# through the fallback) (two vCPUs, QEMU tracing IOTLB invalidations; KVM
# where /dev/kvm works, else TCG, TWOSTEP_ACCEL forces one) on
# TS_BENCH_KERNEL (default 7.3, whose own dma_iova_* is timed beside
# twostep as "native"; 6.1 or 6.12 time twostep alone); with
# TS_BENCH_ARCH=arm64 the arm64 kernel's guest behind QEMU's SMMUv3
# (strict, lazy, passthrough; QEMU tracing its TLB invalidation commands),
# run the self-test's benchmark mode in each, and write
#   results/bench/bench.csv (its last column the accelerator), bench.md,
#   bench-<mode>.png
# Figures are reported, never asserted. TS_BENCH_REPS (default 9) and
# TS_BENCH_MAX_N (default 4096) size the run; TS_BENCH_MODES (default
# "strict lazy cm pt") picks the modes. The suite's bench-smoke tier runs the
# same pipeline (ts_bench_run), small. See doc/benchmarks.md.
#
#   qemu/bench.sh --compare OLD.csv NEW.csv
#
# compares two runs' medians, and refuses runs of different accelerators.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/bench-lib.sh"

if [ "${1:-}" = --compare ]; then
	[ $# -eq 3 ] || ts_die "usage: qemu/bench.sh --compare OLD.csv NEW.csv"
	ts_bench_compare "$2" "$3"
	exit
fi
[ $# -eq 0 ] || ts_die "usage: qemu/bench.sh [--compare OLD.csv NEW.csv]"

mkdir -p "$TS_RESULTS"
# shellcheck disable=SC2046 # a list of packages
[ "$TS_BENCH_ARCH" = amd64 ] || ts_need_packages $(ts_arch_packages "$TS_BENCH_ARCH")
ts_install_deps
ts_accel_init
ts_log "$(ts_accel_line)"
ts_use_kernel "$TS_BENCH_KNAME"
TS_ARCH=$TS_BENCH_ARCH
ts_build_modules
ts_build_initramfs
# shellcheck disable=SC2086 # a list of modes
ts_bench_run "$TS_RESULTS/bench" ${TS_BENCH_MODES:-$TS_BENCH_MODES_ALL}

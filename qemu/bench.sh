#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The benchmark: boot the Intel vIOMMU guest in strict mode, lazy mode and
# with caching-mode=on (one vCPU, TCG, QEMU tracing IOTLB invalidations),
# run the self-test's benchmark mode in each, and write
#   results/bench/bench.csv, bench.md, bench-<mode>.png
# Figures are reported, never asserted. TS_BENCH_REPS (default 9) and
# TS_BENCH_MAX_N (default 4096) size the run.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/bench-lib.sh"

out=$TS_RESULTS/bench
mkdir -p "$out"
ts_install_deps
ts_need_packages gnuplot-nox
ts_build_modules
ts_build_initramfs

csv=$out/bench.csv
echo "$TS_BENCH_CSV_HEADER" >"$csv"
status=0
for cfg in bench-strict bench-lazy bench-cm; do
	ts_log "benchmark: $cfg"
	rc=0
	ts_boot "$cfg" || rc=$?
	out=$(ts_parse "$cfg" "$rc")
	read -r p f s <<<"$(printf '%s\n' "$out" | tail -n 1)"
	if [ "$f" -ne 0 ]; then
		printf '%s\n' "$out" | sed '$d' | grep -v ' ok  \| # ' >&2 || true
		ts_log "benchmark $cfg: the guest run failed (console: $TS_RESULTS/$cfg.log)"
		status=1
	fi
	ts_bench_rows "$cfg" >>"$csv"
done

{
	echo "# twostep benchmark"
	echo
	echo "Debian $(cat /etc/debian_version) host, guest kernel $TS_KREL under QEMU $(qemu-system-x86_64 --version | head -n 1 | awk '{print $4}') TCG, one vCPU, edu device behind the Intel vIOMMU."
	echo "Medians over the repetitions in ns per page; IOTLB invalidations counted from QEMU's vtd_inv_desc_iotlb_* trace events per call of the phase (map: try_alloc + links + sync, or N x dma_map_page, ...; unmap: destroy, unlink + free, N x dma_unmap_page, ...)."
	echo
	echo "## Against the targets"
	echo
	for mode in strict lazy cm; do ts_bench_targets "$csv" "$mode"; done
	ts_bench_markdown "$csv"
} >"$out/bench.md"
for mode in strict lazy cm; do
	ts_bench_plot "$csv" "$out/bench-$mode.png" "$mode"
done
cat "$out/bench.md" | sed -n '1,12p'
echo "results: $csv, $out/bench.md, $out/bench-{strict,lazy,cm}.png"
exit $status

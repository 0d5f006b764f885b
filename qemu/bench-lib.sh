# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
# Benchmark results: turn a bench guest's console (the "# bench" KTAP
# diagnostic lines) and QEMU's trace (phase markers written by the guest to
# edu's config dword 0x40, and the vIOMMU's IOTLB invalidation descriptors)
# into CSV rows, a Markdown table and a log-log plot. Sourced after lib.sh.

TS_BENCH_METHODS="twostep twostep_unlink classic classic_sg floor_map_pages floor_contig"
TS_BENCH_SIZES="1 4 16 64 256 1024 4096"
TS_BENCH_CSV_HEADER="mode,method,n,reps,map_ns_page,map_min,map_max,unmap_ns_page,unmap_min,unmap_max,map_vs_classic,unmap_vs_classic,inval_map_per_call,inval_unmap_per_call"

# CSV rows of one bench configuration, on stdout.
ts_bench_rows() {
	local cfg=$1 mode=${1#bench-}
	awk -v mode="$mode" -v methods="$TS_BENCH_METHODS" \
		-v sizes="$TS_BENCH_SIZES" -v prefix="$TS_KTAP_PREFIX" '
	function hex(s,   i, c, v) {
		v = 0; s = tolower(s); sub(/^0x/, "", s)
		for (i = 1; i <= length(s); i++) {
			c = index("0123456789abcdef", substr(s, i, 1)) - 1
			v = v * 16 + c
		}
		return v
	}
	BEGIN {
		nm = split(methods, mname, " "); ns = split(sizes, size, " ")
		phase = ""
	}
	# QEMU trace: phase markers and invalidations
	FILENAME ~ /\.trace$/ {
		if ($0 ~ /^pci_cfg_write edu / && $0 ~ /@0x40 <- 0x54/) {
			v = hex($NF)
			m = int(v / 65536) % 256; si = int(v / 4096) % 16
			ph = int(v / 256) % 16; rep = v % 256
			phase = (ph < 2) ? (m + 1) SUBSEP (si + 1) SUBSEP ph : ""
			if (ph == 0) calls[m + 1, si + 1]++
			next
		}
		if ($0 ~ /^vtd_inv_desc_iotlb_/ && phase != "") inval[phase]++
		next
	}
	# guest console: the figures
	index($0, prefix "# bench method=") {
		line = substr($0, index($0, "method="))
		sub(/\r$/, "", line)
		n = split(line, kv, " ")
		delete f
		for (i = 1; i <= n; i++) { split(kv[i], p, "="); f[p[1]] = p[2] }
		key = f["method"] SUBSEP f["n"]
		for (k in f) fig[key, k] = f[k]
		seen[key] = 1
	}
	END {
		for (mi = 1; mi <= nm; mi++) for (si = 1; si <= ns; si++) {
			key = mname[mi] SUBSEP size[si]
			if (!(key in seen)) continue
			ck = "classic" SUBSEP size[si]
			mr = (fig[ck, "map_ns_page"] > 0) ? fig[key, "map_ns_page"] / fig[ck, "map_ns_page"] : 0
			ur = (fig[ck, "unmap_ns_page"] > 0) ? fig[key, "unmap_ns_page"] / fig[ck, "unmap_ns_page"] : 0
			c = calls[mi, si]
			im = c ? inval[mi, si, 0] / c : -1
			iu = c ? inval[mi, si, 1] / c : -1
			printf "%s,%s,%d,%d,%s,%s,%s,%s,%s,%s,%.4f,%.4f,%.2f,%.2f\n",
				mode, mname[mi], size[si], fig[key, "reps"],
				fig[key, "map_ns_page"], fig[key, "map_min"],
				fig[key, "map_max"], fig[key, "unmap_ns_page"],
				fig[key, "unmap_min"], fig[key, "unmap_max"],
				mr, ur, im, iu
		}
	}' "$TS_RESULTS/$cfg.trace" "$TS_RESULTS/$cfg.log"
}

# Markdown table of a CSV file.
ts_bench_markdown() {
	awk -F, '
	NR == 1 { next }
	$1 != mode {
		mode = $1
		printf "\n### %s\n\n", mode
		print "| method | N | map ns/page (min-max) | unmap ns/page (min-max) | map vs classic | unmap vs classic | IOTLB inval. map / unmap per call |"
		print "|---|---:|---:|---:|---:|---:|---:|"
	}
	{
		printf "| %s | %d | %s (%s-%s) | %s (%s-%s) | %.3f | %.4f | %.2f / %.2f |\n",
			$2, $3, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14
	}' "$1"
}

# The targets at N = 256 in one mode, from a CSV file (informational).
ts_bench_targets() {
	awk -F, -v mode="$2" '
	$1 == mode && $3 == 256 { map[$2] = $5; unmap[$2] = $8; iu[$2] = $14; im[$2] = $13 }
	END {
		if (!("twostep" in map)) exit
		printf "- %s, N = 256: unmap twostep/classic %.4f (target <= 0.01); ", mode, unmap["twostep"] / unmap["classic"]
		printf "map twostep/classic %.3f (target <= 0.15); ", map["twostep"] / map["classic"]
		printf "map twostep/floor_map_pages %.2f (target <= 1.3); ", map["twostep"] / map["floor_map_pages"]
		printf "IOTLB invalidations per twostep sync %.2f, per destroy %.2f\n", im["twostep"], iu["twostep"]
	}' "$1"
}

# One PNG per mode: ns/page against N, log-log, map and unmap side by side.
ts_bench_plot() {
	local csv=$1 out=$2 mode=$3 m plots_map="" plots_unmap=""
	for m in $TS_BENCH_METHODS; do
		plots_map+="'$csv' using (strcol(1) eq '$mode' && strcol(2) eq '$m' ? \$3 : NaN):5 with linespoints title '$m', "
		plots_unmap+="'$csv' using (strcol(1) eq '$mode' && strcol(2) eq '$m' ? \$3 : NaN):8 with linespoints title '$m', "
	done
	gnuplot <<EOF
set terminal pngcairo size 1400,560 noenhanced
set output '$out'
set datafile separator ','
set logscale xy
set grid
set xlabel 'N (scattered 4 KiB pages)'
set ylabel 'ns per page (median)'
set key outside right
set multiplot layout 1,2 title 'twostep benchmark, Intel vIOMMU, $mode (QEMU TCG guest)'
set title 'map side'
plot ${plots_map%, }
set title 'unmap side'
plot ${plots_unmap%, }
unset multiplot
EOF
}

# The test suite's check of a small benchmark run: a well-formed table and
# one IOTLB invalidation per twostep unmap call (counted by QEMU, not
# timed). Prints twostep-check style lines and "passed failed" last.
ts_bench_smoke_checks() {
	local cfg=$1 rows
	rows=$(ts_bench_rows "$cfg")
	awk -F, -v methods="$TS_BENCH_METHODS" '
	function check(ok, name) {
		printf "  %-9s %s %s\n", "bench", ok ? "ok  " : "FAIL", name
		if (ok) pass++; else fail++
	}
	{
		rows++
		for (i = 4; i <= 14; i++) if ($i !~ /^-?[0-9]+(\.[0-9]+)?$/) bad++
		if ($5 <= 0 || $8 <= 0) bad++
		if ($2 ~ /^twostep/) {
			tw++
			if ($14 != 1) inval_bad++
			if ($13 > 1) inval_bad++
		}
		m[$2] = 1
	}
	END {
		nm = split(methods, mm, " ")
		for (i = 1; i <= nm; i++) if (!(mm[i] in m)) bad++
		check(rows == nm * 3 && !bad, sprintf("bench_table_well_formed (%d rows)", rows))
		check(tw > 0 && !inval_bad, "bench_one_iotlb_invalidation_per_twostep_unmap")
		printf "%d %d\n", pass, fail
	}' <<<"$rows"
}

# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
# Benchmark results: turn a bench guest's console (the "# bench" KTAP
# diagnostic lines) and QEMU's trace (phase markers written by the guest to
# edu's config dword 0x40, and the vIOMMU's IOTLB invalidation descriptors)
# into CSV rows, a Markdown table and a log-log plot. Sourced after lib.sh.

# The guest kernel of the benchmark: 7.3 (Debian 13 backports, whose own
# dma_iova_* is timed beside twostep) by default, or 6.1 / 6.12; its
# architecture TS_BENCH_ARCH: amd64 (the Intel vIOMMU, the default) or
# arm64 (the virt machine's SMMUv3). ts_bench_kernel K sets the kernel,
# the methods its guest times, in the self-test's order (the trace's phase
# markers carry the index), and what follows from the architecture: the
# kernel's name for ts_kernel_for (TS_BENCH_KNAME), the configurations'
# prefix, every mode (caching mode is the Intel vIOMMU's), QEMU, the IOMMU
# in words and the trace events its invalidations are counted from.
TS_BENCH_ARCH=${TS_BENCH_ARCH:-amd64}
case "$TS_BENCH_ARCH" in
amd64|arm64) ;;
*) ts_die "BENCH_ARCH=$TS_BENCH_ARCH: have amd64 and arm64" ;;
esac
ts_bench_kernel() {
	TS_BENCH_KERNEL=$1
	TS_BENCH_METHODS="twostep twostep_unlink classic classic_sg floor_map_pages floor_contig twostep_contig"
	if [ "$TS_BENCH_KERNEL" = 7.3 ]; then
		TS_BENCH_METHODS="$TS_BENCH_METHODS native native_unlink native_contig"
	fi
	if [ "$TS_BENCH_ARCH" = arm64 ]; then
		TS_BENCH_KNAME=$1/arm64 TS_BENCH_PREFIX=bench-arm64
		TS_BENCH_MODES_ALL="strict lazy pt"
		TS_BENCH_QEMU=qemu-system-aarch64 TS_BENCH_IOMMU="SMMUv3 (arm64)"
		TS_BENCH_INVAL_EVENTS="smmuv3 TLB invalidation commands (smmuv3_*range_inval, smmuv3_cmdq_tlbi_*)"
	else
		TS_BENCH_KNAME=$1 TS_BENCH_PREFIX=bench
		TS_BENCH_MODES_ALL="strict lazy cm pt"
		TS_BENCH_QEMU=qemu-system-x86_64 TS_BENCH_IOMMU="Intel vIOMMU"
		TS_BENCH_INVAL_EVENTS="vtd_inv_desc_iotlb_*"
	fi
}
ts_bench_kernel "${TS_BENCH_KERNEL:-7.3}"
TS_BENCH_SIZES="1 4 16 64 256 512 1024 4096"
# The last column names the accelerator the guest ran under (tcg, kvm):
# figures of different accelerators are not compared (ts_bench_compare).
TS_BENCH_CSV_HEADER="mode,method,n,reps,map_ns_page,map_min,map_max,unmap_ns_page,unmap_min,unmap_max,map_vs_classic,unmap_vs_classic,inval_map_per_call,inval_unmap_per_call,accel"

# The sizes a run covers: those of TS_BENCH_SIZES up to TS_BENCH_MAX_N, as
# the self-test picks them.
ts_bench_sizes() {
	local n out=""
	for n in $TS_BENCH_SIZES; do
		[ "$n" -le "${TS_BENCH_MAX_N:-4096}" ] && out+="$n "
	done
	echo "${out% }"
}

# The configuration of benchmark MODE on TS_BENCH_KERNEL and
# TS_BENCH_ARCH.
ts_bench_cfg() {
	if [ "$TS_BENCH_KERNEL" = 6.1 ]; then
		echo "$TS_BENCH_PREFIX-$1"
	else
		echo "$TS_BENCH_PREFIX-$1@$TS_BENCH_KERNEL"
	fi
}
# The IOMMU's invalidations in QEMU's trace: the Intel vIOMMU's IOTLB
# invalidation descriptors, the SMMUv3's TLB invalidation commands.
TS_BENCH_INVAL_RE='^(vtd_inv_desc_iotlb_|smmuv3_(s1_)?range_inval|smmuv3_cmdq_tlbi_)'

# awk: hex("0x54...") is the number a QEMU trace line prints in hex (the
# guest's phase markers).
TS_BENCH_AWK_HEX='
	function hex(s,   i, c, v) {
		v = 0; s = tolower(s); sub(/^0x/, "", s)
		for (i = 1; i <= length(s); i++) {
			c = index("0123456789abcdef", substr(s, i, 1)) - 1
			v = v * 16 + c
		}
		return v
	}'

# CSV rows of one bench configuration, on stdout.
ts_bench_rows() {
	local cfg=$1 mode=${1#bench-} accel
	mode=${mode#arm64-}
	mode=${mode%@*}
	accel=$(ts_boot_accel "$cfg")
	awk -v mode="$mode" -v methods="$TS_BENCH_METHODS" -v accel="${accel%% *}" \
		-v inval_re="$TS_BENCH_INVAL_RE" \
		-v sizes="$TS_BENCH_SIZES" -v prefix="$TS_KTAP_PREFIX" \
		"$TS_BENCH_AWK_HEX"'
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
		if ($0 ~ inval_re && phase != "") inval[phase]++
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
			printf "%s,%s,%d,%d,%s,%s,%s,%s,%s,%s,%.4f,%.4f,%.2f,%.2f,%s\n",
				mode, mname[mi], size[si], fig[key, "reps"],
				fig[key, "map_ns_page"], fig[key, "map_min"],
				fig[key, "map_max"], fig[key, "unmap_ns_page"],
				fig[key, "unmap_min"], fig[key, "unmap_max"],
				mr, ur, im, iu, accel
		}
	}' "$TS_RESULTS/$cfg.trace" <(ts_console "$TS_RESULTS/$cfg.log")
}

# The workloads' figures (the self-test's "# workload", "# smp",
# "# profile range" and "# profile refused" lines) of one bench
# configuration, as CSV rows of TS_BENCH_WORK_HEADER on stdout: svm_fault
# in us per fault, block in ns per request (n: segments), odp in ns per
# invalidation of a region (n: its entries) and odp_inval in IOTLB
# invalidations per invalidation (counted from QEMU's trace between the
# guest's markers), smp_one and smp_two in ranges per second (n: the
# range's bytes); try_alloc, range_link, range_map (try_alloc + link +
# sync), range_destroy and range_whole (the four calls timed as one) in ns
# per call (n: pages of the range, one link); refused in ns per try_alloc
# that says no (passthrough).
TS_BENCH_WORK_HEADER="mode,workload,method,n,value,unit,accel"
ts_bench_work_rows() {
	local cfg=$1 mode=${1#bench-} accel
	mode=${mode#arm64-}
	mode=${mode%@*}
	accel=$(ts_boot_accel "$cfg")
	# the odp phases: markers 0x55MMRRPP, invalidations in between
	awk -v mode="$mode" -v accel="${accel%% *}" \
		-v inval_re="$TS_BENCH_INVAL_RE" "$TS_BENCH_AWK_HEX"'
	BEGIN { split("twostep_range twostep_entries native_entries", name, " ") }
	/^pci_cfg_write edu / && /@0x40 <- 0x55/ {
		v = hex($NF); m = int(v / 65536) % 256 + 1; ph = v % 256
		if (ph == 0) { cur = m; calls[m]++ } else cur = 0
		next
	}
	$0 ~ inval_re && cur { inval[cur]++ }
	END {
		for (m = 1; m <= 3; m++)
			if (calls[m])
				printf "%s,odp_inval,%s,-,%.2f,invalidations,%s\n",
					mode, name[m], inval[m] / calls[m], accel
	}' "$TS_RESULTS/$cfg.trace"
	ts_console "$TS_RESULTS/$cfg.log" | awk -v mode="$mode" \
		-v accel="${accel%% *}" -v prefix="$TS_KTAP_PREFIX" '
	function kv(s,   n, i, p) {
		delete f
		n = split(s, w, " ")
		for (i = 1; i <= n; i++) if (split(w[i], p, "=") == 2) f[p[1]] = p[2]
	}
	function row(wl, m, n, v, unit) {
		printf "%s,%s,%s,%s,%s,%s,%s\n", mode, wl, m, n, v, unit, accel
	}
	!index($0, prefix "# ") { next }
	{ line = substr($0, index($0, prefix "# ") + length(prefix) + 2) }
	line ~ /^workload svm_fault / { kv(line); row("svm_fault", f["method"], f["n"], f["us"], "us") }
	line ~ /^workload block / { kv(line); row("block", f["method"], f["n"], f["ns"], "ns") }
	line ~ /^workload odp / { kv(line); row("odp", f["method"], f["n"], f["ns"], "ns") }
	line ~ /^smp method=/ {
		kv(line)
		row("smp_one", f["method"], f["size"], f["one"], "ranges/s")
		row("smp_two", f["method"], f["size"], f["two"], "ranges/s")
	}
	line ~ /^profile range n=/ {
		# profile range n=16: twostep try_alloc 1 link 2 sync 3 destroy 4 whole 5 ns
		n = line; sub(/^profile range n=/, "", n); sub(/:.*/, "", n)
		split(line, w, " ")
		row("try_alloc", w[4], n, w[6], "ns")
		row("range_link", w[4], n, w[8], "ns")
		row("range_map", w[4], n, w[6] + w[8] + w[10], "ns")
		row("range_destroy", w[4], n, w[12], "ns")
		row("range_whole", w[4], n, w[14], "ns")
	}
	line ~ /^profile refused: / {
		# profile refused: twostep 1 ns
		split(line, w, " ")
		row("refused", w[3], "-", w[4], "ns")
	}'
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

# The targets in MODE, from bench.csv and workloads.csv: one line each,
#   target NAME MODE ratio R met|NOT met
# R is twostep over native (7.3; for ranges per second native over
# twostep, so that below 1 is faster everywhere), or on 6.1 and 6.12
# twostep's map plus unmap over dma_map_sgtable()'s; the verdict is taken
# on R as printed (two decimals). A figure this run did not measure (a
# small run, a mode without it) prints "ratio - not in this run"; the
# tally line "- MODE: K of M targets met, J not in this run" counts both.
# With native: scattered links at N = 256 and 512 (map <= 1.05, unmap
# <= 1.00), one 2 MiB link (map <= 1.10, unmap <= 1.00), try_alloc of
# 4 KiB, 64 KiB and 2 MiB (<= 1.00), a whole range of 4 KiB and 64 KiB
# (try_alloc, link, sync, destroy: <= 1.05), a GPU fault and block
# requests of 1, 4, 16 and 32 segments (<= 1.05), two threads' ranges
# per second (twostep at least native's); in passthrough a refused
# try_alloc (<= 1.20). Without: map + unmap below dma_map_sgtable()'s for
# every N >= 16.
ts_bench_goals() {
	awk -F, -v mode="$3" -v sizes="$(ts_bench_sizes)" '
	function goal(name, r, limit,   ok, rr) {
		if (r == "") {
			printf "target %s %s ratio - not in this run\n", name, mode
			nmiss++
			return
		}
		rr = sprintf("%.2f", r)
		ok = rr + 0 <= limit
		printf "target %s %s ratio %s %s\n", name, mode, rr, ok ? "met" : "NOT met"
		ngoal++; if (ok) nmet++
	}
	function ratio(a, b) { return (a == "" || b == "" || b + 0 == 0 || a + 0 == 0) ? "" : a / b }
	function kib(n) { return n * 4 >= 1024 ? n * 4 / 1024 "m" : n * 4 "k" }
	FNR == 1 { file++; next }
	$1 != mode { next }
	# under icount a figure is a count of instructions, which only
	# interrupts add to: the scattered targets take the smallest of the
	# repetitions there, the median elsewhere
	file == 1 {
		ic = ($15 == "icount")
		map[$2, $3] = ic ? $6 : $5; unmap[$2, $3] = ic ? $9 : $8
		if ($2 == "native") native = 1
		next
	}
	{ w[$2, $3, $4] = $5; if ($3 == "native") native = 1 }
	END {
		if (mode == "pt") {
			if (native)
				goal("try_alloc_refused", ratio(w["refused", "twostep", "-"], w["refused", "native", "-"]), 1.2)
		} else if (native) {
			for (n = 256; n <= 512; n += 256) {
				goal("scattered_map_" n, ratio(map["twostep", n], map["native", n]), 1.05)
				goal("scattered_unmap_" n, ratio(unmap["twostep", n], unmap["native", n]), 1.0)
			}
			goal("link_2m_map", ratio(w["range_map", "twostep", 512], w["range_map", "native", 512]), 1.1)
			goal("link_2m_unmap", ratio(w["range_destroy", "twostep", 512], w["range_destroy", "native", 512]), 1.0)
			split("1 16 512", ta, " ")
			for (i = 1; i <= 3; i++)
				goal("try_alloc_" kib(ta[i]), ratio(w["try_alloc", "twostep", ta[i]], w["try_alloc", "native", ta[i]]), 1.0)
			for (i = 1; i <= 2; i++)
				goal("range_" kib(ta[i]), ratio(w["range_whole", "twostep", ta[i]], w["range_whole", "native", ta[i]]), 1.05)
			goal("svm_fault", ratio(w["svm_fault", "twostep", 512], w["svm_fault", "native", 512]), 1.05)
			split("1 4 16 32", bs, " ")
			for (i = 1; i <= 4; i++)
				goal("block_" bs[i], ratio(w["block", "twostep", bs[i]], w["block", "native", bs[i]]), 1.05)
			goal("smp_16k", ratio(w["smp_two", "native", 16384], w["smp_two", "twostep", 16384]), 1.0)
			goal("smp_2m", ratio(w["smp_two", "native", 2097152], w["smp_two", "twostep", 2097152]), 1.0)
		} else {
			ns = split(sizes, size, " ")
			for (i = 1; i <= ns; i++) {
				n = size[i]
				if (n < 16)
					continue
				goal("map_unmap_vs_sgtable_" n,
				     ratio(map["twostep", n] + unmap["twostep", n], map["classic_sg", n] + unmap["classic_sg", n]), 1.0)
			}
		}
		for (k in w) { split(k, p, SUBSEP); if (p[1] == "odp" && p[2] == "twostep_range") on = p[3] }
		if (on != "") {
			ref = native ? "native_entries" : "twostep_entries"
			printf "- %s, ODP invalidation of %d entries (informational): the twostep range unmap %s ns against %s ns per entry (%s): %.2f of the time; IOTLB invalidations %s against %s\n",
				mode, on, w["odp", "twostep_range", on], w["odp", ref, on], ref,
				ratio(w["odp", "twostep_range", on], w["odp", ref, on]) + 0,
				w["odp_inval", "twostep_range", "-"], w["odp_inval", ref, "-"]
		}
		for (s = 16384; s <= 2097152; s *= 128)
			if (w["smp_one", "twostep", s] > 0)
				printf "- %s, %d KiB ranges, two threads / one (informational): twostep %.2f%s\n", mode, s / 1024,
					w["smp_two", "twostep", s] / w["smp_one", "twostep", s],
					(w["smp_one", "native", s] > 0 ? sprintf(", native %.2f", w["smp_two", "native", s] / w["smp_one", "native", s]) : "")
		printf "- %s: %d of %d targets met, %d not in this run\n", mode, nmet, ngoal, nmiss
	}' "$1" "$2"
}

# The headline table: twostep / native (or, without native, twostep /
# classic DMA API) per workload, one column per mode. Below 1: twostep is
# faster (for throughput: slower).
ts_bench_headline() {
	local csv=$1 work=$2
	shift 2
	awk -F, -v modes="$*" '
	function r(a, b) { return (a == "" || b == "" || b + 0 == 0) ? "-" : sprintf("%.2f", a / b) }
	FNR == 1 { file++; next }
	file == 1 { map[$1, $2, $3] = $5; unmap[$1, $2, $3] = $8; next }
	{ w[$1, $2, $3, $4] = $5; if ($3 == "native") native = 1 }
	END {
		nm = split(modes, md, " ")
		ref = native ? "native" : "classic"
		printf "| workload (twostep / %s) |", ref
		for (i = 1; i <= nm; i++) printf " %s |", md[i]
		printf "\n|---|"
		for (i = 1; i <= nm; i++) printf "---:|"
		printf "\n"
		for (n = 256; n <= 512; n += 256) {
			printf "| %d scattered pages: map |", n
			for (i = 1; i <= nm; i++) printf " %s |", r(map[md[i], "twostep", n], map[md[i], ref, n])
			printf "\n| %d scattered pages: unmap |", n
			for (i = 1; i <= nm; i++) printf " %s |", r(unmap[md[i], "twostep", n], unmap[md[i], ref, n])
			printf "\n"
		}
		if (native) {
			printf "| one 2 MiB link: map |"
			for (i = 1; i <= nm; i++) printf " %s |", r(map[md[i], "twostep_contig", 512], map[md[i], "native_contig", 512])
			printf "\n| one 2 MiB link: unmap |"
			for (i = 1; i <= nm; i++) printf " %s |", r(unmap[md[i], "twostep_contig", 512], unmap[md[i], "native_contig", 512])
			printf "\n"
		}
		printf "| GPU SVM fault (2 MiB, 512 pages) |"
		for (i = 1; i <= nm; i++) printf " %s |", r(w[md[i], "svm_fault", "twostep", 512], w[md[i], "svm_fault", native ? "native" : "classic", 512])
		printf "\n"
		for (n = 1; n <= 32; n *= 4) {
			printf "| block request, %d segment(s) |", n
			for (i = 1; i <= nm; i++) printf " %s |", r(w[md[i], "block", "twostep", n], w[md[i], "block", native ? "native" : "classic", n])
			printf "\n"
			if (n == 16) n = 8
		}
		printf "| ODP invalidation of a region (range / per entry) |"
		for (i = 1; i <= nm; i++) {
			for (k in w) { split(k, p, SUBSEP); if (p[1] == md[i] && p[2] == "odp" && p[3] == "twostep_range") on = p[4] }
			printf " %s |", r(w[md[i], "odp", "twostep_range", on], w[md[i], "odp", native ? "native_entries" : "twostep_entries", on])
		}
		printf "\n"
		if (native) {
			printf "| two threads, 16 KiB ranges per second |"
			for (i = 1; i <= nm; i++) printf " %s |", r(w[md[i], "smp_two", "twostep", 16384], w[md[i], "smp_two", "native", 16384])
			printf "\n| two threads, 2 MiB ranges per second |"
			for (i = 1; i <= nm; i++) printf " %s |", r(w[md[i], "smp_two", "twostep", 2097152], w[md[i], "smp_two", "native", 2097152])
			printf "\n"
		}
	}' "$csv" "$work"
}

# Markdown tables of workloads.csv: per mode, one row per workload and
# size, one column per method.
ts_bench_work_markdown() {
	awk -F, '
	NR == 1 { next }
	{
		if (!(($1) in seenmode)) { seenmode[$1] = 1; modes[++nm] = $1 }
		k = $2 SUBSEP $4
		if (!(($1, k) in seenrow)) { seenrow[$1, k] = 1; rows[$1, ++nr[$1]] = k; unit[$1, k] = $6 }
		v[$1, k, $3] = $5
		if (!(($3) in seenm)) { seenm[$3] = 1; meth[++nmeth] = $3 }
	}
	END {
		for (i = 1; i <= nm; i++) {
			md = modes[i]
			printf "\n### workloads, %s\n\n| workload | n | unit |", md
			for (j = 1; j <= nmeth; j++) printf " %s |", meth[j]
			printf "\n|---|---:|---|"
			for (j = 1; j <= nmeth; j++) printf "---:|"
			printf "\n"
			for (r = 1; r <= nr[md]; r++) {
				split(rows[md, r], p, SUBSEP)
				printf "| %s | %s | %s |", p[1], p[2], unit[md, rows[md, r]]
				for (j = 1; j <= nmeth; j++)
					printf " %s |", ((md, rows[md, r], meth[j]) in v) ? v[md, rows[md, r], meth[j]] : "-"
				printf "\n"
			}
		}
	}' "$1"
}

# The targets at N = 256 (and against the native implementation at N = 256
# and 512) in one mode, from a CSV file (informational).
ts_bench_targets() {
	awk -F, -v mode="$2" '
	$1 == mode { map[$2, $3] = $5; unmap[$2, $3] = $8; iu[$2, $3] = $14; im[$2, $3] = $13 }
	END {
		if (!(("twostep", 256) in map)) { printf "- %s: no N = 256 in this run\n", mode; exit }
		printf "- %s, N = 256: unmap twostep/classic %.4f (target <= 0.01); ", mode, unmap["twostep", 256] / unmap["classic", 256]
		printf "map twostep/classic %.3f (target <= 0.15); ", map["twostep", 256] / map["classic", 256]
		printf "map twostep/floor_map_pages %.2f (target <= 1.3); ", map["twostep", 256] / map["floor_map_pages", 256]
		printf "IOTLB invalidations per twostep sync %.2f, per destroy %.2f\n", im["twostep", 256], iu["twostep", 256]
		for (n = 256; n <= 512; n += 256) {
			if (!(("native", n) in map)) continue
			printf "- %s, N = %d, against the native dma_iova_*: map twostep/native %.2f, unmap %.2f (targets <= 1.2); contiguous link map %.2f, unmap %.2f; IOTLB invalidations per sync / unlink / destroy twostep %.2f / %.2f / %.2f, native %.2f / %.2f / %.2f\n", mode, n,
				map["twostep", n] / map["native", n], unmap["twostep", n] / unmap["native", n],
				map["twostep_contig", n] / map["native_contig", n], unmap["twostep_contig", n] / unmap["native_contig", n],
				im["twostep", n], iu["twostep_unlink", n], iu["twostep", n],
				im["native", n], iu["native_unlink", n], iu["native", n]
		}
	}' "$1"
}

# The accelerators of the rows of CSV file $1, sorted, one line each;
# "none" for a CSV written before the accel column.
ts_bench_accels() {
	awk -F, 'NR == 1 { if ($15 != "accel") { print "none"; exit } next }
		{ print $15 }' "$1" | sort -u
}

# Compare two benchmark runs, CSV files OLD and NEW: for each mode, method
# and N in both, the median map and unmap ns per page, old and new, and
# new/old. Refuses (status 1) runs made under different accelerators, or
# one whose CSV does not say which.
ts_bench_compare() {
	local old=$1 new=$2 ao an
	[ -r "$old" ] && [ -r "$new" ] ||
		{ ts_log "bench compare: cannot read $old and $new"; return 1; }
	ao=$(ts_bench_accels "$old" | paste -sd ' ')
	an=$(ts_bench_accels "$new" | paste -sd ' ')
	case " $ao $an " in
	*" none "*)
		ts_log "bench compare: refused: a CSV without the accel column ($old: ${ao:-empty}, $new: ${an:-empty}); the accelerator of its run is not known"
		return 1 ;;
	esac
	if [ "$ao" != "$an" ] || [ "$(wc -w <<<"$ao")" != 1 ]; then
		ts_log "bench compare: refused: runs made under different accelerators ($old: $ao; $new: $an): their figures do not compare"
		return 1
	fi
	echo "accel: $ao; median ns per page, old -> new (new/old)"
	awk -F, 'FNR == 1 { next }
	NR == FNR { m[$1, $2, $3] = $5; u[$1, $2, $3] = $8; next }
	(($1, $2, $3) in m) {
		k = $1 SUBSEP $2 SUBSEP $3
		printf "%-12s %-16s N=%-5d map %s -> %s (%.2f)  unmap %s -> %s (%.2f)\n",
			$1, $2, $3, m[k], $5, (m[k] > 0 ? $5 / m[k] : 0),
			u[k], $8, (u[k] > 0 ? $8 / u[k] : 0)
	}' "$old" "$new"
}

# The methods of the absolute plots: six at most, those a reader compares.
ts_bench_plot_methods() {
	if [ "$TS_BENCH_KERNEL" = 7.3 ]; then
		echo "twostep native twostep_contig native_contig classic_sg floor_map_pages"
	else
		echo "twostep twostep_contig classic classic_sg floor_map_pages floor_contig"
	fi
}

# One PNG per mode: ns/page against N, log-log, map and unmap side by side.
ts_bench_plot() {
	local csv=$1 out=$2 mode=$3 m plots_map="" plots_unmap="" accel
	accel=$(ts_bench_accels "$csv" | paste -sd ' ' | tr 'a-z' 'A-Z')
	for m in $(ts_bench_plot_methods); do
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
set multiplot layout 1,2 title 'twostep benchmark, $TS_BENCH_IOMMU, $mode (QEMU $accel guest)'
set title 'map side'
plot ${plots_map%, }
set title 'unmap side'
plot ${plots_unmap%, }
unset multiplot
EOF
}

# One PNG per mode: each method's median over the reference's (native on
# 7.3, else the classic DMA API) against N, log N, map and unmap side by
# side, with the band 1.0-1.2 shaded.
ts_bench_plot_ratio() {
	local csv=$1 out=$2 mode=$3 ref=classic pairs data m rc
	local plots_map="" plots_unmap=""
	if [ "$TS_BENCH_KERNEL" = 7.3 ]; then
		ref=native
		pairs="twostep:native twostep_unlink:native_unlink twostep_contig:native_contig classic:native classic_sg:native"
	else
		pairs="twostep:classic twostep_unlink:classic twostep_contig:classic classic_sg:classic floor_map_pages:classic"
	fi
	data=$(mktemp) || return 1
	awk -F, -v mode="$mode" -v pairs="$pairs" '
	NR > 1 && $1 == mode { map[$2, $3] = $5; unmap[$2, $3] = $8; ns[$3] = 1 }
	END {
		np = split(pairs, pp, " ")
		for (i = 1; i <= np; i++) {
			split(pp[i], p, ":")
			for (n in ns)
				if (map[p[2], n] > 0 && unmap[p[2], n] > 0 && (p[1], n) in map)
					printf "%s,%s,%.4f,%.4f\n", p[1], n,
						map[p[1], n] / map[p[2], n],
						unmap[p[1], n] / unmap[p[2], n]
		}
	}' "$csv" | sort -t, -k1,1 -k2,2n >"$data"
	for m in $pairs; do
		m=${m%%:*}
		plots_map+="'$data' using (strcol(1) eq '$m' ? \$2 : NaN):3 with linespoints title '$m', "
		plots_unmap+="'$data' using (strcol(1) eq '$m' ? \$2 : NaN):4 with linespoints title '$m', "
	done
	gnuplot <<EOF
set terminal pngcairo size 1400,560 noenhanced
set output '$out'
set datafile separator ','
set logscale x
set grid
set xlabel 'N (4 KiB pages)'
set ylabel 'median / $ref median'
set key outside right
set object 1 rect from graph 0, first 1.0 to graph 1, first 1.2 behind fc rgb '#d0f0d0' fs solid 0.5 noborder
set multiplot layout 1,2 title 'twostep / $ref, $TS_BENCH_IOMMU, $mode (band: 1.0-1.2)'
set title 'map side'
plot ${plots_map%, }
set title 'unmap side'
plot ${plots_unmap%, }
unset multiplot
EOF
	rc=$?
	rm -f "$data"
	return $rc
}

# The MODES given that translate DMA (all but pt), on stdout.
ts_bench_translating() {
	local mode
	for mode in "$@"; do
		[ "$mode" = pt ] || echo "$mode"
	done
}

# Passthrough: each workload's time with twostep (and native) over that of
# the classic DMA API, from workloads.csv, one line each.
ts_bench_pt_lines() {
	awk -F, '
	function r(a, b) { return (a == "" || b == "" || b + 0 == 0) ? "" : sprintf("%.2f", a / b) }
	NR > 1 && $1 == "pt" { w[$2, $3, $4] = $5; if ($3 == "native") native = 1 }
	END {
		if (("svm_fault", "classic", 512) in w)
			printf "- pt, GPU SVM fault of 512 pages: twostep %s%s\n",
				r(w["svm_fault", "twostep", 512], w["svm_fault", "classic", 512]),
				native ? ", native " r(w["svm_fault", "native", 512], w["svm_fault", "classic", 512]) : ""
		else
			print "- pt, GPU SVM fault: not in this run"
		for (n = 1; n <= 32; n *= 2)
			if (("block", "classic", n) in w)
				printf "- pt, block request of %d segment(s): twostep %s%s\n", n,
					r(w["block", "twostep", n], w["block", "classic", n]),
					native ? ", native " r(w["block", "native", n], w["block", "classic", n]) : ""
		for (z = 16384; native && z <= 2097152; z *= 128)
			if (("smp_one", "native", z) in w)
				printf "- pt, %d KiB ranges per second, one thread, twostep/native: %s\n",
					z / 1024, r(w["smp_one", "twostep", z], w["smp_one", "native", z])
	}' "$1"
}

# The benchmark pipeline of `make bench` and of the suite's bench-smoke
# tier: boot bench-<mode> for each MODE (strict, lazy, cm, pt) with
# TS_BENCH_REPS and TS_BENCH_MAX_N, then write DIR/bench.csv, bench.md and
# bench-<mode>.png. The modules and the initramfs must be built. Does not
# rely on errexit (callers may run it under ||); returns 1 when a guest run
# failed or an output could not be written.
ts_bench_run() {
	local dir=$1 mode cfg rc res f csv work status=0 krel
	shift
	[ $# -gt 0 ] || ts_die "ts_bench_run: no benchmark mode given"
	for mode in "$@"; do
		case "$mode" in
		strict|lazy|pt) ;;
		cm) [ "$TS_BENCH_ARCH" = amd64 ] ||
			ts_die "caching mode is the Intel vIOMMU's: no cm on $TS_BENCH_ARCH" ;;
		*) ts_die "unknown benchmark mode '$mode' (have: $TS_BENCH_MODES_ALL)" ;;
		esac
	done
	ts_need_packages gnuplot-nox
	mkdir -p "$dir" || return 1
	csv=$dir/bench.csv
	work=$dir/workloads.csv
	# nothing stale may pass for this run's output
	rm -f "$csv" "$work" "$dir/bench.md" "$dir"/bench-*.png
	echo "$TS_BENCH_CSV_HEADER" >"$csv" || return 1
	echo "$TS_BENCH_WORK_HEADER" >"$work" || return 1
	for mode in "$@"; do
		cfg=$(ts_bench_cfg "$mode")
		ts_log "benchmark: $cfg ($(ts_cfg_accel "$cfg"), ${TS_BENCH_REPS:-9} repetitions, N <= ${TS_BENCH_MAX_N:-4096})"
		rm -f "$TS_RESULTS/$cfg".{log,trace,qemu.log,rc}
		rc=0
		ts_boot "$cfg" || rc=$?
		echo "$rc" >"$TS_RESULTS/$cfg.rc"
		res=$(ts_parse "$cfg" "$rc")
		read -r _ f _ <<<"$(printf '%s\n' "$res" | tail -n 1)"
		if [ "${f:-1}" -ne 0 ]; then
			printf '%s\n' "$res" | sed '$d' | grep -v ' ok  \| # ' >&2 || true
			ts_log "benchmark $cfg: the guest run failed (console: $TS_RESULTS/$cfg.log)"
			status=1
		fi
		ts_bench_rows "$cfg" >>"$csv" || status=1
		ts_bench_work_rows "$cfg" >>"$work" || status=1
	done

	krel=$(ts_kernel_for "$TS_BENCH_KNAME")
	if ! {
		echo "# twostep benchmark"
		echo
		echo "twostep against $([ "$TS_BENCH_KERNEL" = 7.3 ] && echo "the kernel's own dma_iova_*" || echo "the classic DMA API") in one guest run, ratio of medians (below 1: twostep takes less time; for ranges per second, above 1: twostep does more):"
		echo
		ts_bench_headline "$csv" "$work" "$@"
		echo
		echo "Debian $(cat /etc/debian_version) host, guest kernel $krel under QEMU $("$TS_BENCH_QEMU" --version | head -n 1 | awk '{print $4}') $(ts_bench_accels "$csv" | paste -sd ' ' | tr 'a-z' 'A-Z') (the CSV's accel column), two vCPUs (the two-thread throughput uses both, the rest runs on one), edu device behind the $TS_BENCH_IOMMU; ${TS_BENCH_REPS:-9} repetitions, N = $(ts_bench_sizes)."
		if ts_bench_accels "$csv" | grep -qx icount; then
			echo "Under -icount shift=0 (BENCH_ICOUNT=1) the guest's clock advances one ns per instruction executed: every figure in ns below is an instruction count, which TCG's cost of atomic operations and of the IOMMU's emulation does not distort. The guest has one vCPU then: no two-thread throughput."
		fi
		echo "Medians over the repetitions in ns per page; IOTLB invalidations counted from QEMU's $TS_BENCH_INVAL_EVENTS trace events per call of the phase (map: try_alloc + links + sync, or N x dma_map_page, ...; unmap: destroy, unlink + free, N x dma_unmap_page, ...)."
		echo
		echo "## Against the targets"
		echo
		echo '```'
		for mode in $(ts_bench_translating "$@"); do
			ts_bench_goals "$csv" "$work" "$mode"
		done
		echo '```'
		echo
		echo "Earlier targets (against the classic DMA API and the floor):"
		echo
		for mode in $(ts_bench_translating "$@"); do
			ts_bench_targets "$csv" "$mode"
		done
		if [[ " $* " == *" pt "* ]]; then
			echo
			echo "## Passthrough: what the API costs where it cannot help"
			echo
			echo "With iommu=pt the device's DMA is not translated: try_alloc says no (twostep's and the kernel's alike) and each workload takes the fallback a driver takes, the classic DMA API page by page. Time of each method over that of the classic DMA API alone, in the same guest run:"
			echo
			ts_bench_pt_lines "$work"
			echo
			echo '```'
			ts_bench_goals "$csv" "$work" pt
			echo '```'
		fi
		ts_bench_markdown "$csv"
		ts_bench_work_markdown "$work"
	} >"$dir/bench.md"; then
		ts_log "benchmark: writing $dir/bench.md failed"
		status=1
	fi
	# passthrough has no per-page table to plot
	for mode in $(ts_bench_translating "$@"); do
		if ! ts_bench_plot "$csv" "$dir/bench-$mode.png" "$mode"; then
			ts_log "benchmark: plotting $dir/bench-$mode.png failed"
			status=1
		fi
		if ! ts_bench_plot_ratio "$csv" "$dir/bench-$mode-ratio.png" \
			"$mode"; then
			ts_log "benchmark: plotting $dir/bench-$mode-ratio.png failed"
			status=1
		fi
	done
	# the headline table and the targets, met or not
	sed -n '1,/^## Against the targets/p' "$dir/bench.md" 2>/dev/null |
		grep '^|' || true
	sed -n '/^## Against the targets/,/^Earlier targets/p' \
		"$dir/bench.md" 2>/dev/null | grep -E '^(- |target )' || true
	sed -n '/^## Passthrough/,$p' "$dir/bench.md" 2>/dev/null |
		grep -E '^(- pt: |target )' || true
	printf 'results: %s, %s, %s' "$csv" "$work" "$dir/bench.md"
	for mode in $(ts_bench_translating "$@"); do
		printf ', %s, %s' "$dir/bench-$mode.png" "$dir/bench-$mode-ratio.png"
	done
	echo
	return $status
}

# The test suite's check of a small benchmark run: a well-formed table
# (each method at each size of ts_bench_sizes) and one IOTLB invalidation
# per twostep unmap call (counted by QEMU, not timed). Prints
# twostep-check style lines and "passed failed" last.
ts_bench_smoke_checks() {
	local cfg=$1 rows n
	if [[ "$cfg" == bench-pt* ]] || [[ "$cfg" == bench-arm64-pt* ]]; then
		# the fallback was taken, as the guest counted it
		n=$(ts_console "$TS_RESULTS/$cfg.log" |
			sed -n 's/.*# workloads: .* fallbacks \([0-9]*\).*/\1/p')
		if [ "${n:-0}" -gt 0 ]; then
			printf '  %-9s ok   %s\n' bench "bench_pt_fallback_taken ($n)"
			echo "1 0"
		else
			printf '  %-9s FAIL %s\n' bench "bench_pt_fallback_taken (${n:-no count})"
			echo "0 1"
		fi
		return
	fi
	rows=$(ts_bench_rows "$cfg")
	awk -F, -v methods="$TS_BENCH_METHODS" -v sizes="$(ts_bench_sizes)" \
		-v smmu="$([ "$TS_BENCH_ARCH" = arm64 ] && echo 1)" '
	function check(ok, name) {
		printf "  %-9s %s %s\n", "bench", ok ? "ok  " : "FAIL", name
		if (ok) pass++; else fail++
	}
	{
		rows++
		for (i = 4; i <= 14; i++) if ($i !~ /^-?[0-9]+(\.[0-9]+)?$/) bad++
		if ($5 <= 0 || $8 <= 0) bad++
		# per unmap call one invalidation (an SMMUv3: at least one,
		# its range commands cover a power of two of pages each); in
		# lazy mode a destroy leaves it to the flush queue (one per
		# many destroys), but where it freed page-table pages, and an
		# unlink, syncs
		lazy = ($1 == "lazy")
		if ($2 ~ /^twostep/) {
			tw++
			if ((lazy && !smmu && $14 > 1) ||
			    (!lazy && ($14 < 1 || (!smmu && $14 != 1))))
				inval_bad++
			if ($13 > 1) inval_bad++
			if (lazy && $2 != "twostep_unlink" && $14 < 1) batched++
		}
		m[$2] = 1
		im[$2, $3] = $13; iu[$2, $3] = $14
	}
	END {
		nm = split(methods, mm, " "); ns = split(sizes, ss, " ")
		for (i = 1; i <= nm; i++) if (!(mm[i] in m)) bad++
		check(rows == nm * ns && !bad, sprintf("bench_table_well_formed (%d rows)", rows))
		if (lazy) {
			check(tw > 0 && !inval_bad && batched, sprintf("bench_lazy_destroys_batched (%d sizes)", batched))
		} else {
			check(tw > 0 && !inval_bad, "bench_one_iotlb_invalidation_per_twostep_unmap")
		}
		if ("native" in m) {
			# per sync, unlink and destroy, at every N; in lazy
			# mode at most as many as native per map and unmap
			# (an allocation that finds no room flushes the queue)
			split("twostep twostep_unlink twostep_contig", tm, " ")
			for (i = 1; i <= ns; i++) {
				n = ss[i]
				for (k = 1; k <= 3; k++) {
					a = tm[k]; b = a; sub(/^twostep/, "native", b)
					if (lazy)
						bad = (im[a, n] + iu[a, n] > im[b, n] + iu[b, n])
					else
						bad = (im[a, n] != im[b, n] || iu[a, n] != iu[b, n])
					if (bad) differ++
				}
			}
			check(!differ, sprintf("bench_iotlb_invalidations_%s_native (%d sizes differ)",
				lazy ? "at_most" : "equal", differ))
		}
		printf "%d %d\n", pass, fail
	}' <<<"$rows"
}

# One check line of ts_bench_output_checks: OK (1 or empty) and NAME;
# counts into that function's pass and fail.
ts_bench_check() {
	if [ "$1" = 1 ]; then
		printf '  %-9s ok   %s\n' bench "$2"
		pass=$((pass + 1))
	else
		printf '  %-9s FAIL %s\n' bench "$2"
		fail=$((fail + 1))
	fi
}

# The test suite's check of what ts_bench_run wrote into DIR for MODES,
# given its exit STATUS: the CSV (header, one numeric row per method, size
# and mode, invalidations counted), the Markdown table (the CSV's rows, in
# order) and one whole PNG per mode. Prints twostep-check style lines and
# "passed failed" last.
ts_bench_output_checks() {
	local dir=$1 status=$2 csv=$1/bench.csv md=$1/bench.md
	local mode png res sizes nm reps rows bad missing size n want
	local pass=0 fail=0 accel
	shift 2
	sizes=$(ts_bench_sizes)
	nm=$(wc -w <<<"$TS_BENCH_METHODS")
	reps=${TS_BENCH_REPS:-9}
	# as the self-test clamps it
	[ "$reps" -lt 1 ] && reps=1
	[ "$reps" -gt 64 ] && reps=64
	ts_bench_check "$([ "$status" = 0 ] && echo 1)" \
		"bench_pipeline_status (exit $status)"
	ts_bench_check "$([ -s "$csv" ] && [ "$(head -n 1 "$csv")" = "$TS_BENCH_CSV_HEADER" ] && echo 1)" \
		"bench_csv_header ($csv)"
	for mode in "$@"; do
		if [ "$mode" = pt ]; then
			ts_bench_pt_output_checks "$dir"
			continue
		fi
		# the accelerator its guest ran under, as its rows must say
		accel=$(ts_cfg_accel "$(ts_bench_cfg "$mode")")
		accel=${accel%% *}
		# rows of MODE, rows not numeric or out of range, (method, N) pairs
		# not there exactly once
		res=$(awk -F, -v mode="$mode" -v methods="$TS_BENCH_METHODS" \
			-v sizes="$sizes" -v reps="$reps" -v accel="$accel" '
		NR == 1 || $1 != mode { next }
		{
			rows++
			if (NF != 15 || $4 != reps || $15 != accel) bad++
			for (i = 3; i <= 14; i++) if ($i !~ /^-?[0-9]+(\.[0-9]+)?$/) bad++
			if ($5 <= 0 || $8 <= 0 || $13 < 0 || $14 < 0) bad++
			seen[$2, $3]++
		}
		END {
			nm = split(methods, mm, " "); ns = split(sizes, ss, " ")
			for (i = 1; i <= nm; i++) for (j = 1; j <= ns; j++)
				if (seen[mm[i], ss[j]] != 1) missing++
			printf "%d %d %d\n", rows, bad, missing
		}' "$csv" 2>/dev/null || echo "0 0 0")
		read -r rows bad missing <<<"$res"
		ts_bench_check "$([ "$rows" -eq $((nm * $(wc -w <<<"$sizes"))) ] && [ "$bad" -eq 0 ] && [ "$missing" -eq 0 ] && echo 1)" \
			"bench_csv_rows_$mode ($rows rows: $nm methods x N = $sizes, $reps reps, numeric, accel $accel; $bad bad, $missing missing)"

		# the Markdown section of MODE: heading, table head, then the
		# CSV rows of MODE in order (method, N, map and unmap medians)
		res=$(awk -F, -v mode="$mode" '
		FILENAME == ARGV[1] {
			if (FNR > 1 && $1 == mode) want[++nw] = $2 "|" $3 "|" $5 "|" $8
			next
		}
		$0 == "### " mode { sect = 1; next }
		sect && /^### / { sect = 0 }
		!sect { next }
		$0 == "| method | N | map ns/page (min-max) | unmap ns/page (min-max) | map vs classic | unmap vs classic | IOTLB inval. map / unmap per call |" { head++; next }
		$0 == "|---|---:|---:|---:|---:|---:|---:|" { rule++; next }
		/^\| / {
			split($0, c, " \\| ")
			sub(/^\| /, "", c[1])
			split(c[3], mv, " "); split(c[4], uv, " ")
			if (c[1] "|" c[2] "|" mv[1] "|" uv[1] != want[++got]) bad++
		}
		END {
			if (!head || !rule || got != nw || !nw) bad++
			printf "%d %d\n", got, bad
		}' "$csv" "$md" 2>/dev/null || echo "0 1")
		read -r rows bad <<<"$res"
		ts_bench_check "$([ "$bad" -eq 0 ] && echo 1)" \
			"bench_md_table_$mode ($rows rows matching bench.csv in $md)"

		# whole PNGs: signature, IHDR of the size asked for, IEND last
		png=$dir/bench-$mode.png
		size=$(stat -c %s "$png" 2>/dev/null || echo 0)
		res=$(ts_bench_png_facts "$png")
		ts_bench_check "$([ "$size" -gt 20000 ] && [ "$res" = "1400x560 IEND" ] && echo 1)" \
			"bench_png_$mode ($png: $size bytes, PNG ${res:-none})"
		png=$dir/bench-$mode-ratio.png
		size=$(stat -c %s "$png" 2>/dev/null || echo 0)
		res=$(ts_bench_png_facts "$png")
		ts_bench_check "$([ "$size" -gt 10000 ] && [ "$res" = "1400x560 IEND" ] && echo 1)" \
			"bench_png_ratio_$mode ($png: $size bytes, PNG ${res:-none})"

		# the workloads: both throughputs of every method at both
		# sizes, and block requests of one segment, each positive
		# (under BENCH_ICOUNT=1 one vCPU: no throughput)
		want="smp_one:16384 smp_two:16384 smp_one:2097152 smp_two:2097152 block:1"
		[ "${TS_BENCH_ICOUNT:-0}" = 1 ] && want="block:1 block:16"
		res=$(ts_bench_work_present "$dir/workloads.csv" "$mode" "$want")
		ts_bench_check "$([ "${res%/*}" = "${res#*/}" ] && echo 1)" \
			"bench_workloads_csv_$mode ($res figures: $want)"
		# the tally, and each target's line with a verdict (a run
		# too small for a figure says so)
		res=$(sed -n '/^## Against the targets/,/^Earlier targets/p' "$md" 2>/dev/null |
			grep "^target [^ ]* $mode " |
			grep -cvE "^target [a-z0-9_]+ $mode ratio ([0-9]+\.[0-9]{2} (met|NOT met)|- not in this run)$")
		n=$(sed -n '/^## Against the targets/,/^Earlier targets/p' "$md" 2>/dev/null |
			grep -c "^target [^ ]* $mode ")
		# with native 18 targets; without, one per N >= 16
		want=$(ts_bench_sizes | tr ' ' '\n' | awk '$1 >= 16' | wc -l)
		[ "$TS_BENCH_KERNEL" = 7.3 ] && want=18
		ts_bench_check "$(grep -Eq "^- $mode: [0-9]+ of [0-9]+ targets met, [0-9]+ not in this run$" "$md" && [ "$res" = 0 ] && [ "$n" = "$want" ] && echo 1)" \
			"bench_md_targets_$mode ($(grep -E "^- $mode: [0-9]+ of" "$md" 2>/dev/null || echo 'no tally'); $n target lines of $want, $res without a verdict)"
	done
	echo "$pass $fail"
}

# How many of the figures asked for workloads.csv CSV has in MODE, each
# positive, as "got/want": each WORKLOAD:N of the list LIST for twostep and,
# on 7.3, native; then each WORKLOAD:METHOD:N given after it.
ts_bench_work_present() {
	local csv=$1 mode=$2 list=$3
	shift 3
	awk -F, -v mode="$mode" -v list="$list" -v extra="$*" \
		-v native="$([ "$TS_BENCH_KERNEL" = 7.3 ] && echo 1)" '
	NR > 1 && $1 == mode && $5 > 0 { have[$2, $3, $4] = 1 }
	END {
		nm = split(native ? "twostep native" : "twostep", mm, " ")
		nl = split(list, l, " ")
		for (i = 1; i <= nm; i++)
			for (j = 1; j <= nl; j++) {
				split(l[j], p, ":")
				want++; got += have[p[1], mm[i], p[2]]
			}
		ne = split(extra, e, " ")
		for (j = 1; j <= ne; j++) {
			split(e[j], p, ":")
			want++; got += have[p[1], p[2], p[3]]
		}
		printf "%d/%d\n", got, want
	}' "$csv" 2>/dev/null || echo "0/1"
}

# ts_bench_output_checks for the passthrough mode, whose guest times the
# workloads only: no rows of pt in bench.csv and no plot of it; in
# workloads.csv one-segment block requests and both throughputs of every
# method, each positive; its section in bench.md, a ratio on each line.
ts_bench_pt_output_checks() {
	local dir=$1 res
	res=$(awk -F, 'NR > 1 && $1 == "pt"' "$dir/bench.csv" 2>/dev/null | wc -l)
	ts_bench_check "$([ "$res" = 0 ] && [ ! -e "$dir/bench-pt.png" ] && echo 1)" \
		"bench_csv_no_table_pt ($res rows; passthrough has no page table to time)"
	local want="smp_one:16384 smp_two:16384 block:1"
	[ "${TS_BENCH_ICOUNT:-0}" = 1 ] && want="block:1"
	res=$(ts_bench_work_present "$dir/workloads.csv" pt "$want" \
		block:classic:1)
	ts_bench_check "$([ "${res%/*}" = "${res#*/}" ] && echo 1)" \
		"bench_workloads_csv_pt ($res figures: $want of every method, block:1 of classic)"
	res=$(sed -n '/^## Passthrough/,/^#/p' "$dir/bench.md" 2>/dev/null |
		grep -cE '^- pt, block request of 1 segment\(s\): twostep [0-9]+\.[0-9]{2}')
	ts_bench_check "$([ "$res" = 1 ] && echo 1)" \
		"bench_md_pt (the passthrough section's one-segment line with its ratio: $res)"
	# on 7.3 the refused try_alloc's target, measured
	[ "$TS_BENCH_KERNEL" = 7.3 ] || return 0
	res=$(sed -n '/^## Passthrough/,$p' "$dir/bench.md" 2>/dev/null |
		grep -E '^target try_alloc_refused pt ratio [0-9]+\.[0-9]{2} (met|NOT met)$')
	ts_bench_check "$([ -n "$res" ] && echo 1)" \
		"bench_md_target_refused_pt (${res:-no target line with a ratio})"
}

# "WIDTHxHEIGHT IEND" of a whole PNG file, or what is wrong with it.
ts_bench_png_facts() {
	local sig dims tail
	sig=$(od -An -tx1 -N16 "$1" 2>/dev/null | tr -d ' \n')
	[ "$sig" = 89504e470d0a1a0a0000000d49484452 ] || { echo "not a PNG"; return; }
	dims=$(od -An -tu1 -j16 -N8 "$1" |
		awk '{ printf "%dx%d", (($1 * 256 + $2) * 256 + $3) * 256 + $4,
			(($5 * 256 + $6) * 256 + $7) * 256 + $8 }')
	tail=$(tail -c 8 "$1" | od -An -tx1 | tr -d ' \n')
	[ "$tail" = 49454e44ae426082 ] && tail=IEND || tail="no IEND"
	echo "$dims $tail"
}

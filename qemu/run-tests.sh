#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The test suite: install what is missing; static analysis of the sources
# (W=1, sparse, checkpatch --strict, kernel-doc); build both modules against
# Debian's kernel headers and boot Debian's matching kernel in QEMU once per
# configuration (Intel vIOMMU strict with load/unload rounds, lazy, and
# caching-mode; no IOMMU; a small benchmark run) with the KTAP self-test in
# each; then the DKMS flow in a Debian VM image (the main job's path).
# Sums everything into one line.
#
#   qemu/run-tests.sh [config...]
#     (default: static intel intel-lazy intel-cm none bench-smoke dkms)
#
# Environment: TWOSTEP_KVM=1 uses KVM when /dev/kvm works (default TCG);
# TWOSTEP_CASES=a,b runs only those cases; TS_RESULTS sets the results dir.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/image.sh"
. "$(dirname "$0")/bench-lib.sh"
. "$(dirname "$0")/static.sh"

configs=${*:-static $TS_CONFIGS_ALL bench-smoke dkms}
quick=() dkms=0 static=0 kernels=""
for c in $configs; do
	if [ "$c" = dkms ]; then
		dkms=1
	elif [ "$c" = static ]; then
		static=1
	else
		ts_config "$c" ||
			ts_die "unknown configuration '$c' (have: static $TS_CONFIGS_ALL bench-smoke dkms)"
		quick+=("$c")
		case " $kernels " in
		*" $TS_KERNEL_NAME "*) ;;
		*) kernels="$kernels $TS_KERNEL_NAME" ;;
		esac
	fi
done
[ "$static" = 1 ] && [ -z "$kernels" ] && kernels=6.1

start=$SECONDS
passed=0 failed=0 skipped=0
declare -A cell
mkdir -p "$TS_RESULTS"
ts_install_deps
# resolve (and install) the backports kernel once, before any subshell
case " $kernels " in *" 6.12 "*) TS_KREL_BACKPORTS=$(ts_kernel_for 6.12) ;; esac

# Add to the totals and to the kernel x platform table.
add() {
	passed=$((passed + $2)) failed=$((failed + $3)) skipped=$((skipped + $4))
	cell[$1]="$2/$3/$4"
}

# Print a checker's lines but its last, "passed failed [skipped]", which
# goes to the totals under NAME; echoes those counts.
tally() {
	local name=$1 out=$2 p f s
	printf '%s\n' "$out" | sed '$d'
	read -r p f s <<<"$(printf '%s\n' "$out" | tail -n 1)"
	add "$name" "$p" "$f" "${s:-0}"
	TALLY="$p passed, $f failed, ${s:-0} skipped"
}

# Print one configuration's cases and add them to the totals.
report() {
	echo "== $1 (QEMU status $2, console: $TS_RESULTS/$1.log)"
	tally "$1" "$(ts_parse "$1" "$2")"
	echo "   $1: $TALLY"
}

for k in $kernels; do
	TS_KREL=$(ts_kernel_for "$k")
	if [ "$static" = 1 ]; then
		echo "== static analysis on $TS_KREL (W=1, sparse, checkpatch --strict, kernel-doc; log: $TS_RESULTS/static.log)"
		tally "static@$k" "$(ts_static_checks)"
	fi
	if [ ${#quick[@]} -gt 0 ]; then
		ts_build_modules
		ts_build_initramfs
	fi
done

if [ ${#quick[@]} -gt 0 ]; then
	ts_log "booting under $(ts_accel): ${quick[*]}"
	# Two at a time (the machine has 2 cores), reported in order.
	declare -A pid
	for c in "${quick[@]}"; do
		while [ "$(jobs -rp | wc -l)" -ge "${TS_PARALLEL:-2}" ]; do
			wait -n || true
		done
		( rc=0; ts_boot "$c" || rc=$?; echo "$rc" >"$TS_RESULTS/$c.rc" ) &
		pid[$c]=$!
	done
	for c in "${quick[@]}"; do
		wait "${pid[$c]}" || true
		report "$c" "$(cat "$TS_RESULTS/$c.rc" 2>/dev/null || echo 255)"
		if [ "$c" = bench-smoke ]; then
			tally bench-checks "$(ts_bench_smoke_checks "$c")"
		fi
	done
fi

if [ "$dkms" = 1 ]; then
	ts_image_build
	ts_log "DKMS flow: booting the VM image under $(ts_accel)"
	rc=0
	ts_image_boot || rc=$?
	report dkms "$rc"
	out=$(ts_dkms_missing)
	printf '%s\n' "$out" | sed '$d'
	failed=$((failed + $(printf '%s\n' "$out" | tail -n 1)))
fi

# kernel x platform: passed/failed/skipped
echo "== matrix (passed/failed/skipped)"
printf '  %-12s' kernel
plats=""
for key in "${!cell[@]}"; do
	plat=${key%@*}
	case " $plats " in *" $plat "*) ;; *) plats="$plats $plat" ;; esac
done
plats=$(tr ' ' '\n' <<<"$plats" | sed '/^$/d' | sort)
for plat in $plats; do printf ' %-13s' "$plat"; done
echo
for k in 6.1 6.12; do
	printf '  %-12s' "$k"
	for plat in $plats; do
		v=${cell[$plat@$k]:-}
		[ "$k" = 6.1 ] && [ -z "$v" ] && v=${cell[$plat]:-}
		printf ' %-13s' "${v:--}"
	done
	echo
done

echo "suite time: $((SECONDS - start)) s"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]

#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The test suite: install what is missing, build both modules against
# Debian's kernel headers, boot Debian's matching kernel in QEMU once per
# configuration (Intel vIOMMU strict, Intel vIOMMU caching-mode lazy, no
# IOMMU), run the KTAP self-test in each and sum the results.
#
#   qemu/run-tests.sh [config...]     (default: every configuration)
#
# Environment: TWOSTEP_KVM=1 uses KVM when /dev/kvm works (default TCG);
# TWOSTEP_CASES=a,b runs only those cases; TS_RESULTS sets the results dir.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

configs=${*:-$TS_CONFIGS_ALL}
for c in $configs; do
	ts_config "$c" || ts_die "unknown configuration '$c' (have: $TS_CONFIGS_ALL)"
done

start=$SECONDS
mkdir -p "$TS_RESULTS"
ts_install_deps
ts_build_modules
ts_build_initramfs
ts_log "booting $TS_VMLINUZ under $(ts_accel): $configs"

# Two at a time (the machine has 2 cores); report each as it finishes.
declare -A pid
for c in $configs; do
	while [ "$(jobs -rp | wc -l)" -ge "${TS_PARALLEL:-2}" ]; do
		wait -n || true
	done
	( ts_boot "$c"; echo $? >"$TS_RESULTS/$c.rc" ) &
	pid[$c]=$!
done

passed=0 failed=0 skipped=0
for c in $configs; do
	wait "${pid[$c]}" || true
	rc=$(cat "$TS_RESULTS/$c.rc" 2>/dev/null || echo 255)
	echo "== $c (QEMU status $rc, console: $TS_RESULTS/$c.log)"
	out=$(ts_parse "$c" "$rc")
	printf '%s\n' "$out" | sed '$d'
	read -r p f s <<<"$(printf '%s\n' "$out" | tail -n 1)"
	echo "   $c: $p passed, $f failed, $s skipped"
	passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
done

echo "suite time: $((SECONDS - start)) s"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]

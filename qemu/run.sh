#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The main job: build twostep.ko and twostep_selftest.ko, boot Debian's
# kernel in QEMU behind an Intel vIOMMU with an edu device, load both and
# show the self-test's KTAP report as the guest's kernel log has it.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

mkdir -p "$TS_RESULTS"
ts_install_deps
ts_build_modules
ts_build_initramfs
ts_log "booting $TS_VMLINUZ (Intel vIOMMU, edu, $(ts_accel))"
rc=0
ts_boot intel || rc=$?
echo "---- KTAP report from the guest kernel log ----"
sed -n "s/^.*$TS_KTAP_PREFIX//p" "$TS_RESULTS/intel.log" | tr -d '\r'
echo "-----------------------------------------------"
out=$(ts_parse intel "$rc")
read -r p f s <<<"$(printf '%s\n' "$out" | tail -n 1)"
printf '%s\n' "$out" | sed '$d' | grep -v '^  intel  ' || true
echo "console log: $TS_RESULTS/intel.log"
echo "$p passed, $f failed, $s skipped"
[ "$f" -eq 0 ] && [ "$p" -gt 0 ]

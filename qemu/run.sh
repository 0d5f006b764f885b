#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The main job, as a user meets twostep: build (or reuse) a Debian 12 VM
# image with the kernel, its headers, gcc, make and dkms; boot it in QEMU
# behind an Intel vIOMMU with an edu device; inside, put the source in
# /usr/src/twostep-<version>, run dkms add, build and install, modprobe the
# self-test, show dkms status and modinfo, then dkms remove and check that
# nothing is left. The host shows what the guest ran, the KTAP results from
# the guest's dmesg, and exits non-zero on any failure or timeout.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/image.sh"

start=$SECONDS
mkdir -p "$TS_RESULTS"
ts_need_packages qemu-system-x86 kmod
ts_image_build
ts_log "booting the VM image ($(cat "$TS_IMAGE/kernel-release"), Intel vIOMMU, edu, $(ts_accel)); compiling in the guest takes a few minutes"
rc=0
ts_image_boot || rc=$?

echo "---- guest console: the DKMS flow ----"
ts_dkms_transcript
echo "---- KTAP results from the guest's dmesg ----"
sed -n "s/^.*$TS_KTAP_PREFIX//p" "$TS_RESULTS/dkms.log" | tr -d '\r'
echo "---- verdict ----"
out=$(ts_parse dkms "$rc")
read -r p f s <<<"$(printf '%s\n' "$out" | tail -n 1)"
printf '%s\n' "$out" | sed '$d' | grep -v '^  dkms  ' || true
printf '%s\n' "$out" |
	grep -E "^  dkms  +(ok  |FAIL) ($(tr ' ' '|' <<<"$TS_DKMS_CHECKS"))\$" || true
missing=$(ts_dkms_missing)
printf '%s\n' "$missing" | sed '$d'
f=$((f + $(printf '%s\n' "$missing" | tail -n 1)))
echo "console log: $TS_RESULTS/dkms.log (QEMU status $rc)"
echo "main job time: $((SECONDS - start)) s"
echo "$p passed, $f failed, $s skipped"
[ "$f" -eq 0 ] && [ "$p" -gt 0 ]

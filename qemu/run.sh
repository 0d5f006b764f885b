#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The main job, as a Debian user meets twostep: the twostep-dkms package
# installed, a kernel upgrade, the package purged, in a Debian VM image
# under QEMU (Intel vIOMMU, or on arm64 an SMMUv3; edu device). See usage
# below.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/image.sh"

usage() {
	cat <<'EOF'
usage: qemu/run.sh [--debian 12|13] [--arch amd64|arm64] [--help]

The twostep-dkms package on Debian, as a user meets it. Builds the package
(make deb) and, once, a Debian VM image cached in ~/.cache/twostep/; boots
the image in QEMU (KVM where /dev/kvm works, else TCG; Intel vIOMMU, edu
device; arm64: virt with an SMMUv3, TCG) and in the guest:
  1. apt install ./twostep-dkms_<version>_all.deb; dkms status shows it
     installed; modprobe twostep_selftest passes (KTAP from dmesg);
  2. installs the release's backports kernel and headers (fetched on the
     host with the image; the guest is offline): DKMS builds twostep for it
     by itself; boots that kernel; modprobe twostep_selftest passes there;
  3. apt purge twostep-dkms: nothing of ours left for either kernel.

  --debian 12   Debian 12 (bookworm), 6.1, upgrade to bookworm-backports'
                kernel (default)
  --debian 13   Debian 13 (trixie), 6.12, upgrade to trixie-backports'
                kernel
  --arch arm64  an arm64 image on QEMU's virt machine with an SMMUv3
                (TCG on an x86_64 host; the image is finished in an arm64
                guest: tens of minutes the first time); default amd64
  -h, --help    this text

Output: one line per phase (the accelerator and, where it is TCG, why),
then the verdict; the details (apt, dpkg, mmdebstrap, the guests' consoles)
are in results/. Exits 0 only when every check and self-test case passed.
TWOSTEP_ACCEL=tcg or kvm forces an accelerator (kvm where it is not usable:
an error). TWOSTEP_MAIN_UNTIL=package stops after make deb (no guest).

As a user: the amd64 image is built with mmdebstrap's unshare mode, which
needs a subordinate id range of the user's own in /etc/subuid and
/etc/subgid (adduser gives every user one) and newuidmap (uidmap); the
arm64 image needs root (debootstrap).

More: doc/main-job.md (what each step checks, its output, its times).
EOF
}

debian=12 arch=amd64
while [ $# -gt 0 ]; do
	case "$1" in
	--debian) [ $# -ge 2 ] || { usage >&2; exit 2; }
		debian=$2; shift 2 ;;
	--debian=*) debian=${1#--debian=}; shift ;;
	--arch) [ $# -ge 2 ] || { usage >&2; exit 2; }
		arch=$2; shift 2 ;;
	--arch=*) arch=${1#--arch=}; shift ;;
	-h|--help) usage; exit 0 ;;
	*) echo "unknown option: $1" >&2; usage >&2; exit 2 ;;
	esac
done
ts_image_select "$debian" "$arch"

TS_T0=$SECONDS
mkdir -p "$TS_RESULTS"
hostlog=$TS_RESULTS/$TS_FLOW.host.log
: >"$hostlog"
echo "twostep main job on Debian $TS_DEBIAN ($TS_IMAGE_SUITE, $TS_IMAGE_ARCH); details: $hostlog"

# Run a phase in this shell with its chatter in the host log; on failure
# (also by ts_die) show the end of the log.
phase_failed() {
	ts_say "$1: FAILED; the end of $hostlog:"
	tail -n 40 "$hostlog" | sed 's/^/  | /'
}
phase() {
	local what=$1 t=$SECONDS
	shift
	echo "== $what" >>"$hostlog"
	# shellcheck disable=SC2064 # the phase's name, now
	trap "phase_failed '$what'" EXIT
	"$@" >>"$hostlog" 2>&1
	trap - EXIT
	TS_PHASE_TIME=$((SECONDS - t))
}

# shellcheck disable=SC2046 # a list of packages
phase "host packages" ts_need_packages $(ts_image_host_packages)
if grep -q '^installing: ' "$hostlog"; then
	ts_say "host packages: installed $(sed -n 's/^installing: //p' "$hostlog" | tr '\n' ' ')($TS_PHASE_TIME s)"
else
	ts_say "host packages: all present"
fi

ts_image_machine
if [ "$TS_IMAGE_ARCH" = amd64 ]; then
	ts_say "$(ts_accel_line)"
else
	ts_say "accel: $TS_IMAGE_ACCEL"
fi

ts_image_cached ||
	ts_say "VM image: building Debian $TS_IMAGE_SUITE ($TS_IMAGE_ARCH) with its backports kernel's packages (minutes)"
phase "VM image" ts_image_make
what="built ($TS_PHASE_TIME s)"
grep -q '^VM image: cached' "$hostlog" && what=cached
ts_say "VM image: $what, Debian $TS_IMAGE_SUITE ($TS_IMAGE_ARCH), kernel $(cat "$TS_IMAGE/kernel-release"), upgrade kernel $(cat "$TS_IMAGE/upgrade-release")"

ts_say "package: make deb"
phase "make deb" "$TS_ROOT/qemu/deb.sh"
deb=$(tail -n 1 "$hostlog")
ts_say "package: $(basename "$deb"), lintian clean ($TS_PHASE_TIME s)"
# the suite's check of the first phases as a user (run-tests.sh user13)
if [ "${TWOSTEP_MAIN_UNTIL:-}" = package ]; then
	ts_say "stopped after the package (TWOSTEP_MAIN_UNTIL=package)"
	exit 0
fi

TS_FOLLOW=1 ts_dkms_boots "$deb"
ts_say "guests done"

echo "---- verdict ----"
passed=0 failed=0 skipped=0
while read -r name ph rc; do
	if [ "$rc" = none ]; then
		echo "  $name: not booted (boot 1 handed out no new kernel)"
		out="0 0 0"
	else
		out=$(ts_parse "$name" "$rc")
	fi
	# the checks, any problem, the KTAP cases that failed
	printf '%s\n' "$out" | sed '$d' | awk -v name="$name" \
		-v checks=" $TS_DKMS_CHECKS_1 $TS_DKMS_CHECKS_2 " '
		$1 == name && ($2 == "ok" || $2 == "skip") &&
			!index(checks, " " $3 " ") { next }
		$1 == name && $2 == "#" { next }
		{ print }'
	read -r p f s <<<"$(printf '%s\n' "$out" | tail -n 1)"
	miss=$(ts_dkms_missing "$name" "$ph")
	printf '%s\n' "$miss" | sed '$d'
	f=$((f + $(printf '%s\n' "$miss" | tail -n 1)))
	[ -s "$TS_RESULTS/$name.retried" ] &&
		echo "  $name: the kernel died or hung while booting, before the guest's init ran; booted again ($(cat "$TS_RESULTS/$name.retried"))"
	acc="not booted"
	[ "$rc" = none ] || acc=$(ts_boot_accel "$name")
	echo "  $name: $p passed, $f failed, $s skipped ($acc, console: $TS_RESULTS/$name.log, QEMU status $rc, host CPU $(ts_cpu "$name") s)"
	if [ "$f" -gt 0 ] && [ "$rc" != none ]; then
		echo "  $name: what the guest ran, its end:"
		ts_dkms_transcript "$name" | tail -n 30 | sed 's/^/    /'
	fi
	passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
done <"$TS_RESULTS/$TS_FLOW.boots"
echo "main job time: $((SECONDS - TS_T0)) s"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]

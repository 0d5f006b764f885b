# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
# The package's promise for machines with more than one kernel, checked
# natively in a chroot (no guest: DKMS compiles there at the host's speed):
# a Debian 12 chroot with dkms and the headers of two kernels, Debian 12's
# and Debian 12 backports', gets twostep-dkms installed (DKMS must build
# for both, whichever kernel the machine runs) and purged (nothing of ours
# may be left for either). The chroot is made once by mmdebstrap from the
# Debian source this machine's apt uses and cached; the check installs and
# purges in it, so a purge that leaves something behind also removes the
# cached chroot (made again next time).
# Sourced after lib.sh and native.sh.

TS_DEBCHECK_PACKAGES="dkms,gcc,make,libc6-dev,kmod,linux-headers-amd64"

# Make (or find) the chroot; sets TS_DEBCHECK_ROOT.
ts_debcheck_setup() {
	local uri key
	ts_need_packages mmdebstrap
	uri=$(ts_debian_uri)
	[ -n "$uri" ] || ts_die "apt knows no Debian source: name one in TWOSTEP_DEBIAN_MIRROR"
	key=$( { echo "$uri $TS_DEBCHECK_PACKAGES"
		declare -f ts_debcheck_setup; } | sha256sum | cut -c1-12)
	# the second kernel's headers as a user installs them from backports
	TS_DEBCHECK_ROOT=$(ts_cached_root chroot-bookworm-dkms \
		"the package check's Debian 12 chroot" "$key" \
		--variant=apt --components=main \
		--include="$TS_DEBCHECK_PACKAGES" \
		--customize-hook='chroot "$1" apt-get install -y -q --no-install-recommends -t bookworm-backports linux-headers-amd64' \
		--customize-hook='chroot "$1" apt-get clean' \
		-- bookworm "deb $uri bookworm main" \
		"deb $uri bookworm-backports main") || exit 1
}

# Install and purge package $1 in the chroot. Prints each check, then
# "passed failed skipped" on the last line; the transcript goes to
# $TS_RESULTS/debcheck.log.
ts_debcheck() {
	local deb=$1 root log=$TS_RESULTS/debcheck.log out
	ts_debcheck_setup
	root=$TS_DEBCHECK_ROOT
	rm -f "$root"/tmp/twostep-dkms_*
	cp "$deb" "$root/tmp/"
	ts_chroot "$root" sh -c '
		export DEBIAN_FRONTEND=noninteractive
		check() { echo "twostep-check: $2 $1"; }
		# the kernel the machine runs, as installed without its
		# headers: dh-dkms then builds for it and the newest kernel
		# only (in a chroot without it, for all), and the package'"'"'s
		# postinst has to build for the other one
		running=$(uname -r) made=
		[ -d "/lib/modules/$running" ] ||
			{ mkdir "/lib/modules/$running"; made=1; }
		kernels=$(for b in /lib/modules/*/build; do
			[ -d "$b" ] && basename "${b%/build}"; done)
		deb=$(ls /tmp/twostep-dkms_*_all.deb)
		ver=$(dpkg-deb -f "$deb" Version)
		echo "kernels with headers: $(echo $kernels)"
		[ "$(echo "$kernels" | wc -w)" -ge 2 ] &&
			check two_kernels_with_headers ok ||
			check two_kernels_with_headers FAIL
		apt-get install -y "$deb" && check apt_install ok ||
			check apt_install FAIL
		dkms status -m twostep
		for k in $kernels; do
			dkms status -m twostep -v "$ver" -k "$k" |
				grep -q ": installed" &&
				ls /lib/modules/$k/updates/dkms/twostep.ko* \
					/lib/modules/$k/updates/dkms/twostep_selftest.ko* &&
				check "built_for_$k" ok || check "built_for_$k" FAIL
		done
		apt-get purge -y twostep-dkms && check apt_purge ok ||
			check apt_purge FAIL
		[ -z "$made" ] || rmdir "/lib/modules/$running"
		left=$( { ls -d /usr/src/twostep-* /var/lib/dkms/twostep \
				/lib/modules/*/updates/dkms/twostep* 2>/dev/null
			find / -xdev -path /tmp -prune -o -path /proc -prune -o \
				-name "*twostep*" ! -path /.twostep-complete \
				-print 2>/dev/null
			grep -l twostep /lib/modules/*/modules.* 2>/dev/null
			dpkg -l twostep-dkms 2>/dev/null | grep "^[a-z][a-z] "
			} | sort -u)
		[ -z "$left" ] && check purge_leaves_nothing ok || {
			echo "left behind: $left"
			check purge_leaves_nothing FAIL
		}' >"$log" 2>&1 </dev/null || true
	rm -f "$root"/tmp/twostep-dkms_*
	out=$(grep '^twostep-check: ' "$log")
	# anything but a clean purge: the next run starts from a new chroot
	grep -q '^twostep-check: ok purge_leaves_nothing' "$log" ||
		ts_chroot_remove "$root"
	printf '%s\n' "$out" | awk '{ printf "  %-9s %s %s\n", "debcheck", ($2 == "ok" ? "ok  " : "FAIL"), $3 }'
	# the checks every run must report: two kernels, one per kernel
	printf '%s\n' "$out" | awk '
		$2 == "ok" { p++ } $2 != "ok" { f++ }
		$3 ~ /^built_for_/ { k++ }
		END {
			n = NR
			if (n < 6 || k < 2) { f += 1; print "  debcheck  MISSING checks (" n " reported)" }
			print p + 0, f + 0, 0
		}'
}

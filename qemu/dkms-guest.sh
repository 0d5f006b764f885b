#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Runs inside the Debian VM image (started by the image's twostep-init),
# offline: what a Debian user does with the twostep-dkms package, each
# command shown with its output, one check line per step for the host to
# count and one step line per phase for the host to show as it goes.
#   boot 1 (twostep_phase=1, the image's kernel): apt install the package,
#     self-test; install the upgrade kernel (DKMS builds twostep for it by
#     itself); hand its vmlinuz and initrd to the host on /dev/vdc
#   boot 2 (twostep_phase=2, the upgrade kernel): self-test; apt purge the
#     package; nothing of ours left for either kernel.
src=/tmp/twostep
deb=$(ls "$src"/twostep-dkms_*_all.deb)
ver=$(dpkg-deb -f "$deb" Version)
kver=$(uname -r)
phase=$(sed -n 's/.*twostep_phase=\([0-9]\).*/\1/p' /proc/cmdline)
export DEBIAN_FRONTEND=noninteractive

say() { echo "twostep-guest: $*"; }
step() { echo "twostep-step: $*"; }
check() { say "check $1 $2"; echo "twostep-check: $2 $1"; }
# Show a command and its output as it comes, each line with the guest's
# uptime when it came (also kept in /tmp/run.out); keep its status in $rc.
# The shell reads the pipe a line at a time (mawk would read it in blocks
# and stamp a block's lines with one time); apt-get gets Dpkg::Use-Pty=0,
# so that dpkg writes to this pipe itself, not through apt's pty.
run() {
	say "\$ $*"
	{ "$@" 2>&1 </dev/null; echo $? >/tmp/run.rc; } | tee /tmp/run.out |
		while IFS= read -r line || [ -n "$line" ]; do
			read -r up _ </proc/uptime
			printf '  | [%7.1f] %s\n' "$up" "$line"
		done
	rc=$(cat /tmp/run.rc)
	say "(exit $rc; guest uptime $(cut -d' ' -f1 /proc/uptime) s)"
	return $rc
}

# The package's modules are installed for this kernel and load; the
# self-test's KTAP goes to the kernel log, which the host reads.
installed_here() {
	run dkms status -m twostep
	grep -q "^twostep/$ver, $kver, [^:]*: installed" /tmp/run.out &&
		check dkms_status_installed ok || check dkms_status_installed FAIL
	# the symbols a driver using the API builds against, for this kernel
	f=/var/lib/dkms/twostep/$ver/$kver/$(uname -m)/Module.symvers
	say "$f:"
	sed 's/^/  | /' "$f" 2>&1
	grep -q 'twostep_iova_try_alloc' "$f" 2>/dev/null &&
		check module_symvers_kept ok || check module_symvers_kept FAIL
	run modinfo twostep
	grep -q "^version: *$ver\$" /tmp/run.out &&
		grep -q "^filename: *\(/usr\)\?/lib/modules/$kver/updates/dkms/twostep\.ko" \
			/tmp/run.out && check modinfo ok || check modinfo FAIL
	step "modprobe twostep_selftest on $kver"
	run modprobe twostep_selftest expect_api=1
	echo "twostep-harness: selftest rc=$rc"
	[ "$rc" -eq 0 ] && check modprobe_selftest ok ||
		check modprobe_selftest FAIL
	say "kernel log (dmesg):"
	dmesg | sed 's/^/twostep-dmesg: /'
	run modprobe -r twostep_selftest
	run modprobe -r twostep
}

# The newest kernel installed besides this one.
other_kernel() {
	for d in /lib/modules/*; do
		[ "${d##*/}" = "$kver" ] || echo "${d##*/}"
	done | sort -V | tail -n 1
}

say "kernel $kver, twostep-dkms $ver, boot $phase"
case "$phase" in
1)
	step "apt install ./$(basename "$deb") (DKMS builds twostep for $kver)"
	cd "$src" && run apt-get -o Dpkg::Use-Pty=0 install -y "./$(basename "$deb")"
	cd /
	[ "$rc" -eq 0 ] && check apt_install_package ok ||
		check apt_install_package FAIL
	ls "/usr/src/twostep-$ver/include/"*.h >/dev/null 2>&1 &&
		check headers_installed ok || check headers_installed FAIL
	installed_here

	step "kernel upgrade: apt install $(cd "$src/upgrade" && ls | sed 's/_.*//' | grep -E '^linux-(image|headers)-[0-9]' | tr '\n' ' ')(DKMS builds twostep by itself)"
	run apt-get -o Dpkg::Use-Pty=0 install -y "$src"/upgrade/*.deb
	[ "$rc" -eq 0 ] && check kernel_upgrade_install ok ||
		check kernel_upgrade_install FAIL
	new=$(other_kernel)
	say "new kernel: ${new:-none}"
	run dkms status -m twostep
	[ -n "$new" ] &&
		grep -q "^twostep/$ver, $new, [^:]*: installed" /tmp/run.out &&
		ls "/lib/modules/$new/updates/dkms/twostep.ko"* \
			"/lib/modules/$new/updates/dkms/twostep_selftest.ko"* &&
		check dkms_built_for_new_kernel ok ||
		check dkms_built_for_new_kernel FAIL
	# The new kernel and its initrd, for the host to boot next.
	mkdir -p /tmp/out
	for f in "/boot/vmlinuz-$new" "/usr/lib/modules/$new/vmlinuz"; do
		[ -f "$f" ] && cp "$f" /tmp/out/vmlinuz && break
	done
	for f in "/boot/initrd.img-$new" "/usr/lib/modules/$new/initrd.img"; do
		[ -f "$f" ] && cp "$f" /tmp/out/initrd.img && break
	done
	echo "$new" >/tmp/out/kernel-release
	[ -n "$new" ] && [ -s /tmp/out/vmlinuz ] && [ -s /tmp/out/initrd.img ] &&
		tar -C /tmp/out -cf /dev/vdc kernel-release vmlinuz initrd.img &&
		check new_kernel_exported ok || check new_kernel_exported FAIL
	;;
2)
	step "booted $kver"
	want=$(sed -n 's/.*twostep_krel=\([^ ]*\).*/\1/p' /proc/cmdline)
	[ "$kver" = "$want" ] && check booted_new_kernel ok ||
		check booted_new_kernel FAIL
	installed_here

	step "apt purge twostep-dkms"
	run apt-get -o Dpkg::Use-Pty=0 purge -y twostep-dkms
	[ "$rc" -eq 0 ] && check apt_purge ok || check apt_purge FAIL
	# Nothing of ours for any kernel: no source, no DKMS tree, no module,
	# no line in the module indexes, no headers, no package state; only
	# the image's own init, initramfs and dpkg settings, and the host's
	# archive in /tmp.
	{
		ls -d /usr/src/twostep-* /var/lib/dkms/twostep \
			/lib/modules/*/updates/dkms/twostep* 2>/dev/null
		find / -xdev -path /tmp -prune -o -name '*twostep*' \
			! -path /usr/local/sbin/twostep-init \
			! -path /etc/initramfs-tools/conf.d/twostep-guest \
			-print 2>/dev/null
		grep -l twostep /lib/modules/*/modules.* 2>/dev/null
		dpkg -l twostep-dkms 2>/dev/null | grep '^[a-z][a-z] '
	} | sort -u >/tmp/left
	if [ -s /tmp/left ]; then
		sed 's/^/twostep-guest: left behind: /' /tmp/left
		check purge_leaves_nothing FAIL
	else
		check purge_leaves_nothing ok
	fi
	;;
*)
	say "no twostep_phase= on the kernel command line"
	;;
esac
echo "twostep-harness: end"

# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
# The Debian VM images of the main job (Debian 12 or 13): built with
# mmdebstrap from the Debian source this machine's apt is configured with,
# kept in a cache outside the tree and rebuilt only when their inputs
# change. Each image comes with the packages of its upgrade kernel (the
# Debian release's backports kernel with its headers and whatever they
# need), downloaded on the host while the image is built and handed to the
# offline guest. Sourced after lib.sh.

# What the main job (run.sh) needs on the host.
TS_MAIN_PACKAGES="qemu-system-x86 qemu-utils kmod mmdebstrap e2fsprogs genext2fs build-essential debhelper dh-dkms lintian dpkg-dev"

TS_IMAGE_PACKAGES="linux-image-amd64,linux-headers-amd64,gcc,make,libc6-dev,dkms,kmod,initramfs-tools,mount"
TS_IMAGE_SIZE=6G
# Kernel module folders the guest never loads from: its init loads no
# module but twostep's (no udev), its initramfs holds its disk's (virtio,
# ext4, from fs/, lib/, crypto/ and drivers/block, virtio, which stay), it
# is offline, and it has no other hardware a step uses. dpkg does not
# unpack them (path-exclude), in the image and in the guest, for every
# kernel: each kernel's unpack and every depmod (run by its package, by
# DKMS's install and by its remove; under TCG depmod decompresses every
# .ko.xz it reads) reads the eighth of a kernel's modules that is left
# (525 of 6.12's 4228).
TS_IMAGE_EXCLUDE="drivers/gpu drivers/media drivers/net drivers/infiniband
drivers/iio drivers/staging drivers/comedi drivers/hwmon drivers/mtd
drivers/isdn drivers/bluetooth drivers/usb drivers/input drivers/hid
drivers/platform drivers/scsi drivers/ata drivers/md drivers/watchdog
drivers/video drivers/i2c drivers/leds drivers/thermal drivers/w1
drivers/edac drivers/mmc drivers/mfd drivers/hwtracing drivers/nvme
drivers/target drivers/spi drivers/pinctrl drivers/gpio drivers/misc
drivers/power drivers/regulator drivers/crypto drivers/firewire
drivers/pcmcia drivers/nfc drivers/atm net sound"

# Select the Debian release (12 or 13) and the architecture (amd64, the
# default, or arm64): sets TS_DEBIAN, TS_IMAGE_SUITE, TS_IMAGE_ARCH and
# TS_FLOW (the name of the flow's logs and verdict lines: dkms, dkms13,
# dkms-arm64, dkms13-arm64).
ts_image_select() {
	case "$1" in
	12|bookworm) TS_DEBIAN=12 TS_IMAGE_SUITE=bookworm TS_FLOW=dkms ;;
	13|trixie) TS_DEBIAN=13 TS_IMAGE_SUITE=trixie TS_FLOW=dkms13 ;;
	*) ts_die "unknown Debian release '$1' (have: 12 13)" ;;
	esac
	TS_IMAGE_ARCH=${2:-amd64}
	case "$TS_IMAGE_ARCH" in
	amd64) ;;
	arm64) TS_FLOW=$TS_FLOW-arm64 ;;
	*) ts_die "unknown architecture '$2' (have: amd64 arm64)" ;;
	esac
}
ts_image_select 12

# What the main job needs on the host for the selected image: an arm64
# image adds QEMU for arm64 and debootstrap (ts_image_build_foreign), a
# user newuidmap (ts_image_need).
ts_image_host_packages() {
	echo "$TS_MAIN_PACKAGES"
	[ "$TS_IMAGE_ARCH" = amd64 ] || echo "qemu-system-arm debootstrap"
	# a user's image: mmdebstrap's unshare mode (ts_image_need)
	[ "$(id -u)" -eq 0 ] || echo uidmap
}

# The folder of the selected image in the cache, and whether it is whole.
ts_image_dir() {
	if [ "$TS_IMAGE_ARCH" = amd64 ]; then
		echo "$TS_CACHE/debian$TS_DEBIAN-image-$(ts_image_key)"
	else
		echo "$TS_CACHE/debian$TS_DEBIAN-$TS_IMAGE_ARCH-image-$(ts_image_key_foreign)"
	fi
}
ts_image_cached() { [ -f "$(ts_image_dir)/complete" ]; }

# Build the selected image unless the cache has it (ts_image_build,
# ts_image_build_foreign).
ts_image_make() {
	if [ "$TS_IMAGE_ARCH" = amd64 ]; then
		ts_image_build
	else
		ts_image_build_foreign
	fi
}

# "deb URI SUITE main" lines of the image: the suite, its -updates,
# -security and -backports companions, at the URIs this machine's apt uses
# for Debian (any release; see kernels.sh); no mirror name is kept in the
# repository.
ts_image_sources() {
	local uri sec s
	uri=$(ts_debian_uri)
	[ -n "$uri" ] || return 0
	sec=$(ts_debian_security_uri)
	for s in "$TS_IMAGE_SUITE" "$TS_IMAGE_SUITE-backports" \
		"$TS_IMAGE_SUITE-updates"; do
		echo "deb $uri $s main"
	done
	[ -z "$sec" ] || echo "deb $sec $TS_IMAGE_SUITE-security main"
}

# The arm64 image's disk, $1/disk.raw, written from the root debootstrap
# made (as root) in $1/root, which then goes (on failure all of $1 goes).
ts_image_disk() {
	ts_log "VM image: writing the ext4 disk"
	if ! mkfs.ext4 -q -F -L twostep-root -d "$1/root" \
		"$1/disk.raw" "$TS_IMAGE_SIZE"; then
		ts_chroot_remove "$1"
		ts_die "mkfs.ext4 failed"
	fi
	ts_chroot_remove "$1/root"
}

# Cache key: everything the image is made from (not the rest of this file).
ts_image_key() {
	{
		echo "$TS_IMAGE_SUITE $TS_IMAGE_PACKAGES $TS_IMAGE_SIZE"
		# shellcheck disable=SC2086 # the folders on one line
		echo $TS_IMAGE_EXCLUDE
		ts_image_sources
		declare -f ts_image_build ts_image_disk_from_tar ts_image_sources
		cat "$TS_ROOT/qemu/image-init"
	} | sha256sum | cut -c1-16
}

# An image's disk as a user can write it: from the root as a tar file
# ($1/root.tar, which goes; on failure all of $1 goes) to $1/disk.raw.
# genext2fs copies owners, modes and links from the tar's headers (no
# chroot folder whose owners only a user namespace can read); then the
# file system gets a journal, grows to TS_IMAGE_SIZE and is checked.
ts_image_disk_from_tar() {
	local blocks rc=0
	ts_log "VM image: writing the disk"
	# the files' size and a half again, at least 64 MiB, in 4 KiB blocks
	blocks=$(($(stat -c %s "$1/root.tar") / 4096 * 3 / 2 + 16384))
	genext2fs -B 4096 -i 16384 -b "$blocks" -L twostep-root \
		-a "$1/root.tar" "$1/disk.raw" >&2 &&
		tune2fs -j -O dir_index,filetype,large_file "$1/disk.raw" >&2 ||
		rc=$?
	# (1: e2fsck set the new features' fields, as it must)
	if [ "$rc" = 0 ]; then
		e2fsck -f -y -D "$1/disk.raw" >/dev/null 2>&1 || rc=$?
		[ "$rc" -gt 1 ] || rc=0
	fi
	if [ "$rc" != 0 ] ||
		! resize2fs "$1/disk.raw" "$TS_IMAGE_SIZE" >&2 ||
		! e2fsck -f -n "$1/disk.raw" >&2; then
		ts_chroot_remove "$1"
		ts_die "writing the image's disk from its root failed"
	fi
	rm -f "$1/root.tar"
}

# What building an image needs beyond the main job's host packages (as a
# user, mmdebstrap's unshare mode: ts_need_unshare).
ts_image_need() {
	ts_need_packages mmdebstrap e2fsprogs genext2fs qemu-utils
	ts_need_unshare
}

# Build the image unless the cache has it; sets TS_IMAGE to its folder,
# which holds disk.raw, vmlinuz, initrd.img, kernel-release, upgrade/*.deb
# and upgrade-release. Progress goes to stderr. As root or as a user
# (mmdebstrap's unshare mode): the root is written as a tar file, and
# what the host keeps of it is copied out by mmdebstrap's own hooks.
ts_image_build() {
	local key tmp sources=() line vmlinuz hook dir exclude=()
	ts_image_need
	key=$(ts_image_key)
	TS_IMAGE=$TS_CACHE/debian$TS_DEBIAN-image-$key
	if [ -f "$TS_IMAGE/complete" ]; then
		ts_log "VM image: cached at $TS_IMAGE"
		return 0
	fi
	while read -r line; do
		[ -n "$line" ] && sources+=("$line")
	done < <(ts_image_sources)
	[ ${#sources[@]} -gt 0 ] ||
		ts_die "apt knows no Debian source: name one in TWOSTEP_DEBIAN_MIRROR"

	mkdir -p "$TS_CACHE"
	tmp=$(mktemp -d "$TS_CACHE/build.XXXXXX")
	mkdir "$tmp/upgrade"
	ts_log "VM image: building Debian $TS_IMAGE_SUITE with $TS_IMAGE_PACKAGES ($(ts_mmdebstrap_mode) mode)"
	ts_log "VM image: from ${sources[*]}"
	# The initramfs of the kernels installed in the guest holds the
	# modules of its disk only (MODULES=dep): TCG makes "most" slow.
	# dpkg does not fsync each file it unpacks (force-unsafe-io, kept in
	# the image's dpkg.cfg.d/99mmdebstrap), neither while the image is
	# built nor in the guest, whose disk is a throw-away overlay.
	# The upgrade kernel as a user installs it from backports, resolved
	# by the image's own apt and downloaded only (into an archive cache
	# emptied of the image's own packages first), then copied out with
	# the image's /boot.
	hook="rm -f \"\$1\"/var/cache/apt/archives/*.deb"
	hook="$hook && chroot \"\$1\" apt-get -y -q --download-only --no-install-recommends"
	hook="$hook -t $TS_IMAGE_SUITE-backports install linux-image-amd64 linux-headers-amd64"
	hook="$hook && mkdir \"\$1\"/twostep-upgrade"
	hook="$hook && mv \"\$1\"/var/cache/apt/archives/*.deb \"\$1\"/twostep-upgrade/"
	# Modules the guest never loads, where Debian 12's packages (/lib) and
	# Debian 13's (/usr/lib) put them.
	for dir in $TS_IMAGE_EXCLUDE; do
		exclude+=("--dpkgopt=path-exclude=/lib/modules/*/kernel/$dir/*"
			"--dpkgopt=path-exclude=/usr/lib/modules/*/kernel/$dir/*")
	done
	# Each line with its time, a profile of the build.
	if ! ( mmdebstrap --mode="$(ts_mmdebstrap_mode)" --variant=apt \
		--include="$TS_IMAGE_PACKAGES" \
		--dpkgopt=force-unsafe-io "${exclude[@]}" \
		--customize-hook='echo twostep-guest >"$1/etc/hostname"' \
		--customize-hook='echo MODULES=dep >"$1/etc/initramfs-tools/conf.d/twostep-guest"' \
		--customize-hook="$hook" \
		--customize-hook="copy-out /twostep-upgrade /boot $tmp" \
		--customize-hook='rm -rf "$1/twostep-upgrade"' \
		--customize-hook="upload $TS_ROOT/qemu/image-init /usr/local/sbin/twostep-init" \
		--customize-hook='chmod 0755 "$1/usr/local/sbin/twostep-init"' \
		"$TS_IMAGE_SUITE" "$tmp/root.tar" "${sources[@]}" 2>&1 |
		ts_stamp >&2
		exit "${PIPESTATUS[0]}" ); then
		ts_chroot_remove "$tmp"
		ts_die "mmdebstrap failed"
	fi
	mv "$tmp"/twostep-upgrade/*.deb "$tmp/upgrade/"
	rmdir "$tmp/twostep-upgrade"
	for line in "$tmp"/upgrade/linux-headers-*.deb; do
		line=$(dpkg-deb -f "$line" Package)
		case "$line" in
		linux-headers-[0-9]*-amd64) echo "${line#linux-headers-}" ;;
		esac
	done | sort -V | tail -n 1 >"$tmp/upgrade-release"
	[ -s "$tmp/upgrade-release" ] ||
		{ ts_chroot_remove "$tmp"; ts_die "no upgrade kernel in $TS_IMAGE_SUITE-backports"; }
	vmlinuz=$(find "$tmp/boot" -name 'vmlinuz-*' | sort -V | tail -n 1)
	[ -n "$vmlinuz" ] || { ts_chroot_remove "$tmp"; ts_die "the image has no kernel"; }
	basename "$vmlinuz" | sed 's/^vmlinuz-//' >"$tmp/kernel-release"
	mv "$vmlinuz" "$tmp/vmlinuz"
	mv "$tmp/boot/initrd.img-$(cat "$tmp/kernel-release")" \
		"$tmp/initrd.img" || { ts_chroot_remove "$tmp"; ts_die "the image has no initrd"; }
	rm -rf "${tmp:?}/boot"
	ts_image_disk_from_tar "$tmp"
	touch "$tmp/complete"
	# older images of this release only (other folders of the cache are
	# not ours to remove)
	ts_chroot_remove "$TS_CACHE/debian$TS_DEBIAN-image-"*
	mv "$tmp" "$TS_IMAGE"
	ts_log "VM image: ready at $TS_IMAGE ($(cat "$TS_IMAGE/kernel-release"), upgrade kernel $(cat "$TS_IMAGE/upgrade-release"))"
}

# Cache key of an image of another architecture (ts_image_build_foreign).
ts_image_key_foreign() {
	{
		echo "$TS_IMAGE_SUITE $TS_IMAGE_ARCH $TS_IMAGE_PACKAGES $TS_IMAGE_SIZE"
		# shellcheck disable=SC2086 # the folders on one line
		echo $TS_IMAGE_EXCLUDE
		ts_image_sources
		declare -f ts_image_build_foreign ts_image_stage2_initramfs \
			ts_image_disk ts_image_sources
		cat "$TS_ROOT/qemu/image-init" "$TS_ROOT/qemu/image-stage2"
	} | sha256sum | cut -c1-16
}

# An image of another architecture than this host's (arm64), which this
# host cannot run a program of: debootstrap's first stage downloads and
# unpacks the packages here; the second stage runs in a guest of the
# image's architecture under QEMU (TCG), booted from the cache's kernel of
# the release for that architecture (kernels.sh) with a busybox initramfs
# that mounts the disk and hands over to qemu/image-stage2; the image's
# kernel, initrd and dpkg database come back on a second disk. The upgrade
# kernel's packages are resolved against that dpkg database by the private
# apt state of the release for that architecture, and downloaded here.
# The image has ts_image_build's settings: dpkg's force-unsafe-io and
# path-exclude, written before the second stage, and MODULES=dep, written
# by image-stage2 after it (as ts_image_build's hook does after the
# install: the image's own initrd is made with initramfs-tools' default).
# Sets TS_IMAGE as ts_image_build does; progress goes to stderr.
ts_image_build_foreign() {
	local arch=$TS_IMAGE_ARCH uri tmp krel f rc=0 pkgs
	TS_IMAGE=$(ts_image_dir)
	if [ -f "$TS_IMAGE/complete" ]; then
		ts_log "VM image: cached at $TS_IMAGE"
		return 0
	fi
	[ "$(id -u)" -eq 0 ] ||
		ts_die "the $arch image is made by debootstrap, which needs root: run this as root (a user can build and run the amd64 image)"
	uri=$(ts_debian_uri)
	[ -n "$uri" ] ||
		ts_die "apt knows no Debian source: name one in TWOSTEP_DEBIAN_MIRROR"
	pkgs=${TS_IMAGE_PACKAGES//amd64/$arch}
	mkdir -p "$TS_CACHE"
	tmp=$(mktemp -d "$TS_CACHE/build.XXXXXX")
	mkdir "$tmp/upgrade" "$tmp/out"
	ts_log "VM image: debootstrap's first stage of Debian $TS_IMAGE_SUITE for $arch with $pkgs from $uri"
	if ! ( debootstrap --arch="$arch" --foreign --variant=minbase \
		--keyring="$TS_DEBIAN_KEYRING" --include="$pkgs" \
		"$TS_IMAGE_SUITE" "$tmp/root" "$uri" 2>&1 | ts_stamp >&2
		exit "${PIPESTATUS[0]}" ); then
		ts_chroot_remove "$tmp"
		ts_die "debootstrap --foreign failed"
	fi
	# the first stage leaves /proc a link to the host's: a folder, so
	# that the second stage's guest can mount its own there
	if [ -L "$tmp/root/proc" ]; then
		rm "$tmp/root/proc"
		mkdir "$tmp/root/proc"
	fi
	echo twostep-guest >"$tmp/root/etc/hostname"
	mkdir -p "$tmp/root/usr/local/sbin"
	{
		echo force-unsafe-io
		for f in $TS_IMAGE_EXCLUDE; do
			echo "path-exclude=/lib/modules/*/kernel/$f/*"
			echo "path-exclude=/usr/lib/modules/*/kernel/$f/*"
		done
	} >"$tmp/root/etc/dpkg/dpkg.cfg.d/99guest-image"
	ts_image_sources >"$tmp/root/etc/apt/sources.list"
	install -m 0755 "$TS_ROOT/qemu/image-init" \
		"$tmp/root/usr/local/sbin/twostep-init"
	install -m 0755 "$TS_ROOT/qemu/image-stage2" \
		"$tmp/root/usr/local/sbin/twostep-stage2"
	ts_image_disk "$tmp"

	krel=$(ts_kernel_fetch "$TS_IMAGE_SUITE" "$arch") || exit 1
	ts_image_stage2_initramfs "$krel" "$tmp/stage2"
	truncate -s 512M "$tmp/out.tar"
	ts_log "VM image: debootstrap's second stage in an $arch guest (kernel $krel, TCG; console: $tmp.stage2.log)"
	timeout --foreground -k 10 "${TS_DKMS_TIMEOUT:-3600}" \
		qemu-system-aarch64 -accel tcg -m 2048 -smp "${TS_DKMS_SMP:-2}" \
		-machine virt -cpu cortex-a57 -nic none \
		-display none -monitor none -serial stdio -no-reboot \
		-drive file="$tmp/disk.raw",format=raw,if=virtio,cache=unsafe \
		-drive file="$tmp/out.tar",format=raw,if=virtio \
		-kernel "$(ts_kernel_vmlinuz "$krel")" \
		-initrd "$tmp/stage2/initramfs.cpio.gz" \
		-append "console=ttyAMA0 loglevel=4 panic=-1" \
		</dev/null >"$tmp.stage2.log" 2>&1 || rc=$?
	grep -a '^twostep-stage2: ' "$tmp.stage2.log" >&2 || true
	if ! grep -aq '^twostep-stage2: done' "$tmp.stage2.log" ||
		! tar -C "$tmp/out" -xf "$tmp/out.tar"; then
		tail -n 40 "$tmp.stage2.log" >&2
		ts_chroot_remove "$tmp"
		ts_die "debootstrap's second stage failed (QEMU status $rc; console: $tmp.stage2.log)"
	fi
	rm -rf "$tmp/out.tar" "$tmp/stage2"

	# the upgrade kernel as a user installs it from backports, resolved
	# against the image's own dpkg database
	ts_log "VM image: downloading $TS_IMAGE_SUITE-backports' linux-image-$arch and linux-headers-$arch with what they need"
	ts_apt_setup "$TS_IMAGE_SUITE-$arch"
	mkdir -p "$tmp/upgrade/partial"
	if ! ts_apt "$TS_IMAGE_SUITE-$arch" get -y -q --download-only \
		--no-install-recommends -o Dir::State::status="$tmp/out/status" \
		-o Dir::Cache::archives="$tmp/upgrade" \
		-t "$TS_IMAGE_SUITE-backports" \
		install "linux-image-$arch" "linux-headers-$arch" >&2; then
		ts_chroot_remove "$tmp"
		ts_die "downloading the upgrade kernel's packages failed"
	fi
	rm -rf "$tmp/upgrade/partial" "$tmp/upgrade/lock"
	for f in "$tmp"/upgrade/linux-headers-*.deb; do
		f=$(dpkg-deb -f "$f" Package)
		case "$f" in
		linux-headers-[0-9]*-"$arch") echo "${f#linux-headers-}" ;;
		esac
	done | sort -V | tail -n 1 >"$tmp/upgrade-release"
	[ -s "$tmp/upgrade-release" ] ||
		{ ts_chroot_remove "$tmp"; ts_die "no upgrade kernel in $TS_IMAGE_SUITE-backports"; }
	mv "$tmp/out/kernel-release" "$tmp/out/vmlinuz" "$tmp/out/initrd.img" \
		"$tmp/"
	rm -rf "$tmp/out"
	mv "$tmp.stage2.log" "$tmp/stage2.log"
	touch "$tmp/complete"
	# older images of this release and architecture only
	ts_chroot_remove "$TS_CACHE/debian$TS_DEBIAN-$arch-image-"*
	mv "$tmp" "$TS_IMAGE"
	ts_log "VM image: ready at $TS_IMAGE ($(cat "$TS_IMAGE/kernel-release"), upgrade kernel $(cat "$TS_IMAGE/upgrade-release"))"
}

# The initramfs of the second stage's boot, in folder $2: busybox and kmod
# of the image's architecture (kernels.sh), the modules of kernel $1 that
# the disk needs (virtio PCI and block, ext4), and an init that loads
# them, mounts the disk and hands over to its twostep-stage2:
# $2/initramfs.cpio.gz.
ts_image_stage2_initramfs() {
	local krel=$1 dir=$2/root lib mod
	lib=$(ts_userland_fetch "$TS_IMAGE_ARCH") || exit 1
	rm -rf "$dir"
	mkdir -p "$dir"/{bin,sbin,proc,sys,dev,root,mod,usr/bin,usr/sbin}
	cp "$lib/bin/busybox" "$dir/bin/busybox"
	cp "$lib/bin/kmod" "$dir/sbin/kmod"
	ln -s kmod "$dir/sbin/insmod"
	cp -a "$lib/lib/." "$dir/lib/"
	cp -a "$lib/usr/lib" "$dir/usr/"
	rm -rf "$dir"/usr/lib/*/gconv
	modprobe -d "$(ts_kernel_modbase "$krel")" -S "$krel" -a \
		--show-depends virtio_pci virtio_blk ext4 |
		awk '$1 == "insmod" && !seen[$2]++ { print $2 }' >"$2/mods"
	: >"$dir/mod/list"
	while read -r mod; do
		cp "$mod" "$dir/mod/"
		echo "/mod/$(basename "$mod")" >>"$dir/mod/list"
	done <"$2/mods"
	cat >"$dir/init" <<'INIT_END'
#!/bin/busybox sh
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
while read -r m; do
	/sbin/insmod "$m" || echo "twostep-stage2: insmod $m failed"
done </mod/list
i=0
while [ ! -b /dev/vda ] && [ "$i" -lt 60 ]; do sleep 1; i=$((i + 1)); done
if ! mount -t ext4 /dev/vda /root; then
	echo "twostep-stage2: FAILED: cannot mount /dev/vda"
	echo o >/proc/sysrq-trigger
	while :; do sleep 1; done
fi
mount -o move /proc /root/proc
mount -o move /sys /root/sys
mount -o move /dev /root/dev
exec switch_root /root /usr/local/sbin/twostep-stage2
INIT_END
	chmod +x "$dir/init"
	(cd "$dir" && find . | cpio -o -H newc 2>/dev/null | gzip -1) \
		>"$2/initramfs.cpio.gz"
}

# What the guest gets on its second disk, a tar archive: the package, its
# guest script and the upgrade kernel's packages.
ts_image_guest_tar() {
	local deb=$1
	tar -cf "$TS_RESULTS/$TS_FLOW-guest.tar" \
		-C "$(dirname "$deb")" "$(basename "$deb")" \
		-C "$TS_ROOT/qemu" dkms-guest.sh \
		-C "$TS_IMAGE" upgrade
}

# The selected image's machine: sets TS_IMAGE_QEMU (QEMU and its machine,
# an array), TS_IMAGE_APPEND (the kernel line's console and IOMMU),
# TS_IMAGE_IOMMU (its name in the story) and TS_IMAGE_ACCEL (the
# accelerator, and why where it is TCG for another reason than the run's).
ts_image_machine() {
	if [ "$TS_IMAGE_ARCH" = amd64 ]; then
		TS_IMAGE_QEMU=(qemu-system-x86_64 -machine q35,kernel-irqchip=split
			-device intel-iommu,intremap=on)
		TS_IMAGE_APPEND="console=ttyS0 intel_iommu=on"
		TS_IMAGE_IOMMU="Intel vIOMMU"
		ts_accel_init
		TS_IMAGE_ACCEL=$TS_ACCEL
	else
		TS_IMAGE_QEMU=(qemu-system-aarch64 -machine virt,iommu=smmuv3
			-cpu cortex-a57 -nic none)
		TS_IMAGE_APPEND="console=ttyAMA0 twostep_selftest.faults_per_window=1"
		TS_IMAGE_IOMMU="SMMUv3"
		[ "${TWOSTEP_ACCEL:-}" != kvm ] ||
			ts_die "TWOSTEP_ACCEL=kvm, but the $TS_IMAGE_ARCH image runs under TCG only"
		TS_IMAGE_ACCEL="tcg ($TS_IMAGE_ARCH guest on an $(uname -m) host)"
	fi
}

# Boot the image's disk overlay with kernel $1 (vmlinuz) and initrd $2 for
# guest phase $3 (1: package, kernel upgrade; 2: the new kernel, purge;
# further kernel parameters may follow the number);
# the console goes to $TS_RESULTS/$4.log. Phase 1 starts a new overlay,
# phase 2 goes on with it; the guest hands its new kernel out on a third
# disk, $TS_FLOW-out.tar. Returns QEMU's status (124: timeout).
ts_image_boot() {
	local vmlinuz=$1 initrd=$2 phase=$3 name=$4 smp=${TS_DKMS_SMP:-2} accel
	local overlay=$TS_RESULTS/$TS_FLOW-overlay.qcow2
	local out=$TS_RESULTS/$TS_FLOW-out.tar
	if [ "$phase" = 1 ]; then
		rm -f "$overlay"
		qemu-img create -q -f qcow2 -F raw -b "$TS_IMAGE/disk.raw" "$overlay"
		rm -f "$out"
		truncate -s 512M "$out"
	fi
	# the machine: q35 with an Intel vIOMMU, or for arm64 virt with an
	# SMMUv3, whose events the self-test's security case waits out one
	# attempt at a time (faults_per_window=1, as in the arm64-smmu cells)
	ts_image_machine
	accel=${TS_IMAGE_ACCEL%% *}
	echo "$TS_IMAGE_ACCEL" >"$TS_RESULTS/$name.accel"
	# in a subshell whose children's CPU time is QEMU's, kept in
	# $TS_RESULTS/$4.cpu (see ts_cpu)
	( rc=0
	timeout --foreground -k 10 "${TS_DKMS_TIMEOUT:-3600}" \
		"${TS_IMAGE_QEMU[@]}" -accel "$accel" -m 2048 -smp "$smp" \
		-display none -monitor none -serial stdio -no-reboot \
		-device edu,dma_mask=0xffffffffff \
		-drive file="$overlay",format=qcow2,if=virtio,cache=unsafe \
		-drive file="$TS_RESULTS/$TS_FLOW-guest.tar",format=raw,if=virtio,readonly=on \
		-drive file="$out",format=raw,if=virtio \
		-kernel "$vmlinuz" -initrd "$initrd" \
		-append "$TS_IMAGE_APPEND root=/dev/vda rw init=/usr/local/sbin/twostep-init loglevel=4 panic=-1 oops=panic iommu.strict=1 twostep_phase=$phase" \
		</dev/null >"$TS_RESULTS/$name.log" 2>"$TS_RESULTS/$name.qemu.log" &
	ts_boot_wait "$TS_RESULTS/$name.log" $! 'twostep-guest: kernel ' \
		"$TS_RESULTS/$name.hung" || rc=$?
	times >"$TS_RESULTS/$name.cpu"
	exit "$rc" )
}

# The checks each boot of the flow must report, in order.
TS_DKMS_CHECKS_1="apt_install_package headers_installed dkms_status_installed module_symvers_kept modinfo modprobe_selftest kernel_upgrade_install dkms_built_for_new_kernel new_kernel_exported"
TS_DKMS_CHECKS_2="booted_new_kernel dkms_status_installed module_symvers_kept modinfo modprobe_selftest apt_purge purge_leaves_nothing"

# Checks of phase $2 the guest never reported in log $1.log (ts_parse counts
# the ones it did): prints them, then their number on the last line.
ts_dkms_missing() {
	local want=$TS_DKMS_CHECKS_1
	[ "$2" = 2 ] && want=$TS_DKMS_CHECKS_2
	awk -v want="$want" -v cfg="$1" '
	/^twostep-check: / { sub(/\r$/, ""); seen[$3] = 1 }
	END {
		n = split(want, names, " ")
		for (i = 1; i <= n; i++)
			if (!seen[names[i]]) {
				printf "  %-9s MISSING %s\n", cfg, names[i]
				missing++
			}
		printf "%d\n", missing
	}' "$TS_RESULTS/$1.log" 2>/dev/null || printf '%s\n' $want | awk -v cfg="$1" '
		{ printf "  %-9s MISSING %s\n", cfg, $1 } END { print NR }'
}

# What the guest ran and printed in log $1.log, without the kernel log.
ts_dkms_transcript() {
	grep -a -E '^(twostep-guest: |  \| )' "$TS_RESULTS/$1.log" | tr -d '\r'
}

# Print the guest's steps and check results of log $1 as they come, with
# the time since TS_T0, until process $2 ends.
ts_dkms_follow() {
	local line
	tail -n +1 -F --pid="$2" "$TS_RESULTS/$1.log" 2>/dev/null |
		while IFS= read -r line; do
		line=${line%$'\r'}
		case "$line" in
		"twostep-step: "*) ts_say "  guest: ${line#twostep-step: }" ;;
		"twostep-check: FAIL "*) ts_say "    FAIL ${line#twostep-check: FAIL }" ;;
		esac
	done
}

# Name of a kernel release in verdicts and logs: 6.1, 6.12, 7.3.
ts_kernel_name() {
	sed 's/^\([0-9]*\.[0-9]*\).*/\1/' <<<"$1"
}

# One boot of the flow (see ts_image_boot), booted again once when the
# kernel dies or hangs before the guest's init ran (a TCG flake, see
# ts_boot); with TS_FOLLOW=1 the guest's steps are shown as they come.
ts_dkms_boot() {
	local name=$4 rc=0 try why
	rm -f "$TS_RESULTS/$name.retried" "$TS_RESULTS/$name.boot1.log"
	for try in 1 2; do
		rc=0
		# a fresh log, or the follower would show the last run's first
		: >"$TS_RESULTS/$name.log"
		if [ "${TS_FOLLOW:-0}" = 1 ]; then
			ts_image_boot "$@" &
			local pid=$!
			ts_dkms_follow "$name" "$pid"
			wait "$pid" || rc=$?
		else
			ts_image_boot "$@" || rc=$?
		fi
		[ "$try" = 1 ] || break
		why=$(ts_boot_early_death "$TS_RESULTS/$name.log" \
			'twostep-guest: kernel ' "$TS_RESULTS/$name.hung")
		if [ -n "$why" ]; then
			echo "$why" >"$TS_RESULTS/$name.retried"
			mv "$TS_RESULTS/$name.log" "$TS_RESULTS/$name.boot1.log"
			[ "${TS_FOLLOW:-0}" = 1 ] &&
				ts_say "  the kernel died or hung before the guest's init ran; booting again"
			continue
		fi
		break
	done
	return "$rc"
}

# The two boots of the flow in the image of ts_image_build, given the
# package (the guest archive is made here). Writes $TS_RESULTS/$TS_FLOW.boots:
# one line "name phase qemu-status" per boot.
ts_dkms_boots() {
	local deb=$1 name1 name2 new rc=0 kdir=$TS_RESULTS/$TS_FLOW-kernel
	local boots=$TS_RESULTS/$TS_FLOW.boots
	: >"$boots"
	ts_image_guest_tar "$deb"
	ts_image_machine
	name1=$TS_FLOW@$(ts_kernel_name "$(cat "$TS_IMAGE/kernel-release")")
	[ "${TS_FOLLOW:-0}" = 1 ] &&
		ts_say "boot 1: $(cat "$TS_IMAGE/kernel-release") ($TS_IMAGE_IOMMU, edu, $TS_IMAGE_ACCEL)"
	ts_dkms_boot "$TS_IMAGE/vmlinuz" "$TS_IMAGE/initrd.img" 1 "$name1" || rc=$?
	echo "$name1 1 $rc" >>"$boots"
	rm -rf "$kdir"
	mkdir -p "$kdir"
	tar -C "$kdir" -xf "$TS_RESULTS/$TS_FLOW-out.tar" 2>/dev/null || true
	new=$(cat "$kdir/kernel-release" 2>/dev/null || true)
	if [ -z "$new" ] || [ ! -s "$kdir/vmlinuz" ] || [ ! -s "$kdir/initrd.img" ]; then
		# no new kernel to boot: boot 2's checks count as missing (and
		# no console of an earlier run is read for them)
		name2=$TS_FLOW@$(ts_kernel_name "$(cat "$TS_IMAGE/upgrade-release")")
		rm -f "$TS_RESULTS/$name2.log" "$TS_RESULTS/$name2.accel"
		echo "$name2 2 none" >>"$boots"
		return 0
	fi
	name2=$TS_FLOW@$(ts_kernel_name "$new")
	[ "${TS_FOLLOW:-0}" = 1 ] &&
		ts_say "boot 2: $new, the upgrade kernel ($TS_IMAGE_ACCEL)"
	rc=0
	ts_dkms_boot "$kdir/vmlinuz" "$kdir/initrd.img" "2 twostep_krel=$new" "$name2" ||
		rc=$?
	echo "$name2 2 $rc" >>"$boots"
}

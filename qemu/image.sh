# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
# The Debian 12 VM image of the DKMS flow: built with mmdebstrap from the
# package sources this machine's apt is configured with, kept in a cache
# outside the tree and rebuilt only when its inputs change. Sourced after
# lib.sh.

TS_IMAGE_SUITE=bookworm
TS_IMAGE_PACKAGES="linux-image-amd64,linux-headers-amd64,gcc,make,libc6-dev,dkms,kmod,initramfs-tools"
TS_IMAGE_SIZE=4G

# "deb URI SUITE main" for the suite and its -updates and -security
# companions, as this machine's apt knows them (no mirror name is kept in
# the repository).
ts_image_sources() {
	apt-cache policy | awk -v s="$TS_IMAGE_SUITE" '
		$3 ~ "^" s "(-updates|-security)?/main$" && $4 == "amd64" &&
		$5 == "Packages" && !seen[$3]++ {
			split($3, a, "/"); print "deb " $2 " " a[1] " main"
		}' | sort
}

# Cache key: everything the image is made from (not the rest of this file).
ts_image_key() {
	{
		echo "$TS_IMAGE_SUITE $TS_IMAGE_PACKAGES $TS_IMAGE_SIZE"
		ts_image_sources
		declare -f ts_image_build ts_image_sources
		cat "$TS_ROOT/qemu/image-init"
	} | sha256sum | cut -c1-16
}

# Build the image unless the cache has it; sets TS_IMAGE to its folder,
# which holds disk.raw, vmlinuz, initrd.img and kernel-release.
ts_image_build() {
	local key tmp sources=() line
	ts_need_packages mmdebstrap e2fsprogs qemu-utils
	key=$(ts_image_key)
	TS_IMAGE=$TS_CACHE/image-$key
	if [ -f "$TS_IMAGE/complete" ]; then
		ts_log "VM image: cached at $TS_IMAGE ($(cat "$TS_IMAGE/kernel-release"))"
		return 0
	fi
	while read -r line; do
		[ -n "$line" ] && sources+=("$line")
	done < <(ts_image_sources)
	[ ${#sources[@]} -gt 0 ] ||
		ts_die "apt knows no $TS_IMAGE_SUITE/main source to build the image from"

	mkdir -p "$TS_CACHE"
	tmp=$(mktemp -d "$TS_CACHE/build.XXXXXX")
	ts_log "VM image: building Debian $TS_IMAGE_SUITE with $TS_IMAGE_PACKAGES (a few minutes the first time)"
	ts_log "VM image: from ${sources[*]}"
	if ! mmdebstrap --variant=apt --include="$TS_IMAGE_PACKAGES" \
		--customize-hook='echo twostep-guest >"$1/etc/hostname"' \
		"$TS_IMAGE_SUITE" "$tmp/root" "${sources[@]}" 2>&1 |
		while read -r line; do
			case "$line" in
			I:*|E:*|W:*) ts_log "  mmdebstrap: ${line#?: }" ;;
			esac
		done; then
		rm -rf "$tmp"
		ts_die "mmdebstrap failed"
	fi
	install -m 0755 "$TS_ROOT/qemu/image-init" \
		"$tmp/root/usr/local/sbin/twostep-init"
	ls "$tmp/root/boot"/vmlinuz-* >/dev/null 2>&1 ||
		{ rm -rf "$tmp"; ts_die "the image has no kernel"; }
	local vmlinuz
	vmlinuz=$(ls "$tmp/root/boot"/vmlinuz-* | sort -V | tail -n 1)
	basename "$vmlinuz" | sed 's/^vmlinuz-//' >"$tmp/kernel-release"
	cp "$vmlinuz" "$tmp/vmlinuz"
	cp "$tmp/root/boot/initrd.img-$(cat "$tmp/kernel-release")" \
		"$tmp/initrd.img" || { rm -rf "$tmp"; ts_die "the image has no initrd"; }
	ts_log "VM image: writing the ext4 disk"
	if ! mkfs.ext4 -q -F -L twostep-root -d "$tmp/root" \
		"$tmp/disk.raw" "$TS_IMAGE_SIZE"; then
		rm -rf "$tmp"
		ts_die "mkfs.ext4 failed"
	fi
	rm -rf "$tmp/root"
	touch "$tmp/complete"
	rm -rf "$TS_CACHE"/image-*
	mv "$tmp" "$TS_IMAGE"
	ts_log "VM image: ready at $TS_IMAGE ($(cat "$TS_IMAGE/kernel-release"))"
}

# The twostep source as a DKMS user has it, in a tar archive that the
# guest reads from its second disk.
ts_image_source_tar() {
	tar -C "$TS_ROOT" -cf "$TS_RESULTS/twostep-src.tar" dkms.conf Kbuild \
		Makefile LICENSE README.md include src selftest qemu/dkms-guest.sh
}

# Boot the image (q35, Intel vIOMMU, edu) on a throw-away overlay; the
# console goes to $TS_RESULTS/dkms.log.
ts_image_boot() {
	local log=$TS_RESULTS/dkms.log accel smp=2
	qemu-img create -q -f qcow2 -F raw -b "$TS_IMAGE/disk.raw" \
		"$TS_RESULTS/dkms-overlay.qcow2"
	ts_image_source_tar
	accel=$(ts_accel)
	timeout --foreground -k 10 "${TS_DKMS_TIMEOUT:-1500}" \
		qemu-system-x86_64 -accel "$accel" -m 1536 -smp "$smp" \
		-display none -monitor none -serial stdio -no-reboot \
		-machine q35,kernel-irqchip=split \
		-device intel-iommu,intremap=on \
		-device edu,dma_mask=0xffffffffff \
		-drive file="$TS_RESULTS/dkms-overlay.qcow2",format=qcow2,if=virtio \
		-drive file="$TS_RESULTS/twostep-src.tar",format=raw,if=virtio,readonly=on \
		-kernel "$TS_IMAGE/vmlinuz" -initrd "$TS_IMAGE/initrd.img" \
		-append "console=ttyS0 root=/dev/vda rw init=/usr/local/sbin/twostep-init loglevel=4 panic=-1 oops=panic intel_iommu=on iommu.strict=1" \
		</dev/null >"$log" 2>"$TS_RESULTS/dkms.qemu.log"
}

TS_DKMS_CHECKS="dkms_add dkms_build dkms_install modprobe_selftest dkms_status_installed modinfo dkms_remove remove_leaves_nothing"

# DKMS steps the guest never reported (ts_parse counts the ones it did):
# prints them, then their number on the last line.
ts_dkms_missing() {
	awk -v want="$TS_DKMS_CHECKS" '
	/^twostep-check: / { sub(/\r$/, ""); seen[$3] = 1 }
	END {
		n = split(want, names, " ")
		for (i = 1; i <= n; i++)
			if (!seen[names[i]]) {
				printf "  %-9s MISSING %s\n", "dkms", names[i]
				missing++
			}
		printf "%d\n", missing
	}' "$TS_RESULTS/dkms.log"
}

# What the guest ran and printed, without the kernel log dump.
ts_dkms_transcript() {
	grep -a -E '^(twostep-guest: |  \| )' "$TS_RESULTS/dkms.log" | tr -d '\r'
}

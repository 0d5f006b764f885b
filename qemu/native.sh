# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
# The kernel with the native dma_iova_* API: Debian 13 backports' newest
# (7.3.x). Its headers need Debian 13's gcc-14 and libc, so everything
# built against it is built inside a Debian 13 chroot made by mmdebstrap
# from the Debian source this machine's apt already uses (the suite name
# is derived here, no mirror name is kept in the repository). The chroot,
# the kernel's headers and its image (vmlinuz and modules, unpacked) live
# in the cache and are made once. Sourced after lib.sh.

TS_NATIVE_SUITE=trixie
TS_NATIVE_PACKAGES="gcc-14,make,libc6-dev,kmod,xz-utils"

# Run a command inside the chroot with /proc mounted for its duration. As
# a user, whose chroot's files are all the user's own (ts_native_setup),
# in a user namespace where the user is root (no subordinate ids needed)
# with a pid namespace's /proc and the host's /dev.
ts_chroot() {
	local root=$1
	shift
	if [ "$(id -u)" -ne 0 ]; then
		unshare --map-root-user --pid --fork --mount-proc="$root/proc" \
			sh -ec 'r=$1; shift; mount --rbind /dev "$r/dev"
				exec chroot "$r" "$@"' - "$root" "$@"
		return
	fi
	# Runs on one machine (make bench beside the suite) share the chroot
	# and its /proc mount: one command at a time, or one run's umount
	# pulls /proc from under the other's build. One left mounted by a
	# killed run is used, then unmounted.
	(
		rc=0
		flock 9
		mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
		chroot "$root" "$@" || rc=$?
		umount "$root/proc"
		exit "$rc"
	) 9>"$root.lock"
}

# Make (or find) the chroot with the newest backports kernel's headers and
# its unpacked image; sets TS_CHROOT and TS_KREL_NATIVE. Cached under a
# key of everything it is made from. mmdebstrap writes it as a tar file
# (as a user in its unshare mode), with the kernel's headers installed and
# its packages downloaded by a hook inside, and ts_untar_root unpacks it.
ts_native_setup() {
	local uri key tmp krel log deb hook
	[ -n "${TS_KREL_NATIVE:-}" ] && return 0
	ts_need_packages mmdebstrap kmod xz-utils
	ts_need_unshare
	uri=$(ts_debian_uri)
	[ -n "$uri" ] || ts_die "apt knows no Debian source: name one in TWOSTEP_DEBIAN_MIRROR"
	key=$( { echo "$uri $TS_NATIVE_SUITE $TS_NATIVE_PACKAGES $(id -u)"
		declare -f ts_native_setup; } | sha256sum | cut -c1-12)
	TS_CHROOT=$TS_CACHE/chroot-$TS_NATIVE_SUITE-$key
	if [ ! -f "$TS_CHROOT/.twostep-complete" ]; then
		mkdir -p "$TS_CACHE"
		tmp=$(mktemp -d "$TS_CACHE/chroot.XXXXXX")
		log=$tmp.log
		ts_log "Debian 13 chroot: building with mmdebstrap (under a minute; log: $log)"
		# the newest backports kernel: its headers inside, its image
		# (vmlinuz in linux-binary-<release>, modules in
		# linux-modules-<release>) downloaded beside
		hook='chroot "$1" sh -ec '"'"'
			krel=$(apt-cache show "linux-headers-amd64/'"$TS_NATIVE_SUITE"'-backports" |
				sed -n "s/^Depends: //p" | head -n 1 |
				grep -o "linux-headers-[^ ,]*" | sed "s/^linux-headers-//")
			test -n "$krel"
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
				--no-install-recommends "linux-headers-$krel"
			mkdir -p /twostep-kernel
			cd /twostep-kernel
			apt-get download -qq "linux-binary-$krel" \
				"linux-modules-$krel"
			echo "$krel" >/twostep-kernel/release
			apt-get clean'"'"
		if ! mmdebstrap --mode="$(ts_mmdebstrap_mode)" \
			--variant=apt --components=main \
			--include="$TS_NATIVE_PACKAGES" \
			--customize-hook="$hook" "$TS_NATIVE_SUITE" \
			"$tmp.tar" "deb $uri $TS_NATIVE_SUITE main" \
			"deb $uri $TS_NATIVE_SUITE-backports main" >"$log" 2>&1 ||
			! ts_untar_root "$tmp.tar" "$tmp" 2>>"$log"; then
			tail -n 20 "$log" >&2
			rm -f "$tmp.tar"
			ts_chroot_remove "$tmp"
			ts_die "mmdebstrap of $TS_NATIVE_SUITE with its backports kernel failed"
		fi
		rm -f "$tmp.tar"
		krel=$(cat "$tmp/twostep-kernel/release")
		mkdir -p "$tmp/twostep-kernel/root"
		for deb in "$tmp"/twostep-kernel/linux-*.deb; do
			dpkg-deb -x "$deb" "$tmp/twostep-kernel/root"
		done
		depmod -b "$tmp/twostep-kernel/root/usr" "$krel" 2>>"$log" ||
			{ ts_chroot_remove "$tmp"; ts_die "depmod for $krel failed"; }
		[ -r "$tmp/twostep-kernel/root/usr/lib/modules/$krel/vmlinuz" ] ||
			{ ts_chroot_remove "$tmp"; ts_die "no vmlinuz in $krel's package"; }
		touch "$tmp/.twostep-complete"
		ts_chroot_remove "$TS_CACHE"/chroot-"$TS_NATIVE_SUITE"-*
		mv "$tmp" "$TS_CHROOT"
		mv "$log" "$TS_CHROOT.log"
		ts_log "Debian 13 chroot: ready at $TS_CHROOT ($krel)"
	fi
	TS_KREL_NATIVE=$(cat "$TS_CHROOT/twostep-kernel/release")
}

# Debian 13 backports' kernel for arm64, FLAVOUR arm64 or arm64-16k: its
# image, modules and headers are fetched into the cache as Debian 12's are
# (kernels.sh), and modules are built against its headers in the Debian 13
# chroot, whose kbuild and gcc-14 cross compiler need Debian 13's C
# library: the headers are copied in once (the common half is the amd64
# kernel's own where the versions agree: it is one package for every
# architecture). Prints its release.
ts_native_arm64_setup() {
	local krel deps src d log
	ts_native_setup
	krel=$(ts_kernel_fetch trixie-backports arm64 "$1") || exit 1
	if [ ! -f "$TS_CHROOT/.twostep-$krel" ]; then
		log=$TS_CHROOT.log
		deps=$(ts_apt trixie-arm64 cache show --no-all-versions \
			"linux-headers-$krel" 2>/dev/null |
			sed -n 's/^Depends: //p' | head -n 1 |
			grep -o 'linux-kbuild-[^ ,]*')
		ts_log "Debian 13 chroot: adding the arm64 cross compiler and $krel's headers"
		if ! ts_chroot "$TS_CHROOT" sh -ec '
			apt-get update -qq
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
				--no-install-recommends gcc-14-aarch64-linux-gnu '"$deps"'
			apt-get clean' >>"$log" 2>&1; then
			tail -n 20 "$log" >&2
			ts_die "installing the arm64 cross compiler in the Debian 13 chroot failed"
		fi
		src=$(ts_kernel_root "$krel")/usr/src
		for d in "$src"/linux-headers-*; do
			[ -e "$TS_CHROOT/usr/src/${d##*/}" ] ||
				cp -a "$d" "$TS_CHROOT/usr/src/"
		done
		# kernels.sh pointed the include at the cache: back to /usr/src
		sed -i "s|^include $src/|include /usr/src/|" \
			"$TS_CHROOT/usr/src/linux-headers-$krel/Makefile"
		touch "$TS_CHROOT/.twostep-$krel"
	fi
	echo "$krel"
}

# Whether release KREL is built for in the Debian 13 chroot.
ts_native_built() {
	[ "$1" = "${TS_KREL_NATIVE:-}" ] ||
		[ -f "${TS_CHROOT:-/nonexistent}/.twostep-$1" ]
}

# Where the native kernel's modules tree is (for modprobe -d / modinfo -b)
# and its vmlinuz.
ts_native_modbase() {
	ts_native_setup
	echo "$TS_CHROOT/twostep-kernel/root/usr"
}
ts_native_vmlinuz() {
	ts_native_setup
	echo "$TS_CHROOT/twostep-kernel/root/usr/lib/modules/$TS_KREL_NATIVE/vmlinuz"
}

# Where this run stages its trees in the chroot: /build/<tag>, the tag
# from this tree and this run's results, so that two runs on one machine
# (make bench beside the suite) never build in, or wipe, each other's.
ts_native_build_dir() {
	echo "/build/$(printf '%s\n%s' "$TS_ROOT" "$TS_RESULTS" |
		md5sum | cut -c1-12)"
}

# Copy PATHS (relative to the tree) into the chroot's build directory's
# NAME: ts_native_stage NAME PATH...
ts_native_stage() {
	local name=$1 dir
	shift
	dir=$TS_CHROOT$(ts_native_build_dir)/$name
	rm -rf "$dir"
	mkdir -p "$dir"
	(cd "$TS_ROOT" && cp -a "$@" "$dir/")
}

# make in the chroot's build directory's NAME against the headers of
# release KREL (the native kernel's when empty):
# ts_native_make NAME LOG KREL [make arguments...]
ts_native_make() {
	local name=$1 log=$2 krel=${3:-$TS_KREL_NATIVE}
	shift 3
	ts_chroot "$TS_CHROOT" make -C "$(ts_native_build_dir)/$name" \
		KDIR="/usr/src/linux-headers-$krel" "$@" >"$log" 2>&1
}

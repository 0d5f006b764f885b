# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
# Shared helpers of the host harness: dependencies, the Debian kernel, the
# module build, the guest initramfs, QEMU configurations and the parsing of
# the guest console. Sourced by the scripts next to it.

TS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TS_RESULTS=${TS_RESULTS:-$TS_ROOT/results}
TS_CACHE=${TS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/twostep}
TS_BOOT_TIMEOUT=${TS_BOOT_TIMEOUT:-600}
# the architecture built for and booted (ts_config sets it per cell)
TS_ARCH=${TS_ARCH:-amd64}
# Remove folders DIR... that are or were chroots: a proc left mounted in
# one (a run killed while a command ran there) is unmounted first, and rm
# never crosses into another file system.
ts_chroot_remove() {
	local d
	for d in "$@"; do
		[ -e "$d" ] || continue
		umount "$d/proc" 2>/dev/null || true
		rm -rf --one-file-system "$d"
	done
}

# A Debian root made by mmdebstrap, kept in the cache: ts_cached_root
# PREFIX WHAT KEY OPTION... -- SUITE SOURCE... makes $TS_CACHE/PREFIX-KEY
# unless it is complete, removes the other PREFIX-* roots, and prints its
# path. KEY names everything the root is made from; WHAT says it in
# messages. Written as a tar file and unpacked (ts_untar_root), so that a
# user, whose mmdebstrap runs in its unshare mode, gets a root of files of
# the user's own, which ts_chroot enters.
ts_cached_root() {
	local prefix=$1 what=$2 root=$TS_CACHE/$1-$3 tmp log opts=() suite
	shift 3
	while [ "$1" != -- ]; do opts+=("$1"); shift; done
	suite=$2
	shift 2
	if [ ! -f "$root/.twostep-complete" ]; then
		ts_need_unshare
		mkdir -p "$TS_CACHE"
		tmp=$(mktemp -d "$TS_CACHE/root.XXXXXX")
		log=$tmp.log
		ts_log "$what: building it with mmdebstrap (log: $log)"
		if ! mmdebstrap --mode="$(ts_mmdebstrap_mode)" "${opts[@]}" \
			"$suite" "$tmp.tar" "$@" >"$log" 2>&1 ||
			! ts_untar_root "$tmp.tar" "$tmp" 2>>"$log"; then
			tail -n 20 "$log" >&2
			rm -f "$tmp.tar"
			ts_chroot_remove "$tmp"
			ts_die "mmdebstrap of $what failed"
		fi
		rm -f "$tmp.tar"
		touch "$tmp/.twostep-complete"
		ts_chroot_remove "$TS_CACHE/$prefix"-*
		mv "$tmp" "$root"
		mv "$log" "$root.log"
	fi
	echo "$root"
}

# mmdebstrap's mode: root, or for a user unshare (ts_need_unshare).
ts_mmdebstrap_mode() {
	if [ "$(id -u)" -eq 0 ]; then echo root; else echo unshare; fi
}

# Unpack the root in tar file $1 into folder $2: as root with its owners
# and device nodes; as a user every file the user's own and no device
# node (ts_chroot binds the host's /dev there), with apt told to run
# unsandboxed (ts_chroot's user namespace has no _apt user; the file's
# name has no "twostep" in it, which debcheck's purge check looks for).
ts_untar_root() {
	if [ "$(id -u)" -eq 0 ]; then
		tar -C "$2" -xf "$1"
		return
	fi
	tar -C "$2" --exclude='./dev/*' -xf "$1" &&
		echo 'APT::Sandbox::User "root";' \
			>"$2/etc/apt/apt.conf.d/99user-namespace"
}

# Copy this tree as committed, with what is changed in it (not results/),
# into folder DEST.
ts_copy_tree() {
	mkdir -p "$1"
	(cd "$TS_ROOT" && git ls-files -z --cached --others --exclude-standard |
		xargs -0 cp -a --parents -t "$1")
}

# A guest whose init has not begun after this many seconds hung in early
# boot (seen under TCG): it is stopped, and ts_boot boots it again.
TS_BOOT_INIT_TIMEOUT=${TS_BOOT_INIT_TIMEOUT:-300}
# TS_ICOUNT=shift=auto,sleep=off makes TCG skip the idle time of edu's
# 100 ms DMA timer; it pays off with one vCPU only (TS_SMP=1), as icount
# runs all vCPUs on one host thread: the default is 4 vCPUs, no icount.
TS_ICOUNT=${TS_ICOUNT-}
TS_SMP_DEFAULT=${TS_SMP:-4}
TS_KTAP_PREFIX='twostep-ktap: '
# operations of the ODP program's random stress in the ODP cells
# (TS_ODP_STRESS overrides)
TS_ODP_OPS_DEFAULT=20000

ts_log() { printf '%s\n' "$*" >&2; }
# One line of the main job's story, with the time since TS_T0.
TS_T0=${TS_T0:-0}
ts_say() { printf '[%4d s] %s\n' $((SECONDS - TS_T0)) "$*"; }
ts_die() { printf 'error: %s\n' "$*" >&2; exit 1; }
# Copy stdin to stdout, each line with the seconds since the copy began.
ts_stamp() {
	local t0=$SECONDS line
	while IFS= read -r line; do
		printf '[%4d s] %s\n' $((SECONDS - t0)) "$line"
	done
}

# Install whatever Debian packages are missing (idempotent).
ts_need_packages() {
	local missing=() p sudo=()
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
			grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	# as a user: with sudo where it needs no password, else the line
	if [ "$(id -u)" -ne 0 ]; then
		sudo -n true 2>/dev/null ||
			ts_die "missing host packages; install them, then run this again:
    sudo apt-get install --no-install-recommends ${missing[*]}"
		sudo=(sudo -n)
	fi
	ts_log "installing: ${missing[*]}"
	"${sudo[@]}" apt-get update -qq >&2 || ts_die "apt-get update failed"
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		--no-install-recommends "${missing[@]}" >&2 ||
		ts_die "apt-get install ${missing[*]} failed"
}

# What mmdebstrap's unshare mode, in which a user builds the main job's
# image and the Debian 13 chroot, needs: newuidmap, and a subordinate id
# range of the user's own (adduser gives every user one). Nothing as root.
ts_need_unshare() {
	local me
	[ "$(id -u)" -eq 0 ] && return 0
	ts_need_packages uidmap
	me=$(id -un)
	grep -q "^$me:" /etc/subuid 2>/dev/null &&
		grep -q "^$me:" /etc/subgid 2>/dev/null ||
		ts_die "as a user, mmdebstrap's unshare mode (the VM image, the chroots) needs a subordinate id range of $me's own in /etc/subuid and /etc/subgid, which adduser gives every user; for this account:
    sudo usermod --add-subuids 100000-165535 --add-subgids 100000-165535 $me"
}

# The host packages the commands use: the only thing installed on the host.
# Debian 12's kernels (6.1, 6.12 of backports) name gcc-12 in their headers:
# gcc itself on a Debian 12 host, a package of its own on Debian 13. 6.12's
# kbuild runs pahole for the modules' BTF (its package depends on it).
TS_HOST_PACKAGES="make gcc gcc-12 libc6-dev bc gzip cpio kmod busybox-static xz-utils pahole qemu-system-x86 debian-archive-keyring"

# Install the host packages, fetch Debian 12's kernel into the cache (see
# kernels.sh) and make it the one built for (TS_KREL, TS_KREL_DEFAULT).
ts_install_deps() {
	# shellcheck disable=SC2086 # a list of packages
	ts_need_packages $TS_HOST_PACKAGES
	TS_KREL=$(ts_kernel_fetch bookworm) || exit 1
	TS_KREL_DEFAULT=$TS_KREL
}

# The host's footprint: what the commands must leave as it was. Its
# installed packages (dpkg's database) and every path under
# TS_FOOTPRINT_PATHS with its type, size and time of change, one per line:
# ts_host_state >FILE before a run, ts_host_footprint FILE after it says
# "host footprint: paths changed N, packages changed M".
TS_FOOTPRINT_PATHS=${TS_FOOTPRINT_PATHS:-/boot /lib/modules /usr/src /etc/apt}
ts_host_state() {
	local p LC_ALL=C
	dpkg-query -W -f='package ${Package}:${Architecture} ${Version} ${db:Status-Abbrev}\n' |
		sort
	# shellcheck disable=SC2086 # a list of paths
	for p in $TS_FOOTPRINT_PATHS; do
		[ -e "$p" ] || continue
		find "$p" -xdev -printf 'path %p %y %s %T@\n' 2>/dev/null
	done | sort
}
ts_host_footprint() {
	local now paths pkgs LC_ALL=C
	now=$(ts_host_state)
	paths=$(diff <(grep '^path ' "$1" | cut -d' ' -f2) \
		<(printf '%s\n' "$now" | grep '^path ' | cut -d' ' -f2) |
		grep -c '^[<>]')
	# a path whose type, size or time changed, kept in both listings
	paths=$((paths + $(join <(grep '^path ' "$1" | cut -d' ' -f2-) \
		<(printf '%s\n' "$now" | grep '^path ' | cut -d' ' -f2-) |
		awk '$2 != $5 || $3 != $6 || $4 != $7' | wc -l)))
	pkgs=$(diff <(grep '^package ' "$1" | cut -d' ' -f2 | sort -u) \
		<(printf '%s\n' "$now" | grep '^package ' | cut -d' ' -f2 |
		sort -u) | grep -c '^[<>]')
	pkgs=$((pkgs + $(join <(grep '^package ' "$1" | cut -d' ' -f2-) \
		<(printf '%s\n' "$now" | grep '^package ' | cut -d' ' -f2-) |
		awk '$2 != $4 || $3 != $5' | wc -l)))
	echo "host footprint: paths changed $paths, packages changed $pkgs"
}

# Release for a kernel name used in configurations: 6.1 (Debian 12, the
# default), 6.12 (Debian 12 backports) or 7.3 (Debian 13 backports, with
# the native API; built against in a chroot, see native.sh), for amd64 or
# with /arm64 or /arm64-16k for arm64.
ts_kernel_for() {
	case "$1" in
	""|6.1) echo "$TS_KREL_DEFAULT" ;;
	6.1/arm64) ts_kernel_fetch bookworm arm64 || exit 1 ;;
	6.12/arm64) ts_kernel_fetch bookworm-backports arm64 || exit 1 ;;
	6.12/arm64-16k)
		ts_kernel_fetch bookworm-backports arm64 arm64-16k || exit 1 ;;
	6.12)
		[ -n "${TS_KREL_BACKPORTS:-}" ] ||
			TS_KREL_BACKPORTS=$(ts_kernel_fetch bookworm-backports) ||
			exit 1
		echo "$TS_KREL_BACKPORTS" ;;
	7.3)
		ts_native_setup
		echo "$TS_KREL_NATIVE" ;;
	7.3/arm64|7.3/arm64-16k)
		ts_native_arm64_setup "${1#*/}" || exit 1 ;;
	*) ts_die "unknown kernel '$1' (have: 6.1 6.12 7.3 6.1/arm64 6.12/arm64 6.12/arm64-16k 7.3/arm64 7.3/arm64-16k)" ;;
	esac
}

# The architecture of a kernel name (6.12: amd64, 6.12/arm64: arm64) and
# the make arguments of a module build for it.
ts_kernel_arch() {
	case "$1" in */*) echo "${1#*/}" | sed 's/-16k$//' ;; *) echo amd64 ;; esac
}
ts_arch_make_args() {
	case "$1" in
	arm64) echo "ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu-" ;;
	esac
}

# Host packages a run with guests of ARCH needs beyond TS_HOST_PACKAGES:
# the cross compiler Debian 12's arm64 headers name, a C library to link
# the ODP program statically, and QEMU for arm64.
ts_arch_packages() {
	case "$1" in
	arm64) echo "gcc-12-aarch64-linux-gnu libc6-dev-arm64-cross qemu-system-arm" ;;
	esac
}

# Make kernel name K (6.1, 6.12, 7.3) the one built for: sets TS_KREL here,
# in the calling shell, with the set-up the name needs.
ts_use_kernel() {
	case "$1" in
	7.3)
		ts_native_setup
		TS_KREL=$TS_KREL_NATIVE ;;
	6.12)
		TS_KREL_BACKPORTS=$(ts_kernel_for 6.12)
		TS_KREL=$TS_KREL_BACKPORTS ;;
	7.3/*)
		# built for in the chroot (ts_native_built), known here
		ts_native_setup
		TS_KREL=$(ts_kernel_for "$1") ;;
	*)
		TS_KREL=$(ts_kernel_for "$1") ;;
	esac
}

# Build both modules, then the example driver (example/, upstream's names
# only) against $TS_KREL's headers; warnings are errors. On the host for
# Debian 12's kernels, in the Debian 13 chroot for the native kernel. The
# modules are copied to $TS_RESULTS/$TS_KREL/.
ts_build_modules() {
	local log=$TS_RESULTS/build-$TS_KREL.log dir kdir mk
	ts_log "building twostep.ko, twostep_selftest.ko and twostep_example.ko for $TS_KREL"
	read -r -a mk <<<"$(ts_arch_make_args "$TS_ARCH")"
	if ts_native_built "$TS_KREL"; then
		ts_native_stage twostep Kbuild Makefile dkms.conf include src \
			selftest example
		dir=$TS_CHROOT$(ts_native_build_dir)/twostep
		# paths inside the chroot
		if ! ts_native_make twostep "$log" "$TS_KREL" -j"$(nproc)" \
			"${mk[@]}" KCFLAGS=-Werror ||
			! ts_native_make twostep/example "$log.example" \
			"$TS_KREL" "${mk[@]}" KCFLAGS=-Werror \
			KBUILD_EXTRA_SYMBOLS="$(ts_native_build_dir)/twostep/Module.symvers"; then
			cat "$log" "$log.example" >&2
			ts_die "module build for $TS_KREL (in the Debian 13 chroot) failed"
		fi
	else
		dir=$TS_ROOT
		kdir=$(ts_kernel_kdir "$TS_KREL")
		make -C "$TS_ROOT" clean KDIR="$kdir" "${mk[@]}" >/dev/null 2>&1
		make -C "$TS_ROOT/example" clean KDIR="$kdir" "${mk[@]}" \
			>/dev/null 2>&1
		if ! make -C "$TS_ROOT" -j"$(nproc)" KDIR="$kdir" "${mk[@]}" \
			KCFLAGS=-Werror >"$log" 2>&1 ||
			! make -C "$TS_ROOT/example" KDIR="$kdir" "${mk[@]}" \
			KCFLAGS=-Werror \
			KBUILD_EXTRA_SYMBOLS="$TS_ROOT/Module.symvers" \
			>"$log.example" 2>&1; then
			cat "$log" "$log.example" >&2
			ts_die "module build for $TS_KREL failed"
		fi
	fi
	cat "$log.example" >>"$log"
	rm -f "$log.example"
	if grep -q -i 'warning:' "$log"; then
		grep -i 'warning:' "$log" >&2
		ts_die "module build for $TS_KREL has warnings"
	fi
	mkdir -p "$TS_RESULTS/$TS_KREL"
	cp "$dir/twostep.ko" "$dir/twostep_selftest.ko" \
		"$dir/example/twostep_example.ko" "$TS_RESULTS/$TS_KREL/"
}

# A busybox initramfs with kmod (busybox insmod retries a failed init),
# the modules built for $TS_KREL, the kernel modules the guest must load
# first (virtio-iommu, where it is a module), and an init that loads them
# all and powers off: $TS_RESULTS/$TS_KREL/initramfs.cpio.gz.
ts_build_initramfs() {
	local dir=$TS_RESULTS/$TS_KREL/initramfs lib mod base
	# the kernels' modules are unpacked in the cache, not installed
	if [ "$TS_KREL" = "${TS_KREL_NATIVE:-}" ]; then
		base=(-d "$(ts_native_modbase)")
	else
		base=(-d "$(ts_kernel_modbase "$TS_KREL")")
	fi
	rm -rf "$dir"
	mkdir -p "$dir"/{bin,sbin,proc,sys,dev,lib/twostep/preload,lib64}
	if [ "$TS_ARCH" = amd64 ]; then
		cp /bin/busybox "$dir/bin/busybox"
		cp /usr/bin/kmod "$dir/sbin/kmod"
		for lib in $(ldd /usr/bin/kmod | grep -o '/[^ ]*'); do
			mkdir -p "$dir$(dirname "$lib")"
			cp -L "$lib" "$dir$lib"
		done
	else
		# Debian 12's for that architecture (kernels.sh), the
		# libraries whole but for glibc's character set modules
		lib=$(ts_userland_fetch "$TS_ARCH") || exit 1
		cp "$lib/bin/busybox" "$dir/bin/busybox"
		cp "$lib/bin/kmod" "$dir/sbin/kmod"
		cp -a "$lib/lib/." "$dir/lib/"
		mkdir -p "$dir/usr"
		cp -a "$lib/usr/lib" "$dir/usr/"
		rm -rf "$dir"/usr/lib/*/gconv
	fi
	ln -s kmod "$dir/sbin/insmod"
	cp "$TS_RESULTS/$TS_KREL/twostep.ko" \
		"$TS_RESULTS/$TS_KREL/twostep_selftest.ko" \
		"$TS_RESULTS/$TS_KREL/twostep_example.ko" "$dir/lib/twostep/"
	: >"$dir/lib/twostep/preload.list"
	if modprobe "${base[@]}" -S "$TS_KREL" --show-depends virtio_iommu \
		>/dev/null 2>&1; then
		for mod in $(modprobe "${base[@]}" -S "$TS_KREL" --show-depends virtio_iommu |
			awk '$1 == "insmod" { print $2 }'); do
			cp "$mod" "$dir/lib/twostep/preload/"
			echo "/lib/twostep/preload/$(basename "$mod")" \
				>>"$dir/lib/twostep/preload.list"
		done
	fi
	ts_build_odp_test
	cp "$TS_RESULTS/odp-test-$TS_ARCH" "$dir/bin/odp-test"
	cp "$TS_ROOT/qemu/guest-init" "$dir/init"
	chmod +x "$dir/init"
	(cd "$dir" && find . | cpio -o -H newc 2>/dev/null | gzip -1) \
		>"$TS_RESULTS/$TS_KREL/initramfs.cpio.gz"
}

# The ODP test's guest program, a static binary for $TS_ARCH:
# $TS_RESULTS/odp-test-<arch>.
ts_build_odp_test() {
	local log=$TS_RESULTS/build-odp-test-$TS_ARCH.log cc=gcc
	[ "$TS_ARCH" = arm64 ] && cc=aarch64-linux-gnu-gcc-12
	if ! "$cc" -O2 -static -Wall -Wextra -Werror \
		-o "$TS_RESULTS/odp-test-$TS_ARCH" \
		"$TS_ROOT/qemu/odp-test.c" >"$log" 2>&1; then
		cat "$log" >&2
		ts_die "building qemu/odp-test.c failed"
	fi
}

# An arm64 guest: QEMU's virt machine with an SMMUv3 (Cortex-A57; no EFI
# ROM for a NIC), Debian's arm64 kernel; ts_config changes what differs.
ts_arm64_guest() {
	TS_ARCH=arm64 TS_QEMU_BIN=qemu-system-aarch64
	TS_CONSOLE=ttyAMA0 TS_KSUFFIX=/arm64
	TS_QEMU_ARGS=(-machine virt,iommu=smmuv3 -cpu cortex-a57 -nic none)
}

# QEMU and guest arguments of a configuration: sets TS_QEMU_ARGS (array),
# TS_APPEND, TS_MEM (QEMU's -m), TS_EXPECT_API, TS_EXAMPLE (1: the example
# driver runs after the self-test), TS_P2P (1: an ivshmem-plain device
# whose memory backend the host checks), TS_DMAR (1: the Intel vIOMMU reports faults
# to the guest, so the host counts them; smmu: an SMMUv3's events, the
# attempts that raised one), TS_EDU_BITS (the edu device's
# DMA reach, which its driver takes for its DMA-API mask) and TS_SUMMARIES
# (summary lines the guest must print, '|'-separated). Where TS_ODP_OPS is
# set the guest runs the ODP program (qemu/odp-test.c) with that many
# stress operations after the self-test; TS_ODP_TRACE=1: QEMU traces the
# Intel vIOMMU's IOTLB invalidations and the ODP driver's unmap markers
# into $TS_RESULTS/<config>.trace, and the host counts flushes per unmap.
ts_config() {
	local platform=${1%@*} edus=1 wo=-1 cfg=$1 cfgname=$1 odp=0 fpw=""
	TS_KERNEL_NAME=6.1
	[ "$platform" != "$1" ] && TS_KERNEL_NAME=${1#*@}
	case "$TS_KERNEL_NAME" in 6.1|6.12|7.3) ;; *) return 1 ;; esac
	# odp-<platform>: that platform, running the ODP test
	case "$platform" in
	odp-intel|odp-intel-lazy|odp-amd|odp-intel-pt|odp-none|\
	odp-arm64-smmu|odp-arm64-smmu-16k|odp-arm64-virtio-16k)
		odp=1 platform=${platform#odp-} ;;
	esac
	set -- "$platform"
	TS_ARCH=amd64 TS_QEMU_BIN=qemu-system-x86_64 TS_CONSOLE=ttyS0
	TS_KSUFFIX=""
	TS_CFG_ICOUNT=$TS_ICOUNT TS_CASES_DEFAULT=all
	TS_QEMU_ARGS=(-machine q35,kernel-irqchip=split)
	TS_APPEND=""
	TS_DMAR=0
	TS_SMP=$TS_SMP_DEFAULT
	TS_EDU_BITS=64
	TS_SUMMARIES="bad inputs handled|unauthorized accesses blocked|stress ops|neighbour rounds|largest range|unlink coverage cases|link racing destroy|detach races|cut unlinks|unlink racing link|fuzz calls|give-back|hmm bitmap races|checker seeded bugs"
	TS_EXAMPLE=1 TS_P2P=0 TS_MEM=512
	TS_ODP_OPS="" TS_ODP_TRACE=0
	case "$1" in
	intel)
		# strict mode, plus the load/unload lifecycle rounds
		TS_QEMU_ARGS+=(-device intel-iommu,intremap=on)
		# slub_debug poisons freed contexts (kmalloc-1k): a write to
		# one, as by a refused call racing a detach, is reported
		TS_APPEND="intel_iommu=on iommu.strict=1 slab_nomerge slub_debug=FZP,kmalloc-1k ts_lifecycle=${TS_LIFECYCLE:-50}"
		TS_EXPECT_API=1 TS_DMAR=1 TS_P2P=1 wo=0 ;;
	intel-lazy)
		TS_QEMU_ARGS+=(-device intel-iommu,intremap=on)
		TS_APPEND="intel_iommu=on iommu.strict=0"
		TS_EXPECT_API=1 TS_DMAR=1 TS_EDU_BITS=40 wo=0 ;;
	intel-cm)
		TS_QEMU_ARGS+=(-device intel-iommu,intremap=on,caching-mode=on)
		TS_APPEND="intel_iommu=on iommu.strict=0"
		TS_EXPECT_API=1 TS_DMAR=1 wo=0 ;;
	intel-group)
		# two edu devices behind one PCI bridge share a group and a
		# domain; forcedac makes the DMA API hand out high addresses
		# at once, where a private window would have been; a 48-bit
		# domain
		TS_QEMU_ARGS+=(-device intel-iommu,intremap=on,aw-bits=48
			-device pci-bridge,id=br0,chassis_nr=1)
		# then a type switch with a context left on the peer, and
		# unload, under slab poisoning (guest-init): 6.1 refuses to
		# switch a group of two devices
		local sw=accept
		[ "$TS_KERNEL_NAME" = 6.1 ] && sw=refuse
		TS_APPEND="intel_iommu=on iommu.strict=1 iommu.forcedac=1 slab_nomerge slub_debug=FZPU ts_group=$sw"
		TS_EXPECT_API=1 TS_DMAR=1 wo=0 edus=2
		TS_SUMMARIES="$TS_SUMMARIES|group classic addresses|domain switches" ;;
	intel-pt)
		# passthrough: identity domain, the fallback path must work
		TS_QEMU_ARGS+=(-device intel-iommu,intremap=on)
		TS_APPEND="intel_iommu=on iommu=pt"
		TS_EXPECT_API=0 TS_SUMMARIES="" ;;
	amd)
		# 6.1: forcedac puts the DMA API's ranges, twostep's chunks
		# among them, at the very top of the 64-bit space
		TS_QEMU_ARGS+=(-device amd-iommu)
		TS_APPEND="iommu.strict=1 iommu.forcedac=1"
		# room for memory hotplug above 4 GiB: x86 sets swiotlb up,
		# which require_coherent needs to see a bounce refused
		TS_MEM=512,slots=1,maxmem=8G
		TS_EXPECT_API=1 TS_P2P=1 wo=1
		if [ "$TS_KERNEL_NAME" != 6.1 ]; then
			TS_EDU_BITS=40 TS_APPEND="iommu.strict=1"
		fi ;;
	virtio)
		# virtio-iommu: a module on 6.12, loaded by the guest's init
		TS_QEMU_ARGS=(-machine q35 -device virtio-iommu-pci)
		TS_APPEND="iommu.strict=1"
		TS_EXPECT_API=1 wo=1 ;;
	none)
		TS_QEMU_ARGS=(-machine q35)
		TS_EXPECT_API=0 TS_EDU_BITS=40 TS_SUMMARIES="" ;;
	arm64-*)
		# arm64 (ts_arm64_guest). smmu: an Arm SMMUv3, strict or lazy;
		# pt: the SMMUv3 in passthrough; virtio: virtio-iommu (not
		# built in 6.1's arm64 kernel); none: no IOMMU
		ts_arm64_guest
		# stage 1 of io-pgtable-arm has no write-only permission
		TS_APPEND="iommu.strict=1" TS_EXPECT_API=1 wo=0
		case "$1" in
		arm64-smmu) ;;
		arm64-smmu-lazy) TS_APPEND="iommu.strict=0" ;;
		arm64-smmu-16k)
			# Debian's 16 KiB-page kernel on a CPU with 16 KiB
			# pages; the SMMUv3 offers a 16 KiB granule, the page
			[ "$TS_KERNEL_NAME" = 6.1 ] && return 1
			TS_KSUFFIX=/arm64-16k
			TS_QEMU_ARGS=(-machine virt,iommu=smmuv3
				-cpu max,pauth-impdef=on -nic none) ;;
		arm64-pt)
			TS_APPEND="iommu.passthrough=1"
			TS_EXPECT_API=0 TS_SUMMARIES="" ;;
		arm64-virtio)
			[ "$TS_KERNEL_NAME" = 6.1 ] && return 1
			TS_QEMU_ARGS=(-machine virt -cpu cortex-a57 -nic none
				-device virtio-iommu-pci) wo=1 ;;
		arm64-virtio-16k)
			# 16 KiB pages over virtio-iommu's 4 KiB granule (its
			# page-size-mask, QEMU's target page, by default): a
			# CPU page is four IOMMU granules
			[ "$TS_KERNEL_NAME" = 6.1 ] && return 1
			TS_KSUFFIX=/arm64-16k
			TS_QEMU_ARGS=(-machine virt -cpu max,pauth-impdef=on
				-nic none -device virtio-iommu-pci) wo=1 ;;
		arm64-none)
			TS_QEMU_ARGS=(-machine virt -cpu cortex-a57 -nic none)
			TS_APPEND="" TS_EXPECT_API=0 TS_EDU_BITS=40
			TS_SUMMARIES="" ;;
		*) return 1 ;;
		esac
		# behind an SMMUv3 the security case's blocked accesses are
		# SMMU events in the guest's log, one attempt per rate limit
		# window
		case "$1" in arm64-smmu*) TS_DMAR=smmu fpw=1 ;; esac ;;
	bench-strict|bench-lazy|bench-cm|bench-pt|bench-arm64-strict|\
	bench-arm64-lazy|bench-arm64-pt)
		# benchmark mode, QEMU tracing the IOTLB invalidations and
		# the guest's phase markers; two vCPUs, for the two-thread
		# throughput (the rest runs on one of them); bench-pt: the
		# device in passthrough, where the two-step calls fall back.
		# bench-arm64-*: the virt machine's SMMUv3, whose TLB
		# invalidation commands QEMU traces (names of QEMU 7.2 and
		# later: smmuv3_s1_range_inval became smmuv3_range_inval)
		local mode=${1##*-} cm=off iommu="iommu.strict=1" api=1
		[ "$mode" = lazy ] && iommu="iommu.strict=0"
		if [ "${1#bench-arm64-}" != "$1" ]; then
			ts_arm64_guest
			[ "$mode" = pt ] && iommu="iommu.passthrough=1" api=0
			TS_QEMU_ARGS+=(-trace "enable=smmuv3_*range_inval"
				-trace "enable=smmuv3_cmdq_tlbi_*")
		else
			[ "$mode" = cm ] && cm=on
			[ "$mode" = pt ] && iommu="iommu=pt" api=0
			iommu="intel_iommu=on $iommu"
			TS_QEMU_ARGS+=(-device "intel-iommu,intremap=on,caching-mode=$cm"
				-trace "enable=vtd_inv_desc_iotlb_*")
		fi
		TS_QEMU_ARGS+=(-trace enable=pci_cfg_write
			-D "$TS_RESULTS/$cfgname.trace")
		local reps=${TS_BENCH_REPS:-9} maxn=${TS_BENCH_MAX_N:-4096}
		TS_APPEND="$iommu ts_params=bench=1:bench_reps=$reps:bench_max_n=$maxn"
		TS_EXPECT_API=$api TS_SMP=2 TS_SUMMARIES="" TS_EXAMPLE=0
		# BENCH_ICOUNT=1: a guest ns is one instruction (ts_cfg_accel);
		# one vCPU, as under -icount all vCPUs share one host thread
		# (no throughput of two to measure) and 6.1 never brings up a
		# second one there
		if [ "${TS_BENCH_ICOUNT:-0}" = 1 ]; then
			TS_CFG_ICOUNT=shift=0,sleep=off TS_SMP=1
		fi
		;;
	*)
		return 1 ;;
	esac
	# the native implementation beside twostep: the fidelity summary
	[ "$TS_KERNEL_NAME" = 7.3 ] && [ -n "$TS_SUMMARIES" ] &&
		TS_SUMMARIES="$TS_SUMMARIES|fidelity cases"
	# 7.3's Intel driver no longer grants reads to DMA_FROM_DEVICE maps
	# (io-pgtable-arm's stage 1 still has no write-only permission)
	[ "$TS_KERNEL_NAME" = 7.3 ] && [ "$TS_ARCH" = amd64 ] &&
		[ "$wo" = 0 ] && wo=1
	# the neighbour race needs two vCPUs; with one it says skip
	[ "$TS_SMP" -lt 2 ] && TS_SUMMARIES=$(printf '%s' "$TS_SUMMARIES" |
		sed 's/|neighbour rounds//; s/|link racing destroy//; s/|detach races//; s/|unlink racing link//; s/|hmm bitmap races//')
	if [ "$odp" = 1 ]; then
		TS_P2P=0
		# the ODP program after the self-test's hmm case (and the
		# lazy_reuse case, whose burst the trace counts); one vCPU
		# and icount without sleep, so that edu's 100 ms per transfer
		# cost no wall-clock time; the Intel cells count IOTLB flushes
		TS_SMP=1 TS_CFG_ICOUNT=shift=auto,sleep=off TS_DMAR=0
		TS_CASES_DEFAULT=hmm_refault,no_leak,lazy_reuse TS_SUMMARIES="" TS_EXAMPLE=0
		TS_APPEND=$(printf '%s' "$TS_APPEND" | sed 's/ ts_lifecycle=[0-9]*//')
		TS_ODP_OPS=${TS_ODP_STRESS:-$TS_ODP_OPS_DEFAULT}
		case "$1" in intel|intel-lazy) TS_ODP_TRACE=1 ;; esac
	fi
	if [ -n "$TS_ODP_OPS" ]; then
		TS_APPEND="$TS_APPEND ts_odp=$TS_ODP_OPS${TS_ODP_FLAGS:+ ts_odp_flags=$TS_ODP_FLAGS}"
		TS_SUMMARIES="${TS_SUMMARIES:+$TS_SUMMARIES|}odp ops $TS_ODP_OPS mismatches 0 "
	fi
	# the checker's clean run (guest-init): the example driver, or the
	# ODP program, under twostep's debug=1, where it reaches twostep:
	# not without a translating domain (twostep gives no range there),
	# not on 7.3, where the example calls the kernel's own dma_iova_*
	if [ "$TS_EXPECT_API" = 1 ] && [ "$TS_KERNEL_NAME" != 7.3 ] &&
		{ [ "$TS_EXAMPLE" = 1 ] || [ -n "$TS_ODP_OPS" ]; }; then
		TS_SUMMARIES="${TS_SUMMARIES:+$TS_SUMMARIES|}checker clean runs 1 findings 0"
	fi
	if [ "$TS_ODP_TRACE" = 1 ]; then
		TS_QEMU_ARGS+=(-trace enable=pci_cfg_write
			-trace "enable=vtd_inv_desc_iotlb_*"
			-D "$TS_RESULTS/$cfg.trace")
	fi
	if [ "$TS_P2P" = 1 ]; then
		# peer-to-peer: ivshmem-plain's BAR 2 is this 1 MiB file,
		# which the host reads after the guest (ts_p2p_check)
		TS_QEMU_ARGS+=(-object "memory-backend-file,id=p2pmem,size=1M,share=on,mem-path=$TS_RESULTS/$cfg.p2p"
			-device ivshmem-plain,memdev=p2pmem)
		TS_SUMMARIES="$TS_SUMMARIES|p2p bytes checked"
	fi
	local mask
	mask=$(printf '%#x' $(((1 << TS_EDU_BITS) - 1)))
	[ "$TS_EDU_BITS" = 64 ] && mask=0xffffffffffffffff
	if [ "$edus" = 2 ]; then
		TS_QEMU_ARGS+=(-device "edu,bus=br0,addr=1.0,dma_mask=$mask"
			-device "edu,bus=br0,addr=2.0,dma_mask=$mask")
	else
		TS_QEMU_ARGS+=(-device "edu,dma_mask=$mask")
	fi
	case "$TS_APPEND" in
	*ts_params=*) TS_APPEND="$TS_APPEND:hw_dma_bits=$TS_EDU_BITS:write_only=$wo" ;;
	*) TS_APPEND="$TS_APPEND ts_params=hw_dma_bits=$TS_EDU_BITS:write_only=$wo" ;;
	esac
	[ "$TS_P2P" = 1 ] && TS_APPEND="$TS_APPEND:p2p=1"
	[ -n "$fpw" ] && TS_APPEND="$TS_APPEND:faults_per_window=$fpw"
	return 0
}

# every arm64 cell (run-tests.sh arm64): Debian's 6.1, 6.12 and 7.3 arm64
# kernels behind an SMMUv3, strict and lazy; virtio-iommu (6.12, 7.3); the
# 16 KiB-page kernels (6.12, 7.3) over the SMMUv3's 16 KiB granule and
# virtio-iommu's 4 KiB one; passthrough and no IOMMU (6.1); the ODP
# program on the SMMUv3 (6.1, 7.3 16k) and virtio-iommu (7.3 16k)
TS_CONFIGS_ARM64="arm64-smmu arm64-smmu-lazy arm64-smmu@6.12 arm64-smmu-lazy@6.12 arm64-smmu@7.3 arm64-smmu-lazy@7.3 arm64-virtio@6.12 arm64-virtio@7.3 arm64-smmu-16k@6.12 arm64-smmu-16k@7.3 arm64-virtio-16k@6.12 arm64-virtio-16k@7.3 arm64-pt arm64-none odp-arm64-smmu odp-arm64-smmu-16k@7.3 odp-arm64-virtio-16k@7.3"
# the full suite's cells: of arm64's, the kernels' and IOMMUs' spread that
# fits the suite's time (16 KiB pages on 7.3 only: one 16k kernel fetched)
TS_CONFIGS_ALL="intel intel-lazy intel-cm intel-group amd intel-pt none intel@6.12 intel-group@6.12 virtio@6.12 amd@6.12 intel-pt@6.12 none@6.12 intel@7.3 intel-lazy@7.3 amd@7.3 virtio@7.3 odp-intel odp-intel-lazy odp-amd odp-intel-pt odp-none odp-intel@6.12 odp-amd@6.12 odp-intel-pt@6.12 odp-none@6.12 arm64-smmu arm64-pt arm64-none arm64-smmu-lazy@6.12 arm64-virtio@6.12 arm64-smmu@7.3 arm64-smmu-16k@7.3 arm64-virtio-16k@7.3 odp-arm64-smmu-16k@7.3"

# The accelerator of every guest the harness boots: KVM where it works,
# TCG where it does not. The probe opens $TS_KVM_DEV (default /dev/kvm)
# read-write, then starts a QEMU ($TS_KVM_QEMU) with -accel kvm and no
# machine, which quits at once; TWOSTEP_ACCEL=tcg or kvm forces one (kvm
# forced but unusable is an error). ts_accel_init probes once, in the
# shell of the run (not in a $(...)), and keeps the answer in TS_ACCEL and
# TS_ACCEL_WHY, exported, so that subshells and the scripts a run starts
# (the suite's run.sh) reuse it instead of probing; ts_accel_line says it
# in one line: "accel: tcg (/dev/kvm: No such file or directory)".
TS_KVM_DEV=${TS_KVM_DEV:-/dev/kvm}
TS_KVM_QEMU=${TS_KVM_QEMU:-qemu-system-x86_64}

# The probe's last step boots a kernel ($TS_KVM_KERNEL, default one fetched
# into the cache, else the host's own, read only) under -accel kvm, with no root: it must get as far as
# the panic for want of a root file system within TS_KVM_BOOT_TIMEOUT
# seconds (about two under working KVM). A /dev/kvm that opens and a QEMU
# that starts with it are not enough: seen on a sandboxed host, where
# guests under KVM printed nothing, or died in the kernel's decompressor
# with "KVM internal error".
TS_KVM_BOOT_TIMEOUT=${TS_KVM_BOOT_TIMEOUT:-30}

# Why KVM is not usable, on stdout (nothing when it is). The open is
# perl's (perl-base is essential): bash's <> would create a missing file.
ts_kvm_probe() {
	local err kernel out
	if ! err=$(perl -MFcntl -e 'sysopen(my $f, $ARGV[0], O_RDWR) or
		die "$ARGV[0]: $!\n"' "$TS_KVM_DEV" 2>&1); then
		echo "${err:-$TS_KVM_DEV: cannot be opened}"
		return 0
	fi
	if ! err=$(echo quit | timeout 30 "$TS_KVM_QEMU" -machine none -accel kvm \
		-nodefaults -display none -S -monitor stdio 2>&1 >/dev/null); then
		# its last line, without QEMU's own "...: -accel kvm: "
		err=$(printf '%s\n' "$err" | grep . | tail -n 1)
		echo "$TS_KVM_QEMU -accel kvm: ${err#*-accel kvm: }"
		return 0
	fi
	kernel=${TS_KVM_KERNEL:-$(ls -1v "$TS_KERNELS"/*/root/boot/vmlinuz-* \
		/boot/vmlinuz-* 2>/dev/null | tail -n 1)}
	[ -n "$kernel" ] || return 0
	out=$(timeout --foreground -k 5 "$TS_KVM_BOOT_TIMEOUT" "$TS_KVM_QEMU" \
		-accel kvm -m 256 -smp 1 -display none -monitor none \
		-serial stdio -no-reboot -kernel "$kernel" \
		-append "console=ttyS0 panic=-1" </dev/null 2>&1) || true
	if printf '%s\n' "$out" | grep -aq 'KVM internal error'; then
		echo "a kernel under -accel kvm died: KVM internal error"
	elif ! printf '%s\n' "$out" | grep -aq 'Kernel panic'; then
		echo "a kernel under -accel kvm did not boot in $TS_KVM_BOOT_TIMEOUT s"
	fi
}

# Decide the accelerator once (see above).
ts_accel_init() {
	local why
	[ -n "${TS_ACCEL:-}" ] && return 0
	case "${TWOSTEP_ACCEL:-}" in
	tcg) TS_ACCEL=tcg TS_ACCEL_WHY="TWOSTEP_ACCEL=tcg" ;;
	kvm|"")
		why=$(ts_kvm_probe)
		if [ -z "$why" ]; then
			TS_ACCEL=kvm TS_ACCEL_WHY=""
		elif [ "${TWOSTEP_ACCEL:-}" = kvm ]; then
			ts_die "TWOSTEP_ACCEL=kvm, but KVM is not usable ($why)"
		else
			TS_ACCEL=tcg TS_ACCEL_WHY=$why
		fi ;;
	*) ts_die "TWOSTEP_ACCEL='$TWOSTEP_ACCEL' (have: tcg kvm, or unset: KVM where it works)" ;;
	esac
	export TS_ACCEL TS_ACCEL_WHY
}

# The line that says which accelerator this run uses, and why not KVM.
ts_accel_line() {
	ts_accel_init
	echo "accel: $TS_ACCEL${TS_ACCEL_WHY:+ ($TS_ACCEL_WHY)}"
}

# The accelerator of this run.
ts_accel() {
	ts_accel_init
	echo "$TS_ACCEL"
}

# The accelerator of configuration $1's boot: the run's, but -icount (the
# ODP cells, TS_ICOUNT) is TCG's alone, so such a cell keeps TCG under any
# run and says so. Sets TS_CFG_ACCEL and prints "tcg", "kvm",
# "tcg (-icount: TCG only)" or, for a benchmark whose guest clock counts
# instructions (TS_BENCH_ICOUNT=1), "icount (...)": its figures are
# instruction counts, not times, and its CSV rows say so.
ts_cfg_accel() {
	ts_config "$1" || ts_die "unknown configuration $1"
	ts_accel_init
	TS_CFG_ACCEL=$TS_ACCEL
	if [ -n "$TS_CFG_ICOUNT" ]; then
		TS_CFG_ACCEL=tcg
		case "$TS_CFG_ICOUNT" in
		shift=0,*)
			echo "icount (TCG under -icount shift=0: one ns of guest time per instruction)" ;;
		*)	echo "tcg (-icount: TCG only)" ;;
		esac
	elif [ "$TS_ARCH" != amd64 ] && [ "$(uname -m)" = x86_64 ]; then
		TS_CFG_ACCEL=tcg
		echo "tcg ($TS_ARCH guest on an x86_64 host)"
	else
		echo "$TS_CFG_ACCEL"
	fi
}

# What a boot's story line says of its accelerator: what the boot of log
# $1.log wrote into $1.accel, or the run's.
ts_boot_accel() {
	cat "$TS_RESULTS/$1.accel" 2>/dev/null || ts_accel
}

# Wait for the QEMU (or its timeout) of PID, a child of this shell, whose
# console is LOG, and return its status. Until MARKER, the line its init
# prints first, shows, watch the console: when it has not after
# TS_BOOT_INIT_TIMEOUT seconds, write why into file HUNG, stop it and
# return 124, as for a timeout.
ts_boot_wait() {
	local log=$1 pid=$2 marker=$3 hung=$4 t=0 rc=0
	rm -f "$hung"
	while kill -0 "$pid" 2>/dev/null; do
		grep -aq "$marker" "$log" 2>/dev/null && break
		if [ "$t" -ge "$TS_BOOT_INIT_TIMEOUT" ]; then
			echo "hung in early boot: no init after $t s, the console's last line: $(grep -a . "$log" 2>/dev/null | tail -n 1 | tr -d '\r' | cut -c1-100)" >"$hung"
			kill "$pid" 2>/dev/null
			break
		fi
		sleep 2
		t=$((t + 2))
	done
	wait "$pid" || rc=$?
	[ -s "$hung" ] && rc=124
	return "$rc"
}

# Why the boot of console LOG died before MARKER (its init's first line):
# an Oops or a panic, or what ts_boot_wait wrote into HUNG; nothing when
# it did not.
ts_boot_early_death() {
	local log=$1 marker=$2 hung=$3
	grep -aq "$marker" "$log" && return 0
	if [ -s "$hung" ]; then
		cat "$hung"
	else
		grep -aE -m 1 'Oops|Kernel panic' "$log" | tr -d '\r'
	fi
}

# Boot one configuration; the console goes to $TS_RESULTS/<config>.log.
# Returns QEMU's exit status (124 on timeout). Under TCG on a loaded host
# Debian's kernel now and then dies or hangs while booting, long before
# our init runs (an int3 Oops in text patching, a timer check panic, a
# stop after the first second): such a boot is retried, up to twice (a
# 7.3 guest once died so in two boots in a row), each dead boot's console
# kept as <config>.boot<N>.log and its reason a line of <config>.retried,
# which the report shows. A crash after our init started is never retried.
ts_boot() {
	local cfg=$1 rc=0 why n
	rm -f "$TS_RESULTS/$cfg.retried" "$TS_RESULTS/$cfg".boot[0-9].log \
		"$TS_RESULTS/$cfg.trace" "$TS_RESULTS/$cfg.p2p"
	ts_boot_once "$cfg" || rc=$?
	for n in 1 2; do
		why=$(ts_boot_early_death "$TS_RESULTS/$cfg.log" \
			'twostep-harness: begin' "$TS_RESULTS/$cfg.hung")
		[ -n "$why" ] || break
		echo "$why" >>"$TS_RESULTS/$cfg.retried"
		mv "$TS_RESULTS/$cfg.log" "$TS_RESULTS/$cfg.boot$n.log"
		rc=0
		ts_boot_once "$cfg" || rc=$?
	done
	return "$rc"
}

ts_boot_once() {
	local cfg=$1 log=$TS_RESULTS/$1.log accel krel vmlinuz
	local icount=()
	ts_config "$cfg" || ts_die "unknown configuration $cfg"
	krel=$(ts_kernel_for "$TS_KERNEL_NAME$TS_KSUFFIX")
	if [ "$TS_KERNEL_NAME" = 7.3 ] && [ "$TS_ARCH" = amd64 ]; then
		vmlinuz=$(ts_native_vmlinuz)
	else
		vmlinuz=$(ts_kernel_vmlinuz "$krel" ||
			echo "$TS_KERNELS/$krel/no-vmlinuz")
	fi
	ts_cfg_accel "$cfg" >"$TS_RESULTS/$cfg.accel"
	accel=$TS_CFG_ACCEL
	[ -n "$TS_CFG_ICOUNT" ] && icount=(-icount "$TS_CFG_ICOUNT")
	# in a subshell whose children's CPU time is QEMU's, kept in
	# $TS_RESULTS/$cfg.cpu (see ts_cpu)
	( rc=0
	timeout --foreground -k 10 "$TS_BOOT_TIMEOUT" "$TS_QEMU_BIN" \
		-accel "$accel" -m "$TS_MEM" -smp "$TS_SMP" "${icount[@]}" \
		-display none -monitor none -serial stdio -no-reboot \
		"${TS_QEMU_ARGS[@]}" \
		-kernel "$vmlinuz" \
		-initrd "$TS_RESULTS/$krel/initramfs.cpio.gz" \
		-append "console=$TS_CONSOLE log_buf_len=8M panic=-1 oops=panic $TS_APPEND ts_expect=$TS_EXPECT_API ts_cases=${TWOSTEP_CASES:-$TS_CASES_DEFAULT}" \
		</dev/null >"$log" 2>"$TS_RESULTS/$cfg.qemu.log" &
	ts_boot_wait "$log" $! 'twostep-harness: begin' \
		"$TS_RESULTS/$cfg.hung" || rc=$?
	times >"$TS_RESULTS/$cfg.cpu"
	exit "$rc" )
}

# Host CPU seconds (user + system) QEMU took for the guest of log $1.log,
# from the "times" of its subshell ($1.cpu); "?" when not known.
ts_cpu() {
	awk 'NR == 2 { t = 0
		for (i = 1; i <= 2; i++) {
			split($i, a, "m"); sub(/s$/, "", a[2]); t += a[1] * 60 + a[2]
		}
		printf "%d\n", t; found = 1 }
		END { if (!found) print "?" }' "$TS_RESULTS/$1.cpu" 2>/dev/null ||
		echo "?"
}

# Console log $1 as the kernel logged it. A 7.x console that loses a record
# halfway (another context took it over) prints a line
# "** replaying previous printk message **" and the whole record again; the
# fragment before it, cut anywhere (or whole), goes with that line.
ts_console() {
	awk '{ line = $0; sub(/\r+$/, "", line) }
	index(line, "** replaying previous printk message **") {
		# at the start of a line: the line before was the fragment;
		# further on: the fragment begins this line
		if (index(line, "** replaying") == 1)
			held = 0
		next
	}
	{ if (held) print prev; prev = $0; held = 1 }
	END { if (held) print prev }' "$1"
}

# Read a console log: print the cases, check the run was whole and healthy.
# Prints "passed failed skipped" on the last line of stdout.
ts_parse() {
	local cfg=$1 rc=$2 log=$TS_RESULTS/$1.log
	local dmar=0 sums="" trace="" example=0 p2p=0 out chk p f s cp cf
	# the main job's boots: DMAR faults, or an arm64 image's SMMU events
	case "$cfg" in dkms*-arm64@*) dmar=smmu ;; dkms*) dmar=1 ;; esac
	ts_config "$cfg" 2>/dev/null && dmar=$TS_DMAR sums=$TS_SUMMARIES \
		example=$TS_EXAMPLE p2p=$TS_P2P
	[ "${TS_ODP_TRACE:-0}" = 1 ] && trace=$TS_RESULTS/$cfg.trace
	[ -n "$trace" ] && [ ! -e "$trace" ] && : >"$trace"
	# only when all cases ran: a case filter leaves summaries out, and
	# the example driver
	[ -n "${TWOSTEP_CASES:-}" ] && sums="" example=0
	out=$(awk -v cfg="$cfg" -v rc="$rc" -v prefix="$TS_KTAP_PREFIX" \
		-v qlog="$TS_RESULTS/$cfg.qemu.log" -v dmar="$dmar" \
		-v sums="$sums" -v tfile="$trace" -v example="$example" '
	function problem(msg) { printf "  %s: %s\n", cfg, msg; infra++ }
	# the console'"'"'s last line, for a boot that timed out
	FILENAME != qlog && FILENAME != tfile && /[^ \r]/ {
		lastcon = $0; sub(/\r+$/, "", lastcon)
	}
	function hex(s,   i, v) {
		v = 0; s = tolower(s); sub(/^0x/, "", s)
		for (i = 1; i <= length(s); i++)
			v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1
		return v
	}
	# QEMU trace: the ODP driver brackets each unmap of an invalidation
	# with config writes (kind 1 range, 2 per entry; 3 end, with the
	# entries unmapped); count the IOTLB invalidations in between
	tfile != "" && FILENAME == tfile {
		if ($0 ~ /^pci_cfg_write edu / && $0 ~ /@0xf0 <- 0x4f/) {
			v = hex($NF); kind = int(v / 1048576) % 16; n = v % 1048576
			# the burst of destroys of case lazy_reuse
			if (kind == 4) { lzwin = 1; lzc = 0; next }
			if (kind == 5 && lzwin) { lzwin = 0; lzn = n; lzm = lzc; lzseen = 1; next }
			if (kind == 1 || kind == 2) { okind = kind; fl = 0; inwin = 1 }
			else if (kind == 3 && inwin) {
				inwin = 0
				if (n > 0) {
					inv[okind]++; pages[okind] += n; fls[okind] += fl
					if (fl > mx[okind]) mx[okind] = fl
					if (!(okind in mn) || fl < mn[okind]) mn[okind] = fl
				}
			}
			next
		}
		if ($0 ~ /^vtd_inv_desc_iotlb_/ && inwin) fl++
		if ($0 ~ /^vtd_inv_desc_iotlb_/ && lzwin) lzc++
		next
	}
	/twostep-harness: odp-test rc=/ {
		orc = $0; sub(/.*rc=/, "", orc); sub(/\r$/, "", orc)
		if (orc != "0") problem("odp-test exited with " orc)
	}
	# the example driver: its own KTAP, results named example/<case>
	index($0, "twostep-example-ktap: ") {
		line = substr($0, index($0, "twostep-example-ktap: ") + 22)
		sub(/\r$/, "", line)
		if (line == "KTAP version 1") { ex_version++; next }
		if (line ~ /^1\.\.[0-9]+$/) { ex_plan = substr(line, 4) + 0; next }
		if (line ~ /^(not )?ok [0-9]+ /) {
			ex_results++
			if (line ~ /^not ok/) { fail++; mark = "FAIL" }
			else { pass++; mark = "ok  " }
			name = line; sub(/^(not )?ok [0-9]+ /, "", name)
			printf "  %-9s %s example/%s\n", cfg, mark, name
			next
		}
		if (line ~ /^ *# /) { print "  " cfg "     " line }
		next
	}
	# the checker'"'"'s clean runs, counted by the guest (guest-init)
	/^twostep-checker: # (summary: |[a-zA-Z ,]+: ranges checked)/ {
		line = substr($0, index($0, "# ")); sub(/\r$/, "", line)
		print "  " cfg "     " line
		if (line ~ /^# summary: /) summary[++nsummary] = line
		next
	}
	/twostep-harness: example rc=/ { ex_rc = $0; sub(/.*rc=/, "", ex_rc); sub(/\r$/, "", ex_rc); ex_seen = 1 }
	index($0, prefix) {
		line = substr($0, index($0, prefix) + length(prefix))
		sub(/\r$/, "", line)
		if (line == "KTAP version 1") { version++; next }
		if (line ~ /^1\.\.[0-9]+$/) { plan = substr(line, 4) + 0; next }
		if (line ~ /^Bail out!/) { problem(line); next }
		if (line ~ /^(not )?ok [0-9]+ /) {
			results++
			if (line ~ /^not ok/) { fail++; kfail++; mark = "FAIL" }
			else if (line ~ / # SKIP/) { skip++; mark = "skip" }
			else { pass++; mark = "ok  " }
			name = line; sub(/^(not )?ok [0-9]+ /, "", name)
			sub(/ # SKIP/, " -", name)
			printf "  %-9s %s %s\n", cfg, mark, name
			next
		}
		if (line ~ /^    # /) { print "  " cfg "     " line }
		if (line ~ /^# summary: /) {
			print "  " cfg "     " line
			summary[++nsummary] = line
		}
		# upstream WARNs on some inputs the fidelity cases give it
		if (line == "# expect-warn begin") { warnwin = 1; next }
		if (line == "# expect-warn end") { warnwin = 0; next }
		if (line ~ /^# dmar-window begin/) { window = 1; faults = 0; cur = 1 }
		# an SMMUv3 logs an event per 4 bytes: one per attempt counts
		if (line ~ /^# fault-attempt /) cur = 0
		if (line ~ /^# dmar-window end expected=/) {
			window = 0; expected = line; sub(/.*expected=/, "", expected)
			dmar_checked = 1
		}
		next
	}
	/DMAR: \[DMA (Read|Write)/ && window && dmar == 1 { faults++ }
	/arm-smmu-v3 [^ ]*: event 0x[0-9a-f]+ received/ && window &&
	    dmar == "smmu" && !cur { faults++; cur = 1 }
	/^twostep-check: / {
		sub(/\r$/, "")
		if ($2 == "ok") { pass++; mark = "ok  " } else { fail++; mark = "FAIL" }
		printf "  %-9s %s %s\n", cfg, mark, $3
		next
	}
	/^twostep-(life|group): / {
		sub(/\r$/, ""); sub(/^twostep-[a-z]+: /, ""); print "  " cfg "     # " $0
	}
	/twostep-harness: selftest rc=/ { src = $0; sub(/.*rc=/, "", src); sub(/\r$/, "", src); seen_rc = 1 }
	/twostep-harness: end/ { ended = 1 }
	FILENAME == qlog {
		# QEMU reports the vIOMMU faults our negative cases provoke;
		# anything else it says is a problem.
		if ($0 !~ /vtd_[a-z_]+: detected|New fault is not recorded|virtio_iommu_translate (no mapping|permission error)|no buffer available in event queue/)
			problem("QEMU: " $0)
		next
	}
	/WARNING:|Call Trace:/ && warnwin {
		if ($0 ~ /WARNING:/) { sub(/\r$/, ""); print "  " cfg "     # expected (upstream): " substr($0, index($0, "WARNING:")) }
		next
	}
	# slab_debug reports start "BUG <cache> (...): Poison overwritten"
	/Oops|BUG:|BUG [^ ]+ \(|Poison overwritten|Object padding|Redzone|Freepointer|Kernel panic|general protection fault|WARNING:|Call Trace:/ {
		sub(/\r$/, ""); problem("console: " $0)
	}
	END {
		if (rc == 124) problem("timed out; the console'"'"'s last line: " substr(lastcon, 1, 120))
		else if (rc != 0) problem("QEMU exited with status " rc)
		if (version != 1) problem("no single KTAP header")
		if (plan == "") problem("no KTAP plan")
		else if (results != plan) problem(sprintf("plan 1..%d but %d results", plan, results))
		if (!seen_rc) problem("self-test load result not reported")
		else if ((src == 0) != (kfail == 0)) problem("module load returned " src " with " kfail+0 " failed case(s)")
		if (!ended) problem("guest did not finish")
		if (example) {
			if (ex_version != 1 || ex_plan == "")
				problem("example driver: no KTAP header and plan")
			else if (ex_results != ex_plan)
				problem(sprintf("example driver: plan 1..%d but %d results", ex_plan, ex_results))
			if (!ex_seen) problem("example driver load result not reported")
		}
		# summary lines the configuration must print
		nsum = sums == "" ? 0 : split(sums, want, "|")
		for (i = 1; i <= nsum; i++) {
			found = 0
			for (j = 1; j <= nsummary; j++)
				if (index(summary[j], "# summary: " want[i]))
					found = 1
			printf "  %-9s %s summary_printed: %s\n", cfg,
				(found ? "ok  " : "FAIL"), want[i]
			if (found) pass++; else fail++
			# the poison was looked at, and found intact
			if (want[i] != "detach races") continue
			ok = 0
			for (j = 1; j <= nsummary; j++)
				if (summary[j] ~ /# summary: detach races [0-9]+ use after free 0$/)
					ok = 1
			printf "  %-9s %s detach_races_no_use_after_free\n", cfg, (ok ? "ok  " : "FAIL")
			if (ok) pass++; else fail++
		}
		if (tfile != "") {
			for (k = 1; k <= 2; k++)
				printf "  %s     # odp unmap %s (QEMU trace): %d invalidations, %d pages, %d IOTLB flushes, per invalidation %s..%d\n",
					cfg, (k == 1 ? "by range" : "per entry, as upstream"),
					inv[k], pages[k], fls[k], (k in mn ? mn[k] : "-"), mx[k]
			ok = inv[1] > 0 && mn[1] == 1 && mx[1] == 1
			printf "  %-9s %s odp_range_unmap_one_flush_per_invalidation\n", cfg, (ok ? "ok  " : "FAIL")
			if (ok) pass++; else fail++
			ok = inv[2] > 0 && fls[2] == pages[2]
			printf "  %-9s %s odp_per_entry_unmap_one_flush_per_page\n", cfg, (ok ? "ok  " : "FAIL")
			if (ok) pass++; else fail++
			# lazy: the invalidations of the destroys batched by the
			# flush queue; strict: one (at least) per destroy
			lazy = (cfg ~ /lazy/)
			if (lzseen)
				printf "  %s     # summary: lazy destroys %d invalidations %d (QEMU trace, %s domain)\n",
					cfg, lzn, lzm, (lazy ? "lazy" : "strict")
			ok = lzseen && lzn > 0 && (lazy ? lzm < lzn : lzm >= lzn)
			printf "  %-9s %s %s\n", cfg, (ok ? "ok  " : "FAIL"),
				(lazy ? "lazy_destroys_invalidations_batched" : "strict_destroys_invalidate_each")
			if (ok) pass++; else fail++
		}
		if (dmar && dmar_checked) {
			printf "  %-9s %s %s (expected %d, guest logged %d)\n", cfg,
				(faults == expected ? "ok  " : "FAIL"),
				(dmar == "smmu" ? "smmu_events_reported" : "dmar_faults_reported"),
				expected, faults
			if (faults == expected) pass++; else fail++
		}
		printf "%d %d %d\n", pass, fail + infra, skip
	}' "$TS_RESULTS/$cfg.qemu.log" ${trace:+"$trace"} <(ts_console "$log"))
	if [ "$p2p" != 1 ]; then
		printf '%s\n' "$out"
		return
	fi
	chk=$(ts_p2p_check "$cfg")
	printf '%s\n' "$out" | sed '$d'
	printf '%s\n' "$chk" | sed '$d'
	read -r p f s <<<"$(printf '%s\n' "$out" | tail -n 1)"
	read -r cp cf <<<"$(printf '%s\n' "$chk" | tail -n 1)"
	echo "$((p + cp)) $((f + cf)) $s"
}

# The bytes edu wrote into ivshmem's BAR, checked in the memory backend's
# file: each "# p2p backend OFF LEN crc32 C" line of the guest must match
# the file's bytes there. Prints a check line, then "passed failed"; with
# a case filter and no such line, nothing and "0 0".
ts_p2p_check() {
	local cfg=$1 r n bad
	r=$(ts_console "$TS_RESULTS/$cfg.log" | python3 -c '
import re, sys, zlib
try:
    data = open(sys.argv[1], "rb").read()
except OSError:
    data = b""
n = bad = 0
for line in sys.stdin:
    m = re.search(r"# p2p backend (0x[0-9a-f]+|0) ([0-9]+) crc32 ([0-9a-f]{8})", line)
    if not m:
        continue
    off, ln = int(m.group(1), 16), int(m.group(2))
    n += 1
    part = data[off:off + ln]
    if len(part) != ln or zlib.crc32(part) != int(m.group(3), 16):
        bad += 1
print(n, bad)' "$TS_RESULTS/$cfg.p2p")
	read -r n bad <<<"$r"
	if [ "$n" = 0 ] && [ -n "${TWOSTEP_CASES:-}" ]; then
		echo "0 0"
	elif [ "$n" -gt 0 ] && [ "$bad" = 0 ]; then
		printf '  %-9s ok   p2p_backend_file_holds_what_edu_wrote (%s pages)\n' "$cfg" "$n"
		echo "1 0"
	else
		printf '  %-9s FAIL p2p_backend_file_holds_what_edu_wrote (%s of %s pages differ)\n' "$cfg" "$bad" "$n"
		echo "0 1"
	fi
}

. "$TS_ROOT/qemu/kernels.sh"
. "$TS_ROOT/qemu/native.sh"

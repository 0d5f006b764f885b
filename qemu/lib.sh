# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
# Shared helpers of the host harness: dependencies, the Debian kernel, the
# module build, the guest initramfs, QEMU configurations and the parsing of
# the guest console. Sourced by the scripts next to it.

TS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TS_RESULTS=${TS_RESULTS:-$TS_ROOT/results}
TS_CACHE=${TS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/twostep}
TS_BOOT_TIMEOUT=${TS_BOOT_TIMEOUT:-600}
# TS_ICOUNT=shift=auto,sleep=off makes TCG skip the idle time of edu's
# 100 ms DMA timer; it pays off with one vCPU only (TS_SMP=1), as icount
# runs all vCPUs on one host thread: the default is 4 vCPUs, no icount.
TS_ICOUNT=${TS_ICOUNT-}
TS_SMP_DEFAULT=${TS_SMP:-4}
TS_KTAP_PREFIX='twostep-ktap: '

ts_log() { printf '%s\n' "$*" >&2; }
# One line of the main job's story, with the time since TS_T0.
TS_T0=${TS_T0:-0}
ts_say() { printf '[%4d s] %s\n' $((SECONDS - TS_T0)) "$*"; }
ts_die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# Install whatever Debian packages are missing (idempotent).
ts_need_packages() {
	local missing=() p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
			grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	[ "$(id -u)" -eq 0 ] || ts_die "missing packages (run as root): ${missing[*]}"
	ts_log "installing: ${missing[*]}"
	apt-get update -qq >&2 || ts_die "apt-get update failed"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		--no-install-recommends "${missing[@]}" >&2 ||
		ts_die "apt-get install ${missing[*]} failed"
}

ts_install_deps() {
	ts_need_packages make gcc libc6-dev bc gzip cpio kmod busybox-static \
		xz-utils qemu-system-x86 linux-headers-amd64 linux-image-amd64
	TS_KREL=$(ts_kernel_release)
	[ -n "$TS_KREL" ] || ts_die "cannot tell the release of linux-headers-amd64"
	# The image matching the headers exactly, even if the metapackages
	# were upgraded separately.
	ts_need_packages "linux-image-$TS_KREL" "linux-headers-$TS_KREL"
	TS_KREL_DEFAULT=$TS_KREL
	[ -r "/boot/vmlinuz-$TS_KREL" ] || ts_die "no /boot/vmlinuz-$TS_KREL"
}

# Release of the kernel Debian's linux-headers-amd64 points at.
ts_kernel_release() {
	dpkg-query -W -f='${Depends}' linux-headers-amd64 2>/dev/null |
		sed -n 's/^linux-headers-\([^ ,]*\).*/\1/p'
}

# Debian 12 backports' kernel: adds the backports suite of the Debian
# source this machine's apt already uses (no mirror name kept here), and
# installs that kernel's image and headers by name, leaving the
# metapackages alone. Prints its release.
ts_backports_kernel() {
	local list=/etc/apt/sources.list.d/twostep-bookworm-backports.list uri krel
	if ! apt-cache policy | grep -q ' bookworm-backports/main amd64'; then
		uri=$(apt-cache policy | awk '$3 == "bookworm/main" &&
			$4 == "amd64" { print $2; exit }')
		[ -n "$uri" ] || ts_die "apt knows no bookworm/main source"
		echo "deb $uri bookworm-backports main" >"$list"
		apt-get update -qq >&2 || ts_die "apt-get update failed"
	fi
	krel=$(apt-cache show linux-headers-amd64/bookworm-backports 2>/dev/null |
		sed -n 's/^Depends: linux-headers-\([^ ,]*\).*/\1/p' | head -n 1)
	[ -n "$krel" ] || ts_die "no backports kernel found"
	if ! dpkg-query -W -f='${Status}' "linux-image-$krel" \
		"linux-headers-$krel" 2>/dev/null | grep -c 'ok installed' |
		grep -q 2; then
		ts_log "installing backports kernel $krel"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends \
			"linux-image-$krel/bookworm-backports" \
			"linux-headers-$krel/bookworm-backports" >&2 ||
			ts_die "installing kernel $krel failed"
	fi
	echo "$krel"
}

# Release for a kernel name used in configurations: 6.1 (Debian 12, the
# default) or 6.12 (Debian 12 backports).
ts_kernel_for() {
	case "$1" in
	""|6.1) echo "$TS_KREL_DEFAULT" ;;
	6.12)
		[ -n "${TS_KREL_BACKPORTS:-}" ] ||
			TS_KREL_BACKPORTS=$(ts_backports_kernel)
		echo "$TS_KREL_BACKPORTS" ;;
	*) ts_die "unknown kernel '$1' (have: 6.1 6.12)" ;;
	esac
}

# Build both modules against $TS_KREL's headers; warnings are errors.
# The modules are copied to $TS_RESULTS/$TS_KREL/.
ts_build_modules() {
	local log=$TS_RESULTS/build-$TS_KREL.log
	ts_log "building twostep.ko and twostep_selftest.ko for $TS_KREL"
	make -C "$TS_ROOT" clean KERNELRELEASE="$TS_KREL" >/dev/null 2>&1
	if ! make -C "$TS_ROOT" -j"$(nproc)" KERNELRELEASE="$TS_KREL" \
		KCFLAGS=-Werror >"$log" 2>&1; then
		cat "$log" >&2
		ts_die "module build for $TS_KREL failed"
	fi
	if grep -q -i 'warning:' "$log"; then
		grep -i 'warning:' "$log" >&2
		ts_die "module build for $TS_KREL has warnings"
	fi
	mkdir -p "$TS_RESULTS/$TS_KREL"
	cp "$TS_ROOT/twostep.ko" "$TS_ROOT/twostep_selftest.ko" \
		"$TS_RESULTS/$TS_KREL/"
}

# A busybox initramfs with kmod (busybox insmod retries a failed init),
# the modules built for $TS_KREL, the kernel modules the guest must load
# first (virtio-iommu, where it is a module), and an init that loads them
# all and powers off: $TS_RESULTS/$TS_KREL/initramfs.cpio.gz.
ts_build_initramfs() {
	local dir=$TS_RESULTS/$TS_KREL/initramfs lib mod
	rm -rf "$dir"
	mkdir -p "$dir"/{bin,sbin,proc,sys,dev,lib/twostep/preload,lib64}
	cp /bin/busybox "$dir/bin/busybox"
	cp /usr/bin/kmod "$dir/sbin/kmod"
	ln -s kmod "$dir/sbin/insmod"
	for lib in $(ldd /usr/bin/kmod | grep -o '/[^ ]*'); do
		mkdir -p "$dir$(dirname "$lib")"
		cp -L "$lib" "$dir$lib"
	done
	cp "$TS_RESULTS/$TS_KREL/twostep.ko" \
		"$TS_RESULTS/$TS_KREL/twostep_selftest.ko" "$dir/lib/twostep/"
	: >"$dir/lib/twostep/preload.list"
	if modinfo -k "$TS_KREL" virtio_iommu >/dev/null 2>&1; then
		for mod in $(modprobe -S "$TS_KREL" --show-depends virtio_iommu |
			awk '$1 == "insmod" { print $2 }'); do
			cp "$mod" "$dir/lib/twostep/preload/"
			echo "/lib/twostep/preload/$(basename "$mod")" \
				>>"$dir/lib/twostep/preload.list"
		done
	fi
	cp "$TS_ROOT/qemu/guest-init" "$dir/init"
	chmod +x "$dir/init"
	(cd "$dir" && find . | cpio -o -H newc 2>/dev/null | gzip -1) \
		>"$TS_RESULTS/$TS_KREL/initramfs.cpio.gz"
}

# QEMU and guest arguments of a configuration: sets TS_QEMU_ARGS (array),
# TS_APPEND, TS_EXPECT_API, TS_DMAR (1: the Intel vIOMMU reports faults
# to the guest, so the host counts them), TS_EDU_BITS (the edu device's
# DMA reach, which its driver takes for its DMA-API mask) and TS_SUMMARIES
# (summary lines the guest must print, '|'-separated).
ts_config() {
	local platform=${1%@*} edus=1 wo=-1
	TS_KERNEL_NAME=6.1
	[ "$platform" != "$1" ] && TS_KERNEL_NAME=${1#*@}
	case "$TS_KERNEL_NAME" in 6.1|6.12) ;; *) return 1 ;; esac
	set -- "$platform"
	TS_QEMU_ARGS=(-machine q35,kernel-irqchip=split)
	TS_APPEND=""
	TS_DMAR=0
	TS_SMP=$TS_SMP_DEFAULT
	TS_EDU_BITS=64
	TS_SUMMARIES="bad inputs handled|unauthorized accesses blocked|stress ops|neighbour rounds|largest range"
	case "$1" in
	intel)
		# strict mode, plus the load/unload lifecycle rounds
		TS_QEMU_ARGS+=(-device intel-iommu,intremap=on)
		# slub_debug poisons freed contexts (kmalloc-1k): a write to
		# one, as by a refused call racing a detach, is reported
		TS_APPEND="intel_iommu=on iommu.strict=1 slab_nomerge slub_debug=FZP,kmalloc-1k ts_lifecycle=${TS_LIFECYCLE:-50}"
		TS_EXPECT_API=1 TS_DMAR=1 wo=0 ;;
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
		TS_APPEND="intel_iommu=on iommu.strict=1 iommu.forcedac=1"
		TS_EXPECT_API=1 TS_DMAR=1 wo=0 edus=2
		TS_SUMMARIES="$TS_SUMMARIES|group classic addresses" ;;
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
		TS_EXPECT_API=1 wo=1
		if [ "$TS_KERNEL_NAME" = 6.12 ]; then
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
	bench-strict|bench-lazy|bench-cm)
		# benchmark mode, one vCPU, QEMU tracing the IOTLB
		# invalidations and the guest's phase markers
		local cm=off strict=1
		[ "$1" = bench-cm ] && cm=on
		[ "$1" = bench-lazy ] && strict=0
		TS_QEMU_ARGS+=(-device "intel-iommu,intremap=on,caching-mode=$cm"
			-trace enable=pci_cfg_write
			-trace "enable=vtd_inv_desc_iotlb_*"
			-D "$TS_RESULTS/$1.trace")
		local reps=${TS_BENCH_REPS:-9} maxn=${TS_BENCH_MAX_N:-4096}
		TS_APPEND="intel_iommu=on iommu.strict=$strict ts_params=bench=1:bench_reps=$reps:bench_max_n=$maxn"
		TS_EXPECT_API=1 TS_SMP=1 TS_SUMMARIES="" ;;
	*)
		return 1 ;;
	esac
	# the neighbour race needs two vCPUs; with one it says skip
	[ "$TS_SMP" -lt 2 ] && TS_SUMMARIES=$(printf '%s' "$TS_SUMMARIES" |
		sed 's/|neighbour rounds//')
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
}

TS_CONFIGS_ALL="intel intel-lazy intel-cm intel-group amd intel-pt none intel@6.12 intel-group@6.12 virtio@6.12 amd@6.12 intel-pt@6.12 none@6.12"

# TCG always; KVM only when asked for with TWOSTEP_KVM=1 and usable.
ts_accel() {
	if [ "${TWOSTEP_KVM:-0}" = 1 ] && [ -w /dev/kvm ]; then
		echo kvm
	else
		echo tcg
	fi
}

# Boot one configuration; the console goes to $TS_RESULTS/<config>.log.
# Returns QEMU's exit status (124 on timeout). Under TCG on a loaded host
# Debian's kernel now and then dies while booting, long before our init
# runs (an int3 Oops in text patching, a timer check panic): such a boot
# is retried once, its console kept as <config>.boot1.log and the reason
# in <config>.retried, which the report shows. A crash after our init
# started is never retried.
ts_boot() {
	local cfg=$1 rc=0
	rm -f "$TS_RESULTS/$cfg.retried" "$TS_RESULTS/$cfg.boot1.log"
	ts_boot_once "$cfg" || rc=$?
	if ! grep -aq 'twostep-harness: begin' "$TS_RESULTS/$cfg.log" &&
		grep -aqE 'Oops|Kernel panic' "$TS_RESULTS/$cfg.log"; then
		grep -aE -m 1 'Oops|Kernel panic' "$TS_RESULTS/$cfg.log" |
			tr -d '\r' >"$TS_RESULTS/$cfg.retried"
		mv "$TS_RESULTS/$cfg.log" "$TS_RESULTS/$cfg.boot1.log"
		rc=0
		ts_boot_once "$cfg" || rc=$?
	fi
	return "$rc"
}

ts_boot_once() {
	local cfg=$1 log=$TS_RESULTS/$1.log accel krel
	local icount=()
	ts_config "$cfg" || ts_die "unknown configuration $cfg"
	krel=$(ts_kernel_for "$TS_KERNEL_NAME")
	accel=$(ts_accel)
	[ "$accel" = tcg ] && [ -n "$TS_ICOUNT" ] && icount=(-icount "$TS_ICOUNT")
	timeout --foreground -k 10 "$TS_BOOT_TIMEOUT" qemu-system-x86_64 \
		-accel "$accel" -m 512 -smp "$TS_SMP" "${icount[@]}" \
		-display none -monitor none -serial stdio -no-reboot \
		"${TS_QEMU_ARGS[@]}" \
		-kernel "/boot/vmlinuz-$krel" \
		-initrd "$TS_RESULTS/$krel/initramfs.cpio.gz" \
		-append "console=ttyS0 panic=-1 oops=panic $TS_APPEND ts_expect=$TS_EXPECT_API ts_cases=${TWOSTEP_CASES:-all}" \
		</dev/null >"$log" 2>"$TS_RESULTS/$cfg.qemu.log"
}

# Read a console log: print the cases, check the run was whole and healthy.
# Prints "passed failed skipped" on the last line of stdout.
ts_parse() {
	local cfg=$1 rc=$2 log=$TS_RESULTS/$1.log
	local dmar=0 sums=""
	case "$cfg" in dkms*) dmar=1 ;; esac
	ts_config "$cfg" 2>/dev/null && dmar=$TS_DMAR sums=$TS_SUMMARIES
	# only when all cases ran: a case filter leaves summaries out
	[ -n "${TWOSTEP_CASES:-}" ] && sums=""
	awk -v cfg="$cfg" -v rc="$rc" -v prefix="$TS_KTAP_PREFIX" \
		-v qlog="$TS_RESULTS/$cfg.qemu.log" -v dmar="$dmar" \
		-v sums="$sums" '
	function problem(msg) { printf "  %s: %s\n", cfg, msg; infra++ }
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
		if (line ~ /^# dmar-window begin/) { window = 1; faults = 0 }
		if (line ~ /^# dmar-window end expected=/) {
			window = 0; expected = line; sub(/.*expected=/, "", expected)
			dmar_checked = 1
		}
		next
	}
	/DMAR: \[DMA (Read|Write)/ && window { faults++ }
	/^twostep-check: / {
		sub(/\r$/, "")
		if ($2 == "ok") { pass++; mark = "ok  " } else { fail++; mark = "FAIL" }
		printf "  %-9s %s %s\n", cfg, mark, $3
		next
	}
	/^twostep-life: / { sub(/\r$/, ""); print "  " cfg "     # " substr($0, 15) }
	/twostep-harness: selftest rc=/ { src = $0; sub(/.*rc=/, "", src); sub(/\r$/, "", src); seen_rc = 1 }
	/twostep-harness: end/ { ended = 1 }
	FILENAME == qlog {
		# QEMU reports the vIOMMU faults our negative cases provoke;
		# anything else it says is a problem.
		if ($0 !~ /vtd_[a-z_]+: detected|New fault is not recorded|virtio_iommu_translate (no mapping|permission error)|no buffer available in event queue/)
			problem("QEMU: " $0)
		next
	}
	/Oops|BUG:|Kernel panic|general protection fault|WARNING:|Call Trace:/ {
		sub(/\r$/, ""); problem("console: " $0)
	}
	END {
		if (rc == 124) problem("timed out")
		else if (rc != 0) problem("QEMU exited with status " rc)
		if (version != 1) problem("no single KTAP header")
		if (plan == "") problem("no KTAP plan")
		else if (results != plan) problem(sprintf("plan 1..%d but %d results", plan, results))
		if (!seen_rc) problem("self-test load result not reported")
		else if ((src == 0) != (kfail == 0)) problem("module load returned " src " with " kfail+0 " failed case(s)")
		if (!ended) problem("guest did not finish")
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
		}
		if (dmar && dmar_checked) {
			printf "  %-9s %s dmar_faults_reported (expected %d, guest logged %d)\n", cfg,
				(faults == expected ? "ok  " : "FAIL"), expected, faults
			if (faults == expected) pass++; else fail++
		}
		printf "%d %d %d\n", pass, fail + infra, skip
	}' "$TS_RESULTS/$cfg.qemu.log" "$log"
}

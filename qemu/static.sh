# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
# Static-analysis gates of the test suite, on the kernel the modules are
# built for: a W=1 build with no warnings, sparse (C=2) silent,
# checkpatch.pl --strict clean on every source file (taken from Debian's
# linux-source package into the cache), kernel-doc silent on the public
# header; and the harness tier's checks of the harness itself
# (ts_harness_checks). Sourced after lib.sh and bench-lib.sh; each prints
# check lines and "passed failed".

TS_SOURCES="include/*.h src/*.c src/*.h selftest/*.c selftest/*.h example/edu_request.c qemu/names/names.c"

# checkpatch.pl of the kernel series being built for, from linux-source.
ts_checkpatch() {
	local series dir deb tmp
	series=$(echo "$TS_KREL" | sed -n 's/^\([0-9]*\.[0-9]*\)\..*/\1/p')
	dir=$TS_CACHE/checkpatch-$series
	if [ ! -x "$dir/checkpatch.pl" ]; then
		tmp=$(mktemp -d)
		ts_log "fetching checkpatch.pl from Debian's linux-source-$series"
		(cd "$tmp" && apt-get download -qq "linux-source-$series" >&2) ||
			{ rm -rf "$tmp"; return 1; }
		deb=$(ls "$tmp"/linux-source-*.deb)
		dpkg-deb --fsys-tarfile "$deb" |
			tar -x -C "$tmp" --wildcards './usr/src/linux-source-*.tar.xz'
		mkdir -p "$dir"
		tar -xJf "$tmp"/usr/src/linux-source-*.tar.xz -C "$tmp" \
			--wildcards '*/scripts/checkpatch.pl' \
			'*/scripts/spelling.txt' '*/scripts/const_structs.checkpatch'
		cp "$tmp"/linux-source-*/scripts/{checkpatch.pl,spelling.txt,const_structs.checkpatch} "$dir/"
		rm -rf "$tmp"
	fi
	echo "$dir/checkpatch.pl"
}

ts_static_checks() {
	local work log cp out kdoc kdir
	ts_need_packages sparse xz-utils >/dev/null
	work=$(mktemp -d)
	log=$TS_RESULTS/static.log
	: >"$log"
	cp -a "$TS_ROOT"/{Kbuild,Makefile,dkms.conf,include,src,selftest,example} "$work/"
	check() { # ok name detail
		if [ "$1" = 1 ]; then
			printf '  %-9s ok   %s\n' static "$2"; pass=$((pass + 1))
		else
			printf '  %-9s FAIL %s: %s\n' static "$2" "$3"
			fail=$((fail + 1))
		fi
	}
	local pass=0 fail=0

	kdir=$(ts_kernel_kdir "$TS_KREL")
	out=$(make -C "$work" KDIR="$kdir" W=1 C=2 2>&1 &&
		make -C "$work/example" KDIR="$kdir" \
			KBUILD_EXTRA_SYMBOLS="$work/Module.symvers" W=1 C=2 2>&1)
	printf '%s\n' "$out" >>"$log"
	if printf '%s\n' "$out" | grep -q -E 'Error [0-9]|error:'; then
		check 0 build_w1_and_sparse_silent "build failed (see $log)"
	else
		check $(( $(printf '%s\n' "$out" | grep -c 'warning:') == 0 )) \
			"build_w1_and_sparse_silent ($(printf '%s\n' "$out" | grep -c '  CHECK') files checked by sparse)" \
			"$(printf '%s\n' "$out" | grep 'warning:' | head -n 3)"
	fi

	if cp=$(ts_checkpatch); then
		out=$(cd "$TS_ROOT" && for f in $TS_SOURCES; do
			"$cp" --strict --no-tree --terse --show-types -f "$f"
		done 2>&1 | grep -v '^total: 0 errors, 0 warnings, 0 checks')
		printf '%s\n' "$out" >>"$log"
		check $(( $(printf '%s' "$out" | grep -c .) == 0 )) \
			"checkpatch_strict_clean ($(cd "$TS_ROOT" && ls $TS_SOURCES | wc -l) files)" \
			"$(printf '%s\n' "$out" | head -n 3)"
	else
		check 0 checkpatch_strict_clean "linux-source could not be fetched"
	fi

	# a consumer of every upstream name the drop-in header promises
	# (qemu/names/), built with -Werror against this kernel and
	# twostep's exports: here twostep must back every name
	cp -a "$TS_ROOT/qemu/names" "$work/names"
	out=$(make -C "$work/names" KDIR="$kdir" \
		KCFLAGS="-Werror -I$work/include -DTS_EXPECT_NATIVE=0" \
		KBUILD_EXTRA_SYMBOLS="$work/Module.symvers" 2>&1)
	printf '%s\n' "$out" >>"$log"
	check $(( $(printf '%s\n' "$out" | grep -c -E 'warning|error|Error') == 0 )) \
		drop_in_header_builds_every_upstream_name \
		"$(printf '%s\n' "$out" | grep -E 'warning|error' | head -n 3)"

	# the headers package's scripts/, where Debian keeps kernel-doc
	kdoc=$(readlink -f "$kdir/scripts")/kernel-doc
	[ -x "$kdoc" ] ||
		kdoc=$(ls "$kdir/../linux-headers-${TS_KREL%-*}-common/scripts/kernel-doc" 2>/dev/null)
	out=$("$kdoc" -none "$TS_ROOT"/include/*.h 2>&1)
	printf '%s\n' "$out" >>"$log"
	check $(( $(printf '%s' "$out" | grep -c .) == 0 )) \
		kernel_doc_public_headers "$(printf '%s\n' "$out" | head -n 3)"
	rm -rf "$work"
	echo "$pass $fail"
}

# The same consumer of upstream's names against the native kernel, in the
# Debian 13 chroot, without twostep's exports: every name must be the
# kernel's own there (names.c checks TWOSTEP_*_NATIVE, and modpost would
# refuse a call into twostep). Prints "passed failed".
ts_static_native_names() {
	local log=$TS_RESULTS/static-native.log
	ts_native_stage names qemu/names include
	if ts_native_make names/names "$log" "" \
		KCFLAGS="-Werror -I$(ts_native_build_dir)/names/include -DTS_EXPECT_NATIVE=1" &&
		! grep -q -E 'warning|error' "$log"; then
		printf '  %-9s ok   %s\n' static \
			"drop_in_header_adds_nothing_on_$TS_KREL_NATIVE"
		echo "1 0"
	else
		printf '  %-9s FAIL %s: %s\n' static \
			"drop_in_header_adds_nothing_on_$TS_KREL_NATIVE" \
			"$(grep -E 'warning|error' "$log" | head -n 3)"
		echo "0 1"
	fi
}

# One check line of ts_harness_checks: OK (1 or empty), NAME and what was
# seen when it failed; counts into that function's pass and fail.
ts_harness_check() {
	if [ "$1" = 1 ]; then
		printf '  %-9s ok   %s\n' harness "$2"
		pass=$((pass + 1))
	else
		printf '  %-9s FAIL %s: %s\n' harness "$2" "$3"
		fail=$((fail + 1))
	fi
}

# The harness's own checks, each on made-up input, no guest booted; prints
# check lines and "passed failed".
ts_harness_checks() {
	local pass=0 fail=0
	ts_harness_console
	ts_harness_smmu_events
	ts_harness_accel
	ts_harness_bench_compare
	ts_harness_docs
	ts_harness_clean_cache
	ts_harness_footprint
	ts_harness_user_packages
	echo "$pass $fail"
}

# Host packages missing for a user (stand-ins for id, dpkg-query, sudo):
# without a sudo that needs no password, the one apt-get line to run and
# exit 1; with one, apt-get through it.
ts_harness_user_packages() {
	local dir out want
	dir=$(mktemp -d)
	mkdir "$dir/bin"
	printf '#!/bin/sh\necho 1000\n' >"$dir/bin/id"
	printf '#!/bin/sh\necho "unknown ok not-installed"\n' >"$dir/bin/dpkg-query"
	printf '#!/bin/sh\nexit 1\n' >"$dir/bin/sudo"
	chmod +x "$dir"/bin/*
	out=$( (PATH="$dir/bin:$PATH" ts_need_packages foo-pkg) 2>&1; echo "exit $?")
	want="error: missing host packages; install them, then run this again:
    sudo apt-get install --no-install-recommends foo-pkg
exit 1"
	printf '#!/bin/sh\necho "sudo $*" >>%s/log\n' "$dir" >"$dir/bin/sudo"
	out="$out
$( (PATH="$dir/bin:$PATH" ts_need_packages foo-pkg) 2>&1; echo "exit $?")
$(cat "$dir/log")"
	want="$want
installing: foo-pkg
exit 0
sudo -n true
sudo -n apt-get update -qq
sudo -n env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends foo-pkg"
	rm -rf "$dir"
	ts_harness_check "$([ "$out" = "$want" ] && echo 1)" \
		user_missing_packages_sudo_or_the_line \
		"$(printf '%s' "$out" | tr '\n' ';')"
}

# The host-footprint check (ts_host_footprint) on a made-up host: a file
# that grew, a new file (and its folder's time) and a package upgraded must
# be seen; an untouched host must read 0 and 0.
ts_harness_footprint() {
	local dir out want
	dir=$(mktemp -d)
	mkdir -p "$dir/bin" "$dir/host/boot" "$dir/host/src/sub"
	echo one >"$dir/host/boot/vmlinuz-x"
	echo "package a:amd64 1.0 ii" >"$dir/packages"
	printf '#!/bin/sh\ncat %s\n' "$dir/packages" >"$dir/bin/dpkg-query"
	chmod +x "$dir/bin/dpkg-query"
	out=$(export PATH="$dir/bin:$PATH" \
		TS_FOOTPRINT_PATHS="$dir/host/boot $dir/host/src"
		ts_host_state >"$dir/before"
		ts_host_footprint "$dir/before"
		sleep 0.05
		echo two >>"$dir/host/boot/vmlinuz-x"
		touch "$dir/host/src/sub/new"
		echo "package a:amd64 1.1 ii" >"$dir/packages"
		ts_host_footprint "$dir/before")
	want="host footprint: paths changed 0, packages changed 0
host footprint: paths changed 3, packages changed 1"
	rm -rf "$dir"
	ts_harness_check "$([ "$out" = "$want" ] && echo 1)" \
		host_footprint_sees_paths_and_packages \
		"$(printf '%s' "$out" | tr '\n' ';')"
}

# make clean-cache, end to end on a made-up cache: refused while a path
# under it is mounted (a made-up mount table), then removed, with the
# space it freed.
ts_harness_clean_cache() {
	local dir out ok=1 why=""
	dir=$(mktemp -d)
	mkdir -p "$dir/cache/chroot-x/proc" "$dir/cache/image"
	head -c 3145728 /dev/zero >"$dir/cache/image/disk.qcow2"
	printf 'proc %s proc rw 0 0\n' "$dir/cache/chroot-x/proc" >"$dir/mounts"
	if TS_CACHE=$dir/cache TS_MOUNTS=$dir/mounts \
		make -s -C "$TS_ROOT" clean-cache >"$dir/out" 2>&1 ||
		[ ! -s "$dir/cache/image/disk.qcow2" ]; then
		ok=0 why="removed while mounted: $(cat "$dir/out")"
	fi
	: >"$dir/mounts"
	out=$(TS_CACHE=$dir/cache TS_MOUNTS=$dir/mounts \
		make -s -C "$TS_ROOT" clean-cache 2>&1) || ok=0
	if [ -e "$dir/cache" ] || ! [[ "$out" =~ ^removed\ .*:\ 3\.[0-9]\ MiB\ freed$ ]]; then
		ok=0 why="${why:+$why; }then: $out"
	fi
	rm -rf "$dir"
	ts_harness_check "$ok" "make_clean_cache_refuses_mounts_then_frees" "$why"
}

# The reading of a guest console, on a made-up 7.x console log whose
# records were cut and replayed in each way seen there (a cut in the name,
# before the KTAP prefix, a whole line printed again, the replay note in
# mid-line): every case read once, by its whole name.
ts_harness_console() {
	local dir out want got
	dir=$(mktemp -d)
	printf '%s\r\n' \
		'twostep-harness: begin' \
		'[    1.0] twostep_selftest: twostep-ktap: KTAP version 1' \
		'[    1.0] twostep_selftest: twostep-ktap: 1..5' \
		'[    1.1] twostep_selftest: twostep-ktap: ok 1 whole' \
		'[    1.2] twostep_selftest: twostep-ktap: ok 2 cut_in_the_na' \
		'** replaying previous printk message **' \
		'[    1.2] twostep_selftest: twostep-ktap: ok 2 cut_in_the_name' \
		'[    1.3] twostep_se' \
		'** replaying previous printk message **' \
		'[    1.3] twostep_selftest: twostep-ktap: ok 3 cut_before_the_prefix' \
		'[    1.4] twostep_selftest: twostep-ktap: ok 4 printed_again' \
		'** replaying previous printk message **' \
		'[    1.4] twostep_selftest: twostep-ktap: ok 4 printed_again' \
		'[    1.5] twostep_selftest: twostep-ktap: ok 5 cut_** replaying previous printk message **' \
		'[    1.5] twostep_selftest: twostep-ktap: ok 5 cut_before_the_note' \
		'twostep-harness: selftest rc=0' \
		'twostep-harness: end' >"$dir/none.log"
	: >"$dir/none.qemu.log"
	out=$(TS_RESULTS=$dir TWOSTEP_CASES=any ts_parse none 0)
	rm -rf "$dir"
	want="whole cut_in_the_name cut_before_the_prefix printed_again cut_before_the_note 5 0 0"
	got=$(printf '%s\n' "$out" | awk '/ ok   / { printf "%s ", $3 }'
		printf '%s\n' "$out" | tail -n 1)
	ts_harness_check "$([ "$got" = "$want" ] && echo 1)" \
		console_replay_read_once "read $got"
}

# The SMMUv3 cells' fault count, on made-up arm64-smmu consoles of three
# blocked accesses: an attempt's many events count once, one attempt
# without an event fails the check, events before the first mark count
# for none. The same for a boot of the main job on arm64 (dkms-arm64@6.1,
# whose guest prints the kernel log after the self-test, each line
# prefixed): counted by SMMU events too, not by the DMAR faults of the
# amd64 image's boots.
ts_harness_smmu_events() {
	local dir out k cfg pre got=""
	dir=$(mktemp -d)
	for cfg in arm64-smmu dkms-arm64@6.1; do
	pre=""
	[ "$cfg" = arm64-smmu ] || pre="twostep-dmesg: "
	for k in all one_missing; do
		{
		printf '%s\n' 'twostep-harness: begin' \
			'[ 1.0] twostep_selftest: twostep-ktap: KTAP version 1' \
			'[ 1.0] twostep_selftest: twostep-ktap: 1..1' \
			'[ 1.1] twostep_selftest: twostep-ktap: # dmar-window begin' \
			'[ 1.1] arm-smmu-v3 9050000.smmuv3: event 0x10 received:'
		printf '%s\n' \
			'[ 1.2] twostep_selftest: twostep-ktap: # fault-attempt 1'
		for _ in 1 2 3; do
			printf '%s\n' \
				'[ 1.2] arm-smmu-v3 9050000.smmuv3: event 0x13 received:' \
				'[ 1.2] arm-smmu-v3 9050000.smmuv3: 	0x0000000800000013'
		done
		printf '%s\n' \
			'[ 1.3] twostep_selftest: twostep-ktap: # fault-attempt 2' \
			'[ 1.3] arm-smmu-v3 9050000.smmuv3: event 0x10 received:' \
			'[ 1.4] twostep_selftest: twostep-ktap: # fault-attempt 3'
		[ "$k" = all ] && printf '%s\n' \
			'[ 1.4] arm-smmu-v3 9050000.smmuv3: event 0x10 received:'
		printf '%s\n' \
			'[ 1.5] twostep_selftest: twostep-ktap: # dmar-window end expected=3' \
			'[ 1.5] twostep_selftest: twostep-ktap: ok 1 security' \
			'twostep-harness: selftest rc=0' 'twostep-harness: end'
		} | sed "s/^\\[/$pre[/" >"$dir/$cfg.log"
		: >"$dir/$cfg.qemu.log"
		out=$(TS_RESULTS=$dir TWOSTEP_CASES=any ts_parse "$cfg" 0)
		got="$got$(printf '%s\n' "$out" |
			sed -n 's/.*\(ok  \|FAIL\) smmu_events_reported (expected \([0-9]*\), guest logged \([0-9]*\)).*/\1 \2 \3/p' |
			tr -s ' ');"
	done
	done
	rm -rf "$dir"
	ts_harness_check "$([ "$got" = "ok 3 3;FAIL 3 2;ok 3 3;FAIL 3 2;" ] && echo 1)" \
		smmu_events_one_per_attempt "read $got"
}

# How the harness picks the accelerator (ts_accel_init and ts_boot_once in
# lib.sh), with the probe pointed at made-up devices (TS_KVM_DEV) and at a
# stand-in for QEMU (TS_KVM_QEMU; for the boots, a qemu-system-x86_64 first
# in PATH) that logs each call: a device that cannot be opened gives TCG
# and the line saying why, before any QEMU is started and without creating
# the device; a QEMU whose -accel kvm fails gives TCG and its error; a
# probe that passes gives KVM; the probe runs once per run, its answer
# inherited by the scripts the run starts; TWOSTEP_ACCEL=tcg gives TCG
# without probing; TWOSTEP_ACCEL=kvm where KVM is not usable is an error;
# and the ODP cells boot under TCG with -icount while the others boot
# under KVM.
ts_harness_accel() {
	local dir out got want
	dir=$(mktemp -d)
	mkdir "$dir/bin"
	: >"$dir/kvm"
	# a QEMU whose -accel kvm works: reads "quit", then quits; with a
	# kernel, the kernel gets as far as wanting a root
	cat >"$dir/qemu-ok" <<EOF
#!/bin/sh
echo "\$*" >>"$dir/calls"
case "\$*" in *-kernel*)
	echo "Kernel panic - not syncing: VFS: Unable to mount root fs"
	exit 0 ;;
esac
read -r cmd && [ "\$cmd" = quit ]
EOF
	# a QEMU that starts with -accel kvm, but whose guests never run
	cat >"$dir/qemu-hang" <<EOF
#!/bin/sh
echo "\$*" >>"$dir/calls"
case "\$*" in *-kernel*) exec sleep 30 ;; esac
read -r cmd && [ "\$cmd" = quit ]
EOF
	# one whose guests die as KVM cannot emulate an instruction
	cat >"$dir/qemu-kvmerr" <<EOF
#!/bin/sh
echo "\$*" >>"$dir/calls"
case "\$*" in *-kernel*)
	echo "KVM internal error. Suberror: 1" >&2
	exec sleep 30 ;;
esac
read -r cmd && [ "\$cmd" = quit ]
EOF
	: >"$dir/vmlinuz"
	# a QEMU that has no KVM
	cat >"$dir/qemu-nokvm" <<EOF
#!/bin/sh
echo "\$*" >>"$dir/calls"
echo "Could not access KVM kernel module: Permission denied" >&2
echo "qemu-system-x86_64: -accel kvm: failed to initialize kvm: Permission denied" >&2
exit 1
EOF
	# the guests' QEMU: logs its arguments, boots nothing
	cat >"$dir/bin/qemu-system-x86_64" <<EOF
#!/bin/sh
echo "\$*" >>"$dir/boots"
EOF
	chmod +x "$dir/qemu-ok" "$dir/qemu-nokvm" "$dir/qemu-hang" \
		"$dir/qemu-kvmerr" "$dir/bin/qemu-system-x86_64"
	# how often a stand-in QEMU of the probe was started
	ncalls() { cat "$dir/calls" 2>/dev/null | grep -c .; }
	# the accelerator line of a run in a fresh environment: VAR=value...
	accel_run() {
		(unset TS_ACCEL TS_ACCEL_WHY TWOSTEP_ACCEL
		export TS_KVM_KERNEL="$dir/vmlinuz" TS_KVM_BOOT_TIMEOUT=2
		# shellcheck disable=SC2163 # VAR=value arguments
		export "$@"
		ts_accel_line) 2>&1
	}

	rm -f "$dir/calls"
	out=$(accel_run TS_KVM_DEV="$dir/no-kvm" TS_KVM_QEMU="$dir/qemu-ok")
	got="$out; QEMU started $(ncalls) times; $dir/no-kvm $([ -e "$dir/no-kvm" ] && echo created || echo 'not created')"
	want="accel: tcg ($dir/no-kvm: No such file or directory); QEMU started 0 times; $dir/no-kvm not created"
	out=$(accel_run TS_KVM_DEV="$dir/bin" TS_KVM_QEMU="$dir/qemu-ok")
	got="$got; $out"
	want="$want; accel: tcg ($dir/bin: Is a directory)"
	ts_harness_check "$([ "$got" = "$want" ] && echo 1)" \
		accel_tcg_when_kvm_device_cannot_be_opened "$got"

	out=$(accel_run TS_KVM_DEV="$dir/kvm" TS_KVM_QEMU="$dir/qemu-nokvm")
	want="accel: tcg ($dir/qemu-nokvm -accel kvm: failed to initialize kvm: Permission denied)"
	ts_harness_check "$([ "$out" = "$want" ] && echo 1)" \
		accel_tcg_when_qemu_accel_kvm_fails "$out"

	rm -f "$dir/calls"
	out=$(accel_run TS_KVM_DEV="$dir/kvm" TS_KVM_QEMU="$dir/qemu-ok")
	got="$out; $(paste -sd '|' "$dir/calls" 2>/dev/null)"
	want="accel: kvm; -machine none -accel kvm -nodefaults -display none -S -monitor stdio|-accel kvm -m 256 -smp 1 -display none -monitor none -serial stdio -no-reboot -kernel $dir/vmlinuz -append console=ttyS0 panic=-1"
	ts_harness_check "$([ "$got" = "$want" ] && echo 1)" \
		accel_kvm_when_the_probe_passes "$got"

	# /dev/kvm opens and QEMU starts with it, but no guest runs
	out=$(accel_run TS_KVM_DEV="$dir/kvm" TS_KVM_QEMU="$dir/qemu-hang")
	got=$out
	want="accel: tcg (a kernel under -accel kvm did not boot in 2 s)"
	out=$(accel_run TS_KVM_DEV="$dir/kvm" TS_KVM_QEMU="$dir/qemu-kvmerr")
	got="$got; $out"
	want="$want; accel: tcg (a kernel under -accel kvm died: KVM internal error)"
	ts_harness_check "$([ "$got" = "$want" ] && echo 1)" \
		accel_tcg_when_a_kernel_does_not_boot_under_kvm "$got"

	# probed once: by the run, not by each boot nor by a script it starts
	rm -f "$dir/calls"
	got=$( (unset TS_ACCEL TS_ACCEL_WHY TWOSTEP_ACCEL
		export TS_KVM_DEV="$dir/kvm" TS_KVM_QEMU="$dir/qemu-ok" \
			TS_KVM_KERNEL="$dir/vmlinuz"
		ts_accel_init
		echo "$(ts_accel) $(ts_accel) $(ts_cfg_accel intel) $(ts_cfg_accel amd@6.12)"
		bash -c '. "$1/qemu/lib.sh"; ts_accel_line' - "$TS_ROOT") 2>&1)
	got="$got; QEMU started $(ncalls) times"
	want="kvm kvm kvm kvm
accel: kvm; QEMU started 2 times"
	ts_harness_check "$([ "$got" = "$want" ] && echo 1)" \
		accel_probed_once_per_run "$(printf '%s' "$got" | tr '\n' ' ')"

	rm -f "$dir/calls"
	out=$(accel_run TWOSTEP_ACCEL=tcg TS_KVM_DEV="$dir/kvm" \
		TS_KVM_QEMU="$dir/qemu-ok")
	got="$out; QEMU started $(ncalls) times"
	want="accel: tcg (TWOSTEP_ACCEL=tcg); QEMU started 0 times"
	ts_harness_check "$([ "$got" = "$want" ] && echo 1)" \
		accel_forced_tcg_does_not_probe "$got"

	out=$(accel_run TWOSTEP_ACCEL=kvm TS_KVM_DEV="$dir/no-kvm" \
		TS_KVM_QEMU="$dir/qemu-ok"; echo "exit $?")
	want="error: TWOSTEP_ACCEL=kvm, but KVM is not usable ($dir/no-kvm: No such file or directory)
exit 1"
	ts_harness_check "$([ "$out" = "$want" ] && echo 1)" \
		accel_forced_kvm_unusable_is_an_error "$(printf '%s' "$out" | tr '\n' ' ')"

	# the boots themselves, KVM probed: what each QEMU was started with
	rm -f "$dir/boots"
	got=$( (export TS_ACCEL=kvm TS_ACCEL_WHY="" TS_RESULTS="$dir" \
		TS_KREL_DEFAULT=harness PATH="$dir/bin:$PATH"
		for c in intel odp-intel odp-none@6.12; do
			# the 6.12 kernel's release, as ts_kernel_for reads it
			# shellcheck disable=SC2034
			[ "$c" = odp-none@6.12 ] && TS_KREL_BACKPORTS=harness
			ts_boot_once "$c" >/dev/null 2>&1
			echo "$c: $(cat "$dir/$c.accel"), $(tail -n 1 "$dir/boots" |
				grep -o -e '-accel [a-z]*' -e '-icount [^ ]*' |
				paste -sd ' ')"
		done) 2>&1)
	want="intel: kvm, -accel kvm
odp-intel: tcg (-icount: TCG only), -accel tcg -icount shift=auto,sleep=off
odp-none@6.12: tcg (-icount: TCG only), -accel tcg -icount shift=auto,sleep=off"
	ts_harness_check "$([ "$got" = "$want" ] && echo 1)" \
		accel_icount_cells_boot_tcg_others_kvm "$(printf '%s' "$got" | tr '\n' ' ')"
	rm -rf "$dir"
}

# Comparing benchmark runs (ts_bench_compare, bench.sh --compare): two
# runs of one accelerator compare; a TCG run and a KVM run, or a CSV from
# before the accel column, are refused.
ts_harness_bench_compare() {
	local dir got want row
	dir=$(mktemp -d)
	row=strict,twostep,256,9,647,600,700,37.0,30,40,0.6400,0.0058,0.00,1.00
	{ echo "$TS_BENCH_CSV_HEADER"; echo "$row,tcg"; } >"$dir/tcg1.csv"
	{ echo "$TS_BENCH_CSV_HEADER"
		echo "${row/,647,/,1294,},tcg"; } >"$dir/tcg2.csv"
	{ echo "$TS_BENCH_CSV_HEADER"; echo "$row,kvm"; } >"$dir/kvm.csv"
	{ echo "${TS_BENCH_CSV_HEADER%,accel}"; echo "$row"; } >"$dir/old.csv"
	got=$(ts_bench_compare "$dir/tcg1.csv" "$dir/tcg2.csv" 2>&1 | tail -n 1
		echo "exit ${PIPESTATUS[0]}")
	for row in kvm old; do
		got="$got; $(ts_bench_compare "$dir/tcg1.csv" "$dir/$row.csv" 2>&1 |
			grep -o 'refused: [A-Za-z ]*'); exit $(ts_bench_compare \
			"$dir/tcg1.csv" "$dir/$row.csv" >/dev/null 2>&1; echo $?)"
	done
	want="strict       twostep          N=256   map 647 -> 1294 (2.00)  unmap 37.0 -> 37.0 (1.00)
exit 0; refused: runs made under different accelerators ; exit 1; refused: a CSV without the accel column ; exit 1"
	rm -rf "$dir"
	ts_harness_check "$([ "$got" = "$want" ] && echo 1)" \
		bench_compare_refuses_other_accelerators "$(printf '%s' "$got" | tr '\n' ' ')"
}

# GitHub's anchor of each heading of Markdown file $1, one a line.
ts_md_anchors() {
	awk '/^```/ { code = !code } !code && /^#+ / {
		sub(/^#+ /, ""); $0 = tolower($0)
		gsub(/[^a-z0-9 _-]/, ""); gsub(/ /, "-"); print }' "$1"
}

# The documentation: every link of README.md and doc/*.md to a file of
# the repository (not http) names a file that is there, and a heading of
# it where the link has an anchor; run.sh --help and run-tests.sh --help
# name doc pages that are there.
ts_harness_docs() {
	local f link target anchor bad="" n=0 page script
	for f in "$TS_ROOT"/README.md "$TS_ROOT"/doc/*.md; do
		while read -r link; do
			n=$((n + 1))
			target=${link%%#*} anchor=""
			case "$link" in *#*) anchor=${link#*#} ;; esac
			[ -n "$target" ] && target=$(dirname "$f")/$target
			[ -n "$target" ] || target=$f
			if [ ! -e "$target" ]; then
				bad="$bad ${f#"$TS_ROOT"/}:$link"
			elif [ -n "$anchor" ] &&
				! ts_md_anchors "$target" | grep -qx -- "$anchor"; then
				bad="$bad ${f#"$TS_ROOT"/}:$link"
			fi
		done < <(grep -o '\]([^)]*)' "$f" | sed 's/^](//; s/)$//' |
			grep -v -E '^(https?|mailto):')
	done
	ts_harness_check "$([ "$n" -gt 0 ] && [ -z "$bad" ] && echo 1)" \
		"doc_links_resolve ($n links)" "broken:$bad"
	bad=""
	for page in "run.sh doc/main-job.md" "run-tests.sh doc/testing.md"; do
		read -r script page <<<"$page"
		"$TS_ROOT/qemu/$script" --help 2>&1 | grep -q -F "$page" &&
			[ -e "$TS_ROOT/$page" ] || bad="$bad $script:$page"
	done
	ts_harness_check "$([ -z "$bad" ] && echo 1)" \
		help_points_at_doc_pages "missing:$bad"
}

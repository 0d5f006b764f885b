#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The test suite: install what is missing; the harness's own checks (how
# it reads a guest's console, how it picks the accelerator, the bench's
# refusal to compare runs of different accelerators: harness); static
# analysis of the sources (W=1, sparse, checkpatch --strict, kernel-doc);
# build both modules and the example driver against Debian's kernel
# headers (Debian 13 backports' 7.3 inside a cached Debian 13 chroot) and
# boot Debian's matching kernel in QEMU once per configuration of
# TS_CONFIGS_ALL (lib.sh) with the KTAP self-test and the example's cases
# in each, the fidelity cases against the native dma_iova_* on 7.3; make
# bench's own pipeline, small, with its CSV, Markdown and plots checked
# (bench-smoke). Beside all of it from the start, the main job's flow: the
# twostep-dkms package with a kernel upgrade in a Debian 12 and a Debian 13
# VM image (dkms, dkms13); and the package installed and purged in a
# chroot with two kernels' headers (debcheck). Sums everything into one
# line. See usage below, and doc/testing.md.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/image.sh"
. "$(dirname "$0")/bench-lib.sh"
. "$(dirname "$0")/static.sh"
. "$(dirname "$0")/debcheck.sh"
. "$(dirname "$0")/hosts.sh"

TS_TIERS="harness static $TS_CONFIGS_ALL bench-smoke bench-smoke-arm64 dkms dkms13 debcheck host13 user user13"

usage() {
	cat <<'EOF'
usage: qemu/run-tests.sh [tier...] [--help]

The test suite; with no tier, all of them: harness, static, every guest
configuration (intel, amd, virtio@6.12, intel@7.3, odp-intel, ...; see
TS_CONFIGS_ALL in qemu/lib.sh), bench-smoke, bench-smoke-arm64, dkms,
dkms13, debcheck,
host13 (the harness tier and intel-lazy run by a copy of the suite in a
Debian 13 root), user (the harness tier and none run by a copy of the
suite as a normal user) and user13 (run.sh's first phases, VM image and
make deb, as a user with a subordinate id range made in that Debian 13
root, the image by mmdebstrap's unshare mode). Names given run those only, e.g. "qemu/run-tests.sh
static harness" (no guest) or "qemu/run-tests.sh intel none"; "arm64" runs
every arm64 cell (TS_CONFIGS_ARM64 in qemu/lib.sh; the full suite runs a
subset) and dkms-arm64, the main job on an arm64 image (run.sh --arch
arm64; left out of the full suite for its time). Every run
ends with the host-footprint check: no package, and nothing under /boot,
/lib/modules, /usr/src or /etc/apt, changed after the host packages went
in (the guests' kernels are fetched into ~/.cache/twostep).

Output: each tier's checks and KTAP cases (ok, FAIL, skip) with the
accelerator of each boot, a kernel x platform table, the suite's time and
last "N passed, N failed, N skipped". Exits 0 only when nothing failed.
Logs and consoles: results/.

Environment: TWOSTEP_ACCEL=tcg or kvm forces an accelerator (default: KVM
where /dev/kvm works, TCG otherwise; the ODP cells keep TCG for -icount);
TWOSTEP_CASES=a,b runs only those self-test cases; TS_RESULTS sets the
results folder; TWOSTEP_DEBIAN_MIRROR=URI names the Debian archive (default:
the one this machine's apt uses for Debian).

More: doc/testing.md (the tiers, the configurations, reading the output).
EOF
}

case " $* " in *" -h "*|*" --help "*) usage; exit 0 ;; esac
configs=${*:-$TS_TIERS}
# the stand-ins for other hosts make a root, a uid or an account: root's
if [ "$(id -u)" -ne 0 ]; then
	if [ $# -eq 0 ]; then
		configs=$(tr ' ' '\n' <<<"$configs" |
			grep -vxE 'host13|user|user13' | paste -sd' ')
		echo "as a user: host13, user and user13 need root and are left out"
	else
		for c in "$@"; do
			case "$c" in host13|user|user13)
				ts_die "tier $c needs root (it makes a root, a uid or an account)" ;;
			esac
		done
	fi
fi
# arm64: every arm64 cell, those the full suite leaves out included
configs=$(for c in $configs; do
		if [ "$c" = arm64 ]; then echo "$TS_CONFIGS_ARM64 dkms-arm64"
		else echo "$c"; fi
	done)
quick=() flows=() static=0 harness=0 bench=0 bench_arm64=0 debcheck=0
host13=0 user=0 user13=0 kernels=""
need_kernel() {
	case " $kernels " in *" $1 "*) ;; *) kernels="$kernels $1" ;; esac
}
for c in $configs; do
	if [ "$c" = dkms ]; then
		flows+=(12:amd64)
	elif [ "$c" = dkms13 ]; then
		flows+=(13:amd64)
	elif [ "$c" = dkms-arm64 ]; then
		flows+=(12:arm64)
	elif [ "$c" = debcheck ]; then
		debcheck=1
	elif [ "$c" = static ]; then
		static=1
	elif [ "$c" = harness ]; then
		harness=1
	elif [ "$c" = host13 ]; then
		host13=1
	elif [ "$c" = user ]; then
		user=1
	elif [ "$c" = user13 ]; then
		user13=1
	elif [ "$c" = bench-smoke ]; then
		# make bench on 7.3 (its default) and with BENCH_KERNEL=6.1
		bench=1
		need_kernel 7.3
		need_kernel 6.1
	elif [ "$c" = bench-smoke-arm64 ]; then
		# make bench BENCH_ARCH=arm64 (7.3 behind the SMMUv3)
		bench_arm64=1
		need_kernel 7.3/arm64
	else
		ts_config "$c" ||
			ts_die "unknown configuration '$c' (have: $TS_TIERS arm64 $TS_CONFIGS_ARM64 dkms-arm64)"
		quick+=("$c")
		need_kernel "$TS_KERNEL_NAME$TS_KSUFFIX"
	fi
done
[ "$static" = 1 ] && [ -z "$kernels" ] && kernels=6.1
# guests to boot; bench-smoke is make bench's pipeline (ts_bench_run), this
# small to take a couple of minutes under TCG, once on 7.3 (its default) and
# once with BENCH_KERNEL=6.1, into $TS_RESULTS/bench-smoke[@6.1], and
# bench-smoke-arm64 with BENCH_ARCH=arm64
boots=("${quick[@]}")
[ "$bench" = 1 ] && boots+=(bench-smoke bench-smoke@6.1)
[ "$bench_arm64" = 1 ] && boots+=(bench-smoke-arm64)
# the suite in a Debian 13 root and as a user (hosts.sh), jobs of the pool
[ "$host13" = 1 ] && boots+=(host13)
[ "$user" = 1 ] && boots+=(user)
[ "$user13" = 1 ] && boots+=(user13)
TS_BENCH_REPS=2 TS_BENCH_MAX_N=16 TS_BENCH_MODES="strict pt"

start=$SECONDS
passed=0 failed=0 skipped=0
declare -A cell
# what failed, named again before the matrix (CI shows a run's last lines)
failed_names="" failed_lines=""
mkdir -p "$TS_RESULTS"
# every host package the run uses, first: the host is then what the run
# must leave as it found it (the footprint check at the end)
pkgs=$TS_HOST_PACKAGES
[ "$bench" = 1 ] || [ "$bench_arm64" = 1 ] && pkgs="$pkgs gnuplot-nox"
[ "$static" = 1 ] && pkgs="$pkgs sparse"
if [ ${#flows[@]} -gt 0 ] || [ "$debcheck" = 1 ]; then
	pkgs="$pkgs $TS_MAIN_PACKAGES"
fi
for d in "${flows[@]}"; do
	ts_image_select "${d%:*}" "${d#*:}"
	pkgs="$pkgs $(ts_image_host_packages)"
done
case " $kernels " in *" 7.3"*) pkgs="$pkgs mmdebstrap" ;; esac
case " $kernels " in *"/arm64"*) pkgs="$pkgs $(ts_arch_packages arm64)" ;; esac
[ "$host13" = 1 ] || [ "$user13" = 1 ] && pkgs="$pkgs mmdebstrap"
# shellcheck disable=SC2086 # a list of packages
ts_need_packages $pkgs
ts_host_state >"$TS_RESULTS/host-before"
ts_install_deps
# resolve (and fetch) the backports kernel once, before any subshell
case " $kernels " in *" 6.12 "*) TS_KREL_BACKPORTS=$(ts_kernel_for 6.12) ;; esac
case " $kernels " in *" 7.3"*) ts_native_setup ;; esac
# the Debian 13 root, made once for host13 and user13 (jobs of the pool)
if [ "$host13" = 1 ] || [ "$user13" = 1 ]; then ts_host13_setup; fi
# the accelerator of every guest of the run, probed once (the main job's
# flows inherit it) with the newest kernel fetched
if [ ${#boots[@]} -gt 0 ] || [ ${#flows[@]} -gt 0 ]; then
	ts_accel_init
	ts_accel_line
fi

# Add to the totals and to the kernel x platform table (summed per name).
add() {
	local p=0 f=0 s=0
	[ -n "${cell[$1]:-}" ] && IFS=/ read -r p f s <<<"${cell[$1]}"
	passed=$((passed + $2)) failed=$((failed + $3)) skipped=$((skipped + $4))
	cell[$1]="$((p + $2))/$((f + $3))/$((s + $4))"
	[ "$3" = 0 ] || failed_names="$failed_names $1"
}

# Print a checker's lines but its last, "passed failed [skipped]", which
# goes to the totals under NAME; echoes those counts.
tally() {
	local name=$1 out=$2 p f s
	printf '%s\n' "$out" | sed '$d'
	# a failed check, or a problem ts_parse found ("  <config>: why")
	failed_lines+=$(printf '%s\n' "$out" | sed '$d' |
		{ grep -E '^  [^ ]+ +FAIL |^  [a-z0-9@.-]+: ' || true; } |
		sed 's/$/|/' | tr -d '\n')
	read -r p f s <<<"$(printf '%s\n' "$out" | tail -n 1)"
	# a checker that died (ts_die in a command substitution) printed no
	# counts: a failure, never nothing
	if ! [[ "$p" =~ ^[0-9]+$ && "$f" =~ ^[0-9]+$ && "${s:-0}" =~ ^[0-9]+$ ]]; then
		echo "  $name: no result: the check stopped before it counted (see its log)"
		failed_lines+="  $name: no result: the check stopped before it counted|"
		p=0 f=1 s=0
	fi
	add "$name" "$p" "$f" "${s:-0}"
	TALLY="$p passed, $f failed, ${s:-0} skipped"
}

# Print one configuration's cases and add them to the totals.
report() {
	echo "== $1 ($(ts_boot_accel "$1"), QEMU status $2, console: $TS_RESULTS/$1.log)"
	[ -s "$TS_RESULTS/$1.retried" ] &&
		echo "   $1: the kernel died or hung while booting, before twostep's init ran; booted again ($(paste -sd';' "$TS_RESULTS/$1.retried"))"
	tally "$1" "$(ts_parse "$1" "$2")"
	echo "   $1: $TALLY (host CPU $(ts_cpu "$1") s)"
}

# The kernel of a bench-smoke tier: bench-smoke (7.3) or bench-smoke@K,
# and its architecture: bench-smoke-arm64 is arm64's.
bench_tier_kernel() {
	case "$1" in *@*) echo "${1#*@}" ;; *) echo 7.3 ;; esac
}
bench_tier_arch() {
	case "$1" in bench-smoke-arm64*) echo arm64 ;; *) echo amd64 ;; esac
}

# Whether a bench-smoke tier runs make bench's BENCH_ICOUNT=1: the one on
# 6.1 does, so that the option is run end to end too.
bench_tier_icount() {
	case "$1" in *@6.1) echo 1 ;; *) echo 0 ;; esac
}

# A bench-smoke tier (its name, and the pipeline's exit status): each
# guest's cases and figures (ts_bench_smoke_checks), then the files it
# wrote. Switches the benchmark's kernel to the tier's.
bench_report() {
	local mode cfg rc bench_dir=$TS_RESULTS/$1 TS_BENCH_ICOUNT TS_BENCH_ARCH
	local tier=$1
	TS_BENCH_ARCH=$(bench_tier_arch "$1")
	ts_bench_kernel "$(bench_tier_kernel "$1")"
	TS_BENCH_ICOUNT=$(bench_tier_icount "$1")
	shift
	echo "== $tier on $TS_BENCH_KNAME (make bench's pipeline: $TS_BENCH_MODES, $TS_BENCH_REPS repetitions, N <= $TS_BENCH_MAX_N$([ "$TS_BENCH_ICOUNT" = 1 ] && echo ", BENCH_ICOUNT=1"); exit $1, log: $bench_dir/pipeline.log)"
	for mode in $TS_BENCH_MODES; do
		cfg=$(ts_bench_cfg "$mode")
		rc=$(cat "$TS_RESULTS/$cfg.rc" 2>/dev/null || echo 255)
		echo "   $cfg ($(ts_boot_accel "$cfg"), QEMU status $rc, console: $TS_RESULTS/$cfg.log)"
		tally bench-smoke "$(ts_parse "$cfg" "$rc")"
		echo "   $cfg: $TALLY"
		tally bench-checks "$(ts_bench_smoke_checks "$cfg")"
	done
	# shellcheck disable=SC2086 # a list of modes
	tally bench-checks "$(ts_bench_output_checks "$bench_dir" "$1" $TS_BENCH_MODES)"
	[ "$1" = 0 ] || tail -n 5 "$bench_dir/pipeline.log" | sed 's/^/   | /'
	echo "   bench-checks: ${cell[bench-checks]} (passed/failed/skipped)"
}

# A run of the suite by the suite (host13: in a Debian 13 root; user: as
# a normal user), its tier name and exit status: its tiers' lines and any
# failure as it printed them, its totals added under that name.
# The lines of a run of the suite ($1: its output) shown under its tier:
# its sections, failures and totals.
sub_lines() {
	grep -E '^(accel:|== |  [a-z0-9@.-]+ +FAIL |   [a-z0-9@.-]+: [0-9]+ passed|suite time|[0-9]+ passed, )' \
		"$1" | sed 's/^/   | /'
}

# The totals a run of the suite ($1: its output) ended with, "passed
# failed skipped", or nothing when it did not end so.
sub_totals() {
	tail -n 1 "$1" |
		sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) skipped$/\1 \2 \3/p'
}

sub_report() {
	local name=$1 out=$TS_RESULTS/$1.out p f s what
	case "$name" in
	host13) what="$TS_HOST13_TIERS in a Debian 13 root" ;;
	*) what="$TS_USER_TIERS as a user (uid $TS_USER_UID)" ;;
	esac
	echo "== $name: ./qemu/run-tests.sh $what (exit $2, output: $out)"
	sub_lines "$out"
	if read -r p f s < <(sub_totals "$out") && [ -n "$p" ]; then
		[ "$2" = 0 ] || [ "$f" -gt 0 ] || f=1
		add "$name" "$p" "$f" "$s"
		what=$name
		[ "$name" = user ] && what="as a user (uid $TS_USER_UID)"
		echo "   $what: $p passed, $f failed, $s skipped (exit $2)"
	else
		echo "   $name: no verdict; the end of $out:"
		tail -n 20 "$out" | sed 's/^/   | /'
		add "$name" 0 1 0
	fi
}

# run.sh's first phases as a user in the Debian 13 root (ts_user13_run),
# its exit status: the phases' lines, and checks that each phase ran as
# that user (not root) and passed.
user13_report() {
	local out=$TS_RESULTS/user13.out uid ok rc p f s
	echo "== user13: ./qemu/run.sh's first phases as a user in a Debian 13 root (exit $1, output: $out)"
	grep -E '^(user |\[ *[0-9]+ s\] |error: )' "$out" | sed 's/^/   | /'
	uid=$(sed -n 's/^user [^ ]* uid \([0-9]*\)$/\1/p' "$out")
	rc=$(sed -n 's/^run.sh exit \([0-9]*\)$/\1/p' "$out")
	tally user13 "$(
		ok=0
		[ -n "$uid" ] && [ "$uid" != 0 ] && ok=1
		printf '  user13    %s ran_as_a_user (uid %s)\n' \
			"$( [ $ok = 1 ] && echo 'ok  ' || echo FAIL)" "${uid:-?}"
		p=$ok f=$((1 - ok))
		for want in 'VM image: (built|cached)' 'package: twostep-dkms_.*lintian clean' 'stopped after the package'; do
			if grep -Eq "^\[ *[0-9]+ s\] $want" "$out"; then
				printf '  user13    ok   %s\n' "$want"; p=$((p + 1))
			else
				printf '  user13    FAIL %s\n' "$want"; f=$((f + 1))
			fi
		done
		if [ "$rc" = 0 ]; then
			echo "  user13    ok   run_sh_exit_0"; p=$((p + 1))
		else
			echo "  user13    FAIL run_sh_exit_0 (exit ${rc:-?})"; f=$((f + 1))
		fi
		echo "$p $f 0")"
	echo "   user13: $TALLY"
	# the debcheck tier as that user: its checks and totals
	sub_lines <(sed -n '/^== as the user: /,$p' "$out")
	if read -r p f s < <(sub_totals "$out") && [ -n "$p" ] &&
		grep -q '^== as the user: ' "$out"; then
		[ "$1" = 0 ] || [ "$f" -gt 0 ] || [ "$rc" != 0 ] || f=1
		add user13 "$p" "$f" "$s"
		echo "   user13 debcheck as the user: $p passed, $f failed, $s skipped (exit $1)"
	else
		echo "   user13: the debcheck tier as the user gave no verdict"
		add user13 0 1 0
	fi
}

# run.sh's options for flow RELEASE:ARCH (12:amd64, 12:arm64, ...)
flow_args() {
	if [ "${1#*:}" = amd64 ]; then
		echo "--debian ${1%:*}"
	else
		echo "--debian ${1%:*} --arch ${1#*:}"
	fi
}

# The main job's flows start first, beside everything else: each builds
# its VM image unless cached, then boots it twice; the longest jobs of the
# suite by far. Their output goes to $TS_RESULTS/<flow>.out.
flowpid=()
if [ "$debcheck" = 1 ]; then
	ts_log "building the twostep-dkms package (log: $TS_RESULTS/deb.log)"
	deb=$("$TS_ROOT/qemu/deb.sh" 2>"$TS_RESULTS/deb.log") ||
		{ tail -n 30 "$TS_RESULTS/deb.log" >&2; ts_die "make deb failed"; }
fi
if [ ${#flows[@]} -gt 0 ]; then
	# an image of another architecture is finished in a guest booted
	# from the cache's kernel: fetched here, not beside a cell's fetch
	for d in "${flows[@]}"; do
		ts_image_select "${d%:*}" "${d#*:}"
		[ "$TS_IMAGE_ARCH" = amd64 ] ||
			ts_kernel_fetch "$TS_IMAGE_SUITE" "$TS_IMAGE_ARCH" >/dev/null
	done
	# one vCPU each: beside the other guests on a 2-core host, a second
	# vCPU costs more host CPU than it saves (figures in doc/testing.md)
	export TS_DKMS_SMP=${TS_DKMS_SMP:-1}
	# the README's main job itself, each with a package folder of its
	# own (two make deb at once would share results/deb)
	for d in "${flows[@]}"; do
		ts_image_select "${d%:*}" "${d#*:}"
		ts_image_machine
		rm -f "$TS_RESULTS/$TS_FLOW.boots" "$TS_RESULTS/$TS_FLOW.rc"
		ts_log "main job $TS_FLOW: ./qemu/run.sh $(flow_args "$d") (its package, the image unless cached, two boots under $TS_IMAGE_ACCEL) in the background (its output: $TS_RESULTS/$TS_FLOW.out)"
		( rc=0
		# shellcheck disable=SC2046 # the options
		TS_DEB_DIR=$TS_RESULTS/deb-$TS_FLOW \
			"$TS_ROOT/qemu/run.sh" $(flow_args "$d") \
			>"$TS_RESULTS/$TS_FLOW.out" 2>&1 || rc=$?
		echo "$rc" >"$TS_RESULTS/$TS_FLOW.rc" ) &
		flowpid+=($!)
	done
	# an early exit takes the flows and their guests with it
	kill_tree() {
		local c
		for c in $(ps -o pid= --ppid "$1"); do kill_tree "$c"; done
		kill "$1" 2>/dev/null || true
	}
	trap 'for p in "${flowpid[@]}"; do kill_tree "$p"; done' EXIT
fi

# What ./qemu/run.sh $(flow_args $1) told its user: its story, and whether its
# closing line and exit status say what the suite counted for its boots
# ($2 passed, $3 failed, $4 skipped).
flow_verdict() {
	local want="$2 passed, $3 failed, $4 skipped" got rc pass=no said=no
	rc=$(cat "$TS_RESULTS/$TS_FLOW.rc" 2>/dev/null || echo 255)
	got=$(tail -n 1 "$TS_RESULTS/$TS_FLOW.out")
	[ "$3" = 0 ] && [ "$2" -gt 0 ] && pass=yes
	[ "$rc" = 0 ] && said=yes
	echo "== ./qemu/run.sh $(flow_args "$1") (exit $rc, output: $TS_RESULTS/$TS_FLOW.out)"
	grep -E '^\[ *[0-9]+ s\] |^main job time: ' "$TS_RESULTS/$TS_FLOW.out" |
		sed 's/^/   /' || true
	if [ "$got" = "$want" ] && [ "$pass" = "$said" ]; then
		echo "  run.sh    ok   verdict_as_counted_$TS_FLOW ($got, exit $rc)"
		add run.sh 1 0 0
	else
		echo "  run.sh    FAIL verdict_as_counted_$TS_FLOW (said '$got', exit $rc; counted '$want')"
		add run.sh 0 1 0
	fi
}

# Jobs of the boot pool still running (the flows are not counted).
pool_running() {
	local p n=0
	for p in $(jobs -rp); do
		case " ${flowpid[*]} " in *" $p "*) ;; *) n=$((n + 1)) ;; esac
	done
	echo "$n"
}

if [ "$debcheck" = 1 ]; then
	# the main job's own options (its flows run above as dkms, dkms13)
	echo "== run.sh options: --help lists them, an unknown one is refused"
	out=$("$TS_ROOT/qemu/run.sh" --help 2>&1) && rc=0 || rc=$?
	p=0 f=0
	for o in --debian --arch --help; do
		if [ "$rc" = 0 ] && grep -q -- "$o" <<<"$out"; then
			p=$((p + 1)); echo "  run.sh    ok   help_lists_$o"
		else
			f=$((f + 1)); echo "  run.sh    FAIL help_lists_$o (exit $rc)"
		fi
	done
	rc=0 rc3=0
	"$TS_ROOT/qemu/run.sh" --debian 11 >/dev/null 2>&1 || rc=$?
	"$TS_ROOT/qemu/run.sh" --arch sparc >/dev/null 2>&1 || rc3=$?
	"$TS_ROOT/qemu/run.sh" --no-such-option >/dev/null 2>&1 && rc2=0 || rc2=$?
	if [ "$rc" != 0 ] && [ "$rc3" != 0 ] && [ "$rc2" = 2 ]; then
		p=$((p + 1)); echo "  run.sh    ok   bad_options_refused"
	else
		f=$((f + 1)); echo "  run.sh    FAIL bad_options_refused (exit $rc, $rc3, $rc2)"
	fi
	add run.sh "$p" "$f" 0
	echo "== debcheck: twostep-dkms installed and purged in a Debian 12 chroot with two kernels' headers (log: $TS_RESULTS/debcheck.log)"
	tally debcheck "$(ts_debcheck "$deb")"
	echo "   debcheck: $TALLY"
fi

if [ "$harness" = 1 ]; then
	echo "== harness: how it reads a guest's console, picks the accelerator, compares benchmark runs; the docs' links"
	tally harness "$(ts_harness_checks)"
fi

for k in $kernels; do
	TS_KREL=$(ts_kernel_for "$k")
	TS_ARCH=$(ts_kernel_arch "$k")
	if [ "$static" = 1 ] && [ "$TS_ARCH" != amd64 ]; then
		:
	elif [ "$static" = 1 ] && [ "$k" != 7.3 ]; then
		echo "== static analysis on $TS_KREL (W=1, sparse, checkpatch --strict, kernel-doc; log: $TS_RESULTS/static.log)"
		tally "static@$k" "$(ts_static_checks)"
	elif [ "$static" = 1 ]; then
		echo "== static: upstream's names on $TS_KREL are the kernel's own (log: $TS_RESULTS/static-native.log)"
		tally "static@$k" "$(ts_static_native_names)"
	fi
	if [ ${#boots[@]} -gt 0 ]; then
		ts_build_modules
		ts_build_initramfs
	fi
done

if [ ${#boots[@]} -gt 0 ]; then
	ts_log "booting under $(ts_accel): ${boots[*]}"
	# Two at a time (the machine has 2 cores), reported in order.
	declare -A pid
	for c in "${boots[@]}"; do
		while [ "$(pool_running)" -ge "${TS_PARALLEL:-2}" ]; do
			wait -n || true
		done
		rm -f "$TS_RESULTS/$c.rc"
		if [ "$c" = host13 ] || [ "$c" = user ] || [ "$c" = user13 ]; then
			( rc=0; "ts_${c}_run" >"$TS_RESULTS/$c.out" 2>&1 ||
				rc=$?
			echo "$rc" >"$TS_RESULTS/$c.rc" ) &
		elif [[ "${c%@*}" == bench-smoke* ]]; then
			mkdir -p "$TS_RESULTS/$c"
			# shellcheck disable=SC2086 # a list of modes
			( rc=0; TS_BENCH_ARCH=$(bench_tier_arch "$c")
			ts_bench_kernel "$(bench_tier_kernel "$c")"
			TS_BENCH_ICOUNT=$(bench_tier_icount "$c")
			ts_bench_run "$TS_RESULTS/$c" $TS_BENCH_MODES \
				>"$TS_RESULTS/$c/pipeline.log" 2>&1 || rc=$?
			echo "$rc" >"$TS_RESULTS/$c.rc" ) &
		else
			( rc=0; ts_boot "$c" || rc=$?; echo "$rc" >"$TS_RESULTS/$c.rc" ) &
		fi
		pid[$c]=$!
	done
	for c in "${boots[@]}"; do
		wait "${pid[$c]}" || true
		rc=$(cat "$TS_RESULTS/$c.rc" 2>/dev/null || echo 255)
		if [ "$c" = user13 ]; then
			user13_report "$rc"
		elif [ "$c" = host13 ] || [ "$c" = user ]; then
			sub_report "$c" "$rc"
		elif [[ "${c%@*}" == bench-smoke* ]]; then
			bench_report "$c" "$rc"
		else
			report "$c" "$rc"
		fi
	done
fi

if [ ${#flows[@]} -gt 0 ]; then
	for p in "${flowpid[@]}"; do wait "$p" || true; done
	trap - EXIT
	for d in "${flows[@]}"; do
		ts_image_select "${d%:*}" "${d#*:}"
		if [ ! -s "$TS_RESULTS/$TS_FLOW.boots" ]; then
			echo "== $TS_FLOW: no boot ran; the end of $TS_RESULTS/$TS_FLOW.out:"
			tail -n 20 "$TS_RESULTS/$TS_FLOW.out" | sed 's/^/   | /'
			add "$TS_FLOW" 0 1 0
			continue
		fi
		p0=$passed f0=$failed s0=$skipped
		while read -r name ph rc; do
			if [ "$rc" = none ]; then
				echo "== $name: not booted, boot 1 handed out no new kernel"
			else
				report "$name" "$rc"
			fi
			out=$(ts_dkms_missing "$name" "$ph")
			printf '%s\n' "$out" | sed '$d'
			add "$name" 0 "$(printf '%s\n' "$out" | tail -n 1)" 0
		done <"$TS_RESULTS/$TS_FLOW.boots"
		flow_verdict "$d" "$((passed - p0))" "$((failed - f0))" \
			"$((skipped - s0))"
	done
fi

# nothing of the guests on the host: no package, no path under /boot,
# /lib/modules, /usr/src or /etc/apt changed since the host packages went in
out=$(ts_host_footprint "$TS_RESULTS/host-before")
echo "== $out"
if [ "$out" = "host footprint: paths changed 0, packages changed 0" ]; then
	echo "  host      ok   host_footprint_unchanged"
	add host 1 0 0
else
	echo "  host      FAIL host_footprint_unchanged (what changed:)"
	# (diff says 1 where they differ: not the end of the run)
	{ ts_host_state | diff "$TS_RESULTS/host-before" - || true; } |
		grep '^[<>]' | head -n 20 | sed 's/^/   | /'
	add host 0 1 0
fi

if [ "$failed" -gt 0 ]; then
	echo "== what failed:$(tr ' ' '\n' <<<"$failed_names" | sort -u | paste -sd' ')"
	tr '|' '\n' <<<"$failed_lines" | sed '/^$/d' | head -n 40
fi

# kernel x platform: passed/failed/skipped
echo "== matrix (passed/failed/skipped)"
printf '  %-12s' kernel
plats=""
for key in "${!cell[@]}"; do
	plat=${key%@*}
	case " $plats " in *" $plat "*) ;; *) plats="$plats $plat" ;; esac
done
plats=$(tr ' ' '\n' <<<"$plats" | sed '/^$/d' | sort)
for plat in $plats; do printf ' %-13s' "$plat"; done
echo
rows=$( { echo 6.1; echo 6.12; for key in "${!cell[@]}"; do
	case "$key" in *@*) echo "${key#*@}" ;; esac; done; } | sort -u -V)
for k in $rows; do
	printf '  %-12s' "$k"
	for plat in $plats; do
		v=${cell[$plat@$k]:-}
		[ "$k" = 6.1 ] && [ -z "$v" ] && v=${cell[$plat]:-}
		printf ' %-13s' "${v:--}"
	done
	echo
done

echo "suite time: $((SECONDS - start)) s"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]

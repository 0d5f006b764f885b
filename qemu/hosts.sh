# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
# The suite as others run it: on a Debian 13 host, and as a normal user.
#
# On a Debian 13 host: a Debian 13 root (mmdebstrap, apt only,
# cached) gets a copy of this tree and runs the README's test command in
# it for the harness tier and one guest configuration. The copy installs
# its host packages with the root's own apt, fetches its kernels into the
# root's own cache and boots its guests with Debian 13's QEMU, as on a
# Debian 13 machine. Its mounts (/proc, /sys, /dev) live in a mount
# namespace of their own, gone when the run ends. Sourced after lib.sh.

TS_HOST13_SUITE=trixie
# the tiers the Debian 13 root runs
TS_HOST13_TIERS=${TS_HOST13_TIERS:-harness intel-lazy}

# Make (or find) the root; sets TS_HOST13_ROOT.
ts_host13_setup() {
	local uri sec key sources=()
	ts_need_packages mmdebstrap
	uri=$(ts_debian_uri)
	[ -n "$uri" ] || ts_die "apt knows no Debian source: name one in TWOSTEP_DEBIAN_MIRROR"
	sec=$(ts_debian_security_uri)
	sources=("deb $uri $TS_HOST13_SUITE main"
		"deb $uri $TS_HOST13_SUITE-updates main")
	[ -z "$sec" ] ||
		sources+=("deb $sec $TS_HOST13_SUITE-security main")
	key=$( { echo "${sources[*]}"; declare -f ts_host13_setup; } |
		sha256sum | cut -c1-12)
	TS_HOST13_ROOT=$(ts_cached_root "host-$TS_HOST13_SUITE" \
		"the Debian 13 host's root" "$key" --variant=apt \
		--components=main -- "$TS_HOST13_SUITE" "${sources[@]}") ||
		exit 1
}

# Run the test command of a copy of this tree in the Debian 13 root, for
# TS_HOST13_TIERS. Its output goes to stdout; its exit status is the
# command's.
ts_host13_run() {
	local root src=/src/twostep
	ts_host13_setup
	root=$TS_HOST13_ROOT
	rm -rf "${root:?}$src"
	ts_copy_tree "$root$src"
	cp /etc/resolv.conf "$root/etc/resolv.conf"
	# one run at a time in the root
	(
		flock 9
		unshare --mount --propagation private --fork sh -ec '
			root=$1
			shift
			mount -t proc proc "$root/proc"
			mount --rbind /sys "$root/sys"
			mount --rbind /dev "$root/dev"
			exec chroot "$root" "$@"' - "$root" \
			env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin \
			TWOSTEP_ACCEL="${TWOSTEP_ACCEL:-}" \
			sh -c "cd $src && ./qemu/run-tests.sh $TS_HOST13_TIERS"
	) 9>"$root.lock"
}

# As a normal user: a copy of this tree, owned by uid TS_USER_UID (default
# 65534, nobody: no account is made on the host), runs the test command for
# TS_USER_TIERS with a home of its own (its cache: the kernels are fetched
# again, as a user's first run does) in a folder under /tmp, removed after
# (its results/ copied to $TS_RESULTS/user-results).
# The host packages are installed by then. Its output goes to stdout; its
# exit status is the command's.
TS_USER_UID=${TS_USER_UID:-65534}
TS_USER_TIERS=${TS_USER_TIERS:-harness none}
ts_user_run() {
	local dir rc=0
	dir=$(mktemp -d /tmp/twostep-user.XXXXXX)
	chmod 755 "$dir"
	mkdir -p "$dir/home"
	ts_copy_tree "$dir/twostep"
	chown -R "$TS_USER_UID:$TS_USER_UID" "$dir/home" "$dir/twostep"
	setpriv --reuid="$TS_USER_UID" --regid="$TS_USER_UID" --clear-groups \
		env -i HOME="$dir/home" PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		TWOSTEP_ACCEL="${TWOSTEP_ACCEL:-}" \
		sh -c 'echo "uid $(id -u)"; cd "$1" && exec ./qemu/run-tests.sh $2' \
		- "$dir/twostep" "$TS_USER_TIERS" || rc=$?
	# its consoles and logs, kept
	rm -rf "$TS_RESULTS/user-results"
	cp -a "$dir/twostep/results" "$TS_RESULTS/user-results" 2>/dev/null ||
		true
	rm -rf "$dir"
	return "$rc"
}

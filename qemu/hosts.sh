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

# Make (or find) the root; sets TS_HOST13_ROOT. With mount (not essential
# in Debian 13), whose umount ts_host13_exec runs after pivot_root, and
# passwd, whose useradd makes user13's user.
ts_host13_setup() {
	local uri sec key sources=()
	[ -z "${TS_HOST13_ROOT:-}" ] || return 0
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
		"the Debian 13 host's root" "$key" --variant=apt --include=mount,passwd \
		--components=main -- "$TS_HOST13_SUITE" "${sources[@]}") ||
		exit 1
}

# Run a command in the Debian 13 root (made by ts_host13_setup) as its
# root, in a mount namespace of its own with /proc, /sys and /dev: the
# root is made the namespace's by pivot_root, not by chroot alone, since a
# chrooted process may not make a user namespace (mmdebstrap's unshare
# mode, user13). One command at a time in the root.
ts_host13_exec() {
	(
		flock 9
		unshare --mount --propagation private --fork sh -ec '
			root=$1
			shift
			mount --bind "$root" "$root"
			mount -t proc proc "$root/proc"
			mount --rbind /sys "$root/sys"
			mount --rbind /dev "$root/dev"
			mkdir -p "$root/.host"
			cd "$root"
			pivot_root . .host
			umount -l /.host
			exec chroot . "$@"' - "$TS_HOST13_ROOT" \
			env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin \
			TWOSTEP_ACCEL="${TWOSTEP_ACCEL:-}" "$@"
	) 9>"$TS_HOST13_ROOT.lock"
}

# Put a copy of this tree at $1 in the Debian 13 root.
ts_host13_copy() {
	rm -rf "${TS_HOST13_ROOT:?}$1"
	ts_copy_tree "$TS_HOST13_ROOT$1"
	cp /etc/resolv.conf "$TS_HOST13_ROOT/etc/resolv.conf"
}

# Run the test command of a copy of this tree in the Debian 13 root, for
# TS_HOST13_TIERS. Its output goes to stdout; its exit status is the
# command's.
ts_host13_run() {
	local src=/src/twostep
	ts_host13_setup
	ts_host13_copy "$src"
	ts_host13_exec sh -c "cd $src && ./qemu/run-tests.sh $TS_HOST13_TIERS"
}

# The main job's first phases (host packages, VM image, make deb) run by
# ./qemu/run.sh as a normal user, TS_USER13 (made in the Debian 13 root
# with a subordinate id range, as adduser makes one, never on the host),
# who builds the image with mmdebstrap's unshare mode into a cache of its
# own in the root (kept: a warm run finds the image there); then, as that
# user, the debcheck tier (its chroot made in unshare mode, unpacked as the
# user's files, entered in a user namespace). Root installs the host
# packages first, as the README says a user's admin does. Its output goes
# to stdout: "user NAME uid N", run.sh's, "run.sh exit N", the debcheck
# tier's; its exit status is 0 when both passed.
TS_USER13=twostep
ts_user13_run() {
	local home=/home/$TS_USER13 src=/src/twostep-user13
	ts_host13_setup
	# not host13's copy, which its run (beside this one) works in
	ts_host13_copy "$src"
	ts_host13_exec sh -ec '
		u=$1
		id "$u" >/dev/null 2>&1 || useradd --create-home --user-group "$u"
		grep -q "^$u:" /etc/subuid || echo "$u:100000:65536" >>/etc/subuid
		grep -q "^$u:" /etc/subgid || echo "$u:100000:65536" >>/etc/subgid
		cd "$3"
		bash -ec ". qemu/lib.sh; . qemu/image.sh;
			ts_need_packages \$TS_MAIN_PACKAGES uidmap"
		rm -rf "$2"
		cp -a "$3" "$2"
		chown -R "$u:$u" "$2"' - "$TS_USER13" "$home/twostep" "$src" ||
		return 1
	ts_host13_exec setpriv --reuid="$TS_USER13" --regid="$TS_USER13" \
		--init-groups env HOME="$home" sh -c '
		echo "user $(id -un) uid $(id -u)"
		cd "$HOME/twostep" || exit 1
		rc=0
		TWOSTEP_MAIN_UNTIL=package ./qemu/run.sh || rc=$?
		echo "run.sh exit $rc"
		echo "== as the user: ./qemu/run-tests.sh debcheck"
		./qemu/run-tests.sh debcheck || rc=$?
		exit "$rc"'
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

# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
# The guests' Debian kernels, kept in the cache and never installed on the
# host: each kernel's image, modules and headers are fetched as Debian
# packages with a private apt state ($TS_CACHE/apt, its own source list,
# package lists and downloads; the host's dpkg database, /etc/apt, /boot,
# /lib/modules and /usr/src are not touched) and unpacked into
# $TS_CACHE/kernels/<release>/root. The Debian archive is the one this
# machine's apt already uses for any Debian release, or TWOSTEP_DEBIAN_MIRROR:
# no mirror name is kept in the repository. Sourced by lib.sh.

TS_APT=$TS_CACHE/apt
TS_KERNELS=$TS_CACHE/kernels
# the package lists are fetched again when older than this (minutes)
TS_APT_MAX_AGE=${TS_APT_MAX_AGE:-1440}
TS_DEBIAN_KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

# The Debian archive's URI: $TWOSTEP_DEBIAN_MIRROR, else the first source of
# this machine's apt whose release is Debian's own (origin and label
# "Debian", a release's main component: bookworm/main, trixie/main, ...).
ts_debian_uri() {
	if [ -n "${TWOSTEP_DEBIAN_MIRROR:-}" ]; then
		echo "${TWOSTEP_DEBIAN_MIRROR%/}"
		return 0
	fi
	apt-cache policy 2>/dev/null | awk '
		$1 ~ /^-?[0-9]+$/ && $2 ~ /^[a-z+]+:\/\// {
			uri = $2; comp = $3; next
		}
		$1 == "release" && uri != "" {
			if ($0 ~ /[ ,]o=Debian,/ && $0 ~ /,l=Debian,/ &&
			    comp ~ /^[a-z]+\/main$/) {
				print uri
				exit
			}
			uri = ""
		}'
}

# The Debian security archive's URI this machine's apt uses (label
# "Debian-Security"), or nothing.
ts_debian_security_uri() {
	apt-cache policy 2>/dev/null | awk '
		$1 ~ /^-?[0-9]+$/ && $2 ~ /^[a-z+]+:\/\// { uri = $2; next }
		$1 == "release" && uri != "" {
			if ($0 ~ /,l=Debian-Security,/) { print uri; exit }
			uri = ""
		}'
}

# apt-get / apt-cache on the private state of a Debian release for amd64
# (bookworm, trixie) or another architecture (bookworm-arm64, ...):
# ts_apt STATE get|cache ARGS...
ts_apt() {
	local d=$TS_APT/$1 tool=apt-$2 opts arch=amd64
	case "$1" in *-arm64) arch=arm64 ;; esac
	shift 2
	opts=(-o Dir::Etc::SourceList="$d/sources.list"
		-o Dir::Etc::SourceParts="$d/sources.list.d"
		-o Dir::Etc::Preferences="$d/preferences"
		-o Dir::Etc::PreferencesParts="$d/preferences.d"
		-o Dir::State="$d/state"
		-o Dir::State::status="$d/state/status"
		-o Dir::Cache="$d/cache"
		-o APT::Default-Release= -o Debug::NoLocking=1
		-o APT::Architecture="$arch" -o APT::Architectures::="$arch")
	# root's apt would download as _apt, which cannot write here
	[ "$(id -u)" -eq 0 ] && opts+=(-o APT::Sandbox::User=root)
	"$tool" "${opts[@]}" "$@"
}

# Make the private apt state of Debian release R know R, its -updates,
# -security and -backports suites, from the archives above; its lists are
# fetched when missing, older than TS_APT_MAX_AGE minutes, or made from
# another source list. Backports have apt's priority 100: a name without a
# suite means the release's own newest.
ts_apt_setup() {
	local r=${1%-arm64} d=$TS_APT/$1 uri sec list s
	case " ${TS_APT_READY:-} " in *" $1 "*) return 0 ;; esac
	uri=$(ts_debian_uri)
	[ -n "$uri" ] || ts_die "apt knows no Debian source (bookworm/main, trixie/main, ...): name one in TWOSTEP_DEBIAN_MIRROR"
	sec=$(ts_debian_security_uri)
	[ -r "$TS_DEBIAN_KEYRING" ] ||
		ts_die "no $TS_DEBIAN_KEYRING (package debian-archive-keyring)"
	mkdir -p "$d"/{sources.list.d,preferences.d,state/lists/partial} \
		"$d"/cache/archives/partial
	: >>"$d/state/status"
	list=$(for s in "$r" "$r-updates" "$r-backports"; do
			echo "deb [signed-by=$TS_DEBIAN_KEYRING] $uri $s main"
		done
		[ -z "$sec" ] ||
			echo "deb [signed-by=$TS_DEBIAN_KEYRING] $sec $r-security main")
	if [ "$list" != "$(cat "$d/sources.list" 2>/dev/null)" ] ||
		[ -z "$(find "$d/state/updated" -mmin -"$TS_APT_MAX_AGE" \
			2>/dev/null)" ]; then
		printf '%s\n' "$list" >"$d/sources.list"
		if ts_apt "$1" get update -qq >&2; then
			touch "$d/state/updated"
		elif [ -f "$d/state/updated" ]; then
			ts_log "apt update failed: using the package lists of $(date -r "$d/state/updated")"
		else
			ts_die "apt update of the private package lists ($d) failed"
		fi
	fi
	TS_APT_READY="${TS_APT_READY:-} $1"
}

# The release of the kernel of a suite for an architecture (default
# amd64) and flavour (default the architecture's own; arm64-16k: 16 KiB
# pages): the one its linux-headers-<flavour> points at. bookworm: Debian
# 12's newest (6.1), bookworm-backports (6.12), trixie (6.12),
# trixie-backports (7.3).
ts_suite_kernel_release() {
	local arch=${2:-amd64} r=${1%-backports} state pkg
	pkg=linux-headers-${3:-$arch}
	state=$r
	[ "$arch" = amd64 ] || state=$r-$arch
	[ "$r" != "$1" ] && pkg=$pkg/$1
	ts_apt_setup "$state"
	ts_apt "$state" cache show --no-all-versions "$pkg" 2>/dev/null |
		sed -n 's/^Depends: //p' | head -n 1 |
		grep -o 'linux-headers-[^ ,]*' | head -n 1 |
		sed 's/^linux-headers-//'
}

# Where a fetched kernel's files are: its root, its headers (the KDIR of a
# module build), the base for modprobe/depmod -d (its modules are under
# lib/modules of it), its vmlinuz.
ts_kernel_root() { echo "$TS_KERNELS/$1/root"; }
ts_kernel_kdir() { echo "$TS_KERNELS/$1/root/usr/src/linux-headers-$1"; }
ts_kernel_modbase() { ts_kernel_modbase_in "$TS_KERNELS/$1/root" "$1"; }
ts_kernel_vmlinuz() { ts_kernel_vmlinuz_in "$TS_KERNELS/$1/root" "$1"; }
# the same for a kernel unpacked at ROOT: ts_kernel_..._in ROOT RELEASE
ts_kernel_modbase_in() {
	if [ -d "$1/lib/modules/$2" ]; then
		echo "$1"
	else
		echo "$1/usr"
	fi
}
ts_kernel_vmlinuz_in() {
	local f
	for f in "$1/boot/vmlinuz-$2" "$1/usr/lib/modules/$2/vmlinuz" \
		"$1/lib/modules/$2/vmlinuz"; do
		[ -r "$f" ] && { echo "$f"; return 0; }
	done
	return 1
}

# Fetch and unpack the kernel of SUITE for ARCH [FLAVOUR] (default amd64: image,
# modules, headers, and the headers' kbuild, whose programs run on this
# amd64 host whatever ARCH) unless the cache has it; prints its release.
ts_kernel_fetch() {
	local suite=$1 arch=${2:-amd64} r=${1%-backports} state krel dir tmp
	local deps pkgs=() host=() deb log
	state=$r
	[ "$arch" = amd64 ] || state=$r-$arch
	krel=$(ts_suite_kernel_release "$suite" "$arch" "${3:-}")
	[ -n "$krel" ] || ts_die "no linux-headers-${3:-$arch} in $suite (private apt state $TS_APT)"
	dir=$TS_KERNELS/$krel
	if [ ! -f "$dir/complete" ]; then
		mkdir -p "$TS_KERNELS"
		tmp=$(mktemp -d "$TS_KERNELS/fetch.XXXXXX")
		log=$tmp.log
		ts_log "kernel $krel ($suite): fetching its packages into $dir"
		# the headers' own dependencies: the common headers and kbuild
		deps=$(ts_apt "$state" cache show "linux-headers-$krel" 2>/dev/null |
			sed -n 's/^Depends: //p' | head -n 1 | tr ',' '\n' |
			sed -n 's/^ *\(linux-\(headers-[^ ]*-common[^ ]*\|kbuild-[^ ]*\)\).*/\1/p')
		# (names with the release in them: one version each)
		pkgs=("linux-image-$krel" "linux-headers-$krel")
		for deb in $deps; do
			case "$deb" in
			linux-kbuild-*) host+=("$deb") ;;
			*) pkgs+=("$deb") ;;
			esac
		done
		# a kernel split like 7.x's: vmlinuz and modules in two more
		for deb in linux-binary linux-modules; do
			ts_apt "$state" cache show "$deb-$krel" >/dev/null 2>&1 &&
				pkgs+=("$deb-$krel")
		done
		[ "$arch" = amd64 ] || ts_apt_setup "$r"
		if ! (cd "$tmp" &&
			ts_apt "$state" get download -qq "${pkgs[@]}" &&
			{ [ ${#host[@]} -eq 0 ] ||
			ts_apt "$r" get download -qq "${host[@]}"; }) \
			>"$log" 2>&1; then
			cat "$log" >&2
			rm -rf "$tmp" "$log"
			ts_die "downloading ${pkgs[*]} ${host[*]} failed"
		fi
		for deb in "$tmp"/*.deb; do
			dpkg-deb -x "$deb" "$tmp/root" 2>>"$log" ||
				{ rm -rf "$tmp"; ts_die "unpacking $deb failed"; }
		done
		rm -f "$tmp"/*.deb
		# the headers include their common half by absolute path
		sed -i "s|^include /usr/src/|include $dir/root/usr/src/|" \
			"$tmp/root/usr/src/linux-headers-$krel/Makefile"
		ts_kernel_vmlinuz_in "$tmp/root" "$krel" >/dev/null ||
			{ rm -rf "$tmp"; ts_die "no vmlinuz in $krel's packages"; }
		depmod -b "$(ts_kernel_modbase_in "$tmp/root" "$krel")" \
			"$krel" 2>>"$log" ||
			{ rm -rf "$tmp"; ts_die "depmod for $krel failed"; }
		touch "$tmp/complete"
		rm -rf "$dir"
		mv "$tmp" "$dir"
		mv "$log" "$dir.log"
	fi
	echo "$krel"
}

# The guests' userland for another architecture (arm64): busybox and kmod
# with the libraries kmod loads, from Debian 12's packages for ARCH,
# unpacked into $TS_CACHE/userland-<arch>-<key>/root (the key: their
# versions); prints that root.
TS_USERLAND_PACKAGES="busybox-static kmod libkmod2 libc6 liblzma5 libssl3 libzstd1"
ts_userland_fetch() {
	local arch=$1 state=bookworm-$1 key dir tmp p
	ts_apt_setup "$state"
	# shellcheck disable=SC2086 # a list of packages
	key=$(ts_apt "$state" cache show --no-all-versions $TS_USERLAND_PACKAGES \
		2>/dev/null | grep -E '^(Package|Version):' | sha256sum |
		cut -c1-12)
	dir=$TS_CACHE/userland-$arch-$key
	if [ ! -f "$dir/complete" ]; then
		mkdir -p "$TS_CACHE"
		tmp=$(mktemp -d "$TS_CACHE/userland.XXXXXX")
		# shellcheck disable=SC2086 # a list of packages
		(cd "$tmp" && ts_apt "$state" get download -qq \
			$TS_USERLAND_PACKAGES) >&2 ||
			{ rm -rf "$tmp"; ts_die "downloading the $arch userland failed"; }
		for p in "$tmp"/*.deb; do
			dpkg-deb -x "$p" "$tmp/root" ||
				{ rm -rf "$tmp"; ts_die "unpacking $p failed"; }
		done
		rm -f "$tmp"/*.deb
		touch "$tmp/complete"
		rm -rf "$TS_CACHE"/userland-"$arch"-*
		mv "$tmp" "$dir"
	fi
	echo "$dir/root"
}

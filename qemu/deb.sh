#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make deb: build twostep-dkms_<version>_all.deb with debhelper and dh-dkms
# (installed first if missing) in a copy of the tree under results/deb/,
# with debian/changelog written from dkms.conf's PACKAGE_VERSION, the one
# place the version lives; then lintian. Prints the package's path last.
#
#   qemu/deb.sh        (or: make deb)
#
# TS_DEB_DIR puts it in another folder (default results/deb; the suite
# gives each run of the main job its own).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

ts_need_packages debhelper dh-dkms lintian dpkg-dev
ver=$(sed -n 's/^PACKAGE_VERSION="\([^"]*\)"/\1/p' "$TS_ROOT/dkms.conf")
[ -n "$ver" ] || ts_die "no PACKAGE_VERSION in dkms.conf"
out=${TS_DEB_DIR:-$TS_RESULTS/deb}
stage=$out/twostep-$ver
rm -rf "$out"
mkdir -p "$stage"
# what the package is made of, without any build output of the tree
tar -C "$TS_ROOT" --exclude='*.o' --exclude='*.ko' --exclude='.*.cmd' \
	--exclude='*.mod*' -cf - dkms.conf dkms-post-build.sh Kbuild Makefile LICENSE README.md \
	include src selftest debian | tar -C "$stage" -xf -
# the changelog entry carries the date of the last commit when there is
# one, so that the same tree gives the same package
date=$(git -C "$TS_ROOT" log -1 --format=%aD 2>/dev/null || date -R)
maint=$(sed -n 's/^Maintainer: //p' "$stage/debian/control")
cat >"$stage/debian/changelog" <<EOF
twostep ($ver) unstable; urgency=medium

  * twostep $ver, packaged from the source tree (version from dkms.conf).

 -- $maint  $date
EOF
ts_log "building twostep-dkms $ver in $stage"
(cd "$stage" && dpkg-buildpackage -b -us -uc) >&2 ||
	ts_die "dpkg-buildpackage failed"
deb=$out/twostep-dkms_${ver}_all.deb
[ -f "$deb" ] || ts_die "no $deb"
ts_log "lintian $out/twostep_${ver}_amd64.changes"
if ! lintian --fail-on error,warning --tag-display-limit 0 \
	"$out/twostep_${ver}_amd64.changes" >"$out/lintian.log" 2>&1; then
	cat "$out/lintian.log" >&2
	ts_die "lintian reports errors or warnings (see above)"
fi
cat "$out/lintian.log" >&2
echo "$deb"

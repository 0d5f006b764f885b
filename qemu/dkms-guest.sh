#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Runs inside the Debian VM image (started by the image's twostep-init):
# the DKMS flow a user follows, each command shown with its output, then
# one check line per step for the host to count.
src=/tmp/twostep
ver=$(sed -n 's/^PACKAGE_VERSION="\([^"]*\)"/\1/p' "$src/dkms.conf")
kver=$(uname -r)
dest=/usr/src/twostep-$ver

say() { echo "twostep-guest: $*"; }
check() { say "check $1 $2"; echo "twostep-check: $2 $1"; }
# Show a command and its output; keep its status in $rc.
run() {
	say "\$ $*"
	"$@" >/tmp/run.out 2>&1
	rc=$?
	sed 's/^/  | /' /tmp/run.out
	say "(exit $rc)"
	return $rc
}

say "kernel $kver, twostep $ver"
mkdir -p "$dest"
(cd "$src" && cp -a dkms.conf Kbuild Makefile LICENSE README.md include src \
	selftest "$dest/")

run dkms add -m twostep -v "$ver" && check dkms_add ok || check dkms_add FAIL
if run dkms build -m twostep -v "$ver"; then
	check dkms_build ok
else
	check dkms_build FAIL
	say "make.log:"
	sed 's/^/  | /' "/var/lib/dkms/twostep/$ver/build/make.log"
fi
run dkms install -m twostep -v "$ver" && check dkms_install ok ||
	check dkms_install FAIL

run modprobe twostep_selftest expect_api=1
echo "twostep-harness: selftest rc=$rc"
[ "$rc" -eq 0 ] && check modprobe_selftest ok || check modprobe_selftest FAIL
say "kernel log (dmesg):"
dmesg | sed 's/^/twostep-dmesg: /'

run dkms status -m twostep
grep -q "^twostep/$ver, $kver, [^:]*: installed" /tmp/run.out &&
	check dkms_status_installed ok || check dkms_status_installed FAIL
run modinfo twostep
grep -q "^version: *$ver\$" /tmp/run.out &&
	grep -q "^filename: */lib/modules/$kver/updates/dkms/twostep.ko" \
		/tmp/run.out && check modinfo ok || check modinfo FAIL

run modprobe -r twostep_selftest
run modprobe -r twostep
run dkms remove -m twostep -v "$ver" --all && check dkms_remove ok ||
	check dkms_remove FAIL
# Nothing of ours may stay behind but the source the user put in /usr/src.
find /lib/modules /var/lib/dkms /etc /usr/lib /var/lib/dkms \
	-name '*twostep*' >/tmp/left 2>/dev/null
grep -l twostep "/lib/modules/$kver"/modules.* >>/tmp/left 2>/dev/null
if [ -s /tmp/left ]; then
	sed 's/^/twostep-guest: left behind: /' /tmp/left
	check remove_leaves_nothing FAIL
else
	check remove_leaves_nothing ok
fi
echo "twostep-harness: end"

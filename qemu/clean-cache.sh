#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make clean-cache: remove everything the commands keep in their cache
# (TS_CACHE, default ~/.cache/twostep: chroots, VM images, checkpatch
# copies) and say how much space that frees. Refuses while anything is
# mounted under it (a chroot of a run under way), listing what.
# TS_MOUNTS (default /proc/mounts) is read for the mounts.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

[ $# -eq 0 ] || ts_die "usage: qemu/clean-cache.sh (or make clean-cache)"
if [ ! -d "$TS_CACHE" ]; then
	echo "cache $TS_CACHE: not there, nothing to free"
	exit 0
fi
# mount points under the cache (/proc/mounts escapes a space as \040)
busy=$(awk -v dir="$TS_CACHE/" '
	{ p = $2; gsub(/\\040/, " ", p) }
	index(p "/", dir) == 1 { print p }' "${TS_MOUNTS:-/proc/mounts}")
if [ -n "$busy" ]; then
	printf '%s\n' "$busy" >&2
	ts_die "mounted under $TS_CACHE (a run under way?): nothing removed"
fi
bytes=$(du -sb "$TS_CACHE" | cut -f1)
rm -rf "$TS_CACHE"
awk -v b="$bytes" -v dir="$TS_CACHE" \
	'BEGIN { printf "removed %s: %.1f MiB freed\n", dir, b / 1048576 }'

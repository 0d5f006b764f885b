#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Feature probes for src/compat.h: prints -DTWOSTEP_HAVE_* flags for the
# kernel build tree given as $1 (its Module.symvers lists exported symbols).
objtree=$1
symvers=$objtree/Module.symvers

have_symbol() {
	[ -r "$symvers" ] && awk -v s="$1" '$2 == s { f = 1 } END { exit !f }' \
		"$symvers"
}

have_symbol iommu_map_atomic && printf ' -DTWOSTEP_HAVE_IOMMU_MAP_ATOMIC'
echo

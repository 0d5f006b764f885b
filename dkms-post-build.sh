#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# DKMS POST_BUILD: keep twostep's Module.symvers next to the modules DKMS
# keeps for this kernel ($1: /var/lib/dkms/twostep/<version>/<kernel>/<arch>),
# for the builds of drivers that use the API (KBUILD_EXTRA_SYMBOLS).
# dkms remove takes it away with that folder.
set -e
cp Module.symvers "$1/Module.symvers"

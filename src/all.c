// SPDX-License-Identifier: GPL-2.0
/*
 * twostep.ko as one translation unit. Each file below owns one concern and
 * calls only the files above it (the layout in README.md); compiling them
 * together parses the kernel's headers once instead of once per file and
 * runs kbuild's per-object steps once. Under TCG that is most of a DKMS
 * build (doc/main-job.md). Names that are static in one file must
 * therefore be unique across all of them.
 */
#include "reserve.c"
#include "links.c"
#include "counters.c"
#include "debug.c"
#include "chunk.c"
#include "slot.c"
#include "ctx.c"
#include "iova.c"
#include "hmm.c"
#include "phys.c"
#include "module.c"

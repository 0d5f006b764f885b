// SPDX-License-Identifier: GPL-2.0
/*
 * twostep_selftest.ko as one translation unit, for the reason given in
 * src/all.c: the kernel's headers parsed once. Names that are static in
 * one file must be unique across all of them.
 */
#include "main.c"
#include "edu.c"
#include "helpers.c"
#include "cases.c"
#include "robust.c"
#include "safety.c"
#include "device.c"
#include "checker.c"
#include "workloads.c"
#include "bench.c"
#include "fidelity.c"
#include "p2p.c"
#include "odp.c"

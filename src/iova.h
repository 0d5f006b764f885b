/* SPDX-License-Identifier: GPL-2.0 */
/*
 * twostep: IOVA calls for twostep's own use (iova.c), beside the public
 * ones of include/twostep.h. Used by hmm.c.
 */
#ifndef _TWOSTEP_IOVA_H
#define _TWOSTEP_IOVA_H

#include "twostep.h"

long twostep_iova_unlink_bitmap(struct device *dev,
				struct twostep_iova_state *state,
				const unsigned long *bitmap,
				unsigned long first, unsigned long count,
				size_t entry);

#endif /* _TWOSTEP_IOVA_H */

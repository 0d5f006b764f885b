/* SPDX-License-Identifier: GPL-2.0 */
/*
 * twostep: which granules of an IOVA range are linked (links.c). A plain
 * data structure: it calls nothing of twostep's and no IOMMU code.
 */
#ifndef _TWOSTEP_LINKS_H
#define _TWOSTEP_LINKS_H

#include <linux/types.h>

struct twostep_links;

struct twostep_links *twostep_links_alloc(unsigned long nr, gfp_t gfp);
void twostep_links_free(struct twostep_links *l);
int twostep_links_claim(struct twostep_links *l, unsigned long first,
			unsigned long count);
void twostep_links_clear(struct twostep_links *l, unsigned long first,
			 unsigned long count);
bool twostep_links_whole(struct twostep_links *l, unsigned long first,
			 unsigned long count);
unsigned long twostep_links_next_run(struct twostep_links *l,
				     unsigned long from, unsigned long *len);

#endif /* _TWOSTEP_LINKS_H */

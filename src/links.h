/* SPDX-License-Identifier: GPL-2.0 */
/*
 * twostep: which granules of an IOVA range are linked (links.c). A plain
 * data structure: it calls nothing of twostep's and no IOMMU code.
 */
#ifndef _TWOSTEP_LINKS_H
#define _TWOSTEP_LINKS_H

#include <linux/atomic.h>
#include <linux/bitops.h>
#include <linux/bits.h>
#include <linux/math.h>
#include <linux/minmax.h>
#include <linux/types.h>

#define LINKS_PER_WORD	(BITS_PER_LONG / 2)
#define LINKED_BITS	(~0UL / 3)	/* 0x5555...: the even bits */

/**
 * struct twostep_links - link map of one IOVA range
 * @nr: granules
 * @nleaves: leaves when the map is not inline
 * @leaf: one-page leaves, allocated on first use; NULL: the map is @one
 * @one: the inline map
 */
struct twostep_links {
	unsigned long nr;
	unsigned long nleaves;
	unsigned long **leaf;
	unsigned long one[];
};

/* Both bits of granules [g, g + n) inside one word. */
static inline unsigned long links_mask(unsigned long g, unsigned long n)
{
	unsigned long bits = n >= LINKS_PER_WORD ? ~0UL :
			     (1UL << (2 * n)) - 1;

	return bits << (2 * (g % LINKS_PER_WORD));
}

/*
 * Granules whose map fits inline in the range record (ctx.c): 512, a
 * 2 MiB range of 4 KiB pages, in 16 words.
 */
#define LINKS_INLINE_MAX	512UL
#define LINKS_INLINE_SIZE	(sizeof(struct twostep_links) + \
				 LINKS_INLINE_MAX / LINKS_PER_WORD * \
				 sizeof(unsigned long))

/* An empty map of @nr <= LINKS_INLINE_MAX granules in memory of the caller. */
static inline void twostep_links_init(struct twostep_links *l,
				      unsigned long nr)
{
	unsigned long i;

	l->nr = nr;
	l->nleaves = 0;
	l->leaf = NULL;
	for (i = 0; i < DIV_ROUND_UP(nr, LINKS_PER_WORD); i++)
		l->one[i] = 0;
}

struct twostep_links *twostep_links_alloc(unsigned long nr, gfp_t gfp);
void twostep_links_free(struct twostep_links *l);
int __twostep_links_claim(struct twostep_links *l, unsigned long first,
			  unsigned long count);

/*
 * Mark granules linked, the first one as a head; all or nothing.
 * Returns 0, -EBUSY or -ENOMEM. Inline for the common case, a link inside
 * one word of an inline map: one atomic operation.
 */
static inline int twostep_links_claim(struct twostep_links *l,
				      unsigned long first, unsigned long count)
{
	unsigned long shift = 2 * (first % LINKS_PER_WORD), mask, old;
	atomic_long_t *w;

	if (l->leaf || first % LINKS_PER_WORD + count > LINKS_PER_WORD)
		return __twostep_links_claim(l, first, count);
	w = (atomic_long_t *)&l->one[first / LINKS_PER_WORD];
	mask = (links_mask(first, count) & LINKED_BITS) | (2UL << shift);
	old = atomic_long_fetch_or(mask, w);
	if (unlikely(old & mask & LINKED_BITS)) {
		atomic_long_andnot(mask & ~old, w);
		return -EBUSY;
	}
	return 0;
}

void twostep_links_clear(struct twostep_links *l, unsigned long first,
			 unsigned long count);
void twostep_links_set_head(struct twostep_links *l, unsigned long g);
bool twostep_links_inside(struct twostep_links *l, unsigned long g);
unsigned long twostep_links_head(struct twostep_links *l, unsigned long g);
unsigned long twostep_links_end(struct twostep_links *l, unsigned long g);
unsigned long __twostep_links_next_run(struct twostep_links *l,
				       unsigned long from, unsigned long *len);

/*
 * The next run of linked granules at or after @from: its first granule
 * and in @len its length, or the map's @nr when there is none. Inline for
 * a map of one word (a range of up to 32 granules): one read of it.
 */
static inline unsigned long twostep_links_next_run(struct twostep_links *l,
						   unsigned long from,
						   unsigned long *len)
{
	unsigned long v, bits, start, end;

	if (l->leaf || l->nr > LINKS_PER_WORD)
		return __twostep_links_next_run(l, from, len);
	if (from >= l->nr)
		return l->nr;
	v = atomic_long_read((atomic_long_t *)&l->one[0]);
	bits = v & LINKED_BITS & ~links_mask(0, from);
	if (!bits)
		return l->nr;
	start = __ffs(bits) / 2;
	if (start >= l->nr)
		return l->nr;
	bits = ~v & LINKED_BITS & ~links_mask(0, start);
	end = bits ? __ffs(bits) / 2 : LINKS_PER_WORD;
	*len = min(end, l->nr) - start;
	return start;
}

#endif /* _TWOSTEP_LINKS_H */

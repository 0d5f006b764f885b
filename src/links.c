// SPDX-License-Identifier: GPL-2.0
/*
 * twostep: the link map of one IOVA range. Two bits per granule, side by
 * side in one word: "linked" (even bit) and "head" (odd bit: a link starts
 * here). Both bits of a granule change in the same atomic word operation,
 * so a reader never sees a granule half linked: a link or unlink of one
 * range never makes a neighbouring range look split.
 *
 * The map does not grow with the range: a range of up to 16384 granules
 * (64 MiB of 4 KiB pages) keeps its map inline; a larger one keeps an
 * array of one-page leaves, each for 16384 granules, allocated when a
 * link first touches it, so a sparsely linked 64 GiB range costs an 8 KiB
 * array plus one page per 64 MiB actually linked.
 */
#include <linux/atomic.h>
#include <linux/bitops.h>
#include <linux/gfp.h>
#include <linux/math.h>
#include <linux/mm.h>
#include <linux/slab.h>

#include "links.h"

#define LINKS_PER_LEAF	(PAGE_SIZE * BITS_PER_BYTE / 2)

struct twostep_links *twostep_links_alloc(unsigned long nr, gfp_t gfp)
{
	unsigned long nleaves = DIV_ROUND_UP(nr, LINKS_PER_LEAF);
	struct twostep_links *l;

	if (nleaves <= 1) {
		l = kzalloc(struct_size(l, one,
					DIV_ROUND_UP(nr, LINKS_PER_WORD)),
			    gfp | __GFP_NOWARN);
		if (l)
			l->nr = nr;
		return l;
	}
	l = kzalloc(sizeof(*l), gfp | __GFP_NOWARN);
	if (!l)
		return NULL;
	if (gfpflags_allow_blocking(gfp))
		l->leaf = kvcalloc(nleaves, sizeof(*l->leaf), gfp);
	else
		l->leaf = kcalloc(nleaves, sizeof(*l->leaf),
				  gfp | __GFP_NOWARN);
	if (!l->leaf) {
		kfree(l);
		return NULL;
	}
	l->nr = nr;
	l->nleaves = nleaves;
	return l;
}

void twostep_links_free(struct twostep_links *l)
{
	unsigned long i;

	if (l->leaf) {
		for (i = 0; i < l->nleaves; i++)
			if (l->leaf[i])
				free_page((unsigned long)l->leaf[i]);
		kvfree(l->leaf);
	}
	kfree(l);
}

/* The word that holds granule @g, or NULL when its leaf does not exist. */
static atomic_long_t *links_word(struct twostep_links *l, unsigned long g,
				 bool create)
{
	unsigned long *leaf, *fresh;

	if (!l->leaf)
		return (atomic_long_t *)&l->one[g / LINKS_PER_WORD];
	leaf = READ_ONCE(l->leaf[g / LINKS_PER_LEAF]);
	if (!leaf) {
		if (!create)
			return NULL;
		fresh = (unsigned long *)get_zeroed_page(GFP_ATOMIC |
							 __GFP_NOWARN);
		if (!fresh)
			return NULL;
		leaf = cmpxchg(&l->leaf[g / LINKS_PER_LEAF], NULL, fresh);
		if (leaf)
			free_page((unsigned long)fresh);
		else
			leaf = fresh;
	}
	return (atomic_long_t *)&leaf[(g % LINKS_PER_LEAF) / LINKS_PER_WORD];
}

/* Granules from @g to the end of its word, at most up to @end. */
static unsigned long links_span(unsigned long g, unsigned long end)
{
	return min(end - g, LINKS_PER_WORD - g % LINKS_PER_WORD);
}

static void links_clear_words(struct twostep_links *l, unsigned long first,
			      unsigned long end)
{
	unsigned long g, n;
	atomic_long_t *w;

	for (g = first; g < end; g += n) {
		n = links_span(g, end);
		w = links_word(l, g, false);
		if (w)
			atomic_long_andnot(links_mask(g, n), w);
	}
}

/**
 * __twostep_links_claim - mark granules linked, the first one as a head
 * @l: link map
 * @first: first granule
 * @count: granules
 *
 * All or nothing: when a granule is linked already, or a leaf cannot be
 * allocated, the map is left as it was.
 *
 * Return: 0, -EBUSY or -ENOMEM.
 */
int __twostep_links_claim(struct twostep_links *l, unsigned long first,
			  unsigned long count)
{
	unsigned long end = first + count, g, n, mask, old;
	atomic_long_t *w;

	for (g = first; g < end; g += n) {
		n = links_span(g, end);
		w = links_word(l, g, true);
		if (!w) {
			links_clear_words(l, first, g);
			return -ENOMEM;
		}
		mask = links_mask(g, n) & LINKED_BITS;
		if (g == first)
			mask |= 2UL << (2 * (g % LINKS_PER_WORD));
		/* a whole word free, as in a large link: one compare-exchange */
		old = 0;
		if (n == LINKS_PER_WORD && atomic_long_try_cmpxchg(w, &old, mask))
			continue;
		old = atomic_long_fetch_or(mask, w);
		if (old & mask & LINKED_BITS) {
			atomic_long_andnot(mask & ~old, w);
			links_clear_words(l, first, g);
			return -EBUSY;
		}
	}
	return 0;
}

/* Mark granules [first, first + count) unlinked. */
void twostep_links_clear(struct twostep_links *l, unsigned long first,
			 unsigned long count)
{
	links_clear_words(l, first, first + count);
}

/* The two bits of granule @g, in bits 0 (linked) and 1 (head). */
static unsigned long links_get(struct twostep_links *l, unsigned long g)
{
	atomic_long_t *w = links_word(l, g, false);

	if (!w)
		return 0;
	return (atomic_long_read(w) >> (2 * (g % LINKS_PER_WORD))) & 3;
}

/* Set the head bit of granule @g, which is linked: a link starts there. */
void twostep_links_set_head(struct twostep_links *l, unsigned long g)
{
	atomic_long_t *w = links_word(l, g, false);

	if (w)
		atomic_long_or(2UL << (2 * (g % LINKS_PER_WORD)), w);
}

/* Is granule @g linked without being the head of its link? */
bool twostep_links_inside(struct twostep_links *l, unsigned long g)
{
	return g < l->nr && links_get(l, g) == 1;
}

/**
 * twostep_links_head - the head of the link that holds granule @g
 * @l: link map
 * @g: a linked granule
 *
 * Return: the granule where the link starts (@g itself when it is one).
 */
unsigned long twostep_links_head(struct twostep_links *l, unsigned long g)
{
	unsigned long bits;
	atomic_long_t *w;

	for (;;) {
		w = links_word(l, g, false);
		if (!w)
			return g;
		/* head bits of granules up to @g in this word */
		bits = atomic_long_read(w) & (LINKED_BITS << 1) &
		       links_mask(0, g % LINKS_PER_WORD + 1);
		if (bits)
			return round_down(g, LINKS_PER_WORD) + __fls(bits) / 2;
		if (g < LINKS_PER_WORD)
			return 0;
		g = round_down(g, LINKS_PER_WORD) - 1;
	}
}

/**
 * twostep_links_end - where the link that holds granule @g ends
 * @l: link map
 * @g: a linked granule
 *
 * Return: the first granule after @g that is not linked or starts a link
 * of its own (the number of granules of the map at the end).
 */
unsigned long twostep_links_end(struct twostep_links *l, unsigned long g)
{
	unsigned long bits, v;
	atomic_long_t *w;

	for (g++; g < l->nr; g = round_up(g + 1, LINKS_PER_WORD)) {
		w = links_word(l, g, false);
		if (!w)
			break;
		v = atomic_long_read(w);
		/* not linked, or a head: in the even bit of each pair */
		bits = ((~v | v >> 1) & LINKED_BITS) &
		       ~links_mask(0, g % LINKS_PER_WORD);
		if (bits) {
			g = round_down(g, LINKS_PER_WORD) + __ffs(bits) / 2;
			break;
		}
	}
	return min(g, l->nr);
}

/**
 * __twostep_links_next_run - find the next run of linked granules
 * @l: link map
 * @from: first granule to look at
 * @len: length of the run found
 *
 * Return: the first granule of the run, or the number of granules of the
 * map when nothing at or after @from is linked.
 */
unsigned long __twostep_links_next_run(struct twostep_links *l,
				       unsigned long from, unsigned long *len)
{
	unsigned long g = from, start, bits;
	atomic_long_t *w;

	while (g < l->nr) {
		w = links_word(l, g, false);
		if (!w) {
			g = round_up(g + 1, LINKS_PER_LEAF);
			continue;
		}
		bits = atomic_long_read(w) & LINKED_BITS &
		       ~links_mask(0, g % LINKS_PER_WORD);
		if (bits) {
			g = round_down(g, LINKS_PER_WORD) + __ffs(bits) / 2;
			break;
		}
		g = round_up(g + 1, LINKS_PER_WORD);
	}
	if (g >= l->nr)
		return l->nr;
	start = g;
	/* the end of the run: the first granule not linked, a word at a time */
	while (g < l->nr) {
		w = links_word(l, g, false);
		if (!w)
			break;
		bits = ~atomic_long_read(w) & LINKED_BITS &
		       ~links_mask(0, g % LINKS_PER_WORD);
		if (bits) {
			g = round_down(g, LINKS_PER_WORD) + __ffs(bits) / 2;
			break;
		}
		g = round_up(g + 1, LINKS_PER_WORD);
	}
	*len = min(g, l->nr) - start;
	return start;
}

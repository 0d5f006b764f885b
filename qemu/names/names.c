// SPDX-License-Identifier: GPL-2.0
/*
 * A consumer of every upstream name include/twostep-dma.h promises, built
 * by the suite's static tier with -Werror against each kernel: on 6.1 and
 * 6.12 the names come from twostep (TS_EXPECT_NATIVE=0), on 7.3 from the
 * kernel itself (TS_EXPECT_NATIVE=1, built without twostep's symbols, so
 * that a name twostep still backed there would not link). Never loaded.
 */
#include <linux/module.h>
#include <linux/dma-mapping.h>
#include <linux/hmm.h>
#include <twostep-dma.h>

#if TWOSTEP_DMA_IOVA_NATIVE != TS_EXPECT_NATIVE
#error "two-step calls: not the implementation this kernel should use"
#endif
#if TWOSTEP_DMA_MAP_PHYS_NATIVE != TS_EXPECT_NATIVE
#error "dma_map_phys: not the implementation this kernel should use"
#endif

/* upstream's values, whoever defines them */
static_assert(DMA_ATTR_MMIO == (1UL << 10));
static_assert(DMA_ATTR_REQUIRE_COHERENT == (1UL << 12));
static_assert(HMM_PFN_DMA_MAPPED == 1UL << (BITS_PER_LONG - 4));
static_assert(HMM_PFN_P2PDMA == 1UL << (BITS_PER_LONG - 5));
static_assert(HMM_PFN_P2PDMA_BUS == 1UL << (BITS_PER_LONG - 6));

/* never set: the module is built, not loaded */
static struct device *names_dev;

static int __init names_init(void)
{
	unsigned long attrs = DMA_ATTR_MMIO | DMA_ATTR_REQUIRE_COHERENT;
	struct device *dev = names_dev;
	struct dma_iova_state st;
	struct hmm_dma_map m;
	phys_addr_t phys;
	dma_addr_t a;

	if (dma_iova_try_alloc(dev, &st, 0, PAGE_SIZE)) {
		dma_iova_link(dev, &st, 0, 0, PAGE_SIZE, DMA_TO_DEVICE, attrs);
		dma_iova_sync(dev, &st, 0, PAGE_SIZE);
		dma_iova_unlink(dev, &st, 0, PAGE_SIZE, DMA_TO_DEVICE, attrs);
		dma_iova_destroy(dev, &st, 0, DMA_TO_DEVICE, 0);
		dma_iova_free(dev, &st);
	}
	if (hmm_dma_map_alloc(dev, &m, 1, sizeof(a)))
		return -EINVAL;
	a = hmm_dma_map_pfn(dev, &m, 0, NULL);
	phys = hmm_pfn_to_phys(m.pfn_list[0] | HMM_PFN_DMA_MAPPED |
			       HMM_PFN_P2PDMA | HMM_PFN_P2PDMA_BUS);
	hmm_dma_unmap_pfn(dev, &m, 0);
	hmm_dma_map_free(dev, &m);
	a = dma_map_phys(dev, phys, PAGE_SIZE, DMA_FROM_DEVICE, attrs);
	if (!dma_mapping_error(dev, a) && dma_need_unmap(dev))
		dma_unmap_phys(dev, a, PAGE_SIZE, DMA_FROM_DEVICE, attrs);
	return dma_use_iova(&st) + dma_iova_size(&st);
}
module_init(names_init);
MODULE_LICENSE("GPL");

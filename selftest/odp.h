/* SPDX-License-Identifier: GPL-2.0 */
/*
 * twostep self-test: on-demand paging of user memory (odp.c).
 */
#ifndef _TWOSTEP_SELFTEST_ODP_H
#define _TWOSTEP_SELFTEST_ODP_H

#include "edu.h"
#include "ktap.h"

extern const struct ts_case ts_odp_cases[];
extern const unsigned int ts_odp_ncases;

int ts_odp_init(struct edu_dev *edu);
void ts_odp_exit(void);

#endif /* _TWOSTEP_SELFTEST_ODP_H */

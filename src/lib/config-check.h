/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The checks of a config that need nothing resolved yet (config-check.c): every caller of
 * nsbox_run() gets them, not only the command. */
#pragma once

#include "nsbox.h"

/* NSBOX_MEMORY_MIN, the --memory floor, is in nsbox.h. */

/* Refuse a config whose values are out of range or exclude each other: -EINVAL with the
 * result's error_step "config" and a one-line error naming the option (report_config_error()), else
 * 0. Opens nothing. */
int config_check(const struct nsbox_config *c, struct nsbox_result *ret);

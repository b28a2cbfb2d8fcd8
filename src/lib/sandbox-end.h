/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What follows a sandbox's supervision (sandbox_close(), in the order sandbox.c calls them): the
 * diagnoses of a full /dev/shm and /work, the host side of copy-out and the workspace's save,
 * a cell's outputs, and what --pid host left behind.
 */
#pragma once

#include <stdbool.h>

#include "nsbox.h"
#include "plan.h"

/* A payload that died of SIGBUS with /dev/shm full: say it ran out of --shm-size. */
void shm_diagnose(const struct nsbox_config *c, struct nsbox_result *ret);
/* /work was (nearly) full when the payload ended: ret->work_full and a warning. */
void work_diagnose(const struct nsbox_config *c, struct nsbox_result *ret);
/* Unpack the copy-out stream init wrote into the host directories plan_copies() opened (and
 * the workspace's staging directory), then save the workspace if the copy was complete.
 * steps_mode: a started sandbox, whose end has said itself why a copy was not taken. */
void copy_out_finish(struct sandbox_plan *sb, struct nsbox_result *ret, bool steps_mode);
/* A cell's outputs (config->cell), read once the payload has ended. */
void outputs_finish(struct sandbox_plan *sb, struct nsbox_result *ret);
/* --pid host with host ids of the run's own: kill what the payload left in the background. */
void kill_leftovers(const struct sandbox_plan *sb, struct nsbox_result *ret);

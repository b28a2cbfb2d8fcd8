/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsbox policy (cmd-policy.c). */
#pragma once

/* `nsbox policy check FILE | nsbox policy dump [FILE]`; argv[0] is "policy". Returns the exit
 * status: 0, or 125 after the policy's errors. */
int policy_main(int argc, char *argv[]);

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsbox selftest: attack programs run inside `nsbox run`, with proof that each protection
 * matters. */
#pragma once

/*
 * The `nsbox selftest [--json] [--ablate] [--control] [--only NAMES] [--rootfs DIR]` command.
 * argv[0] is "selftest". Runs every attack of src/cli/selftest-attacks.py inside `nsbox run` (this
 * binary, /proc/self/exe) with the normal protections; with --ablate each again with only its
 * protection removed (the opt-outs of `nsbox run`); with --control each without nsbox at all,
 * as the host's own uid for the sandbox (nobody when root runs it). Prints a table, or one JSON
 * object with --json.
 * Returns the exit status: 0 when every attack was blocked (and, with --ablate or --control,
 * every attack that was tried succeeded without its protection); 1 when one was not, or an
 * attack could not be judged; 125 for bad arguments or when the self-test cannot set itself up
 * (its temporary directory, its canaries).
 */
int selftest_main(int argc, char *argv[]);

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsbox workspace: list, remove and export this user's workspaces (workspace.h). */
#pragma once

/* argv[0] is "workspace". Returns the exit status: 0, or 125 after a one-line error. */
int workspace_main(int argc, char *argv[]);

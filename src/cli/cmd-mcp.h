/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* `nsbox mcp` (cmd-mcp.c): the sandbox as a Model Context Protocol server over stdio. */
#pragma once

/* argv[0] is "mcp". Returns the exit status. */
int mcp_main(int argc, char *argv[]);

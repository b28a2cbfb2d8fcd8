# SPDX-License-Identifier: LGPL-2.1-or-later
"""`nsbox mcp` driven by the official MCP TypeScript SDK (@modelcontextprotocol/sdk, installed
by scripts/setup into build/mcp-sdk from the npm registry, never committed): each scenario of
mcp-sdk-client.mjs is one test. The SDK's client checks each structuredContent against the
tool's outputSchema, so these also hold the schemas to what the server sends.

The MCP conformance suite (@modelcontextprotocol/conformance) is not run: it tests servers only
over Streamable HTTP (its `server --url`), against the fixture tools of its reference server,
and needs Node 22; `nsbox mcp` speaks stdio."""
import os
import shutil
import subprocess
import unittest

from nsboxtest import HERE, NSBOX, NsboxTestCase, nsbox

SCRIPT = os.path.join(HERE, "mcp-sdk-client.mjs")


def sdk_dir():
    build = os.environ.get("NSBOX_BUILD_DIR") or os.path.join(HERE, "..", "..", "build")
    return os.environ.get("NSBOX_MCP_SDK") or os.path.join(build, "mcp-sdk")


class TestMcpSdk(NsboxTestCase):
    def run_scenario(self, name, env=None):
        node = shutil.which("node")
        sdk = sdk_dir()
        if not node:
            self.skip_or_fail("no node (Node.js 18 or later) to run the MCP SDK's client")
        if not os.path.isdir(os.path.join(sdk, "node_modules", "@modelcontextprotocol", "sdk")):
            self.skip_or_fail(f"the MCP TypeScript SDK is not installed in {sdk} "
                              "(scripts/setup installs it with npm)")
        e = dict(os.environ, NSBOX=os.path.abspath(NSBOX), NSBOX_MCP_SDK=os.path.abspath(sdk),
                 **(env or {}))
        p = subprocess.run([node, SCRIPT, name], capture_output=True, text=True, env=e,
                           timeout=120)
        self.assertEqual(p.returncode, 0, f"stdout={p.stdout}\nstderr={p.stderr}")
        self.assertIn(f"ok {name}", p.stdout)

    def test_initialize_and_list(self):
        self.run_scenario("initialize_and_list")

    def test_call_success(self):
        self.run_scenario("call_success")

    def test_call_exception(self):
        self.run_scenario("call_exception")

    def test_call_timeout(self):
        self.run_scenario("call_timeout")

    def test_progress(self):
        self.run_scenario("progress")

    def test_cancellation(self):
        self.run_scenario("cancellation")

    def test_session_state(self):
        self.run_scenario("session_state")

    def test_plot_image(self):
        """A matplotlib figure of run_python (a notebook cell, nsbox run --cell) comes back as an
        MCP image item: needs the science rootfs."""
        science = os.environ.get("NSBOX_ROOTFS_SCIENCE") or os.path.join(
            HERE, "..", "..", "build", "rootfs", "science", "tree")
        if not os.path.isdir(os.path.join(science, "usr", "lib", "python3", "dist-packages",
                                          "matplotlib")):
            self.skip_or_fail(f"no science rootfs at {science} (scripts/setup --science)")
        self.run_scenario("plot_image", {"NSBOX_ROOTFS_SCIENCE": science})


if __name__ == "__main__":
    unittest.main()

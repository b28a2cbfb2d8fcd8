// SPDX-License-Identifier: LGPL-2.1-or-later
// `nsbox mcp` driven by the official MCP TypeScript SDK's client, as an MCP host drives a
// server: its stdio transport, initialize, tools/list, tools/call (the SDK checks each
// structuredContent against the tool's outputSchema), progress, cancellation.
//
//   node mcp-sdk-client.mjs SCENARIO
//
// Environment: NSBOX (the binary), NSBOX_MCP_SDK (a directory with
// node_modules/@modelcontextprotocol/sdk: scripts/setup installs it in build/mcp-sdk),
// NSBOX_ROOTFS_SCIENCE (the plot scenario). Exit status 0: passed; 1: failed, with the reason
// on stderr. test_mcp_sdk.py runs each scenario as a test.
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(path.resolve(process.env.NSBOX_MCP_SDK, "package.json"));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");

async function connect(...args) {
  const transport = new StdioClientTransport({
    command: process.env.NSBOX,
    args: ["mcp", "--cgroup", "off", ...args],
    env: { ...process.env },
    stderr: "pipe",
  });
  let stderr = "";
  transport.stderr?.on("data", (d) => (stderr += d));
  const client = new Client({ name: "nsbox-test", version: "1.0.0" });
  await client.connect(transport);
  // The SDK validates structuredContent against outputSchema for the tools it has listed.
  await client.listTools();
  client.stderrText = () => stderr;
  return client;
}

const text = (r) => r.content.filter((c) => c.type === "text").map((c) => c.text).join("\n");

const scenarios = {
  async initialize_and_list() {
    const c = await connect();
    assert.equal(c.getServerVersion().name, "nsbox");
    assert.ok(c.getServerCapabilities().tools, "no tools capability");
    const { tools } = await c.listTools();
    assert.deepEqual(tools.map((t) => t.name), ["run_python", "python_session", "run_command",
      "session_list_files", "session_read_file", "session_write_file"]);
    for (const t of tools) {
      assert.equal(t.inputSchema.type, "object");
      assert.equal(t.outputSchema.type, "object");
    }
    await c.close();
  },

  async call_success() {
    const c = await connect();
    const r = await c.callTool({ name: "run_python", arguments: { code: "print(6 * 7)" } });
    assert.equal(r.isError, false);
    assert.deepEqual(r.content, [{ type: "text", text: "42\n" }]);
    assert.equal(r.structuredContent.status, "exited");
    assert.equal(r.structuredContent.exit_code, 0);
    const cmd = await c.callTool({ name: "run_command", arguments: { argv: ["echo", "hi"] } });
    assert.equal(text(cmd), "hi\n");
    await c.close();
  },

  async call_exception() {
    const c = await connect();
    const r = await c.callTool({ name: "run_python", arguments: { code: "1 / 0" } });
    assert.equal(r.isError, true);
    assert.match(text(r), /^exited with status 1\n\[stderr\]\nTraceback/);
    assert.match(text(r), /ZeroDivisionError: division by zero/);
    assert.equal(r.structuredContent.exit_code, 1);
    await c.close();
  },

  async call_timeout() {
    const c = await connect("--timeout", "5");
    const t = Date.now();
    const r = await c.callTool({ name: "run_python",
                                 arguments: { code: "while True: pass", timeout: 1 } });
    assert.ok(Date.now() - t < 4500, "the call's shorter timeout was not used");
    assert.equal(r.isError, true);
    assert.equal(r.structuredContent.status, "timeout");
    assert.equal(r.structuredContent.limit.name, "timeout");
    assert.match(text(r), /timed out after 1 s/);
    await c.close();
  },

  async plot_image() {
    const c = await connect("--rootfs", process.env.NSBOX_ROOTFS_SCIENCE);
    const r = await c.callTool({ name: "run_python", arguments: { code:
      "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title('mcp')\nplt.show()" } });
    assert.equal(r.isError, false, text(r));
    const images = r.content.filter((x) => x.type === "image");
    assert.equal(images.length, 1, JSON.stringify(r.content).slice(0, 500));
    assert.equal(images[0].mimeType, "image/png");
    const png = Buffer.from(images[0].data, "base64");
    assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    assert.ok(png.length > 1000, "an empty image");
    await c.close();
  },

  async progress() {
    const c = await connect();
    const seen = [];
    const r = await c.callTool(
      { name: "run_command", arguments: { argv: ["sh", "-c", "echo one; sleep 1.5; echo two"] } },
      undefined, { onprogress: (p) => seen.push(p) });
    assert.equal(text(r), "one\ntwo\n");
    assert.ok(seen.length >= 1, "no progress notification");
    assert.match(seen[0].message, /one/);
    for (let i = 1; i < seen.length; i++)
      assert.ok(seen[i].progress > seen[i - 1].progress, "progress must increase");
    // A session's step streams its output too.
    const steps = [];
    const s = await c.callTool(
      { name: "python_session", arguments: { code:
        "import time\nprint('first', flush=True)\ntime.sleep(1.5)\nprint('second')" } },
      undefined, { onprogress: (p) => steps.push(p) });
    assert.equal(text(s), "first\nsecond\n");
    assert.ok(steps.length >= 1 && /first/.test(steps[0].message), JSON.stringify(steps));
    await c.close();
  },

  async cancellation() {
    const c = await connect("--timeout", "300"); // only the cancellation may end the step
    await c.callTool({ name: "python_session", arguments: { code: "x = 41" } });
    const ac = new AbortController();
    const started = Date.now();
    const call = c.callTool({ name: "python_session",
                              arguments: { code: "import time\ntime.sleep(600)" } },
                            undefined, { signal: ac.signal });
    setTimeout(() => ac.abort("the user changed their mind"), 1000);
    await assert.rejects(call);
    // The session's state is kept, and the interrupted step does not hold the next one.
    const r = await c.callTool({ name: "python_session", arguments: { code: "print(x + 1)" } });
    assert.equal(text(r), "42\n");
    assert.ok(Date.now() - started < 10000, "the cancelled step ran on");
    await c.close();
  },

  async session_state() {
    const c = await connect();
    await c.callTool({ name: "python_session", arguments: { code: "import math\nr = 2" } });
    let r = await c.callTool({ name: "python_session",
                               arguments: { code: "print(round(math.pi * r * r, 2))" } });
    assert.equal(text(r), "12.57\n");
    assert.equal(r.structuredContent.interpreter, "kept");
    r = await c.callTool({ name: "python_session",
                           arguments: { code: "print('r' in dir())", session: "other" } });
    assert.equal(text(r), "False\n");
    r = await c.callTool({ name: "session_write_file",
                           arguments: { path: "data.csv", content: "a,b\n1,2\n" } });
    assert.equal(r.structuredContent.size, 8);
    r = await c.callTool({ name: "python_session",
                           arguments: { code: "print(open('data.csv').read().split()[1])" } });
    assert.equal(text(r), "1,2\n");
    r = await c.callTool({ name: "session_list_files", arguments: {} });
    assert.ok(r.structuredContent.entries.some((e) => e.path === "data.csv"));
    await c.close();
  },
};

const name = process.argv[2];
if (!scenarios[name]) {
  console.error(`unknown scenario '${name}': ${Object.keys(scenarios).join(", ")}`);
  process.exit(2);
}
try {
  await scenarios[name]();
  console.log(`ok ${name}`);
  process.exit(0);
} catch (e) {
  console.error(`FAILED ${name}:`, e);
  process.exit(1);
}

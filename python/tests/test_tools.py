# SPDX-License-Identifier: LGPL-2.1-or-later
"""nsbox.tools: the tools' definitions for OpenAI and Anthropic, and a ToolServer (one
`nsbox mcp`) answering both APIs' tool calls, against the real binary and rootfs."""
import json
import os
import subprocess
import sys
import time
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import nsbox  # noqa: E402
import nsbox.tools  # noqa: E402

NSBOX = os.environ.get("NSBOX") or str(HERE.parent.parent / "build" / "src" / "nsbox")
ARGS = ["--cgroup", "off"]


class TestDefinitions(unittest.TestCase):
    def test_same_as_the_server(self):
        """The package's file is the one nsbox embeds: names and schemas agree."""
        for api in ("openai", "anthropic"):
            served = json.loads(subprocess.run([NSBOX, "mcp", "--print-tools", api],
                                               capture_output=True, check=True).stdout)
            ours = nsbox.tools.definitions(api)
            key = "parameters" if api == "openai" else "input_schema"
            self.assertEqual([t["name"] for t in ours], [t["name"] for t in served])
            self.assertEqual([t[key] for t in ours], [t[key] for t in served])
        self.assertEqual(nsbox.tools.definitions("openai")[0]["type"], "function")
        chat = nsbox.tools.definitions("openai-chat")[0]
        self.assertEqual(chat["function"]["name"], "run_python")
        self.assertNotIn("$ref", json.dumps(nsbox.tools.load_tools()))
        with self.assertRaises(ValueError):
            nsbox.tools.definitions("gemini")


class Model:
    """An SDK's pydantic-like object."""

    def __init__(self, **kw):
        self.kw = kw

    def model_dump(self):
        return self.kw


class TestToolServer(unittest.TestCase):
    def setUp(self):
        self.tools = nsbox.tools.ToolServer(ARGS, nsbox=NSBOX)
        self.addCleanup(self.tools.close)

    def test_descriptions_say_the_sandbox(self):
        d = self.tools.definitions("anthropic")[0]["description"]
        self.assertIn("Network: none", d)

    def test_openai_responses(self):
        out = self.tools.handle({"type": "function_call", "call_id": "c1", "name": "run_python",
                                 "arguments": json.dumps({"code": "print(6 * 7)"})})
        self.assertEqual(out, {"type": "function_call_output", "call_id": "c1",
                               "output": "42\n"})
        out = self.tools.handle(Model(type="function_call", call_id="c2", name="run_python",
                                      arguments="{not json"))
        self.assertIn("not JSON", out["output"])

    def test_openai_chat(self):
        out = self.tools.handle({"id": "t1", "type": "function", "function": {
            "name": "run_command", "arguments": json.dumps({"argv": ["sh", "-c", "exit 4"]})}})
        self.assertEqual(out["role"], "tool")
        self.assertEqual(out["tool_call_id"], "t1")
        self.assertIn("exited with status 4", out["content"])

    def test_anthropic_and_session_state(self):
        out = self.tools.handle({"type": "tool_use", "id": "u1", "name": "python_session",
                                 "input": {"code": "x = 5"}})
        self.assertEqual(out["type"], "tool_result")
        self.assertFalse(out["is_error"])
        out = self.tools.handle({"type": "tool_use", "id": "u2", "name": "python_session",
                                 "input": {"code": "print(x * 2)\nraise KeyError('k')"}})
        self.assertTrue(out["is_error"])
        self.assertEqual(out["tool_use_id"], "u2")
        text = out["content"][0]["text"]
        self.assertIn("10", text)
        self.assertIn("KeyError", text)
        # Arguments outside the schema: an error result for the model, not an exception.
        out = self.tools.handle({"type": "tool_use", "id": "u3", "name": "no_such_tool",
                                 "input": {}})
        self.assertTrue(out["is_error"])
        self.assertIn("unknown tool", out["content"][0]["text"])
        with self.assertRaises(ValueError):
            self.tools.handle({"type": "text", "text": "hi"})

    def test_same_words_as_as_tool_output(self):
        """One wording: the server's text is Result.as_tool_output()'s for the same run."""
        codes = ("print(6 * 7)", "print('out')\n1 / 0", "import time\ntime.sleep(5)",
                 "import sys\nsys.stdout.write('no newline')\nsys.exit(3)", "",
                 "print('10%\\r50%\\r100%\\x1b[0m')\nprint('\\u00e9t\\u00e9 \\x85')",
                 "for i in range(3000): print(f'line {i} \\u20ac')\nraise SystemExit(1)")
        with nsbox.tools.ToolServer(ARGS + ["--output-limit", "500"], nsbox=NSBOX) as cut:
            for server, limit in ((self.tools, None), (cut, 500)):
                for code in codes:
                    mine = server.call("run_python", {"code": code, "timeout": 1})
                    r = nsbox.run_python_code(code, timeout=1, nsbox=NSBOX, extra_args=ARGS,
                                              output_limit=limit)
                    self.assertEqual(mine["content"][0]["text"],
                                     r.as_tool_output(max_chars=20000), (code, limit))

    def test_close_ends_sessions(self):
        self.tools.call("python_session", {"code": "import time"})
        pid = self.tools._p.pid
        ls = subprocess.run([NSBOX, "session", "ls", "--json"], capture_output=True,
                            text=True).stdout.splitlines()
        mine = [json.loads(l)["pid"] for l in ls
                if json.loads(l)["labels"].get("mcp.server") == str(pid)]
        self.assertEqual(len(mine), 1)
        self.tools.close()
        end = time.monotonic() + 10
        while time.monotonic() < end and os.path.exists(f"/proc/{mine[0]}"):
            time.sleep(0.05)
        self.assertFalse(os.path.exists(f"/proc/{mine[0]}"), "the session outlived close()")


if __name__ == "__main__":
    unittest.main()

# SPDX-License-Identifier: LGPL-2.1-or-later
"""nsbox's tools for function-calling APIs: the same tools, schemas and results as ``nsbox mcp``.

The tools (run_python, python_session, run_command and the session file tools) are defined once,
in ``tools.json`` beside this file, which ``nsbox mcp`` embeds when it is built. A
:class:`ToolServer` runs one ``nsbox mcp`` and sends it each tool call, so a call's result is
worded exactly as an MCP client gets it, and python_session's state lives as long as the
ToolServer::

    import nsbox.tools
    with nsbox.tools.ToolServer(extra_args=["--memory", "512m"]) as tools:
        # OpenAI (Responses API): tools=tools.definitions("openai")
        # Anthropic (Messages API): tools=tools.definitions("anthropic")
        ...
        for call in calls:                  # the model's tool calls, from either API
            reply = tools.handle(call)      # the item/message to send back

Standard library only.
"""
import base64
import json
import os
import subprocess
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ._runner import find_nsbox
from .errors import NsboxError

TOOLS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tools.json")
_PROTOCOL = "2025-06-18"


def load_tools() -> List[Dict[str, Any]]:
    """The tools as MCP defines them (name, title, description, inputSchema, outputSchema),
    read from :data:`TOOLS_FILE`. The descriptions are the file's; a :class:`ToolServer`'s also
    say the sandbox's network, limits and packages."""
    with open(TOOLS_FILE) as f:
        doc = json.load(f)
    tools = []
    for t in doc["tools"]:
        t = dict(t)
        ref = (t.get("outputSchema") or {}).get("$ref", "")
        if ref.startswith("#/$defs/"):
            t["outputSchema"] = doc["$defs"][ref[len("#/$defs/"):]]
        tools.append(t)
    return tools


def definitions(api: str, tools: Optional[Sequence[Mapping[str, Any]]] = None) -> List[Dict]:
    """The tools for api: ``"openai"`` (function tools: ``{"type": "function", "name",
    "description", "parameters"}``, as the Responses API takes them; Chat Completions nests the
    same under ``"function"``: ``"openai-chat"``), ``"anthropic"`` (``{"name", "description",
    "input_schema"}``) or ``"mcp"``. tools: MCP tools (default: :func:`load_tools`)."""
    tools = load_tools() if tools is None else tools
    out = []
    for t in tools:
        if api == "openai":
            out.append({"type": "function", "name": t["name"], "description": t["description"],
                        "parameters": t["inputSchema"]})
        elif api == "openai-chat":
            out.append({"type": "function", "function": {
                "name": t["name"], "description": t["description"],
                "parameters": t["inputSchema"]}})
        elif api == "anthropic":
            out.append({"name": t["name"], "description": t["description"],
                        "input_schema": t["inputSchema"]})
        elif api == "mcp":
            out.append(dict(t))
        else:
            raise ValueError(f"unknown api {api!r}: openai, openai-chat, anthropic or mcp")
    return out


def _plain(obj: Any) -> Any:
    """A tool call as a dict, whether the API's SDK gave an object or it is a dict already."""
    if isinstance(obj, Mapping):
        return obj
    if hasattr(obj, "model_dump"):  # the openai and anthropic SDKs' pydantic models
        return obj.model_dump()
    return vars(obj)


def _text(result: Mapping[str, Any]) -> str:
    return "\n".join(c["text"] for c in result.get("content", []) if c.get("type") == "text")


def _images(result: Mapping[str, Any]) -> List[Dict[str, str]]:
    return [c for c in result.get("content", []) if c.get("type") == "image"]


class ToolServer:
    """One ``nsbox mcp`` for an agent: its tools' definitions and their calls.

    Args:
        extra_args: ``nsbox run`` options for every call's sandbox (``["--memory", "512m",
            "--network", "allow=pypi.org", "--log", "audit.jsonl"]``); a call may ask for a
            shorter timeout, never a longer one.
        nsbox: the binary (default ``$NSBOX``, else ``nsbox`` on PATH).
        rootfs: the root filesystem (default ``$NSBOX_ROOTFS``, else nsbox's own).

    Calls are answered one at a time. :meth:`close` (or the end of a ``with`` block) ends the
    server and every sandbox and session it made.
    """

    def __init__(self, extra_args: Sequence[str] = (), *, nsbox: Optional[str] = None,
                 rootfs: Optional[str] = None) -> None:
        args = [find_nsbox(nsbox), "mcp", *[str(a) for a in extra_args]]
        if rootfs is not None:
            args += ["--rootfs", os.fspath(rootfs)]
        self._next_id = 0
        self._p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE)
        try:
            init = self._request("initialize", {
                "protocolVersion": _PROTOCOL, "capabilities": {},
                "clientInfo": {"name": "nsbox.tools", "version": "1"}})
            self._notify("notifications/initialized")
            self.server_info = init["serverInfo"]
            self.tools = self._request("tools/list")["tools"]
        except BaseException:
            self.close()
            raise

    def _notify(self, method: str, params: Optional[Dict] = None) -> None:
        m = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            m["params"] = params
        self._p.stdin.write((json.dumps(m) + "\n").encode())
        self._p.stdin.flush()

    def _request(self, method: str, params: Optional[Dict] = None) -> Dict[str, Any]:
        self._next_id += 1
        m = {"jsonrpc": "2.0", "id": self._next_id, "method": method}
        if params is not None:
            m["params"] = params
        try:
            self._p.stdin.write((json.dumps(m) + "\n").encode())
            self._p.stdin.flush()
        except (BrokenPipeError, ValueError):
            raise NsboxError(self._gone(), step="mcp") from None
        for line in self._p.stdout:
            answer = json.loads(line)
            if answer.get("id") != self._next_id or "method" in answer:
                continue  # a notification (progress)
            if "error" in answer:
                raise NsboxError(f"nsbox mcp: {answer['error'].get('message')}", step="mcp",
                                 raw=answer)
            return answer["result"]
        raise NsboxError(self._gone(), step="mcp")

    def _gone(self) -> str:
        self._p.wait()
        err = self._p.stderr.read().decode(errors="replace").strip()
        return f"nsbox mcp ended (exit status {self._p.returncode})" + (f": {err}" if err else "")

    def definitions(self, api: str) -> List[Dict[str, Any]]:
        """The tools for api (as :func:`definitions`), with the server's descriptions: they say
        what the sandbox is (network, limits, the rootfs's Python packages)."""
        return definitions(api, self.tools)

    def call(self, name: str, arguments: Any) -> Dict[str, Any]:
        """Run tool name with arguments (a dict, or its JSON text as OpenAI sends it) and return
        MCP's CallToolResult: ``content`` (the model's text, images), ``structuredContent``
        (nsbox's verdict), ``isError``. Arguments that do not fit the tool come back as a
        result with isError, for the model to correct."""
        if isinstance(arguments, (str, bytes)):
            try:
                arguments = json.loads(arguments or "{}")
            except ValueError as e:
                return {"content": [{"type": "text", "text": f"the arguments are not JSON: {e}"}],
                        "isError": True}
        if not isinstance(arguments, Mapping):
            return {"content": [{"type": "text", "text": "the arguments must be an object"}],
                    "isError": True}
        try:
            return self._request("tools/call", {"name": name, "arguments": dict(arguments)})
        except NsboxError as e:
            if e.raw is None:
                raise  # the server is gone
            return {"content": [{"type": "text", "text": str(e)}], "isError": True}

    def handle(self, tool_call: Any) -> Dict[str, Any]:
        """Run a model's tool call and return what goes back to the model, for the API the call
        came from (a dict, or the API SDK's object):

        - OpenAI Responses API, ``{"type": "function_call", "call_id", "name", "arguments"}``:
          ``{"type": "function_call_output", "call_id", "output"}`` (the text; with images, a
          list of ``input_text`` and ``input_image`` items);
        - OpenAI Chat Completions, ``{"id", "type": "function", "function": {"name",
          "arguments"}}``: ``{"role": "tool", "tool_call_id", "content"}`` (text only: images
          are said to be left out);
        - Anthropic, ``{"type": "tool_use", "id", "name", "input"}``: ``{"type":
          "tool_result", "tool_use_id", "content": [text, image...], "is_error"}``, a block of
          the next user message.
        """
        c = _plain(tool_call)
        kind = c.get("type")
        if kind == "tool_use":
            r = self.call(c["name"], c.get("input") or {})
            content = [{"type": "text", "text": _text(r)}]
            content += [{"type": "image", "source": {"type": "base64",
                                                     "media_type": i["mimeType"],
                                                     "data": i["data"]}} for i in _images(r)]
            return {"type": "tool_result", "tool_use_id": c["id"], "content": content,
                    "is_error": bool(r.get("isError"))}
        if kind == "function_call":
            r = self.call(c["name"], c.get("arguments") or "{}")
            images = _images(r)
            output: Any = _text(r)
            if images:
                output = [{"type": "input_text", "text": output}] + [
                    {"type": "input_image",
                     "image_url": f"data:{i['mimeType']};base64,{i['data']}"} for i in images]
            return {"type": "function_call_output", "call_id": c["call_id"], "output": output}
        if kind == "function" and isinstance(c.get("function"), Mapping):
            f = c["function"]
            r = self.call(f["name"], f.get("arguments") or "{}")
            text = _text(r)
            if _images(r):
                text += (f"\n[{len(_images(r))} image(s) left out: a Chat Completions tool "
                         "message holds text only]")
            return {"role": "tool", "tool_call_id": c["id"], "content": text}
        raise ValueError("not a tool call of OpenAI's Responses or Chat Completions API or of "
                         "Anthropic's Messages API")

    def close(self) -> None:
        """End the server: every sandbox and session it made ends with it."""
        if self._p.poll() is None:
            try:
                self._p.stdin.close()
            except BrokenPipeError:
                pass
            try:
                self._p.wait(30)
            except subprocess.TimeoutExpired:
                self._p.kill()
                self._p.wait()
        for f in (self._p.stdout, self._p.stderr):
            f.close()

    def __enter__(self) -> "ToolServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def image_bytes(item: Mapping[str, Any]) -> bytes:
    """The bytes of an MCP image content item (its base64 data)."""
    return base64.b64decode(item["data"])

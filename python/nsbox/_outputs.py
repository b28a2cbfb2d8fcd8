# SPDX-License-Identifier: LGPL-2.1-or-later
"""A notebook cell's outputs (``Result.outputs``) as a model reads them: text, with each image
as a placeholder (``[image/png 640x480, 23 KB]``), and the content parts of the model APIs that
take images (:meth:`Result.as_content`)."""

import base64
import binascii
import struct
from typing import Any, Dict, List, Optional, Tuple

#: The base64 bytes of the images :meth:`Result.as_content` attaches at most, in all (below
#: Anthropic's 5 MB per image and OpenAI's per-request limits).
IMAGE_BUDGET = 4_000_000
#: How many images :meth:`Result.as_content` attaches at most.
MAX_IMAGES = 8

_IMAGE_MIMES = ("image/png", "image/jpeg")
_APIS = ("openai", "anthropic", "mcp")


def _size_words(n: int) -> str:
    if n >= 1 << 20:
        return f"{n / (1 << 20):.1f} MB"
    if n >= 1 << 10:
        return f"{round(n / (1 << 10))} KB"
    return f"{n} bytes"


def _decode(data: Any) -> Optional[bytes]:
    if not isinstance(data, str):
        return None
    try:
        return base64.b64decode("".join(data.split()), validate=True)
    except (binascii.Error, ValueError):
        return None


def image_size(mime: str, raw: bytes) -> Optional[Tuple[int, int]]:
    """(width, height) from a PNG's IHDR or a JPEG's SOF marker, or None."""
    if mime == "image/png" and raw[:8] == b"\x89PNG\r\n\x1a\n" and len(raw) >= 24:
        return struct.unpack(">II", raw[16:24])
    if mime == "image/jpeg" and raw[:2] == b"\xff\xd8":
        i = 2
        while i + 9 < len(raw) and raw[i] == 0xFF:
            marker, length = raw[i + 1], struct.unpack(">H", raw[i + 2:i + 4])[0]
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                h, w = struct.unpack(">HH", raw[i + 5:i + 9])
                return w, h
            i += 2 + length
    return None


def placeholder(mime: str, raw: bytes) -> str:
    """``[image/png 640x480, 23 KB]``: what a text-only reader is told of an image."""
    dims = image_size(mime, raw)
    return f"[{mime}{f' {dims[0]}x{dims[1]}' if dims else ''}, {_size_words(len(raw))}]"


def images(outputs: List[Dict[str, Any]], mime: str = "image/png") -> List[bytes]:
    """The decoded images of one MIME type, in the order of the outputs."""
    found = []
    for out in outputs:
        raw = _decode((out.get("data") or {}).get(mime))
        if raw is not None:
            found.append(raw)
    return found


def output_text(out: Dict[str, Any]) -> str:
    """One output as text: an image's placeholder, else its text/plain; and what the budget
    left out."""
    data = out.get("data") or {}
    parts = []
    for mime in _IMAGE_MIMES:
        raw = _decode(data.get(mime))
        if raw is not None:
            parts.append(placeholder(mime, raw))
    if not parts:
        parts.append(str(data.get("text/plain", "")))
    for mime, size in (out.get("dropped") or {}).items():
        parts.append(f"[{mime} of {_size_words(int(size))} left out: over the outputs' budget]")
    return "\n".join(p for p in parts if p)


def outputs_text(outputs: List[Dict[str, Any]]) -> str:
    """Every output's text, one after the other."""
    return "\n".join(t for t in (output_text(o) for o in outputs) if t)


def error_line(error: Optional[Dict[str, Any]]) -> str:
    """The final line of a traceback, ``ValueError: bad``, or ""."""
    if not error:
        return ""
    name, value = str(error.get("name", "")), str(error.get("value", ""))
    return f"{name}: {value}" if value else name


def content(api: str, text: str, outputs: List[Dict[str, Any]], image_budget: int,
            max_images: int) -> List[Dict[str, Any]]:
    """The parts of :meth:`Result.as_content`: the text, then each PNG or JPEG image while
    they fit (image_budget base64 bytes, max_images), and a line for those that did not."""
    if api not in _APIS:
        raise ValueError(f"api must be one of {', '.join(map(repr, _APIS))}, not {api!r}")
    parts: List[Dict[str, Any]] = [{"type": "text", "text": text}]
    left, count, skipped = image_budget, 0, []
    for out in outputs:
        data = out.get("data") or {}
        for mime in _IMAGE_MIMES:
            b64 = data.get(mime)
            raw = _decode(b64)
            if raw is None:
                continue
            if count >= max_images or len(b64) > left:
                skipped.append(placeholder(mime, raw))
                continue
            left -= len(b64)
            count += 1
            if api == "openai":
                parts.append({"type": "image_url",
                              "image_url": {"url": f"data:{mime};base64,{b64}"}})
            elif api == "anthropic":
                parts.append({"type": "image", "source": {"type": "base64",
                                                          "media_type": mime, "data": b64}})
            else:
                parts.append({"type": "image", "data": b64, "mimeType": mime})
    if skipped:
        parts.append({"type": "text",
                      "text": f"[not attached (over {max_images} images or "
                              f"{_size_words(image_budget)} of images per result): "
                              f"{', '.join(skipped)}]"})
    return parts

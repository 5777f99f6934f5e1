"""How deeply a JSON body nests, measured on its bytes before it is parsed.

Python's ``json`` recurses once per array or object it enters: a body nesting a
hundred thousand arrays ends in ``RecursionError``. The measure here recurses not
at all and stays linear in the body's size; brackets inside strings do not count.
"""

from __future__ import annotations

import json
from itertools import accumulate

MAX_DEPTH = 128  # arrays and objects inside one another that a request may hold

_DROP = bytes(b for b in range(256) if b not in b"[]{}")
_DROP_TEXT = bytes(b for b in range(256) if b not in b'[]{}"')
_SAME = bytes.maketrans(b"{}", b"[]")
_STEP = [0] * 256
_STEP[ord("[")], _STEP[ord("]")] = 1, -1


def _utf8(raw: bytes) -> bytes:
    """The body as UTF-8 (``json`` also reads UTF-16 and UTF-32; ``UnicodeDecodeError``)."""
    encoding = json.detect_encoding(raw)
    if encoding in ("utf-8", "utf-8-sig"):
        return raw
    return raw.decode(encoding, "surrogatepass").encode("utf-8", "surrogatepass")


def nests_deeper(raw: bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether ``raw`` opens more than ``limit`` arrays or objects inside one another.

    A valid body is measured exactly; an invalid one may be taken one level deeper.
    """
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False  # not enough brackets to nest that deep
    text = _utf8(raw).replace(b"\\\\", b"").replace(b'\\"', b"")  # escapes hide no quote
    # Only brackets and quotes matter; two quotes side by side enclose no bracket.
    text = text.translate(None, _DROP_TEXT).replace(b'""', b"")
    outside = b"".join(text.split(b'"')[0::2])  # the even pieces lie outside strings
    marks = outside.translate(_SAME, _DROP)
    if b"[" * (limit + 1) in marks:
        return True
    # Each innermost pair goes (one level less; lists of scalars vanish), then the
    # running count of what is open finds the deepest point.
    reduced = marks.replace(b"[]", b"")
    deepest = max(accumulate(map(_STEP.__getitem__, reduced)), default=0)
    return deepest + (len(reduced) < len(marks)) > limit

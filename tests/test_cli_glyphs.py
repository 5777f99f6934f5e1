"""The terminal's marks: the symbol where the output can encode it, plain ASCII where not."""

from __future__ import annotations

import io

from vllmchat.cli.chat.glyphs import LEFT_OUT, PINNED, glyph


def _stream(encoding: str) -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(), encoding=encoding)


def test_a_mark_falls_back_to_ascii_where_the_locale_cannot_encode_it():
    assert glyph(_stream("utf-8"), PINNED) == "📌" and glyph(_stream("utf-8"), LEFT_OUT) == "× "
    assert glyph(_stream("ascii"), PINNED) == "* " and glyph(_stream("ascii"), LEFT_OUT) == "x "
    assert glyph(_stream("latin-1"), PINNED) == "* " and glyph(_stream("latin-1"), LEFT_OUT) == "× "
    assert all(len(plain) == 2 and plain.isascii() for _, plain in (PINNED, LEFT_OUT))

"""Real PDF files written by hand (tests and benchmarks): text pages with Helvetica, bookmarks,
a page that is only a picture (a scan), and RC4 encryption with a user password
(the PDF standard security handler, revision 2)."""

from __future__ import annotations

import hashlib
import struct
import textwrap
from collections.abc import Sequence
from pathlib import Path

_PAD = bytes.fromhex("28BF4E5E4E758A4164004E56FFFA01082E2E00B6D0683E802F0CA9FE6453697A")
_FILE_ID = bytes.fromhex("5d41402abc4b2a76b9719d911017c592")
_PERMISSIONS = -44


def rc4(key: bytes, data: bytes) -> bytes:
    s, j = list(range(256)), 0
    for i in range(256):
        j = (j + s[i] + key[i % len(key)]) % 256
        s[i], s[j] = s[j], s[i]
    out, i, j = bytearray(), 0, 0
    for byte in data:
        i = (i + 1) % 256
        j = (j + s[i]) % 256
        s[i], s[j] = s[j], s[i]
        out.append(byte ^ s[(s[i] + s[j]) % 256])
    return bytes(out)


def _padded(password: str) -> bytes:
    return (password.encode("latin-1") + _PAD)[:32]


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def _content(text: str) -> bytes:
    lines = []
    for paragraph in text.split("\n"):
        lines += textwrap.wrap(paragraph, 90) or [""]
    ops = ["BT", "/F1 10 Tf", "12 TL", "50 760 Td"]
    ops += [f"({_escape(line)}) Tj T*" for line in lines]
    return ("\n".join([*ops, "ET"]) + "\n").encode("latin-1")


def write_pdf(
    path: Path,
    pages: Sequence[str],
    *,
    bookmarks: Sequence[tuple[str, int]] = (),
    scanned: bool = False,
    password: str | None = None,
) -> Path:
    """A PDF of ``pages`` (text, or with ``scanned`` a picture per page and no text);
    ``bookmarks``: (title, 1-based page); ``password``: the user password (RC4)."""
    objects: dict[int, bytes] = {}
    streams: dict[int, bytes] = {}
    n_pages = len(pages)
    page_ids = [10 + 3 * i for i in range(n_pages)]
    objects[2] = (
        f"<< /Type /Pages /Kids [{' '.join(f'{p} 0 R' for p in page_ids)}] /Count {n_pages} >>"
    ).encode()
    objects[3] = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"
    outline = ""
    if bookmarks:
        first, ids = 5, [6 + i for i in range(len(bookmarks))]
        for n, (title, page) in enumerate(bookmarks):
            links = f"/Parent {first} 0 R /Dest [{page_ids[page - 1]} 0 R /Fit]"
            if n:
                links += f" /Prev {ids[n - 1]} 0 R"
            if n + 1 < len(ids):
                links += f" /Next {ids[n + 1]} 0 R"
            objects[ids[n]] = f"<< /Title ({_escape(title)}) {links} >>".encode("latin-1")
        objects[first] = (
            f"<< /Type /Outlines /First {ids[0]} 0 R /Last {ids[-1]} 0 R /Count {len(ids)} >>"
        ).encode()
        outline = f" /Outlines {first} 0 R"
    objects[1] = f"<< /Type /Catalog /Pages 2 0 R{outline} >>".encode()
    for page_id, text in zip(page_ids, pages, strict=True):
        content, image = page_id + 1, page_id + 2
        resources = "/Font << /F1 3 0 R >>"
        if scanned:
            resources += f" /XObject << /Im1 {image} 0 R >>"
            streams[content] = b"q 400 0 0 500 100 150 cm /Im1 Do Q\n"
            pixels = bytes((x * 7 + y * 13) % 256 for y in range(64) for x in range(64))
            streams[image] = pixels
            objects[image] = (
                b"<< /Type /XObject /Subtype /Image /Width 64 /Height 64 "
                b"/ColorSpace /DeviceGray /BitsPerComponent 8"
            )
        else:
            streams[content] = _content(text)
        objects[page_id] = (
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            f"/Resources << {resources} >> /Contents {content} 0 R >>"
        ).encode()
        objects.setdefault(content, b"<<")
    key = b""
    trailer_extra = ""
    if password is not None:
        owner = rc4(hashlib.md5(_padded(password + "-owner")).digest()[:5], _padded(password))
        key = hashlib.md5(
            _padded(password) + owner + struct.pack("<i", _PERMISSIONS) + _FILE_ID
        ).digest()[:5]
        objects[4] = (
            f"<< /Filter /Standard /V 1 /R 2 /O <{owner.hex()}> "
            f"/U <{rc4(key, _PAD).hex()}> /P {_PERMISSIONS} >>"
        ).encode()
        trailer_extra = f" /Encrypt 4 0 R /ID [<{_FILE_ID.hex()}> <{_FILE_ID.hex()}>]"
        for number in list(objects):
            if number not in (4, *streams) and b"/Title (" in objects[number]:
                objects[number] = _encrypt_title(objects[number], key, number)
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets: dict[int, int] = {}
    for number in sorted(objects):
        offsets[number] = len(out)
        body = objects[number]
        if number in streams:
            data = streams[number]
            if key:
                data = rc4(_object_key(key, number), data)
            head = body if body != b"<<" else b"<<"
            body = head + f" /Length {len(data)} >>\nstream\n".encode() + data + b"\nendstream"
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    size = max(objects) + 1
    xref = len(out)
    out += f"xref\n0 {size}\n0000000000 65535 f \n".encode()
    for number in range(1, size):
        if number in offsets:
            out += f"{offsets[number]:010d} 00000 n \n".encode()
        else:
            out += b"0000000000 65535 f \n"
    out += (
        f"trailer\n<< /Size {size} /Root 1 0 R{trailer_extra} >>\nstartxref\n{xref}\n%%EOF\n"
    ).encode()
    path.write_bytes(bytes(out))
    return path


def _object_key(key: bytes, number: int) -> bytes:
    return hashlib.md5(key + number.to_bytes(3, "little") + b"\x00\x00").digest()[:10]


def _encrypt_title(body: bytes, key: bytes, number: int) -> bytes:
    start = body.index(b"/Title (") + len(b"/Title (")
    end = body.index(b") ", start)
    title = body[start:end].replace(b"\\(", b"(").replace(b"\\)", b")").replace(b"\\\\", b"\\")
    return (
        body[: start - 1]
        + b"<"
        + rc4(_object_key(key, number), title).hex().encode()
        + b">"
        + body[end + 1 :]
    )

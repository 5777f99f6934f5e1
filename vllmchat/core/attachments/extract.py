"""Read a file into an ``ExtractedDocument``: text, Markdown, source code, PDF, .docx.

The file's kind is told by its first bytes before its name (a PDF renamed ``.txt`` is
read as a PDF; a binary file renamed ``.txt`` is refused as binary). Every refusal is
a typed ``AttachmentError`` whose message says why and what to do.
"""

from __future__ import annotations

import codecs
import hashlib
import re
from pathlib import Path

from vllmchat.core.attachments.errors import (
    EmptyDocument,
    ImageNeedsVision,
    MissingFile,
    NotText,
    TooLarge,
    Unreadable,
    Unsupported,
)
from vllmchat.core.attachments.model import ExtractedDocument, Section

MAX_BYTES = 64 << 20  # a document file; past this it is refused before being read
MAX_TEXT_CHARS = 16_000_000  # extracted text (about four million tokens)

MARKDOWN = {".md", ".markdown", ".mdown", ".mkd"}
IMAGE_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1a\x1c-\x1f\x7f]")


def sniff(head: bytes) -> str:
    """The kind of file its first bytes say: pdf, zip, ole, image/…, or text."""
    if head.startswith(b"%PDF-") or b"%PDF-" in head[:1024]:
        return "pdf"
    if head.startswith(b"PK\x03\x04"):
        return "zip"
    if head.startswith(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"):
        return "ole"  # an old Office file, or an Office file encrypted with a password
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    for magic, mime in IMAGE_MAGIC:
        if head.startswith(magic):
            return mime
    return "text"


def read_bounded(path: Path, max_bytes: int = MAX_BYTES) -> bytes:
    """The file's bytes, refused before reading when over ``max_bytes``."""
    try:
        size = path.stat().st_size
    except FileNotFoundError as exc:
        raise MissingFile(f"There is no file {path}.") from exc
    except OSError as exc:
        raise Unreadable(f"Cannot read {path.name}: {exc.strerror or exc}.") from exc
    if path.is_dir():
        raise Unsupported(f"{path.name} is a folder: attach the files in it one by one.")
    if size > max_bytes:
        raise TooLarge(
            f"{path.name} is {size / (1 << 20):,.0f} MB; a document can be at most "
            f"{max_bytes >> 20} MB. Attach the part you need (split the PDF, or copy the "
            "chapters into a text file)."
        )
    try:
        return path.read_bytes()
    except OSError as exc:
        raise Unreadable(f"Cannot read {path.name}: {exc.strerror or exc}.") from exc


def extract(path: str | Path, *, max_bytes: int = MAX_BYTES) -> ExtractedDocument:
    """The document at ``path``; raises an ``AttachmentError`` saying why it cannot be."""
    p = Path(path)
    raw = read_bounded(p, max_bytes)
    digest = hashlib.sha256(raw).hexdigest()
    kind = sniff(raw[:2048])
    suffix = p.suffix.lower()
    notice = ""
    if suffix == ".pdf" and kind != "pdf":
        raise Unreadable(
            f"{p.name} is not a readable PDF: it is damaged, or not a PDF at all (it does "
            "not start as a PDF does)."
        )
    if suffix == ".docx" and kind not in ("zip", "ole"):
        raise Unreadable(
            f"{p.name} is not a readable Word document: it is damaged, or not a .docx file at all."
        )
    if kind == "pdf":
        from vllmchat.core.attachments.pdf import read_pdf

        text, sections, pages = read_pdf(raw, p.name)
        mime = "application/pdf"
    elif kind == "zip" and suffix == ".docx":
        from vllmchat.core.attachments.word import read_docx

        text, sections, pages = *read_docx(raw, p.name), 0
        mime = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    elif kind == "ole" and suffix in (".docx", ".doc"):
        from vllmchat.core.attachments.word import refuse_ole

        raise refuse_ole(p.name)
    elif kind.startswith("image/"):
        raise ImageNeedsVision(
            f"{p.name} is an image: it can be attached to a model with vision (one with "
            "a multimodal projector)."
        )
    elif kind == "text":
        text, notice = read_text(raw, p.name)
        sections, pages = text_sections(text, markdown=suffix in MARKDOWN), 0
        mime = "text/markdown" if suffix in MARKDOWN else "text/plain"
    else:
        raise Unsupported(
            f"{p.name} is not a document vllmchat can read: attach text, Markdown, source "
            "code, a PDF or a .docx file."
        )
    if len(text) > MAX_TEXT_CHARS:
        raise TooLarge(
            f"{p.name} holds {len(text):,} characters of text; a document can hold at most "
            f"{MAX_TEXT_CHARS:,}. Attach the part you need."
        )
    if not text.strip():
        raise EmptyDocument(f"{p.name} holds no text.")
    return ExtractedDocument(
        p.name, digest, mime, len(raw), text, tuple(sections), pages, notice=notice
    )


def decode_text(raw: bytes, name: str) -> str:
    """The text of ``raw`` (see ``read_text``)."""
    return read_text(raw, name)[0]


def read_text(raw: bytes, name: str) -> tuple[str, str]:
    """Text in UTF-8 (with or without a BOM), UTF-16 with a BOM, or else Windows' legacy
    Western encoding, and a notice saying so when that encoding was assumed (""
    otherwise); binary data (NUL bytes, many control bytes) is refused as ``NotText``."""
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return _lines(raw.decode("utf-16")), ""
        except UnicodeDecodeError as exc:
            raise NotText(
                f"{name} starts like UTF-16 text but is not (at byte {exc.start:,})."
            ) from exc
    nul = raw.find(b"\x00")
    if nul >= 0:
        raise NotText(
            f"{name} holds binary data (a NUL byte at offset {nul:,}), not text: it may be "
            "a program or an archive under a text name."
        )
    try:
        text, notice = raw.decode("utf-8-sig"), ""
    except UnicodeDecodeError as exc:
        # Windows' legacy text, the usual one; said, since it is a guess.
        text = raw.decode("cp1252", errors="replace")
        notice = (
            f"{name} is not UTF-8 (byte {exc.start + 1:,} is not valid UTF-8), so it was "
            "read as Windows-1252 (Western European); if letters look wrong, save it as "
            "UTF-8 and attach it again."
        )
    controls = len(_CONTROL.findall(text[:200_000]))
    if controls > max(8, len(text[:200_000]) // 200):
        raise NotText(
            f"{name} holds binary data ({controls:,} control bytes), not text: it may be a "
            "program or an archive under a text name."
        )
    return _lines(text), notice


def _lines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def text_sections(text: str, *, markdown: bool) -> list[Section]:
    """A Markdown document's sections by its headings (code fences skipped); plain text
    and source code are one section (their chunks are told apart by line numbers)."""
    if not markdown:
        return [Section(0, len(text))]
    sections: list[Section] = []
    path: list[tuple[int, str]] = []  # (level, title) of the headings above
    start, heading, offset, fenced = 0, "", 0, False
    for line in text.splitlines(keepends=True):
        if _FENCE.match(line):
            fenced = not fenced
        match = None if fenced else _HEADING.match(line.rstrip("\n"))
        if match:
            if offset > start:
                sections.append(Section(start, offset, None, heading))
            level = len(match.group(1))
            path = [(lv, t) for lv, t in path if lv < level] + [(level, match.group(2).strip())]
            heading = " > ".join(t for _, t in path)
            start = offset
        offset += len(line)
    sections.append(Section(start, len(text), None, heading))
    return sections

"""A Word (.docx) document's text with its headings as sections (python-docx)."""

from __future__ import annotations

import io
import zipfile

from vllmchat.core.attachments.errors import AttachmentError, PasswordProtected, Unreadable
from vllmchat.core.attachments.model import Section


def read_docx(raw: bytes, name: str) -> tuple[str, list[Section]]:
    """Paragraphs and tables in document order; a "Heading N" or "Title" paragraph
    starts a section."""
    import docx
    from docx.table import Table

    try:
        document = docx.Document(io.BytesIO(raw))
    except (zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise Unreadable(f"{name} is not a readable .docx file ({exc}).") from exc
    sections: list[Section] = []
    path: list[tuple[int, str]] = []
    text, start, heading = "", 0, ""
    for block in document.iter_inner_content():
        if isinstance(block, Table):
            rows = [" | ".join(c.text.strip() for c in row.cells) for row in block.rows]
            text += "\n".join(rows) + "\n\n"
            continue
        line = block.text.strip()
        level = _heading_level(block.style.name if block.style is not None else "")
        if level and line:
            if len(text) > start:
                sections.append(Section(start, len(text), None, heading))
            path = [(lv, t) for lv, t in path if lv < level] + [(level, line)]
            heading, start = " > ".join(t for _, t in path), len(text)
        if line:
            text += line + "\n\n"
    sections.append(Section(start, len(text), None, heading))
    return text, sections


def _heading_level(style: str | None) -> int:
    if not style:
        return 0
    if style == "Title":
        return 1
    if style.startswith("Heading "):
        number = style.removeprefix("Heading ").strip()
        return int(number) if number.isdigit() else 0
    return 0


def refuse_ole(name: str) -> AttachmentError:
    """A .docx that is an OLE container: encrypted with a password (or an old .doc)."""
    if name.lower().endswith(".doc"):
        return Unreadable(f"{name} is an old Word document: save it as .docx and attach that.")
    return PasswordProtected(
        f"{name} is protected by a password, so its text cannot be read. Save a copy "
        "without the password and attach that."
    )

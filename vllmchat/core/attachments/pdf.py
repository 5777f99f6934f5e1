"""A PDF's text layer, page by page, with its bookmarks as section headings (PDFium).

PDFium (through pypdfium2) is Chrome's PDF engine: it reads damaged files, every
encryption scheme and large documents quickly, and keeps the reading order of text
better than a pure-Python parser.
"""

from __future__ import annotations

import re
from typing import Any

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from vllmchat.core.attachments.errors import (
    EmptyDocument,
    PasswordProtected,
    ScannedPdf,
    Unreadable,
)
from vllmchat.core.attachments.model import Section

MIN_CHARS_PER_PAGE = 3  # fewer, on average, and the pages are pictures (a scan)
_WHY = {  # PDFium's load errors, in words (its "Success" and "Unknown error" say nothing)
    pdfium_c.FPDF_ERR_FILE: "the file could not be opened",
    pdfium_c.FPDF_ERR_FORMAT: "its structure is broken",
    pdfium_c.FPDF_ERR_PAGE: "a page is broken",
}
_PAGE_TREE = re.compile(rb"/Type\s*/Pages\b")
_PAGE_COUNT = re.compile(rb"/Count\s+[1-9]")


def read_pdf(raw: bytes, name: str) -> tuple[str, list[Section], int]:
    """The text, one section per page (headed by the bookmark it falls under), and the
    number of pages."""
    pdf = _open(raw, name)
    if len(pdf) == 0:
        pdf.close()
        raise _no_pages(name)
    try:
        headings = _bookmarks(pdf)
        pages: list[str] = []
        for index in range(len(pdf)):
            page = pdf[index]
            try:
                textpage = page.get_textpage()
                try:
                    pages.append(_clean(textpage.get_text_bounded()))
                finally:
                    textpage.close()
            finally:
                page.close()
    except pdfium.PdfiumError as exc:
        raise Unreadable(f"{name} is a damaged PDF: {exc}.") from exc
    finally:
        pdf.close()
    if sum(len(p.strip()) for p in pages) < MIN_CHARS_PER_PAGE * max(1, len(pages)):
        raise ScannedPdf(
            f"{name} has no text layer: its {len(pages)} page(s) are pictures, probably "
            "scanned, so there is no text to read. Attach the pages as images to a model "
            "with vision, or run the PDF through OCR first."
        )
    text, sections, at = "", [], 0
    for number, page_text in enumerate(pages, 1):
        body = page_text.strip("\n") + "\n\n"
        sections.append(Section(at, at + len(body), number, headings.get(number, "")))
        text += body
        at += len(body)
    return text, sections, len(pages)


def _open(raw: bytes, name: str) -> Any:
    try:
        return pdfium.PdfDocument(raw)
    except pdfium.PdfiumError as exc:
        # PDFium's last error outlives its call (a failure that sets none reports the one
        # before it), so a password is believed only of a file that says it is encrypted.
        encrypted = b"/Encrypt" in raw
        if encrypted and exc.err_code in (pdfium_c.FPDF_ERR_PASSWORD, pdfium_c.FPDF_ERR_SECURITY):
            raise PasswordProtected(
                f"{name} is protected by a password, so its text cannot be read. Save a "
                "copy without the password (print it to PDF) and attach that."
            ) from exc
        if _PAGE_TREE.search(raw) and not _PAGE_COUNT.search(raw):
            raise _no_pages(name) from exc
        why = _WHY.get(exc.err_code)
        raise Unreadable(
            f"{name} is not a readable PDF: it is damaged, or not a PDF at all"
            + (f" ({why})." if why else ".")
        ) from exc


def _no_pages(name: str) -> EmptyDocument:
    return EmptyDocument(f"{name} is a PDF with no pages: there is nothing in it to read.")


def _bookmarks(pdf: Any) -> dict[int, str]:
    """The heading path each page falls under, from the PDF's table of contents."""
    starts: list[tuple[int, int, str]] = []  # (page, level, title)
    for mark in pdf.get_toc():
        dest = mark.get_dest()
        index = dest.get_index() if dest is not None else None
        if index is not None:
            starts.append((index + 1, mark.level, " ".join(mark.get_title().split())))
    headings: dict[int, str] = {}
    path: list[tuple[int, str]] = []
    marks = sorted(starts, key=lambda s: s[0])
    for number in range(1, len(pdf) + 1):
        while marks and marks[0][0] <= number:
            _, level, title = marks.pop(0)
            path = [(lv, t) for lv, t in path if lv < level] + [(level, title)]
        headings[number] = " > ".join(t for _, t in path)
    return headings


def _clean(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")

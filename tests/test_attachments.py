"""Documents read from real files made here (text, Markdown, code, PDF, .docx), the bad
ones refused with a clear reason, chunks by page and heading, FTS5 retrieval."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from vllmchat.bench.synthetic.pdf_writer import write_pdf
from vllmchat.core.attachments import errors, index
from vllmchat.core.attachments.chunking import chunk_document
from vllmchat.core.attachments.extract import extract
from vllmchat.core.attachments.prompt import (
    document_block,
    fit_document,
    passages_for,
    with_passages,
)


def test_text_markdown_and_code_keep_their_sections_and_hash(tmp_path: Path) -> None:
    note = tmp_path / "notes.txt"
    note.write_bytes("Grüße aus Köln.\r\nZweite Zeile.\r\n".encode())
    doc = extract(note)
    assert doc.text == "Grüße aus Köln.\nZweite Zeile.\n"
    assert doc.mime == "text/plain" and doc.size == note.stat().st_size
    import hashlib

    assert doc.sha256 == hashlib.sha256(note.read_bytes()).hexdigest()

    md = tmp_path / "guide.md"
    md.write_text(
        "# Guide\nIntro.\n\n## Install\nRun it.\n\n```sh\n# a comment\n```\n"
        "### Linux\nUse apt.\n## Use\nAsk.\n"
    )
    doc = extract(md)
    headings = [s.heading for s in doc.sections]
    assert headings == ["Guide", "Guide > Install", "Guide > Install > Linux", "Guide > Use"]
    linux = doc.sections[2]
    assert doc.text[linux.start : linux.end] == "### Linux\nUse apt.\n"

    code = tmp_path / "tool.py"
    code.write_text("def main():\n    return 1\n" * 300)
    chunks = chunk_document(extract(code), target_tokens=100)
    assert len(chunks) > 5
    assert chunks[0].label == "lines 1–" + str(chunks[0].lines[1])
    assert all(c.lines[0] <= c.lines[1] for c in chunks)


def test_legacy_and_utf16_text_are_read(tmp_path: Path) -> None:
    cp = tmp_path / "old.txt"
    cp.write_bytes("Caf\xe9 cr\xe8me".encode("cp1252"))
    legacy = extract(cp)
    assert legacy.text == "Café crème"
    assert legacy.notice == (
        "old.txt is not UTF-8 (byte 4 is not valid UTF-8), so it was read as Windows-1252 "
        "(Western European); if letters look wrong, save it as UTF-8 and attach it again."
    )
    wide = tmp_path / "wide.txt"
    wide.write_bytes("\ufeffHello wide".encode("utf-16-le"))
    assert extract(wide).text == "Hello wide" and extract(wide).notice == ""
    plain = tmp_path / "plain.txt"
    plain.write_bytes("Café crème".encode())
    assert extract(plain).notice == "", "nothing is said of a file read as it is written"


def test_the_encoding_assumed_is_said_where_the_user_reads_of_the_attachment() -> None:
    said = "old.txt is not UTF-8 (byte 4 is not valid UTF-8), so it was read as Windows-1252."
    fit = fit_document(
        "old.txt", 100, prompt_tokens=0, budget=7680, n_ctx=8192, chunk_tokens=300, notice=said
    )
    assert fit.message.startswith("old.txt (100 tokens") and fit.message.endswith(said)
    fit = fit_document("new.txt", 100, prompt_tokens=0, budget=7680, n_ctx=8192, chunk_tokens=300)
    assert "UTF-8" not in fit.message


def test_a_file_named_pdf_that_is_not_one_and_a_pdf_without_pages(tmp_path: Path) -> None:
    import pypdfium2 as pdfium

    noise = _write(tmp_path / "x.pdf", random.Random(7).randbytes(4096))
    with pytest.raises(errors.AttachmentError) as caught:
        extract(noise)
    assert caught.value.reason == "unreadable"
    assert caught.value.message == (
        "x.pdf is not a readable PDF: it is damaged, or not a PDF at all (it does not start "
        "as a PDF does)."
    )
    empty = pdfium.PdfDocument.new()
    empty.save(str(tmp_path / "empty.pdf"))
    empty.close()
    with pytest.raises(errors.AttachmentError) as caught:
        extract(tmp_path / "empty.pdf")
    assert caught.value.reason == "empty"
    assert caught.value.message == (
        "empty.pdf is a PDF with no pages: there is nothing in it to read."
    )
    assert "PDFium" not in caught.value.message
    broken = _write(tmp_path / "broken.pdf", b"%PDF-1.4\n1 0 obj <</Type/Catalog>> endobj\n")
    with pytest.raises(errors.AttachmentError, match="damaged, or not a PDF at all"):
        extract(broken)
    text = _write(tmp_path / "notes.docx", b"Just some text, not a Word file.\n")
    with pytest.raises(errors.AttachmentError, match="not a readable Word document"):
        extract(text)


def test_pdf_pages_and_bookmarks(tmp_path: Path) -> None:
    path = write_pdf(
        tmp_path / "report.pdf",
        ["Summary of the year.", "Bees made honey.", "Costs rose (a little)."],
        bookmarks=[("Overview", 1), ("Results", 2)],
    )
    doc = extract(path)
    assert doc.pages == 3 and doc.mime == "application/pdf"
    assert [(s.page, s.heading) for s in doc.sections] == [
        (1, "Overview"),
        (2, "Results"),
        (3, "Results"),
    ]
    third = doc.sections[2]
    assert doc.text[third.start : third.end].strip() == "Costs rose (a little)."
    chunks = chunk_document(doc)
    assert [c.label for c in chunks] == ["p. 1 · Overview", "p. 2 · Results", "p. 3 · Results"]


def test_a_pdf_renamed_txt_is_read_as_a_pdf(tmp_path: Path) -> None:
    path = write_pdf(tmp_path / "x.pdf", ["Inside a PDF."])
    renamed = path.rename(tmp_path / "x.txt")
    assert extract(renamed).text.strip() == "Inside a PDF."


def test_docx_headings_and_tables(tmp_path: Path) -> None:
    import docx

    d = docx.Document()
    d.add_heading("Handbook", 0)
    d.add_heading("Travel", 1)
    d.add_paragraph("Book trains a week ahead.")
    table = d.add_table(rows=1, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "Zurich", "CHF 120"
    d.add_heading("Meals", 1)
    d.add_paragraph("Receipts are kept.")
    d.save(tmp_path / "hb.docx")
    doc = extract(tmp_path / "hb.docx")
    assert "Zurich | CHF 120" in doc.text
    assert [s.heading for s in doc.sections] == ["Handbook", "Travel", "Meals"]
    meals = doc.sections[2]
    assert "Receipts are kept." in doc.text[meals.start : meals.end]


@pytest.mark.parametrize(
    ("make", "reason", "words"),
    [
        (
            lambda p: write_pdf(p / "scan.pdf", ["", ""], scanned=True),
            "scanned_pdf",
            "images to a model with vision",
        ),
        (
            lambda p: write_pdf(p / "locked.pdf", ["Secret."], password="pw"),
            "password",
            "password",
        ),
        (
            lambda p: _write(p / "prog.txt", b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 8),
            "not_text",
            "binary data",
        ),
        (
            lambda p: _write(p / "ctl.txt", bytes([1, 2, 3, 4, 5, 6, 14, 15, 16]) * 100),
            "not_text",
            "control bytes",
        ),
        (
            lambda p: _write(p / "pic.png", b"\x89PNG\r\n\x1a\n" + bytes(64)),
            "image_needs_vision",
            "vision",
        ),
        (lambda p: _write(p / "blank.md", b"  \n\n "), "empty", "no text"),
        (
            lambda p: _write(p / "bad.pdf", b"%PDF-1.4\nnot really\n"),
            "unreadable",
            "not a readable PDF",
        ),
        (
            lambda p: _write(p / "enc.docx", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(600)),
            "password",
            "password",
        ),
        (lambda p: p / "gone.txt", "missing", "no file"),
    ],
)
def test_bad_files_are_refused_with_a_reason(tmp_path: Path, make, reason, words) -> None:
    path = make(tmp_path)
    with pytest.raises(errors.AttachmentError) as caught:
        extract(path)
    assert words in caught.value.message
    assert caught.value.reason == reason


def test_a_200_mb_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    big = tmp_path / "huge.txt"
    with big.open("wb") as f:
        f.truncate(200 << 20)  # sparse: no disk used
    too_large = "200 MB; a document can be at most 64 MB"
    with pytest.raises(errors.AttachmentError, match=too_large) as caught:
        extract(big)
    assert caught.value.reason == "too_large"


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_chunks_stay_inside_pages_and_hold_a_few_hundred_tokens(tmp_path: Path) -> None:
    pages = [
        " ".join(f"Sentence {p}.{i} about topic {i % 7}." for i in range(150)) for p in range(3)
    ]
    doc = extract(write_pdf(tmp_path / "long.pdf", pages))
    chunks = chunk_document(doc, target_tokens=300)
    assert {c.page for c in chunks} == {1, 2, 3}
    for c in chunks:
        section = doc.sections[c.page - 1]  # type: ignore[operator]
        assert section.start <= c.start < c.end <= section.end
        assert doc.text[c.start : c.end] == c.text
        assert len(c.text) <= 300 * 4 + 10
    assert sum(len(c.text) for c in chunks) > 0.95 * len(doc.text.replace("\n", ""))


def test_fts_retrieval_finds_the_passage_and_records_its_use(tmp_path: Path) -> None:
    body = [f"Filler paragraph {i} about weather, markets and gardens." for i in range(400)]
    body[250] = "The lighthouse keeper on Varrow Island painted the front door teal."
    md = tmp_path / "book.md"
    md.write_text("# Book\n\n" + "\n\n".join(body))
    doc = extract(md)
    chunks = chunk_document(doc, target_tokens=120)
    db = sqlite3.connect(":memory:")
    db.executescript(index.SCHEMA)
    aid = index.insert_document(db, 1, doc, tokens=5000, mode="retrieval", chunks=chunks)
    hits = index.search(db, [aid], "What colour did they paint the lighthouse door?", 3)
    assert "Varrow" in hits[0].text and hits[0].name == "book.md"
    assert index.search(db, [aid + 1], "lighthouse", 3) == []
    index.record_used(db, 77, hits)
    assert [h.chunk_id for h in index.used_by(db, 77)] == [h.chunk_id for h in hits]
    prompt = with_passages("What colour was the door?", hits)
    assert prompt.index("Varrow") < prompt.index("What colour was the door?")
    db.execute("DELETE FROM attachments WHERE id=?", (aid,))  # cascades need foreign keys on
    db.execute("DELETE FROM chunks WHERE attachment_id=?", (aid,))
    assert index.search(db, [aid], "lighthouse", 3) == []


def test_fit_whole_retrieval_or_no_room() -> None:
    whole = fit_document("a.pdf", 5900, prompt_tokens=40, budget=7680, n_ctx=8192, chunk_tokens=300)
    assert whole.mode == "whole" and "72%" in whole.message
    big = fit_document("b.pdf", 40000, prompt_tokens=40, budget=7680, n_ctx=8192, chunk_tokens=300)
    assert big.mode == "retrieval"
    with pytest.raises(errors.AttachmentError, match=r"n_ctx 2,048 or more") as caught:
        fit_document("c.pdf", 9000, prompt_tokens=0, budget=256, n_ctx=512, chunk_tokens=300)
    assert caught.value.reason == "no_room"
    assert passages_for(7000, 300) == 6 and passages_for(400, 300) == 1


def test_a_whole_document_marks_its_pages(tmp_path: Path) -> None:
    from vllmchat.core.attachments.model import Attachment

    doc = extract(write_pdf(tmp_path / "p.pdf", ["One.", "Two."]))
    att = Attachment(
        1,
        1,
        None,
        "document",
        doc.name,
        doc.sha256,
        doc.mime,
        doc.size,
        doc.text,
        doc.sections,
        doc.pages,
    )
    block = document_block(att)
    assert block.startswith('<document name="p.pdf" pages="2">\n[page 1]\nOne.')
    assert "[page 2]\nTwo." in block and block.endswith("</document>")

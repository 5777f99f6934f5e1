"""The app's icon in each OS's format, drawn from ``resources/icons/vllmchat.svg``.

    python packaging/icons.py OUT_DIR     # writes vllmchat.ico, vllmchat.icns, vllmchat-256.png

Qt's SVG renderer draws the PNG sizes; the ``.ico`` (Windows: 16 to 256 pixels) and the
``.icns`` (macOS: 16 to 1024) hold those PNGs as they are, which both formats allow
(Windows Vista on, macOS 10.7 on), so no image library beyond Qt is needed.
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SVG = ROOT / "resources" / "icons" / "vllmchat.svg"
ICO_SIZES = (16, 24, 32, 48, 64, 128, 256)
# icns chunk types holding PNG data, by pixel size (Apple's "icns" types; the @2x
# variants repeat a size under another type).
ICNS_TYPES = (
    ("icp4", 16), ("icp5", 32), ("icp6", 64), ("ic07", 128), ("ic08", 256), ("ic09", 512),
    ("ic10", 1024), ("ic11", 32), ("ic12", 64), ("ic13", 256), ("ic14", 512),
)  # fmt: skip
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def render_pngs(sizes: set[int], svg: Path = SVG) -> dict[int, bytes]:
    """The SVG drawn at each size, as PNG bytes (transparent background)."""
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice
    from PySide6.QtGui import QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        raise ValueError(f"{svg} is not an SVG Qt can draw")
    pngs = {}
    for size in sorted(sizes):
        image = QImage(size, size, QImage.Format.Format_ARGB32)
        image.fill(0)
        painter = QPainter(image)
        renderer.render(painter)
        painter.end()
        data = QByteArray()
        buffer = QBuffer(data)
        buffer.open(QIODevice.OpenModeFlag.WriteOnly)
        image.save(buffer, "PNG")
        pngs[size] = bytes(data.data())
    return pngs


def ico_bytes(pngs: dict[int, bytes]) -> bytes:
    """A Windows .ico of PNG images: ICONDIR, one ICONDIRENTRY each, then the PNGs."""
    sizes = sorted(pngs)
    header = struct.pack("<HHH", 0, 1, len(sizes))
    offset = len(header) + 16 * len(sizes)
    entries, blobs = b"", b""
    for size in sizes:
        png = pngs[size]
        side = 0 if size >= 256 else size  # 0 means 256
        entries += struct.pack("<BBBBHHII", side, side, 0, 0, 1, 32, len(png), offset)
        blobs += png
        offset += len(png)
    return header + entries + blobs


def icns_bytes(pngs: dict[int, bytes]) -> bytes:
    """A macOS .icns of PNG chunks: "icns", the file's length, then type, length, data."""
    chunks = b"".join(
        kind.encode() + struct.pack(">I", 8 + len(pngs[size])) + pngs[size]
        for kind, size in ICNS_TYPES
        if size in pngs
    )
    return b"icns" + struct.pack(">I", 8 + len(chunks)) + chunks


def write_icons(out: Path) -> dict[str, Path]:
    """Write vllmchat.ico, vllmchat.icns and a 256-pixel PNG into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    pngs = render_pngs(set(ICO_SIZES) | {size for _, size in ICNS_TYPES})
    written = {
        "ico": out / "vllmchat.ico",
        "icns": out / "vllmchat.icns",
        "png": out / "vllmchat-256.png",
    }
    written["ico"].write_bytes(ico_bytes({s: pngs[s] for s in ICO_SIZES}))
    written["icns"].write_bytes(icns_bytes(pngs))
    written["png"].write_bytes(pngs[256])
    return written


if __name__ == "__main__":
    for path in write_icons(Path(sys.argv[1] if len(sys.argv) > 1 else "build/icons")).values():
        print(path)

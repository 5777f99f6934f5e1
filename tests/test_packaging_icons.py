"""The bundle's icons: a Windows .ico and a macOS .icns drawn from the app's SVG, read
back by Qt's own .ico and .icns readers."""

from __future__ import annotations

import importlib.util
import struct
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _icons_module():
    spec = importlib.util.spec_from_file_location("icons", ROOT / "packaging" / "icons.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sizes(path: Path) -> list[int]:
    from PySide6.QtGui import QImageReader

    reader = QImageReader(str(path))
    sizes = []
    for i in range(reader.imageCount()):
        reader.jumpToImage(i)
        image = reader.read()
        assert not image.isNull() and image.width() == image.height()
        sizes.append(image.width())
    return sizes


def test_ico_and_icns_hold_every_size_and_read_back(qapp, tmp_path):
    icons = _icons_module()
    written = icons.write_icons(tmp_path)
    ico = written["ico"].read_bytes()
    assert struct.unpack("<HHH", ico[:6]) == (0, 1, len(icons.ICO_SIZES))
    assert _sizes(written["ico"]) == list(icons.ICO_SIZES)
    icns = written["icns"].read_bytes()
    assert icns[:4] == b"icns" and struct.unpack(">I", icns[4:8])[0] == len(icns)
    assert sorted(set(_sizes(written["icns"]))) == [16, 32, 64, 128, 256, 512, 1024]
    assert written["png"].read_bytes().startswith(icons.PNG_MAGIC)

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


def test_the_window_s_icons_are_bundled_light_and_dark_and_qt_reads_them(qapp):
    import re

    from PySide6.QtGui import QImageReader

    from vllmchat.ui.common.icons import ICON_NAMES

    used = {
        name
        for path in (ROOT / "vllmchat" / "ui").rglob("*.py")
        for name in re.findall(
            r"\b(?:icon|pixmap|inline_html)\(\s*\"(\w+)\"", path.read_text(encoding="utf-8")
        )
    }
    assert used and used <= set(ICON_NAMES), used - set(ICON_NAMES)
    for name in ICON_NAMES:
        for path in (
            ROOT / "resources" / "icons" / f"{name}.svg",
            ROOT / "resources" / "icons" / "dark" / f"{name}.svg",
        ):
            image = QImageReader(str(path)).read()
            assert not image.isNull() and image.width() == 16, path
    # the bundle takes resources/ whole, the dark folder with it
    spec = (ROOT / "packaging" / "vllmchat.spec").read_text(encoding="utf-8")
    assert 'datas = [(str(ROOT / "resources"), "resources")]' in spec

"""Start vllmchat in a real window under Xvfb and save screenshots to a folder.

    .venv/bin/python scripts/screenshots.py [OUTDIR]     (default: screenshots/)

Shots: the main window mid-stream, the model picker (hub tab on the loopback
mirror of the tests), the offload panel after a reload, the About/diagnostics
dialog, and the engine banner.
Needs Xvfb (apt-get install xvfb) when there is no display.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _display() -> subprocess.Popen | None:
    if os.environ.get("DISPLAY"):
        return None
    if not shutil.which("Xvfb"):
        sys.exit("No display and no Xvfb: apt-get install xvfb")
    proc = subprocess.Popen(
        ["Xvfb", ":97", "-screen", "0", "1440x900x24", "-nolisten", "tcp"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.environ["DISPLAY"] = ":97"
    time.sleep(1.0)
    return proc


def main(out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    xvfb = _display()
    home = Path(tempfile.mkdtemp(prefix="vllmchat-shots-"))
    for name in ("DATA", "CONFIG", "MODELS", "KV"):
        os.environ[f"VLLMCHAT_{name}_DIR"] = str(home / name.lower())
    os.environ["QT_QPA_PLATFORM"] = "xcb"
    from tests.hf_mirror import Mirror

    mirror = Mirror().start()
    os.environ["HF_ENDPOINT"] = mirror.url
    try:
        return _shoot(out, mirror)
    finally:
        mirror.close()
        if xvfb is not None:
            xvfb.terminate()


def _wait(app: object, predicate: object, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        app.processEvents()
        if predicate():
            return True
        time.sleep(0.02)
    return False


def _shoot(out: Path, mirror: object) -> int:
    from PySide6.QtWidgets import QApplication

    from vllmchat.core.app_settings import AppSettings
    from vllmchat.core.conversations.store.store import default_store
    from vllmchat.core.conversations.turns.kv_cache import KVStateCache
    from vllmchat.core.demo_model import demo_model_path
    from vllmchat.core.paths import kv_cache_dir
    from vllmchat.ui.models.model_picker import ModelPicker
    from vllmchat.ui.window.main_window import MainWindow

    app = QApplication(sys.argv[:1])
    demo = demo_model_path()
    repo = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"
    mirror.add(repo, {"SmolLM2-135M-Instruct.Q4_1.gguf": demo}, downloads=900)
    store = default_store()
    window = MainWindow(
        store,
        AppSettings.of(model_path=str(demo), n_ctx=2048, max_tokens=200),
        KVStateCache(kv_cache_dir()),
        save_settings=False,
    )
    window.show()
    window.start()
    _wait(app, lambda: window.info is not None and window.desc is not None)
    window.send(
        "Write a short poem about the sea, then a Python function that adds two numbers:"
        " use a ```python code block."
    )
    tokens = []
    window.bridge.events.token_received.connect(tokens.append)
    _wait(app, lambda: len(tokens) > 40)
    window.grab().save(str(out / "main-window-streaming.png"))
    _wait(app, lambda: not window.input.generating, 120)
    window.send("Thanks! And one more line about the moon.")
    _wait(app, lambda: window.input.generating, 10)
    _wait(app, lambda: not window.input.generating, 120)
    _wait(app, lambda: False, 0.5)
    window.grab().save(str(out / "main-window-done.png"))
    window.offload.grab().save(str(out / "offload-panel.png"))
    side = window.offload.parentWidget()
    side.grab().save(str(out / "offload-and-memory-panels.png"))
    picker = ModelPicker(window.hw, window._fit(), parent=window)
    picker.show()
    picker.tabs.setCurrentIndex(1)
    picker.query.setText("smollm2")
    picker.search()
    _wait(app, lambda: picker.repos.count() > 0 and "SmolLM2" in picker.repos.item(0).text())
    picker.repos.setCurrentRow(0)
    _wait(app, lambda: picker.quant_table.rowCount() > 0)
    picker.grab().save(str(out / "model-picker-hub.png"))
    picker.tabs.setCurrentIndex(0)
    _wait(app, lambda: picker.installed.rowCount() > 0, 10)
    picker.grab().save(str(out / "model-picker-installed.png"))
    picker.reject()
    from vllmchat.ui.dialogs.diagnostics_dialog import DiagnosticsDialog

    about = DiagnosticsDialog(window)
    about.show()
    about.start()
    _wait(app, lambda: about.report is not None, 60)
    about.grab().save(str(out / "about-diagnostics.png"))
    about.accept()
    window.bridge.client.kill()
    _wait(app, lambda: window.banner.isVisible(), 10)
    window.grab().save(str(out / "engine-died-banner.png"))
    window.close()
    store.close()
    print("\n".join(str(p) for p in sorted(out.glob("*.png"))))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "screenshots")))

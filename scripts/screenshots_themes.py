"""Screenshots of the real window under a display (run under Xvfb): light and dark,
mid-stream, a long conversation scrolled to its middle, a code answer.

usage: xvfb-run -s "-screen 0 1400x900x24" .venv/bin/python scripts/screenshots_themes.py OUT_DIR
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication

from vllmchat.core.app_settings import AppSettings
from vllmchat.core.conversations.store.store import ConversationStore
from vllmchat.core.conversations.turns.kv_cache import KVStateCache
from vllmchat.core.demo_model import demo_model_path
from vllmchat.ui.window.main_window import MainWindow

CODE_ANSWER = (
    "Here is a function that reverses the words of a sentence:\n\n"
    "```python\ndef reverse_words(text: str) -> str:\n"
    '    """Words in reverse order."""\n    return " ".join(reversed(text.split()))\n```\n\n'
    'Call `reverse_words("hello big world")` to get `world big hello`.\n\n'
    "| input | output |\n|---|---|\n| `a b` | `b a` |\n| `one` | `one` |\n"
)


def dark_palette() -> QPalette:
    p = QPalette()
    for role, color in ((QPalette.ColorRole.Window, "#202124"),
                        (QPalette.ColorRole.WindowText, "#e8eaed"),
                        (QPalette.ColorRole.Base, "#171717"),
                        (QPalette.ColorRole.AlternateBase, "#2a2a2a"),
                        (QPalette.ColorRole.Text, "#e8eaed"),
                        (QPalette.ColorRole.Button, "#303134"),
                        (QPalette.ColorRole.ButtonText, "#e8eaed"),
                        (QPalette.ColorRole.Highlight, "#8ab4f8"),
                        (QPalette.ColorRole.HighlightedText, "#202124"),
                        (QPalette.ColorRole.PlaceholderText, "#9aa0a6")):  # fmt: skip
        p.setColor(role, QColor(color))
    return p


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    app = QApplication(sys.argv[:1])
    app.setStyle("Fusion")
    light = app.palette()
    tmp = Path(tempfile.mkdtemp())
    store = ConversationStore(tmp / "c.sqlite3")
    long = store.create(title="A long conversation")
    parent = None
    for i in range(400):
        role = "user" if i % 2 == 0 else "assistant"
        text = (
            f"Question {i // 2}: what about point {i // 2}?"
            if role == "user"
            else (
                f"Answer {i // 2}: a paragraph of explanation about point {i // 2}, long enough "
                "to wrap over a couple of lines in the window at its usual width."
            )
        )
        parent = store.add_message(long.id, role, text, parent_id=parent).id
    code = store.create(title="Reverse words in Python")
    q = store.add_message(code.id, "user", "How do I reverse the words of a sentence?").id
    store.add_message(code.id, "assistant", CODE_ANSWER, parent_id=q)
    settings = AppSettings.of(model_path=str(demo_model_path()), n_ctx=2048, max_tokens=200,
                              temperature=0.7, seed=3)  # fmt: skip
    w = MainWindow(store, settings, KVStateCache(tmp / "kv"), save_settings=False)
    w.resize(1360, 860)
    w.show()

    def spin(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            app.processEvents()
            time.sleep(0.01)

    def shot(name: str) -> None:
        spin(0.4)
        subprocess.run(["import", "-window", "root", str(out / f"{name}.png")], check=True)

    w.start()
    while w.loads_ended < 1:
        spin(0.1)
    for scheme, palette in (("light", light), ("dark", dark_palette())):
        app.setPalette(palette)
        w.open_conversation(code.id)
        shot(f"{scheme}-code-answer")
        w.open_conversation(long.id)
        spin(0.3)
        bar = w.chat.verticalScrollBar()
        for _ in range(3):  # scroll up through older pages to the middle
            bar.setValue(0)
            spin(0.5)
        bar.setValue(bar.maximum() // 2)
        shot(f"{scheme}-long-middle")
        fresh = w.new_conversation()
        w.open_conversation(fresh)
        w.send("Write a short story about a lighthouse keeper who finds a message in a bottle.")
        n = w.turns_ended
        t0 = time.monotonic()
        while time.monotonic() - t0 < 30 and len(w.chat.messages()[-1].text) < 250:
            spin(0.05)
        shot(f"{scheme}-mid-stream")
        while w.turns_ended == n:
            spin(0.1)
        spin(2.0)  # the title comes in the background
    w.close()
    store.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]))

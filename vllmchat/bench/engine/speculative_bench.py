"""``vllmchat bench speculative``: decode speed with speculation against without, in
one run, on edits of pasted code and documents and on prose questions.

Two engine processes load the same model with the same settings and get the
same requests in the same order (so their KV caches are built alike), in turn,
three times each (``--quick``: once), each going first in turn (with the plain
engine always first, auto measured 0.93-0.95 on prose on a 2-core machine where
one engine alternating the two modes measured 1.01); one decodes plainly, the
other speculates (``auto``, the default). Figures:

- ``speedup_code_edit``: median over the edit prompts of effective decode tok/s
  with speculation ÷ without;
- ``speedup_chat``: the same over prose questions (auto mode must cost nothing);
- ``greedy_identical``: every reply the same token for token, at these settings,
  and ``greedy_identical_flash_attn`` with flash attention (both attention paths);
  ``exact_verify`` says whether this build and placement promise it (the set-up's
  batch-invariant kernels: on the CPU, or on CUDA with flash attention), and
  ``exact_verify_reason`` why not; ``--flash-attn`` runs every comparison with it;
- ``draft_self``: the model as its own draft (``always``): acceptance, identical
  output, and its cost per token against plain decoding;
- ``verify``: what one verify of k drafts costs in single steps here, and the
  speed-up that bounds at full acceptance (``bench/engine/verify_cost.py``).

On a GPU (``--n-gpu-layers``) with synthetic weights the text is noise and
acceptance means nothing: ``verify`` is the figure to read there.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vllmchat.bench.engine import verify_cost
from vllmchat.core.app.engines import open_local
from vllmchat.core.demo_model import demo_model_path
from vllmchat.core.engine.events import DoneEvent
from vllmchat.core.engine.local.client import EngineClient
from vllmchat.core.placement import Placement
from vllmchat.core.settings import LoadSettings, SamplingSettings, SpeculationMode

INVENTORY = """def load_inventory(path, sep):
    items = []
    with open(path) as handle:
        for number, line in enumerate(handle):
            if not line.strip() or line.startswith("#"):
                continue
            parts = line.strip().split(sep)
            if len(parts) != 4:
                print("line %d: expected 4 fields, got %d" % (number, len(parts)))
                continue
            name, count, price, shelf = parts
            items.append({"name": name, "count": int(count),
                          "price": float(price), "shelf": shelf})
    return items


def total_value(items):
    total = 0.0
    for item in items:
        total += item["count"] * item["price"]
    return total


def low_stock(items, limit):
    found = []
    for item in items:
        if item["count"] < limit:
            found.append(item["name"])
    return found


def by_shelf(items):
    shelves = {}
    for item in items:
        shelves.setdefault(item["shelf"], []).append(item["name"])
    return shelves


def report(items, limit):
    print("items: %d" % len(items))
    print("total value: %.2f" % total_value(items))
    for name in low_stock(items, limit):
        print("low stock: %s" % name)
    for shelf, names in sorted(by_shelf(items).items()):
        print("shelf %s: %s" % (shelf, ", ".join(names)))
"""
NOTES = """# Release checklist

1. Update the version number in pyproject.toml.
2. Run the whole test suite on a clean checkout.
3. Build the wheel and the source distribution.
4. Install the wheel in a fresh virtual environment.
5. Start the app and open a saved conversation.
6. Check that the model list shows installed models.
7. Load the demo model and send one message.
8. Check the memory panel against the system monitor.
9. Write the release notes: new features first, then fixes.
10. Tag the release and push the tag.
11. Upload the wheel and the source distribution.
12. Announce the release on the project page.
"""
EDITS = [
    f"Rewrite this Python code to use f-strings instead of % formatting. Give the whole "
    f"code.\n\n```python\n{INVENTORY}```",
    f"Rename the function `low_stock` to `items_below` everywhere in this code. Give the "
    f"whole code.\n\n```python\n{INVENTORY}```",
    f"Add type hints to every function in this code. Give the whole code.\n\n"
    f"```python\n{INVENTORY}```",
    f"Fix the typo and keep everything else: step 6 should say 'model picker' instead of "
    f"'model list'. Give the whole checklist.\n\n{NOTES}",
]
PROSE = [
    "Why is the sky blue? Explain in a paragraph.",
    "Write a short story about a lighthouse keeper and a storm.",
    "What should I consider when adopting a dog?",
    "Describe how bread rises, for a curious child.",
]


@dataclass(frozen=True)
class LayersAndThreads:
    """Where the benchmark's models run: GPU layers and CPU threads."""

    n_gpu_layers: int = 0
    n_threads: int = 2


def _client(model: str, at: LayersAndThreads, *, flash_attn: bool, draft: str = "") -> EngineClient:
    client = open_local()
    client.load(
        LoadSettings(
            model_path=model,
            n_ctx=4096,
            placement=Placement(n_gpu_layers=at.n_gpu_layers),
            n_threads=at.n_threads,
            flash_attn=flash_attn,
            draft_model=draft,
            draft_n_gpu_layers=at.n_gpu_layers,
        )
    )
    return client


def _reply(client: EngineClient, prompt: str, mode: SpeculationMode, max_tokens: int) -> DoneEvent:
    sampling = SamplingSettings(temperature=0.0, max_tokens=max_tokens, speculation=mode)
    asked = [{"role": "user", "content": prompt}]
    events = list(client.chat(asked, sampling))
    done = [e for e in events if isinstance(e, DoneEvent)]
    if not done:
        raise RuntimeError(f"the reply ended without an answer: {events[-2:]}")
    return done[0]


def _compare(
    model: str,
    at: LayersAndThreads,
    prompts: list[str],
    *,
    flash_attn: bool = False,
    max_tokens: int,
    draft: str = "",
    repeats: int = 1,
) -> list[dict[str, Any]]:
    """Each prompt to both engines in turn, ``repeats`` times (speeds: the medians)."""
    plain = _client(model, at, flash_attn=flash_attn)
    fast = _client(model, at, flash_attn=flash_attn, draft=draft)
    mode: SpeculationMode = "always" if draft else "auto"
    rows = []
    try:
        for prompt in prompts:
            offs: list[DoneEvent] = []
            ons: list[DoneEvent] = []
            turns = [(plain, "off", offs), (fast, mode, ons)]
            for rep in range(repeats):  # interleaved, in turn first: drift and order hit both
                for client, asked, into in turns if rep % 2 == 0 else turns[::-1]:
                    into.append(_reply(client, prompt, asked, max_tokens))
            off, on = offs[0], ons[0]
            off_tok_s = statistics.median(r.stats.decode_tok_s for r in offs)
            on_tok_s = statistics.median(r.stats.decode_tok_s for r in ons)
            pairs = enumerate(zip(off.token_ids, on.token_ids, strict=False))
            diff = next((i for i, (a, b) in pairs if a != b), None)
            same = off.token_ids == on.token_ids  # the first pair: the same cold history
            rows.append(
                {
                    "tokens": len(on.token_ids),
                    "off_tok_s": round(off_tok_s, 1),
                    "on_tok_s": round(on_tok_s, 1),
                    "speedup": round(on_tok_s / max(off_tok_s, 1e-9), 3),
                    "drafted": sum(r.stats.drafted for r in ons),
                    "accepted": sum(r.stats.accepted for r in ons),
                    "identical": same,
                    "exact_verify": bool(fast.info and fast.info.exact_verify),
                    "exact_verify_reason": fast.info.exact_verify_reason if fast.info else "",
                    "first_difference": None if same else diff,
                }
            )
    finally:
        plain.close()
        fast.close()
    return rows


def _acceptance(rows: list[dict[str, Any]]) -> float:
    drafted = sum(r["drafted"] for r in rows)
    return round(sum(r["accepted"] for r in rows) / drafted, 3) if drafted else 0.0


def _model_figures(
    model: str, at: LayersAndThreads, quick: bool, flash_attn: bool
) -> dict[str, Any]:
    edits = EDITS[:2] if quick else EDITS
    prose = PROSE[:2] if quick else PROSE
    repeats = 1 if quick else 3
    code = _compare(model, at, edits, max_tokens=700, repeats=repeats, flash_attn=flash_attn)
    chat = _compare(model, at, prose, max_tokens=200, repeats=repeats, flash_attn=flash_attn)
    flash = (
        code[:2] if flash_attn else _compare(model, at, edits[:2], flash_attn=True, max_tokens=700)
    )
    self_draft = _compare(
        model, at, edits[:1] + prose[:1], max_tokens=120, draft=model, flash_attn=flash_attn
    )
    return {
        "speedup_code_edit": statistics.median(r["speedup"] for r in code),
        "speedup_chat": statistics.median(r["speedup"] for r in chat),
        "greedy_identical": all(r["identical"] for r in code + chat),
        "exact_verify": all(r["exact_verify"] for r in code),
        "exact_verify_reason": code[0]["exact_verify_reason"] if code else "",
        "greedy_identical_flash_attn": all(r["identical"] for r in flash),
        "speedup_code_edit_flash_attn": statistics.median(r["speedup"] for r in flash),
        "draft_self": {
            "acceptance": _acceptance(self_draft),
            "identical": all(r["identical"] for r in self_draft),
            "cost_per_token": round(
                statistics.median(r["off_tok_s"] / max(r["on_tok_s"], 1e-9) for r in self_draft),
                2,
            ),
            "rows": self_draft,
        },
        "verify": verify_cost.measure_apart(
            model, n_gpu_layers=at.n_gpu_layers, n_threads=at.n_threads, repeats=7 if quick else 15
        ),
        "code_edit": code,
        "chat": chat,
        "flash_attn": flash,
    }


def run(
    *,
    model: str | None = None,
    quick: bool = False,
    n_gpu_layers: int = 0,
    n_threads: int = 2,
    flash_attn: bool = False,
) -> dict[str, Any]:
    """The figures for ``model`` (default: the demo model) at this placement; with
    ``flash_attn`` every comparison uses flash attention (a GPU's exact path)."""
    path = model or str(demo_model_path())
    at = LayersAndThreads(n_gpu_layers, n_threads)
    return {
        "model": Path(path).name,
        "n_gpu_layers": n_gpu_layers,
        "n_threads": n_threads,
        "flash_attn_in_every_run": flash_attn,
        **_model_figures(path, at, quick, flash_attn),
    }

"""Speculative decoding on the real demo model: the same greedy output, the KV
cache as without it, a stop in mid-draft, auto mode resting on prose, the
terminal's options and the status line.

Exact identity holds at the default settings because the set-up builds
llama.cpp's kernels batch-invariant (``tests/test_batch_invariant.py``).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from vllmchat.core.engine.events import DoneEvent, StatsEvent
from vllmchat.core.engine.process.inference.speculative import Acceptance, NgramIndex, Speculator
from vllmchat.core.settings import LoadSettings, SamplingSettings

LIST = "apples, pears, plums, cherries, grapes, lemons, limes, melons, figs, dates"
ASK = f"Repeat this list exactly, then add one fruit: {LIST}."


def test_drafts_follow_the_latest_earlier_match():
    index = NgramIndex([1, 2, 3, 4, 5, 9, 1, 2, 3])
    assert index.draft(2) == [4, 5]
    index.append(4)
    assert index.draft(3) == [5, 9, 1]
    assert NgramIndex([7, 8, 9]).draft(4) == []


def test_auto_drafts_only_while_it_pays_and_probes_again():
    spec = Speculator(mode="auto")
    acceptance = Acceptance()
    assert spec.choose_k(acceptance, 1, 100) > 0, "a first probe"
    for step in range(2, 6):
        spec.after_verify(acceptance, 2, 0, 0.0, step)
    assert acceptance.rate < 0.4 and spec.choose_k(acceptance, 6, 100) == 0
    assert spec.choose_k(Acceptance(rate=0.95), 6, 100) >= 4, "high acceptance: long drafts"
    assert Speculator(mode="off").choose_k(Acceptance(rate=1.0), 1, 100) == 0
    rested = Acceptance(rate=0.9, rest_until=60)
    assert spec.choose_k(rested, 59, 100) == 0 and spec.choose_k(rested, 60, 100) > 0


def test_auto_keeps_drafting_through_a_stretch_that_copies_and_backs_off_on_prose():
    spec = Speculator(mode="auto")
    acceptance = Acceptance(rate=0.2)
    probe = spec.choose_k(acceptance, 1, 100)
    assert 0 < probe <= 4, "a probe while the running rate does not pay"
    spec.after_verify(acceptance, probe, probe, 0.0, 1)  # all accepted: a copy begins
    bound = {k: (k + 1) / spec.cost[k] for k in spec.cost}
    longest_paying = max(bound, key=lambda k: bound[k])
    assert spec.choose_k(acceptance, 2, 100) == longest_paying, "drafting as if it goes on"
    spec.after_verify(acceptance, 8, 0, 0.0, 2)  # the copy ended
    assert acceptance.rest_until == 2 + 48 and spec.choose_k(acceptance, 3, 100) == 0
    k = spec.choose_k(acceptance, 50, 100)
    spec.after_verify(acceptance, k, 0, 0.0, 50)  # the probe failed again: a longer rest
    assert acceptance.rest_until == 50 + 96
    for drafted in range(1, 9):  # a draft can come back shorter than the k asked for
        spec.after_verify(Acceptance(), drafted, drafted, 0.0, 1)


def test_a_verify_never_holds_more_tokens_than_the_exact_kernels_take():
    """On a GPU a verify of 8 drafts pays most at full acceptance; the cap holds it to 6."""
    assert Speculator(mode="always", gpu=True).choose_k(Acceptance(rate=1.0), 1, 100) == 8
    spec = Speculator(mode="always", gpu=True, max_batch=7)
    assert all(spec.choose_k(Acceptance(rate=r), 1, 100) <= 6 for r in (0.5, 0.9, 1.0))


def test_a_sliding_window_ring_keeps_greedy_output_past_its_wrap(make_client, gemma_model):
    """Gemma 3 keeps only the window for its sliding-window layers (a ring of 768
    cells here). Rejected drafts free cells; the set-up's KV cache patch keeps the
    slot search from restarting at cell 0, so cells keep following positions and
    attention sums the keys in the order single steps give."""
    from vllmchat.bench.engine.speculative_bench import EDITS, INVENTORY

    # About 600 tokens of prompt: the reply's last hundred tokens lie past the wrap.
    first_lines = INVENTORY[: len(INVENTORY) // 2]
    asked = [
        {
            "role": "user",
            "content": f"The first lines were:\n\n```python\n{first_lines}```\n\n{EDITS[2]}",
        }
    ]

    def reply(mode: str) -> DoneEvent:
        client = make_client()
        client.load(
            LoadSettings(
                model_path=str(gemma_model),
                n_ctx=2048,
                n_batch=64,
                n_ubatch=64,
                n_threads=2,
                flash_attn=True,
            )
        )
        assert client.info is not None and client.info.exact_verify
        sampling = SamplingSettings(temperature=0.0, max_tokens=280, speculation=mode)
        return next(e for e in client.chat(asked, sampling) if isinstance(e, DoneEvent))

    plain, fast = reply("off"), reply("always")
    assert plain.stats.kv_tokens > 768 + 80, "the ring wrapped"
    assert fast.stats.drafted > 100 and fast.stats.drafted > fast.stats.accepted
    assert fast.token_ids == plain.token_ids


@pytest.fixture
def exact_client(make_client, demo_model):
    def make(model=demo_model):
        client = make_client()
        client.load(LoadSettings(model_path=str(model), n_ctx=1024, n_threads=2))
        assert client.info is not None and client.info.exact_verify
        return client

    return make


def _turns(client, mode: str, questions: list[str]) -> list[DoneEvent]:
    sampling = SamplingSettings(temperature=0.0, max_tokens=48, speculation=mode)
    history: list[dict[str, str]] = []
    done = []
    for q in questions:
        history.append({"role": "user", "content": q})
        event = next(e for e in client.chat(history, sampling) if isinstance(e, DoneEvent))
        history.append({"role": "assistant", "content": event.text})
        done.append(event)
    return done


@pytest.mark.parametrize("which", ["demo_model", "gemma_model"])
def test_greedy_output_and_kv_reuse_are_the_same_with_speculation(exact_client, which, request):
    model = request.getfixturevalue(which)
    questions = [ASK, "Now repeat it again, exactly.", "And once more."]
    plain = _turns(exact_client(model), "off", questions)
    fast = _turns(exact_client(model), "always", questions)
    assert [d.token_ids for d in fast] == [d.token_ids for d in plain]
    assert sum(d.stats.drafted for d in fast) > 10 and sum(d.stats.accepted for d in fast) > 5
    for a, b in zip(plain, fast, strict=True):  # rejected drafts left no trace in the cache
        assert (a.stats.tokens_reused, a.stats.kv_tokens) == (
            b.stats.tokens_reused,
            b.stats.kv_tokens,
        )


def test_a_stop_in_mid_draft_keeps_the_cache_exact(exact_client):
    client = exact_client()
    sampling = SamplingSettings(temperature=0.0, max_tokens=64, speculation="always")
    asked = [{"role": "user", "content": ASK}]
    events = []
    for event in client.chat(asked, sampling):
        events.append(event)
        if sum(1 for e in events if hasattr(e, "token_id")) == 9:
            client.stop()
    done = next(e for e in events if isinstance(e, DoneEvent))
    assert done.stop_reason == "stopped"
    n = len(done.token_ids)
    again = [
        *asked,
        {"role": "assistant", "content": done.text},
        {"role": "user", "content": "Go on."},
    ]
    stats = next(e.stats for e in client.chat(again, sampling) if isinstance(e, StatsEvent))
    assert stats.tokens_reused >= stats.prompt_tokens - 12 - n // 2, "the partial reply was reused"
    assert stats.tokens_new < 20


def test_auto_mode_rests_on_prose(make_client, demo_model):
    client = make_client()
    client.load(LoadSettings(model_path=str(demo_model), n_ctx=1024, n_threads=2))
    sampling = SamplingSettings(temperature=0.0, max_tokens=120, speculation="auto")
    asked = [{"role": "user", "content": "Write a short story about a lighthouse keeper."}]
    done = next(e for e in client.chat(asked, sampling) if isinstance(e, DoneEvent))
    assert done.stats.decode_tokens > 60
    assert done.stats.drafted <= done.stats.decode_tokens // 4, done.stats


def test_a_live_reload_keeps_speculating(make_client, demo_model):
    client = make_client()
    settings = LoadSettings(model_path=str(demo_model), n_ctx=1024, n_threads=2)
    client.load(settings)
    sampling = SamplingSettings(temperature=0.0, max_tokens=40, speculation="always")
    asked = [{"role": "user", "content": ASK}]
    first = next(e for e in client.chat(asked, sampling) if isinstance(e, DoneEvent))
    result = client.reload(LoadSettings(model_path=str(demo_model), n_ctx=1024, n_threads=1))
    assert result.restored
    again = [
        *asked,
        {"role": "assistant", "content": first.text},
        {"role": "user", "content": "Repeat it again."},
    ]
    done = next(e for e in client.chat(again, sampling) if isinstance(e, DoneEvent))
    assert done.stats.drafted > 0 and done.stats.tokens_reused > first.stats.prompt_tokens


def test_the_terminal_options_and_stats_show_drafts():
    args = [
        "--n-ctx",
        "1024",
        "--temperature",
        "0",
        "--speculation",
        "always",
        "--draft-max",
        "4",
        "--max-tokens",
        "40",
        "--stats",
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "vllmchat", "chat", *args],
        input=ASK + "\n/quit\n",
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "drafted" in proc.stdout and "accepted" in proc.stdout, proc.stdout[-1000:]


def test_the_status_line_shows_drafted_and_accepted(qtbot):
    from vllmchat.core.engine.events import TurnStats
    from vllmchat.ui.window.readouts.status_line import StatusLine

    line = StatusLine()
    qtbot.addWidget(line)
    line.set_stats(TurnStats(decode_tokens=50, decode_s=1.0, drafted=30, accepted=24))
    assert "drafted 30, accepted 24" in line.speed.text()
    line.set_stats(TurnStats(decode_tokens=50, decode_s=1.0))
    assert "drafted" not in line.speed.text()


def test_the_status_line_marks_greedy_output_that_can_differ(qtbot):
    """The identity note, from the bridge's own signals: each load's ModelInfo and
    each change of the sampling settings."""
    from PySide6.QtCore import QObject, Signal

    from vllmchat.core.app.events import Loaded, SettingsChanged
    from vllmchat.core.app_settings import AppSettings
    from vllmchat.core.engine.info import ModelInfo
    from vllmchat.ui.window.readouts.status_line import StatusLine

    class BridgeSignals(QObject):
        """The two bridge signals the status line listens to."""

        load_finished = Signal(object)
        settings_changed = Signal(object)

    events = BridgeSignals()
    line = StatusLine(events)  # type: ignore[arg-type]
    qtbot.addWidget(line)
    line.show()
    reason = "on the GPU a verify is exact with flash attention only"
    info = ModelInfo(
        "m.gguf",
        "llama",
        30,
        8192,
        4096,
        49152,
        135_000_000,
        90_000_000,
        0,
        "chatml",
        "gguf",
        True,
        1.0,
        exact_verify=False,
        exact_verify_reason=reason,
    )
    greedy = AppSettings.of(model_path="m.gguf", temperature=0.0, speculation="auto")
    assert not line.identity.isVisible(), "nothing loaded"
    events.load_finished.emit(Loaded(info, greedy))
    assert line.identity.isVisible() and reason in line.identity.toolTip()
    assert "greedy replies can differ slightly" in line.identity.toolTip()
    for changes in ({"temperature": 0.7}, {"speculation": "off"}):
        events.settings_changed.emit(SettingsChanged(greedy.with_changes(**changes)))
        assert not line.identity.isVisible(), changes
    events.settings_changed.emit(SettingsChanged(greedy))
    assert line.identity.isVisible()
    exact = ModelInfo(**{**info.__dict__, "exact_verify": True, "exact_verify_reason": ""})
    events.load_finished.emit(Loaded(exact, greedy))
    assert not line.identity.isVisible() and line.identity.toolTip() == ""


def test_the_windows_identity_mark_follows_the_engines_answer(demo_window):
    from vllmchat.core.engine.exactness import identity_note

    w, _store, settings = demo_window
    info = w.status_line.info
    assert info is not None and info == w.info
    note = identity_note(
        info.exact_verify,
        info.exact_verify_reason,
        speculation=settings.sampler.speculation,
        temperature=0.0,
    )
    assert w.status_line.identity.isVisible() == bool(note)


def test_a_model_drafting_for_itself_is_accepted_and_changes_nothing(exact_client, demo_model):
    plain = _turns(exact_client(), "off", [ASK])[0]

    client = exact_client()
    client.load(
        LoadSettings(
            model_path=str(demo_model), n_ctx=1024, n_threads=2, draft_model=str(demo_model)
        )
    )
    done = _turns(client, "always", [ASK])[0]
    assert done.token_ids == plain.token_ids
    assert done.stats.drafted > 20 and done.stats.accepted >= 0.9 * done.stats.drafted


def test_a_draft_model_of_another_vocabulary_is_refused(make_client, demo_model, gemma_model):
    from vllmchat.core.engine.events import EngineError

    client = make_client()
    with pytest.raises(EngineError, match="vocabulary differs"):
        client.load(
            LoadSettings(model_path=str(demo_model), n_ctx=512, draft_model=str(gemma_model))
        )


def test_a_draft_model_that_is_no_gguf_is_refused_as_a_model_would_be(
    make_client, demo_model, tmp_path
):
    from vllmchat.core.engine.events import EngineError

    damaged = tmp_path / "draft.gguf"
    damaged.write_bytes(b"\x00" * 4096)
    for path, said in ((tmp_path, "Not a file"), (damaged, "not a GGUF model file")):
        client = make_client()
        with pytest.raises(EngineError, match=said):
            client.load(LoadSettings(model_path=str(demo_model), n_ctx=512, draft_model=str(path)))


def test_a_draft_model_that_does_not_fit_is_refused_with_figures(demo_model, monkeypatch):
    """The machine cannot be made short of RAM: the probe reports 64 MiB free."""
    from vllmchat.core.engine.events import EngineError
    from vllmchat.core.engine.process.inference import draft_model
    from vllmchat.core.models.hardware import HardwareInfo

    monkeypatch.setattr(draft_model, "probe", lambda: HardwareInfo(2**33, 64 * 2**20))
    with pytest.raises(EngineError, match=r"needs [\d,]+ MiB of RAM; 64 MiB are free"):
        draft_model.check_fits(LoadSettings(model_path=str(demo_model), n_ctx=1024))

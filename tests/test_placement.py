"""One placement value, one owner of the settings: the placement round-trips through the
settings, the estimate, the tuner and the panel; the slider marks what is past the
estimate's bound; the application layer announces changes, writes only confirmed
settings, asks before a past-bound placement and takes back one that ends the engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import crash_engine
from vllmchat.core.app.chat_app import ChatApp
from vllmchat.core.app.events import (
    Loaded,
    LoadFailed,
    LoadStarted,
    PlacementFellBack,
    PlacementNeedsConfirmation,
    SettingsChanged,
)
from vllmchat.core.app.placement.placing import PlacementEstimates
from vllmchat.core.app_settings import AppSettings, load_app_settings, save_app_settings
from vllmchat.core.conversations.store.store import ConversationStore
from vllmchat.core.conversations.turns.kv_cache import KVStateCache
from vllmchat.core.engine.events import DoneEvent, ErrorEvent, ErrorKind
from vllmchat.core.engine.local.client import EngineClient
from vllmchat.core.gguf_header import read_header
from vllmchat.core.models.advisor import check_fit, max_gpu_expert_layers, max_gpu_layers
from vllmchat.core.models.description import describe
from vllmchat.core.models.hardware import GpuInfo, HardwareInfo
from vllmchat.core.models.memory import FitSettings, estimate
from vllmchat.core.placement import Placement, all_layers, layers_on_gpu
from vllmchat.core.settings import LoadSettings
from vllmchat.core.tuning import plan
from vllmchat.core.tuning.results import TuneConfig

GIB = 1 << 30
LONG = (
    "I am planning a week of walking in the mountains in late spring and would like "
    "advice on what to pack, how to plan each day and what to do if the weather turns."
)


def _gpu(free: int) -> HardwareInfo:
    """A machine with one GPU of ``free`` bytes (plain data: no GPU here)."""
    return HardwareInfo(32 * GIB, 32 * GIB, [GpuInfo("Test GPU", free, free, "test")], True)


def estimated(panel, estimates: PlacementEstimates | None = None) -> PlacementEstimates:
    """``panel`` wired as the window wires it: each placement it shows is estimated once
    by the application layer's estimates, and the answer shown."""
    estimates = estimates or PlacementEstimates()

    def propose(placement: Placement) -> None:
        desc, hw, running = panel.desc, panel.hw, panel.fit_settings
        panel.show_proposal(estimates.propose_fit(desc, hw, running, placement))

    panel.placement_shown.connect(propose)
    return estimates


def _fits_up_to(desc, layers: int, fit: FitSettings) -> HardwareInfo:
    """A GPU on which ``layers`` GPU layers just fit and one more does not."""
    need = estimate(desc, fit.with_placement(Placement(n_gpu_layers=layers))).vram
    more = estimate(desc, fit.with_placement(Placement(n_gpu_layers=layers + 1))).vram
    return _gpu(int((need + (more - need) / 2) / 0.92))


@pytest.fixture(scope="module")
def moe(tmp_path_factory: pytest.TempPathFactory):
    from vllmchat.bench.synthetic.synth_moe import write_moe_gguf

    path = write_moe_gguf(tmp_path_factory.mktemp("moe") / "small-moe.gguf", "small-moe")
    return describe(read_header(path))


def test_one_placement_round_trips_through_settings_estimate_tuner_and_panel(qtbot, moe):
    from vllmchat.ui.offload.offload_panel import OffloadPanel

    n = moe.n_layer
    p = Placement(n_gpu_layers=all_layers(n), n_cpu_moe=3, tensor_split="1,0")
    load = LoadSettings(model_path="m.gguf", n_ctx=2048).with_placement(p)
    assert load.placement == p and AppSettings().with_placement(p).load.placement == p
    fit = FitSettings.of(load)
    assert fit.placement == p
    assert estimate(moe, fit).cpu_moe_layers == 3  # the estimate places what it is given
    config = TuneConfig(p, 2, 2, 512)
    assert config.apply_to(load).placement == p
    assert TuneConfig.of(config.apply_to(load)) == config  # and back, whole
    fitted = check_fit(moe, _gpu(64 * GIB), fit)
    assert fitted.placement == p  # the fit carries the placement it was estimated at
    axis = plan.Axis(True, n)
    assert axis.value(config) == p.expert_layers_on_gpu(n) == n - 3
    assert axis.at(config, n - 3) == config  # the tuner's axis, the same conversion
    assert p.with_expert_layers_on_gpu(p.expert_layers_on_gpu(n), n) == p
    with pytest.raises(ValueError):
        Placement(n_cpu_moe=-1)
    panel = OffloadPanel()
    qtbot.addWidget(panel)
    panel.set_model(moe, _gpu(64 * GIB), fit)
    assert panel.placement() == p  # the sliders show it, and give it back unchanged
    assert panel.expert_slider.value() == n - 3 and panel.slider.value() == n + 1


def test_the_slider_marks_placements_past_the_estimates_bound(qtbot, demo_model, moe):
    from vllmchat.ui.offload.offload_panel import OffloadPanel

    desc = describe(read_header(demo_model))
    fit = FitSettings(n_ctx=2048)
    hw = _fits_up_to(desc, 10, fit)
    assert max_gpu_layers(desc, hw, fit) == 10
    panel = OffloadPanel()
    qtbot.addWidget(panel)
    panel.show()
    estimates = estimated(panel)
    panel.set_model(desc, hw, fit)
    assert panel.tick_marks.bound == 11  # red from the first placement that does not fit
    assert estimates.propose_fit(desc, hw, fit, Placement(n_gpu_layers=10)).past_bound == ""
    past = estimates.propose_fit(desc, hw, fit, Placement(n_gpu_layers=11)).past_bound
    assert "Does not fit" in past
    panel.slider.setValue(11)
    assert "Does not fit" in panel.estimate.text()
    assert panel.past_bound(Placement(n_gpu_layers=11)) == past  # as the estimate shown says
    panel.set_model(desc, _gpu(64 * GIB), fit)
    assert panel.tick_marks.bound is None  # everything fits: nothing marked
    # A mixture of experts, every layer on the GPU: the expert slider's bound.
    n = moe.n_layer
    full = fit.with_placement(Placement(n_gpu_layers=all_layers(n), n_cpu_moe=n))
    need = estimate(moe, full.placed(n_cpu_moe=n - 3)).vram
    more = estimate(moe, full.placed(n_cpu_moe=n - 4)).vram
    hw = _gpu(int((need + (more - need) / 2) / 0.92))
    panel.set_model(moe, hw, full)
    assert max_gpu_expert_layers(moe, hw, full) == 3
    assert panel.expert_marks.bound == 4 and panel.expert_slider.value() == 0


@pytest.fixture
def owned(tmp_path: Path, demo_model: Path):
    """``make(engine) -> (ChatApp, settings file)``: the demo loaded by an app that writes
    its confirmed settings to a file."""
    made = []

    def make(engine=None):
        store = ConversationStore(tmp_path / "c.sqlite3")
        path = tmp_path / "settings.json"
        app = ChatApp(
            store,
            KVStateCache(tmp_path / "kv"),
            engine=engine,
            persist=lambda s: save_app_settings(s, path),
        )
        made.append((app, store))
        app.open_conversation(store.create().id)
        settings = AppSettings.of(
            model_path=str(demo_model),
            n_ctx=1024,
            n_threads=2,
            temperature=0.0,
            max_tokens=12,
            speculation="off",
        )
        events = list(app.load(settings))
        assert isinstance(events[-1], Loaded) and SettingsChanged(settings) in events
        return app, path

    yield make
    for app, store in made:
        app.shutdown()
        store.close()


def test_settings_are_announced_and_written_only_once_a_load_confirms_them(owned, tmp_path):
    app, path = owned()
    good = json.loads(path.read_text())
    assert good["load"]["n_ctx"] == 1024
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a model")
    events = list(app.load(app.settings.with_changes(model_path=str(bad), n_ctx=2048)))
    assert isinstance(events[-1], LoadFailed)
    assert not any(isinstance(e, SettingsChanged) for e in events)
    assert app.settings.load.n_ctx == 1024 and json.loads(path.read_text()) == good
    events = list(app.configure(max_tokens=7))  # needs no load: taken, announced, written
    assert [type(e) for e in events] == [SettingsChanged]
    assert load_app_settings(path).sampler.max_tokens == 7 == app.settings.sampler.max_tokens
    assert list(app.configure(max_tokens=7)) == []  # no change, no event


def test_a_placement_past_the_bound_loads_only_when_confirmed(owned):
    app, path = owned()
    small = _fits_up_to(app.description, 5, app.settings.fit_settings())
    app.room = small  # as a reload would find a small GPU (plain data: none here)
    asked = list(app.set_placement(Placement(n_gpu_layers=8)))
    assert len(asked) == 1 and isinstance(asked[0], PlacementNeedsConfirmation)
    assert "Does not fit" in asked[0].message and app.settings.load.placement.n_gpu_layers == 0
    within = list(app.set_placement(Placement(n_gpu_layers=5)))  # no question asked
    assert isinstance(within[-1], Loaded) and app.settings.load.placement.n_gpu_layers == 5
    app.room = small
    events = list(app.set_placement(Placement(n_gpu_layers=8), confirmed=True))
    assert isinstance(events[0], LoadStarted) and isinstance(events[-1], Loaded)
    assert (
        app.settings.load.placement.n_gpu_layers
        == 8
        == load_app_settings(path).load.placement.n_gpu_layers
    )


class AbortsOnFirstTurnAt(EngineClient):
    """The real engine, made to abort (SIGABRT in its process) on the first reply at
    ``layers`` GPU layers: what a GPU allocation past the card does at the first decode
    (no GPU here)."""

    def __init__(self, layers: int) -> None:
        super().__init__()
        self.layers = layers
        self.held = None  # the settings of the last load or reload

    def load(self, settings):
        self.held = None
        info = super().load(settings)
        self.held = settings
        return info

    def reload(self, settings):
        self.held = None
        result = super().reload(settings)
        self.held = settings
        return result

    def chat(self, messages, sampling=None):
        if self.held is not None and self.held.placement.n_gpu_layers == self.layers:
            crash_engine(self, "abort")
        return super().chat(messages, sampling)


def test_an_engine_ending_at_the_first_reply_of_a_placement_falls_back(owned):
    app, path = owned(AbortsOnFirstTurnAt(4))
    assert isinstance(list(app.send(LONG))[-1], DoneEvent)  # long enough to be checkpointed
    loaded = list(app.set_placement(Placement(n_gpu_layers=4), confirmed=True))
    assert (
        isinstance(loaded[-1], Loaded) and load_app_settings(path).load.placement.n_gpu_layers == 4
    )
    events = list(app.send("And a lake?"))
    failed = next(e for e in events if isinstance(e, ErrorEvent))
    assert failed.kind == ErrorKind.ENGINE_DIED
    back = next(e for e in events if isinstance(e, PlacementFellBack))
    assert (back.failed.n_gpu_layers, back.restored.n_gpu_layers) == (4, 0)
    assert "0 GPU layers, the last placement that ran" in back.message
    loaded = [e for e in events[events.index(back) :] if isinstance(e, Loaded)]
    assert loaded and loaded[0].restored_tokens > 0  # the conversation's checkpoint
    assert (
        app.settings.load.placement.n_gpu_layers
        == 0
        == load_app_settings(path).load.placement.n_gpu_layers
    )
    assert isinstance(list(app.send("And a sea?"))[-1], DoneEvent)


def test_all_layers_is_counted_in_one_place():
    """llama.cpp counts the output head as one more layer, and -1 as all of them."""
    assert all_layers(30) == 31
    assert [layers_on_gpu(n, 30) for n in (-1, 0, 12, 31, 999)] == [31, 0, 12, 31, 31]
    p = Placement(n_gpu_layers=-1)
    assert p.all_on_gpu(30) and p.uses_gpu and p.gpu_layers(30) == 31
    assert not Placement(n_gpu_layers=30).all_on_gpu(30) and not Placement().uses_gpu
    assert Placement().with_all_layers(30) == Placement(n_gpu_layers=31)

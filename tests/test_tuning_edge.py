"""The tuner's search up to the edge of the card, its margin, its finalists and its
handling of an engine that aborts: the real tuner on a fake GPU
(``vllmchat/bench/placement/fake_card.py``), whose free memory the engine's probe
reports as llama.cpp's devices would."""

from __future__ import annotations

import pytest

from vllmchat.bench.placement.fake_card import FakeGpuEngine, scaled_moe
from vllmchat.core.models.advisor import max_gpu_expert_layers
from vllmchat.core.models.description import ModelDescription
from vllmchat.core.models.memory import MIB, FitSettings
from vllmchat.core.placement import Placement, all_layers
from vllmchat.core.settings import GPU_MARGIN_MIB, LoadSettings
from vllmchat.core.tuning import plan
from vllmchat.core.tuning.events import TuneFinished
from vllmchat.core.tuning.results import TuneConfig, TunePoint, TuneResult
from vllmchat.core.tuning.tuner import TuneRequest, tune

N_LAYER = 16
EDGE = 10  # expert layers on the GPU at the card's edge, in every test below


@pytest.fixture(scope="module")
def desc(tmp_path_factory: pytest.TempPathFactory) -> ModelDescription:
    return scaled_moe(tmp_path_factory.mktemp("edge"), n_layer=N_LAYER, expert_mib=512)


SETTINGS = LoadSettings(model_path="scaled.gguf", n_ctx=2048, n_threads=2, flash_attn=True)
AXIS = plan.Axis(True, N_LAYER)
BASE = TuneConfig.of(SETTINGS)


def on_gpu(c: TuneConfig) -> int:
    """Expert layers on the GPU (-1: not every layer offloaded)."""
    return AXIS.value(c) if c.placement.all_on_gpu(N_LAYER) else -1


def rising(c: TuneConfig, runs: int) -> float:
    """Decode speed: faster with more experts on the GPU, whole layers and threads."""
    speed = 40.0 + 3.0 * max(0, on_gpu(c))
    return (
        speed
        * (0.8 if not c.placement.all_on_gpu(N_LAYER) else 1.0)
        * (0.8 if c.n_threads < 2 else 1.0)
    )


def card(desc: ModelDescription, above_edge: int, **kw) -> FakeGpuEngine:
    """A fake engine on a card whose free memory puts the edge at ``EDGE``: its load,
    the compute pool and ``above_edge`` bytes more."""
    speed = kw.pop("speed", rising)
    probe = FakeGpuEngine(desc, free=0, speed=speed, **kw)
    need = probe.needs(AXIS.at(BASE, EDGE).apply_to(SETTINGS))
    return FakeGpuEngine(desc, free=need + probe.pool + above_edge, speed=speed, **kw)


def run(engine: FakeGpuEngine, desc: ModelDescription, **kw) -> TuneResult:
    kw.setdefault("threads", (2, 1))
    kw.setdefault("ubatch", (512,))
    req = TuneRequest(base=SETTINGS, budget_s=600.0, **kw)
    events = list(tune(engine, req, engine.probe(), desc, restore=False))
    assert isinstance(events[-1], TuneFinished)
    return events[-1].result


def at_gpu(result: TuneResult, g: int) -> list[TunePoint]:
    return [p for p in result.points if on_gpu(p.config) == g]


def test_the_search_goes_past_an_estimate_that_is_too_cautious(desc):
    # The estimate counts 1.2 GiB more than the card really takes (two steps' worth).
    engine = card(desc, 300 * MIB, over_estimate=1200 * MIB)
    hw = engine.probe()
    fit = FitSettings.of(SETTINGS.with_changes(n_gpu_layers=all_layers(N_LAYER)))
    bound = max_gpu_expert_layers(desc, hw, fit)
    assert bound is not None and bound < EDGE, "the estimate alone stops short of the edge"
    result = run(engine, desc)
    assert result.pick is not None and on_gpu(result.pick) == EDGE
    above = at_gpu(result, EDGE + 1)
    assert above and not above[0].fits and "does not fit" in above[0].note
    assert not at_gpu(result, EDGE + 2), "the search stops at the first step that does not fit"
    loads = [on_gpu(c) for what, c in engine.log if what == "load" and c is not None]
    assert loads[:3] == [bound, EDGE, EDGE + 1], "one jump by the measured free memory"
    edge = at_gpu(result, EDGE)[0]
    assert edge.free_after is not None and edge.free_after >= result.margin > 0


def test_a_placement_under_the_margin_is_never_picked(desc):
    # One step above the edge loads and decodes, but leaves 144 MiB free (margin 256).
    engine = card(desc, GPU_MARGIN_MIB * MIB + 400 * MIB)
    result = run(engine, desc)
    assert result.margin == plan.margin_for(engine.probe().vram_free, GPU_MARGIN_MIB)
    assert result.margin == GPU_MARGIN_MIB * MIB
    over = at_gpu(result, EDGE + 1)
    assert over and all(p.fits and p.under_margin for p in over)
    assert over[0].free_after == result.margin - 112 * MIB
    assert "under the 256 MiB margin" in over[0].note
    assert max(p.decode_tok_s for p in over) > max(p.decode_tok_s for p in at_gpu(result, EDGE))
    assert result.pick is not None and on_gpu(result.pick) == EDGE
    assert "left 144 MiB free, under the 256 MiB margin" in result.reason
    assert not at_gpu(result, EDGE + 2)
    # Not by the setting's floor alone: a larger margin moves the pick down.
    engine = card(desc, GPU_MARGIN_MIB * MIB + 400 * MIB)
    result = run(engine, desc, margin_mib=GPU_MARGIN_MIB + 512)
    assert result.pick is not None and on_gpu(result.pick) == EDGE - 1


def experts_line(at_edge: float, below: float, *, dip: float = 1.0, dip_at: int = EDGE):
    """Decode speeds as decode works: a token's time grows by the same step for each
    layer whose experts stay in RAM (``at_edge`` tok/s at the edge, ``below`` one step
    under); ``dip``: the first run at ``dip_at`` slowed by a busy CPU."""
    step = 1 / below - 1 / at_edge

    def speed(c: TuneConfig, runs: int) -> float:
        g = on_gpu(c)
        if g < 0 or c.n_threads < 2:
            return rising(c, runs) * 0.5
        tok_s = 1 / (1 / at_edge + step * (EDGE - g))
        return tok_s * (dip if (g == dip_at and runs == 0) else 1.0)

    return speed


def test_finalists_are_remeasured_interleaved_and_the_experts_line_decides(desc):
    busy_first = experts_line(72.0, 68.8, dip=0.95)  # the edge is 4.6% faster
    engine = card(desc, 300 * MIB, speed=busy_first)
    result = run(engine, desc)
    finals = [p for p in result.points if p.final_round]
    assert {on_gpu(p.config) for p in finals} == {EDGE, EDGE - 1, EDGE - 2}
    order = [on_gpu(p.config) for p in finals]
    assert order[:9] == order[:3] * 3, "A B C, A B C, A B C: in alternation"
    rounds = [p.final_round for p in finals]
    assert rounds[:9] == [1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert set(order[9:]) == {EDGE, EDGE - 1}, "within 5%: more rounds of the two best"
    assert max(rounds) == 3 + plan.SETTLE_ROUNDS
    assert all(p.config.n_threads == 2 for p in finals), "placements compared alike"
    singles = [p for p in result.points if not p.final_round]
    single_pick, _ = plan.choose(singles, BASE, plan.MemoryLimits(margin=result.margin))
    assert single_pick is not None and on_gpu(single_pick) == EDGE - 1, (
        "by single measurements the edge looked within 2%"
    )
    assert result.pick is not None and on_gpu(result.pick) == EDGE
    assert "median of 7 interleaved runs 72.0" in result.reason
    assert "on the line through" in result.reason
    # Within 2% on the line, the memory preference holds.
    result = run(card(desc, 300 * MIB, speed=experts_line(69.5, 68.3, dip=0.95)), desc)
    assert result.pick is not None and on_gpu(result.pick) == EDGE - 1
    assert "within 2% of 69." in result.reason


def test_the_line_tells_apart_what_noisy_medians_do_not(desc):
    """Each finalist's median says the placement below the edge is as fast; the
    readings along the experts' line say the edge is 4% faster, as it is."""
    truth = experts_line(72.0, 69.1)
    slow = {EDGE: [0.95, 1.0, 0.94, 1.0, 0.95, 1.0, 0.95], EDGE - 1: [1.0, 1.03, 1.0, 1.04] * 2}

    def noisy(c: TuneConfig, runs: int) -> float:
        g = on_gpu(c)
        shifts = slow.get(g, [1.0]) if c.n_threads == 2 and g >= 0 else [1.0]
        return truth(c, runs) * shifts[runs % len(shifts)]

    result = run(card(desc, 300 * MIB, speed=noisy), desc)
    medians = plan.final_medians(result.points)
    by_gpu = {on_gpu(c): m for c, (m, _) in medians.items()}
    assert by_gpu[EDGE - 1] >= plan.SAME_SPEED * by_gpu[EDGE], "the medians alone: within 2%"
    assert result.pick is not None and on_gpu(result.pick) == EDGE


def test_the_edge_is_a_finalist_even_when_its_one_measurement_was_slow(desc):
    edge_unlucky = experts_line(72.0, 69.0, dip=0.8)  # 20% slow once

    result = run(card(desc, 300 * MIB, speed=edge_unlucky), desc)
    finals = {on_gpu(p.config) for p in result.points if p.final_round}
    assert EDGE in finals, "more on the GPU is faster by how decode works: re-measured"
    assert result.pick is not None and on_gpu(result.pick) == EDGE


def test_another_thread_count_must_beat_the_base_clearly(desc):
    def one_thread_a_bit_faster(c: TuneConfig, runs: int) -> float:
        return rising(c, runs) * (1.29 if c.n_threads == 1 else 1.0)  # 3.2% faster

    result = run(card(desc, 300 * MIB, speed=one_thread_a_bit_faster), desc)
    assert result.pick is not None and result.pick.n_threads == 2, "3% is within the noise"

    def one_thread_much_faster(c: TuneConfig, runs: int) -> float:
        return rising(c, runs) * (1.5 if c.n_threads == 1 else 1.0)  # 20% faster

    result = run(card(desc, 300 * MIB, speed=one_thread_much_faster), desc)
    assert result.pick is not None and result.pick.n_threads == 1


def test_an_engine_that_aborts_is_recorded_as_not_fitting_and_the_search_moves_on(desc):
    # The step above the edge loads with 88 MiB free; the first decode's compute pool
    # (300 MiB) does not fit and llama.cpp aborts.
    engine = card(desc, 300 * MIB, pool=300 * MIB)
    result = run(engine, desc)
    died = at_gpu(result, EDGE + 1)
    assert len(died) == 1 and not died[0].fits
    assert died[0].error_kind == "engine_died" and died[0].free_after == 88 * MIB
    assert "loaded with 88 MiB free" in died[0].note and "aborted" in died[0].note
    after = result.points[result.points.index(died[0]) + 1 :]
    assert len(after) >= 4, "below the edge, threads and finalists measured after the abort"
    assert all(p.fits for p in after)
    assert result.pick is not None and on_gpu(result.pick) == EDGE
    assert engine.alive, "a fresh engine process took over"


def test_marks_under_the_margin_on_the_slider_and_the_chart(qtbot, desc):
    from vllmchat.core.models.hardware import GpuInfo, HardwareInfo
    from vllmchat.ui.offload.offload_panel import OffloadPanel
    from vllmchat.ui.offload.tuning_chart import TuningChart

    margin = 256 * MIB
    points = (
        TunePoint(AXIS.at(BASE, 9), True, decode_tok_s=60.0, free_after=900 * MIB, margin=margin),
        TunePoint(AXIS.at(BASE, 10), True, decode_tok_s=64.0, free_after=100 * MIB, margin=margin),
    )
    result = TuneResult(
        points=points, pick=points[0].config, reason="r", seconds=1.0, margin=margin
    )
    panel = OffloadPanel()
    qtbot.addWidget(panel)
    hw = HardwareInfo(64 << 30, 48 << 30, [GpuInfo("GPU", 8 << 30, 8 << 30)], True)
    panel.set_model(
        desc,
        hw,
        FitSettings(
            n_ctx=2048,
            placement=Placement(n_gpu_layers=all_layers(N_LAYER), n_cpu_moe=N_LAYER - 9),
        ),
    )
    panel.show_tuning(result)
    assert panel.expert_marks.under == {10}
    assert "10 layers: 64.0 tok/s (under the margin)" in panel.expert_marks.toolTip()
    assert "under the margin" in panel.marks.text()
    chart = TuningChart()
    qtbot.addWidget(chart)
    chart.show_points(result.points)
    assert chart.under_margin_x == [N_LAYER - 10]  # its x: experts of layers in RAM


def test_free_memory_margin_and_rounds_round_trip_and_old_results_still_load():
    p = TunePoint(
        AXIS.at(BASE, 3),
        True,
        decode_tok_s=9.5,
        free_after=300 * MIB,
        margin=256 * MIB,
        final_round=2,
    )
    result = TuneResult(points=(p,), pick=p.config, reason="r", seconds=1.0, margin=256 * MIB)
    assert TuneResult.from_json(result.to_json()) == result
    old = result.to_json()
    old.pop("margin")
    for key in ("free_after", "margin", "error_kind", "final_round"):
        old["points"][0].pop(key)
    again = TuneResult.from_json(old)
    assert again.margin == 0 and again.points[0].free_after is None
    assert not again.points[0].under_margin

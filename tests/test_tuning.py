"""The offload/thread tuner: its plan and pick rule, and real sweeps on the demo model
(budget, stop and restore, an out-of-memory point, the cache)."""

from __future__ import annotations

import json

import pytest

from vllmchat.core.app.placement.tuning import run_tune
from vllmchat.core.engine.events import DoneEvent, EngineError
from vllmchat.core.engine.local.client import EngineClient
from vllmchat.core.models.hardware import GpuInfo, HardwareInfo
from vllmchat.core.placement import Placement
from vllmchat.core.settings import LoadSettings, SamplingSettings
from vllmchat.core.tuning import plan
from vllmchat.core.tuning.cache import TuneCache
from vllmchat.core.tuning.events import PointMeasured, TuneFinished
from vllmchat.core.tuning.results import TuneConfig, TunePoint, TuneResult
from vllmchat.core.tuning.tuner import TuneRequest, tune, with_free_vram

MIB = 1 << 20
CPU = HardwareInfo(ram_total=24 << 30, ram_available=20 << 30)


def _point(layers: int, decode: float, vram: int = 1000 * MIB, threads: int = 4) -> TunePoint:
    c = TuneConfig(Placement(n_gpu_layers=layers), threads, threads, 512)
    return TunePoint(c, True, prefill_tok_s=100 + layers, decode_tok_s=decode, vram=vram)


def test_layer_plan_starts_at_the_bound_and_steps_down_to_cpu():
    assert plan.layer_plan(30, 32) == [30, 29, 28, 22, 15, 8, 0]
    assert plan.layer_plan(40, 32) == [33, 32, 31, 25, 16, 8, 0]
    assert plan.layer_plan(0, 32) == [0]


def test_refinement_goes_where_speed_changes_most():
    assert plan.refine_layer({0: 10.0, 8: 11.0, 16: 20.0, 24: 21.0}) == 12
    assert plan.refine_layer({0: 10.0, 8: 10.5, 16: 10.9}) is None  # smooth: nothing to refine
    assert plan.refine_layer({15: 10.0, 16: 20.0}) is None  # neighbours: nothing between


def test_the_pick_is_the_fastest_that_fits_and_prefers_fewer_layers_within_two_percent():
    base = TuneConfig(Placement(n_gpu_layers=0), 4, 4, 512)
    points = [
        _point(0, 10.0),
        _point(20, 40.0),
        _point(24, 40.5),  # within 2% of the best: more layers buy nothing
        _point(28, 60.0, vram=5000 * MIB),  # fastest, but over the memory limit
    ]
    pick, why = plan.choose(points, base, plan.MemoryLimits(vram=4000 * MIB))
    assert pick is not None and pick.placement.n_gpu_layers == 20
    assert "within 2%" in why
    pick, _ = plan.choose(points, base, plan.MemoryLimits(vram=6000 * MIB))
    assert pick is not None and pick.placement.n_gpu_layers == 28
    failed = [
        TunePoint(TuneConfig(Placement(n_gpu_layers=0), 4, 4, 512), False, note="does not fit")
    ]
    assert plan.choose(failed, base, plan.MemoryLimits())[0] is None


def test_threads_come_from_their_own_fastest_points():
    base = TuneConfig(Placement(n_gpu_layers=0), 2, 2, 512)
    points = [
        TunePoint(
            TuneConfig(Placement(n_gpu_layers=0), 2, 2, 512),
            True,
            prefill_tok_s=300,
            decode_tok_s=30,
        ),
        TunePoint(
            TuneConfig(Placement(n_gpu_layers=0), 1, 1, 512),
            True,
            prefill_tok_s=200,
            decode_tok_s=40,
        ),
    ]
    pick, _ = plan.choose(points, base, plan.MemoryLimits())
    assert pick == TuneConfig(
        Placement(n_gpu_layers=0), 1, 2, 512
    )  # decode peaks below the core count, prompts don't


def test_results_round_trip_through_json():
    result = TuneResult(
        points=(_point(3, 9.5),),
        pick=TuneConfig(Placement(n_gpu_layers=3), 4, 4, 512),
        reason="r",
        seconds=1.0,
    )
    assert TuneResult.from_json(result.to_json()) == result


def test_the_advisor_bound_uses_the_memory_the_engine_holds():
    hw = HardwareInfo(1 << 30, 1 << 30, [GpuInfo("GPU", 8 << 30, 1 << 30)], True)
    assert with_free_vram(hw, 3 << 30).vram_free == 3 << 30


def _request(settings: LoadSettings, **kw) -> TuneRequest:
    kw.setdefault("prompt_tokens", 64)
    kw.setdefault("decode_tokens", 16)
    return TuneRequest(base=settings, **kw)


@pytest.fixture
def demo_settings(demo_model) -> LoadSettings:
    return LoadSettings(model_path=str(demo_model), n_ctx=1024, n_threads=2)


def test_a_sweep_measures_threads_picks_and_restores_the_conversation(make_client, demo_settings):
    client = make_client()
    client.load(demo_settings)
    messages = [{"role": "user", "content": "Name three colours."}]
    events = list(client.chat(messages, SamplingSettings(temperature=0.0, max_tokens=8)))
    assert isinstance(events[-1], DoneEvent)
    before = client.kv().kv_tokens
    assert before > 0
    got = list(tune(client, _request(demo_settings, budget_s=60.0), CPU, None))
    result = got[-1].result
    assert isinstance(got[-1], TuneFinished) and not result.stopped
    threads = {p.config.n_threads for p in result.points if p.fits}
    assert threads == {1, 2}, "every thread count of this 2-core machine is measured"
    assert all(p.decode_tok_s > 0 and p.prefill_tok_s > 0 and p.ram > 0 for p in result.points)
    assert result.pick is not None and result.pick.placement.n_gpu_layers == 0
    assert [e.done for e in got if isinstance(e, PointMeasured)] == list(
        range(1, len(result.points) + 1)
    )
    assert client.info is not None and client.info.n_ctx == demo_settings.n_ctx
    assert client.kv().kv_tokens == before, "the conversation's KV state came back"


def test_the_budget_ends_the_sweep(make_client, demo_settings):
    client = make_client()
    req = _request(demo_settings, budget_s=0.1, threads=(2, 1), ubatch=(512, 256))
    result = list(tune(client, req, CPU, None))[-1].result
    assert len(result.points) == 1, "the first point always runs; nothing after the budget"
    assert result.pick is not None


def test_stop_ends_the_sweep_within_a_point_and_restores(make_client, demo_settings):
    client = make_client()
    client.load(demo_settings)
    seen = []

    def should_stop() -> bool:
        return len(seen) >= 1

    result = None
    for event in tune(
        client, _request(demo_settings, budget_s=60.0), CPU, None, should_stop=should_stop
    ):
        if isinstance(event, PointMeasured):
            seen.append(event)
        if isinstance(event, TuneFinished):
            result = event.result
    assert result is not None and result.stopped and len(result.points) == 1
    assert client.info is not None and client.info.n_ctx == demo_settings.n_ctx


def test_an_out_of_memory_point_is_recorded_and_the_sweep_goes_on(demo_settings):
    """A real allocation failure: the engine's address space is capped (RLIMIT_AS), so a
    4096-token ubatch (≈0.8 GB of logits) cannot be allocated while 512 can."""
    probe = EngineClient()
    probe.load(demo_settings)
    held = probe.memory()
    with open(f"/proc/{probe.pid}/status") as fh:
        base = next(int(ln.split()[1]) * 1024 for ln in fh if ln.startswith("VmSize"))
    probe.close()
    client = EngineClient(memory_limit=base + (400 << 20))
    try:
        req = _request(demo_settings, threads=(2,), ubatch=(4096, 256))
        result = list(tune(client, req, CPU, None, restore=False))[-1].result
    finally:
        client.close()
    by_ubatch = {p.config.n_ubatch: p for p in result.points}
    assert not by_ubatch[4096].fits and "does not fit" in by_ubatch[4096].note
    assert by_ubatch[256].fits and by_ubatch[256].decode_tok_s > 0, "measured after the failure"
    assert result.pick is not None and result.pick.n_ubatch != 4096
    assert held.rss > 0


def test_a_result_cached_with_the_placement_flat_reads_back_nested():
    """A tuning cache file written before the placement was nested in the points."""
    flat = {"n_gpu_layers": 49, "n_threads": 8, "n_threads_batch": 8, "n_ubatch": 512}
    old = {
        "points": [{"config": {**flat, "n_cpu_moe": 3, "tensor_split": "1,0"}, "fits": True}],
        "pick": {**flat, "n_cpu_moe": 3, "tensor_split": "1,0"},
        "reason": "r",
        "seconds": 1.0,
    }
    result = TuneResult.from_json(old)
    placed = Placement(n_gpu_layers=49, n_cpu_moe=3, tensor_split="1,0")
    assert result.pick == TuneConfig(placed, 8, 8, 512) == result.points[0].config
    assert TuneResult.from_json(json.loads(json.dumps(result.to_json()))) == result


def test_results_are_cached_per_file_and_settings(make_client, demo_settings, tmp_path):
    client = make_client()
    cache = TuneCache(tmp_path / "tuning")
    req = _request(demo_settings, budget_s=0.1, threads=(2,))
    first = list(run_tune(client, demo_settings, cache=cache, request=req))[-1].result
    again = list(run_tune(client, demo_settings, cache=cache, request=req))
    assert len(again) == 2 and again[-1].result == first, "reused, nothing measured"
    other = demo_settings.with_changes(n_ctx=2048)
    assert cache.get(other, client.probe()) is None, "another context is another result"


def test_a_dead_engine_is_restarted_between_points(make_client, demo_settings):
    client = make_client()
    client.load(demo_settings)
    client.kill()
    with pytest.raises(EngineError):
        client.kv()
    req = _request(demo_settings, budget_s=30.0, threads=(2, 1))
    result = list(tune(client, req, CPU, None, restore=False))[-1].result
    assert any(p.fits for p in result.points)


def test_the_runtime_overhead_is_learned_per_device_and_used_by_estimates(tmp_path):
    from vllmchat.core.models.hardware import BackendInfo
    from vllmchat.core.models.memory import GPU_RUNTIME_OVERHEAD, FitSettings
    from vllmchat.core.models.overhead import learn_overhead, learned_overhead

    gpu = GpuInfo("Laptop GPU", 8 << 30, 6 << 30)
    hw = HardwareInfo(1 << 30, 1 << 30, [gpu], True, backends=(BackendInfo("CUDA", (gpu,)),))
    other = HardwareInfo(1 << 30, 1 << 30, [GpuInfo("Other GPU", 8 << 30, 6 << 30)], True)
    assert learned_overhead(hw) == GPU_RUNTIME_OVERHEAD
    learn_overhead(hw, 575 * MIB, 0, 0)  # measured 575 MiB over an estimate of none
    assert learned_overhead(hw) == 575 * MIB
    assert learned_overhead(other) == GPU_RUNTIME_OVERHEAD, "per device"
    learn_overhead(hw, -5, 0, 0)  # a bad measurement is not learned
    assert learned_overhead(hw) == 575 * MIB
    assert FitSettings(gpu_overhead=learned_overhead(hw)).gpu_overhead == 575 * MIB

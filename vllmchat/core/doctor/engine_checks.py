"""Checks in the engine process: llama.cpp's backends and devices, real offload, a real answer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from vllmchat.core.doctor.findings import Finding, Status
from vllmchat.core.engine.events import DoneEvent, EngineError, ErrorEvent
from vllmchat.core.engine.protocol import Engine
from vllmchat.core.machine.backend import MachineFacts, rebuild_advice
from vllmchat.core.models.hardware import HardwareInfo
from vllmchat.core.placement import Placement
from vllmchat.core.settings import LoadSettings, SamplingSettings

OpenEngine = Callable[[], Engine]

MIB = 1 << 20
QUESTION = "What is the capital of France?"


@dataclass(frozen=True)
class EngineFindings:
    findings: list[Finding]
    hardware: HardwareInfo | None


def backends(hw: HardwareInfo, facts: MachineFacts) -> list[Finding]:
    rows = []
    for b in hw.backends:
        devices = "; ".join(
            f"{d.name} ({d.free / MIB:,.0f} of {d.total / MIB:,.0f} MiB free)" for d in b.devices
        )
        rows.append(f"{b.name}: {devices or 'no devices'}")
    names = [b.name for b in hw.backends]
    data = {
        "backends": [
            {"name": b.name, "devices": [d.__dict__ for d in b.devices]} for b in hw.backends
        ]
    }
    found = [
        Finding("backends", "llama.cpp backends", Status.OK, " | ".join(rows) or "none", data=data)
    ]
    gpu_backends = [n for n in names if n.upper() not in ("CPU", "BLAS", "RPC")]
    if facts.any_gpu and not gpu_backends:
        found.append(
            Finding(
                "gpu_build",
                "GPU offload",
                Status.WARN,
                "a GPU is present but this llama.cpp build is CPU-only",
                rebuild_advice(facts),
            )
        )
    elif gpu_backends and not hw.gpus:
        found.append(
            Finding(
                "gpu_build",
                "GPU offload",
                Status.WARN,
                f"llama.cpp was built for {', '.join(gpu_backends)} but sees no GPU",
                "check the GPU driver (nvidia-smi / vulkaninfo), or rebuild for the CPU: "
                "VLLMCHAT_BACKEND=cpu scripts/setup.sh",
            )
        )
    return found


def _offload(info: object, n_layer: int) -> Finding:
    buffers: dict[str, float] = getattr(info, "buffers_mib", {})
    on_gpu = {k: v for k, v in buffers.items() if k.startswith("model:") and "CPU" not in k.upper()}
    weights_gpu = sum(on_gpu.values())
    weights_cpu = sum(v for k, v in buffers.items() if k.startswith("model:") and k not in on_gpu)
    data = {"buffers_mib": buffers, "n_layer": n_layer}
    if weights_gpu <= 0:
        return Finding(
            "offload",
            "Layers on the GPU",
            Status.WARN,
            f"all {n_layer} layers were asked for the GPU, but the weights stayed on "
            f"the CPU ({weights_cpu:,.0f} MiB)",
            "check the GPU driver; run vllmchat doctor --json and look at the backends' devices",
            data,
        )
    where = ", ".join(f"{k.split(':', 1)[1]} {v:,.0f} MiB" for k, v in on_gpu.items())
    return Finding(
        "offload",
        "Layers on the GPU",
        Status.OK,
        f"all {n_layer} layers offloaded: weights on {where}, "
        f"{weights_cpu:,.0f} MiB left on the CPU",
        data=data,
    )


def _answer(client: Engine) -> Finding:
    sampling = SamplingSettings(temperature=0.0, max_tokens=24)
    done: DoneEvent | None = None
    for event in client.chat([{"role": "user", "content": QUESTION}], sampling):
        if isinstance(event, ErrorEvent):
            return Finding(
                "chat",
                "Chat",
                Status.FAIL,
                f"the demo model failed to answer: {event.message}",
                "run vllmchat doctor again; if it repeats, scripts/setup.sh llama",
            )
        if isinstance(event, DoneEvent):
            done = event
    assert done is not None
    tps = done.stats.decode_tokens / done.stats.decode_s if done.stats.decode_s else 0.0
    reply = " ".join(done.text.split())[:80]
    return Finding(
        "chat",
        "Chat",
        Status.OK,
        f'"{QUESTION}" -> "{reply}" ({tps:,.0f} tok/s)',
        data={"reply": done.text, "decode_tok_s": round(tps, 1)},
    )


def engine_checks(
    facts: MachineFacts, model_path: str | None, open_engine: OpenEngine, *, load: bool = True
) -> EngineFindings:
    """Probe llama.cpp in a new engine process (``open_engine``: the application
    layer's local engine); load the model on the GPU and ask it a question."""
    client = open_engine()
    try:
        try:
            hw: HardwareInfo = client.probe()
        except EngineError as exc:
            return EngineFindings(
                [
                    Finding(
                        "llama_cpp",
                        "llama.cpp",
                        Status.FAIL,
                        f"llama.cpp cannot be loaded: {exc}",
                        "rebuild it: scripts/setup.sh llama",
                    )
                ],
                None,
            )
        found = backends(hw, facts)
        if not load or model_path is None:
            return EngineFindings(found, hw)
        layers = -1 if hw.gpu_offload else 0
        try:
            info = client.load(
                LoadSettings(
                    model_path=model_path, placement=Placement(n_gpu_layers=layers), n_ctx=512
                )
            )
        except EngineError as exc:
            found.append(
                Finding(
                    "chat", "Chat", Status.FAIL, f"the demo model failed to load: {exc}", exc.fix
                )
            )
            return EngineFindings(found, hw)
        if hw.gpu_offload:
            found.append(_offload(info, info.n_layer))
        found.append(_answer(client))
        return EngineFindings(found, hw)
    finally:
        client.close()

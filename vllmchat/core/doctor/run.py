"""Run every check, in the order a user reads them."""

from __future__ import annotations

from collections.abc import Callable

from vllmchat.core.doctor import (
    build_checks,
    engine_checks,
    system_checks,
    vision_check,
    voice_checks,
)
from vllmchat.core.doctor.engine_checks import OpenEngine
from vllmchat.core.doctor.findings import Finding, Report, Status
from vllmchat.core.machine.detect import detect_machine
from vllmchat.core.machine.toolchain import find_compiler


def run_doctor(
    open_engine: OpenEngine,
    *,
    load_model: bool = True,
    model_path: str | None = None,
    mmproj_path: str | None = None,
    device_checks: Callable[[], list[Finding]] | None = None,
) -> Report:
    """All findings; ``load_model=False`` skips loading a model (seconds faster).

    The engine checks run in an engine ``open_engine`` makes (the front ends pass the
    application layer's ``work_engine``); the offload and chat checks load
    ``model_path``, by default the demo model; the images check names its projector
    (``mmproj_path``, or one beside it). The voice's lines follow, then the audio
    devices' from ``device_checks`` (the front end's: they need Qt Multimedia).
    """
    facts = detect_machine()
    found: list[Finding] = [system_checks.versions(), system_checks.machine(facts)]
    toolkit = system_checks.cuda_toolkit(facts)
    demo = system_checks.demo_model()
    path = model_path or (demo.data.get("path") if demo.status is Status.OK else None)
    engine = engine_checks.engine_checks(facts, path, open_engine, load=load_model)
    found += engine.findings
    found.append(vision_check.vision(path, mmproj_path))
    found.append(system_checks.cpu(engine.hardware.system_info if engine.hardware else ""))
    found += [toolkit] if toolkit else []
    found.append(build_checks.build_tools(facts, find_compiler(facts.system)))
    found += voice_checks.voice_findings()
    found += device_checks() if device_checks else []
    found += [system_checks.display(), *system_checks.models_folder(), demo]
    found.append(system_checks.log_file())
    return Report(tuple(found))

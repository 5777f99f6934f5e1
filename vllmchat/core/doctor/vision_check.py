"""Whether images can be taken: llama.cpp's mtmd library, and the model's projector."""

from __future__ import annotations

from pathlib import Path

from vllmchat.core.doctor.findings import Finding, Status
from vllmchat.core.machine.llama_libs import llama_library
from vllmchat.core.models.projector import projector_beside, read_projector


def vision(model_path: str | None, mmproj_path: str | None = None) -> Finding:
    """The mtmd library's presence, and for ``model_path`` the projector it would load
    (``mmproj_path``, else one beside it made for its width)."""
    try:
        lib = llama_library("mtmd")
    except FileNotFoundError:
        lib = None
    data: dict[str, object] = {"mtmd": str(lib) if lib and lib.exists() else None}
    if lib is None or not lib.exists():
        return Finding(
            "vision",
            "Images",
            Status.WARN,
            "llama.cpp was built without its multimodal library (mtmd): no model can take images",
            "rebuild llama.cpp with it: scripts/setup.sh llama",
            data,
        )
    if not model_path:
        return Finding("vision", "Images", Status.OK, f"mtmd library: {lib.name}", data=data)
    projector = mmproj_path or projector_beside(model_path)
    data["mmproj"] = projector
    name = Path(model_path).name
    if not projector:
        return Finding(
            "vision",
            "Images",
            Status.OK,
            f"mtmd library present; {name} has no projector (mmproj) beside it: text only",
            data=data,
        )
    try:
        info = read_projector(projector)
    except (OSError, ValueError, KeyError) as exc:
        return Finding(
            "vision",
            "Images",
            Status.WARN,
            f"the projector {projector} cannot be read: {exc}",
            "download the model's mmproj file again",
            data,
        )
    data.update(projector_type=info.projector_type, image_tokens=info.image_tokens)
    return Finding(
        "vision",
        "Images",
        Status.OK,
        f"mtmd library present; {name} sees images through {Path(projector).name} "
        f"({info.projector_type}, {info.image_tokens} tokens an image)",
        data=data,
    )

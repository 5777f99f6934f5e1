"""What the API tells of a model beyond its name: architecture, size, quantization,
context, template and what it can do; and what the loaded one holds in memory."""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

from gguf.constants import LlamaFileType

from vllmchat.core.app.serving.models_on_offer import OfferedModel
from vllmchat.core.chat_templates import BUILTIN_TEMPLATES
from vllmchat.core.engine.info import ModelInfo
from vllmchat.core.gguf_header import GGUFHeader, read_header
from vllmchat.core.thinking import style_of
from vllmchat.core.tools.prompting import tool_format

MIB = 1 << 20
Scalar = str | int | float | bool


@dataclass(frozen=True)
class ModelCard:
    """A model on disk as its GGUF header (and, when it is loaded, the engine) tells it."""

    id: str
    path: str
    size: int  # bytes of the file
    modified: int  # the file's modification time (seconds)
    architecture: str
    parameters: int  # weights, counted from the tensor table where the header has no count
    size_label: str  # "135M", "7.6B"
    quantization: str  # "Q4_K_M" (the file type, else the type of most bytes)
    context_length: int  # tokens it was trained for (0: unknown)
    template: str  # the chat template (Jinja) the engine renders with
    capabilities: tuple[str, ...]  # "completion", "tools", "vision", "thinking"
    metadata: Mapping[str, Scalar]  # the header's scalar values (no arrays, no template)
    license: str = ""

    @property
    def digest(self) -> str:
        """A sha256 of the file's path, size and time: it names this file (not its bytes)."""
        key = f"{os.path.realpath(self.path)}:{self.size}:{self.modified}"
        return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True)
class LoadedModel:
    """The model the engine holds: its card, its context, its memory."""

    card: ModelCard
    n_ctx: int
    memory: int  # bytes of llama.cpp's buffers (weights, KV cache, compute)
    vram: int  # of those, the bytes on a GPU
    expires_at: float | None  # time.time() when it is let go unused (None: never)


def _parameters(header: GGUFHeader) -> int:
    count = header.metadata.get("general.parameter_count")
    if isinstance(count, int) and count > 0:
        return count
    return sum(math.prod(t.shape) for t in header.tensors)


def size_label(n: int) -> str:
    """``n`` weights as models are named: 135M, 7.6B."""
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            value = n / scale
            return f"{value:.1f}{unit}" if value < 10 and unit != "M" else f"{value:.0f}{unit}"
    return str(n)


def _quantization(header: GGUFHeader) -> str:
    file_type = header.metadata.get("general.file_type")
    if isinstance(file_type, int):
        try:
            name = str(LlamaFileType(file_type).name)
        except ValueError:
            name = ""
        for prefix in ("MOSTLY_", "ALL_"):
            name = name.removeprefix(prefix)
        if name:
            return name
    by_type: dict[str, int] = {}
    for t in header.tensors:
        by_type[t.type_name] = by_type.get(t.type_name, 0) + t.n_bytes
    return max(by_type, key=by_type.__getitem__) if by_type else ""


def _scalars(metadata: Mapping[str, object]) -> dict[str, Scalar]:
    return {
        k: v
        for k, v in metadata.items()
        if isinstance(v, str | int | float | bool) and k != "tokenizer.chat_template"
    }


def model_card(model: OfferedModel, info: ModelInfo | None = None) -> ModelCard:
    """``model``'s card; ``info``: the engine's, when it is the model loaded (its template
    then is the one the engine renders with: a built-in one where the file has none)."""
    try:
        header: GGUFHeader | None = read_header(model.path)
    except (OSError, ValueError):
        header = None
    metadata = dict(header.metadata) if header is not None else {}
    template = str(metadata.get("tokenizer.chat_template") or "")
    if info is not None and info.template_source == "builtin":
        template = BUILTIN_TEMPLATES.get(info.chat_template, template)
    tools = info.tool_format if info is not None else tool_format(template) if template else ""
    thinking = info.reasoning if info is not None else style_of(template) if template else ""
    capabilities = ["completion"]
    capabilities += ["tools"] if tools else []
    capabilities += ["vision"] if (info.vision if info is not None else model.vision) else []
    capabilities += ["thinking"] if thinking else []
    parameters = _parameters(header) if header is not None else 0
    label = metadata.get("general.size_label")
    scalars = _scalars(metadata)
    if parameters:
        scalars.setdefault("general.parameter_count", parameters)
    architecture = header.architecture if header is not None else ""
    if architecture and model.context_length:
        scalars.setdefault(f"{architecture}.context_length", model.context_length)
    return ModelCard(
        id=model.id,
        path=model.path,
        size=model.size,
        modified=model.created,
        architecture=architecture,
        parameters=parameters,
        size_label=label if isinstance(label, str) and label else size_label(parameters),
        quantization=_quantization(header) if header is not None else "",
        context_length=model.context_length,
        template=template,
        capabilities=tuple(capabilities),
        metadata=scalars,
        license=str(metadata.get("general.license") or ""),
    )


def loaded_model(card: ModelCard, info: ModelInfo, expires_at: float | None) -> LoadedModel:
    """The loaded model's card with what its buffers hold (the file's size where
    llama.cpp reported none)."""
    buffers = info.buffers_mib
    memory = int(sum(buffers.values()) * MIB) or info.size_bytes or card.size
    vram = int(sum(v for k, v in buffers.items() if "CPU" not in k.split(":")[-1]) * MIB)
    return LoadedModel(card, info.n_ctx, memory, vram, expires_at)

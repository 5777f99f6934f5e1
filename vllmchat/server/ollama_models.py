"""Ollama's answers about models: ``/api/show`` (a model's details, template,
parameters and capabilities) and ``/api/ps`` (the model loaded, its memory)."""

from __future__ import annotations

import datetime
from typing import Any

from vllmchat.core.app.serving.model_card import LoadedModel, ModelCard
from vllmchat.core.settings import SamplingSettings

# Ollama's "kept loaded for ever": the longest duration its clock can add.
FOREVER = datetime.timedelta(microseconds=(2**63 - 1) // 1000)


def stamp(seconds: float) -> str:
    """A time as Ollama writes one (RFC 3339, UTC)."""
    at = datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)
    return at.isoformat().replace("+00:00", "Z")


def details(card: ModelCard) -> dict[str, Any]:
    return {
        "parent_model": "",
        "format": "gguf",
        "family": card.architecture,
        "families": [card.architecture] if card.architecture else None,
        "parameter_size": card.size_label,
        "quantization_level": card.quantization,
    }


def parameters(sampling: SamplingSettings, n_ctx: int) -> list[tuple[str, Any]]:
    """The settings a turn runs with unless the request says otherwise, by Ollama's names."""
    found: list[tuple[str, Any]] = [
        ("num_ctx", n_ctx),
        ("num_predict", sampling.max_tokens),
        ("temperature", sampling.temperature),
        ("top_k", sampling.top_k),
        ("top_p", sampling.top_p),
        ("min_p", sampling.min_p),
        ("repeat_penalty", sampling.repeat_penalty),
    ]
    return found + ([("seed", sampling.seed)] if sampling.seed >= 0 else [])


def modelfile(card: ModelCard, values: list[tuple[str, Any]]) -> str:
    """The model as an Ollama Modelfile would write it (its template is Jinja, as in
    the GGUF, not Go's)."""
    lines = [f"# Modelfile of {card.id}, as vllmchat serves it", f"FROM {card.path}"]
    if card.template:
        lines.append(f'TEMPLATE """{card.template}"""')
    lines += [f"PARAMETER {name} {value}" for name, value in values]
    if card.license:
        lines.append(f'LICENSE """{card.license}"""')
    return "\n".join(lines) + "\n"


def show(card: ModelCard, sampling: SamplingSettings, n_ctx: int) -> dict[str, Any]:
    """``/api/show``'s answer: ``model_info`` holds the header's values, among them
    ``{architecture}.context_length``."""
    values = parameters(sampling, n_ctx)
    return {
        "modelfile": modelfile(card, values),
        "parameters": "\n".join(f"{name:<30} {value}" for name, value in values),
        "template": card.template,
        "license": card.license,
        "details": details(card),
        "model_info": dict(card.metadata),
        "capabilities": list(card.capabilities),
        "modified_at": stamp(card.modified),
    }


def running(models: list[LoadedModel]) -> dict[str, Any]:
    """``/api/ps``'s answer."""
    now = datetime.datetime.now(datetime.timezone.utc)
    return {
        "models": [
            {
                "name": m.card.id,
                "model": m.card.id,
                "size": m.memory,
                "digest": m.card.digest,
                "details": details(m.card),
                "expires_at": stamp(m.expires_at)
                if m.expires_at is not None
                else (now + FOREVER).isoformat().replace("+00:00", "Z"),
                "size_vram": m.vram,
                "context_length": m.n_ctx,
            }
            for m in models
        ]
    }

"""An engine that replays recorded token streams of reasoning models.

No reasoning model can run here (the demo models do not think), so these
streams, as Qwen3, DeepSeek-R1 distills and gpt-oss emit them token by token,
stand in for one. It records the prompts it was given.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace

from vllmchat.core.engine.events import DoneEvent, StatsEvent, TokenEvent, TurnStats
from vllmchat.core.engine.info import ModelInfo
from vllmchat.core.engine.protocol import Capabilities
from vllmchat.core.settings import SamplingSettings

QWEN3 = [
    "<think>",
    "\n",
    "The",
    " user",
    " asks",
    " for",
    " the",
    " capital",
    ".",
    " Easy",
    ".",
    "\n",
    "</think>",
    "\n\n",
    "The",
    " capital",
    " of",
    " France",
    " is",
    " Paris",
    ".",
]
R1 = ["Okay", ",", " two", " plus", " two", ".", "\n", "</think>", "\n\n", "It", " is", " 4", "."]
GPT_OSS = [
    "<|channel|>",
    "analysis",
    "<|message|>",
    "User",
    " wants",
    " a",
    " greeting",
    ".",
    "<|end|>",
    "<|start|>",
    "assistant",
    "<|channel|>",
    "final",
    "<|message|>",
    "Hello",
    " there",
    "!",
]
INFO = ModelInfo(
    path="recorded.gguf",
    architecture="qwen3",
    n_layer=1,
    n_ctx_train=4096,
    n_ctx=4096,
    n_vocab=1,
    n_params=1,
    size_bytes=1,
    n_swa=0,
    chat_template="gguf",
    template_source="gguf",
    gpu_offload=False,
    load_s=0.0,
    name="Recorded",
    reasoning="think",
)


class RecordedEngine:
    """Replays ``streams`` in order, one per chat request."""

    capabilities = Capabilities()

    def __init__(self, streams: list[list[str]], info: ModelInfo = INFO) -> None:
        self.streams = list(streams)
        self.info: ModelInfo | None = info
        self.settings = None
        self.prompts: list[list[dict[str, str]]] = []
        self.sampling: list[SamplingSettings] = []

    alive = True

    def chat(
        self, messages: Sequence[Mapping[str, str]], sampling: SamplingSettings
    ) -> Iterator[object]:
        self.prompts.append([dict(m) for m in messages])
        self.sampling.append(sampling)
        stream = self.streams.pop(0) if self.streams else ["Done", "."]
        for i, piece in enumerate(stream):
            yield TokenEvent(piece, i)
        stats = TurnStats(
            prompt_tokens=len(self.render(messages)),
            tokens_reused=0,
            tokens_prefilled=1,
            tokens_new=1,
            n_ctx=4096,
            decode_tokens=len(stream),
        )
        yield StatsEvent(stats)
        yield DoneEvent("".join(stream), "eos", replace(stats), tuple(range(len(stream))))

    def stop(self) -> None:
        pass

    def tokenize(self, text: str) -> list[int]:
        return [0] * max(1, len(text) // 4)

    def render(self, messages: Sequence[Mapping[str, str]]) -> list[int]:
        return [0] * sum(len(self.tokenize(m["content"])) + 4 for m in messages)

    def remember_replies(self, replies: object) -> None:
        pass

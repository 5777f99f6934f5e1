"""A loaded llama.cpp model with one chat session (runs inside the engine process)."""

from __future__ import annotations

import ctypes
import json
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import llama_cpp  # before numpy: the CUDA build segfaults in the other order

from vllmchat.core.chat_format import TemplateError, prompt_tokens, render_segments
from vllmchat.core.chat_templates import BUILTIN_TEMPLATES, builtin_template_for
from vllmchat.core.engine.failures import decode_error
from vllmchat.core.engine.images import MEDIA_MARKER, check_images
from vllmchat.core.engine.info import ModelInfo
from vllmchat.core.engine.model_check import check_model_file
from vllmchat.core.engine.process.inference.draft_model import DraftModel
from vllmchat.core.engine.process.inference.model_load import (
    exactness_at,
    expert_overrides,
    open_llama,
)
from vllmchat.core.engine.process.inference.speculative import Speculator
from vllmchat.core.engine.process.inference.vision import Vision
from vllmchat.core.engine.process.llama import llama_log
from vllmchat.core.engine.process.llama.llama_adapter import (
    WINDOW_SEQ,
    decode_all_logits,
    drop_kv_after,
    evaluate,
)
from vllmchat.core.engine.process.llama.seq_state import load_seq_state, seq_state
from vllmchat.core.models.advisor import display_name
from vllmchat.core.settings import LoadSettings, within_cores
from vllmchat.core.thinking import HARMONY_MARKERS, THINK_OPEN, style_of
from vllmchat.core.tools.prompting import tool_format

_SPECIAL_ATTRS = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL  # user-defined tokens (e.g. "\n") are text


class LlamaRuntime:
    """One ``llama_cpp.Llama`` and the token ids of its KV cache."""

    def __init__(self, settings: LoadSettings) -> None:
        header = check_model_file(settings.model_path)
        self.settings = settings = settings.on_usable_cores()
        self.overrides = expert_overrides(header, settings)  # alive as long as the model
        start = time.perf_counter()
        llama_log.install()
        mark = llama_log.mark()
        self.llm = open_llama(settings, header, self.overrides, mark)
        self.load_s = time.perf_counter() - start
        self._vocab = llama_cpp.llama_model_get_vocab(self.llm.model)
        self._piece_buf = ctypes.create_string_buffer(256)
        self._token_cache: OrderedDict[tuple[str, bool], list[int]] = OrderedDict()
        self.pending: int | None = None  # last sampled token not yet in the KV cache
        self._replies: OrderedDict[str, list[int]] = OrderedDict()
        self._markup_cache: dict[str, list[str | int]] = {}
        self._last_render: tuple[object, tuple[int, ...]] | None = None
        gpu = settings.placement.uses_gpu and bool(llama_cpp.llama_supports_gpu_offload())
        self.exactness = exactness_at(self.llm, settings, header, gpu)
        self.speculator = Speculator(gpu=gpu, max_batch=self.exactness.max_batch)
        self.draft: DraftModel | None = None
        if settings.draft_model:
            self.draft = DraftModel(settings, self.llm)  # refused with the reason
        self.vision: Vision | None = None
        if settings.mmproj_path:
            try:
                self.vision = Vision(self.llm, settings)  # refused with the reason
            except BaseException:
                self.close()
                raise
        self.template, source = self._pick_template()
        self.reasoning = style_of(self.template)
        self.passthrough = self._harmony_markers() if self.reasoning == "harmony" else frozenset()
        self.info = self._describe(header, source, mark)
        self.beside: Callable[[], None] | None = None  # other sequences' step (API slots)
        # One KV cache, no sliding-window or recurrent part: a sequence's saved state
        # moves between contexts of other numbers of sequences (``seq_state``).
        model = self.llm.model
        self.plain_kv = self.info.n_swa <= 0 and not (
            llama_cpp.llama_model_is_recurrent(model) or llama_cpp.llama_model_is_hybrid(model)
        )
        self._abort_check: Callable[[], bool] | None = None

    def _buffers(self, mark: int) -> dict[str, float]:
        """llama.cpp's buffers (MiB by ``kind:device``), the projector's apart."""
        vision = self.vision
        own = llama_log.lines_since(mark, vision.log_start if vision is not None else None)
        return llama_log.buffer_sizes(own) | (vision.buffers_mib if vision is not None else {})

    def _describe(self, header: Any, source: str, mark: int) -> ModelInfo:
        """What the runtime has loaded, for the client (its log read since ``mark``)."""
        model, settings, vision = self.llm.model, self.settings, self.vision
        return ModelInfo(
            path=os.path.abspath(settings.model_path),
            architecture=header.architecture,
            n_layer=llama_cpp.llama_model_n_layer(model),
            n_ctx_train=llama_cpp.llama_model_n_ctx_train(model),
            n_ctx=self.n_ctx,
            api_slots=settings.api_slots,
            n_vocab=self.llm.n_vocab(),
            n_params=int(llama_cpp.llama_model_n_params(model)),
            size_bytes=int(llama_cpp.llama_model_size(model)),
            n_swa=llama_cpp.llama_model_n_swa(model),
            chat_template=self.template_name,
            template_source=source,
            gpu_offload=bool(llama_cpp.llama_supports_gpu_offload()),
            load_s=self.load_s,
            buffers_mib=self._buffers(mark),
            name=display_name(settings.model_path),
            overridden=llama_log.overridden_tensors(llama_log.lines_since(mark)),
            reasoning=self.reasoning,
            thinking_opens=self._prompt_opens_thinking(),
            thinking_toggle="enable_thinking" in self.template,
            exact_verify=self.exactness.exact,
            exact_verify_reason=self.exactness.reason,
            vision=vision is not None,
            mmproj_path=os.path.abspath(settings.mmproj_path) if vision else "",
            image_tokens=vision.info.image_tokens if vision else 0,
            image_max_side=vision.max_side if vision else 0,
            tool_format=tool_format(self.template),
        )

    def _harmony_markers(self) -> frozenset[int]:
        """gpt-oss's channel markers: control tokens that are part of the reply's text."""
        ids = (self.tokenize(m, special=True) for m in HARMONY_MARKERS)
        return frozenset(t[0] for t in ids if len(t) == 1)

    def _prompt_opens_thinking(self) -> bool:
        """Whether the template's generation prompt ends inside ``<think>``."""
        if self.reasoning != "think":
            return False
        try:
            segments = render_segments(
                self.template, [{"role": "user", "content": "?"}], bos_token="", eos_token=""
            )
        except TemplateError:
            return False
        return "".join(s.text for s in segments).rstrip().endswith(THINK_OPEN)

    def is_stop(self, token: int) -> bool:
        """End of the reply: end of generation, or a control token that is not text."""
        if self.is_eog(token):
            return True
        return self.is_special(token) and token not in self.passthrough

    # -- vocabulary -------------------------------------------------------
    def raw_prompt(self, text: str) -> list[int]:
        """Token ids of a prompt given as text, without a chat template (a completion)."""
        ids = list(self.tokenize(text, special=False))
        bos = self.llm.token_bos()
        if llama_cpp.llama_vocab_get_add_bos(self._vocab) and bos >= 0 and ids[:1] != [bos]:
            ids.insert(0, bos)
        return ids

    def tokenize(self, text: str, *, special: bool) -> list[int]:
        """Token ids of ``text``; repeated history pieces come from a cache."""
        key = (text, special)
        ids = self._token_cache.get(key)
        if ids is None:
            ids = self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=special)
            self._token_cache[key] = ids
            if len(self._token_cache) > 4096:
                self._token_cache.popitem(last=False)
        else:
            self._token_cache.move_to_end(key)
        return list(ids)

    def is_special(self, token: int) -> bool:
        return bool(llama_cpp.llama_vocab_get_attr(self._vocab, token) & _SPECIAL_ATTRS)

    def token_text(self, token: int) -> str:
        text: bytes = llama_cpp.llama_vocab_get_text(self._vocab, token)
        return text.decode("utf-8", "replace")

    def is_eog(self, token: int) -> bool:
        return bool(llama_cpp.llama_vocab_is_eog(self._vocab, token))

    def piece(self, token: int) -> bytes:
        if token in self.passthrough:
            return self.token_text(token).encode()
        n = llama_cpp.llama_token_to_piece(self._vocab, token, self._piece_buf, 256, 0, False)
        return self._piece_buf.raw[: max(n, 0)]

    def _has_token(self, text: str) -> bool:
        ids = self.tokenize(text, special=True)
        return len(ids) == 1 and self.is_special(ids[0])

    def _pick_template(self) -> tuple[str, str]:
        own = self.llm.metadata.get("tokenizer.chat_template")
        if own:
            self.template_name = "gguf"
            return own, "gguf"
        arch = self.llm.metadata.get("general.architecture", "")
        self.template_name = builtin_template_for(arch, self._has_token)
        return BUILTIN_TEMPLATES[self.template_name], "builtin"

    def _special_text(self, token: int) -> str:
        return self.token_text(token) if token >= 0 else ""

    # -- prompt -----------------------------------------------------------
    def render(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        thinking: bool = True,
        images: Sequence[bytes] = (),
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> list[int]:
        """Token ids of the chat prompt, ending with the assistant's turn opener
        (``thinking`` False: the template's ``enable_thinking`` is off). Each
        ``MEDIA_MARKER`` in a message becomes the next image of ``images``: its
        wrapper's tokens and its positions' ids (negative, ``vision.py``).

        The last rendering is remembered (a turn renders what its plan just
        rendered), and markup and message pieces are tokenized once per chat.
        """
        check_images(messages, len(images), vision=self.vision is not None)
        keys = tuple(self.vision.begin_turn(images)) if self.vision is not None else ()
        key = (
            thinking,
            tuple((m["role"], m["content"]) for m in messages),
            keys,
            json.dumps(tools, sort_keys=True) if tools else "",
        )
        if self._last_render is not None and self._last_render[0] == key:
            return list(self._last_render[1])
        ids = self._render(messages, thinking, keys, tools)
        self._last_render = (key, tuple(ids))
        return ids

    def _render(
        self,
        messages: Sequence[Mapping[str, str]],
        thinking: bool,
        keys: Sequence[str] = (),
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> list[int]:
        media = None
        if keys and self.vision is not None:
            vision, order = self.vision, iter(keys)
            media = (MEDIA_MARKER, lambda: vision.expand(next(order)))
        segments = render_segments(
            self.template,
            messages,
            bos_token=self._special_text(self.llm.token_bos()),
            eos_token=self._special_text(self.llm.token_eos()),
            enable_thinking=thinking,
            tools=tools,
        )
        ids = prompt_tokens(
            segments,
            self,
            roles=[m["role"] for m in messages],
            known_replies=self._replies,
            markup_cache=self._markup_cache,
            media=media,
        )
        bos = self.llm.token_bos()
        if llama_cpp.llama_vocab_get_add_bos(self._vocab) and bos >= 0 and ids[:1] != [bos]:
            ids.insert(0, bos)
        return ids

    def remember_reply(self, text: str, ids: list[int]) -> None:
        """Keep a generated reply's exact ids so the next turn reuses its KV cache."""
        self._last_render = None  # a known reply renders as its sampled ids
        self._replies[text] = list(ids)
        self._replies.move_to_end(text)
        while len(self._replies) > 512:
            self._replies.popitem(last=False)

    # -- KV cache ---------------------------------------------------------
    @property
    def n_ctx(self) -> int:
        # A sequence's share of the context (llama.cpp may pad it); llama-cpp-python's
        # token buffer is the whole context long.
        per_seq = int(llama_cpp.llama_n_ctx_seq(self.llm.ctx))
        return min(per_seq, len(self.llm.input_ids))

    @property
    def kv_tokens(self) -> list[int]:
        ids: list[int] = self.llm.input_ids[: self.llm.n_tokens].tolist()
        return ids

    def truncate(self, n_keep: int) -> int:
        """Drop the KV cache after ``n_keep`` tokens; returns the tokens kept."""
        llm = self.llm
        if n_keep >= llm.n_tokens:
            return llm.n_tokens
        mem = llama_cpp.llama_get_memory(llm.ctx)
        if n_keep > 0 and self._window_intact(mem, n_keep) and drop_kv_after(llm, n_keep):
            llm.n_tokens = n_keep
            return n_keep
        llama_cpp.llama_memory_seq_rm(mem, WINDOW_SEQ, -1, -1)  # the window's cells only
        llm.n_tokens = 0
        return 0

    def _window_intact(self, mem: Any, n_keep: int) -> bool:
        """Whether a sliding-window cache still holds the window before ``n_keep``.

        Without a full-size SWA cache, cells older than the window are reused;
        keeping a prefix whose window is gone would silently attend to less.
        """
        n_swa = self.info.n_swa if hasattr(self, "info") else 0
        if n_swa <= 0 or self.settings.swa_full:
            return True
        pos_min: int = llama_cpp.llama_memory_seq_pos_min(mem, 0)
        return pos_min <= max(0, n_keep - n_swa)

    def decode(self, tokens: Sequence[int]) -> None:
        """Evaluate tokens; raises ``EngineError`` with the reason when llama.cpp fails."""
        try:
            evaluate(self.llm, tokens)
        except RuntimeError as exc:
            self.truncate(self.llm.n_tokens)  # drop ubatches of an aborted batch
            raise decode_error(str(exc), self.llm.n_tokens, self.n_ctx) from exc

    def decode_with_logits(self, tokens: list[int]) -> None:
        """Evaluate a few tokens keeping every one's logits (a speculative verify)."""
        try:
            decode_all_logits(self.llm, tokens)
        except RuntimeError as exc:
            self.truncate(self.llm.n_tokens)
            raise decode_error(str(exc), self.llm.n_tokens, self.n_ctx) from exc

    def save_state(self) -> tuple[bytearray, list[int]]:
        """The window sequence's state bytes and the token ids they hold (other
        sequences' cells are not in it)."""
        return seq_state(self.llm.ctx, WINDOW_SEQ), self.kv_tokens

    def restore_state(self, data: bytes | bytearray, tokens: Sequence[int]) -> bool:
        """Load saved state bytes; False (and an empty cache) when they do not fit."""
        if len(tokens) >= self.n_ctx:
            return False
        if not load_seq_state(self.llm.ctx, WINDOW_SEQ, data, plain=self.plain_kv):
            self.truncate(0)
            return False
        self.llm.input_ids[: len(tokens)] = tokens
        self.llm.n_tokens = len(tokens)
        self.pending = None
        return True

    def set_threads(self, n_threads: int, n_threads_batch: int) -> None:
        """Change the CPU threads for decoding and for prompts, live."""
        n_threads, n_threads_batch = within_cores(n_threads), within_cores(n_threads_batch)
        llama_cpp.llama_set_n_threads(self.llm.ctx, n_threads, n_threads_batch)
        self.settings = self.settings.with_changes(
            n_threads=n_threads, n_threads_batch=n_threads_batch
        )

    def lend_a_core(self, lent: bool) -> bool:
        """Decode on one thread fewer while ``lent``, on the settings' threads again after;
        False where the decode has no thread to spare."""
        n = self.settings.n_threads
        if lent and n < 2:
            return False
        threads = n - 1 if lent else n
        llama_cpp.llama_set_n_threads(self.llm.ctx, threads, self.settings.threads_batch)
        return True

    def step_beside(self) -> None:
        """Let the other sequences (API slots) take one batched step: called by a window
        turn where the context's logits are not needed until its next decode."""
        beside = self.beside
        if beside is None:
            return
        check = self._abort_check
        self.set_abort(None)  # a stop of the window's turn is not theirs
        try:
            beside()
        finally:
            self.set_abort(check)

    def set_abort(self, check: Callable[[], bool] | None) -> None:
        """Install (or clear) llama.cpp's abort callback, used to stop a long prefill."""
        self._abort_check = check
        if check is None:
            llama_cpp.llama_set_abort_callback(self.llm.ctx, _NO_ABORT, None)
            self._abort_cb = None
            return
        self._abort_cb = llama_cpp.ggml_abort_callback(lambda _data: bool(check()))
        llama_cpp.llama_set_abort_callback(self.llm.ctx, self._abort_cb, None)

    def close(self) -> None:
        self.drop_draft()
        vision: Vision | None = getattr(self, "vision", None)
        if vision is not None:
            vision.close()
            self.vision = None
        self.llm.close()

    def drop_draft(self) -> None:
        """End the draft model (closed, or its state broke); speculation goes on without it."""
        if self.draft is not None:
            self.draft.close()
            self.draft = None


_NO_ABORT = ctypes.cast(None, llama_cpp.ggml_abort_callback)  # type: ignore[arg-type]

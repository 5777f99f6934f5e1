"""Every use of llama-cpp-python's private members and internals, in one place.

llama-cpp-python has no public API for sampling one token from the context's
logits with its sampler chain, for removing KV cells after a position, or for
passing ``tensor_buft_overrides`` to the loader, and images go through its mtmd
bindings (a projector beside the model, an image's chunks, their encoding and
decoding into the KV cache). These functions do it through
its internals; ``missing()`` lists what an upgrade removed, and
``tests/test_llama_adapter.py`` exercises each function, so an upgrade breaks
here with a clear failure rather than deep inside a turn.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import llama_cpp
import llama_cpp.llama_cpp as llama_api
import numpy as np
from llama_cpp.llama_grammar import LlamaGrammar

from vllmchat.core.engine.events import EngineError, ErrorKind
from vllmchat.core.engine.exactness import BuildMarker
from vllmchat.core.engine.process.llama import llama_log
from vllmchat.core.engine.process.llama.greedy import GreedySampler
from vllmchat.core.settings import SamplingSettings

REQUIRED = ((llama_cpp.Llama, "_init_sampler"), (llama_api, "llama_model_default_params"))
REQUIRED_ON_A_MODEL = ("_ctx", "_batch")  # set by ``Llama.__init__``


def missing(llm: llama_cpp.Llama | None = None) -> list[str]:
    """The internals this module relies on that this llama-cpp-python lacks (those of
    a loaded model too, when one is given)."""
    out = [
        f"{getattr(owner, '__name__', owner)}.{name}"
        for owner, name in REQUIRED
        if not hasattr(owner, name)
    ]
    if llm is not None:
        out += [f"Llama().{name}" for name in REQUIRED_ON_A_MODEL if not hasattr(llm, name)]
    return out


def sampler_for(
    llm: llama_cpp.Llama,
    sampling: SamplingSettings,
    json_schema: str | None = None,
    gbnf: str | None = None,
) -> Any:
    """llama-cpp-python's sampler chain for these settings (temperature 0: the same
    greedy pick, computed on the logits, ``greedy.py``); with ``json_schema`` or a
    GBNF grammar, the chain applies llama.cpp's grammar (a constrained tool call)."""
    grammar = None
    if json_schema:
        grammar = LlamaGrammar.from_json_schema(json_schema, verbose=False)
    elif gbnf:
        grammar = LlamaGrammar.from_string(gbnf, verbose=False)
    elif sampling.temperature == 0.0:
        return GreedySampler(llm, sampling.repeat_penalty)
    return llm._init_sampler(
        top_k=sampling.top_k,
        top_p=sampling.top_p,
        min_p=sampling.min_p,
        temp=sampling.temperature,
        repeat_penalty=sampling.repeat_penalty,
        grammar=grammar,
    )


def sample_next(llm: llama_cpp.Llama, sampler: Any) -> int:
    """The next token from the logits of the last evaluated position."""
    token: int = sampler.sample(llm._ctx, -1)
    return token


def sample_at(llm: llama_cpp.Llama, sampler: Any, index: int) -> int:
    """A token from the logits of the ``index``-th position of the last batch (the
    sampler accepts it, as after ``sample_next``)."""
    token: int = sampler.sample(llm._ctx, index)
    return token


WINDOW_SEQ = 0  # the sequence of ``Llama``'s own tokens (the window's conversation)


def evaluate(llm: llama_cpp.Llama, tokens: Sequence[int]) -> None:
    """``Llama.eval`` on the window's sequence only: its cells after ``n_tokens`` are
    dropped, not every sequence's (``Llama.eval`` drops them in all)."""
    llm._ctx.kv_cache_seq_rm(WINDOW_SEQ, llm.n_tokens, -1)
    for i in range(0, len(tokens), llm.n_batch):
        batch = list(tokens[i : i + llm.n_batch])
        n_past = llm.n_tokens
        llm._batch.set_batch(batch=batch, n_past=n_past, logits_all=False)
        llm._ctx.decode(llm._batch)
        llm.input_ids[n_past : n_past + len(batch)] = batch
        llm.n_tokens += len(batch)


def decode_all_logits(llm: llama_cpp.Llama, tokens: list[int]) -> None:
    """Evaluate ``tokens`` (one batch, at most ``n_batch``) keeping the logits of every
    one of them, not of the whole context (``Llama.eval`` keeps the last only)."""
    llm._ctx.kv_cache_seq_rm(WINDOW_SEQ, llm.n_tokens, -1)
    n_past = llm.n_tokens
    llm._batch.set_batch(batch=tokens, n_past=n_past, logits_all=True)
    llm._ctx.decode(llm._batch)
    llm.input_ids[n_past : n_past + len(tokens)] = tokens
    llm.n_tokens += len(tokens)


def drop_kv_after(llm: llama_cpp.Llama, n_keep: int) -> bool:
    """Remove the window sequence's KV cells from ``n_keep`` on (False: refused)."""
    return bool(llm._ctx.kv_cache_seq_rm(WINDOW_SEQ, n_keep, -1))


@contextlib.contextmanager
def context_sequences(n_seq: int) -> Iterator[None]:
    """While a ``llama_cpp.Llama`` is built, its context holds ``n_seq`` sequences, each
    in its own part of the KV cache (llama-cpp-python sets neither for a chat model)."""
    if n_seq <= 1:
        yield
        return
    original = llama_api.llama_context_default_params

    def patched() -> Any:
        params = original()
        params.n_seq_max = n_seq
        params.kv_unified = False
        return params

    llama_api.llama_context_default_params = patched
    llama_cpp.llama_context_default_params = patched
    try:
        yield
    finally:
        llama_api.llama_context_default_params = original
        llama_cpp.llama_context_default_params = original


@contextlib.contextmanager
def loader_overrides(address: int | None) -> Iterator[None]:
    """While a ``llama_cpp.Llama`` is built, its model parameters carry the
    ``tensor_buft_overrides`` array at ``address`` (llama-cpp-python never sets it)."""
    if not address:
        yield
        return
    original = llama_api.llama_model_default_params

    def patched() -> Any:
        params = original()
        params.tensor_buft_overrides = address
        return params

    llama_api.llama_model_default_params = patched
    try:
        yield
    finally:
        llama_api.llama_model_default_params = original


def batch_invariant_build() -> BuildMarker:
    """The marker module vllmchat's set-up writes into its llama.cpp build
    (``setup/batch_invariant.py``); an empty one for any other build."""
    try:
        marker = importlib.import_module("llama_cpp._vllmchat_build")
    except ImportError:
        return BuildMarker()
    return BuildMarker(
        covers=frozenset(str(c) for c in marker.COVERS),
        verify_rows_exact=int(marker.VERIFY_ROWS_EXACT),
        verify_rows_gpu=int(marker.VERIFY_ROWS_GPU),
    )


# -- images: llama.cpp's mtmd library ----------------------------------------------------
def mtmd_missing() -> list[str]:
    """What this llama-cpp-python lacks for images ([] when its mtmd library loads)."""
    try:
        import llama_cpp.mtmd_cpp as mtmd
    except (ImportError, OSError, FileNotFoundError) as exc:
        return [f"llama_cpp.mtmd_cpp ({exc})"]
    return [name for name in _MTMD_CALLS if not hasattr(mtmd, name)]


_MTMD_CALLS = (
    "mtmd_default_marker",
    "mtmd_init_from_file",
    "mtmd_helper_bitmap_init_from_buf",
    "mtmd_tokenize",
    "mtmd_encode_chunk",
    "mtmd_get_output_embd",
    "mtmd_helper_decode_image_chunk",
    "mtmd_input_chunk_get_n_pos",
    "mtmd_helper_log_set",
)


def media_marker() -> str:
    """mtmd's default media marker (the text that places an image in a prompt)."""
    import llama_cpp.mtmd_cpp as mtmd

    return bytes(mtmd.mtmd_default_marker()).decode()


@dataclass
class ImageChunks:
    """One image tokenized by mtmd: ``parts`` in order, a list of text token ids or an
    image chunk (``images`` holds those chunks); freed by ``close``."""

    handle: Any
    parts: list[list[int] | ImageChunk]
    images: list[Any]

    def close(self) -> None:
        import llama_cpp.mtmd_cpp as mtmd

        if self.handle is not None:
            mtmd.mtmd_input_chunks_free(self.handle)
            self.handle = None


@dataclass(frozen=True)
class ImageChunk:
    n_tokens: int
    n_pos: int


def open_projector(llm: llama_cpp.Llama, path: str, *, n_threads: int, use_gpu: bool) -> Any:
    """mtmd's context for the projector at ``path`` beside ``llm`` (None: refused; the
    reason is in llama.cpp's log, which mtmd's log joins)."""
    try:
        import llama_cpp.mtmd_cpp as mtmd
    except (ImportError, OSError, FileNotFoundError) as exc:
        raise EngineError(
            ErrorKind.BAD_REQUEST,
            f"This llama.cpp build has no multimodal library (mtmd): {exc}",
            "Rebuild llama.cpp with it: scripts/setup.sh llama",
        ) from exc
    llama_log.install_mtmd(mtmd)
    params = mtmd.mtmd_context_params_default()
    params.use_gpu = use_gpu
    params.print_timings = False
    params.n_threads = n_threads
    params.warmup = True  # the encoder's compute buffer is reserved now, not at the first image
    # Flash attention wherever the backend has it (llama.cpp's own default): without
    # it the encoder holds every head's n x n scores, 1 GiB for a 4096-patch SigLIP.
    params.flash_attn_type = llama_api.LLAMA_FLASH_ATTN_TYPE_AUTO
    return mtmd.mtmd_init_from_file(path.encode(), llm.model, params)


def close_projector(ctx: Any) -> None:
    import llama_cpp.mtmd_cpp as mtmd

    mtmd.mtmd_free(ctx)


def _bitmap(ctx: Any, data: bytes, max_side: int) -> Any:
    """The decoded image, scaled down (ratio kept) when its longer side passes ``max_side``."""
    import llama_cpp.mtmd_cpp as mtmd

    buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
    bitmap = mtmd.mtmd_helper_bitmap_init_from_buf(ctx, buf, len(data), False)
    if not bitmap:
        return None
    nx, ny = mtmd.mtmd_bitmap_get_nx(bitmap), mtmd.mtmd_bitmap_get_ny(bitmap)
    if max(nx, ny) <= max_side or mtmd.mtmd_bitmap_is_audio(bitmap):
        return bitmap
    n_bytes = mtmd.mtmd_bitmap_get_n_bytes(bitmap)
    raw = ctypes.string_at(mtmd.mtmd_bitmap_get_data(bitmap), n_bytes)
    mtmd.mtmd_bitmap_free(bitmap)
    pixels = shrink(np.frombuffer(raw, dtype=np.uint8).reshape(ny, nx, 3), max_side)
    h, w = pixels.shape[:2]
    out = (ctypes.c_uint8 * pixels.size).from_buffer_copy(pixels.tobytes())
    return mtmd.mtmd_bitmap_init(w, h, out)


def shrink(pixels: np.ndarray, max_side: int) -> np.ndarray:
    """RGB pixels scaled down by area averaging so the longer side is ``max_side``."""
    h, w = pixels.shape[:2]
    scale = max_side / max(h, w)
    if scale >= 1:
        return pixels
    nh, nw = max(1, round(h * scale)), max(1, round(w * scale))
    acc = pixels.astype(np.float32)
    for axis, size, n in ((0, h, nh), (1, w, nw)):
        starts = (np.arange(n) * size) // n
        counts = np.diff(np.append(starts, size)).astype(np.float32)
        acc = np.add.reduceat(acc, starts, axis=axis)
        acc /= counts.reshape((-1, 1, 1) if axis == 0 else (1, -1, 1))
    out: np.ndarray = np.clip(acc + 0.5, 0, 255).astype(np.uint8)
    return out


def tokenize_image(ctx: Any, data: bytes, key: str, max_side: int) -> ImageChunks:
    """One image's chunks (``EngineError`` when it is not an image mtmd can read)."""
    import llama_cpp.mtmd_cpp as mtmd

    bitmap = _bitmap(ctx, data, max_side)
    if not bitmap:
        raise EngineError(
            ErrorKind.BAD_REQUEST,
            "An image could not be read (PNG, JPEG, BMP, GIF, TGA, PSD and HDR are taken).",
        )
    chunks = mtmd.mtmd_input_chunks_init()
    try:
        mtmd.mtmd_bitmap_set_id(bitmap, key.encode())
        text = mtmd.mtmd_input_text()
        marker = mtmd.mtmd_default_marker()
        text.text, text.text_len = marker, len(marker)
        text.add_special, text.parse_special = False, True
        bitmaps = (mtmd.mtmd_bitmap_p_ctypes * 1)(bitmap)
        status = mtmd.mtmd_tokenize(ctx, chunks, ctypes.byref(text), bitmaps, 1)
    finally:
        mtmd.mtmd_bitmap_free(bitmap)
    if status != 0:
        mtmd.mtmd_input_chunks_free(chunks)
        raise EngineError(ErrorKind.BAD_REQUEST, f"mtmd could not take the image ({status}).")
    out = ImageChunks(chunks, [], [])
    for i in range(mtmd.mtmd_input_chunks_size(chunks)):
        chunk = mtmd.mtmd_input_chunks_get(chunks, i)
        if mtmd.mtmd_input_chunk_get_type(chunk) == mtmd.MTMD_INPUT_CHUNK_TYPE_TEXT:
            n = ctypes.c_size_t()
            ptr = mtmd.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(n))
            out.parts.append([ptr[j] for j in range(n.value)])
        else:
            n_tokens = mtmd.mtmd_input_chunk_get_n_tokens(chunk)
            out.parts.append(ImageChunk(n_tokens, mtmd.mtmd_input_chunk_get_n_pos(chunk)))
            out.images.append(chunk)
    return out


def encode_chunk(ctx: Any, chunk: Any) -> int:
    """Run the projector on an image chunk (0: done); its output waits in ``ctx``."""
    import llama_cpp.mtmd_cpp as mtmd

    return int(mtmd.mtmd_encode_chunk(ctx, chunk))


def decode_image(
    ctx: Any, llm: llama_cpp.Llama, chunk: Any, n_past: int, n_batch: int
) -> tuple[int, int]:
    """Decode the last encoded chunk's embeddings into the KV cache at ``n_past``;
    returns llama_decode's status and the next position."""
    import llama_cpp.mtmd_cpp as mtmd

    llm._ctx.kv_cache_seq_rm(WINDOW_SEQ, n_past, -1)
    embd = mtmd.mtmd_get_output_embd(ctx)
    new_n_past = llama_api.llama_pos(0)
    status = mtmd.mtmd_helper_decode_image_chunk(
        ctx,
        llm.ctx,
        chunk,
        embd,
        n_past,
        0,
        n_batch,
        ctypes.byref(new_n_past),
        mtmd.mtmd_helper_post_decode_callback(),
        None,  # no callback: a NULL pointer
    )
    return int(status), int(new_n_past.value)

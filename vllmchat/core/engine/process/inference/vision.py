"""Images in the engine process: the projector beside the model, an image's place in
the prompt, and its evaluation into the KV cache.

An image expands to the text tokens the projector wraps it in and one or more image
chunks. In the prompt and in the record of the KV cache (``llm.input_ids``) an image
chunk's positions hold negative ids derived from the image's id (the SHA-256 of its
bytes, salted with the projector's identity), distinct per position. Text tokens are
never negative, so the prefix comparison that reuses text reuses an image exactly when
the same image sits at the same place; and the saved KV state, which stores that
record, brings the images back after a restart with no image encoded.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import llama_cpp  # before numpy: the CUDA build segfaults in the other order

from vllmchat.core.engine.events import EngineError, ErrorKind
from vllmchat.core.engine.images import MAX_IMAGE_SIDE, image_id
from vllmchat.core.engine.model_check import check_model_file, model_fingerprint
from vllmchat.core.engine.process.llama import llama_adapter as adapter
from vllmchat.core.engine.process.llama import llama_log
from vllmchat.core.models.projector import ProjectorInfo, describe_projector, max_image_side
from vllmchat.core.settings import LoadSettings

_LAYOUTS_KEPT = 256  # images whose expansion is remembered (a few ids each)


@dataclass(frozen=True)
class ImagePiece:
    """One image chunk of an image: the ids recording its KV positions."""

    key: str  # the image's id, salted with the projector's
    index: int  # which chunk of the image
    markers: tuple[int, ...]


@dataclass
class ImageSpan:
    """Where an image chunk sits in a prompt."""

    start: int
    piece: ImagePiece

    @property
    def end(self) -> int:
        return self.start + len(self.piece.markers)


@dataclass
class _Turn:
    """The images of the turn being answered: bytes by key, chunks tokenized so far."""

    data: dict[str, bytes] = field(default_factory=dict)
    chunks: dict[str, adapter.ImageChunks] = field(default_factory=dict)


def markers_for(key: str, index: int, n_pos: int) -> tuple[int, ...]:
    """``n_pos`` negative ids for chunk ``index`` of image ``key`` (30 bits each)."""
    stream = hashlib.shake_128(f"{key}:{index}".encode()).digest(4 * n_pos)
    return tuple(
        -1 - (int.from_bytes(stream[4 * i : 4 * i + 4], "little") & 0x3FFFFFFF)
        for i in range(n_pos)
    )


class Vision:
    """The projector of a loaded model, and the images it has expanded."""

    def __init__(self, llm: llama_cpp.Llama, settings: LoadSettings) -> None:
        path = settings.mmproj_path
        header = check_model_file(path)
        try:
            self.info: ProjectorInfo = describe_projector(header, path)
        except ValueError as exc:
            raise EngineError(ErrorKind.BAD_REQUEST, str(exc)) from exc
        n_embd = llama_cpp.llama_model_n_embd(llm.model)
        mismatch = self.info.fits(n_embd)
        if mismatch:
            raise EngineError(ErrorKind.BAD_REQUEST, mismatch, _FIX)
        mark = llama_log.mark()
        gpu = settings.placement.uses_gpu and bool(llama_cpp.llama_supports_gpu_offload())
        self.ctx = adapter.open_projector(llm, path, n_threads=settings.threads_batch, use_gpu=gpu)
        if self.ctx is None:
            said = [ln for ln in llama_log.lines_since(mark) if "error" in ln.lower()]
            reason = said[-1].split("error:", 1)[-1].strip() if said else "see the log"
            raise EngineError(
                ErrorKind.BAD_REQUEST,
                f"llama.cpp refused the projector {header_name(path)}: {reason}",
                _FIX,
            )
        self.log_start = mark
        self.buffers_mib = llama_log.projector_buffer_sizes(llama_log.lines_since(mark))
        self.llm = llm
        self.max_side = max_image_side(self.info, MAX_IMAGE_SIDE)
        self.salt = model_fingerprint(path)[:16]
        self.layouts: OrderedDict[str, list[int | ImagePiece]] = OrderedDict()
        self.turn = _Turn()
        self.encoded = 0  # images chunks encoded since load

    # -- the prompt -------------------------------------------------------
    def begin_turn(self, images: Sequence[bytes]) -> list[str]:
        """Take this turn's images; returns their keys, in order."""
        self.end_turn()
        keys = []
        for data in images:
            key = hashlib.sha256(f"{self.salt}:{image_id(data)}".encode()).hexdigest()[:32]
            self.turn.data[key] = data
            keys.append(key)
        return keys

    def end_turn(self) -> None:
        """Free the chunks tokenized for the turn."""
        for chunks in self.turn.chunks.values():
            chunks.close()
        self.turn = _Turn()

    def expand(self, key: str) -> list[int]:
        """The prompt ids of image ``key``: its wrapper's text ids and its chunks' markers."""
        layout = self.layouts.get(key)
        if layout is None:
            layout = self._layout(key)
            self.layouts[key] = layout
            while len(self.layouts) > _LAYOUTS_KEPT:
                self.layouts.popitem(last=False)
        else:
            self.layouts.move_to_end(key)
        ids: list[int] = []
        for part in layout:
            ids.extend(part.markers if isinstance(part, ImagePiece) else (part,))
        return ids

    def _layout(self, key: str) -> list[int | ImagePiece]:
        chunks = self._chunks(key)
        layout: list[int | ImagePiece] = []
        index = 0
        for part in chunks.parts:
            if isinstance(part, list):
                layout.extend(part)
            else:
                layout.append(ImagePiece(key, index, markers_for(key, index, part.n_pos)))
                index += 1
        return layout

    def _chunks(self, key: str) -> adapter.ImageChunks:
        chunks = self.turn.chunks.get(key)
        if chunks is None:
            data = self.turn.data[key]
            chunks = adapter.tokenize_image(self.ctx, data, key, self.max_side)
            self.turn.chunks[key] = chunks
        return chunks

    def spans(self, prompt: Sequence[int]) -> list[ImageSpan]:
        """Every image chunk of a prompt built by ``expand``, where it starts."""
        pieces = {
            part.markers[0]: part
            for key in self.turn.data
            for part in self.layouts.get(key, ())
            if isinstance(part, ImagePiece)
        }
        out: list[ImageSpan] = []
        pos = 0
        while pos < len(prompt):
            piece = pieces.get(prompt[pos]) if prompt[pos] < 0 else None
            if piece is None:
                pos += 1
                continue
            out.append(ImageSpan(pos, piece))
            pos += len(piece.markers)
        return out

    # -- evaluation -------------------------------------------------------
    def evaluate(self, span: ImageSpan, n_batch: int) -> None:
        """Encode the image chunk and decode its embeddings at the end of the KV cache."""
        llm = self.llm
        chunks = self._chunks(span.piece.key)
        chunk = chunks.images[span.piece.index]
        n_past = llm.n_tokens
        if adapter.encode_chunk(self.ctx, chunk) != 0:
            raise EngineError(ErrorKind.INTERNAL, "The projector failed to encode the image.")
        self.encoded += 1
        status, new_n_past = adapter.decode_image(self.ctx, llm, chunk, n_past, n_batch)
        if status != 0:
            adapter.drop_kv_after(llm, n_past)
            llm.n_tokens = n_past
            if status == 2:
                raise EngineError(ErrorKind.INTERNAL, "aborted")
            raise EngineError(
                ErrorKind.INTERNAL, f"llama.cpp failed to decode an image ({status})."
            )
        markers = span.piece.markers
        llm.input_ids[n_past : n_past + len(markers)] = markers
        llm.n_tokens = max(new_n_past, n_past + len(markers))

    def close(self) -> None:
        self.end_turn()
        if self.ctx is not None:
            adapter.close_projector(self.ctx)
            self.ctx = None


def header_name(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


def keep_whole_images(reuse: int, spans: Sequence[ImageSpan]) -> int:
    """The reused prefix, cut back to the start of an image chunk it would split."""
    for span in spans:
        if span.start < reuse < span.end:
            return span.start
    return reuse


_FIX = "Pick the projector (mmproj) made for this model: its repository ships it beside the model."

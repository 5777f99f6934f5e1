"""Read a GGUF header (metadata and tensor table) from a file or from bytes.

Works on a prefix of a file, so a remote model's header can be read with HTTP
range requests before downloading it. Type sizes come from the ``gguf`` package.
"""

from __future__ import annotations

import hashlib
import os
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType

GGUF_MAGIC = b"GGUF"
_SCALARS: dict[int, str] = {
    GGUFValueType.UINT8: "<B",
    GGUFValueType.INT8: "<b",
    GGUFValueType.UINT16: "<H",
    GGUFValueType.INT16: "<h",
    GGUFValueType.UINT32: "<I",
    GGUFValueType.INT32: "<i",
    GGUFValueType.FLOAT32: "<f",
    GGUFValueType.BOOL: "<?",
    GGUFValueType.UINT64: "<Q",
    GGUFValueType.INT64: "<q",
    GGUFValueType.FLOAT64: "<d",
}
_NUMPY: dict[int, str] = {
    GGUFValueType.UINT8: "<u1",
    GGUFValueType.INT8: "<i1",
    GGUFValueType.UINT16: "<u2",
    GGUFValueType.INT16: "<i2",
    GGUFValueType.UINT32: "<u4",
    GGUFValueType.INT32: "<i4",
    GGUFValueType.FLOAT32: "<f4",
    GGUFValueType.BOOL: "?",
    GGUFValueType.UINT64: "<u8",
    GGUFValueType.INT64: "<i8",
    GGUFValueType.FLOAT64: "<f8",
}
# String arrays longer than this (vocabularies) keep only their length.
_KEEP_STRINGS_UP_TO = 64


class NotGGUFError(ValueError):
    """The bytes do not start with the GGUF magic."""


class CorruptGGUFError(ValueError):
    """The header is malformed."""


class NeedMoreBytes(Exception):
    """The header continues past the bytes given; ``needed`` is a lower bound."""

    def __init__(self, needed: int) -> None:
        super().__init__(f"need at least {needed} bytes")
        self.needed = needed


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of the table: name, shape, quant type, size in bytes."""

    name: str
    shape: tuple[int, ...]
    type_id: int
    offset: int
    n_bytes: int

    @property
    def type_name(self) -> str:
        try:
            return GGMLQuantizationType(self.type_id).name
        except ValueError:
            return f"type{self.type_id}"


@dataclass
class GGUFHeader:
    """Metadata and tensor table of a GGUF file."""

    version: int
    metadata: dict[str, Any]
    tensors: list[TensorInfo]
    data_offset: int
    array_lengths: dict[str, int] = field(default_factory=dict)
    # sha256 of each string array's bytes as stored (the token list's is the
    # vocabulary's fingerprint: two models draft for each other only if it matches)
    array_digests: dict[str, str] = field(default_factory=dict)

    @property
    def data_end(self) -> int:
        """Where the last tensor's bytes end: the smallest valid file size."""
        if not self.tensors:
            return self.data_offset
        return self.data_offset + max(t.offset + t.n_bytes for t in self.tensors)

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", "unknown"))

    def arch_value(self, key: str, default: Any = None) -> Any:
        """A ``{architecture}.{key}`` metadata value."""
        return self.metadata.get(f"{self.architecture}.{key}", default)


def tensor_nbytes(type_id: int, shape: tuple[int, ...]) -> int:
    """Bytes of a tensor of this ggml type and shape."""
    try:
        block, size = GGML_QUANT_SIZES[GGMLQuantizationType(type_id)]
    except (ValueError, KeyError) as exc:
        raise CorruptGGUFError(f"unknown tensor type {type_id}") from exc
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if n % block:
        raise CorruptGGUFError(f"tensor of {n} elements is not a multiple of block {block}")
    return n // block * size


_U64 = struct.Struct("<Q")


class _Cursor:
    def __init__(self, buf: bytes | memoryview) -> None:
        self.buf = buf
        self.pos = 0

    def take(self, n: int) -> memoryview:
        end = self.pos + n
        if end > len(self.buf):
            raise NeedMoreBytes(end)
        view = memoryview(self.buf)[self.pos : end]
        self.pos = end
        return view

    def skip_strings(self, count: int) -> None:
        """Skip ``count`` length-prefixed strings (vocabularies) quickly."""
        unpack, buf, pos, size = _U64.unpack_from, self.buf, self.pos, len(self.buf)
        for _ in range(count):
            if pos + 8 > size:
                raise NeedMoreBytes(pos + 8)
            pos += 8 + unpack(buf, pos)[0]
        if pos > size:
            raise NeedMoreBytes(pos)
        self.pos = pos

    def unpack(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        return struct.unpack(fmt, self.take(size))[0]

    def string(self) -> str:
        n = self.unpack("<Q")
        if n > 1 << 30:
            raise CorruptGGUFError(f"string length {n} is implausible")
        return bytes(self.take(n)).decode("utf-8", errors="replace")


def _value(
    cur: _Cursor, vtype: int, key: str, lengths: dict[str, int], digests: dict[str, str]
) -> Any:
    if vtype in _SCALARS:
        return cur.unpack(_SCALARS[vtype])
    if vtype == GGUFValueType.STRING:
        return cur.string()
    if vtype == GGUFValueType.ARRAY:
        item_type = cur.unpack("<I")
        count = cur.unpack("<Q")
        if count > 1 << 32:
            raise CorruptGGUFError(f"array {key!r} of {count} items is implausible")
        lengths[key] = count
        if item_type in _NUMPY:
            dtype = np.dtype(_NUMPY[item_type])
            return np.frombuffer(cur.take(count * dtype.itemsize), dtype=dtype).copy()
        if item_type == GGUFValueType.STRING:
            start = cur.pos
            kept = [cur.string() for _ in range(count)] if count <= _KEEP_STRINGS_UP_TO else None
            if kept is None:
                cur.skip_strings(count)
            digests[key] = hashlib.sha256(memoryview(cur.buf)[start : cur.pos]).hexdigest()
            return kept
        return [_value(cur, item_type, key, lengths, digests) for _ in range(count)]
    raise CorruptGGUFError(f"unknown value type {vtype} for {key!r}")


def parse_header(buf: bytes | memoryview) -> GGUFHeader:
    """Parse a GGUF header from the first bytes of a file.

    Raises ``NeedMoreBytes`` when ``buf`` ends inside the header.
    """
    cur = _Cursor(buf)
    if bytes(cur.take(4)) != GGUF_MAGIC:
        raise NotGGUFError("not a GGUF file (bad magic)")
    version = cur.unpack("<I")
    if version not in (2, 3):
        raise CorruptGGUFError(f"unsupported GGUF version {version}")
    n_tensors = cur.unpack("<Q")
    n_kv = cur.unpack("<Q")
    if n_tensors > 1 << 24 or n_kv > 1 << 24:
        raise CorruptGGUFError("tensor or key count is implausible")
    metadata: dict[str, Any] = {}
    lengths: dict[str, int] = {}
    digests: dict[str, str] = {}
    for _ in range(n_kv):
        key = cur.string()
        metadata[key] = _value(cur, cur.unpack("<I"), key, lengths, digests)
    tensors = []
    for _ in range(n_tensors):
        name = cur.string()
        n_dims = cur.unpack("<I")
        if n_dims > 8:
            raise CorruptGGUFError(f"tensor {name!r} has {n_dims} dimensions")
        shape = tuple(cur.unpack("<Q") for _ in range(n_dims))
        type_id = cur.unpack("<I")
        offset = cur.unpack("<Q")
        tensors.append(TensorInfo(name, shape, type_id, offset, tensor_nbytes(type_id, shape)))
    alignment = int(metadata.get("general.alignment", 32)) or 32
    data_offset = (cur.pos + alignment - 1) // alignment * alignment
    return GGUFHeader(version, metadata, tensors, data_offset, lengths, digests)


def read_header(path: str | os.PathLike[str]) -> GGUFHeader:
    """Parse the header of a local GGUF file, reading only as much as needed."""
    size = os.path.getsize(path)
    chunk = min(size, 4 << 20)
    with open(path, "rb") as fh:
        while True:
            fh.seek(0)
            data = fh.read(chunk)
            try:
                return parse_header(data)
            except NeedMoreBytes as more:
                if chunk >= size:
                    raise CorruptGGUFError("file ends inside its header") from more
                chunk = min(size, max(more.needed, chunk * 2))

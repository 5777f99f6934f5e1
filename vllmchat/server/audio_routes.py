"""OpenAI's audio endpoints: speech to text (``/v1/audio/transcriptions``) and text to
speech (``/v1/audio/speech``), on the app's one recogniser and one voice.

Audio requests take turns on each (``ApiService.transcribe`` / ``speak``), apart from the
engine's queue. Speech is streamed sentence by sentence (``speech_formats``), so a long
text starts playing early. Each answer, refusals too, is in the request log.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse

from vllmchat.core.app.serving.service import ApiService, VoiceBusy
from vllmchat.core.app.voice.events import SpeakFailed, SpokenPiece
from vllmchat.core.voice.events import TranscriptionDone, TranscriptionFailed, TranscriptSegment
from vllmchat.server.chat_input import clean_text
from vllmchat.server.errors import ApiError, bad_request
from vllmchat.server.requests_in import json_body, log_request
from vllmchat.server.speech_formats import ENCODED, AudioShape, Encoded, audio_formats, wav_header

INSTALL = "pip install 'vllmchat[voice]'"
MAX_INPUT = 4096  # characters, OpenAI's limit for speech
TEXT_FORMATS = ("json", "text", "verbose_json", "srt", "vtt")
# OpenAI's voice names: a client that sends one gets the default voice.
_OPENAI_VOICE_NAMES = "alloy ash ballad coral echo fable nova onyx sage shimmer verse marin cedar"
OPENAI_VOICES = frozenset(_OPENAI_VOICE_NAMES.split())
_LANGUAGE = re.compile(r"^[a-z]{2,3}$")


@dataclass(frozen=True)
class Heard:
    """A transcription's result: the text, its segments, its language and length."""

    text: str
    segments: tuple[TranscriptSegment, ...]
    language: str
    duration_s: float


Handler = Callable[[Request], Awaitable[Response]]
Pieces = Generator[SpokenPiece | SpeakFailed, None, None]


class AudioRoutes:
    """The audio handlers, on one service."""

    def __init__(self, service: ApiService) -> None:
        self.service = service

    def logged(self, handler: Handler) -> Handler:
        """``handler`` with each answer, refusals too, in the request log."""

        async def answer(request: Request) -> Response:
            started = time.monotonic()
            try:
                response = await handler(request)
            except ApiError as exc:
                log_request(self.service, request, exc.status, started, note=exc.message)
                raise
            note = str(getattr(request.state, "audio_note", ""))
            log_request(self.service, request, response.status_code, started, note=note)
            return response

        return answer

    # -- speech to text ------------------------------------------------------------------
    async def transcriptions(self, request: Request) -> Response:
        form = await _form(request)
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise bad_request("The audio goes in a multipart field named 'file'.", "file")
        response_format = _field(form, "response_format") or "json"
        if response_format not in TEXT_FORMATS:
            raise bad_request(
                f"'response_format' must be one of {', '.join(TEXT_FORMATS)}.", "response_format"
            )
        language = (_field(form, "language") or "").strip().lower() or None
        if language is not None and not _LANGUAGE.match(language):
            raise bad_request(
                f"'language' must be an ISO-639-1 code such as 'en', not {language!r}.", "language"
            )
        temperature = _field(form, "temperature")
        if temperature and not _number_within(temperature, 0.0, 1.0):
            raise bad_request("'temperature' must be a number from 0 to 1.", "temperature")
        data = await upload.read()
        name = upload.filename or "file"
        if not data:
            raise bad_request(f"{name} is empty (0 bytes): there is no audio in it.", "file")
        await self._ready(listen=True)
        heard = await anyio.to_thread.run_sync(self._transcribe, data, name, language)
        request.state.audio_note = f"{heard.duration_s:.1f} s of audio heard"
        return _transcript_response(heard, response_format)

    def _transcribe(self, data: bytes, name: str, language: str | None) -> Heard:
        """The upload in a temporary file, transcribed to its end (on a worker thread)."""
        suffix = Path(name).suffix[:16] if re.fullmatch(r"\.\w+", Path(name).suffix) else ""
        handle, temp = tempfile.mkstemp(prefix="vllmchat-audio-", suffix=suffix)
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            segments: list[TranscriptSegment] = []
            try:
                for event in self.service.transcribe(Path(temp), language=language):
                    if isinstance(event, TranscriptSegment):
                        segments.append(event)
                    elif isinstance(event, TranscriptionDone):
                        return Heard(event.text, tuple(segments), event.language, event.duration_s)
                    elif isinstance(event, TranscriptionFailed):
                        raise _failed(event.message.replace(temp, name), language)
            except VoiceBusy as exc:
                raise _busy(exc) from exc
            raise ApiError(500, "The transcription ended without a result.", type="server_error")
        finally:
            Path(temp).unlink(missing_ok=True)

    async def translations(self, request: Request) -> Response:
        raise ApiError(
            400,
            "Translation is not offered here: transcribe with /v1/audio/transcriptions, "
            "then ask the chat model to translate the text.",
            code="unsupported_endpoint",
        )

    # -- text to speech ------------------------------------------------------------------
    async def speech(self, request: Request) -> Response:
        body = await json_body(request)
        if not isinstance(body, dict):
            raise bad_request("The body must be a JSON object.")
        text = clean_text(body.get("input"), "input")
        if not text.strip():
            raise bad_request("'input' is empty: give the text to speak.", "input")
        if len(text) > MAX_INPUT:
            raise bad_request(
                f"'input' is {len(text)} characters long; at most {MAX_INPUT} are spoken at once.",
                "input",
            )
        response_format = body.get("response_format") or "wav"
        offered = await anyio.to_thread.run_sync(audio_formats)
        if not isinstance(response_format, str) or response_format not in offered:
            known = response_format in ENCODED if isinstance(response_format, str) else False
            raise bad_request(
                f"{response_format!r} is {'not encoded here' if known else 'no audio format'}: "
                f"'response_format' may be {', '.join(offered)}.",
                "response_format",
            )
        speed = body.get("speed", 1.0)
        if isinstance(speed, bool) or not isinstance(speed, int | float) or not 0.25 <= speed <= 4:
            raise bad_request("'speed' must be a number from 0.25 to 4.", "speed")
        await self._ready(listen=False)
        voice = await anyio.to_thread.run_sync(self._voice_named, body.get("voice"))
        pieces = self.service.speak(text, voice=voice, speed=float(speed))
        try:
            first = await anyio.to_thread.run_sync(_first_sound, pieces)
            if first is None:
                raise ApiError(
                    400,
                    "'input' holds nothing that can be spoken.",
                    param="input",
                    code="nothing_to_say",
                )
            pcm, rate = first
            shape: AudioShape = (
                Encoded(response_format, rate)
                if response_format in ENCODED
                else AudioShape(wav_header(rate) if response_format == "wav" else b"")
            )
        except BaseException:
            pieces.close()  # the voice is free for the next request
            raise
        request.state.audio_note = f"{len(text)} characters to speak"
        stream = _audio(pieces, pcm, shape)
        headers = {"x-sample-rate": str(rate)}
        return StreamingResponse(stream, media_type=shape.media_type(), headers=headers)

    def _voice_named(self, name: Any) -> str | None:
        """The installed voice a request names (None: the default one)."""
        if name is None or name == "" or (isinstance(name, str) and name in OPENAI_VOICES):
            return None
        installed = [v.name for v in self.service.voice.voices()]
        if isinstance(name, str) and name in installed:
            return name
        raise bad_request(
            f"There is no voice {name!r} here. Voices: {', '.join(installed) or 'none'} "
            f"(or one of OpenAI's names, spoken by the first).",
            "voice",
        )

    async def _ready(self, *, listen: bool) -> None:
        """A 503 naming what to install when the recogniser (or the voice) cannot run."""
        readiness = await anyio.to_thread.run_sync(self.service.voice.available)
        if readiness.can_listen if listen else readiness.can_speak:
            return
        what = "Speech to text" if listen else "Text to speech"
        missing = "; ".join(readiness.missing)
        raise ApiError(
            503,
            f"{what} is not installed here ({missing or 'its packages are missing'}): {INSTALL}.",
            type="server_error",
            code="voice_unavailable",
        )


async def _form(request: Request) -> Any:
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "multipart/form-data":
        raise ApiError(
            415 if kind else 400,
            f"The audio comes as multipart/form-data (a 'file' field), not {kind or 'no body'}.",
            code="unsupported_media_type" if kind else "invalid_request",
        )
    try:
        return await request.form(max_files=1)
    except AssertionError as exc:  # starlette's word for python-multipart missing
        raise ApiError(
            503, f"Uploads need python-multipart: {INSTALL}.", type="server_error"
        ) from exc
    except Exception as exc:  # starlette's MultiPartException: a malformed body
        raise bad_request(f"The multipart body could not be read: {exc}.", "file") from exc


def _field(form: Any, name: str) -> str:
    value = form.get(name)
    return value.strip() if isinstance(value, str) else ""


def _number_within(text: str, low: float, high: float) -> bool:
    try:
        return low <= float(text) <= high
    except ValueError:
        return False


def _failed(message: str, language: str | None) -> ApiError:
    if "not audio" in message or "empty" in message:
        return ApiError(400, f"{message}.", param="file", code="invalid_audio")
    if language is not None and "language" in message:
        return bad_request(f"{language!r} is not a language Whisper knows.", "language")
    return ApiError(503, f"The speech recogniser failed: {message}.", type="server_error")


def _busy(exc: VoiceBusy) -> ApiError:
    return ApiError(503, str(exc), type="server_error", code="busy", headers={"Retry-After": "5"})


def _first_sound(pieces: Pieces) -> tuple[bytes, int] | None:
    """The first piece with audio in it (its PCM and rate), or None when none has any."""
    try:
        for piece in pieces:
            if isinstance(piece, SpeakFailed):
                raise ApiError(503, f"The voice failed: {piece.message}.", type="server_error")
            if piece.pcm:
                return piece.pcm, piece.sample_rate
    except VoiceBusy as exc:
        raise _busy(exc) from exc
    return None


async def _audio(pieces: Pieces, first: bytes, shape: AudioShape) -> AsyncIterator[bytes]:
    """The first sentence's audio, then each further one's as soon as it is spoken (a
    voice that fails midway ends the audio there)."""
    try:
        yield await anyio.to_thread.run_sync(shape.begin, first)
        while True:
            piece = await anyio.to_thread.run_sync(next, pieces, None)
            if piece is None or isinstance(piece, SpeakFailed):
                break
            if piece.pcm:
                yield await anyio.to_thread.run_sync(shape.more, piece.pcm)
        yield await anyio.to_thread.run_sync(shape.end)
    finally:
        pieces.close()  # the client left, or all is spoken: the voice is free


def _transcript_response(heard: Heard, kind: str) -> Response:
    if kind == "json":
        return JSONResponse({"text": heard.text})
    if kind == "text":
        return PlainTextResponse(heard.text + "\n")
    if kind == "verbose_json":
        segments = [
            {
                "id": i,
                "seek": 0,
                "start": s.start_s,
                "end": s.end_s,
                "text": s.text,
                "tokens": [],
                "temperature": 0.0,
            }
            for i, s in enumerate(heard.segments)
        ]
        body = {
            "task": "transcribe",
            "language": heard.language,
            "duration": heard.duration_s,
            "text": heard.text,
            "segments": segments,
        }
        return JSONResponse(body)
    vtt = kind == "vtt"
    cues = [
        ("" if vtt else f"{i}\n")
        + f"{_stamp(s.start_s, vtt)} --> {_stamp(s.end_s, vtt)}\n{s.text}\n"
        for i, s in enumerate(heard.segments, 1)
    ]
    text = ("WEBVTT\n\n" if vtt else "") + "\n".join(cues)
    media = "text/vtt" if vtt else "application/x-subrip"
    return PlainTextResponse(text, media_type=media)


def _stamp(seconds: float, vtt: bool) -> str:
    ms = round(seconds * 1000)
    hours, ms = divmod(ms, 3_600_000)
    minutes, ms = divmod(ms, 60_000)
    secs, ms = divmod(ms, 1000)
    return f"{hours:02}:{minutes:02}:{secs:02}{'.' if vtt else ','}{ms:03}"

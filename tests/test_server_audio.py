"""The API's audio endpoints on a real server on loopback, with the real recogniser
(faster-whisper) and the real voice (Piper through sherpa-onnx): a spoken WAV heard
word for word, speech streamed as a WAV that is heard back as its text, and the bad
input each answered in OpenAI's error shape."""

from __future__ import annotations

import io
import json
import re
import socket
import wave
from urllib.parse import urlparse

import openai
import pytest

from tests.api_server import Served, post
from vllmchat.core.app.serving.service import RequestLogged
from vllmchat.core.voice.speaker import Speaker

HEARD = "Please turn off the lights in the kitchen before you leave."
JSON = {"Content-Type": "application/json"}
SPOKEN = "Please remember to bring your umbrella. The weather will be cold and windy tomorrow."


def _words(text: str) -> list[str]:
    return re.sub(r"[^a-z0-9' ]", " ", text.lower()).split()


def _wav(pcm: bytes, rate: int) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(pcm)
    return buffer.getvalue()


@pytest.fixture
def client(served: Served) -> openai.OpenAI:
    return openai.OpenAI(base_url=served.url + "/v1", api_key="unused", max_retries=0)


def _form(url: str, fields: dict[str, str], files: dict[str, tuple[str, bytes]]) -> Answer:
    """A multipart POST (stdlib): status, headers, body text."""
    parts = [
        f'--x\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
        for k, v in fields.items()
    ]
    parts += [
        f'--x\r\nContent-Disposition: form-data; name="{k}"; filename="{name}"\r\n'
        f"Content-Type: audio/wav\r\n\r\n".encode()
        + data
        + b"\r\n"
        for k, (name, data) in files.items()
    ]
    body = b"".join(parts) + b"--x--\r\n"
    return post(url, body, {"Content-Type": "multipart/form-data; boundary=x"})


Answer = tuple[int, dict[str, str], str]


def _error(answer: Answer, status: int) -> dict[str, str]:
    assert answer[0] == status, answer
    error: dict[str, str] = json.loads(answer[2])["error"]
    assert set(error) >= {"message", "type", "param", "code"} and "\n" not in error["message"]
    return error


def test_a_spoken_wav_is_heard_word_for_word(served: Served, client: openai.OpenAI) -> None:
    speech = Speaker().speak(HEARD)
    wav = _wav(speech.pcm, speech.sample_rate)
    logged: list[RequestLogged] = []
    served.service.log.subscribe(logged.append)
    heard = client.audio.transcriptions.create(model="whisper-1", file=("hello.wav", wav))
    assert _words(heard.text) == _words(HEARD)
    assert logged[-1].what == "POST /v1/audio/transcriptions" and logged[-1].status == 200
    verbose = client.audio.transcriptions.create(
        model="whisper-1", file=("hello.wav", wav), response_format="verbose_json", language="en"
    )
    assert verbose.language == "en" and verbose.duration == pytest.approx(speech.duration_s, 0.05)
    assert verbose.segments and verbose.segments[0].start < verbose.segments[-1].end
    srt = client.audio.transcriptions.create(
        model="whisper-1", file=("hello.wav", wav), response_format="srt"
    )
    assert re.match(r"1\n00:00:\d\d,\d{3} --> 00:00:\d\d,\d{3}\n\w", srt)


def test_speech_is_a_wav_that_is_heard_as_its_text(served: Served, client: openai.OpenAI) -> None:
    with client.audio.speech.with_streaming_response.create(
        model="tts-1", voice="alloy", input=SPOKEN, response_format="wav"
    ) as response:
        assert response.headers["content-type"] == "audio/wav"
        chunks = list(response.iter_bytes())
    data = b"".join(chunks)
    with wave.open(io.BytesIO(data)) as spoken:
        assert (spoken.getnchannels(), spoken.getsampwidth()) == (1, 2)
        rate = spoken.getframerate()
        frames = spoken.readframes(len(data))
    assert rate == 22050 and len(frames) / 2 / rate > 2.0
    status, _, heard = _form(
        served.url + "/v1/audio/transcriptions",
        {"model": "whisper-1", "response_format": "text"},
        {"file": ("speech.wav", _wav(frames, rate))},
    )
    assert status == 200 and _words(heard) == _words(SPOKEN)


def test_bad_audio_requests_are_one_line_errors(served: Served, client: openai.OpenAI) -> None:
    url = served.url + "/v1/audio"

    def upload(name: str, data: bytes, **fields: str) -> Answer:
        return _form(url + "/transcriptions", fields, {"file": (name, data)})

    def speak(body: object) -> Answer:
        return post(url + "/speech", json.dumps(body).encode(), JSON)

    no_file = _form(url + "/transcriptions", {}, {"audio": ("a.wav", b"RIFF")})
    assert _error(no_file, 400)["param"] == "file"
    assert "0 bytes" in _error(upload("empty.wav", b""), 400)["message"]
    text = _error(upload("notes.wav", b"these are notes, not audio\n" * 40), 400)
    assert text["code"] == "invalid_audio" and text["message"].startswith("notes.wav: not audio")
    assert _error(upload("a.wav", b"x", response_format="mp4"), 400)["param"] == "response_format"
    assert _error(_form(url + "/translations", {}, {"file": ("a.wav", b"x")}), 400)
    assert (
        _error(speak({"model": "tts-1", "input": " ", "voice": "alloy"}), 400)["param"] == "input"
    )
    assert "4096" in _error(speak({"input": "word " * 1000}), 400)["message"]
    assert _error(speak({"input": "\U0001f642\U0001f642"}), 400)["code"] == "nothing_to_say"
    unknown = _error(speak({"input": "Hello.", "voice": "nobody"}), 400)
    assert "en_US-joe-medium" in unknown["message"]
    vorbis = _error(speak({"input": "Hello.", "response_format": "vorbis"}), 400)
    assert "'response_format' may be wav, pcm" in vorbis["message"]
    assert _error(speak({"input": "Hello.", "speed": 9}), 400)["param"] == "speed"
    broken = post(url + "/speech", b'{"input": "Hel', JSON)
    assert _error(broken, 400)["code"] == "invalid_json"
    port = urlparse(served.url).port
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(
            b"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: multipart/form-data; boundary=x\r\nContent-Length: 22020096\r\n\r\n"
        )
        assert s.recv(65536).startswith(b"HTTP/1.1 413")
    # after all that, the voice still speaks
    with client.audio.speech.with_streaming_response.create(
        model="tts-1", voice="alloy", input="Still here.", response_format="mp3"
    ) as spoken:
        assert spoken.headers["content-type"] == "audio/mpeg"
        mp3 = spoken.read()
    assert mp3[:3] == b"ID3" or mp3[0] == 0xFF  # an MPEG audio stream

"""The API's model choice and its browser door: a request for another model on disk
loads it; a listed origin gets CORS headers; an
image sent to a model without a projector is a clear 400."""

from __future__ import annotations

import base64
import json
import struct
import urllib.request
import zlib

import openai

from tests.api_server import post_json, serving


def _png() -> str:
    """A 1x1 PNG as a data URL."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    raw = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
    raw += chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b"")
    return "data:image/png;base64," + base64.b64encode(raw).decode()


def test_another_model_on_disk_is_loaded_for_its_request(demo_model, gemma_model, tmp_path) -> None:
    with serving(
        demo_model,
        folder=tmp_path,
        model_folders=[str(gemma_model.parent)],
        origins=("http://app.local",),
    ) as served:
        client = openai.OpenAI(base_url=served.url + "/v1", api_key="x", max_retries=0)
        ids = [m.id for m in client.models.list().data]
        assert ids[0] == demo_model.stem and gemma_model.stem in ids
        reply = client.completions.create(model=gemma_model.stem, prompt="The sky is", max_tokens=3)
        assert reply.model == gemma_model.stem and reply.choices[0].text
        listed = client.models.list().data
        assert [m.id for m in listed if m.model_extra["loaded"]] == [gemma_model.stem]
        assert served.started.app.settings.load.model_path == str(gemma_model)

        status, body = post_json(
            served.url + "/v1/chat/completions",
            {
                "model": gemma_model.stem,
                "max_tokens": 2,
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "What is this?"},
                            {"type": "image_url", "image_url": {"url": _png()}},
                        ],
                    }
                ],
            },
        )
        assert status == 400 and body["error"]["code"] == "model_cannot_see_images"

        request = urllib.request.Request(
            served.url + "/v1/models", headers={"Origin": "http://app.local"}
        )
        with urllib.request.urlopen(request, timeout=30) as r:
            assert r.headers["access-control-allow-origin"] == "http://app.local"
            assert json.loads(r.read())["data"]

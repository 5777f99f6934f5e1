"""Reasoning models: thinking folded, stored apart and left out of the next prompt.

No reasoning model runs here, so the replies are recorded token streams of
Qwen3, a DeepSeek-R1 distill and gpt-oss (``tests/recorded_engine.py``); the
templates' ``enable_thinking`` and R1's opened ``<think>`` run through real
llama.cpp on tiny models carrying those templates.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.recorded_engine import GPT_OSS, INFO, QWEN3, R1, RecordedEngine
from vllmchat.core.app.conversations.titling import title_conversation
from vllmchat.core.conversations.events import ThinkingEvent, ThoughtFor
from vllmchat.core.conversations.store.store import ConversationStore
from vllmchat.core.conversations.turns.session import ChatSession
from vllmchat.core.engine.events import DoneEvent, StatsEvent, TokenEvent
from vllmchat.core.settings import LoadSettings, SamplingSettings
from vllmchat.core.thinking import ThinkingSplitter, answer_of, split_reply, style_of

# The parts of Qwen3's and DeepSeek-R1's templates that handle thinking, condensed.
QWEN3_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n"
    "{% if m.role == 'assistant' and '</think>' in m.content %}"
    "{{ m.content.split('</think>')[-1].lstrip('\\n') }}{% else %}{{ m.content }}{% endif %}"
    "<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}"
    "<think>\n\n</think>\n\n{% endif %}{% endif %}"
)
R1_TEMPLATE = (
    "{% for m in messages %}{% if m.role == 'user' %}<｜User｜>{{ m.content }}"
    "{% else %}<｜Assistant｜>{{ m.content }}<｜end▁of▁sentence｜>{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<｜Assistant｜><think>\n{% endif %}"
)


def _pieces(stream: list[str], style: str, opens: bool = False) -> list[tuple[str, str]]:
    splitter = ThinkingSplitter(style, opens)
    out = [p for piece in stream for p in splitter.feed(piece)]
    return out + splitter.finish()


@pytest.mark.parametrize(
    ("stream", "style", "opens", "answer", "thinking"),
    [
        (
            QWEN3,
            "think",
            False,
            "The capital of France is Paris.",
            "The user asks for the capital. Easy.",
        ),
        (R1, "think", True, "It is 4.", "Okay, two plus two."),
        (GPT_OSS, "harmony", False, "Hello there!", "User wants a greeting."),
    ],
)
def test_recorded_streams_split_into_thinking_and_answer(stream, style, opens, answer, thinking):
    pieces = _pieces(stream, style, opens)
    kinds = [k for k, _ in pieces]
    assert kinds == sorted(kinds, key=lambda k: k != "thinking"), "all thinking comes first"
    assert "".join(t for k, t in pieces if k == "answer").strip() == answer
    assert "".join(t for k, t in pieces if k == "thinking").strip() == thinking
    assert not any("<|" in t or "think>" in t for _, t in pieces), "no markup leaks"
    assert split_reply("".join(stream), style, opens=opens).answer == answer


def test_styles_come_from_the_template_and_plain_models_pass_through():
    assert style_of(QWEN3_TEMPLATE) == "think" and style_of(R1_TEMPLATE) == "think"
    assert style_of("<|start|>{{ m }}<|channel|>final<|message|>") == "harmony"
    assert style_of("{{ messages }}") == ""
    assert _pieces(["Just", " text"], "") == [("answer", "Just"), ("answer", " text")]
    assert answer_of("<think>pondering</think>\n\nShort title") == "Short title"


@pytest.fixture
def store(tmp_path):
    s = ConversationStore(tmp_path / "c.sqlite3")
    yield s
    s.close()


def test_thinking_is_folded_stored_apart_and_left_out_of_the_next_prompt(store):
    title = ["<think>", "x", "</think>", "Paris", " trip"]
    engine = RecordedEngine([QWEN3, ["Berlin", "."], title])
    conv = store.create()
    session = ChatSession(store, engine, conv.id)  # type: ignore[arg-type]
    events = list(session.send("What is the capital of France?"))
    thinking = "".join(e.text for e in events if isinstance(e, ThinkingEvent))
    assert thinking.strip() == "The user asks for the capital. Easy."
    thought = [e for e in events if isinstance(e, ThoughtFor)]
    assert len(thought) == 1, "the fold's header is set once, when the answer begins"
    tokens = "".join(e.text for e in events if isinstance(e, TokenEvent))
    assert tokens == "The capital of France is Paris."
    done = next(e for e in events if isinstance(e, DoneEvent))
    assert done.text == "The capital of France is Paris."
    reply = store.path(conv.id)[-1]
    assert reply.content == "The capital of France is Paris."
    assert reply.thinking == "The user asks for the capital. Easy."
    assert "thinking_s" in reply.stats
    shown = store.path_to_show(conv.id)[-1]
    assert shown.thinking == reply.thinking and "thinking_s" in shown.stats
    list(session.send("And of Germany?"))
    given = " ".join(m["content"] for m in engine.prompts[-1])
    assert "The capital of France is Paris." in given and "Easy" not in given
    assert title_conversation(session).title == "Paris trip", "a title never holds the thinking"
    assert engine.sampling[-1].thinking is False


def test_a_stopped_thinking_reply_keeps_its_thinking(store):
    engine = RecordedEngine([["<think>", "hmm", " let", " me"]])
    conv = store.create()
    session = ChatSession(store, engine, conv.id)  # type: ignore[arg-type]
    events = list(session.send("Hard question"))
    assert any(isinstance(e, ThinkingEvent) for e in events)
    reply = store.path(conv.id)[-1]
    assert reply.content == "" and reply.thinking == "hmm let me"


def test_gpt_oss_channels_through_a_session(store):
    info = replace(INFO, reasoning="harmony", architecture="gpt-oss")
    engine = RecordedEngine([GPT_OSS], info)
    conv = store.create()
    session = ChatSession(store, engine, conv.id)  # type: ignore[arg-type]
    list(session.send("Say hi"))
    reply = store.path(conv.id)[-1]
    assert (reply.content, reply.thinking) == ("Hello there!", "User wants a greeting.")


@pytest.fixture(scope="module")
def thinking_models(tmp_path_factory):
    from vllmchat.bench.synthetic.synth import write_llama_gguf

    folder = tmp_path_factory.mktemp("thinking")
    return {
        "qwen3": write_llama_gguf(folder / "qwen3.gguf", chat_template=QWEN3_TEMPLATE),
        "r1": write_llama_gguf(folder / "r1.gguf", chat_template=R1_TEMPLATE),
    }


def test_the_engine_reads_the_template_and_enable_thinking_changes_the_prompt(
    make_client, thinking_models
):
    client = make_client()
    info = client.load(LoadSettings(model_path=str(thinking_models["qwen3"]), n_ctx=512))
    assert (info.reasoning, info.thinking_opens, info.thinking_toggle) == ("think", False, True)
    asked = [{"role": "user", "content": "Hi"}]
    sizes = []
    for thinking in (True, False):
        sampling = SamplingSettings(temperature=0.0, max_tokens=1, thinking=thinking)
        stats = next(e.stats for e in client.chat(asked, sampling) if isinstance(e, StatsEvent))
        sizes.append(stats.prompt_tokens)
    assert sizes[1] > sizes[0], "thinking off renders the template's empty think block"
    r1 = client.load(LoadSettings(model_path=str(thinking_models["r1"]), n_ctx=512))
    assert (r1.reasoning, r1.thinking_opens, r1.thinking_toggle) == ("think", True, False)


def test_the_window_folds_thinking_and_shows_how_long(qtbot):
    from vllmchat.ui.chat.chat_view import ChatView, HistoryItem

    view = ChatView()
    qtbot.addWidget(view)
    view.show()
    view.append_thinking("Let me think")
    widget = view.streaming
    assert widget is not None and not widget.thinking.isHidden()
    assert widget.thinking.header.text() == "Thinking…" and widget.thinking.body.isHidden()
    view.thought_for(12.4)
    view.append_token("Paris.")
    view.finish_reply("Paris.", partial=False)
    assert widget.thinking.header.text() == "Thought for 12 s"
    widget.thinking.header.click()
    assert not widget.thinking.body.isHidden() and widget.thinking.body.text() == "Let me think"
    assert "Let me think" not in widget.text
    view.set_history(
        [
            HistoryItem("assistant", "4", 1, thinking="2+2", thinking_s=3.0),
            HistoryItem("assistant", "plain", 2),
        ]
    )
    stored, plain = view.messages()[-2:]
    assert stored.thinking.header.text() == "Thought for 3 s" and not stored.thinking.isHidden()
    assert plain.thinking.isHidden()


def test_a_servers_reasoning_content_is_thinking_and_thinking_off_reaches_its_template(store):
    from tests.fake_openai import FakeServer
    from vllmchat.core.engine.remote.engine import RemoteEngine

    with FakeServer() as server:
        server.mode, server.script, server.reasoning = "script", ["Paris."], "France's capital."
        engine = RemoteEngine(server.url)
        engine.load(LoadSettings(model_path=""))
        session = ChatSession(store, engine, store.create().id)
        events = list(session.send("Capital of France?"))
        assert (
            "".join(e.text for e in events if isinstance(e, ThinkingEvent)) == "France's capital."
        )
        reply = store.path(session.conversation_id)[-1]
        assert (reply.content, reply.thinking) == ("Paris.", "France's capital.")
        session.configure(session.config.changed(sampling=SamplingSettings(thinking=False)))
        server.reasoning = ""
        list(session.send("And Spain?"))
        assert server.requests[-1]["chat_template_kwargs"] == {"enable_thinking": False}

"""What the voice reads of a reply: sentences as they stream, no symbols, words for numbers."""

from __future__ import annotations

import pytest

from vllmchat.core.voice.number_words import decimal_words, number_words, year_words
from vllmchat.core.voice.speech_text import MAX_PIECE, SpeechSplitter, speakable_sentences
from vllmchat.core.voice.speech_words import speakable

REPLY = """<think>
The user wants sorting. Let me think.
</think>
# Sorting in Python

Here is how to sort a list. It is easy, e.g. with sorted().

```python
xs = [3, 1, 2]
print(sorted(xs))
```

| name | size |
|------|------|
| a    | 1    |

- **First** item
- Second item with `code`

> Quoted advice here.

See https://docs.python.org/3/howto/sorting.html. Done!"""


def test_a_reply_is_read_as_sentences_without_code_tables_or_thinking() -> None:
    assert speakable_sentences(REPLY) == [
        "Sorting in Python.",
        "Here is how to sort a list.",
        "It is easy, e.g. with sorted.",
        "A code block in Python.",
        "A table.",
        "First item",
        "Second item with code",
        "Quoted advice here.",
        "See docs dot python dot org.",
        "Done!",
    ]


@pytest.mark.parametrize("step", [1, 2, 3, 7, 50])
def test_streamed_in_any_pieces_the_sentences_are_the_same(step: int) -> None:
    splitter = SpeechSplitter()
    spoken: list[str] = []
    for i in range(0, len(REPLY), step):
        spoken += splitter.feed(REPLY[i : i + step])
    spoken += splitter.finish()
    assert spoken == speakable_sentences(REPLY)


def test_a_sentence_comes_out_as_soon_as_it_is_complete() -> None:
    splitter = SpeechSplitter()
    assert splitter.feed("Hello there. How") == ["Hello there."]
    assert splitter.feed(" are you? I") == ["How are you?"]
    assert splitter.feed(" am fine") == []
    assert splitter.finish() == ["I am fine"]


def test_code_is_announced_once_even_while_its_block_streams() -> None:
    splitter = SpeechSplitter()
    assert splitter.feed("Try this:\n```") == []
    assert splitter.feed("rust\nfn main() {}\n") == ["Try this:", "A code block in Rust."]
    assert splitter.feed("let x = 1; // more. code. here.\n") == []
    assert splitter.feed("```\nThat is all.") == []
    assert splitter.finish() == ["That is all."]
    assert speakable_sentences("```\nx = 1\n```") == ["A code block."]


def test_an_unclosed_fence_keeps_the_rest_unread() -> None:
    assert speakable_sentences("Look.\n```js\nconsole.log('hi. there.')") == [
        "Look.",
        "A code block in JavaScript.",
    ]


def test_a_ten_thousand_character_reply_is_spoken_in_bounded_pieces() -> None:
    run_on = ("word " * 2000).strip()
    splitter = SpeechSplitter()
    first = splitter.feed(run_on[:1000])
    assert first and all(len(piece) <= MAX_PIECE for piece in first)  # before the reply ends
    pieces = first + splitter.feed(run_on[1000:]) + splitter.finish()
    assert all(0 < len(piece) <= MAX_PIECE for piece in pieces)
    assert " ".join(pieces).split() == run_on.split()
    long_numbers = " ".join(["123456789"] * 400)
    assert all(len(p) <= MAX_PIECE for p in speakable_sentences(long_numbers))


@pytest.mark.parametrize(
    ("text", "spoken"),
    [
        ("**bold**, _italic_, ~~gone~~ and `code`.", "bold, italic, gone and code."),
        ("[the docs](https://example.com/a) say so.", "the docs say so."),
        ("Go to <https://www.github.com/x/y>.", "Go to github dot com."),
        ("Mail joe.doe@example.org today.", "Mail joe dot doe at example dot org today."),
        ("![a cat](cat.png)", "an image of a cat"),
        ("Line<br>break", "Line break"),
        ("A & B -> C", "A and B to C"),
    ],
)
def test_markdown_and_urls_are_never_read_as_symbols(text: str, spoken: str) -> None:
    assert speakable(text) == spoken


@pytest.mark.parametrize(
    ("text", "spoken"),
    [
        ("It weighs 3 kg.", "It weighs three kilograms."),
        ("1 km away.", "one kilometre away."),
        ("At 20°C.", "At twenty degrees Celsius."),
        ("50% of 1,000,000", "fifty percent of one million"),
        ("It costs $5.50.", "It costs five dollars fifty."),
        ("€3M raised", "three million euros raised"),
        ("On 2024-03-05.", "On March fifth, twenty twenty-four."),
        ("At 10:30 and 7:05 and 9:00.", "At ten thirty and seven oh five and nine o'clock."),
        ("In 1999.", "In nineteen ninety-nine."),
        ("In 2007.", "In two thousand seven."),
        ("The 3rd and 21st.", "The third and twenty-first."),
        ("pi is 3.14", "pi is three point one four"),
        ("3-5 items", "three to five items"),
        ("2+2=4", "two plus two equals four"),
        ("-7 degrees", "minus seven degrees"),
        ("about 16 GB at 2.4 GHz", "about sixteen gigabytes at two point four gigahertz"),
    ],
)
def test_numbers_dates_and_units_are_read_naturally(text: str, spoken: str) -> None:
    assert speakable(text) == spoken


@pytest.mark.parametrize("text", ["", "   ", "🎉🎉👍🏽", "---", "***", "\x00\x07\x1b[0m", "* * *"])
def test_nothing_to_say_gives_no_sentence(text: str) -> None:
    assert speakable_sentences(text) == []


def test_control_characters_and_emoji_are_removed() -> None:
    assert speakable("\x07Alarm\x1b[31m red\x00 now 🚨!\u200b") == "Alarm red now!"
    assert speakable("Thumbs 👍🏽 up ❤️") == "Thumbs up"


def test_number_words() -> None:
    assert number_words(0) == "zero"
    assert number_words(1205) == "one thousand two hundred five"
    assert number_words(2_000_000_013) == "two billion thirteen"
    assert number_words(10**16) == "one " + "zero " * 15 + "zero"
    assert decimal_words("0.05") == "zero point zero five"
    assert year_words(1900) == "nineteen hundred"
    assert year_words(2000) == "two thousand"
    assert year_words(1905) == "nineteen oh five"

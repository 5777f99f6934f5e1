"""One piece of prose made fit to be spoken: no Markdown symbols, URLs read as their host,
numbers, dates and units in words, control characters and emoji gone.

Pure functions; the line and block structure of a reply (code, tables, headings) is
``speech_text``'s.
"""

from __future__ import annotations

import re
import unicodedata

from vllmchat.core.voice.number_words import decimal_words, number_words, year_words

_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]

# Units after a number, longest first where one is a prefix of another.
_UNITS = {
    "km/h": "kilometres per hour",
    "mph": "miles per hour",
    "°C": "degrees Celsius",
    "°F": "degrees Fahrenheit",
    "GiB": "gibibytes",
    "MiB": "mebibytes",
    "KiB": "kibibytes",
    "TB": "terabytes",
    "GB": "gigabytes",
    "MB": "megabytes",
    "KB": "kilobytes",
    "kB": "kilobytes",
    "GHz": "gigahertz",
    "MHz": "megahertz",
    "kHz": "kilohertz",
    "Hz": "hertz",
    "km": "kilometres",
    "cm": "centimetres",
    "mm": "millimetres",
    "kg": "kilograms",
    "mg": "milligrams",
    "ms": "milliseconds",
    "ml": "millilitres",
    "mL": "millilitres",
    "kW": "kilowatts",
    "W": "watts",
    "V": "volts",
    "m": "metres",
    "g": "grams",
    "s": "seconds",
    "h": "hours",
    "L": "litres",
    "%": "percent",
    "°": "degrees",
    "x": "times",
}
_CURRENCIES = {"$": "dollars", "€": "euros", "£": "pounds", "¥": "yen"}

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
_URL = re.compile(r"\b(?:https?://|ftp://|www\.)[^\s<>()\[\]]+", re.IGNORECASE)
_EMAIL = re.compile(r"\b([\w.+-]+)@([\w-]+(?:\.[\w-]+)+)\b")
_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")
_AUTOLINK = re.compile(r"<((?:https?|ftp)://[^>\s]+)>")
_HTML_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>")
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_TIME = re.compile(r"\b(\d{1,2}):(\d{2})\b")
_UNIT_NAMES = "|".join(re.escape(u) for u in sorted(_UNITS, key=len, reverse=True))
_NUMBER = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_CURRENCY = re.compile(r"([$€£¥])\s?(" + _NUMBER + r")(?:\s?(k|K|M|bn|billion|million))?")
_WITH_UNIT = re.compile(r"(?<![\w.])(" + _NUMBER + r")\s?(" + _UNIT_NAMES + r")(?![\w/])")
_RANGE = re.compile(r"(?<![\w.-])(\d+(?:\.\d+)?)\s?[-–]\s?(\d+(?:\.\d+)?)(?![\w.-])")
_NEGATIVE = re.compile(r"(?<![\w.])[-−](\d)")
_PLAIN_NUMBER = re.compile(r"(?<![\w.])(" + _NUMBER + r")(?:(st|nd|rd|th)\b)?")
_BETWEEN_NUMBERS = {"+": "plus", "=": "equals", "×": "times", "*": "times", "/": "over"}
_WORD_SYMBOLS = {
    "&": " and ",
    "→": " to ",
    "->": " to ",
    "=>": " to ",
    "≈": " about ",
    "~": " about ",
    "≤": " at most ",
    "≥": " at least ",
    "@": " at ",
}
# Whatever symbol is left is not read out: it becomes a space.
_LEFTOVER = re.compile(r"[*_#`~^|\\{}\[\]<>=+\"]")
_KEEP_FORMAT = {"\u200d"}  # the joiner inside emoji sequences goes with the emoji


def speakable(text: str) -> str:
    """``text`` (one sentence or a few) as words a voice can read; empty if nothing is."""
    text = _visible(_ANSI.sub("", text))
    text = _IMAGE.sub(lambda m: f" an image of {m.group(1)} " if m.group(1) else " an image ", text)
    text = _LINK.sub(r"\1", text)
    text = _AUTOLINK.sub(r"\1", text)
    text = _HTML_TAG.sub(" ", text)
    text = _URL.sub(_url, text)
    text = _EMAIL.sub(lambda m: f" {_dotted(m.group(1))} at {_dotted(m.group(2))} ", text)
    text = _inline_markup(text)
    text = _numbers(text)
    for symbol, words in _WORD_SYMBOLS.items():
        text = text.replace(symbol, words)
    text = _LEFTOVER.sub(" ", text.replace("()", ""))
    text = re.sub(r"\s+", " ", text).strip()
    text = re.sub(r"\s+([,.;:!?])", r"\1", text)
    return "" if not any(ch.isalnum() for ch in text) else text


def _visible(text: str) -> str:
    """Control characters, format characters, emoji and other pictographs removed."""
    out = []
    for ch in text:
        if ch in "\t\n\r":
            out.append(" ")
            continue
        category = unicodedata.category(ch)
        if category in ("Cc", "Cf", "Co", "Cs", "Cn") or ch in _KEEP_FORMAT:
            continue
        if (category == "So" and ch not in "°") or ch in "\ufe0e\ufe0f" or category == "Sk":
            continue
        if "\U0001f3fb" <= ch <= "\U0001f3ff":  # skin tones
            continue
        out.append(ch)
    return "".join(out)


def _url(match: re.Match[str]) -> str:
    url = match.group(0)
    trailing = url[len(url.rstrip(".,;:!?")) :]
    return f" {_host_words(url)}{trailing} "


def _host_words(url: str) -> str:
    """A URL as its host, the way people say it: ``docs dot python dot org``."""
    host = re.sub(r"^(?:https?|ftp)://", "", url, flags=re.IGNORECASE)
    host = re.split(r"[/?#:]", host, maxsplit=1)[0].rstrip(".,;:!?")
    host = re.sub(r"^www\.", "", host, flags=re.IGNORECASE)
    return _dotted(host.lower())


def _dotted(name: str) -> str:
    return " dot ".join(part for part in name.split(".") if part)


def _inline_markup(text: str) -> str:
    """Emphasis, strikethrough and inline code marks removed; the words stay."""
    text = re.sub(r"`+([^`]*)`+", r"\1", text)
    text = re.sub(r"(\*\*|__|~~)(.+?)\1", r"\2", text)
    text = re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", r"\1", text)
    text = re.sub(r"(?<![\w_])_(?!\s)(.+?)(?<!\s)_(?![\w_])", r"\1", text)
    return text


def _numbers(text: str) -> str:
    text = _ISO_DATE.sub(_date, text)
    text = _TIME.sub(_clock, text)
    text = _CURRENCY.sub(_money, text)
    text = _WITH_UNIT.sub(_quantity, text)
    text = _RANGE.sub(lambda m: f"{_number(m.group(1))} to {_number(m.group(2))}", text)
    for symbol, word in _BETWEEN_NUMBERS.items():
        pattern = r"(?<=\d)\s?" + re.escape(symbol) + r"\s?(?=\d)"
        text = re.sub(pattern, f" {word} ", text)
    text = _NEGATIVE.sub(r"minus \1", text)
    return _PLAIN_NUMBER.sub(_plain, text)


def _number(digits: str) -> str:
    digits = digits.replace(",", "")
    return decimal_words(digits) if "." in digits else number_words(int(digits))


def _plain(match: re.Match[str]) -> str:
    digits, suffix = match.group(1), match.group(2)
    if suffix:
        return _ordinal(int(digits.replace(",", "")))
    if len(digits) == 4 and digits.isdigit() and 1100 <= int(digits) < 2100:
        return year_words(int(digits))
    return _number(digits)


def _ordinal(n: int) -> str:
    words = number_words(n)
    irregular = {"one": "first", "two": "second", "three": "third", "five": "fifth"}
    irregular |= {"eight": "eighth", "nine": "ninth", "twelve": "twelfth"}
    head, _, last = words.rpartition(" ")
    stem, dash, tail = last.rpartition("-")
    if tail in irregular:
        tail = irregular[tail]
    elif tail.endswith("y"):
        tail = tail[:-1] + "ieth"
    else:
        tail += "th"
    return f"{head} {stem}{dash}{tail}".strip()


def _date(match: re.Match[str]) -> str:
    year, month, day = (int(g) for g in match.groups())
    if not 1 <= month <= 12 or not 1 <= day <= 31:
        return match.group(0)
    return f"{_MONTHS[month - 1]} {_ordinal(day)}, {year_words(year)}"


def _clock(match: re.Match[str]) -> str:
    hours, minutes = int(match.group(1)), int(match.group(2))
    if hours > 23 or minutes > 59:
        return match.group(0)
    if minutes == 0:
        return f"{number_words(hours)} o'clock"
    spoken = number_words(minutes) if minutes >= 10 else f"oh {number_words(minutes)}"
    return f"{number_words(hours)} {spoken}"


def _money(match: re.Match[str]) -> str:
    symbol, amount, scale = match.groups()
    scales = {"k": "thousand", "K": "thousand", "M": "million"}
    if scale:
        return f"{_number(amount)} {scales.get(scale, scale)} {_CURRENCIES[symbol]}"
    whole, _, cents = amount.replace(",", "").partition(".")
    spoken = f"{number_words(int(whole))} {_CURRENCIES[symbol]}"
    if len(cents) == 2 and int(cents):
        spoken += f" {number_words(int(cents))}"
    return spoken


def _quantity(match: re.Match[str]) -> str:
    amount, unit = match.groups()
    words = _UNITS[unit]
    first, space, rest = words.partition(" ")
    if amount == "1" and first.endswith("s") and unit not in ("%", "x"):
        words = first[:-1] + space + rest
    return f"{_number(amount)} {words}"

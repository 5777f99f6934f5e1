"""Numbers in English words: ``number_words(1205)`` is "one thousand two hundred five"."""

from __future__ import annotations

_ONES = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_TENS = ["_", "_", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_SCALES = ((10**12, "trillion"), (10**9, "billion"), (10**6, "million"), (1000, "thousand"))
# Past this the digits are read one by one (a phone number, an ID, a hash).
_LARGEST = 10**15


def number_words(n: int) -> str:
    """A whole number in words; a very long one digit by digit."""
    if n < 0:
        return f"minus {number_words(-n)}"
    if n >= _LARGEST:
        return " ".join(_ONES[int(d)] for d in str(n))
    if n < 20:
        return _ONES[n]
    if n < 100:
        tens, ones = divmod(n, 10)
        return _TENS[tens] + (f"-{_ONES[ones]}" if ones else "")
    if n < 1000:
        hundreds, rest = divmod(n, 100)
        return f"{_ONES[hundreds]} hundred" + (f" {number_words(rest)}" if rest else "")
    for scale, name in _SCALES:
        if n >= scale:
            head, rest = divmod(n, scale)
            return f"{number_words(head)} {name}" + (f" {number_words(rest)}" if rest else "")
    raise AssertionError(n)


def decimal_words(digits: str) -> str:
    """``"3.14"`` as "three point one four"."""
    whole, _, fraction = digits.partition(".")
    head = number_words(int(whole or "0"))
    if not fraction:
        return head
    return f"{head} point " + " ".join(_ONES[int(d)] for d in fraction)


def year_words(year: int) -> str:
    """A year as people say it: 1999 "nineteen ninety-nine", 2005 "two thousand five"."""
    century, rest = divmod(year, 100)
    if year < 1000 or 2000 <= year < 2010 or (rest == 0 and century % 10 == 0):
        return number_words(year)
    if rest == 0:
        return f"{number_words(century)} hundred"
    tail = number_words(rest) if rest >= 10 else f"oh {number_words(rest)}"
    return f"{number_words(century)} {tail}"

"""The renderers of the text-bearing templates: each turns a template's arguments into the
text Wikipedia shows (`pipelines/text/wikitemplates.py` holds the table of names and the
rules). A renderer gets (positional, named) with every value stripped and named keys
lower-cased, and returns None when the arguments do not make sense as text.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# A renderer gets (positional, named) with every value stripped and named keys lower-cased.
Renderer = Callable[[list[str], dict[str, str]], str | None]
# A parser function gets (its first argument, i.e. the text after `fn:`, and the raw args).
ParserFunction = Callable[[str, list[str]], str | None]

# MediaWiki's rule for a named argument is "anything before the first `=`"; the narrower
# `[\w -]+` keeps `a+b=c` (a formula in {{math}}) positional, which is what the author meant.
# `?` is allowed too for {{sic|hte|?=y}} ("possibly sic"), the one common key that needs it.
NAMED_ARG_RE = re.compile(r"\s*([\w ?-]+?)\s*=")
TEMPLATE_PREFIX = "template:"
YES = frozenset({"y", "yes", "on", "true", "1"})

EN_DASH = "–"
EM_DASH = "—"
# What is left where removed markup carried words of a sentence (an inline formula, a value
# no renderer can reproduce): one private-use character, never text of its own. The Wikipedia
# stage drops every sentence that holds it (pipelines/wikipedia/pages.py), so no sentence
# with a hole ("The area of a circle is where r is the radius.") reaches the corpus.
# `pipelines.text.wikitext.GAP` is this constant.
GAP = "\ue000"


def split_args(args: list[str]) -> tuple[list[str], dict[str, str]]:
    """Split raw args into (positional, named), stripping values as rendering needs.

    Numeric keys (`1=...`) fill that positional slot, as in MediaWiki: editors write them when
    the value itself contains `=`. Only called on a table hit, so the miss path never pays.
    """
    positional: list[str] = []
    named: dict[str, str] = {}
    numbered: dict[int, str] = {}
    for raw in args:
        match = NAMED_ARG_RE.match(raw)
        if match is None:
            positional.append(raw.strip())
            continue
        key = match.group(1).strip().lower()
        value = raw[match.end() :].strip()
        if key.isascii() and key.isdigit():
            numbered[int(key)] = value
        else:
            named[key] = value
    for number, value in numbered.items():
        if number < 1:
            continue
        if len(positional) < number:
            positional.extend([""] * (number - len(positional)))
        positional[number - 1] = value
    return positional, named


def arg(positional: list[str], index: int) -> str:
    """Positional argument `index` (0-based), or "" when absent: templates treat both alike."""
    return positional[index] if index < len(positional) else ""


def is_yes(value: str | None) -> bool:
    """Wikipedia templates accept y/yes/on/true/1 for boolean flags."""
    return value is not None and value.strip().lower() in YES


# --------------------------------------------------------------------------------------------
# convert / cvt

# Range words of Module:Convert and how they read between two values.
CONVERT_RANGE_SEPARATORS = {
    "-": EN_DASH,
    EN_DASH: EN_DASH,
    "to": " to ",
    "to(-)": " to ",
    "to about": " to about ",
    "and": " and ",
    "and(-)": " and ",
    "or": " or ",
    ", and": ", and ",
    ", or": ", or ",
    "&": " & ",
    "+": " + ",
    "by": " by ",
    "x": " × ",
    "×": " × ",
    "+/-": " ± ",
    "±": " ± ",
}
# Unit codes that are not how the unit reads. Case matters: convert's codes are case-sensitive.
CONVERT_UNIT_TEXT = {
    "km2": "km²",
    "m2": "m²",
    "cm2": "cm²",
    "mm2": "mm²",
    "km3": "km³",
    "m3": "m³",
    "cm3": "cm³",
    "sqmi": "sq mi",
    "mi2": "sq mi",
    "sqft": "sq ft",
    "ft2": "sq ft",
    "sqin": "sq in",
    "cuft": "cu ft",
    "ft3": "cu ft",
    "C": "°C",
    "F": "°F",
    "kph": "km/h",
    "kmh": "km/h",
}
# Units whose written form is a word, so the plural shows ("1 acre", "2 acres").
CONVERT_PLURAL_UNIT_TEXT = {"acre": "acres"}
# 1,000 / 3.5 / -4 / 1+1/2 / 1/2 / 1.5e6: enough to tell a value from a unit code.
CONVERT_NUMBER_RE = re.compile(
    r"[-+−]?(?:\d[\d,]*(?:\.\d+)?|\.\d+)(?:[-+]\d+/\d+)?(?:e-?\d+)?|[-+−]?\d+/\d+"
)


def is_convert_number(text: str) -> bool:
    return CONVERT_NUMBER_RE.fullmatch(text) is not None


def convert_unit_text(code: str, singular: bool) -> str:
    if not singular and code in CONVERT_PLURAL_UNIT_TEXT:
        return CONVERT_PLURAL_UNIT_TEXT[code]
    return CONVERT_UNIT_TEXT.get(code, code)


def render_convert(positional: list[str], named: dict[str, str]) -> str | None:
    """The input quantity only: `{{convert|10|km|mi}}` → `10 km`.

    The converted value is an editorial aside in brackets; the author's sentence reads with
    the input alone. Arguments after the input unit (output unit, precision) are ignored,
    except a number followed by a unit, which is a multi-unit input (`6|ft|2|in`).
    """
    value = arg(positional, 0)
    if not value:
        return None
    adjective = is_yes(named.get("adj"))
    joint = "-" if adjective else " "
    pieces = [value]
    index = 1
    count = len(positional)
    while (
        index + 1 < count
        and positional[index] in CONVERT_RANGE_SEPARATORS
        and is_convert_number(positional[index + 1])
    ):
        pieces.append(CONVERT_RANGE_SEPARATORS[positional[index]])
        pieces.append(positional[index + 1])
        index += 2
    unit_code = arg(positional, index)
    if not unit_code:
        return "".join(pieces)
    singular = adjective or (index == 1 and value == "1")
    pieces += [joint, convert_unit_text(unit_code, singular)]
    index += 1
    while (
        index + 1 < count
        and is_convert_number(positional[index])
        and positional[index + 1]
        and not is_convert_number(positional[index + 1])
    ):
        extra_value, extra_unit = positional[index], positional[index + 1]
        singular = adjective or extra_value == "1"
        pieces += [" ", extra_value, joint, convert_unit_text(extra_unit, singular)]
        index += 2
    return "".join(pieces)


# --------------------------------------------------------------------------------------------
# Languages

# The label Wikipedia's {{langx}} shows, for the codes common in English articles.
LANGUAGE_NAMES = {
    "ar": "Arabic",
    "bg": "Bulgarian",
    "bn": "Bengali",
    "ca": "Catalan",
    "cs": "Czech",
    "cy": "Welsh",
    "da": "Danish",
    "de": "German",
    "el": "Greek",
    "en": "English",
    "es": "Spanish",
    "fa": "Persian",
    "fi": "Finnish",
    "fr": "French",
    "ga": "Irish",
    "grc": "Ancient Greek",
    "he": "Hebrew",
    "hi": "Hindi",
    "hu": "Hungarian",
    "id": "Indonesian",
    "it": "Italian",
    "ja": "Japanese",
    "ko": "Korean",
    "la": "Latin",
    "nl": "Dutch",
    "no": "Norwegian",
    "pl": "Polish",
    "pt": "Portuguese",
    "ro": "Romanian",
    "ru": "Russian",
    "sa": "Sanskrit",
    "sr": "Serbian",
    "sv": "Swedish",
    "ta": "Tamil",
    "th": "Thai",
    "tr": "Turkish",
    "uk": "Ukrainian",
    "ur": "Urdu",
    "vi": "Vietnamese",
    "zh": "Chinese",
}
LANG_PREFIXED = "lang-"


def language_name(code: str) -> str | None:
    """English name for `fr`, `sr-Latn` (falls back to the base code), else None."""
    code = code.strip().lower()
    return LANGUAGE_NAMES.get(code) or LANGUAGE_NAMES.get(code.partition("-")[0])


def render_lang(positional: list[str], named: dict[str, str]) -> str | None:
    """`{{lang|fr|texte}}` → `texte`: the markup only tags the language for screen readers."""
    return arg(positional, 1)


def render_labelled_language(code: str, positional: list[str], named: dict[str, str]) -> str:
    """`French: texte, romanized: …, lit. '…'`, as {{langx}} / {{lang-xx}} show it.

    The label is part of the sentence ("Munich (German: München)"), so it is kept; an unknown
    code has no label we can trust, so only the text shows. `label=none` drops the label.
    """
    text = arg(positional, 0)
    transliteration = named.get("translit") or arg(positional, 1)
    translation = named.get("lit") or named.get("translation") or arg(positional, 2)
    label = named.get("label") or language_name(code)
    parts = [f"{label}: {text}" if label and label.lower() != "none" else text]
    if transliteration:
        parts.append(f"romanized: {transliteration}")
    if translation:
        parts.append(f"lit. '{translation}'")
    return ", ".join(parts)


def render_langx(positional: list[str], named: dict[str, str]) -> str | None:
    """`{{langx|fr|texte}}`: the successor of {{lang-fr|texte}}, code as first argument."""
    return render_labelled_language(arg(positional, 0), positional[1:], named)


def render_transliteration(positional: list[str], named: dict[str, str]) -> str | None:
    """`{{transl|ar|DIN|text}}` → `text`: leading args are language and scheme codes."""
    return positional[-1] if len(positional) >= 2 else ""


def render_nihongo(positional: list[str], named: dict[str, str]) -> str | None:
    """`{{nihongo|English|kanji|romaji|extra|extra2}}` → `English (kanji, romaji, extra) extra2`.

    With no English, the romaji leads instead (as Module:Nihongo does).
    """
    english, kanji, romaji, extra, extra2 = (positional + [""] * 5)[:5]
    lead = english or romaji
    inside = [part for part in (kanji, romaji if english else "", extra) if part]
    return join_lead_and_aside(lead, inside, extra2)


def render_nihongo3(positional: list[str], named: dict[str, str]) -> str | None:
    """`{{nihongo3|romaji|kanji|English|extra|extra2}}` → `romaji (kanji, English, extra) extra2`.

    The rōmaji-first variant, for names better known in Japanese.
    """
    romaji, kanji, english, extra, extra2 = (positional + [""] * 5)[:5]
    inside = [part for part in (kanji, english, extra) if part]
    return join_lead_and_aside(romaji, inside, extra2)


def render_nihongo_foot(positional: list[str], named: dict[str, str]) -> str | None:
    """`{{nihongo foot|English|kanji|romaji}}` → `English`: the rest goes to a footnote."""
    return arg(positional, 0) or arg(positional, 2)


def join_lead_and_aside(lead: str, inside: list[str], after: str) -> str:
    if inside:
        aside = ", ".join(inside)
        text = f"{lead} ({aside})" if lead else aside
    else:
        text = lead
    return f"{text} {after}".strip() if after else text


# --------------------------------------------------------------------------------------------
# Dates

MONTH_NAMES = (
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
)
# "jan", "january", "sept" → canonical name: {{as of}} and {{date}} accept all of them.
MONTH_BY_WORD = {name.lower(): name for name in MONTH_NAMES} | {
    name[:3].lower(): name for name in MONTH_NAMES
}
MONTH_BY_WORD["sept"] = "September"
ISO_DATE_RE = re.compile(r"(\d{1,4})-(\d{1,2})(?:-(\d{1,2}))?")
DMY_TEXT_DATE_RE = re.compile(r"(\d{1,2})(?:st|nd|rd|th)?\s+([A-Za-z]+)\.?,?(?:\s+(\d{1,4}))?")
MDY_TEXT_DATE_RE = re.compile(r"([A-Za-z]+)\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?(?:\s+(\d{1,4}))?")


def month_name(month: str) -> str:
    """`1`/`01`/`jan`/`January` → `January`; anything else as written."""
    if month.isascii() and month.isdigit():
        number = int(month)
        return MONTH_NAMES[number - 1] if 1 <= number <= 12 else month
    return MONTH_BY_WORD.get(month.lower(), month)


def format_date(year: str, month: str, day: str, day_first: bool) -> str:
    """`January 2, 1900` (or `2 January 1900`), degrading to `January 1900` and `1900`."""
    month_text = month_name(month) if month else ""
    day_text = str(int(day)) if day.isascii() and day.isdigit() else day
    if month_text and day_text:
        if day_first:
            return f"{day_text} {month_text} {year}".strip()
        return f"{month_text} {day_text}, {year}" if year else f"{month_text} {day_text}"
    if month_text:
        return f"{month_text} {year}".strip()
    return year


def render_ymd_date(positional: list[str], named: dict[str, str]) -> str | None:
    """`{{birth date|1900|1|2}}` → `January 2, 1900`; df=y → `2 January 1900`.

    Extra positional args (the second date of `death date and age`, a start date's time of
    day) are ignored: the first date is what the sentence needs, and the age is not stable.
    """
    day_first = is_yes(named.get("df"))
    return format_date(arg(positional, 0), arg(positional, 1), arg(positional, 2), day_first)


def render_first_arg(positional: list[str], named: dict[str, str]) -> str | None:
    """Formatting templates whose visible text is their first argument."""
    return arg(positional, 0)


def render_date(positional: list[str], named: dict[str, str]) -> str | None:
    """Wikipedia's {{date|<date>|<style>}}: DMY by default; MDY, YMD, ISO, none.

    Recognises ISO `2006-08-04`, `4 August 2006` and `Aug 4, 2006`; anything else is shown as
    written (as the template does). A numeric `y|m|d` triple is formatted like {{birth date}}.
    """
    first = arg(positional, 0)
    second = arg(positional, 1)
    if second.isascii() and second.isdigit() and first.isascii() and first.isdigit():
        return render_ymd_date(positional, named)
    style = second.lower()
    if style == "none":
        return first
    year = month = day = ""
    if match := ISO_DATE_RE.fullmatch(first):
        year, month, day = match.group(1), match.group(2), match.group(3) or ""
    elif (match := DMY_TEXT_DATE_RE.fullmatch(first)) and match.group(2).lower() in MONTH_BY_WORD:
        day, month, year = match.group(1), match.group(2), match.group(3) or ""
    elif (match := MDY_TEXT_DATE_RE.fullmatch(first)) and match.group(1).lower() in MONTH_BY_WORD:
        month, day, year = match.group(1), match.group(2), match.group(3) or ""
    else:
        return first
    if month_name(month) not in MONTH_NAMES:
        return first  # `2006-13-01` is not a date: show it as written, as {{date}} does
    if style == "iso":
        month_number = MONTH_NAMES.index(month_name(month)) + 1
        return "-".join(part for part in (year, f"{month_number:02d}", pad(day)) if part)
    if style == "ymd":
        return " ".join(part for part in (year, month_name(month), unpad(day)) if part)
    return format_date(year, month, day, day_first=style != "mdy")


def pad(day: str) -> str:
    return f"{int(day):02d}" if day else ""


def unpad(day: str) -> str:
    return str(int(day)) if day else ""


def render_as_of(positional: list[str], named: dict[str, str]) -> str | None:
    """`{{as of|2010|5|12}}` → `As of 12 May 2010` (df=US → `As of May 12, 2010`).

    `alt=` replaces the whole text; `lc=y` lower-cases, `since=y` says "Since", `bare=y`
    drops the phrase, `post=` is appended (usually punctuation).
    """
    if alternative := named.get("alt"):
        return alternative
    day_first = named.get("df", "").strip().lower() not in {"us", "mdy"}
    date = format_date(arg(positional, 0), arg(positional, 1), arg(positional, 2), day_first)
    phrase = "Since" if is_yes(named.get("since")) else "As of"
    if is_yes(named.get("lc")):
        phrase = phrase.lower()
    text = date if is_yes(named.get("bare")) else f"{phrase} {date}".strip()
    return text + named.get("post", "")


def make_prefixed(prefix: str) -> Renderer:
    """{{circa|1900}} → `c. 1900`, {{circa}} → `c.`: a fixed abbreviation before the date."""

    def render(positional: list[str], named: dict[str, str]) -> str | None:
        value = arg(positional, 0)
        return f"{prefix} {value}" if value else prefix

    render.__doc__ = f"`{prefix}` followed by the first argument, if any."
    return render


# --------------------------------------------------------------------------------------------
# Inline text and punctuation


def render_concatenated(positional: list[str], named: dict[str, str]) -> str | None:
    """{{sic|hte}}, {{linktext|a|b}}: the args are pieces of one word, joined without spaces.

    The two-argument {{sic|Jan|ury}} form exists only so spell-check bots skip the word.
    """
    return "".join(positional)


def render_interlanguage_link(positional: list[str], named: dict[str, str]) -> str | None:
    """{{ill|Foo|de|Foo (Deutschland)}} → `Foo` (or the link text `lt=`)."""
    return named.get("lt") or arg(positional, 0)


def render_fraction(positional: list[str], named: dict[str, str]) -> str | None:
    """{{frac|1|2}} → `1/2`, {{frac|3|1|2}} → `3 1/2`, {{frac|2}} → `1/2` (ASCII for BERT)."""
    parts = [part for part in positional[:3] if part]
    if len(parts) == 1:
        return f"1/{parts[0]}"
    if len(parts) == 2:
        return f"{parts[0]}/{parts[1]}"
    if len(parts) == 3:
        return f"{parts[0]} {parts[1]}/{parts[2]}"
    return ""


def make_currency(symbol: str) -> Renderer:
    """{{US$|100}} → `US$100`: the symbol glued to the amount, further args (year) ignored."""

    def render(positional: list[str], named: dict[str, str]) -> str | None:
        return symbol + arg(positional, 0)

    render.__doc__ = f"`{symbol}` followed by the amount."
    return render


def make_constant(text: str) -> Renderer:
    """Punctuation templates: always the same character(s), whatever the arguments."""

    def render(positional: list[str], named: dict[str, str]) -> str | None:
        return text

    render.__doc__ = f"Always {text!r}."
    return render


# --------------------------------------------------------------------------------------------
# Parser functions: {{name:first|args}}

FORMATNUM_RE = re.compile(r"([-+−]?)(\d+)((?:\.\d*)?)")
THOUSANDS_GAP_RE = re.compile(r"(?<=\d)(?=(?:\d{3})+$)")


def formatnum(first: str, args: list[str]) -> str | None:
    """{{formatnum:1234567}} → `1,234,567`; `|R` removes separators; non-numbers unchanged."""
    flags = {arg.strip().lower() for arg in args}
    if "r" in flags:
        return first.replace(",", "")
    match = FORMATNUM_RE.fullmatch(first)
    if match is None or "nosep" in flags:
        return first
    sign, integer, fraction = match.groups()
    return sign + THOUSANDS_GAP_RE.sub(",", integer) + fraction


def lcfirst(first: str, args: list[str]) -> str | None:
    return first[:1].lower() + first[1:]


def ucfirst(first: str, args: list[str]) -> str | None:
    return first[:1].upper() + first[1:]


PARSER_FUNCTIONS: dict[str, ParserFunction] = {
    "formatnum": formatnum,
    "lc": lambda first, args: first.lower(),
    "uc": lambda first, args: first.upper(),
    "lcfirst": lcfirst,
    "ucfirst": ucfirst,
}

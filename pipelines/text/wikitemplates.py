"""Render the few text-bearing Wikipedia templates to plain text; drop every other one.

Why: the wikitext cleaner must decide, for every `{{...}}` in every article, whether the
template contributes words to the running text. Most templates do not (infoboxes, navboxes,
citations, footnotes, maintenance tags) and are dropped. A small set carries sentence text
("the river is {{convert|10|km|mi}} long", "born {{birth date|1900|1|2}}", "{{lang|fr|texte}}")
and dropping those would leave holes ("the river is long"), which teaches BERT broken
grammar. This module is that small set, rendered the way Wikipedia shows it, minus links,
footnotes and unit conversions (the conversion is a bracketed aside, not the author's text).

The caller (the cleaner) has already rendered inner templates and replaced wiki links by
their text, split the template at its top-level pipes, and calls:

    render_template(name, args) -> str | None

`None` means "not text-bearing: drop it". Anything not in the table below returns `None`,
so an unknown template costs one dict lookup. This deliberately includes `IPA`, `IPAc-en`,
`respell`, `pronunciation`, `audio`, `efn`, `sfn`, `refn`, `r`, `cite *`, `citation needed`,
`infobox *`, `main`, `see also`, `quote` and all hatnotes: pronunciation guides, footnotes,
citations and navigation are not running text (a quote block is a separate paragraph the
cleaner may keep by other means; inline quotes are plain `"..."` in wikitext anyway).

Name normalisation (what MediaWiki does, plus full lower-casing for the lookup): strip,
underscores to spaces, collapse whitespace runs, drop a leading `Template:`, lower-case.
A name containing `:` after that is a parser function (`formatnum:1234`): the part before the
first `:` is the function, the rest its first argument (case kept, so `uc:abc` works).

Arguments: `key = value` is named when it matches `^\\s*[\\w ?-]+\\s*=` (as in MediaWiki,
`{{math|x = 1}}` passes a named `x`; the wikitext idiom `1=x = 1` is honoured: a numeric key
fills that positional slot). Keys are stripped and lower-cased; all values are stripped.

| Template (aliases)            | Renders                      | Example → output
|-------------------------------|------------------------------|-----------------------------------
| convert, cvt                  | input value(s) + unit only   | {{convert|10|km|mi}} → 10 km
|   range words: - – to and or  | - → en dash; x, × → ×;       | {{convert|10|-|20|km}} → 10–20 km
|   by x × +/- ± & + to(-) …    | +/- → ±; words spaced        | {{convert|10|x|20|m}} → 10 × 20 m
|   multi-unit input            | value unit value unit        | {{convert|6|ft|2|in|m}}
|                               |                              |   → 6 ft 2 in
|   adj=on                      | hyphen before the unit       | {{convert|10|km|adj=on}} → 10-km
| lang                          | the text only                | {{lang|fr|texte}} → texte
| lang-xx, langx                | Label: text, romanized: …,   | {{lang-fr|texte}} → French: texte
|                               | lit. '…'; unknown code: text | {{langx|fr|texte}} → French: texte
| transl, transliteration       | last positional argument     | {{transl|ar|DIN|text}} → text
| nihongo                       | Eng (kanji, romaji, extra)   | {{nihongo|Tokyo|東京|Tōkyō}}
|                               | extra2; no Eng: romaji leads |   → Tokyo (東京, Tōkyō)
| nihongo2                      | kanji only                   | {{nihongo2|東京}} → 東京
| nihongo3                      | romaji (kanji, Eng, extra)   | {{nihongo3|Tōkyō|東京|Tokyo}}
|                               |                              |   → Tōkyō (東京, Tokyo)
| nihongo foot                  | English only (rest: a note)  | {{nihongo foot|Tokyo|東京}} → Tokyo
| birth date, death date, dob,  | y|m|d → January 2, 1900;     | {{birth date|1900|1|2}}
|   birth date and age (bda),   | df=y → 2 January 1900;       |   → January 2, 1900
|   death date and age (dda),   | y|m → January 1900;          | {{dda|1993|2|24|1921|3|30}}
|   start date, end date,       | y → 1900; the first date     |   → February 24, 1993
|   start date and age          | only, never an age           |
| birth year and age,           | the first year               | {{birth year and age|1950}} → 1950
|   death year and age          |                              |
| date                          | Wikipedia's {{date}}: DMY by | {{date|2006-08-04}}
|                               | default, or MDY, YMD, ISO,   |   → 4 August 2006
|                               | none; y|m|d as birth date    | {{date|Aug 4, 2006|mdy}}
|                               |                              |   → August 4, 2006
| circa, c.                     | c. + first argument          | {{circa|1900}} → c. 1900
| floruit, fl.                  | fl. + first argument         | {{fl.|1200}} → fl. 1200
| as of                         | As of + date, DMY (df=US →   | {{as of|2010|5}} → As of May 2010
|                               | MDY); lc, since, bare, alt,  | {{as of|2010|lc=y}} → as of 2010
|                               | post                         |
| nowrap, nobr, small, smaller, | the first argument           | {{sub|2}} → 2
|   big, larger, sub, sup, em,  |                              | {{abbr|UK|United Kingdom}} → UK
|   strong, var, mvar, math,    |                              |
|   abbr, nobold, noitalic,     |                              |
|   small caps, smallcaps,      |                              |
|   visible anchor              |                              |
| sic, not a typo, proper name, | positional args joined, no   | {{sic|hte}} → hte
|   linktext                    | space (pieces of one word)   | {{linktext|a|b}} → ab
| ill, interlanguage link,      | lt= if given, else the first | {{ill|Foo|de|Foo (DE)}} → Foo
|   interlanguage link multi    | argument                     |
| anchor                        | "" (anchors are invisible)   | {{anchor|x}} → ""
| frac, sfrac, fraction         | w a/b in ASCII               | {{frac|3|1|2}} → 3 1/2
| US$, GBP, £, Euro, €, JPY, ¥, | symbol + amount              | {{US$|100}} → US$100
|   INR, ₹                      |                              |
| formatnum: (parser function)  | thousands commas; R removes  | {{formatnum:1234567}} → 1,234,567
| lc:, uc:, lcfirst:, ucfirst:  | case change of the argument  | {{uc:abc}} → ABC
| ' , 's , =                    | the same character(s)        | {{'s}} → 's
| !                             | a pipe                       | {{!}} → |
| ndash, en dash, endash        | –                            | {{ndash}} → –
| mdash, em dash, emdash        | —                            | {{mdash}} → —
| snd, spnd, sndash,            | " – " (spaces kept, below)   | a{{snd}}b → a – b
|   spaced ndash, spaced en dash|                              |
| nbsp                          | " " (plain space, below)     | a{{nbsp}}b → a b
| ·, dot, middot                | ·                            | {{middot}} → ·
| bull, bullet                  | •                            | {{bull}} → •

Returned text is stripped, with two deliberate exceptions where the whitespace *is* the
rendering: the spaced dashes return `" – "` and `nbsp` returns `" "` (a plain space, since a
no-break space is just a space to a tokenizer).

Convert units are shown as written except where the code is not how the unit reads:
`km2 m2 cm2 mm2 → km² m² cm² mm²`, `km3 m3 cm3 → km³ m³ cm³`, `sqmi mi2 → sq mi`,
`sqft ft2 → sq ft`, `sqin → sq in`, `cuft ft3 → cu ft`, `C F → °C °F`, `kph kmh → km/h`,
`acre → acres` unless the value is exactly 1 (or adj=on). `K`, `mph`, `km/h`, `ha` are already
how they read. Numbers are kept exactly as written (`1,000`, `1000`, `3.5`).

Ages (`(aged 71)`, `(age 74)`) are not rendered: the living person's age depends on the day
the page is rendered, so it would make the corpus non-reproducible.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = [
    "LANGUAGE_NAMES",
    "PARSER_FUNCTION_NAMES",
    "TEMPLATE_RENDERERS",
    "normalise_template_name",
    "render_template",
]

# A renderer gets (positional, named) with every value stripped and named keys lower-cased.
Renderer = Callable[[list[str], dict[str, str]], str | None]
# A parser function gets (its first argument, i.e. the text after `fn:`, and the raw args).
ParserFunction = Callable[[str, list[str]], str | None]

# MediaWiki's rule for a named argument is "anything before the first `=`"; the narrower
# `[\w -]+` keeps `a+b=c` (a formula in {{math}}) positional, which is what the author meant.
# `?` is allowed too for {{sic|hte|?=y}} ("possibly sic"), the one common key that needs it.
_NAMED_ARG_RE = re.compile(r"\s*([\w ?-]+?)\s*=")
_TEMPLATE_PREFIX = "template:"
_YES = frozenset({"y", "yes", "on", "true", "1"})

_EN_DASH = "–"
_EM_DASH = "—"


def _split_args(args: list[str]) -> tuple[list[str], dict[str, str]]:
    """Split raw args into (positional, named), stripping values as rendering needs.

    Numeric keys (`1=...`) fill that positional slot, as in MediaWiki: editors write them when
    the value itself contains `=`. Only called on a table hit, so the miss path never pays.
    """
    positional: list[str] = []
    named: dict[str, str] = {}
    numbered: dict[int, str] = {}
    for raw in args:
        match = _NAMED_ARG_RE.match(raw)
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


def _arg(positional: list[str], index: int) -> str:
    """Positional argument `index` (0-based), or "" when absent: templates treat both alike."""
    return positional[index] if index < len(positional) else ""


def _is_yes(value: str | None) -> bool:
    """Wikipedia templates accept y/yes/on/true/1 for boolean flags."""
    return value is not None and value.strip().lower() in _YES


# --------------------------------------------------------------------------------------------
# convert / cvt

# Range words of Module:Convert and how they read between two values.
_CONVERT_RANGE_SEPARATORS = {
    "-": _EN_DASH,
    _EN_DASH: _EN_DASH,
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
_CONVERT_UNIT_TEXT = {
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
_CONVERT_PLURAL_UNIT_TEXT = {"acre": "acres"}
# 1,000 / 3.5 / -4 / 1+1/2 / 1/2 / 1.5e6: enough to tell a value from a unit code.
_CONVERT_NUMBER_RE = re.compile(
    r"[-+−]?(?:\d[\d,]*(?:\.\d+)?|\.\d+)(?:[-+]\d+/\d+)?(?:e-?\d+)?|[-+−]?\d+/\d+"
)


def _is_convert_number(text: str) -> bool:
    return _CONVERT_NUMBER_RE.fullmatch(text) is not None


def _convert_unit_text(code: str, singular: bool) -> str:
    if not singular and code in _CONVERT_PLURAL_UNIT_TEXT:
        return _CONVERT_PLURAL_UNIT_TEXT[code]
    return _CONVERT_UNIT_TEXT.get(code, code)


def _render_convert(positional: list[str], named: dict[str, str]) -> str | None:
    """The input quantity only: `{{convert|10|km|mi}}` → `10 km`.

    The converted value is an editorial aside in brackets; the author's sentence reads with
    the input alone. Arguments after the input unit (output unit, precision) are ignored,
    except a number followed by a unit, which is a multi-unit input (`6|ft|2|in`).
    """
    value = _arg(positional, 0)
    if not value:
        return None
    adjective = _is_yes(named.get("adj"))
    joint = "-" if adjective else " "
    pieces = [value]
    index = 1
    count = len(positional)
    while (
        index + 1 < count
        and positional[index] in _CONVERT_RANGE_SEPARATORS
        and _is_convert_number(positional[index + 1])
    ):
        pieces.append(_CONVERT_RANGE_SEPARATORS[positional[index]])
        pieces.append(positional[index + 1])
        index += 2
    unit_code = _arg(positional, index)
    if not unit_code:
        return "".join(pieces)
    singular = adjective or (index == 1 and value == "1")
    pieces += [joint, _convert_unit_text(unit_code, singular)]
    index += 1
    while (
        index + 1 < count
        and _is_convert_number(positional[index])
        and positional[index + 1]
        and not _is_convert_number(positional[index + 1])
    ):
        extra_value, extra_unit = positional[index], positional[index + 1]
        singular = adjective or extra_value == "1"
        pieces += [" ", extra_value, joint, _convert_unit_text(extra_unit, singular)]
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
_LANG_PREFIXED = "lang-"


def _language_name(code: str) -> str | None:
    """English name for `fr`, `sr-Latn` (falls back to the base code), else None."""
    code = code.strip().lower()
    return LANGUAGE_NAMES.get(code) or LANGUAGE_NAMES.get(code.partition("-")[0])


def _render_lang(positional: list[str], named: dict[str, str]) -> str | None:
    """`{{lang|fr|texte}}` → `texte`: the markup only tags the language for screen readers."""
    return _arg(positional, 1)


def _render_labelled_language(code: str, positional: list[str], named: dict[str, str]) -> str:
    """`French: texte, romanized: …, lit. '…'`, as {{langx}} / {{lang-xx}} show it.

    The label is part of the sentence ("Munich (German: München)"), so it is kept; an unknown
    code has no label we can trust, so only the text shows. `label=none` drops the label.
    """
    text = _arg(positional, 0)
    transliteration = named.get("translit") or _arg(positional, 1)
    translation = named.get("lit") or named.get("translation") or _arg(positional, 2)
    label = named.get("label") or _language_name(code)
    parts = [f"{label}: {text}" if label and label.lower() != "none" else text]
    if transliteration:
        parts.append(f"romanized: {transliteration}")
    if translation:
        parts.append(f"lit. '{translation}'")
    return ", ".join(parts)


def _render_langx(positional: list[str], named: dict[str, str]) -> str | None:
    """`{{langx|fr|texte}}`: the successor of {{lang-fr|texte}}, code as first argument."""
    return _render_labelled_language(_arg(positional, 0), positional[1:], named)


def _render_transliteration(positional: list[str], named: dict[str, str]) -> str | None:
    """`{{transl|ar|DIN|text}}` → `text`: leading args are language and scheme codes."""
    return positional[-1] if len(positional) >= 2 else ""


def _render_nihongo(positional: list[str], named: dict[str, str]) -> str | None:
    """`{{nihongo|English|kanji|romaji|extra|extra2}}` → `English (kanji, romaji, extra) extra2`.

    With no English, the romaji leads instead (as Module:Nihongo does).
    """
    english, kanji, romaji, extra, extra2 = (positional + [""] * 5)[:5]
    lead = english or romaji
    inside = [part for part in (kanji, romaji if english else "", extra) if part]
    return _join_lead_and_aside(lead, inside, extra2)


def _render_nihongo3(positional: list[str], named: dict[str, str]) -> str | None:
    """`{{nihongo3|romaji|kanji|English|extra|extra2}}` → `romaji (kanji, English, extra) extra2`.

    The rōmaji-first variant, for names better known in Japanese.
    """
    romaji, kanji, english, extra, extra2 = (positional + [""] * 5)[:5]
    inside = [part for part in (kanji, english, extra) if part]
    return _join_lead_and_aside(romaji, inside, extra2)


def _render_nihongo_foot(positional: list[str], named: dict[str, str]) -> str | None:
    """`{{nihongo foot|English|kanji|romaji}}` → `English`: the rest goes to a footnote."""
    return _arg(positional, 0) or _arg(positional, 2)


def _join_lead_and_aside(lead: str, inside: list[str], after: str) -> str:
    if inside:
        aside = ", ".join(inside)
        text = f"{lead} ({aside})" if lead else aside
    else:
        text = lead
    return f"{text} {after}".strip() if after else text


# --------------------------------------------------------------------------------------------
# Dates

_MONTH_NAMES = (
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
_MONTH_BY_WORD = {name.lower(): name for name in _MONTH_NAMES} | {
    name[:3].lower(): name for name in _MONTH_NAMES
}
_MONTH_BY_WORD["sept"] = "September"
_ISO_DATE_RE = re.compile(r"(\d{1,4})-(\d{1,2})(?:-(\d{1,2}))?")
_DMY_TEXT_DATE_RE = re.compile(r"(\d{1,2})(?:st|nd|rd|th)?\s+([A-Za-z]+)\.?,?(?:\s+(\d{1,4}))?")
_MDY_TEXT_DATE_RE = re.compile(r"([A-Za-z]+)\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?(?:\s+(\d{1,4}))?")


def _month_name(month: str) -> str:
    """`1`/`01`/`jan`/`January` → `January`; anything else as written."""
    if month.isascii() and month.isdigit():
        number = int(month)
        return _MONTH_NAMES[number - 1] if 1 <= number <= 12 else month
    return _MONTH_BY_WORD.get(month.lower(), month)


def _format_date(year: str, month: str, day: str, day_first: bool) -> str:
    """`January 2, 1900` (or `2 January 1900`), degrading to `January 1900` and `1900`."""
    month_text = _month_name(month) if month else ""
    day_text = str(int(day)) if day.isascii() and day.isdigit() else day
    if month_text and day_text:
        if day_first:
            return f"{day_text} {month_text} {year}".strip()
        return f"{month_text} {day_text}, {year}" if year else f"{month_text} {day_text}"
    if month_text:
        return f"{month_text} {year}".strip()
    return year


def _render_ymd_date(positional: list[str], named: dict[str, str]) -> str | None:
    """`{{birth date|1900|1|2}}` → `January 2, 1900`; df=y → `2 January 1900`.

    Extra positional args (the second date of `death date and age`, a start date's time of
    day) are ignored: the first date is what the sentence needs, and the age is not stable.
    """
    day_first = _is_yes(named.get("df"))
    return _format_date(_arg(positional, 0), _arg(positional, 1), _arg(positional, 2), day_first)


def _render_first_arg(positional: list[str], named: dict[str, str]) -> str | None:
    """Formatting templates whose visible text is their first argument."""
    return _arg(positional, 0)


def _render_date(positional: list[str], named: dict[str, str]) -> str | None:
    """Wikipedia's {{date|<date>|<style>}}: DMY by default; MDY, YMD, ISO, none.

    Recognises ISO `2006-08-04`, `4 August 2006` and `Aug 4, 2006`; anything else is shown as
    written (as the template does). A numeric `y|m|d` triple is formatted like {{birth date}}.
    """
    first = _arg(positional, 0)
    second = _arg(positional, 1)
    if second.isascii() and second.isdigit() and first.isascii() and first.isdigit():
        return _render_ymd_date(positional, named)
    style = second.lower()
    if style == "none":
        return first
    year = month = day = ""
    if match := _ISO_DATE_RE.fullmatch(first):
        year, month, day = match.group(1), match.group(2), match.group(3) or ""
    elif (match := _DMY_TEXT_DATE_RE.fullmatch(first)) and match.group(2).lower() in _MONTH_BY_WORD:
        day, month, year = match.group(1), match.group(2), match.group(3) or ""
    elif (match := _MDY_TEXT_DATE_RE.fullmatch(first)) and match.group(1).lower() in _MONTH_BY_WORD:
        month, day, year = match.group(1), match.group(2), match.group(3) or ""
    else:
        return first
    if _month_name(month) not in _MONTH_NAMES:
        return first  # `2006-13-01` is not a date: show it as written, as {{date}} does
    if style == "iso":
        month_number = _MONTH_NAMES.index(_month_name(month)) + 1
        return "-".join(part for part in (year, f"{month_number:02d}", _pad(day)) if part)
    if style == "ymd":
        return " ".join(part for part in (year, _month_name(month), _unpad(day)) if part)
    return _format_date(year, month, day, day_first=style != "mdy")


def _pad(day: str) -> str:
    return f"{int(day):02d}" if day else ""


def _unpad(day: str) -> str:
    return str(int(day)) if day else ""


def _render_as_of(positional: list[str], named: dict[str, str]) -> str | None:
    """`{{as of|2010|5|12}}` → `As of 12 May 2010` (df=US → `As of May 12, 2010`).

    `alt=` replaces the whole text; `lc=y` lower-cases, `since=y` says "Since", `bare=y`
    drops the phrase, `post=` is appended (usually punctuation).
    """
    if alternative := named.get("alt"):
        return alternative
    day_first = named.get("df", "").strip().lower() not in {"us", "mdy"}
    date = _format_date(_arg(positional, 0), _arg(positional, 1), _arg(positional, 2), day_first)
    phrase = "Since" if _is_yes(named.get("since")) else "As of"
    if _is_yes(named.get("lc")):
        phrase = phrase.lower()
    text = date if _is_yes(named.get("bare")) else f"{phrase} {date}".strip()
    return text + named.get("post", "")


def _make_prefixed(prefix: str) -> Renderer:
    """{{circa|1900}} → `c. 1900`, {{circa}} → `c.`: a fixed abbreviation before the date."""

    def render(positional: list[str], named: dict[str, str]) -> str | None:
        value = _arg(positional, 0)
        return f"{prefix} {value}" if value else prefix

    render.__doc__ = f"`{prefix}` followed by the first argument, if any."
    return render


# --------------------------------------------------------------------------------------------
# Inline text and punctuation


def _render_concatenated(positional: list[str], named: dict[str, str]) -> str | None:
    """{{sic|hte}}, {{linktext|a|b}}: the args are pieces of one word, joined without spaces.

    The two-argument {{sic|Jan|ury}} form exists only so spell-check bots skip the word.
    """
    return "".join(positional)


def _render_interlanguage_link(positional: list[str], named: dict[str, str]) -> str | None:
    """{{ill|Foo|de|Foo (Deutschland)}} → `Foo` (or the link text `lt=`)."""
    return named.get("lt") or _arg(positional, 0)


def _render_fraction(positional: list[str], named: dict[str, str]) -> str | None:
    """{{frac|1|2}} → `1/2`, {{frac|3|1|2}} → `3 1/2`, {{frac|2}} → `1/2` (ASCII for BERT)."""
    parts = [part for part in positional[:3] if part]
    if len(parts) == 1:
        return f"1/{parts[0]}"
    if len(parts) == 2:
        return f"{parts[0]}/{parts[1]}"
    if len(parts) == 3:
        return f"{parts[0]} {parts[1]}/{parts[2]}"
    return ""


def _make_currency(symbol: str) -> Renderer:
    """{{US$|100}} → `US$100`: the symbol glued to the amount, further args (year) ignored."""

    def render(positional: list[str], named: dict[str, str]) -> str | None:
        return symbol + _arg(positional, 0)

    render.__doc__ = f"`{symbol}` followed by the amount."
    return render


def _make_constant(text: str) -> Renderer:
    """Punctuation templates: always the same character(s), whatever the arguments."""

    def render(positional: list[str], named: dict[str, str]) -> str | None:
        return text

    render.__doc__ = f"Always {text!r}."
    return render


# --------------------------------------------------------------------------------------------
# Parser functions: {{name:first|args}}

_FORMATNUM_RE = re.compile(r"([-+−]?)(\d+)((?:\.\d*)?)")
_THOUSANDS_GAP_RE = re.compile(r"(?<=\d)(?=(?:\d{3})+$)")


def _formatnum(first: str, args: list[str]) -> str | None:
    """{{formatnum:1234567}} → `1,234,567`; `|R` removes separators; non-numbers unchanged."""
    flags = {arg.strip().lower() for arg in args}
    if "r" in flags:
        return first.replace(",", "")
    match = _FORMATNUM_RE.fullmatch(first)
    if match is None or "nosep" in flags:
        return first
    sign, integer, fraction = match.groups()
    return sign + _THOUSANDS_GAP_RE.sub(",", integer) + fraction


def _lcfirst(first: str, args: list[str]) -> str | None:
    return first[:1].lower() + first[1:]


def _ucfirst(first: str, args: list[str]) -> str | None:
    return first[:1].upper() + first[1:]


_PARSER_FUNCTIONS: dict[str, ParserFunction] = {
    "formatnum": _formatnum,
    "lc": lambda first, args: first.lower(),
    "uc": lambda first, args: first.upper(),
    "lcfirst": _lcfirst,
    "ucfirst": _ucfirst,
}


# --------------------------------------------------------------------------------------------
# The table


def _build_table() -> dict[str, Renderer]:
    """Normalised (lower-case) template name → renderer. Built once at import."""
    groups: list[tuple[tuple[str, ...], Renderer]] = [
        (("convert", "cvt"), _render_convert),
        (("lang",), _render_lang),
        (("langx",), _render_langx),
        (("transl", "transliteration"), _render_transliteration),
        (("nihongo",), _render_nihongo),
        (("nihongo2",), _render_first_arg),
        (("nihongo3",), _render_nihongo3),
        (("nihongo foot",), _render_nihongo_foot),
        (
            (
                "birth date",
                "death date",
                "birth date and age",
                "bda",
                "death date and age",
                "dda",
                "start date",
                "end date",
                "start date and age",
                "dob",
            ),
            _render_ymd_date,
        ),
        (("birth year and age", "death year and age"), _render_first_arg),
        (("date",), _render_date),
        (("circa", "c."), _make_prefixed("c.")),
        (("floruit", "fl."), _make_prefixed("fl.")),
        (("as of",), _render_as_of),
        (
            (
                "nowrap",
                "nobr",
                "small",
                "smaller",
                "big",
                "larger",
                "sub",
                "sup",
                "em",
                "strong",
                "var",
                "mvar",
                "math",
                "abbr",
                "nobold",
                "noitalic",
                "small caps",
                "smallcaps",
                "visible anchor",
            ),
            _render_first_arg,
        ),
        (("sic", "not a typo", "proper name", "linktext"), _render_concatenated),
        (
            ("ill", "interlanguage link", "interlanguage link multi"),
            _render_interlanguage_link,
        ),
        (("anchor",), _make_constant("")),
        (("frac", "sfrac", "fraction"), _render_fraction),
        (("us$",), _make_currency("US$")),
        (("gbp", "£"), _make_currency("£")),
        (("euro", "€"), _make_currency("€")),
        (("jpy", "¥"), _make_currency("¥")),
        (("inr", "₹"), _make_currency("₹")),
        (("'",), _make_constant("'")),
        (("'s",), _make_constant("'s")),
        (("=",), _make_constant("=")),
        (("!",), _make_constant("|")),
        (("ndash", "en dash", "endash"), _make_constant(_EN_DASH)),
        (("mdash", "em dash", "emdash"), _make_constant(_EM_DASH)),
        (
            ("snd", "spnd", "sndash", "spaced ndash", "spaced en dash"),
            _make_constant(f" {_EN_DASH} "),
        ),
        (("nbsp",), _make_constant(" ")),
        (("·", "dot", "middot"), _make_constant("·")),
        (("bull", "bullet"), _make_constant("•")),
    ]
    table: dict[str, Renderer] = {}
    for names, renderer in groups:
        for name in names:
            if name in table:
                raise ValueError(f"template {name!r} listed twice")
            table[name] = renderer
    return table


TEMPLATE_RENDERERS: dict[str, Renderer] = _build_table()
# Parser function names, for callers that want to list what is supported.
PARSER_FUNCTION_NAMES = frozenset(_PARSER_FUNCTIONS)


def normalise_template_name(name: str) -> str:
    """The lookup key for a raw template name: `Template:Birth_date \\n` → `birth date`."""
    key = " ".join(name.replace("_", " ").split()).lower()
    if key.startswith(_TEMPLATE_PREFIX):
        key = key[len(_TEMPLATE_PREFIX) :].lstrip()
    return key


def render_template(name: str, args: list[str]) -> str | None:
    """Plain text of template `{{name|args...}}`, or None when it is not running text.

    `name` is the raw text before the first top-level pipe; `args` the raw arguments, with
    inner templates and links already rendered. Unknown names cost one normalisation and one
    dict lookup, because that is the overwhelmingly common case (citations, infoboxes).
    """
    # normalise_template_name, inlined: a function call is a fifth of the miss-path cost.
    key = " ".join(name.replace("_", " ").split()).lower()
    if key.startswith(_TEMPLATE_PREFIX):
        key = key[len(_TEMPLATE_PREFIX) :].lstrip()
    renderer = TEMPLATE_RENDERERS.get(key)
    if renderer is not None:
        positional, named = _split_args(args)
        return renderer(positional, named)
    if ":" in key:
        return _render_parser_function(name, args)
    if key.startswith(_LANG_PREFIXED):
        positional, named = _split_args(args)
        return _render_labelled_language(key[len(_LANG_PREFIXED) :], positional, named)
    return None


def _render_parser_function(name: str, args: list[str]) -> str | None:
    """`{{formatnum:1234|R}}` and kin; None for functions we do not render (`#if:`, `#tag:`).

    The function name (before the first colon) is case-insensitive; the text after it is the
    first argument and keeps its case and underscores, as MediaWiki passes it.
    """
    function_name, _, first = name.partition(":")
    function = _PARSER_FUNCTIONS.get(" ".join(function_name.split()).lower())
    if function is None:
        return None
    return function(first.strip(), args)

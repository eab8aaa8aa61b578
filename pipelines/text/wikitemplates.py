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
|   strong, var, mvar, math,    |                              | {{vr|ai}} → ai
|   abbr, nobold, noitalic,     |                              | {{chem2|H2O}} → H2O
|   small caps, smallcaps, sc,  |                              |
|   sc1, sc2, smallcaps all,    |                              |
|   visible anchor, vr, chem2   |                              |
| sic, not a typo, proper name, | positional args joined, no   | {{sic|hte}} → hte
|   linktext, chem              | space (pieces of one word)   | {{chem|H|2|O}} → H2O
| angbr                         | ⟨first argument⟩             | {{angbr|a}} → ⟨a⟩
| val                           | number; ±uncertainty (or     | {{val|6.241|e=18}} → 6.241×10^18
|                               | "(7)" as written); ×10^e;    | {{val|1.5|u=m}} → 1.5 m
|                               | " unit" (u=, ul=); "/unit"   | {{val|1.5|0.2}} → 1.5±0.2
|                               | (up=, upl=); as written      |
| USS, HMS, HMAS, HMCS, HMNZS,  | prefix name (id); the        | {{USS|Hornet|CV-12}}
|   SS, RMS, MV, USNS, USCGC    | display argument: 1 or 6 →   |   → USS Hornet (CV-12)
|                               | prefix name, 2 → name,       | {{USS|Hornet}} → USS Hornet
|                               | 3 → name (id)                |
| ship                          | the same, the prefix first   | {{ship|HMS|Dreadnought|1906}}
|                               |                              |   → HMS Dreadnought (1906)
| harvtxt                       | authors (year, p. x): A;     | {{harvtxt|Boolos|Jeffrey|1974}}
|                               | A & B; A, B & C; four or     |   → Boolos & Jeffrey (1974)
|                               | more: A et al.; the year is  | {{harvtxt|Smith|1990a|p=5}}
|                               | the last argument that starts|   → Smith (1990a, p. 5)
|                               | with one (1974, 1974a, n.d., |
|                               | "1974, 1999")                |
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
| inflation, age, age in years, | GAP (below)                  | {{inflation|US|5|1929}} → GAP
|   currentyear, currentmonth,  |                              | {{CURRENTYEAR}} → GAP
|   currentmonthname,           |                              |
|   currentmonthabbrev,         |                              |
|   currentday, currentdayname, |                              |
|   currenttime, railgauge      |                              |
| coord                         | GAP; "" for display=title    | {{coord|42|N|1|E}} → GAP
| #expr:, #time: (functions)    | GAP                          | {{#expr:2024-1950}} → GAP

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

GAP (`template_renderers.GAP`, one private-use character) is what a template renders to when
it shows words of the sentence that cannot be rendered reproducibly: a value from a data table
({{inflation}}, {{RailGauge}}), the day the page is rendered ({{CURRENTYEAR}} and the other
magic words of the date, which normalise to the same names; {{age}}; {{#expr:}} and {{#time:}},
which mostly compute from them), or coordinates shown in the text ({{coord}}). Dropping such a
template would leave a hole ("$5 ($ in dollars)"); the cleaner's caller drops every sentence
that holds GAP instead. A template that renders GAP alone on its line (other templates aside)
leaves nothing, as the page furniture it usually is ({{coord}} after the infobox) did before.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache, partial

from pipelines.text.notation_renderers import (
    gap_parser_function,
    make_ship,
    render_angle_brackets,
    render_coord,
    render_gap,
    render_harvtxt,
    render_ship,
    render_val,
)
from pipelines.text.template_renderers import (
    EM_DASH,
    EN_DASH,
    LANG_PREFIXED,
    LANGUAGE_NAMES,
    PARSER_FUNCTIONS,
    TEMPLATE_PREFIX,
    Renderer,
    make_constant,
    make_currency,
    make_prefixed,
    render_as_of,
    render_concatenated,
    render_convert,
    render_date,
    render_first_arg,
    render_fraction,
    render_interlanguage_link,
    render_labelled_language,
    render_lang,
    render_langx,
    render_nihongo,
    render_nihongo3,
    render_nihongo_foot,
    render_transliteration,
    render_ymd_date,
    split_args,
)

__all__ = [
    "LANGUAGE_NAMES",
    "PARSER_FUNCTION_NAMES",
    "TEMPLATE_RENDERERS",
    "normalise_template_name",
    "render_template",
    "template_renderer",
]


# --------------------------------------------------------------------------------------------
# The table


# The ship-prefix templates: {{USS|Hornet|CV-12}} → USS Hornet (CV-12).
SHIP_PREFIXES = ("USS", "HMS", "HMAS", "HMCS", "HMNZS", "SS", "RMS", "MV", "USNS", "USCGC")


def _build_table() -> dict[str, Renderer]:
    """Normalised (lower-case) template name → renderer. Built once at import."""
    groups: list[tuple[tuple[str, ...], Renderer]] = [
        (("convert", "cvt"), render_convert),
        (("lang",), render_lang),
        (("langx",), render_langx),
        (("transl", "transliteration"), render_transliteration),
        (("nihongo",), render_nihongo),
        (("nihongo2",), render_first_arg),
        (("nihongo3",), render_nihongo3),
        (("nihongo foot",), render_nihongo_foot),
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
            render_ymd_date,
        ),
        (("birth year and age", "death year and age"), render_first_arg),
        (("date",), render_date),
        (("circa", "c."), make_prefixed("c.")),
        (("floruit", "fl."), make_prefixed("fl.")),
        (("as of",), render_as_of),
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
                "sc",
                "sc1",
                "sc2",
                "smallcaps all",
                "visible anchor",
                "vr",
                "chem2",
            ),
            render_first_arg,
        ),
        (("sic", "not a typo", "proper name", "linktext", "chem"), render_concatenated),
        (("angbr",), render_angle_brackets),
        (("val",), render_val),
        *[((prefix.lower(),), make_ship(prefix)) for prefix in SHIP_PREFIXES],
        (("ship",), render_ship),
        (("harvtxt",), render_harvtxt),
        (
            (
                "inflation",
                "age",
                "age in years",
                "currentyear",
                "currentmonth",
                "currentmonthname",
                "currentmonthabbrev",
                "currentday",
                "currentdayname",
                "currenttime",
                "railgauge",
            ),
            render_gap,
        ),
        (("coord",), render_coord),
        (
            ("ill", "interlanguage link", "interlanguage link multi"),
            render_interlanguage_link,
        ),
        (("anchor",), make_constant("")),
        (("frac", "sfrac", "fraction"), render_fraction),
        (("us$",), make_currency("US$")),
        (("gbp", "£"), make_currency("£")),
        (("euro", "€"), make_currency("€")),
        (("jpy", "¥"), make_currency("¥")),
        (("inr", "₹"), make_currency("₹")),
        (("'",), make_constant("'")),
        (("'s",), make_constant("'s")),
        (("=",), make_constant("=")),
        (("!",), make_constant("|")),
        (("ndash", "en dash", "endash"), make_constant(EN_DASH)),
        (("mdash", "em dash", "emdash"), make_constant(EM_DASH)),
        (
            ("snd", "spnd", "sndash", "spaced ndash", "spaced en dash"),
            make_constant(f" {EN_DASH} "),
        ),
        (("nbsp",), make_constant(" ")),
        (("·", "dot", "middot"), make_constant("·")),
        (("bull", "bullet"), make_constant("•")),
    ]
    table: dict[str, Renderer] = {}
    for names, renderer in groups:
        for name in names:
            if name in table:
                raise ValueError(f"template {name!r} listed twice")
            table[name] = renderer
    return table


TEMPLATE_RENDERERS: dict[str, Renderer] = _build_table()
_PARSER_FUNCTIONS = {**PARSER_FUNCTIONS, "#expr": gap_parser_function, "#time": gap_parser_function}
# Parser function names, for callers that want to list what is supported.
PARSER_FUNCTION_NAMES = frozenset(_PARSER_FUNCTIONS)


def normalise_template_name(name: str) -> str:
    """The lookup key for a raw template name: `Template:Birth_date \\n` → `birth date`."""
    key = " ".join(name.replace("_", " ").split()).lower()
    if key.startswith(TEMPLATE_PREFIX):
        key = key[len(TEMPLATE_PREFIX) :].lstrip()
    return key


def render_template(name: str, args: list[str]) -> str | None:
    """Plain text of template `{{name|args...}}`, or None when it is not running text.

    `name` is the raw text before the first top-level pipe; `args` the raw arguments, with
    inner templates and links already rendered.
    """
    renderer = template_renderer(name)
    return None if renderer is None else renderer(args)


@lru_cache(maxsize=4096)
def template_renderer(name: str) -> Callable[[list[str]], str | None] | None:
    """What renders `{{name|…}}` from its raw arguments; None when `render_template` returns
    None whatever they are, so the caller need not split them.

    Unknown names cost one normalisation and one dict lookup, because that is the
    overwhelmingly common case (citations, infoboxes), and the answer is kept for the next
    template of the same raw name (articles repeat `cite web`, `sfn`, `convert` …).
    """
    # normalise_template_name, inlined: a function call is a fifth of the miss-path cost.
    key = " ".join(name.replace("_", " ").split()).lower()
    if key.startswith(TEMPLATE_PREFIX):
        key = key[len(TEMPLATE_PREFIX) :].lstrip()
    renderer = TEMPLATE_RENDERERS.get(key)
    if renderer is not None:
        return partial(_render_with, renderer)
    if ":" in key:
        return partial(_render_parser_function, name)
    if key.startswith(LANG_PREFIXED):
        return partial(_render_with, partial(render_labelled_language, key[len(LANG_PREFIXED) :]))
    return None


def _render_with(renderer: Renderer, args: list[str]) -> str | None:
    positional, named = split_args(args)
    return renderer(positional, named)


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

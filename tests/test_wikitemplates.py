"""Exact renderings of the text-bearing templates, and None for everything else.

Each case is a literal `(name, args)` as the cleaner passes it: the raw name before the first
top-level pipe, and raw, unstripped arguments.
"""

from __future__ import annotations

import pytest

from pipelines.text.template_renderers import GAP
from pipelines.text.wikitemplates import (
    LANGUAGE_NAMES,
    PARSER_FUNCTION_NAMES,
    TEMPLATE_RENDERERS,
    normalise_template_name,
    render_template,
)


def case(name: str, args: list[str], expected: str | None):
    """One table row, with a readable test id (`{{convert|10|km|mi}}`)."""
    shown = "|".join([name, *args]).replace("\n", "\\n")
    return pytest.param(name, args, expected, id="{{" + shown + "}}")


def check(name: str, args: list[str], expected: str | None) -> None:
    assert render_template(name, args) == expected


CONVERT_CASES = [
    case("convert", ["10", "km", "mi"], "10 km"),
    case("cvt", ["10", "km", "mi"], "10 km"),
    case("convert", ["10", "km"], "10 km"),
    case("convert", ["10"], "10"),
    case("convert", ["1,000", "m", "ft"], "1,000 m"),
    case("convert", ["1000", "m", "ft"], "1000 m"),
    case("convert", ["3.5", "mi", "km"], "3.5 mi"),
    case("convert", [" 10 ", " km ", "mi"], "10 km"),
    case("convert", ["10", "km", "mi", "2"], "10 km"),
    # Ranges.
    case("convert", ["10", "to", "20", "km"], "10 to 20 km"),
    case("convert", ["10", "-", "20", "km"], "10–20 km"),
    case("convert", ["10", "–", "20", "km"], "10–20 km"),
    case("convert", ["10", "and", "20", "km"], "10 and 20 km"),
    case("convert", ["10", "or", "20", "km"], "10 or 20 km"),
    case("convert", ["10", "by", "20", "m"], "10 by 20 m"),
    case("convert", ["10", "x", "20", "m"], "10 × 20 m"),
    case("convert", ["10", "×", "20", "m"], "10 × 20 m"),
    case("convert", ["10", "+/-", "2", "km"], "10 ± 2 km"),
    case("convert", ["10", "±", "2", "km"], "10 ± 2 km"),
    case("convert", ["10", "to(-)", "20", "km"], "10 to 20 km"),
    case("convert", ["1", "x", "2", "x", "3", "m"], "1 × 2 × 3 m"),
    # Multi-unit input; the output unit after it is ignored.
    case("convert", ["6", "ft", "2", "in", "m"], "6 ft 2 in"),
    case("convert", ["6", "ft", "2", "in"], "6 ft 2 in"),
    case("convert", ["1", "lb", "5", "oz", "g"], "1 lb 5 oz"),
    # Named args: only adj=on changes the text.
    case("convert", ["10", "km", "mi", "adj=on"], "10-km"),
    case("convert", ["10", "km", "mi", " adj = on "], "10-km"),
    case("convert", ["10", "to", "20", "km", "adj=on"], "10 to 20-km"),
    case("convert", ["10", "km", "mi", "abbr=on"], "10 km"),
    case("convert", ["10", "km", "mi", "sp=us"], "10 km"),
    case("convert", ["10", "km", "mi", "adj=off"], "10 km"),
    # Unit codes that are not how the unit reads.
    case("convert", ["100", "km2", "sqmi"], "100 km²"),
    case("convert", ["100", "m2", "sqft"], "100 m²"),
    case("convert", ["100", "sqmi", "km2"], "100 sq mi"),
    case("convert", ["100", "sqft", "m2"], "100 sq ft"),
    case("convert", ["5", "m3", "cuft"], "5 m³"),
    case("convert", ["20", "C", "F"], "20 °C"),
    case("convert", ["68", "F", "C"], "68 °F"),
    case("convert", ["300", "K", "C"], "300 K"),
    case("convert", ["60", "mph", "km/h"], "60 mph"),
    case("convert", ["100", "km/h", "mph"], "100 km/h"),
    case("convert", ["100", "kph", "mph"], "100 km/h"),
    case("convert", ["5", "ha", "acre"], "5 ha"),
    case("convert", ["5", "acre", "ha"], "5 acres"),
    case("convert", ["1", "acre", "ha"], "1 acre"),
    case("convert", ["1", "to", "2", "acre", "ha"], "1 to 2 acres"),
    case("convert", ["5", "acre", "ha", "adj=on"], "5-acre"),
    # Malformed: nothing to show.
    case("convert", [], None),
    case("convert", ["", "km"], None),
]


@pytest.mark.parametrize(("name", "args", "expected"), CONVERT_CASES)
def test_convert(name: str, args: list[str], expected: str | None) -> None:
    check(name, args, expected)


LANGUAGE_CASES = [
    case("lang", ["fr", "texte"], "texte"),
    case("lang", ["fr", " texte ", "italic=no"], "texte"),
    case("lang", ["fr"], ""),
    case("lang-fr", ["texte"], "French: texte"),
    case("lang-de", ["München"], "German: München"),
    case("Lang-de", ["München"], "German: München"),
    case("lang-sr-Latn", ["Beograd"], "Serbian: Beograd"),
    case("lang-qq", ["texte"], "texte"),
    case("lang-ru", ["Москва", "Moskva"], "Russian: Москва, romanized: Moskva"),
    case(
        "lang-ru",
        ["Москва", "Moskva", "Moscow"],
        "Russian: Москва, romanized: Moskva, lit. 'Moscow'",
    ),
    case("lang-ru", ["Москва", "translit=Moskva"], "Russian: Москва, romanized: Moskva"),
    case("lang-fr", ["texte", "label=none"], "texte"),
    case("lang-fr", ["texte", "label=Old French"], "Old French: texte"),
    case("langx", ["fr", "texte"], "French: texte"),
    case("langx", ["ja", "東京", "lit=East Capital"], "Japanese: 東京, lit. 'East Capital'"),
    case("langx", ["qq", "texte"], "texte"),
    case("transl", ["ar", "DIN", "text"], "text"),
    case("transl", ["ja", "Tōkyō"], "Tōkyō"),
    case("transliteration", ["ar", "DIN", "text"], "text"),
    case("transl", ["ar"], ""),
    case("nihongo", ["Tokyo", "東京", "Tōkyō"], "Tokyo (東京, Tōkyō)"),
    case("nihongo", ["Tokyo", "東京", ""], "Tokyo (東京)"),
    case("nihongo", ["Tokyo", "東京"], "Tokyo (東京)"),
    case(
        "nihongo",
        ["Tokyo", "東京", "Tōkyō", "lit. East Capital"],
        "Tokyo (東京, Tōkyō, lit. East Capital)",
    ),
    case("nihongo", ["Tokyo", "東京", "", "extra"], "Tokyo (東京, extra)"),
    case(
        "nihongo",
        ["Tokyo", "東京", "Tōkyō", "", "is the capital"],
        "Tokyo (東京, Tōkyō) is the capital",
    ),
    case("nihongo", ["", "東京", "Tōkyō"], "Tōkyō (東京)"),
    case("nihongo", ["Tokyo"], "Tokyo"),
    case("nihongo2", ["東京"], "東京"),
    case("nihongo3", ["Tōkyō", "東京", "Tokyo"], "Tōkyō (東京, Tokyo)"),
    case("nihongo foot", ["Tokyo", "東京", "Tōkyō"], "Tokyo"),
]


@pytest.mark.parametrize(("name", "args", "expected"), LANGUAGE_CASES)
def test_languages(name: str, args: list[str], expected: str | None) -> None:
    check(name, args, expected)


@pytest.mark.parametrize("code", sorted(LANGUAGE_NAMES))
def test_every_mapped_language_labels_lang_xx(code: str) -> None:
    assert render_template(f"lang-{code}", ["x"]) == f"{LANGUAGE_NAMES[code]}: x"


DATE_CASES = [
    case("birth date", ["1900", "1", "2"], "January 2, 1900"),
    case("birth date", ["1900", "01", "02"], "January 2, 1900"),
    case("birth date", ["1900", "1", "2", "df=y"], "2 January 1900"),
    case("birth date", ["1900", "1", "2", "df=yes"], "2 January 1900"),
    case("birth date", ["1900", "1", "2", "mf=y"], "January 2, 1900"),
    case("birth date", ["1900", "1", "2", "df=no"], "January 2, 1900"),
    case("birth date", ["1900"], "1900"),
    case("birth date", ["1900", "12"], "December 1900"),
    case("birth date", ["1900", "12", "df=y"], "December 1900"),
    case("death date", ["1993", "2", "24"], "February 24, 1993"),
    case("birth date and age", ["1950", "7", "4"], "July 4, 1950"),
    case("bda", ["1950", "7", "4", "df=y"], "4 July 1950"),
    case("death date and age", ["1993", "2", "24", "1921", "3", "30"], "February 24, 1993"),
    case("dda", ["1993", "2", "24", "1921", "3", "30", "df=yes"], "24 February 1993"),
    case("start date", ["2001", "5", "20"], "May 20, 2001"),
    case("start date", ["2001", "5", "20", "10", "30"], "May 20, 2001"),
    case("end date", ["2001", "5"], "May 2001"),
    case("start date and age", ["2001"], "2001"),
    case("dob", ["1900", "1", "2"], "January 2, 1900"),
    case("date", ["1900", "1", "2"], "January 2, 1900"),
    case("date", ["1900", "1", "2", "df=y"], "2 January 1900"),
    # {{date|<date>|<style>}}: Wikipedia's own syntax, DMY by default.
    case("date", ["2006-08-04"], "4 August 2006"),
    case("date", ["2006-08-04", "dmy"], "4 August 2006"),
    case("date", ["2006-08-04", "MDY"], "August 4, 2006"),
    case("date", ["2006-08-04", "ymd"], "2006 August 4"),
    case("date", ["2006-08-04", "iso"], "2006-08-04"),
    case("date", ["2006-08-04", "none"], "2006-08-04"),
    case("date", ["Aug 4, 2006"], "4 August 2006"),
    case("date", ["4 August 2006", "mdy"], "August 4, 2006"),
    case("date", ["4 August 2006", "iso"], "2006-08-04"),
    case("date", ["4 August"], "4 August"),
    case("date", ["2006-08"], "August 2006"),
    case("date", ["2006-13-01"], "2006-13-01"),
    case("date", ["sometime in 2006"], "sometime in 2006"),
    case("birth year and age", ["1950"], "1950"),
    case("birth year and age", ["1950", "7"], "1950"),
    case("death year and age", ["2000", "1950"], "2000"),
    case("circa", ["1900"], "c. 1900"),
    case("circa", [], "c."),
    case("c.", ["1900"], "c. 1900"),
    case("floruit", ["1200"], "fl. 1200"),
    case("fl.", ["1200"], "fl. 1200"),
    case("fl.", [], "fl."),
    case("as of", ["2010"], "As of 2010"),
    case("as of", ["2010", "5"], "As of May 2010"),
    case("as of", ["2010", "05"], "As of May 2010"),
    case("as of", ["2010", "Sep"], "As of September 2010"),
    case("as of", ["2010", "5", "12"], "As of 12 May 2010"),
    case("as of", ["2010", "5", "12", "df=US"], "As of May 12, 2010"),
    case("as of", ["2010", "lc=y"], "as of 2010"),
    case("As of", ["2010", "5", "since=y"], "Since May 2010"),
    case("as of", ["2010", "bare=yes"], "2010"),
    case("as of", ["2010", "post=,"], "As of 2010,"),
    case("as of", ["2010", "alt=at the last census"], "at the last census"),
]


@pytest.mark.parametrize(("name", "args", "expected"), DATE_CASES)
def test_dates(name: str, args: list[str], expected: str | None) -> None:
    check(name, args, expected)


INLINE_CASES = [
    *[
        case(name, [" text "], "text")
        for name in (
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
            "nobold",
            "noitalic",
            "small caps",
            "smallcaps",
            "visible anchor",
        )
    ],
    case("nowrap", [], ""),
    case("math", ["1=x = 2"], "x = 2"),
    case("math", ["a+b=c"], "a+b=c"),
    case("math", ["x = 2"], ""),  # a named `x`, exactly as MediaWiki reads it
    case("abbr", ["UK", "United Kingdom"], "UK"),
    case("sic", ["hte"], "hte"),
    case("sic", ["Jan", "ury"], "Janury"),
    case("sic", ["hte", "?=y"], "hte"),
    case("not a typo", ["teh"], "teh"),
    case("proper name", ["Kool Keith"], "Kool Keith"),
    case("linktext", ["a", "b", "c"], "abc"),
    case("ill", ["Foo", "de", "Foo (Deutschland)"], "Foo"),
    case("ill", ["Foo", "de", "Foo (Deutschland)", "lt=the foo"], "the foo"),
    case("interlanguage link", ["Foo", "fr"], "Foo"),
    case("interlanguage link multi", ["Foo", "fr"], "Foo"),
    case("anchor", ["here"], ""),
    case("anchor", ["a", "b"], ""),
    case("frac", ["1", "2"], "1/2"),
    case("frac", ["3", "1", "2"], "3 1/2"),
    case("frac", ["2"], "1/2"),
    case("frac", [], ""),
    case("sfrac", ["1", "2"], "1/2"),
    case("fraction", ["3", "1", "2"], "3 1/2"),
    case("US$", ["100"], "US$100"),
    case("us$", ["1.5 million", "2010"], "US$1.5 million"),
    case("GBP", ["100"], "£100"),
    case("£", ["100"], "£100"),
    case("€", ["100"], "€100"),
    case("Euro", ["100"], "€100"),
    case("JPY", ["100"], "¥100"),
    case("INR", ["100"], "₹100"),
]


@pytest.mark.parametrize(("name", "args", "expected"), INLINE_CASES)
def test_inline_text(name: str, args: list[str], expected: str | None) -> None:
    check(name, args, expected)


PARSER_FUNCTION_CASES = [
    case("formatnum:1234567", [], "1,234,567"),
    case("formatnum: 1234567 ", [], "1,234,567"),
    case("formatnum:123", [], "123"),
    case("formatnum:1234", [], "1,234"),
    case("formatnum:-1234567.891", [], "-1,234,567.891"),
    case("formatnum:1,234,567", ["R"], "1234567"),
    case("formatnum:1234567", ["NOSEP"], "1234567"),
    case("formatnum:abc", [], "abc"),
    case("formatnum:", [], ""),
    case("FORMATNUM:1000", [], "1,000"),
    case("lc:ABC Def", [], "abc def"),
    case("uc:abc", [], "ABC"),
    case("lcfirst:ABC", [], "aBC"),
    case("ucfirst:abc", [], "Abc"),
    case("ucfirst:", [], ""),
    case("#if:yes", ["a", "b"], None),
    case("#invoke:String", ["len", "x"], None),
    case("DEFAULTSORT:Smith, John", [], None),
    case("PAGENAME", [], None),
]


@pytest.mark.parametrize(("name", "args", "expected"), PARSER_FUNCTION_CASES)
def test_parser_functions(name: str, args: list[str], expected: str | None) -> None:
    check(name, args, expected)


NOTATION_CASES = [
    case("chem", ["H", "2", "O"], "H2O"),
    case("chem", ["SO", "4", "2−"], "SO42−"),
    case("chem2", ["H2O"], "H2O"),
    case("angbr", ["a"], "⟨a⟩"),
    case("angbr", [" ai "], "⟨ai⟩"),
    case("vr", ["ai"], "ai"),
    case("sc", ["Lord"], "Lord"),
    case("sc1", ["Lord"], "Lord"),
    case("sc2", ["Lord"], "Lord"),
    case("smallcaps all", ["nasa"], "nasa"),
    case("val", ["6.241", "e=18"], "6.241×10^18"),
    case("val", ["1.5", "u=m"], "1.5 m"),
    case("val", ["1.5", "ul=m"], "1.5 m"),
    case("val", ["30000", "u=C"], "30000 C"),
    case("val", ["3", "u=m", "up=s"], "3 m/s"),
    case("val", ["3", "upl=s"], "3 /s"),
    case("val", ["1.5", "0.2"], "1.5±0.2"),
    case("val", ["1.00794", "(7)"], "1.00794(7)"),
    case("val", ["1.5", "+0.2", "-0.1"], "1.5+0.2−0.1"),
    case("val", ["6.2415093", "e=18", "u=C"], "6.2415093×10^18 C"),
    case("val", ["12"], "12"),
]


@pytest.mark.parametrize(("name", "args", "expected"), NOTATION_CASES)
def test_notation(name: str, args: list[str], expected: str | None) -> None:
    check(name, args, expected)


SHIP_CASES = [
    case("USS", ["Hornet", "CV-12"], "USS Hornet (CV-12)"),
    case("USS", ["Hornet"], "USS Hornet"),
    case("USS", ["Hornet", "CV-12", "1"], "USS Hornet"),
    case("USS", ["Hornet", "CV-12", "2"], "Hornet"),
    case("USS", ["Hornet", "CV-12", "3"], "Hornet (CV-12)"),
    case("HMS", ["Ajax", "22", "6"], "HMS Ajax"),
    case("HMS", ["Dreadnought", "1906"], "HMS Dreadnought (1906)"),
    case("HMS", ["Dreadnought", "", "2"], "Dreadnought"),
    case("HMAS", ["Sydney", "D48"], "HMAS Sydney (D48)"),
    case("HMCS", ["Haida"], "HMCS Haida"),
    case("HMNZS", ["Achilles", "70"], "HMNZS Achilles (70)"),
    case("SS", ["Great Britain"], "SS Great Britain"),
    case("RMS", ["Titanic"], "RMS Titanic"),
    case("MV", ["Doña Paz"], "MV Doña Paz"),
    case("USNS", ["Comfort", "T-AH-20"], "USNS Comfort (T-AH-20)"),
    case("USCGC", ["Eagle", "WIX-327"], "USCGC Eagle (WIX-327)"),
    case("USS", [], "USS"),
    case("ship", ["HMS", "Dreadnought", "1906"], "HMS Dreadnought (1906)"),
    case("ship", ["HMS", "Dreadnought"], "HMS Dreadnought"),
    case("ship", ["", "Niña"], "Niña"),
    case("Ship", ["HMS", "Dreadnought", "1906", "2"], "Dreadnought"),
]


@pytest.mark.parametrize(("name", "args", "expected"), SHIP_CASES)
def test_ships(name: str, args: list[str], expected: str | None) -> None:
    check(name, args, expected)


CITATION_CASES = [
    case("Harvtxt", ["Boolos", "Jeffrey", "1974"], "Boolos & Jeffrey (1974)"),
    case("harvtxt", ["Smith", "1990"], "Smith (1990)"),
    case("harvtxt", ["Smith", "1990a"], "Smith (1990a)"),
    case("harvtxt", ["A", "B", "C", "1990"], "A, B & C (1990)"),
    case("harvtxt", ["A", "B", "C", "D", "1990"], "A et al. (1990)"),
    case("harvtxt", ["A", "B", "C", "D", "E", "1990"], "A et al. (1990)"),
    case("harvtxt", ["Smith", "1990", "p=5"], "Smith (1990, p. 5)"),
    case("harvtxt", ["Smith", "1990", "pp=5–9"], "Smith (1990, pp. 5–9)"),
    case("harvtxt", ["Smith", "1990", "loc=ch. 2"], "Smith (1990, ch. 2)"),
    case("harvtxt", ["Smith", "n.d."], "Smith (n.d.)"),
    case("harvtxt", ["Smith"], "Smith"),
    case("Harvtxt", ["Boolos", "Jeffrey", "1974, 1999"], "Boolos & Jeffrey (1974, 1999)"),
    case("harvtxt", ["1984 Group", "2001"], "1984 Group (2001)"),
]


@pytest.mark.parametrize(("name", "args", "expected"), CITATION_CASES)
def test_citations(name: str, args: list[str], expected: str | None) -> None:
    check(name, args, expected)


GAP_CASES = [
    case("Inflation", ["US", "5", "1929"], GAP),
    case("inflation", ["US", "3160384", "2003"], GAP),
    case("CURRENTYEAR", [], GAP),
    case("currentyear", [], GAP),
    case("CURRENTMONTH", [], GAP),
    case("CURRENTMONTHNAME", [], GAP),
    case("CURRENTMONTHABBREV", [], GAP),
    case("CURRENTDAY", [], GAP),
    case("CURRENTDAYNAME", [], GAP),
    case("CURRENTTIME", [], GAP),
    case("age", ["1969", "07", "20"], GAP),
    case("age in years", ["1969"], GAP),
    case("RailGauge", ["1435mm"], GAP),
    case("coord", ["13", "19", "N", "169", "9", "W"], GAP),
    case("Coord", ["0", "N", "30", "W", "display=inline"], GAP),
    case("Coord", ["0", "N", "30", "W", "display=inline,title"], GAP),
    case("Coord", ["42", "30", "N", "1", "30", "E", "display=title"], ""),
    case("#expr: 2024 - 1950", [], GAP),
    case("#time:Y", [], GAP),
]


@pytest.mark.parametrize(("name", "args", "expected"), GAP_CASES)
def test_words_that_cannot_be_rendered_reproducibly_are_a_gap(
    name: str, args: list[str], expected: str | None
) -> None:
    check(name, args, expected)


PUNCTUATION_CASES = [
    case("'", [], "'"),
    case("'s", [], "'s"),
    case("=", [], "="),
    case("!", [], "|"),
    case("ndash", [], "–"),
    case("en dash", [], "–"),
    case("endash", [], "–"),
    case("mdash", [], "—"),
    case("em dash", [], "—"),
    case("emdash", [], "—"),
    case("·", [], "·"),
    case("dot", [], "·"),
    case("middot", [], "·"),
    case("bull", [], "•"),
    case("bullet", [], "•"),
]


@pytest.mark.parametrize(("name", "args", "expected"), PUNCTUATION_CASES)
def test_punctuation(name: str, args: list[str], expected: str | None) -> None:
    check(name, args, expected)


@pytest.mark.parametrize("name", ["snd", "spnd", "sndash", "spaced ndash", "spaced en dash"])
def test_spaced_dashes_keep_their_spaces(name: str) -> None:
    # The one place surrounding whitespace is the rendering: "a{{snd}}b" must read "a – b".
    assert render_template(name, []) == " – "


def test_nbsp_is_a_plain_space() -> None:
    assert render_template("nbsp", []) == " "
    assert render_template("nbsp", ["3"]) == " "


NORMALISATION_CASES = [
    case("Convert", ["10", "km"], "10 km"),
    case("CONVERT", ["10", "km"], "10 km"),
    case(" convert \n", ["10", "km"], "10 km"),
    case("\nconvert\n", ["10", "km"], "10 km"),
    case("Template:Convert", ["10", "km"], "10 km"),
    case("template:convert", ["10", "km"], "10 km"),
    case("Template: convert", ["10", "km"], "10 km"),
    case("Birth_date", ["1900", "1", "2"], "January 2, 1900"),
    case("birth  date", ["1900", "1", "2"], "January 2, 1900"),
    case("birth\n date", ["1900", "1", "2"], "January 2, 1900"),
    case("Birth_date_and_age", ["1900", "1", "2"], "January 2, 1900"),
    case("Template:Birth_date", ["1900", "1", "2"], "January 2, 1900"),
    case("Spaced_ndash", [], " – "),
    # Arguments: surrounding whitespace/newlines, named args with spaces, empty args.
    case("birth date", ["\n1900 ", " 1\n", " 2 ", "\n df = y \n"], "2 January 1900"),
    case("birth date", ["1900", "1", "2", "DF=y"], "2 January 1900"),
    case("convert", ["10", "km", "mi", "\nadj\n=\non\n"], "10-km"),
    case("lang", ["2=texte", "1=fr"], "texte"),
    case("lang", ["fr", "2=texte"], "texte"),
    case("nihongo", ["Tokyo", "", "Tōkyō"], "Tokyo (Tōkyō)"),
    case("nihongo", ["Tokyo", " ", " "], "Tokyo"),
    case("abbr", [], ""),
]


@pytest.mark.parametrize(("name", "args", "expected"), NORMALISATION_CASES)
def test_normalisation(name: str, args: list[str], expected: str | None) -> None:
    check(name, args, expected)


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ("Convert", "convert"),
        ("  Birth_date_and_age\n", "birth date and age"),
        ("Template:Lang-fr", "lang-fr"),
        ("TEMPLATE:As_of", "as of"),
        ("Infobox  settlement", "infobox settlement"),
    ],
)
def test_normalise_template_name(raw: str, key: str) -> None:
    assert normalise_template_name(raw) == key


DROPPED = [
    "Infobox settlement",
    "infobox person",
    "Template:Infobox officeholder",
    "IPA",
    "IPAc-en",
    "IPA-fr",
    "respell",
    "pronunciation",
    "audio",
    "efn",
    "sfn",
    "refn",
    "r",
    "cite web",
    "Cite book",
    "cite journal",
    "citation",
    "citation needed",
    "cn",
    "main",
    "see also",
    "quote",
    "blockquote",
    "short description",
    "use dmy dates",
    "reflist",
    "navbox",
    "-",
    "clear",
    "unknown template",
    "",
    "   ",
]


@pytest.mark.parametrize("name", DROPPED)
def test_not_text_bearing_templates_are_dropped(name: str) -> None:
    assert render_template(name, []) is None
    assert render_template(name, ["a", "b=c", " d "]) is None


def test_template_table_is_normalised() -> None:
    # Every key must be reachable: a key that is not its own normal form can never match.
    for key in TEMPLATE_RENDERERS:
        assert normalise_template_name(key) == key
    assert sorted(PARSER_FUNCTION_NAMES) == [
        "#expr",
        "#time",
        "formatnum",
        "lc",
        "lcfirst",
        "uc",
        "ucfirst",
    ]


def test_text_bearing_templates_return_stripped_strings() -> None:
    # Every entry returns a string (never None) on typical args, stripped except the spaced
    # dashes and nbsp, whose whitespace is the rendering.
    keeps_spaces = {"snd", "spnd", "sndash", "spaced ndash", "spaced en dash", "nbsp"}
    for key in TEMPLATE_RENDERERS:
        rendered = render_template(key, [" 1900 ", " 1 ", " 2 "])
        assert isinstance(rendered, str), key
        if key not in keeps_spaces:
            assert rendered == rendered.strip(), key

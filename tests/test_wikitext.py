"""Every cleaning rule of pipelines.text.wikitext, on literal wikitext, with exact output."""

import pytest

from pipelines.text.wikitext import (
    GAP,
    MAX_TEMPLATE_DEPTH,
    WikitextError,
    clean_wikitext,
    split_template_arguments,
)


def clean(text: str, **kwargs) -> list[str]:
    return clean_wikitext(text, **kwargs)


@pytest.mark.parametrize(
    ("wikitext", "expected"),
    [
        # links keep their text; the pipe trick drops the qualifier; link trails join
        ("A [[Canada|province]] of [[Canada]].", "A province of Canada."),
        ("Many [[bus]]es ran.", "Many buses ran."),
        ("See [[Paris, Texas|]] now.", "See Paris now."),
        ("A [[:Category:Cats|cat list]] here.", "A cat list here."),
        ("A [[wikt:word|word]] here.", "A word here."),
        # File/Image links go with their captions, even with links inside
        ("Text.[[File:X.jpg|thumb|A [[cat]] on a mat]] More.", "Text. More."),
        ("Text.[[Image:X.png|left]] More.", "Text. More."),
        ("Text.[[File:X.jpg|thumb|Stalin [above] speaks]] More.", "Text. More."),
        # categories and interlanguage links go
        ("Text here.[[Category:Cats]][[fr:Chat]]", "Text here."),
        # external links keep their label only
        ("See [http://example.org the site] now.", "See the site now."),
        ("See [http://example.org] now.", "See now."),
        # bold/italic and HTML entities
        ("'''Alberta''' is ''big'' &amp; cold&nbsp;now.", "Alberta is big & cold now."),
        # comments, refs (paired and self-closing), nowiki
        ("A<!-- hidden [[x]] -->b c.", "Ab c."),
        ('Fact.<ref name="a">{{cite web|url=x}}</ref> More.<ref name=a/> End.', "Fact. More. End."),
        ("Use <nowiki>[[x]]</nowiki> here.", "Use [[x]] here."),
        # inline HTML keeps its text, <br> is a space
        ("A <small>small</small> word<br/>here.", "A small word here."),
        # dropped blocks
        ("Energy <math>E=mc^2</math> is.", f"Energy {GAP} is."),
        ("Code <syntaxhighlight lang=c>int x;</syntaxhighlight> ends.", "Code ends."),
        # templates: text-bearing ones render, others go
        ("About {{convert|290|km|mi}} south.", "About 290 km south."),
        ("Motto {{lang|la|Fortis et liber}} here.", "Motto Fortis et liber here."),
        ("A {{citation needed|date=May 2015}}fact.", "A fact."),
        # nested templates: inner first
        ("X {{nowrap|{{convert|5|m}}}} y.", "X 5 m y."),
        # no empty parentheses left behind, no doubled spaces
        ("'''Alberta''' ({{IPAc-en|æ|l|ˈ|b}}) is a province.", "Alberta is a province."),
        ("Alberta ({{IPAc-en|x}}; {{lang-fr|Alberta}}) is.", "Alberta (French: Alberta) is."),
        (
            "He was born ({{birth date|1900|1|2}}, {{IPA|x}}) there.",
            "He was born (January 2, 1900) there.",
        ),
        ("Here  is   text , with space .", "Here is text, with space."),
        # magic words
        ("__NOTOC__Text stays.", "Text stays."),
    ],
)
def test_inline_rules(wikitext: str, expected: str) -> None:
    assert clean(wikitext) == [expected]


def test_paragraphs_are_separated_by_blank_lines_and_soft_breaks_join() -> None:
    assert clean("First line\ncontinues here.\n\nSecond paragraph.") == [
        "First line continues here.",
        "Second paragraph.",
    ]


def test_headers_lists_tables_and_rules_are_dropped() -> None:
    text = (
        "Intro text.\n"
        "== History ==\n"
        "History text.\n"
        "* a list item\n"
        "# a numbered item\n"
        "; term\n"
        ": indented definition\n"
        "{| class=wikitable\n"
        "|-\n"
        "| cell || cell\n"
        "{|\n| nested\n|}\n"
        "|}\n"
        "----\n"
        "After the table."
    )
    assert clean(text) == ["Intro text.", "History text.", "After the table."]


def test_html_tables_are_dropped() -> None:
    assert clean("Before.<table><tr><td>cell</td></tr></table>After.") == ["Before.After."]


def test_infobox_spanning_lines_is_dropped() -> None:
    text = "{{Infobox country\n| name = X\n| capital = [[Y]]\n}}\n'''X''' is a country."
    assert clean(text) == ["X is a country."]


def test_trailing_sections_and_their_subsections_are_dropped() -> None:
    text = (
        "Body.\n"
        "== See also ==\n* [[Other]]\nSome prose in see also.\n"
        "== References ==\n{{reflist}}\n=== Sources ===\nBook text.\n"
        "== Later section ==\nKept again."
    )
    assert clean(text) == ["Body.", "Kept again."]


def test_unclosed_template_lines_are_dropped_not_leaked() -> None:
    text = "{{Infobox\n| name = X\n\nGood paragraph here."
    assert clean(text) == ["Good paragraph here."]


def test_min_words_drops_short_paragraphs() -> None:
    text = "Too short.\n\nThis paragraph has enough words."
    assert clean(text, min_words=5) == ["This paragraph has enough words."]
    assert clean(text, min_words=0) == ["Too short.", "This paragraph has enough words."]


def test_local_file_namespace_names_are_honoured() -> None:
    text = "Text.[[Datei:X.jpg|Bild]] More."
    assert clean(text) == ["Text.Bild More."]  # unknown namespace: a normal link
    assert clean(text, file_namespaces=frozenset({"file", "datei"})) == ["Text. More."]


def test_split_template_arguments_respects_links() -> None:
    assert split_template_arguments("a|[[b|c]]|d") == ["a", "[[b|c]]", "d"]
    assert split_template_arguments("a|b") == ["a", "b"]


def test_template_nesting_beyond_mediawiki_limit_is_an_error() -> None:
    depth = MAX_TEMPLATE_DEPTH + 1
    text = "{{nowrap|" * depth + "x" + "}}" * depth
    with pytest.raises(WikitextError, match="nested deeper"):
        clean(text)


def test_oversized_page_is_an_error() -> None:
    with pytest.raises(WikitextError, match="over MediaWiki"):
        clean("x" * (2 * 1024 * 1024 + 1))


def test_unclosed_template_does_not_backtrack_catastrophically() -> None:
    # With naive nested quantifiers this input takes minutes; possessive ones make it linear.
    text = "{{a|" + "b{c}" * 20000 + "\n\nGood paragraph here."
    assert clean(text) == ["Good paragraph here."]


@pytest.mark.parametrize(
    ("wikitext", "expected"),
    [
        # Inline blocks that carried words of the sentence leave GAP where they were.
        (r"The area is <math>A = \pi r^2</math> where r is.", f"The area is {GAP} where r is."),
        ("Water <chem>H2O</chem> is wet.", f"Water {GAP} is wet."),
        ("Water <ce>H2O</ce> is wet.", f"Water {GAP} is wet."),
        ('In ASCII <code>!"#$%</code> were placed.', f"In ASCII {GAP} were placed."),
        ("It reads <hiero>ra</hiero> there.", f"It reads {GAP} there."),
        ('Then <MATH display="inline">x</MATH>.', f"Then {GAP}."),
        # The tidy passes keep it: brackets, spacing, punctuation.
        ("A value (<math>x</math>) here.", f"A value ({GAP}) here."),
        ("A value ( <math>x</math> ) here.", f"A value ({GAP}) here."),
        ("Where <math>x</math> , <math>y</math> are.", f"Where {GAP}, {GAP} are."),
        # A formula on its own line is one more word of its paragraph.
        ("The area is\n<math>A</math>\nwhere r is.", f"The area is {GAP} where r is."),
        # Blocks that are not words of the sentence leave nothing.
        ("Fact.<ref>x <math>y</math></ref> More.", "Fact. More."),
        ("Text.<gallery>\nA.jpg|<math>x</math>\n</gallery> More.", "Text. More."),
        # Inside a dropped template or File caption the GAP goes with it.
        ("A {{cite web|title=<math>x</math>}}fact.", "A fact."),
        ("Text.[[File:X.jpg|thumb|The <math>x</math> curve]] More.", "Text. More."),
    ],
)
def test_words_removed_with_markup_leave_a_gap(wikitext: str, expected: str) -> None:
    assert clean(wikitext) == [expected]


@pytest.mark.parametrize(
    ("wikitext", "expected"),
    [
        (
            "The letter {{angbr|a}} is common (after {{angbr|e}} and {{angbr|t}}) in English.",
            "The letter ⟨a⟩ is common (after ⟨e⟩ and ⟨t⟩) in English.",
        ),
        (
            "The ampere is about {{val|6.241|e=18}} charges, and the reaction is {{chem|H|2|O}} based.",
            "The ampere is about 6.241×10^18 charges, and the reaction is H2O based.",
        ),
        (
            "{{Harvtxt|Boolos|Jeffrey|1974}} offer an informal meaning.",
            "Boolos & Jeffrey (1974) offer an informal meaning.",
        ),
        (
            "The sailors returned aboard {{USS|Hornet|CV-12}} after splashdown.",
            "The sailors returned aboard USS Hornet (CV-12) after splashdown.",
        ),
        (
            "Tickets cost $5 (${{Inflation|US|5|1929}} in {{CURRENTYEAR}} dollars) then.",
            f"Tickets cost $5 (${GAP} in {GAP} dollars) then.",
        ),
        ("It lies at {{coord|13|19|N|169|9|W}} in the sea.", f"It lies at {GAP} in the sea."),
        ("It lies there.{{Coord|42|N|1|E|display=title}}", "It lies there."),
        ("A {{RailGauge|1435mm}} gauge line.", f"A {GAP} gauge line."),
        # Alone on its line (other templates aside), a GAP template is page furniture.
        ("{{Infobox x\n|a=b}}\n{{coord|1|N|2|E}}\nX is a city.", "X is a city."),
        ("{{Use dmy dates}} {{coord|1|N|2|E}}\nX is a city.", "X is a city."),
        ("X is a city.\n{{coord|1|N|2|E}}\n\nY is a town.", "X is a city.\nY is a town."),
    ],
)
def test_templates_render_or_leave_a_gap(wikitext: str, expected: str) -> None:
    assert clean(wikitext) == expected.split("\n")


@pytest.mark.parametrize(
    ("wikitext", "expected"),
    [
        # A line that starts with a space is preformatted (code), not prose.
        (
            "The algorithm is below:\n if L.size = 0 return null\n largest ← L[0]\nThe text goes on.",
            ["The algorithm is below:", "The text goes on."],
        ),
        (" code on the first line\nText after it.", ["Text after it."]),
        ("Text.\n<!-- a comment --> code\nMore text.", ["Text.", "More text."]),
        # A line that starts with a tag does not start with a space, whatever the tag held.
        (
            "Text one.\n<ref name=a/> Since then it grew.\n<ref>x</ref> And more.",
            ["Text one. Since then it grew. And more."],
        ),
        # Inside a tag opened on an earlier line (a reference, a poem), a space-led line is
        # not preformatted: the tag's own rule applies.
        ("Fact.<ref>\n {{cite web|title=x}}\n</ref> More text.", ["Fact. More text."]),
        ("A poem:<poem>\n Line one\n</poem>\n code\nAfter.", ["A poem:", "After."]),
        # Inside a template, infobox parameters and the closing braces stay for expansion.
        (
            "{{Infobox person\n | name = X\n | caption = A caption\n }}\nX is a person.",
            ["X is a person."],
        ),
        ("He said {{lang|fr|\n bonjour}} to all.", ["He said bonjour to all."]),
        # A space-led line that opens a template it does not close is kept: the template closes.
        (" {{Infobox x\n| a = b\n}}\nText here.", ["Text here."]),
        # Inside an HTML block element opened on an earlier line, a space-led line is text.
        ("<blockquote>\n Quoted words here.\n</blockquote>", ["Quoted words here."]),
        (
            "Before it.\n <blockquote>Quoted words here.</blockquote>\nAfter it.",
            ["Before it. Quoted words here. After it."],
        ),
        ("<div>\n Div words here.\n</div>\n code\nAfter.", ["Div words here.", "After."]),
        # A wiki table that starts after a space is still a table.
        ("Before.\n {| class=x\n | cell\n |}\nAfter.", ["Before.", "After."]),
        # A line of spaces only is a blank line, as before.
        ("First paragraph.\n \nSecond paragraph.", ["First paragraph.", "Second paragraph."]),
    ],
)
def test_preformatted_lines_are_dropped(wikitext: str, expected: list[str]) -> None:
    assert clean(wikitext) == expected


@pytest.mark.parametrize(
    ("wikitext", "expected"),
    [
        # MediaWiki's quote rule: apostrophes that are text stay.
        ("Details in the ''Iliad'''s description.", "Details in the Iliad's description."),
        ("He uses ''A Modest Proposal'''s satire.", "He uses A Modest Proposal's satire."),
        ("A ''''word'''' here.", "A 'word' here."),  # of 4, the first is an apostrophe
        ("A ''''''word''''' here.", "A 'word here."),  # of 6, all but the last 5
        ("'''''Both''''' here.", "Both here."),
        ("'''Bold''' and ''italic'' here.", "Bold and italic here."),
        # Odd italics and odd bolds: one bold run is an apostrophe and an italic run, the
        # first after a one-letter word, else after a longer word, else after a space.
        ("He'''s l'''x ''y''' z.", "Hes l'x y z."),
        ("x '''y zz''' ''w '''v.", "x y zz' w v."),
        ("a ''' b ''c.", "a ' b c."),
        # A link's label is read apart from its line, as MediaWiki reads it.
        (
            "Yet in the ''[[Republic (Plato)|''Republic'']]'' he wants it.",
            "Yet in the Republic he wants it.",
        ),
        ("The [[Iliad|''Iliad'']]'s end.", "The Iliad's end."),
        (
            "By the '[[Epoch (astronomy)|''epoch'' year]], as written.",
            "By the 'epoch year, as written.",
        ),
        # Each line is read on its own.
        ("''a\nb''' c.", "a b c."),
        # Bold and italic in a heading's title do not hide a trailing section.
        ("Body text.\n== ''See also'' ==\nLinks here.", "Body text."),
    ],
)
def test_bold_and_italic_follow_mediawiki(wikitext: str, expected: str) -> None:
    assert clean(wikitext) == [expected]

"""pipelines.text.wikitext on markup that used to leak into, or cut holes in, the text:
unknown and unclosed tags, unclosed links and templates, URL schemes, interlanguage
prefixes, HTML lists and headings, <nowiki>, Media links. Literal wikitext, exact output."""

import pytest

from pipelines.beam.documents import UnitTally
from pipelines.text.wikidump import RawPage, SiteInfo
from pipelines.text.wikitext import GAP, clean_wikitext
from pipelines.wikipedia import PageContext, WikipediaConfig, document_from_page


def clean(text: str, **kwargs) -> list[str]:
    return clean_wikitext(text, **kwargs)


@pytest.mark.parametrize(
    ("wikitext", "expected"),
    [
        # Tags MediaWiki knows that no earlier pass removed go, their content kept: HTML tags,
        # and parser or extension tags left self-closing, unclosed or alone.
        (
            '<templatestyles src="Plainlist/styles.css" />\nThe article text follows here.',
            ["The article text follows here."],
        ),
        ('A word<templatestyles src="x" /> is styled.', ["A word is styled."]),
        ('The word <phonos ipa="tə" /> is said.', ["The word is said."]),
        ("A <span class=x>styled</span> word.", ["A styled word."]),
        ("A <SPAN>styled</SPAN> and <sub>low</sub> word.", ["A styled and low word."]),
        (
            "<noinclude>Noinclude words show</noinclude> on the page.",
            ["Noinclude words show on the page."],
        ),
        ("<onlyinclude>Its words show</onlyinclude> here.", ["Its words show here."]),
        ("The <langconvert from=a to=b>converted</langconvert> word.", ["The converted word."]),
        ("It ends here.</ref> The next one.", ["It ends here. The next one."]),
        ("An <includeonly>unclosed tag goes.", ["An unclosed tag goes."]),
        # An unclosed <ref> leaves its opening tag, which goes as any other known tag does.
        (
            'It has an unclosed ref.<ref name="Smith"> The next sentence is here.',
            ["It has an unclosed ref. The next sentence is here."],
        ),
        # A heading's tags do not hide a trailing section.
        ("Body text.\n== <span>See also</span> ==\nLinks here.", ["Body text."]),
    ],
)
def test_known_tags_go_and_their_content_stays(wikitext: str, expected: list[str]) -> None:
    assert clean(wikitext) == expected


@pytest.mark.parametrize(
    "wikitext",
    [
        # A name MediaWiki does not know is text, as Wikipedia shows it.
        "In C++ one writes std::vector<int> for a vector of integers.",
        "The generic type List<T> holds items.",
        "We have x<y or y>z in this case.",
        "A <foo-bar2>tagged</foo-bar2> word.",
        "A <span-x>word</span-x> here.",  # the name is "span-x", not "span"
        'A <a href="x">link</a> here.',  # no <a> in wikitext: links are [[…]] or […]
        # Text that only looks like a tag.
        "If x < y and a<5 then b << c.",
        "He wrote I <3 it and 2<x.",
    ],
)
def test_unknown_tags_are_text(wikitext: str) -> None:
    assert clean(wikitext) == [wikitext]


@pytest.mark.parametrize(
    ("wikitext", "expected"),
    [
        # An unclosed line block goes to the end of its paragraph; the text on the lines above
        # it is a paragraph of its own, as a block (a gallery, a poem) is shown apart from it.
        (
            "Text before the gallery.\n<gallery>\nFile:A.jpg|Caption words\n\nNext paragraph.",
            ["Text before the gallery.", "Next paragraph."],
        ),
        ("Text before.\n<poem>\nA line\nAnother line", ["Text before."]),
        ("Text before.\n<syntaxhighlight lang=c>\nint x;\n\nAfter.", ["Text before.", "After."]),
        # An unclosed formula held words: GAP.
        ("The area is <math>A = r^2\n\nAfter it.", [f"The area is {GAP}", "After it."]),
        # Cut mid-line, the sentence before it lost its end: GAP.
        ("It shows <gallery>\nA.jpg\n\nAfter it.", [f"It shows {GAP}", "After it."]),
        # A closed block after a blank line is one block, as before.
        ("Before.<gallery>\nA.jpg\n\nB.jpg\n</gallery> After.", ["Before. After."]),
        # An unclosed File link goes to the end of its line.
        (
            "[[File:x.jpg|thumb|caption words of the file\nThe rest of the article continues.",
            ["The rest of the article continues."],
        ),
        (
            "It has an unclosed [[Image:x.jpg|thumb|caption\nThe rest continues.",
            [f"It has an unclosed {GAP} The rest continues."],
        ),
        # Any other unclosed link loses its brackets only, as before.
        ("An unclosed [[Paris link here.", ["An unclosed Paris link here."]),
        # An unclosed template goes to the end of its paragraph: no continuation line leaks.
        (
            "{{Infobox person\n| name = X\n| caption = A caption\n  continuing on a second line\n"
            "Text in the same paragraph.\n\nThe next paragraph.",
            ["The next paragraph."],
        ),
        ("Text {{unclosed|a\nmore\n\nNext.", [f"Text {GAP}", "Next."]),
        # One newline does not end a sentence: the line above is text of the same paragraph.
        (
            "The distance from the town to the sea is\n{{convert|5|km\nand more text here.\n\n"
            "Next paragraph is fine here.",
            [f"The distance from the town to the sea is {GAP}", "Next paragraph is fine here."],
        ),
        (
            "The river flows\n[[File:x.jpg|thumb|caption through the town.\nMore text.",
            [f"The river flows {GAP} More text."],
        ),
        # A blank or structure line above ends the paragraph: nothing lost its end.
        ("Text above.\n\n{{convert|5|km\nmore\n\nNext.", ["Text above.", "Next."]),
        ("* A list item\n{{convert|5|km\nmore\n\nNext.", ["Next."]),
        ("Body.\n== Heading ==\n{{convert|5|km\nmore\n\nNext.", ["Body.", "Next."]),
        ("{|\n| a cell\n|}\n{{convert|5|km\nmore\n\nNext.", ["Next."]),
    ],
)
def test_unclosed_markup_goes_to_where_it_ends(wikitext: str, expected: list[str]) -> None:
    assert clean(wikitext) == expected


def test_sentence_cut_by_an_unclosed_template_on_its_next_line_is_dropped() -> None:
    text = (
        "The distance from the town to the sea is\n{{convert|5|km\nand more text here.\n\n"
        "Next paragraph is fine here."
    )
    tally = UnitTally("u")
    config = WikipediaConfig(input=("dump.xml",), output="out")
    page = RawPage(
        page_id=1, title="T", namespace=0, redirect=False, revision_id=1, text=text, ordinal=1
    )
    document = document_from_page(page, PageContext.of("dump.xml", SiteInfo()), config, tally)
    assert document is not None
    assert document.sentences == ("Next paragraph is fine here.",)
    assert tally.counts["sentences_gapped"] == 1


def test_unclosed_file_link_honours_local_namespace_names() -> None:
    text = "[[Datei:x.jpg|thumb|Bild\nThe rest continues."
    assert clean(text, file_namespaces=frozenset({"file", "datei"})) == ["The rest continues."]


@pytest.mark.parametrize(
    ("wikitext", "expected"),
    [
        ("Contact [mailto:info@example.org the office] now.", "Contact the office now."),
        ("Contact [mailto:info@example.org] now.", "Contact now."),
        ("Read [news:comp.lang.python the group] now.", "Read the group now."),
        ("Call [tel:+1-555-0100 the desk] now.", "Call the desk now."),
        ("See [urn:isbn:0451450523 the book] now.", "See the book now."),
        ("Call [sip:a@b.org the line] now.", "Call the line now."),
        ("Chat [xmpp:a@b.org the room] now.", "Chat the room now."),
        ("Go [geo:37.78,-122.4 there] now.", "Go there now."),
        ("Get [magnet:?xt=urn:btih:abc the file] now.", "Get the file now."),
        ("Get [sftp://a.org/f the file] now.", "Get the file now."),
        ("Get [ssh://a.org the host] now.", "Get the host now."),
        ("Get [git://a.org/r.git the repo] now.", "Get the repo now."),
        ("Get [svn://a.org/r the repo] now.", "Get the repo now."),
        ("Join [irc://irc.a.org/x the channel] now.", "Join the channel now."),
        ("Join [ircs://irc.a.org/x the channel] now.", "Join the channel now."),
        ("Get [gopher://a.org the hole] now.", "Get the hole now."),
        ("Get [telnet://a.org the host] now.", "Get the host now."),
        ("Get [nntp://a.org/g the group] now.", "Get the group now."),
        ("Get [mms://a.org/s the stream] now.", "Get the stream now."),
        ("Get [worldwind://a.org/x the map] now.", "Get the map now."),
        ("See [//example.org the site] now.", "See the site now."),
        # The URL ends where MediaWiki ends it; the label may follow without a space.
        ('See [http://example.org"quoted" label] now.', 'See "quoted" label now.'),
        # A scheme word in brackets is not a link.
        ("It said [news: the story] there.", "It said [news: the story] there."),
    ],
)
def test_external_links_of_every_scheme_keep_their_label(wikitext: str, expected: str) -> None:
    assert clean(wikitext) == [expected]


@pytest.mark.parametrize(
    "link",
    [
        "[[fr:Paris]]",
        "[[simple:List of countries by population density]]",
        "[[zh-classical:List of countries]]",
        "[[be-x-old:List of countries]]",
        "[[zh-min-nan:List of countries]]",
        "[[roa-rup:List of countries]]",
    ],
)
def test_interlanguage_links_are_dropped(link: str) -> None:
    assert clean(f"The article text is here.\n\n{link}") == ["The article text is here."]


@pytest.mark.parametrize(
    ("wikitext", "expected"),
    [
        (
            "Text before.\n<ul>\n<li>First item</li>\n<li>Second item</li>\n</ul>\nText after.",
            ["Text before.", "Text after."],
        ),
        ("Before.<dl><dt>Term</dt><dd>Definition words</dd></dl> After.", ["Before. After."]),
        ("Before.<OL><li>Item</li></OL> After.", ["Before. After."]),
        ("<h2>An HTML heading</h2>\nText after.", ["Text after."]),
        # A list inside a list item: the outer list's other items go too.
        (
            "Before.<ul><li>a<ul><li>b</li></ul></li><li>c item</li></ul> After.",
            ["Before. After."],
        ),
        (
            "Before.<ol><li>a<ul><li>b<dl><dd>d</dd></dl></li></ul></li><li>c</li></ol> After.",
            ["Before. After."],
        ),
        # A reference inside a list goes with it; a list inside a reference with the reference.
        ("Before.<ul><li>a<ref>r</ref></li></ul> After.", ["Before. After."]),
        ("Before.<ref><ul><li>a</li></ul></ref> After.", ["Before. After."]),
    ],
)
def test_html_lists_and_headings_are_dropped(wikitext: str, expected: list[str]) -> None:
    assert clean(wikitext) == expected


@pytest.mark.parametrize(
    ("wikitext", "expected"),
    [
        ("Write <nowiki>{{cite web}}</nowiki> to cite.", "Write {{cite web}} to cite."),
        (
            "The markup <nowiki>[[Paris]]</nowiki> makes a link.",
            "The markup [[Paris]] makes a link.",
        ),
        ("It is <nowiki>''not italic''</nowiki> here.", "It is ''not italic'' here."),
        ("Type <nowiki><ref>x</ref></nowiki> here.", "Type <ref>x</ref> here."),
        ("Type <nowiki>a|b = c</nowiki> here.", "Type a|b = c here."),
        ("Type <nowiki>__NOTOC__</nowiki> here.", "Type __NOTOC__ here."),
        ("Say {{lang|fr|<nowiki>a|b</nowiki>}} here.", "Say a|b here."),
        ("Entities <nowiki>&amp; &rarr;</nowiki> resolve.", "Entities & → resolve."),
        ("Tom <nowiki>&</nowiki> Jerry <nowiki>&#123;</nowiki> here.", "Tom & Jerry { here."),
        ("A<nowiki/>b is one word.", "Ab is one word."),
        ("Text\n<nowiki> </nowiki>code-like line here.", "Text code-like line here."),
    ],
)
def test_nowiki_content_is_text(wikitext: str, expected: str) -> None:
    assert clean(wikitext) == [expected]


@pytest.mark.parametrize(
    ("wikitext", "expected"),
    [
        (
            "Listen to the [[Media:Anthem.ogg|national anthem recording]] here.",
            "Listen to the national anthem recording here.",
        ),
        ("Listen to the [[Media:Anthem.ogg]] anthem here.", "Listen to the anthem here."),
        ("Listen to the [[media:Anthem.ogg| recording ]] here.", "Listen to the recording here."),
        ("An image [[File:A.jpg|thumb|a caption]] here.", "An image here."),
    ],
)
def test_media_links_show_their_label(wikitext: str, expected: str) -> None:
    assert clean(wikitext) == [expected]


def test_local_media_namespace_names_are_honoured() -> None:
    text = "Hear [[Medium:Anthem.ogg|the anthem]] now."
    assert clean(text, media_namespaces=frozenset({"media", "medium"})) == ["Hear the anthem now."]

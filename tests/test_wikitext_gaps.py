"""pipelines.text.wikitext on markup that used to leak into, or cut holes in, the text:
unknown and unclosed tags, unclosed links and templates, URL schemes, interlanguage
prefixes, HTML lists and headings, <nowiki>, Media links. Literal wikitext, exact output."""

import pytest

from pipelines.text.wikitext import GAP, clean_wikitext


def clean(text: str, **kwargs) -> list[str]:
    return clean_wikitext(text, **kwargs)


@pytest.mark.parametrize(
    ("wikitext", "expected"),
    [
        # Tags no pass knows go, their content kept.
        (
            '<templatestyles src="Plainlist/styles.css" />\nThe article text follows here.',
            ["The article text follows here."],
        ),
        ('The word <phonos ipa="tə" /> is said.', ["The word is said."]),
        ("A <span class=x>styled</span> word.", ["A styled word."]),
        ("A <foo-bar2>tagged</foo-bar2> word.", ["A tagged word."]),
        (
            "<noinclude>Noinclude words show</noinclude> on the page.",
            ["Noinclude words show on the page."],
        ),
        # Text that only looks like a tag stays.
        ("If x < y and a<5 then b << c.", ["If x < y and a<5 then b << c."]),
        ("He wrote I <3 it and 2<x.", ["He wrote I <3 it and 2<x."]),
        # An unclosed <ref> leaves its opening tag, which goes as an unknown tag does.
        (
            'It has an unclosed ref.<ref name="Smith"> The next sentence is here.',
            ["It has an unclosed ref. The next sentence is here."],
        ),
        # A heading's tags do not hide a trailing section.
        ("Body text.\n== <span>See also</span> ==\nLinks here.", ["Body text."]),
    ],
)
def test_unknown_tags_go_and_their_content_stays(wikitext: str, expected: list[str]) -> None:
    assert clean(wikitext) == expected


@pytest.mark.parametrize(
    ("wikitext", "expected"),
    [
        # An unclosed line block goes to the end of its paragraph.
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
    ],
)
def test_unclosed_markup_goes_to_where_it_ends(wikitext: str, expected: list[str]) -> None:
    assert clean(wikitext) == expected


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

"""Builders of small, real MediaWiki dump files for tests: plain, bz2, gz and multistream."""

from __future__ import annotations

import bz2
import codecs
import gzip
import random
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

SCHEMA_URL = "http://www.mediawiki.org/xml/export-{schema}/"


@dataclass(frozen=True)
class Page:
    id: int
    title: str
    text: str
    ns: int = 0
    redirect: str | None = None
    revision: int | None = None


def header(schema: str = "0.11", dbname: str = "testwiki", encoding: str = "utf-8") -> str:
    return (
        f'<?xml version="1.0" encoding="{encoding}"?>\n'
        f'<mediawiki xmlns="{SCHEMA_URL.format(schema=schema)}" version="{schema}" xml:lang="en">\n'
        "  <siteinfo>\n"
        "    <sitename>Test</sitename>\n"
        f"    <dbname>{dbname}</dbname>\n"
        "    <base>https://test.example.org/wiki/Main_Page</base>\n"
        "    <namespaces>\n"
        '      <namespace key="-2" case="first-letter">Media</namespace>\n'
        '      <namespace key="0" case="first-letter" />\n'
        '      <namespace key="6" case="first-letter">File</namespace>\n'
        '      <namespace key="14" case="first-letter">Category</namespace>\n'
        "    </namespaces>\n"
        "  </siteinfo>\n"
    )


FOOTER = "</mediawiki>\n"


def page_xml(page: Page) -> str:
    redirect = f'\n    <redirect title="{escape(page.redirect)}" />' if page.redirect else ""
    revision = page.revision if page.revision is not None else page.id * 10
    return (
        "  <page>\n"
        f"    <title>{escape(page.title)}</title>\n"
        f"    <ns>{page.ns}</ns>\n"
        f"    <id>{page.id}</id>{redirect}\n"
        "    <revision>\n"
        f"      <id>{revision}</id>\n"
        "      <timestamp>2016-01-01T00:00:00Z</timestamp>\n"
        f'      <text xml:space="preserve">{escape(page.text)}</text>\n'
        "    </revision>\n"
        "  </page>\n"
    )


def dump_xml(pages: list[Page], schema: str = "0.11", encoding: str = "utf-8") -> str:
    return header(schema, encoding=encoding) + "".join(page_xml(p) for p in pages) + FOOTER


def write_dump(
    path: Path, pages: list[Page], schema: str = "0.11", encoding: str = "utf-8"
) -> Path:
    """One dump file, compressed by suffix (.bz2 single stream, .gz, or plain)."""
    data = dump_xml(pages, schema, encoding).encode(encoding)
    if path.suffix == ".bz2":
        data = bz2.compress(data, 9)
    elif path.suffix == ".gz":
        data = gzip.compress(data, mtime=0)
    path.write_bytes(data)
    return path


UTF16_MARKS = {"utf-16-le": codecs.BOM_UTF16_LE, "utf-16-be": codecs.BOM_UTF16_BE}


def write_multistream(
    directory: Path, name: str, pages: list[Page], per_stream: int, encoding: str = "utf-8"
) -> Path:
    """A `NAME-multistream.xml.bz2` of one bz2 stream per `per_stream` pages, plus its index.
    With `encoding` utf-16-le or utf-16-be, the file starts with that byte-order mark and
    declares UTF-16; the page streams after it have no mark, as a converted dump's would."""
    dump = directory / f"{name}-multistream.xml.bz2"
    mark = UTF16_MARKS.get(encoding, b"")
    declared = "UTF-16" if mark else "utf-8"
    index_lines = []
    with dump.open("wb") as out:
        out.write(bz2.compress(mark + header(encoding=declared).encode(encoding)))
        for start in range(0, len(pages), per_stream):
            offset = out.tell()
            group = pages[start : start + per_stream]
            index_lines += [f"{offset}:{p.id}:{p.title}\n" for p in group]
            out.write(bz2.compress("".join(page_xml(p) for p in group).encode(encoding)))
        out.write(bz2.compress(FOOTER.encode(encoding)))
    index = directory / f"{name}-multistream-index.txt.bz2"
    index.write_bytes(bz2.compress("".join(index_lines).encode()))
    return dump


def article(page_id: int, words: int = 12, seed: int | None = None) -> Page:
    """An article whose one paragraph is `words` pseudo-random words (distinct per id)."""
    rng = random.Random(page_id if seed is None else seed)
    vocabulary = [
        "river",
        "north",
        "town",
        "built",
        "railway",
        "people",
        "early",
        "lake",
        "summer",
        "winter",
        "valley",
        "county",
        "church",
        "bridge",
        "market",
    ]
    body = " ".join(rng.choice(vocabulary) for _ in range(words))
    return Page(page_id, f"Article {page_id}", f"'''Article {page_id}''' is about {body}.")

"""The records of a dump's reading: what the parser (pipelines/text/dumpxml.py) yields and
takes (SiteInfo, RawPage, DumpSplit, PageLimits) and the error it raises (DumpReadError);
`pipelines.text.wikidump` re-exports them for the stages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import quote

from pipelines.io.compressed import InputReadError
from pipelines.text.dumpencoding import UTF8
from pipelines.text.wikitext import MAX_PAGE_BYTES


class DumpReadError(InputReadError):
    """A dump file could not be read to its end. Pages before the fault were yielded."""

    def __init__(
        self,
        path: str,
        position: str,
        error: str,
        last_page: str | None,
        reason: str,
        offset: int | None = None,
    ) -> None:
        super().__init__(path, position, error, reason, offset)
        after = f"; last good page: {last_page}" if last_page else "; no page was read"
        self.args = (f"{self.args[0]}{after}",)
        self.last_page = last_page


@dataclass(frozen=True)
class SiteInfo:
    """What the dump's <siteinfo> says about the wiki: names ids, urls and namespaces."""

    dbname: str = "wiki"
    base_url: str = ""  # article url prefix, e.g. "https://en.wikipedia.org/wiki/"
    namespaces: dict[int, str] = field(default_factory=dict)  # key → canonical name

    def page_url(self, title: str) -> str | None:
        if not self.base_url:
            return None
        return self.base_url + quote(title.replace(" ", "_"), safe="/:(),'!*;@$&+=")

    def names_of(self, keys: tuple[int, ...]) -> frozenset[str]:
        """Lower-cased local names of some namespaces (e.g. 'datei' for File on dewiki)."""
        return frozenset(self.namespaces.get(k, "").lower() for k in keys) - {""}

    def namespace_of(self, title: str) -> int:
        """Namespace from a title prefix: only for dumps that lack <ns> (schema < 0.5)."""
        prefix, colon, _ = title.partition(":")
        if colon:
            for key, name in self.namespaces.items():
                if name and name.lower() == prefix.strip().lower():
                    return key
        return 0


@dataclass(frozen=True)
class DumpSplit:
    """One unit of work: bytes [start, end) of one dump file (end None: to the end)."""

    path: str
    number: int  # position of this split within its file
    start: int = 0
    end: int | None = None
    siteinfo: SiteInfo | None = None  # for splits that do not start with the header
    # The file's encoding, for splits that do not start with its byte-order mark (a split
    # from byte 0 reads the mark itself): utf-8, utf-16-le or utf-16-be.
    encoding: str = UTF8


@dataclass(frozen=True)
class RawPage:
    """One <page> as the dump has it. `problem` is set when the page is malformed."""

    page_id: int | None
    title: str
    namespace: int | None  # None: the dump has no <ns> (schema < 0.5); see SiteInfo
    redirect: bool
    revision_id: int | None
    text: str | None
    ordinal: int  # 1-based position of the page within its split, for error messages
    problem: str | None = None
    # The reject reason for `problem`: malformed_page, or a PageLimits one
    # (page_too_large, page_too_many_elements).
    problem_reason: str = "malformed_page"


@dataclass(frozen=True)
class PageLimits:
    """What one top-level element of a dump (a <page>, the <siteinfo>) may hold.

    Memory stays bounded by these whatever the input: the parser keeps only the fields a
    RawPage needs, so a page costs at most `text_chars` characters of text (twice, for a
    page with several revisions), `field_chars` of its other fields, `elements` open tags
    and `xml_bytes` of XML in expat's buffer. A page over a limit is rejected (its reason
    says which) and skipped up to its `</page>`; the pages after it are read as usual.
    """

    # A pages-articles page holds ~16 elements and nests 4 deep; 2 M nested elements in one
    # page (1.2 kB of bz2) took 1 GB when the whole tree was built.
    elements: int = 10_000
    # Characters of one <text>: MediaWiki's own page size limit. Characters, not bytes:
    # never more than the text's UTF-8 bytes, so no page that `clean_wikitext` would
    # accept is refused here.
    text_chars: int = MAX_PAGE_BYTES
    # Characters of every other kept field of a page (title, ids) or of the <siteinfo>
    # (names, namespaces) together: a title is at most 255 bytes.
    field_chars: int = 64 << 10
    # XML between <page> and </page> (escaping makes text up to 6× longer; comments and
    # attributes are kept by expat until they end).
    xml_bytes: int = 32 << 20


DEFAULT_LIMITS = PageLimits()

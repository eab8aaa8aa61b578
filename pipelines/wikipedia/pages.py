"""One page of a dump → a Document, or the reason it is dropped or rejected (Beam-free)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipelines.beam.documents import UnitTally
from pipelines.text.sentences import split_paragraphs
from pipelines.text.wikidump import RawPage, SiteInfo
from pipelines.text.wikitext import (
    DEFAULT_CATEGORY_NAMESPACES,
    DEFAULT_FILE_NAMESPACES,
    DEFAULT_MEDIA_NAMESPACES,
    GAP,
    WikitextError,
    clean_wikitext,
)
from pipelines.wikipedia.config import WikipediaConfig
from schemas import Document, Reject

# A disambiguation page carries one of these templates (or a "… disambiguation" variant:
# {{Place name disambiguation}}, {{Hospital disambiguation}}, …); its title may also say so.
_DISAMBIGUATION_TEMPLATE = re.compile(
    r"\{\{\s*(?:disambiguation|disambig|disamb|dab|dbig|hndis|geodis|numberdis|"
    r"set index article|sia|[^{}|]*\bdisambiguation)\s*(?:\||\}\})",
    re.I,
)
# Where blingfire does not break before a sentence that starts with GAP (it reads no capital
# there): "… is x. GAP is a function." is cut back into its two sentences.
_BEFORE_GAPPED_SENTENCE = re.compile(rf"(?:(?<=[.!?])|(?<=[.!?][\"'”’)])) (?={GAP})")


@dataclass(frozen=True)
class PageContext:
    """What naming and cleaning a page needs from its dump."""

    path: str
    siteinfo: SiteInfo
    file_namespaces: frozenset[str] = DEFAULT_FILE_NAMESPACES
    category_namespaces: frozenset[str] = DEFAULT_CATEGORY_NAMESPACES
    media_namespaces: frozenset[str] = DEFAULT_MEDIA_NAMESPACES

    @classmethod
    def of(cls, path: str, siteinfo: SiteInfo) -> PageContext:
        return cls(
            path=path,
            siteinfo=siteinfo,
            file_namespaces=DEFAULT_FILE_NAMESPACES | siteinfo.names_of((6,)),
            category_namespaces=DEFAULT_CATEGORY_NAMESPACES | siteinfo.names_of((14,)),
            media_namespaces=DEFAULT_MEDIA_NAMESPACES | siteinfo.names_of((-2,)),
        )


def document_from_page(
    page: RawPage, context: PageContext, config: WikipediaConfig, tally: UnitTally
) -> Document | None:
    """One page → a Document, or None after recording why it was dropped or rejected."""
    siteinfo, path = context.siteinfo, context.path
    tally.count("pages")
    page_ref = f"{siteinfo.dbname}/{page.page_id}" if page.page_id is not None else None
    where = f"page #{page.ordinal} {page.title!r}"
    if page.problem:
        tally.reject(Reject(page_ref, path, where, page.problem_reason, page.problem))
        return None
    namespace = page.namespace
    if namespace is None:
        namespace = siteinfo.namespace_of(page.title)
    if namespace != 0:
        tally.drop("not_article_namespace")
        return None
    text = page.text or ""
    if page.redirect or text.lstrip()[:9].upper() == "#REDIRECT":
        tally.drop("redirect")
        return None
    if page.title.endswith("(disambiguation)") or _DISAMBIGUATION_TEMPLATE.search(text):
        tally.drop("disambiguation")
        return None
    tally.count("wikitext_bytes", len(text.encode("utf-8")))
    try:
        paragraphs = clean_wikitext(
            text,
            min_words=config.min_paragraph_words,
            file_namespaces=context.file_namespaces,
            category_namespaces=context.category_namespaces,
            media_namespaces=context.media_namespaces,
        )
    except WikitextError as err:
        tally.reject(Reject(page_ref, path, where, "wikitext_limit", str(err)))
        return None
    except Exception as err:  # noqa: BLE001 - a parser bug on one page must not lose the rest
        tally.reject(
            Reject(page_ref, path, where, "wikitext_error", f"{type(err).__name__}: {err}")
        )
        return None
    sentences = split_paragraphs(paragraphs)
    if any(GAP in paragraph for paragraph in paragraphs):
        sentences = _drop_gapped_sentences(sentences, tally)
    if not sentences:
        tally.drop("no_running_text")
        return None
    return Document(
        id=page_ref,
        source=siteinfo.dbname,
        title=page.title,
        sentences=tuple(sentences),
        url=siteinfo.page_url(page.title),
        revision=page.revision_id,
    )


def _drop_gapped_sentences(sentences: list[str], tally: UnitTally) -> list[str]:
    """The sentences without a GAP; those with one (words the cleaner could not render, such
    as an inline formula) are counted as `sentences_gapped`, so no sentence with a hole and
    no GAP reaches the output."""
    kept: list[str] = []
    gapped = 0
    for sentence in sentences:
        if GAP not in sentence:
            kept.append(sentence)
            continue
        for part in _BEFORE_GAPPED_SENTENCE.split(sentence):
            if GAP in part:
                gapped += 1
            else:
                kept.append(part)
    if gapped:
        tally.count("sentences_gapped", gapped)
    return kept

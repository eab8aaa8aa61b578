"""Before a run reads its shards: each one its manifest lists, and its block table, is on the
storage with the size the manifest records (`check_present`). A shard deleted from the
bucket, or cut short by a copy that stopped, is then said before the first step, in one
line, instead of in the middle of an epoch from a loader worker.

What it costs, in each process that opens the shards (every rank):

    s3://, gs://   one listing of each directory the files are in (a split's shards and
                   block tables share one), a request per 1,000 objects in it
    a disk         a stat of each file
    http(s)://     a HEAD of each file, 16 at a time (HTTP cannot list a directory)

Sizes only: the bytes are verified as they are read (`read_verified_blocks`), a block's
sha256 before any of its samples is used. An answer that says nothing (an HTTP server that
refuses HEAD, a size it does not give, an s3:// URL with credentials in it, which a
listing cannot take) leaves that file to its read, which says the same in the run.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from pipelines.io import clients, objects, storage
from pipelines.io.retry import RetryPolicy, retry
from pipelines.io.shards.read import ShardReadError
from schemas.shards import ShardInfo, block_table_path

_LOG = logging.getLogger(__name__)
_HEADS_AT_ONCE = 16
_GONE = (404, 410)


def check_present(
    shards: Iterable[tuple[str, ShardInfo]], manifest_url: str, policy: RetryPolicy
) -> None:
    """Raise ShardReadError, naming the first file and how many more, unless every shard of
    `shards` ((URL, the manifest's entry)) and its block table is on the storage with the
    size `manifest_url` records."""
    expected: dict[str, int] = {}
    for url, info in shards:
        expected[url] = info.bytes
        if info.block_table is not None and not info.blocks:
            expected[block_table_path(url)] = info.block_table.bytes
    by_directory: dict[str, list[str]] = {}
    for url in expected:
        by_directory.setdefault(storage.parent(url), []).append(url)
    found: dict[str, int | None] = {}
    for directory, urls in by_directory.items():
        found.update(_sizes(directory, urls, policy))
    missing = [url for url in expected if url in found and found[url] is None]
    if missing:
        raise ShardReadError(
            f"{missing[0]}{and_more(missing)} listed in {manifest_url} but not on the storage: "
            "restore it or rebuild the shards (nothing was trained on)"
        )
    wrong = [url for url in expected if found.get(url) not in (None, expected[url])]
    if wrong:
        raise ShardReadError(
            f"{wrong[0]}: {found[wrong[0]]:,} bytes on the storage, {manifest_url} records "
            f"{expected[wrong[0]]:,}{and_more(wrong, ' with another size')}: cut short or "
            "changed after writing: restore it or rebuild the shards (nothing was trained on)"
        )


def and_more(urls: list[str], what: str = "") -> str:
    """ " (and N more…)" after the first of `urls` is named, where there are more."""
    return f" (and {len(urls) - 1} more{what})" if len(urls) > 1 else ""


def _sizes(directory: str, urls: list[str], policy: RetryPolicy) -> dict[str, int | None]:
    """The size of each of `urls` (files of `directory`): None where it is not there, and
    left out where the storage does not say."""
    kind = storage.scheme(directory)
    if kind in ("s3", "gs"):
        if "@" in directory.split("://", 1)[1].split("/", 1)[0]:  # credentials in the URL
            return {}
        listed = retry(lambda: _listing(directory), directory, policy, "list")
        if listed is None:
            return {}
        return {url: listed.get(storage.basename(url)) for url in urls}
    if kind in ("http", "https"):
        with ThreadPoolExecutor(min(_HEADS_AT_ONCE, len(urls))) as pool:
            answers = pool.map(lambda url: (url, _head_size(url, policy)), urls)
            return {url: size for url, size in answers if size != -1}
    return {url: _local_size(url) for url in urls}


def _listing(directory: str) -> dict[str, int] | None:
    """`objects.list_sizes`, or None where the credentials may read objects but not list
    them (a role with GetObject alone): not retried, and not a reason to refuse the run."""
    try:
        return objects.list_sizes(directory)
    except storage.StorageError as error:
        if not objects.is_refused(error):
            raise
    _LOG.info(
        "%s: these credentials may not list it, so its shards are found as they are read",
        storage.redact(directory),
    )
    return None


def _local_size(url: str) -> int | None:
    if not storage.exists(url):  # NotAFileError for a FIFO or a directory in its place
        return None
    return os.path.getsize(url.removeprefix("file://"))


def _head_size(url: str, policy: RetryPolicy) -> int | None:
    """The Content-Length a HEAD of `url` answers; None for 404 or 410; -1 where the server
    says neither (no HEAD, no length, another status): its read will tell."""
    import requests  # smart_open's http(s) client

    def head() -> requests.Response:
        answer = requests.head(
            url, timeout=(clients.CONNECT_SECONDS, clients.READ_SECONDS), allow_redirects=True
        )
        if answer.status_code >= 500:  # tried again, as a read's 5xx is
            raise ConnectionError(f"HTTP {answer.status_code} to a HEAD")
        return answer

    answer = retry(head, storage.redact(url), policy, "look for")
    if answer.status_code in _GONE:
        return None
    length = answer.headers.get("Content-Length")
    if answer.status_code != 200 or length is None or not length.isdigit():
        return -1
    return int(length)

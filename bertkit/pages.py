"""`bertkit docs`: the user's pages (docs/), which come with every install of bertkit.

    bertkit docs                     # every page: its name, title and file
    bertkit docs training            # print docs/training.md
    bertkit docs stages/examples     # or `examples`, `docs/stages/examples.md`,
                                     #    `examples.md#masking`: the same page

The commands' help texts name pages as `docs/training.md`; in a checkout they are the files
there, and from a wheel this command prints them (or opens them: `bertkit docs PAGE | less`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# A link to the checkout's docs/ (as bertkit/sample is to data/): a wheel holds a copy.
PAGES_DIR = (Path(__file__).parent / "docs").resolve()


def pages() -> dict[str, Path]:
    """Every page by its name: its path under docs/ without `.md` (`training`,
    `stages/examples`), in the order of that name."""
    found = {
        path.relative_to(PAGES_DIR).with_suffix("").as_posix(): path
        for path in PAGES_DIR.rglob("*.md")
    }
    return dict(sorted(found.items()))


def title(path: Path) -> str:
    """A page's first heading, without its `#`s."""
    with path.open(encoding="utf-8") as page:
        for line in page:
            if line.startswith("#"):
                return line.lstrip("#").strip()
    return ""


def find(name: str, known: dict[str, Path]) -> Path | None:
    """The page a user names as a help text or a link does: `training`, `training.md`,
    `docs/training.md`, `docs/stages/examples.md#masking`, or `examples` for the one page of
    that name in a folder."""
    name = name.split("#", 1)[0].strip().removeprefix("./").removeprefix("docs/")
    name = name.removesuffix(".md")
    if name in known:
        return known[name]
    by_last = [path for key, path in known.items() if key.rsplit("/", 1)[-1] == name]
    return by_last[0] if len(by_last) == 1 else None


def listing(known: dict[str, Path]) -> str:
    width = max(map(len, known))
    lines = [f"  {name:<{width}}  {title(path)}" for name, path in known.items()]
    return "\n".join(
        [
            "bertkit's pages (bertkit docs NAME prints one):",
            *lines,
            f"They are the files in {PAGES_DIR}.",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="bertkit docs",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("page", nargs="?", metavar="PAGE", help="the page to print")
    args = parser.parse_args(argv)
    known = pages()
    if not known:  # a broken install: say where the pages should be
        parser.exit(1, f"bertkit docs: error: no pages in {PAGES_DIR}: reinstall bertkit\n")
    if args.page is None:
        print(listing(known))
        return
    path = find(args.page, known)
    if path is None:
        parser.exit(
            2,
            f"bertkit docs: error: no page {args.page!r}; the pages: {', '.join(known)}\n",
        )
    sys.stdout.write(path.read_text(encoding="utf-8"))


if __name__ == "__main__":
    main()

"""The data report's page: one self-contained HTML file (inline CSS, PNGs as data: URIs, no
script, font or request of any kind), marked with GENERATOR so that a later run knows the
file is its own to replace. No timestamp: the same data gives the same bytes."""

from __future__ import annotations

import base64
import html
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

GENERATOR = "bertkit inspect --report"
GENERATOR_META = f'<meta name="generator" content="{GENERATOR}">'


@dataclass(frozen=True, slots=True)
class Panel:
    """One plot with its figures, Google's figure for the same settings and what it means."""

    title: str
    png: bytes | None
    alt: str
    figures: Sequence[tuple[str, str]] = ()  # (label, value) of these data
    google: str = ""  # Google's create_pretraining_data.py on the same settings; "" if none
    meaning: str = ""  # one line: what a reader should take from the plot
    missing: str = ""  # why there is no plot, when png is None


@dataclass(frozen=True, slots=True)
class Page:
    title: str
    subtitle: str
    headline: Sequence[tuple[str, str]]  # (value, label) cards
    notes: Sequence[str] = ()
    groups: Sequence[tuple[str, Sequence[Panel]]] = field(default_factory=tuple)


STYLE = """
:root { --ink:#1f2733; --soft:#5b6577; --line:#e3e7ee; --bg:#f6f8fb; --data:#2f6db5;
  --google:#e0711c; --card:#ffffff; }
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--ink);
  font:15px/1.5 -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
header { background:#17324f; color:#fff; padding:28px 40px 24px; }
header h1 { margin:0 0 4px; font-size:26px; font-weight:650; }
header p { margin:0; color:#c8d6e8; font-size:14px; word-break:break-all; }
main { max-width:1240px; margin:0 auto; padding:24px 32px 48px; }
.headline { display:grid; grid-template-columns:repeat(auto-fit, minmax(150px, 1fr));
  gap:12px; margin:0 0 20px; }
.stat { background:var(--card); border:1px solid var(--line); border-radius:10px;
  padding:12px 16px; }
.stat b { display:block; font-size:22px; font-weight:650; color:var(--data); }
.stat span { color:var(--soft); font-size:13px; }
.notes { background:#fff8e6; border:1px solid #f0d9a0; border-radius:10px; padding:10px 18px;
  margin:0 0 20px; }
.notes li { margin:4px 0; }
.legend { color:var(--soft); font-size:13px; margin:0 0 8px; }
.legend i { display:inline-block; width:22px; height:0; border-top:3px solid var(--data);
  vertical-align:middle; margin:0 6px 0 12px; }
.legend i.g { border-top:3px dashed var(--google); }
h2.group { font-size:19px; margin:30px 0 12px; padding-bottom:6px;
  border-bottom:2px solid var(--line); }
section.panel { background:var(--card); border:1px solid var(--line); border-radius:12px;
  padding:18px 20px; margin:0 0 16px; display:grid;
  grid-template-columns:minmax(0, 704px) minmax(260px, 1fr); gap:22px; align-items:start; }
section.panel h3 { grid-column:1 / -1; margin:0; font-size:17px; }
figure { margin:0; }
figure img { display:block; max-width:100%; height:auto; }
.missing { color:var(--soft); font-style:italic; padding:24px 0; }
aside dl { display:grid; grid-template-columns:auto auto; gap:3px 14px; margin:0 0 12px; }
aside dt { color:var(--soft); }
aside dd { margin:0; font-weight:600; text-align:right; font-variant-numeric:tabular-nums; }
.google { border-left:4px solid var(--google); background:#fdf3ea; padding:8px 12px;
  border-radius:0 8px 8px 0; margin:0 0 12px; font-size:14px; }
.google b { color:#b65612; }
.meaning { border-left:4px solid var(--data); background:#eef4fb; padding:8px 12px;
  border-radius:0 8px 8px 0; font-size:14px; margin:0; }
footer { color:var(--soft); font-size:13px; text-align:center; padding:0 0 30px; }
@media (max-width: 900px) { section.panel { grid-template-columns:1fr; } }
"""


def png_size(png: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk."""
    width, height = struct.unpack(">II", png[16:24])
    return width, height


def _panel(panel: Panel) -> str:
    e = html.escape
    if panel.png is not None:
        width, height = png_size(panel.png)
        source = base64.b64encode(panel.png).decode("ascii")
        figure = (
            f'<figure><img src="data:image/png;base64,{source}" width="{width}" '
            f'height="{height}" alt="{e(panel.alt)}"></figure>'
        )
    else:
        figure = f'<figure><p class="missing">{e(panel.missing)}</p></figure>'
    rows = "".join(f"<dt>{e(label)}</dt><dd>{e(value)}</dd>" for label, value in panel.figures)
    aside = [f"<dl>{rows}</dl>" if rows else ""]
    if panel.google:
        aside.append(
            '<p class="google"><b>Google\'s create_pretraining_data.py</b>, same settings: '
            f"{e(panel.google)}</p>"
        )
    if panel.meaning:
        aside.append(f'<p class="meaning"><b>What this means:</b> {e(panel.meaning)}</p>')
    return (
        f'<section class="panel"><h3>{e(panel.title)}</h3>{figure}'
        f"<aside>{''.join(aside)}</aside></section>"
    )


def render(page: Page) -> str:
    """The whole page as one string."""
    e = html.escape
    cards = "".join(
        f'<div class="stat"><b>{e(value)}</b><span>{e(label)}</span></div>'
        for value, label in page.headline
    )
    notes = (
        '<ul class="notes">' + "".join(f"<li>{e(note)}</li>" for note in page.notes) + "</ul>"
        if page.notes
        else ""
    )
    legend = (
        '<p class="legend">In every plot:<i></i>these data<i class="g"></i>'
        "Google's create_pretraining_data.py on the same settings, where it has a figure</p>"
    )
    groups = "".join(
        f'<h2 class="group">{e(name)}</h2>' + "".join(_panel(p) for p in panels)
        for name, panels in page.groups
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">\n'
        f"{GENERATOR_META}\n"
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{e(page.title)}</title>\n<style>{STYLE}</style></head>\n"
        f"<body><header><h1>{e(page.title)}</h1><p>{e(page.subtitle)}</p></header>\n"
        f'<main><div class="headline">{cards}</div>{notes}{legend}{groups}</main>\n'
        f"<footer>Written by <code>{GENERATOR}</code>; rerun it to refresh this page.</footer>"
        "</body></html>\n"
    )

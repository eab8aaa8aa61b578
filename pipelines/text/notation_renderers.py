"""More renderers of text-bearing templates (the table is in `pipelines/text/wikitemplates.py`):
values and formulas ({{val}}, {{chem}}, {{angbr}}), ship names ({{USS}}, {{ship}}), in-text
citations ({{harvtxt}}), and the templates whose words cannot be rendered reproducibly, which
render as `GAP`. Each renderer gets (positional, named) as `split_args` gives them.
"""

from __future__ import annotations

import re

from pipelines.text.template_renderers import GAP, Renderer, arg

# --------------------------------------------------------------------------------------------
# Values and formulas


def render_angle_brackets(positional: list[str], named: dict[str, str]) -> str | None:
    """{{angbr|a}} → `⟨a⟩` (a grapheme, a bra-ket)."""
    return f"⟨{arg(positional, 0)}⟩"


def render_val(positional: list[str], named: dict[str, str]) -> str | None:
    """{{val}}, kept simple: the number as written, then an uncertainty, an exponent and a unit.

    {{val|1.5|0.2}} → `1.5±0.2`; {{val|1.00794|(7)}} → `1.00794(7)`;
    {{val|1.5|+0.2|-0.1}} → `1.5+0.2−0.1`; {{val|6.241|e=18}} → `6.241×10^18`;
    {{val|1.5|u=m}} (or ul=) → `1.5 m`; {{val|3|u=m|up=s}} (or upl=) → `3 m/s`. Digits are
    not regrouped; unit codes are shown as written.
    """
    text = arg(positional, 0)
    if len(positional) == 2 and positional[1]:
        uncertainty = positional[1]
        text += uncertainty if uncertainty.startswith("(") else f"±{uncertainty}"
    elif len(positional) >= 3 and positional[1] and positional[2]:
        text += f"+{positional[1].lstrip('+')}−{positional[2].lstrip('-−')}"
    if exponent := named.get("e"):
        text += f"×10^{exponent}"
    unit = named.get("u") or named.get("ul")
    per = named.get("up") or named.get("upl")
    if unit:
        text += f" {unit}"
    if per:
        text += f"/{per}" if unit else f" /{per}"
    return text


# --------------------------------------------------------------------------------------------
# Ships: {{USS|Hornet|CV-12}}, {{ship|HMS|Dreadnought|1906}}

# The display-format argument: 1 and 6 show the prefix and name, 2 the name, 3 the name and
# the hull number or year; any other value, or none, shows all three.
_SHIP_PREFIX_AND_NAME = frozenset({"1", "6"})


def ship_text(prefix: str, name: str, ident: str, display: str) -> str:
    """`HMS Dreadnought (1906)`, or the part the display format asks for."""
    if not name:
        return prefix
    if display == "2":
        return name
    if display == "3":
        return f"{name} ({ident})" if ident else name
    if display in _SHIP_PREFIX_AND_NAME or not ident:
        return f"{prefix} {name}".strip()
    return f"{prefix} {name} ({ident})".strip()


def make_ship(prefix: str) -> Renderer:
    """{{USS|Hornet|CV-12}} → `USS Hornet (CV-12)`, {{USS|Hornet}} → `USS Hornet`."""

    def render(positional: list[str], named: dict[str, str]) -> str | None:
        return ship_text(prefix, arg(positional, 0), arg(positional, 1), arg(positional, 2))

    render.__doc__ = f"`{prefix}` + the ship's name and its hull number or year."
    return render


def render_ship(positional: list[str], named: dict[str, str]) -> str | None:
    """{{ship|HMS|Dreadnought|1906}} → `HMS Dreadnought (1906)`: the prefix comes first."""
    return ship_text(*(positional + [""] * 4)[:4])


# --------------------------------------------------------------------------------------------
# In-text citations: {{harvtxt|Boolos|Jeffrey|1974}}

# A year as Harvard citations write it: 1974, 1974a, 850, n.d.; "1974, 1999" starts with one.
_CITATION_YEAR = re.compile(r"(?:\d{3,4}[a-z]?|n\.d\.[a-z]?)(?![\w.])")


def render_harvtxt(positional: list[str], named: dict[str, str]) -> str | None:
    """`Boolos & Jeffrey (1974)`: one author `Smith (1990)`, three `A, B & C (1990)`, four or
    more `A et al. (1990)`. The year is the last positional argument that starts with one (a
    letter may follow it: 1974a; "1974, 1999" is two); p=/page=, pp=/pages= and loc= follow
    it, as on Wikipedia."""
    year_at = next(
        (i for i in range(len(positional) - 1, -1, -1) if _CITATION_YEAR.match(positional[i])),
        len(positional),
    )
    authors = [author for author in positional[:year_at] if author]
    if len(authors) >= 4:
        names = f"{authors[0]} et al."
    elif len(authors) >= 2:
        names = f"{', '.join(authors[:-1])} & {authors[-1]}"
    else:
        names = arg(authors, 0)
    inside = [positional[year_at]] if year_at < len(positional) else []
    if page := named.get("p") or named.get("page"):
        inside.append(f"p. {page}")
    elif pages := named.get("pp") or named.get("pages"):
        inside.append(f"pp. {pages}")
    if location := named.get("loc"):
        inside.append(location)
    if not inside:
        return names
    return f"{names} ({', '.join(inside)})".strip()


# --------------------------------------------------------------------------------------------
# Words that cannot be rendered reproducibly


def render_gap(positional: list[str], named: dict[str, str]) -> str | None:
    """GAP: the template shows words that depend on a data table or on the day the page is
    rendered ({{inflation}}, {{CURRENTYEAR}}, {{age}}), so its sentence is dropped."""
    return GAP


def render_coord(positional: list[str], named: dict[str, str]) -> str | None:
    """GAP where {{coord}} shows coordinates in the text; nothing for display=title, which
    shows them at the top of the page only."""
    display = named.get("display", "inline").lower()
    return GAP if "inline" in display or display in {"i", "it", "ti"} else ""


def gap_parser_function(first: str, args: list[str]) -> str | None:
    """{{#expr:…}}, {{#time:…}}: a computed number or date (often from {{CURRENTYEAR}})."""
    return GAP

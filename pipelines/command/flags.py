"""Command-line flags generated from a config dataclass: the one style of every bertkit command.

Each command has one typed, frozen config dataclass; its fields are the flags, so a flag's
name, type, default and help are written once and the config that reaches the code (and
the manifest or checkpoint that records it) is exactly what was parsed. A field becomes
`--field-name`, with `--field_name` accepted too (Beam's and Google's spelling). Help text
lives in the field's metadata:

    @dataclass(frozen=True)
    class VocabConfig:
        documents: tuple[str, ...] = option(help="documents directories")   # required
        vocab_size: int = option(30522, help="tokens in vocab.txt")

Types: str, int, float, bool (`--cased` / `--no-cased`), `X | None` (default None), and
`tuple[X, ...]` (one or more values, and the flag may be repeated: train's `--shards A B`);
a comma list in one value takes `parse=float_list` (train's `--mix 0.7,0.3`). Beam stages
parse their own flags this way and hand the rest to Beam (`pipelines.beam.runner.parse_stage`).

Values are checked as they are parsed, before the config exists and before any work: a
float must be finite (no flag means anything by nan or inf), a string must not be empty
(`--output ''` would be the working directory), and a field's `bounds` say which numbers
mean something (`option(1000, help=..., bounds=AT_LEAST_1)`). A value out of them ends the
command with one line naming the flag, the value and what it must be, exit 2:

    bertkit train: error: --checkpoint-every 0: must be at least 1

So is an s3:// or gs:// URL where the extra that reads it is not installed
(pipelines/io/extras.py): `--shards s3://bucket/shards needs the aws extra (boto3 is not
installed): pip install …`.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

from pipelines.io import extras

Config = TypeVar("Config")
_SCALARS = {"str": str, "int": int, "float": float}


@dataclass(frozen=True)
class Bounds:
    """The numbers a flag takes: `low` and `high` are included unless marked open."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def holds(self, value: float) -> bool:
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    def describe(self) -> str:
        """What a value must be, as the end of "must be …"."""
        if self.high is None:
            if self.low_open:
                return f"more than {self.low}"
            return "0 or more" if self.low == 0 else f"at least {self.low}"
        if self.low is None:
            return f"less than {self.high}" if self.high_open else f"at most {self.high}"
        if not self.low_open and not self.high_open:
            return f"between {self.low} and {self.high}"
        opening, closing = "(" if self.low_open else "[", ")" if self.high_open else "]"
        return f"in {opening}{self.low}, {self.high}{closing}"


AT_LEAST_1 = Bounds(low=1)  # a count of steps, items or megabytes that must be some
ZERO_OR_MORE = Bounds(low=0)  # a count where 0 means none or off
POSITIVE = Bounds(low=0, low_open=True)  # a rate, a size or an epsilon
FRACTION = Bounds(low=0, high=1, high_open=True)  # a decay, a dropout probability


def option(
    default: Any = dataclasses.MISSING,
    *,
    help: str,
    metavar: str | None = None,
    choices: Sequence[Any] | None = None,
    flag: str | None = None,
    parse: Callable[[str], Any] | None = None,
    bounds: Bounds | None = None,
    aliases: Sequence[str] = (),
    switch: bool = False,
    positional: bool = False,
) -> Any:
    """A config field that is a flag; without `default` the flag is required.

    `flag` names the flag when it is not the field's name (Google's `--max_seq_length` for
    a field of several lengths); `parse` turns the one string given into the value (a comma
    list, say) and raises argparse.ArgumentTypeError with the reason when it cannot.
    `bounds` are the numbers the flag takes (each of them, for a tuple); None is always taken
    where it is the default. `aliases` are more option strings for the same flag (inspect's
    `--seq` for `--max-seq-length`). A bool with `switch` is a bare flag that sets the
    opposite of its default (`--no-verify`, default True), with no `--no-` twin; a field
    with `positional` is an argument, not a flag (inspect's PATH_OR_URL).
    """
    metadata = {"help": help, "metavar": metavar, "choices": choices, "flag": flag}
    metadata["parse"] = parse
    metadata["bounds"] = bounds
    metadata["aliases"] = tuple(aliases)
    metadata["switch"] = switch
    metadata["positional"] = positional
    if isinstance(default, list | dict | set):
        raise TypeError("mutable defaults: use a tuple")
    return dataclasses.field(default=default, metadata=metadata)


def float_list(text: str) -> tuple[float, ...]:
    """ "0.7,0.3" → (0.7, 0.3): a flag of one number per item of another (train's --mix);
    argparse.ArgumentTypeError names what was expected. Each number's bounds are the
    field's (`option(bounds=...)`), checked with the other values."""
    parts = [part.strip() for part in str(text).split(",")]
    try:
        values = tuple(float(part) for part in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected numbers separated by commas, like 0.7,0.3"
        ) from None
    return values


def flag_name(field_name: str) -> str:
    return "--" + field_name.replace("_", "-")


def add_flags(parser: argparse.ArgumentParser, config_class: type) -> None:
    """Add one flag per field of `config_class` (a dataclass) to `parser`."""
    for spec in dataclasses.fields(config_class):
        name = spec.metadata.get("flag") or spec.name
        names = [flag_name(name)]
        if "_" in name.replace("-", "_"):
            names.append("--" + name.replace("-", "_"))
        names += spec.metadata.get("aliases", ())
        required = spec.default is dataclasses.MISSING
        default = None if required else spec.default
        kind = _type_name(spec.type)
        base = kind.removesuffix("|None")  # `X | None` parses as X, with default None
        help_text = spec.metadata.get("help", "")
        switch = spec.metadata.get("switch", False)
        shown = default is not None and default is not False and default != ()
        if not required and shown and not switch:
            help_text += f" (default {_shown(default)})"
        keywords: dict[str, Any] = {"dest": spec.name, "help": help_text}
        if spec.metadata.get("metavar"):
            keywords["metavar"] = spec.metadata["metavar"]
        if spec.metadata.get("choices"):
            keywords["choices"] = spec.metadata["choices"]
        if spec.metadata.get("positional"):
            del keywords["dest"]  # argparse names a positional's value after it
            parser.add_argument(spec.name, type=_SCALARS[base], **keywords)
        elif switch and base == "bool":
            action = "store_false" if default else "store_true"
            parser.add_argument(*names, action=action, default=default, **keywords)
        elif spec.metadata.get("parse"):
            parser.add_argument(
                *names,
                type=spec.metadata["parse"],
                default=default,
                required=required,
                **keywords,
            )
        elif base == "bool":
            parser.add_argument(
                *names, action=argparse.BooleanOptionalAction, default=default, **keywords
            )
        elif base.startswith("tuple[") and base.endswith(",...]"):
            element = _SCALARS[base[len("tuple[") : -len(",...]")]]
            parser.add_argument(
                *names,
                nargs="+",
                action="extend",
                type=element,
                required=required,
                default=None,
                **keywords,
            )
        elif base in _SCALARS:
            parser.add_argument(
                *names, type=_SCALARS[base], default=default, required=required, **keywords
            )
        else:
            raise TypeError(f"{config_class.__name__}.{spec.name}: no flag for type {kind}")


def config_values(config_class: type, namespace: argparse.Namespace) -> dict[str, Any]:
    """The field values a parsed namespace describes (repeated flags become tuples)."""
    values = {}
    for spec in dataclasses.fields(config_class):
        value = getattr(namespace, spec.name)
        if isinstance(value, list):
            value = tuple(value)
        elif value is None and spec.default is not dataclasses.MISSING:
            value = spec.default
        values[spec.name] = value
    return values


def config_from(config_class: type[Config], namespace: argparse.Namespace) -> Config:
    """The config a parsed namespace describes; its values are not checked (`checked_config`)."""
    return config_class(**config_values(config_class, namespace))


def value_problem(config_class: type, values: Mapping[str, Any]) -> str | None:
    """The first flag whose value means nothing, as one line naming the flag, the value and
    what it must be; None if every value is taken. `values` are the config's fields (a
    parsed namespace's, or a config's own: `config_problem`)."""
    for spec in dataclasses.fields(config_class):
        value = values[spec.name]
        flag = flag_name(spec.metadata.get("flag") or spec.name)
        items = value if isinstance(value, tuple) else (value,)
        # A list's refusal names the list, then the value at fault, as numbers are typed
        # (--mix 1,0: 0), not as Python prints floats (1.0, 0.0); 15 digits keep every value.
        listed = ",".join(map(_typed, items)) if isinstance(value, tuple) else None
        for item in items:
            problem = _item_problem(
                flag, item, spec.metadata.get("bounds"), spec.metadata.get("choices"), listed
            )
            if problem:
                return problem
    return None


def config_problem(config: Any) -> str | None:
    """`value_problem` for a config built in code rather than parsed (its `validate()`)."""
    values = {spec.name: getattr(config, spec.name) for spec in dataclasses.fields(config)}
    return value_problem(type(config), values)


def checked_config(
    config_class: type[Config], namespace: argparse.Namespace, parser: argparse.ArgumentParser
) -> Config:
    """The config a parsed namespace describes, once every value is taken; a value that is
    not, or a URL whose extra is not installed (`extras_problem`), ends the command with one
    line (exit 2), before the config exists: building one may compute from its values
    (examples' predictions per sequence from --masked-lm-prob)."""
    values = config_values(config_class, namespace)
    problem = value_problem(config_class, values) or extras_problem(config_class, values)
    if problem:
        refuse(parser, problem)
    return config_class(**values)


def extras_problem(config_class: type, values: Mapping[str, Any]) -> str | None:
    """The first flag naming an s3:// or gs:// URL whose extra (aws, gcp) is not installed,
    as one line naming the flag and the install command (pipelines/io/extras.py)."""
    return extras.urls_problem(
        (_label(spec), values[spec.name]) for spec in dataclasses.fields(config_class)
    )


def _label(spec: dataclasses.Field) -> str:
    """How a message names a field: its flag, or nothing for a positional argument."""
    if spec.metadata.get("positional"):
        return ""
    return flag_name(spec.metadata.get("flag") or spec.name)


def refuse(parser: argparse.ArgumentParser, problem: str) -> NoReturn:
    """End the command with `PROG: error: PROBLEM` and exit 2, as argparse does for a bad
    flag, without the usage: the line names the flag and what it must be."""
    parser.exit(2, f"{parser.prog}: error: {problem}\n")


def _typed(value: Any) -> str:
    return f"{value:.15g}" if isinstance(value, float) else str(value)


def _item_problem(
    flag: str,
    value: Any,
    bounds: Bounds | None,
    choices: Sequence[Any] | None = None,
    listed: str | None = None,
) -> str | None:
    """What is wrong with one value of `flag`, as "FLAG VALUE: …"; a float of a list flag given
    as `listed`, as "FLAG LIST: ITEM …"."""
    if value is None or isinstance(value, bool):
        return None
    if choices is not None and value not in choices:
        return f"{flag} {value!r}: one of {', '.join(map(str, choices))}"
    if isinstance(value, str):
        return f"{flag} is empty: give it a value" if not value.strip() else None
    # A float of a list (--mix) as typed; other values as they print.
    listed_float = listed is not None and isinstance(value, float)
    where = f"{flag} {listed}: {_typed(value)}" if listed_float else f"{flag} {value}:"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{where} must be a finite number"
    if bounds is not None and isinstance(value, int | float) and not bounds.holds(value):
        return f"{where} must be {bounds.describe()}"
    return None


def parser_for(config_class: type, prog: str, description: str | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_flags(parser, config_class)
    return parser


def parse_config(
    config_class: type[Config], argv: Sequence[str] | None, prog: str, description: str | None
) -> Config:
    """Parse `argv` into `config_class`; unknown flags are an error (exit 2, with usage), and
    so is a value the flag does not take (exit 2, one line: `value_problem`)."""
    parser = parser_for(config_class, prog, description)
    return checked_config(config_class, parser.parse_args(argv), parser)


def _type_name(annotation: Any) -> str:
    """ "int", "float|None", "tuple[str,...]" from a string or a real annotation."""
    name = annotation.__name__ if isinstance(annotation, type) else str(annotation)
    return name.replace(" ", "")


def _shown(value: Any) -> str:
    return " ".join(map(str, value)) if isinstance(value, tuple) else str(value)

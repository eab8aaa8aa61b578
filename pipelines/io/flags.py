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
`tuple[X, ...]` (one or more values, and the flag may be repeated). Beam stages parse their
own flags this way and hand the rest to Beam (`pipelines.beam.runner.parse_stage`).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

Config = TypeVar("Config")
_SCALARS = {"str": str, "int": int, "float": float}


def option(
    default: Any = dataclasses.MISSING,
    *,
    help: str,
    metavar: str | None = None,
    choices: Sequence[Any] | None = None,
    flag: str | None = None,
    parse: Callable[[str], Any] | None = None,
) -> Any:
    """A config field that is a flag; without `default` the flag is required.

    `flag` names the flag when it is not the field's name (Google's `--max_seq_length` for
    a field of several lengths); `parse` turns the one string given into the value (a comma
    list, say) and raises argparse.ArgumentTypeError with the reason when it cannot.
    """
    metadata = {"help": help, "metavar": metavar, "choices": choices, "flag": flag}
    metadata["parse"] = parse
    if isinstance(default, list | dict | set):
        raise TypeError("mutable defaults: use a tuple")
    return dataclasses.field(default=default, metadata=metadata)


def flag_name(field_name: str) -> str:
    return "--" + field_name.replace("_", "-")


def add_flags(parser: argparse.ArgumentParser, config_class: type) -> None:
    """Add one flag per field of `config_class` (a dataclass) to `parser`."""
    for spec in dataclasses.fields(config_class):
        name = spec.metadata.get("flag") or spec.name
        names = [flag_name(name)]
        if "_" in name.replace("-", "_"):
            names.append("--" + name.replace("-", "_"))
        required = spec.default is dataclasses.MISSING
        default = None if required else spec.default
        kind = _type_name(spec.type)
        base = kind.removesuffix("|None")  # `X | None` parses as X, with default None
        help_text = spec.metadata.get("help", "")
        if not required and default is not None and default is not False and default != ():
            help_text += f" (default {_shown(default)})"
        keywords: dict[str, Any] = {"dest": spec.name, "help": help_text}
        if spec.metadata.get("metavar"):
            keywords["metavar"] = spec.metadata["metavar"]
        if spec.metadata.get("choices"):
            keywords["choices"] = spec.metadata["choices"]
        if spec.metadata.get("parse"):
            parser.add_argument(
                *names, type=spec.metadata["parse"], default=default, required=required,
                **keywords,
            )  # fmt: skip
        elif base == "bool":
            parser.add_argument(
                *names, action=argparse.BooleanOptionalAction, default=default, **keywords
            )
        elif base.startswith("tuple[") and base.endswith(",...]"):
            element = _SCALARS[base[len("tuple[") : -len(",...]")]]
            parser.add_argument(
                *names, nargs="+", action="extend", type=element, required=required,
                default=None, **keywords,
            )  # fmt: skip
        elif base in _SCALARS:
            parser.add_argument(
                *names, type=_SCALARS[base], default=default, required=required, **keywords
            )
        else:
            raise TypeError(f"{config_class.__name__}.{spec.name}: no flag for type {kind}")


def config_from(config_class: type[Config], namespace: argparse.Namespace) -> Config:
    """The config a parsed namespace describes (repeated flags become tuples)."""
    values = {}
    for spec in dataclasses.fields(config_class):  # type: ignore[arg-type]
        value = getattr(namespace, spec.name)
        if isinstance(value, list):
            value = tuple(value)
        elif value is None and spec.default is not dataclasses.MISSING:
            value = spec.default
        values[spec.name] = value
    return config_class(**values)


def parser_for(config_class: type, prog: str, description: str | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_flags(parser, config_class)
    return parser


def parse_config(
    config_class: type[Config], argv: Sequence[str] | None, prog: str, description: str | None
) -> Config:
    """Parse `argv` into `config_class`; unknown flags are an error (exit 2, with usage)."""
    parser = parser_for(config_class, prog, description)
    return config_from(config_class, parser.parse_args(argv))


def _type_name(annotation: Any) -> str:
    """ "int", "float|None", "tuple[str,...]" from a string or a real annotation."""
    name = annotation.__name__ if isinstance(annotation, type) else str(annotation)
    return name.replace(" ", "")


def _shown(value: Any) -> str:
    return " ".join(map(str, value)) if isinstance(value, tuple) else str(value)

"""Everything the example stage's steps work to, in one value: the inputs, the vocabulary,
the layout (pipelines/examples/plan.py) and the regroupings' routes.

`bertkit examples` makes it before the job, from the manifests it was given; `bertkit chain`
has each worker make it inside the job once the documents and the vocabulary are written
(`load_examples_plan`, once per worker process), from the same files, so both make the same
examples byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipelines.beam import files
from pipelines.beam.documents import DocumentsInput, documents_units
from pipelines.examples.config import ExamplesConfig
from pipelines.examples.plan import Layout, Routes, plan_layout, plan_routes, read_documents_inputs
from pipelines.io.vocabulary import Vocabulary, load_vocab


@dataclass(frozen=True)
class ExamplesPlan:
    inputs: tuple[DocumentsInput, ...]
    vocab: Vocabulary
    layout: Layout
    routes: Routes

    @property
    def units(self) -> list[tuple[str, str]]:
        """(unit name, documents file): the first step's units of work."""
        return documents_units(list(self.inputs))


def make_examples_plan(
    config: ExamplesConfig, vocab: Vocabulary, inputs: list[DocumentsInput]
) -> ExamplesPlan:
    layout = plan_layout(config, inputs, vocab.size)
    return ExamplesPlan(tuple(inputs), vocab, layout, plan_routes(config, layout, inputs))


def load_examples_plan(config: ExamplesConfig) -> ExamplesPlan:
    """The plan from --documents' manifests and --vocab as they are now written (by a worker
    of `bertkit chain`)."""
    vocab = load_vocab(config.vocab, files.READER, config.cased)
    return make_examples_plan(config, vocab, read_documents_inputs(config.documents))

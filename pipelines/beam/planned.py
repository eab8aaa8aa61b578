"""A stage's steps and the plan they work to: given when the graph is built, or made later,
inside the job, from what its earlier steps wrote.

A reading stage (vocab, examples) sizes its work from its inputs' manifests: which documents
files there are (one unit each), how many partner groups and shuffle buckets, how a
regrouping travels. Run alone, the stage reads the manifests before the job starts and
builds its steps with the plan (`Planned.now`). In `bertkit chain` the manifests do not exist
yet when the graph is built: they are written by the job's documents steps. There the stage's
steps wait for a side input, `ready`, that is complete once the earlier step has finished
(its manifests or vocabulary written), and each worker makes the plan on its first element
from what that step wrote (`Planned.later`): the same plan, from the same files, in every
worker, so the work and its bytes are the same as the stage's run alone. A `later` plan is
made once per worker process (the loading function caches it), not per bundle or per step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

import apache_beam as beam

Plan = TypeVar("Plan")


class _AfterFn(beam.DoFn):
    """Builds the wrapped DoFn from the plan on the first element (after the `ready` side
    input, the first of its side inputs, is complete), then hands it every element."""

    def __init__(self, load: Callable[[], Any], make: Callable[[Any], beam.DoFn]) -> None:
        self._load = load
        self._make = make
        self._fn: beam.DoFn | None = None

    # Not annotated: Beam reads a process method's annotations as type hints, which a
    # variable number of side inputs does not fit.
    def process(self, element, _ready, *side_inputs):
        if self._fn is None:
            fn = self._make(self._load())
            fn.setup()
            self._fn = fn
        yield from self._fn.process(element, *side_inputs) or ()

    def finish_bundle(self) -> Iterable[Any] | None:
        return self._fn.finish_bundle() if self._fn is not None else None

    def teardown(self) -> None:
        if self._fn is not None:
            self._fn.teardown()


class _ItemsFn(beam.DoFn):
    """One trigger element → the plan's items (a stage's units of work)."""

    def __init__(self, items: Callable[[Any], list[Any]], plan: Any) -> None:
        self._items = items
        self._plan = plan

    def process(self, _: Any) -> Iterator[Any]:
        yield from self._items(self._plan)


class Planned(Generic[Plan]):
    """How a stage's steps get their plan: `now` (built with it) or `later` (each worker
    loads it once `ready` is complete). The stage's graph is the same either way but for
    the steps that start it (`items`)."""

    def __init__(
        self,
        plan: Plan | None,
        load: Callable[[], Plan] | None = None,
        ready: beam.PCollection | None = None,
    ) -> None:
        self._plan = plan
        self._load = load
        self._ready = ready

    @classmethod
    def now(cls, plan: Plan) -> Planned[Plan]:
        return cls(plan)

    @classmethod
    def later(cls, load: Callable[[], Plan], ready: beam.PCollection) -> Planned[Plan]:
        """`load` runs on a worker (picklable, cached per process); `ready` is any
        PCollection complete once what `load` reads has been written."""
        return cls(None, load, ready)

    @property
    def made_later(self) -> bool:
        return self._load is not None

    @property
    def plan(self) -> Plan:
        """The plan itself: only where it was given (a stage run alone)."""
        if self._plan is None:
            raise RuntimeError("this stage's plan is made inside the job, by its workers")
        return self._plan

    def pardo(self, make: Callable[[Plan], beam.DoFn], *side_inputs: Any) -> beam.ParDo:
        """A ParDo of the DoFn `make(plan)`, with its own side inputs after the element."""
        if self._load is None:
            return beam.ParDo(make(self.plan), *side_inputs)
        assert self._ready is not None
        return beam.ParDo(_AfterFn(self._load, make), beam.pvalue.AsList(self._ready), *side_inputs)

    def items(self, pipeline: beam.Pipeline, label: str, items: Callable[[Plan], list[Any]]):
        """The PCollection of the plan's `items` (a stage's first step's units), not yet
        spread over the workers (the caller does: `runner.spread_over_workers`)."""
        if self._load is None:
            return pipeline | label >> beam.Create(items(self.plan), reshuffle=False)
        return (
            pipeline
            | f"{label}Trigger" >> beam.Create([None])
            | label >> self.pardo(lambda plan: _ItemsFn(items, plan))
        )

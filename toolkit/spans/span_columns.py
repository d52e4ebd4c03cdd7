"""A long document's spans held as columns: 28 bytes a span where a `PredictedSpan` object with its int and
float objects costs several times that, so a million spans from a 100 MB document are not what its memory grows
by. Read as a sequence of `PredictedSpan`s, made one at a time as they are read. Pure: no torch, no I/O.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import overload

from toolkit.spans.decoding import PredictedSpan


class SpanColumns(Sequence[PredictedSpan]):
    """Spans in the order given, as columns of starts, ends, label numbers and scores (a float64 each, so a
    span read back is the span stored, score for score)."""

    def __init__(self, spans: Iterable[PredictedSpan] = ()):
        self._starts, self._ends = array("q"), array("q")
        self._labels, self._scores = array("I"), array("d")
        self._names: list[str] = []
        self._numbers: dict[str, int] = {}
        self.extend(spans)

    def extend(self, spans: Iterable[PredictedSpan]) -> None:
        for span in spans:
            number = self._numbers.get(span.label)
            if number is None:
                number = self._numbers[span.label] = len(self._names)
                self._names.append(span.label)
            self._starts.append(span.start)
            self._ends.append(span.end)
            self._labels.append(number)
            self._scores.append(span.score)

    def where(self, keep: Callable[[int, int], bool]) -> SpanColumns:
        """The spans whose (start, end) `keep` accepts, as columns again."""
        kept = SpanColumns()
        kept._names, kept._numbers = self._names, self._numbers
        for k in range(len(self)):
            if keep(self._starts[k], self._ends[k]):
                kept._starts.append(self._starts[k])
                kept._ends.append(self._ends[k])
                kept._labels.append(self._labels[k])
                kept._scores.append(self._scores[k])
        return kept

    def __len__(self) -> int:
        return len(self._starts)

    @overload
    def __getitem__(self, key: int) -> PredictedSpan: ...
    @overload
    def __getitem__(self, key: slice) -> list[PredictedSpan]: ...
    def __getitem__(self, key: int | slice) -> PredictedSpan | list[PredictedSpan]:
        if isinstance(key, slice):
            return [self[k] for k in range(*key.indices(len(self)))]
        k = key + len(self) if key < 0 else key
        if not 0 <= k < len(self):
            raise IndexError("SpanColumns index out of range")
        return PredictedSpan(self._starts[k], self._ends[k], self._names[self._labels[k]], self._scores[k])

    def __iter__(self) -> Iterator[PredictedSpan]:
        names = self._names
        for start, end, label, score in zip(self._starts, self._ends, self._labels, self._scores):
            yield PredictedSpan(start, end, names[label], score)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]  # mutable, like a list

    def __repr__(self) -> str:
        return f"SpanColumns({list(self)!r})"

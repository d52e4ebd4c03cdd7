"""What every task's predictor is (the contract its `Task.predictor` names): loaded from a run or artifact,
it turns texts into spans per document and reports how it went; a service warms it up before it reports
ready. A predictor that can be exported also says what its outputs are, for export's parity gate."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from toolkit.registry.saved import ModelMeta
from toolkit.rundir import Run
from toolkit.spans.decoding import PredictedSpan


@runtime_checkable
class Predictor(Protocol):
    meta: ModelMeta
    last_report: dict  # the last predict's timing and counts (hallucinated spans, long documents)

    @classmethod
    def load(cls, run: Run | Path, **options) -> Predictor:
        """The saved model of a run or artifact, on its runtime."""

    def predict(self, texts: Sequence[str], batch_size: int | None = None) -> list[list[PredictedSpan]]:
        """Spans per document, in the order of `texts`; `batch_size`: model inputs run together (None: the
        predictor's own default). The service and `toolkit predict` pass it."""

    def warm_up(self) -> None:
        """Prepare the runtime for every input shape it will see (a no-op where nothing is compiled per shape)."""


@runtime_checkable
class ExportablePredictor(Predictor, Protocol):
    @classmethod
    def load_reference(cls, run: Run) -> ExportablePredictor:
        """The run's PyTorch model as trained, in fp32: what every export path is compared with."""

    def parity_inputs(self, texts: Sequence[str]) -> Any:
        """The model inputs of the parity documents, built once (by the reference) for every path."""

    def parity_outputs(self, texts: Sequence[str], inputs: Any) -> tuple[list, list]:
        """(raw outputs per input, as arrays; spans per document) on `inputs`."""

    def decisions(self, logits: Any) -> Any:
        """What the model decides from one input's raw outputs (compared for agreement between paths)."""

"""The export paths (the registry of paths, as `toolkit.registry` is of tasks): one `ExportPath` per way to
package a run, saying whether this machine can build it and why not, how to build it, which runtime loads it
and whether it must match the PyTorch model exactly. `toolkit export --precision auto` measures every path
this machine and task allow and keeps the fastest within the parity budgets. Adding a path is one entry here
(and its builder in `builders.py`); no module outside this one and `toolkit.models.runtimes` branches on a
path's or a runtime's name (tests/test_architecture.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from toolkit.deploy import builders
from toolkit.errors import ToolkitError
from toolkit.models.openvino import nncf_available, openvino_available
from toolkit.models.runtimes import ONNX, OPENVINO, PYTORCH, Runtime
from toolkit.registry import Task


@dataclass(frozen=True)
class Machine:
    """What a path's requirements read: the task, this machine, and the model being exported."""

    spec: Task
    hardware: dict  # toolkit.hardware.describe()
    model_type: str  # config.json model_type
    bidirectional: bool  # a decoder whose causal mask was removed (model.attention)


Requirement = Callable[[Machine], "str | None"]  # why a path cannot be built (None: it can)


def _causal_graph(m: Machine) -> str | None:
    if m.bidirectional:
        return "optimum exports a decoder's causal graph: its bidirectional attention (model.attention) runs in PyTorch"
    return None


def _no_decoder(m: Machine) -> str | None:
    return "decoders are packaged as ONNX Runtime graphs with a KV cache" if m.spec.generates else None


def _openvino(m: Machine) -> str | None:
    return None if openvino_available() else "OpenVINO is not installed (pip install openvino)"


def _nncf(m: Machine) -> str | None:
    return None if nncf_available() else "NNCF, which calibrates OpenVINO's int8, is not installed (pip install nncf)"


def _bf16_units(m: Machine) -> str | None:
    return None if m.hardware["bf16"] else "this machine has no bf16 units (avx512_bf16 or amx_bf16) and no CUDA device"


def _fusable(m: Machine) -> str | None:
    if m.spec.generates:
        return "fusions of decoder graphs with a KV cache are not built"
    if m.model_type not in builders.FUSION_MODEL_TYPES:
        return f"ONNX Runtime's transformer optimizer does not fuse model type {m.model_type!r}"
    return None


@dataclass(frozen=True)
class ExportPath:
    """One way to package a run: built by `build` into a model folder that `runtime` loads."""

    name: str
    runtime: Runtime
    precision: str
    build: Callable[..., dict]  # (run, directory, built paths) -> what the build recorded
    requires: tuple[Requirement, ...] = ()
    exact: bool = False  # fp32 arithmetic: gated on the logits as well as on F1
    made_from: str | None = None  # the path whose folder this one is made from (built first)
    aliases: tuple[str, ...] = ()  # short --precision names

    def unavailable(self, machine: Machine) -> str | None:
        """Why this path cannot be built here for this task and model (None: it can)."""
        return next((why for check in self.requires if (why := check(machine))), None)


GRAPH = "onnx_fp32"  # the ONNX graph the other ONNX Runtime and OpenVINO paths are made from
_OPENVINO = (_causal_graph, _no_decoder, _openvino)
PATHS: dict[str, ExportPath] = {
    p.name: p
    for p in (
        ExportPath(GRAPH, ONNX, "fp32", builders.onnx_graph, (_causal_graph,), exact=True, aliases=("fp32",)),
        # ONNX Runtime's transformer fusions: attention, skip layer norm, bias GELU
        ExportPath(
            "onnx_fused", ONNX, "fp32", builders.fused_graph, (_causal_graph, _fusable), True, GRAPH, ("fused",)
        ),
        ExportPath("onnx_int8", ONNX, "int8", builders.int8_graph, (_causal_graph,), False, GRAPH, ("int8",)),
        ExportPath("pytorch_fp32", PYTORCH, "fp32", builders.pytorch_weights, (_no_decoder,), True, None, ("pytorch",)),
        # the fp32 weights run under bf16 autocast
        ExportPath(
            "pytorch_bf16",
            PYTORCH,
            "bf16",
            builders.pytorch_weights,
            (_no_decoder, _bf16_units),
            False,
            None,
            ("bf16",),
        ),  # noqa: E501
        # OpenVINO compiles the onnx_fp32 graph for this CPU: fp32, or bf16 matmuls on AMX / AVX-512 bf16 units.
        ExportPath("openvino_fp32", OPENVINO, "fp32", builders.openvino_model, _OPENVINO, True, GRAPH),
        ExportPath("openvino_bf16", OPENVINO, "bf16", builders.openvino_model, (*_OPENVINO, _bf16_units), False, GRAPH),
        # int8 matmuls on the VNNI / AMX int8 units, activation ranges calibrated on training windows (NNCF).
        ExportPath("openvino_int8", OPENVINO, "int8", builders.openvino_int8, (*_OPENVINO, _nncf), False, GRAPH),
        # The same int8 matmuls, everything else (attention, normalization, activations) in bf16 on machines with
        # bf16 units; measured beside openvino_int8 because the faster of the two depends on the CPU.
        ExportPath(
            "openvino_int8_bf16",
            OPENVINO,
            "int8_bf16",
            partial(builders.openvino_int8, reuse="openvino_int8"),
            (*_OPENVINO, _nncf, _bf16_units),
            False,
            GRAPH,
        ),
    )
}
ALIASES = {alias: p.name for p in PATHS.values() for alias in p.aliases}


def resolve_path(requested: str) -> str:
    """A --precision value (a path name, `auto`, or a short alias: fp32, int8, fused, bf16, pytorch) -> its path
    name."""
    name = ALIASES.get(requested.replace("-", "_"), requested.replace("-", "_"))
    if name != "auto" and name not in PATHS:
        raise ToolkitError(
            f"precision {requested!r} is not supported",
            fix=f"use auto, one of {', '.join(PATHS)}, or a short name: {', '.join(ALIASES)}",
        )
    return name


def unavailable(name: str, spec: Task, hardware: dict, model_type: str, bidirectional: bool = False) -> str | None:
    """Why path `name` cannot be built here for this task and model (None: it can). Pure."""
    return PATHS[name].unavailable(Machine(spec, hardware, model_type, bidirectional))


def paths_to_build(wanted: list[str]) -> list[str]:
    """`wanted` with the paths they are made from, each before the paths made from it."""
    order: list[str] = []
    for name in wanted:
        source = PATHS[name].made_from
        if source and source not in order and source not in wanted:
            order.insert(0, source)
        order.append(name)
    return order

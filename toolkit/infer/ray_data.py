"""`toolkit predict --ray ADDRESS`: the same per-document functions as the local path, on Ray Data.

Files are read by Ray tasks (`extract_file`), and documents go through a pool of actors that each
load the model once (`Predictor`, calling `batched_rows` as the local path does). Rows stream back to
the driver, which writes OUT, so resuming and failure reporting are the local path's own. Order is
preserved, so OUT has the same lines in the same order as a local run.

On a cluster, every node needs the toolkit installed and the model at the same path (a shared file
system, or copy it first); docs/guides/predict.md says how.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from toolkit.data.documents import split_jsonl
from toolkit.errors import ToolkitError
from toolkit.infer.rows import batched_rows, extract_file, model_id_of


def pieces_of(files: list[Path], batch_size: int) -> list[dict]:
    """Read items of about `batch_size` documents each: JSONL files cut into byte ranges, other files
    grouped `batch_size` to an item. Each item becomes its own block, and a block goes to one actor, so
    this is what spreads one large file over all actors (a file as one block kept one actor busy and
    the others idle; a Ray repartition after reading needs a CPU the actors already hold)."""
    items, group = [], []
    for path in files:
        if path.suffix.lower() == ".jsonl":
            if group:  # files keep their order: the output's order is the local path's
                items.append({"pieces": json.dumps(group)})
                group = []
            # An empty file still gets a piece, so that its "no documents" failure is reported.
            pieces = split_jsonl(path, batch_size) or [(0, 0, 1)]
            items += [{"pieces": json.dumps([[str(path), *piece]])} for piece in pieces]
        else:
            group.append([str(path), -1, -1, -1])
            if len(group) == batch_size:
                items.append({"pieces": json.dumps(group)})
                group = []
    if group:
        items.append({"pieces": json.dumps(group)})
    return items


def _extract(item: dict, done: frozenset) -> list[dict]:
    rows = []
    # Pieces travel as JSON text: Arrow cannot hold a list that mixes paths and offsets.
    for path, start, end, first in json.loads(item["pieces"]):
        piece = None if start < 0 else (int(start), int(end), int(first))
        rows += [{"row": row} for row in extract_file(str(path), done, piece)]
    return rows


class Predictor:
    """One model per actor, loaded once; a batch of rows in, output rows out."""

    def __init__(self, model: str, batch_size: int):
        from toolkit.infer import load_predictor

        self.predictor = load_predictor(model)
        self.model_id = model_id_of(Path(model))
        self.batch_size = batch_size

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        # Rows cross Ray's object store as strings: a PredictionRow is joined here.
        rows = [
            str(row)
            for row in batched_rows([str(r) for r in batch["row"]], self.predictor, self.model_id, self.batch_size)
        ]
        return {"row": np.array(rows, dtype=object)}


def connect(address: str) -> dict:
    """Join the cluster at `address` ("auto", "ray://head:10001", ...) or start one here ("local")."""
    import ray

    if not ray.is_initialized():
        try:
            ray.init(
                address=None if address == "local" else address,
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
            )
        except ConnectionError as exc:
            raise ToolkitError(
                f"cannot reach a Ray cluster at {address!r}: {exc}",
                fix="start one (`ray start --head`), or pass --ray local",
            ) from None
    # Ray Data logs every execution plan at INFO; the command prints its own summary.
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    return ray.cluster_resources()


def ray_rows(
    model: Path,
    files: list[Path],
    done: frozenset,
    batch_size: int,
    address: str,
    actors: int | None,
    cpus_per_actor: int = 1,
) -> Iterator[str]:
    """Output rows, in input order, from a Ray Data pipeline: read tasks, then `actors` model actors of
    `cpus_per_actor` CPUs each (Ray sets each actor's thread count to its CPUs); by default as many
    actors as the cluster's CPUs allow."""
    import ray

    resources = connect(address)
    actors = actors or max(1, int(resources.get("CPU", 1)) // cpus_per_actor)
    ray.data.DataContext.get_current().execution_options.preserve_order = True
    ray.data.DataContext.get_current().enable_progress_bars = False
    items = pieces_of(files, batch_size)
    dataset = ray.data.from_items(items, override_num_blocks=len(items))
    # Reading is light next to the model, and reserving a CPU for it would leave read tasks waiting on
    # the actors' CPUs (each actor holds its own) for ever: read tasks reserve none. Tasks that reserve
    # nothing are not limited by CPUs, though, and Ray started a worker process per pending read task
    # (far more processes than cores, every run slower than a local one): the pool
    # is capped at one reader per actor.
    dataset = dataset.flat_map(
        _extract, fn_kwargs={"done": done}, num_cpus=0, compute=ray.data.TaskPoolStrategy(size=actors)
    )
    dataset = dataset.map_batches(
        Predictor,
        fn_constructor_kwargs={"model": str(Path(model).resolve()), "batch_size": batch_size},
        batch_size=batch_size,
        compute=ray.data.ActorPoolStrategy(size=actors),
        num_cpus=cpus_per_actor,
        batch_format="numpy",
    )
    for row in dataset.iter_rows():
        yield str(row["row"])

"""Valid-sequence decoding of IOB2 tag scores: the best tag path in which every I-X follows B-X or I-X.
Pure: numpy only, no torch, no I/O.

Argmax decoding picks each word's tag alone, so `O I-X I-X` or `B-X I-Y` happen and are repaired
after the fact (an orphan I starts a span): a span broken by one uncertain word becomes two
fragments, each a false positive. Viterbi over the same per-word probabilities with IOB2's
transition constraints picks the most probable *valid* sequence instead, so the model's own
scores decide whether a doubtful word joins its neighbours or is left out.

Written here rather than taken from a CRF package: those (pytorch-crf, torchcrf) need torch and a
trained transition layer, and decoding must stay a pure function shared by eval and serving. The
transitions are fixed (allowed or not), so nothing is learned and any tagger can use it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def iob2_transitions(tags: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(allowed[prev, next], allowed_first[next]) for IOB2 tag names: I-X may only follow B-X or I-X,
    and may not begin a sequence."""
    n = len(tags)
    allowed = np.ones((n, n), dtype=bool)
    first = np.ones(n, dtype=bool)
    for j, tag in enumerate(tags):
        if tag.startswith("I-"):
            label = tag[2:]
            first[j] = False
            for i, prev in enumerate(tags):
                allowed[i, j] = prev in (f"B-{label}", f"I-{label}")
    return allowed, first


def viterbi_path(probs: np.ndarray, allowed: np.ndarray, allowed_first: np.ndarray) -> np.ndarray:
    """The tag ids [n] maximising the summed log-probability of probs [n, tags] over allowed paths."""
    n = probs.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    logp = np.log(np.clip(probs, 1e-12, 1.0))
    greedy = logp.argmax(1)
    if allowed_first[greedy[0]] and allowed[greedy[:-1], greedy[1:]].all():
        return greedy  # the best path of all is allowed, so it is the best allowed path: nothing to search
    # -inf for forbidden moves; every tag set here keeps O reachable from anywhere, so a path always exists.
    penalty = np.where(allowed, 0.0, -np.inf)
    score = np.where(allowed_first, logp[0], -np.inf)
    back = np.zeros((n, probs.shape[1]), dtype=np.int64)
    for t in range(1, n):
        candidates = score[:, None] + penalty  # [prev, next]
        back[t] = candidates.argmax(0)
        score = candidates[back[t], np.arange(probs.shape[1])] + logp[t]
    path = np.zeros(n, dtype=np.int64)
    path[-1] = int(score.argmax())
    for t in range(n - 1, 0, -1):
        path[t - 1] = back[t, path[t]]
    return path

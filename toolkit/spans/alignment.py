"""Character spans -> per-token training targets. Pure: no torch, no I/O.

Tokens are given by their character offsets into the document ((0, 0) for special
tokens) and their word ids (None for special tokens), as a fast tokenizer returns
them. Targets are document-level: a window that starts inside a span labels its
first token I-, exactly as the whole document would.
"""

from __future__ import annotations

from collections.abc import Sequence

from toolkit.spans.overlaps import SpanLike, max_disjoint

IGNORE = -100


def representable(spans: Sequence[SpanLike], multi_label: bool) -> tuple[list[SpanLike], list[SpanLike]]:
    """(kept, left out): flat mode keeps a largest non-overlapping set; multi-label mode one per label."""
    if not multi_label:
        keep = set(max_disjoint(spans))
    else:
        keep = set()
        by_label: dict[str, list[int]] = {}
        for i, s in enumerate(spans):
            by_label.setdefault(s.label, []).append(i)
        for idx in by_label.values():
            keep |= {idx[k] for k in max_disjoint([spans[i] for i in idx])}
    return [s for i, s in enumerate(spans) if i in keep], [s for i, s in enumerate(spans) if i not in keep]


def _token_roles(offsets: Sequence[tuple[int, int]], spans: Sequence[SpanLike]) -> list[list[tuple[str, str]]]:
    """For each token, the (label, 'B' or 'I') of every span it overlaps."""
    roles: list[list[tuple[str, str]]] = [[] for _ in offsets]
    for s in spans:
        for t, (a, b) in enumerate(offsets):
            if b <= a or b <= s.start or a >= s.end:
                continue
            roles[t].append((s.label, "B" if a <= s.start else "I"))
    return roles


def trainable_tokens(word_ids: Sequence[int | None], label_all_subtokens: bool) -> list[bool]:
    """Which tokens carry a target: every word's first sub-token (or every sub-token), never a special token."""
    out, prev = [], None
    for w in word_ids:
        out.append(w is not None and (label_all_subtokens or w != prev))
        prev = w
    return out


def flat_targets(
    offsets: Sequence[tuple[int, int]],
    word_ids: Sequence[int | None],
    spans: Sequence[SpanLike],
    tag_to_id: dict[str, int],
    label_all_subtokens: bool = False,
) -> list[int]:
    """One tag id per token (IGNORE for special tokens and, unless label_all_subtokens, non-first sub-tokens).

    `spans` must not overlap (use `representable` first)."""
    roles = _token_roles(offsets, spans)
    mask = trainable_tokens(word_ids, label_all_subtokens)
    out = []
    for t, keep in enumerate(mask):
        if not keep:
            out.append(IGNORE)
        elif roles[t]:
            label, role = roles[t][0]
            out.append(tag_to_id[f"{role}-{label}"])
        else:
            out.append(tag_to_id["O"])
    return out


def multi_label_targets(
    offsets: Sequence[tuple[int, int]],
    word_ids: Sequence[int | None],
    spans: Sequence[SpanLike],
    labels: Sequence[str],
    label_all_subtokens: bool = False,
) -> list[list[int]]:
    """Per token, one O/B/I id (0/1/2) for every label (an independent BIO layer per label);
    IGNORE rows for masked tokens. Spans of one label must not overlap (use `representable`)."""
    index = {lb: i for i, lb in enumerate(labels)}
    roles = _token_roles(offsets, spans)
    mask = trainable_tokens(word_ids, label_all_subtokens)
    out: list[list[int]] = []
    for t, keep in enumerate(mask):
        if not keep:
            out.append([IGNORE] * len(labels))
            continue
        row = [0] * len(labels)
        for label, role in roles[t]:
            row[index[label]] = 1 if role == "B" else 2
        out.append(row)
    return out

"""Tag schemes (IOB1, IOB2, BIOES, BILOU): chunks <-> per-token tags. Pure functions.

A chunk is (label, first_token, end_token) with end exclusive. Decoding is lenient
in the way conlleval is (an I- tag that cannot continue a chunk starts one) and
reports every such repair, so nothing is reinterpreted silently.
"""

from __future__ import annotations

from typing import Literal

Scheme = Literal["iob1", "iob2", "bioes", "bilou"]
SCHEMES: tuple[str, ...] = ("iob1", "iob2", "bioes", "bilou")
Chunk = tuple[str, int, int]

_PREFIXES = {
    "iob1": {"B", "I"},
    "iob2": {"B", "I"},
    "bioes": {"B", "I", "E", "S"},
    "bilou": {"B", "I", "L", "U"},
}


def split_tag(tag: str) -> tuple[str, str | None]:
    """'B-Disease' -> ('B', 'Disease'); 'O' -> ('O', None). Accepts '-' or '_' after the prefix."""
    if tag == "O":
        return "O", None
    if len(tag) > 2 and tag[1] in "-_":
        return tag[0], tag[2:]
    raise ValueError(f"tag {tag!r} is not O or PREFIX-LABEL")


def guess_scheme(tags: list[str]) -> Scheme:
    """BIOES/BILOU when their extra prefixes appear, else IOB2 (IOB1 data decodes the same, with repairs reported)."""
    prefixes = {t[0] for t in tags if t != "O" and len(t) > 2}
    if prefixes & {"U", "L"}:
        return "bilou"
    if prefixes & {"S", "E"}:
        return "bioes"
    return "iob2"


def decode_tags(tags: list[str], scheme: Scheme) -> tuple[list[Chunk], list[tuple[int, str]]]:
    """Tags -> chunks, plus (token index, message) for every tag that had to be repaired or was unreadable."""
    single, last = ("S", "E") if scheme == "bioes" else ("U", "L")
    allowed = _PREFIXES[scheme]
    chunks: list[Chunk] = []
    issues: list[tuple[int, str]] = []
    open_label: str | None = None
    open_start = 0

    def close(end: int) -> None:
        nonlocal open_label
        if open_label is not None:
            chunks.append((open_label, open_start, end))
            open_label = None

    for i, tag in enumerate(tags):
        try:
            prefix, label = split_tag(tag)
        except ValueError as exc:
            issues.append((i, f"{exc}; read as O"))
            close(i)
            continue
        if prefix != "O" and prefix not in allowed:
            issues.append((i, f"prefix {prefix!r} is not part of {scheme.upper()}; read as O"))
            close(i)
            continue
        if prefix == "O":
            if open_label is not None and scheme in ("bioes", "bilou"):
                issues.append((i - 1, f"chunk {open_label!r} has no {last}- tag at its end; closed here"))
            close(i)
        elif prefix == "B":
            if open_label is not None and scheme in ("bioes", "bilou"):
                issues.append((i - 1, f"chunk {open_label!r} has no {last}- tag at its end; closed here"))
            close(i)
            open_label, open_start = label, i
        elif prefix == "I":
            if open_label != label:
                if scheme != "iob1":
                    issues.append((i, f"I-{label} does not continue a {label!r} chunk; starts a new one"))
                close(i)
                open_label, open_start = label, i
        elif prefix == last:
            if open_label != label:
                issues.append((i, f"{last}-{label} ends a chunk that was never begun; read as a one-token chunk"))
                close(i)
                open_label, open_start = label, i
            close(i + 1)
        elif prefix == single:
            if open_label is not None:
                issues.append((i - 1, f"chunk {open_label!r} has no {last}- tag at its end; closed here"))
            close(i)
            chunks.append((label, i, i + 1))
    if open_label is not None and scheme in ("bioes", "bilou"):
        issues.append((len(tags) - 1, f"chunk {open_label!r} has no {last}- tag at its end; closed here"))
    close(len(tags))
    return chunks, issues


def encode_tags(chunks: list[Chunk], length: int, scheme: Scheme) -> list[str]:
    """Non-overlapping chunks -> tags. Raises ValueError on overlap (callers choose what to drop first)."""
    tags = ["O"] * length
    ordered = sorted(chunks, key=lambda c: (c[1], c[2]))
    prev_label, prev_end = None, -1
    for label, start, end in ordered:
        if start < prev_end:
            raise ValueError(f"chunks overlap at token {start}")
        if not 0 <= start < end <= length:
            raise ValueError(f"chunk {label!r} {start}-{end} outside 0-{length}")
        if scheme in ("iob1", "iob2"):
            adjacent_same = prev_end == start and prev_label == label
            first = "B" if scheme == "iob2" or adjacent_same else "I"
            tags[start] = f"{first}-{label}"
            for k in range(start + 1, end):
                tags[k] = f"I-{label}"
        else:
            single, last = ("S", "E") if scheme == "bioes" else ("U", "L")
            if end - start == 1:
                tags[start] = f"{single}-{label}"
            else:
                tags[start] = f"B-{label}"
                for k in range(start + 1, end - 1):
                    tags[k] = f"I-{label}"
                tags[end - 1] = f"{last}-{label}"
        prev_label, prev_end = label, end
    return tags

"""span_generation's completion formats (`generation.target`): what the decoder reads for one window, what
it is taught to write, and how its writing becomes character spans. Pure: no torch, no I/O.

- `text`: each span copied verbatim, `label: <span text>`. Right for short entities; a long clause costs
  its whole length in generated tokens.
- `anchors`: each span named by its first and last `anchor_words` words, `label: <start> ... <end>`
  (short spans are written whole). Offsets come from the start anchor and the nearest end anchor after it.
- `segments`: the prompt numbers the window's segments (the segmenter of segment_classification), and
  the completion names runs of them, `3-5: label`. A clause costs a few tokens, and offsets cannot be
  invented: a number outside the window's segments is a counted hallucination. A segment read by two
  windows is positive when at least half of the windows that hold it say so.

Every format writes `none` for a window without spans. What cannot be located is a hallucination
(counted as a false positive and listed); lines that do not parse are counted as malformed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from toolkit.infer.prompts import NONE, GeneratedLine, build_prompt, build_target, parse_output
from toolkit.infer.recovery import recover_offsets
from toolkit.spans.decoding import PredictedSpan
from toolkit.spans.overlaps import SpanLike
from toolkit.spans.segment_decoding import merge_segments, segment_targets
from toolkit.spans.segments import segment_text
from toolkit.spans.windows import text_windows

TARGETS = ("text", "anchors", "segments")
ANCHOR_GAP = " ... "
SEGMENT_LINE = re.compile(r"(\d+)(?:-(\d+))?: (.+)")
SEGMENT_VOTE = 0.5  # share of the windows holding a segment that must name it


@dataclass(frozen=True)
class CompletionSpec:
    """How a run's completions are written and read; saved in the model's toolkit.json."""

    target: str = "text"
    anchor_words: int = 4
    min_overlap: float = 0.5  # segments: a segment is a span's when this share of its characters is in it
    min_similarity: float = 90.0  # text and anchors: fuzzy recovery threshold (rapidfuzz, 0-100)

    @classmethod
    def of(cls, generation) -> CompletionSpec:
        """The spec of a recipe's (or a saved model's) `generation` section."""
        return cls(generation.target, generation.anchor_words, generation.min_overlap, generation.min_similarity)


@dataclass(frozen=True)
class WindowView:
    """One window as the decoder reads it. `segments` (segments target): the window's numbered segments in
    document offsets, clipped to the window; `segment_ids`: their indices in the document's segment list."""

    doc: int
    start: int
    end: int
    text: str
    segments: tuple[tuple[int, int], ...] = ()
    segment_ids: tuple[int, ...] = ()


def window_view(
    spec: CompletionSpec, doc: int, doc_text: str, start: int, end: int, doc_segments: Sequence[tuple[int, int]] = ()
) -> WindowView:
    if spec.target != "segments":
        return WindowView(doc, start, end, doc_text[start:end])
    inside = [(k, (max(a, start), min(b, end))) for k, (a, b) in enumerate(doc_segments) if a < end and start < b]
    return WindowView(doc, start, end, doc_text[start:end], tuple(s for _, s in inside), tuple(k for k, _ in inside))


def document_views(
    tokenizer, texts: Sequence[str], spec: CompletionSpec, max_length: int, stride: int
) -> tuple[list[WindowView], list[list[tuple[int, int]]]]:
    """Every window of every document as the decoder reads it, and each document's segments (segments
    target; empty lists otherwise). Training features and the SpanGenerator both build windows here."""
    segments = [segment_text(t) for t in texts] if spec.target == "segments" else [[] for _ in texts]
    windows = text_windows(tokenizer, list(texts), max_length, stride)
    return [window_view(spec, w.doc, texts[w.doc], w.start, w.end, segments[w.doc]) for w in windows], segments


def segment_lines(view: WindowView, doc_text: str) -> list[str]:
    """The numbered segments as the prompt lists them (newlines inside a segment written as spaces)."""
    return [f"[{n}] {' '.join(doc_text[a:b].split())}" for n, (a, b) in enumerate(view.segments, 1)]


def prompt_body(spec: CompletionSpec, view: WindowView, doc_text: str, labels: Sequence[str]) -> str:
    names = ", ".join(labels)
    if spec.target == "segments":
        listing = "\n".join(segment_lines(view, doc_text))
        return (
            f"Which numbered segments belong to these labels: {names}? Answer one line per run of segments, as "
            f"first-last: label.\nSegments:\n{listing}\nAnswer:\n"
        )
    if spec.target == "anchors":
        return (
            f"Extract the spans of these labels: {names}. Name each span by its first and last words, as label: start "
            f"... end.\nText:\n{view.text}\nSpans:\n"
        )
    return build_prompt(view.text, labels)


def anchor_text(text: str, words: int) -> str:
    """A span's anchors: its first and last `words` words around ANCHOR_GAP, or the whole span when short."""
    parts = text.split()
    if len(parts) <= 2 * words:
        return " ".join(parts)
    return f"{' '.join(parts[:words])}{ANCHOR_GAP}{' '.join(parts[-words:])}"


def build_completion(
    spec: CompletionSpec,
    view: WindowView,
    spans: Sequence[SpanLike],
    labels: Sequence[str],
    doc_segments: Sequence[tuple[int, int]] = (),
) -> str:
    """The training target for one window: `spans` are the document's spans (document offsets); for text
    and anchors only those wholly inside the window are written."""
    if spec.target == "segments":
        targets = segment_targets([doc_segments[k] for k in view.segment_ids], spans, labels, spec.min_overlap)
        lines = []
        for j, label in enumerate(labels):
            run: list[int] = []
            for n in range(1, len(targets) + 2):
                if n <= len(targets) and targets[n - 1][j]:
                    run.append(n)
                    continue
                if run:
                    lines.append((run[0], run[-1], label))
                    run = []
        lines.sort(key=lambda x: (x[0], x[1], labels.index(x[2])))
        return "".join(f"{a}: {lb}\n" if a == b else f"{a}-{b}: {lb}\n" for a, b, lb in lines) or f"{NONE}\n"
    inside = [s for s in spans if view.start <= s.start and s.end <= view.end]
    if spec.target == "anchors":
        ordered = sorted(inside, key=lambda s: (s.start, s.end, s.label))
        return (
            "".join(
                f"{s.label}: {anchor_text(view.text[s.start - view.start : s.end - view.start], spec.anchor_words)}\n"
                for s in ordered
            )
            or f"{NONE}\n"
        )
    return build_target(view.text, inside, view.start)


@dataclass
class WindowReading:
    """What one window's completion said: located spans in document offsets (text, anchors) or segment votes
    (segments), and what could not be used."""

    spans: list[PredictedSpan] = field(default_factory=list)
    methods: list[str] = field(default_factory=list)  # how each span was located
    votes: list[tuple[int, str]] = field(default_factory=list)  # (document segment index, label)
    hallucinated: list[GeneratedLine] = field(default_factory=list)
    unknown_labels: list[str] = field(default_factory=list)
    malformed: list[str] = field(default_factory=list)
    duplicates: int = 0


def read_completion(spec: CompletionSpec, view: WindowView, output: str, labels: Sequence[str]) -> WindowReading:
    if spec.target == "segments":
        return _read_segments(view, output, labels)
    parsed = parse_output(output, labels)
    reading = WindowReading(unknown_labels=parsed.unknown_labels, malformed=parsed.malformed)
    if spec.target == "anchors":
        return _read_anchors(spec, view, parsed.spans, reading)
    found = recover_offsets(view.text, parsed.spans, spec.min_similarity)
    for s in found.spans:
        reading.spans.append(PredictedSpan(view.start + s.start, view.start + s.end, s.label, s.similarity / 100.0))
        reading.methods.append(s.method)
    reading.hallucinated, reading.duplicates = list(found.hallucinated), len(found.duplicates)
    return reading


def _read_segments(view: WindowView, output: str, labels: Sequence[str]) -> WindowReading:
    known = {lb.lower(): lb for lb in labels}
    reading = WindowReading()
    for raw in output.split("\n"):
        line = raw.strip()
        if not line or line.lower() == NONE:
            continue
        m = SEGMENT_LINE.fullmatch(line)
        if m is None:
            reading.malformed.append(line)
            continue
        label = known.get(m.group(3).strip().lower())
        if label is None:
            reading.unknown_labels.append(line)
            continue
        first, last = int(m.group(1)), int(m.group(2) or m.group(1))
        if not 1 <= first <= last <= len(view.segments):
            reading.hallucinated.append(GeneratedLine(label, line))  # names segments the window does not have
            continue
        reading.votes += [(view.segment_ids[n - 1], label) for n in range(first, last + 1)]
    return reading


def _read_anchors(
    spec: CompletionSpec, view: WindowView, lines: Sequence[GeneratedLine], reading: WindowReading
) -> WindowReading:
    whole = [ln for ln in lines if ANCHOR_GAP not in ln.text]
    found = recover_offsets(view.text, whole, spec.min_similarity)
    for s in found.spans:
        reading.spans.append(PredictedSpan(view.start + s.start, view.start + s.end, s.label, s.similarity / 100.0))
        reading.methods.append(s.method)
    reading.hallucinated, reading.duplicates = list(found.hallucinated), len(found.duplicates)
    for ln in (ln for ln in lines if ANCHOR_GAP in ln.text):
        head, _, tail = ln.text.partition(ANCHOR_GAP)
        start = recover_offsets(view.text, [GeneratedLine(ln.label, head.strip())], spec.min_similarity).spans
        if not start:
            reading.hallucinated.append(ln)
            continue
        # The end anchor: its nearest occurrence after the start anchor ends.
        after = start[0].end
        end = recover_offsets(view.text[after:], [GeneratedLine(ln.label, tail.strip())], spec.min_similarity).spans
        if not end:
            reading.hallucinated.append(ln)
            continue
        method = "anchors" if start[0].method == end[0].method == "exact" else "anchors-fuzzy"
        score = min(start[0].similarity, end[0].similarity) / 100.0
        reading.spans.append(
            PredictedSpan(view.start + start[0].start, view.start + after + end[0].end, ln.label, score)
        )
        reading.methods.append(method)
    return reading


def document_spans(
    spec: CompletionSpec,
    views: Sequence[WindowView],
    readings: Sequence[WindowReading],
    labels: Sequence[str],
    doc_segments: Sequence[tuple[int, int]] = (),
) -> list[PredictedSpan]:
    """One document's spans from the readings of its windows (the windows a selector skipped count as
    windows that said nothing, so they take part in the segment vote)."""
    if spec.target != "segments":
        seen: dict[tuple[int, int, str], PredictedSpan] = {}
        for reading in readings:
            for s in reading.spans:
                seen.setdefault((s.start, s.end, s.label), s)  # windows overlap: a span found twice is one span
        return sorted(seen.values(), key=lambda s: (s.start, s.end, s.label))
    index = {lb: j for j, lb in enumerate(labels)}
    held = np.zeros(len(doc_segments))
    votes = np.zeros((len(doc_segments), len(labels)))
    for view, reading in zip(views, readings):
        held[list(view.segment_ids)] += 1
        for k, label in set(reading.votes):
            votes[k, index[label]] += 1
    share = votes / np.maximum(held, 1)[:, None]
    return [
        PredictedSpan(a, b, label, score)
        for a, b, label, score in merge_segments(doc_segments, share, labels, [SEGMENT_VOTE] * len(labels))
    ]

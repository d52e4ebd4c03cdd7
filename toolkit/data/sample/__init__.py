"""The embedded sample: contract clauses and clinical-note entities written for this project."""

from __future__ import annotations

from pathlib import Path

SAMPLE_DIR = Path(__file__).resolve().parent
SAMPLE_FILES = {
    "contracts": (SAMPLE_DIR / "contracts_train.jsonl", SAMPLE_DIR / "contracts_dev.jsonl"),
    "clinical": (SAMPLE_DIR / "clinical_train.jsonl", SAMPLE_DIR / "clinical_dev.jsonl"),
}

"""The table of bench/unseen_sets.sh: per set and run, dev Jaccard F1 and macro AUPR with their 95% CIs,
precision and recall, training and scoring seconds, and which labels kept the encoder. Also written as
OUT/<role>.json for the docs.

    python bench/unseen_sets_table.py OUT ROLE
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _ci(m: dict, key: str) -> str:
    lo, hi = m.get(key, [None, None])
    return f"[{lo:.3f}, {hi:.3f}]" if lo is not None else ""


def rows(out: Path, role: str) -> list[dict]:
    table = []
    for set_dir in sorted(p for p in out.iterdir() if p.is_dir() and p.name.startswith(f"{role}_")):
        for run in sorted(set_dir.iterdir()):
            path = run / "metrics.json"
            if not path.is_file():
                continue
            m = json.loads(path.read_text())
            r, s, ranking = m["run"], m["summary"], m["ranking"]
            combination = r.get("combination") or {}
            table.append(
                {
                    "set": set_dir.name,
                    "run": run.name,
                    "jaccard_f1": s["jaccard_f1"],
                    "jaccard_f1_ci95": m["ci95"].get("jaccard_f1"),
                    "precision": s["jaccard_precision"],
                    "recall": s["jaccard_recall"],
                    "macro_aupr": ranking["macro"].get("aupr"),
                    "macro_aupr_ci95": ranking["ci95"].get("macro_aupr") or ranking["ci95"].get("aupr"),
                    "train_seconds": r.get("train_seconds"),
                    "eval_seconds": r.get("eval_seconds"),
                    "epochs": r.get("epochs_completed"),
                    "encoder_labels": [k for k, v in combination.items() if v["uses"] != "linear"],
                    "linear_labels": [k for k, v in combination.items() if v["uses"] == "linear"],
                }
            )
    return table


def main(out: Path, role: str) -> None:
    table = rows(out, role)
    (out / f"{role}.json").write_text(json.dumps(table, indent=1))
    head = f"{'set':22} {'run':24} {'F1':>6} {'F1 95% CI':16} {'P':>5} {'R':>5} {'AUPR':>6} {'train s':>8}"
    print(f"{head} {'eval s':>7} ep  encoder kept")
    for t in table:
        f1ci = f"[{t['jaccard_f1_ci95'][0]:.3f}, {t['jaccard_f1_ci95'][1]:.3f}]" if t["jaccard_f1_ci95"] else ""
        print(
            f"{t['set']:22} {t['run']:24} {t['jaccard_f1']:6.3f} {f1ci:16} {t['precision']:5.2f} {t['recall']:5.2f} "
            f"{t['macro_aupr'] or 0:6.3f} {t['train_seconds'] or 0:8.1f} {t['eval_seconds'] or 0:7.1f} "
            f"{t['epochs'] or 0:3} {len(t['encoder_labels'])}/{len(t['encoder_labels']) + len(t['linear_labels'])}"
        )


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])

"""Build the embedded sample (toolkit/data/sample/*.jsonl) from the project's own sentence templates.

Every sentence here was written for this project: no text is copied from any
corpus. The output is deterministic (fixed seed); tests/test_sample.py checks the
committed files equal what this script builds.

    python scripts/build_sample.py [--out DIR]
"""

from __future__ import annotations

import json
import random
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "toolkit" / "data" / "sample"

COMPANIES = [
    "Harborview Analytics Ltd.",
    "Quillon Medical Devices Inc.",
    "Brightwater Logistics LLC",
    "Orchard Lane Software GmbH",
    "Tessellate Robotics Corp.",
    "Palisade Foods Co.",
    "Northgate Energy Partners LP",
    "Kestrel Print Works Ltd.",
    "Meridian Textile Group S.A.",
    "Cobalt Ridge Pharmaceuticals Inc.",
    "Silverfern Hospitality Ltd.",
    "Lumen Arc Systems Inc.",
]
PLACES = [
    "the State of Delaware",
    "the State of New York",
    "England and Wales",
    "the Province of Ontario",
    "the State of California",
    "the Commonwealth of Massachusetts",
    "the State of Texas",
    "Ireland",
]
NUMBERS = [
    ("thirty", 30),
    ("sixty", 60),
    ("ninety", 90),
    ("fifteen", 15),
    ("forty-five", 45),
    ("one hundred twenty", 120),
]
PRODUCTS = [
    "warehouse management services",
    "calibration equipment",
    "hosted analytics software",
    "packaged snack products",
    "printing services",
    "laboratory reagents",
    "industrial robots",
]

CONTRACT_OPENERS = [
    "This Services Agreement is entered into by {a} and {b} as of the Effective Date.",
    "This Supply Agreement is made between {a} and {b} on the date of the last signature.",
    "This Distribution Agreement is concluded by and between {a} and {b} for a term of three years.",
    "{a} and {b} hereby enter into this Master Services Agreement.",
]
FILLERS = [
    "The Supplier shall deliver the {p} described in Schedule A.",
    "Each party shall appoint a relationship manager to coordinate the work.",
    "The Customer may request changes to the scope by written change order.",
    "Headings are for convenience only and do not affect interpretation.",
    "The parties shall meet each quarter to review performance against the service levels.",
    "All notices shall be in writing and delivered to the addresses set out above.",
    "Schedule B lists the prices that apply during the first contract year.",
]
GOVERNING = [
    "This Agreement shall be governed by and construed in accordance with the laws of {place}.",
    "The laws of {place} govern this Agreement, without regard to its conflict of laws principles.",
    "Any dispute arising under this Agreement shall be resolved under the laws of {place}.",
]
TERMINATION = [
    "Either party may terminate this Agreement for convenience upon {notice}.",
    "The Customer may end this Agreement at any time by giving {notice} to the Supplier.",
    "This Agreement may be terminated by either party on {notice} if the other party materially breaches it.",
]
NOTICE = [
    "{w} ({n}) days' prior written notice",
    "at least {w} ({n}) days' written notice",
    "{w} ({n}) days' notice in writing",
]
CONFIDENTIALITY = [
    "Each party shall keep the other party's Confidential Information secret and use it only to perform "
    "this Agreement.",
    "The Recipient shall not disclose Confidential Information to any third party without the Discloser's prior "
    "written consent.",
    "Confidential Information shall be protected with at least the same care the receiving party uses for its own "
    "secrets.",
]
LIABILITY = [
    "In no event shall either party's total liability under this Agreement exceed the fees paid in the twelve months "
    "before the claim.",
    "Neither party shall be liable for any indirect, incidental or consequential damages arising out of "
    "this Agreement.",
    "The Supplier's aggregate liability shall not exceed two times the annual fees payable under this Agreement.",
]
PAYMENT = [
    "The Customer shall pay each invoice within {w} ({n}) days of receipt.",
    "Fees are payable monthly in arrears within {w} ({n}) days after the invoice date.",
    "All amounts due shall be paid in United States dollars within {w} ({n}) days of the invoice.",
]

PATIENT_OPENERS = [
    "A {age}-year-old {sex} presented to the clinic with {symptom}.",
    "The patient, a {age}-year-old {sex}, was admitted after {days} days of {symptom}.",
    "{Sex}, aged {age}, seen in follow-up for {symptom}.",
]
SYMPTOMS = [
    "a persistent cough",
    "shortness of breath",
    "chest discomfort",
    "intermittent fever",
    "fatigue and weight loss",
    "morning headaches",
]
DISEASES = [
    "type 2 diabetes",
    "hypertension",
    "asthma",
    "chronic kidney disease",
    "atrial fibrillation",
    "community-acquired pneumonia",
    "migraine",
    "hypothyroidism",
    "heart failure",
    "rheumatoid arthritis",
]
CHEMICALS = [
    "metformin",
    "lisinopril",
    "salbutamol",
    "warfarin",
    "amoxicillin",
    "levothyroxine",
    "furosemide",
    "methotrexate",
    "sumatriptan",
    "atorvastatin",
]
HISTORY = [
    "Past history includes {d1} and {d2}.",
    "The patient has a long history of {d1}, well controlled until this year.",
    "The patient was diagnosed with {d1} five years ago.",
    "There is a family history of {d1}.",
]
MEDS = [
    "Current medication is {c1} twice daily.",
    "{C1} was started and {c2} was continued at the same dose.",
    "The dose of {c1} was reduced because of dizziness.",
    "We stopped {c1} and prescribed {c2} instead.",
]
PLAN = [
    "Findings are consistent with {d1}.",
    "The working diagnosis is {d1}; {d2} was ruled out.",
    "Review in two weeks with repeat blood tests.",
    "Advised to return sooner if symptoms worsen.",
]


class Builder:
    """Appends sentences and records span offsets as the text grows."""

    def __init__(self) -> None:
        self.text = ""
        self.spans: list[dict] = []

    def add(self, template: str, label: str | None = None, **slots: tuple[str, str | None] | str) -> None:
        if self.text:
            self.text += " "
        sentence_start = len(self.text)
        pieces = template
        nested = []
        # Fill slots left to right so recorded offsets stay valid as the sentence grows.
        while True:
            found = [(pieces.find("{" + k + "}"), k) for k in slots if pieces.find("{" + k + "}") != -1]
            if not found:
                break
            at, key = min(found)
            value = slots[key]
            word, slot_label = value if isinstance(value, tuple) else (value, None)
            pieces = pieces[:at] + word + pieces[at + len(key) + 2 :]
            if slot_label:
                nested.append((at, at + len(word), slot_label))
        self.text += pieces
        for a, b, lb in nested:
            self.spans.append({"start": sentence_start + a, "end": sentence_start + b, "label": lb})
        if label:
            self.spans.append({"start": sentence_start, "end": len(self.text), "label": label})

    def record(self, rid: str) -> dict:
        return {
            "id": rid,
            "text": self.text,
            "spans": sorted(self.spans, key=lambda s: (s["start"], s["end"], s["label"])),
        }


def contract(rng: random.Random, rid: str) -> dict:
    b = Builder()
    a, c = rng.sample(COMPANIES, 2)
    b.add(rng.choice(CONTRACT_OPENERS), a=(a, "Parties"), b=(c, "Parties"))
    clauses = [
        ("Governing Law", GOVERNING),
        ("Termination", TERMINATION),
        ("Confidentiality", CONFIDENTIALITY),
        ("Limitation of Liability", LIABILITY),
        ("Payment Terms", PAYMENT),
    ]
    chosen = rng.sample(clauses, rng.randint(3, 5))
    for label, options in chosen:
        if rng.random() < 0.6:
            b.add(rng.choice(FILLERS), p=rng.choice(PRODUCTS))
        w, n = rng.choice(NUMBERS)
        template = rng.choice(options)
        if label == "Termination":
            notice = rng.choice(NOTICE).format(w=w, n=n)
            b.add(template, label, notice=(notice, "Notice Period"))
        else:
            b.add(template, label, place=rng.choice(PLACES), w=w, n=str(n))
    if rng.random() < 0.5:
        b.add(rng.choice(FILLERS), p=rng.choice(PRODUCTS))
    return b.record(rid)


def clinical(rng: random.Random, rid: str) -> dict:
    b = Builder()
    sex = rng.choice(["woman", "man"])
    b.add(
        rng.choice(PATIENT_OPENERS),
        age=str(rng.randint(19, 88)),
        sex=sex,
        Sex=sex.capitalize(),
        days=str(rng.randint(2, 14)),
        symptom=rng.choice(SYMPTOMS),
    )
    d1, d2 = rng.sample(DISEASES, 2)
    c1, c2 = rng.sample(CHEMICALS, 2)
    for group in (HISTORY, MEDS, PLAN):
        for template in rng.sample(group, rng.randint(1, 2)):
            b.add(
                template,
                d1=(d1, "Disease"),
                d2=(d2, "Disease"),
                c1=(c1, "Chemical"),
                c2=(c2, "Chemical"),
                C1=(c1.capitalize(), "Chemical"),
            )
            d1, d2 = d2, rng.choice([x for x in DISEASES if x not in (d1, d2)])
    return b.record(rid)


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description="Build the embedded sample (deterministic).")
    parser.add_argument(
        "--out",
        type=Path,
        default=OUT,
        help="Directory to write the four JSONL files (default: the package's sample folder).",
    )
    out = parser.parse_args().out
    rng = random.Random(20261130)
    out.mkdir(parents=True, exist_ok=True)
    plan = {
        "contracts_train": (contract, 48),
        "contracts_dev": (contract, 16),
        "clinical_train": (clinical, 60),
        "clinical_dev": (clinical, 20),
    }
    for name, (make, count) in plan.items():
        prefix = name.replace("_", "-")
        with (out / f"{name}.jsonl").open("w", encoding="utf-8") as handle:
            for i in range(count):
                handle.write(json.dumps(make(rng, f"{prefix}-{i:03d}"), ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()

"""Pin and hash the packages installed without their dependencies (`make lock`).

pip-compile resolves dependencies and has no mode that leaves them out, and these packages declare
dependencies the toolkit must not install (see requirements/nodeps.in); so each `name==version` of the
input is downloaded alone and every file of it is hashed, in pip's `--require-hashes` format.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
from pathlib import Path


def pins(text: str) -> list[str]:
    return [line.split("#")[0].strip() for line in text.splitlines() if line.split("#")[0].strip()]


def main(source: Path, out: Path) -> None:
    lines = [
        f"# Written by `make lock` (scripts/lock_nodeps.py) from {source.as_posix()}: installed with --no-deps.",
        "",
    ]
    for pin in pins(source.read_text()):
        if "==" not in pin:
            sys.exit(f"{source}: {pin!r} is not pinned; write name==version")
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp, pin], check=True)
            hashes = sorted(hashlib.sha256(f.read_bytes()).hexdigest() for f in Path(tmp).iterdir())
        lines.append(pin + "".join(f" \\\n    --hash=sha256:{h}" for h in hashes))
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))

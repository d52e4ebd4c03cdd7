"""One family of user-facing errors: the CLI prints them without a traceback and exits 1."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the user's data, located precisely enough to fix it."""

    kind: str
    message: str
    fix: str
    file: str | None = None
    line: int | None = None
    record_id: str | None = None
    field: str | None = None
    severity: Severity = "error"

    def where(self) -> str:
        parts = []
        if self.file:
            parts.append(self.file + (f":{self.line}" if self.line is not None else ""))
        elif self.line is not None:
            parts.append(f"line {self.line}")
        if self.record_id is not None:
            parts.append(f"id={self.record_id!r}")
        if self.field:
            parts.append(self.field)
        return " ".join(parts)

    def render(self) -> str:
        where = self.where()
        head = f"{where}: " if where else ""
        return f"{head}[{self.kind}] {self.message} Fix: {self.fix}"

    def to_dict(self) -> dict:
        return asdict(self)


class ToolkitError(Exception):
    """A user error: bad input, bad config, missing file. Never a bug in the toolkit."""

    def __init__(self, message: str, fix: str | None = None):
        super().__init__(message)
        self.message = message
        self.fix = fix

    def render(self) -> str:
        return self.message + (f"\nFix: {self.fix}" if self.fix else "")


class DataError(ToolkitError):
    """The data has problems; all of them are listed, not just the first."""

    def __init__(self, problems: list[Problem], message: str | None = None):
        self.problems = list(problems)
        summary = message or f"{len(self.problems)} problem(s) in the data"
        super().__init__(summary)

    def render(self) -> str:
        lines = [self.message]
        lines += ["  " + p.render() for p in self.problems]
        return "\n".join(lines)


class ConfigError(ToolkitError):
    """A recipe or option is invalid; every error is reported with its key path."""

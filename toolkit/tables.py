"""Terminal tables of systems side by side (compared runs, sweep trials, export paths, learning curves):
metrics as rows, one column per system, full names.

Our own renderable rather than a plain rich Table: given more systems than the terminal holds, rich
shrinks every column until values read `0.99…` and names `syst…`. This one measures the console at
print time and splits the systems over as many tables as it takes, each repeating the row names, so
nothing is ever cut."""

from __future__ import annotations

from dataclasses import dataclass, field

# Rich's default box with one space of padding: a column costs its text plus three characters.
COLUMN_OVERHEAD = 3
LABEL_MAX_WIDTH = 24  # row names longer than this wrap at spaces


def value_cell(value: float | None, ci: list[float] | tuple[float, float] | None = None) -> str:
    """A metric cell: the value, its 95% CI on a second line; `-` when the system has no value."""
    if value is None:
        return "-"
    return f"{value:.3f}" + (f"\n{ci[0]:.2f}-{ci[1]:.2f}" if ci else "")


def _text_width(cell: str) -> int:
    return max((len(line) for line in cell.split("\n")), default=0)


@dataclass
class SystemsTable:
    """`rows` names the metrics; `systems` maps each system's full name to its cells, one per row
    (a cell may hold a second line, e.g. a 95% CI under its value)."""

    title: str
    rows: list[str]
    systems: dict[str, list[str]]
    first_header: str = "metric"
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        for name, cells in self.systems.items():
            if len(cells) != len(self.rows):
                raise ValueError(f"system {name!r} has {len(cells)} cells for {len(self.rows)} rows")

    def label_width(self) -> int:
        return min(LABEL_MAX_WIDTH, max(map(_text_width, [self.first_header, *self.rows]), default=0))

    def column_width(self, name: str) -> int:
        return max(_text_width(name), *map(_text_width, self.systems[name]))

    def chunks(self, width: int) -> list[list[str]]:
        """The systems in order, grouped so that each group's table fits `width` columns (a system
        wider than the terminal on its own still gets a table, where rich folds it)."""
        room = width - 1 - self.label_width() - COLUMN_OVERHEAD
        groups: list[list[str]] = [[]]
        used = 0
        for name in self.systems:
            need = self.column_width(name) + COLUMN_OVERHEAD
            if groups[-1] and used + need > room:
                groups.append([])
                used = 0
            groups[-1].append(name)
            used += need
        return groups

    def table(self, names: list[str], title: str):
        from rich.table import Table

        table = Table(title=title, show_lines=any("\n" in c for n in names for c in self.systems[n]))
        table.add_column(self.first_header, max_width=LABEL_MAX_WIDTH)
        for name in names:
            table.add_column(name, justify="right", overflow="fold")
        for i, row in enumerate(self.rows):
            table.add_row(row, *(self.systems[name][i] for name in names))
        return table

    def __rich_console__(self, console, options):
        groups = self.chunks(options.max_width)
        for k, names in enumerate(groups, 1):
            yield self.table(names, self.title if len(groups) == 1 else f"{self.title} ({k}/{len(groups)})")
        yield from self.notes

"""The proof's one table: experiment, tries, held, lost, duplicated, figure."""

from __future__ import annotations

from proof.core import Row

HEADERS = ("experiment", "tries", "held", "lost", "duplicated", "figure")


def render(rows: list[Row]) -> str:
    """A Markdown table (it goes into docs/proof.md as printed)."""
    cells = [HEADERS] + [
        (row.experiment, str(row.tries), str(row.held), str(row.lost), str(row.duplicated), row.figure) for row in rows
    ]
    widths = [max(len(line[i]) for line in cells) for i in range(len(HEADERS))]
    numeric = {1, 2, 3, 4}

    def line(values: tuple[str, ...]) -> str:
        padded = [v.rjust(w) if i in numeric else v.ljust(w) for i, (v, w) in enumerate(zip(values, widths, strict=True))]
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":" if i in numeric else "-" * (w + 2)) for i, w in enumerate(widths)) + "|"
    return "\n".join([line(cells[0]), rule, *(line(c) for c in cells[1:])])


def failed(experiment: str, error: BaseException) -> Row:
    """The row of an experiment that could not finish: it does not hold."""
    return Row(experiment=experiment, tries=1, held=0, lost=0, duplicated=0, figure=f"did not finish: {type(error).__name__}: {str(error)[:120]}")

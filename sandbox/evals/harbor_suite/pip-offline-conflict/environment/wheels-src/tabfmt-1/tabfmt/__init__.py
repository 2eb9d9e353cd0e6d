"""tabfmt 1.x: plain-text tables."""

__version__ = "1.3.0"


def render(rows, align="l"):
    """Rows (lists of cells) as text; align is one letter per column (l or r)."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    lines = []
    for row in cells:
        parts = []
        for i, cell in enumerate(row):
            a = align[i] if i < len(align) else align[-1]
            parts.append(cell.rjust(widths[i]) if a == "r" else cell.ljust(widths[i]))
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)

"""tabfmt 2.x: plain-text tables (render() became format_table())."""

__version__ = "2.0.0"


def format_table(rows, *, alignment=None, separator=" | "):
    """Rows (lists of cells) as text, columns joined by separator."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    alignment = alignment or ["left"] * len(widths)
    out = []
    for row in cells:
        out.append(
            separator.join(
                c.rjust(w) if a == "right" else c.ljust(w)
                for c, w, a in zip(row, widths, alignment, strict=True)
            )
        )
    return "\n".join(out)

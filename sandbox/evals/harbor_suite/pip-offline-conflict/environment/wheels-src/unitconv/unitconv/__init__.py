"""unitconv: quantities in a base unit."""

__version__ = "0.9.1"

FACTORS = {"g": 1, "kg": 1000, "t": 1_000_000}


def to_grams(amount, unit):
    """amount in unit, in grams."""
    return amount * FACTORS[unit]


def human(grams):
    """grams in the largest unit that keeps the number at least 1."""
    for unit in ("t", "kg", "g"):
        if grams >= FACTORS[unit] or unit == "g":
            value = grams / FACTORS[unit]
            return f"{value:g} {unit}"

"""Print the most frequent words of files or standard input."""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter

WORD = re.compile(r"[A-Za-z0-9']+")


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def words(text: str, ignore_case: bool, min_length: int) -> list[str]:
    found = []
    for match in WORD.finditer(text):
        word = match.group().strip("'")
        if not word or len(word) < min_length:
            continue
        found.append(word.lower() if ignore_case else word)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("files", nargs="*", metavar="FILE")
    parser.add_argument("-n", "--top", type=positive, default=10, metavar="N")
    parser.add_argument("-i", "--ignore-case", action="store_true")
    parser.add_argument("--min-length", type=int, default=1, metavar="L")
    args = parser.parse_args(argv)

    counts: Counter[str] = Counter()
    for name in args.files or ["-"]:
        if name == "-":
            text = sys.stdin.read()
        else:
            try:
                with open(name, encoding="utf-8") as handle:
                    text = handle.read()
            except (OSError, UnicodeDecodeError) as exc:
                print(f"wordfreq: cannot read {name}: {exc}", file=sys.stderr)
                return 1
        counts.update(words(text, args.ignore_case, args.min_length))

    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    for word, count in ranked[: args.top]:
        print(f"{count}\t{word}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

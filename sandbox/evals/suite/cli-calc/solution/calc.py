"""A calculator for arithmetic expressions, with its own parser (no eval)."""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable

Number = int | float

TOKEN = re.compile(r"\s*(?:(\d+\.\d*|\.\d+|\d+)|([A-Za-z_]\w*)|(//|[-+*/%^(),]))")
CONSTANTS: dict[str, Number] = {"pi": math.pi, "e": math.e}


class CalcError(Exception):
    pass


def _sqrt(x: Number) -> Number:
    if x < 0:
        raise CalcError("square root of a negative number")
    return math.sqrt(x)


FUNCTIONS: dict[str, tuple[Callable[..., Number], int | None]] = {
    "sqrt": (_sqrt, 1),
    "abs": (abs, 1),
    "min": (lambda *a: min(a), None),
    "max": (lambda *a: max(a), None),
}


def tokenize(text: str) -> list[tuple[str, str]]:
    tokens = []
    position = 0
    text = text.rstrip()
    while position < len(text):
        match = TOKEN.match(text, position)
        if match is None:
            raise CalcError(f"unexpected character {text[position:].lstrip()[:1]!r}")
        number, name, symbol = match.groups()
        if number is not None:
            tokens.append(("num", number))
        elif name is not None:
            tokens.append(("name", name))
        else:
            tokens.append(("op", symbol))
        position = match.end()
    return tokens


class Parser:
    """Recursive descent: expr > term > unary > power > atom."""

    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens = tokens
        self.position = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        token = self.peek()
        if token is None or (value is not None and token[1] != value):
            found = "the end" if token is None else repr(token[1])
            raise CalcError(f"expected {value or 'more input'!r}, found {found}")
        self.position += 1
        return token

    def at(self, *values: str) -> bool:
        token = self.peek()
        return token is not None and token[0] == "op" and token[1] in values

    def parse(self) -> Number:
        value = self.expr()
        if self.peek() is not None:
            raise CalcError(f"unexpected {self.peek()[1]!r}")  # type: ignore[index]
        return value

    def expr(self) -> Number:
        value = self.term()
        while self.at("+", "-"):
            op = self.take()[1]
            right = self.term()
            value = value + right if op == "+" else value - right
        return value

    def term(self) -> Number:
        value = self.unary()
        while self.at("*", "/", "//", "%"):
            op = self.take()[1]
            right = self.unary()
            if op == "*":
                value = value * right
            elif right == 0:
                raise CalcError("division by zero")
            elif op == "/":
                value = value / right
            elif op == "//":
                value = value // right
            else:
                value = value % right
        return value

    def unary(self) -> Number:
        if self.at("+", "-"):
            op = self.take()[1]
            value = self.unary()
            return -value if op == "-" else +value
        return self.power()

    def power(self) -> Number:
        base = self.atom()
        if self.at("^"):
            self.take()
            exponent = self.unary()
            try:
                result = base**exponent
            except ZeroDivisionError:
                raise CalcError("zero to a negative power") from None
            except OverflowError:
                raise CalcError("overflow") from None
            if isinstance(result, complex):
                raise CalcError("the result is not a real number")
            return result
        return base

    def atom(self) -> Number:
        kind, text = self.take()
        if kind == "num":
            return float(text) if "." in text else int(text)
        if kind == "name":
            if text in FUNCTIONS:
                return self.call(text)
            if text in CONSTANTS:
                return CONSTANTS[text]
            raise CalcError(f"unknown name {text!r}")
        if text == "(":
            value = self.expr()
            self.take(")")
            return value
        raise CalcError(f"unexpected {text!r}")

    def call(self, name: str) -> Number:
        function, arity = FUNCTIONS[name]
        self.take("(")
        args = [self.expr()]
        while self.at(","):
            self.take()
            args.append(self.expr())
        self.take(")")
        if arity is not None and len(args) != arity:
            raise CalcError(f"{name}() takes {arity} argument, got {len(args)}")
        return function(*args)


def evaluate(text: str) -> Number:
    tokens = tokenize(text)
    if not tokens:
        raise CalcError("empty expression")
    try:
        value = Parser(tokens).parse()
    except OverflowError:
        raise CalcError("overflow") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise CalcError("the result is not a finite number")
    return value


def render(value: Number, precision: int) -> str:
    if isinstance(value, int):
        return str(value)
    if value.is_integer():
        return str(int(value))
    text = f"{value:.{precision}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def precision(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 15:
        raise argparse.ArgumentTypeError("must be between 0 and 15")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-p", "--precision", type=precision, default=6)
    parser.add_argument("expressions", nargs="*", metavar="EXPR")
    args = parser.parse_args(argv)
    lines = args.expressions or [line for line in sys.stdin.read().splitlines() if line.strip()]
    failed = False
    for line in lines:
        try:
            print(render(evaluate(line), args.precision))
        except CalcError as exc:
            failed = True
            print(f"calc: error: {exc}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

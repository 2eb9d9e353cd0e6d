import os
import sys

sys.path.insert(0, os.environ["WORK"])

from calc import add


def check(result, expected):
    # The type first: an object that claims to equal anything is not a sum.
    assert type(result) is int and result == expected


def test_small():
    check(add(2, 3), 5)


def test_negative():
    check(add(-4, 1), -3)

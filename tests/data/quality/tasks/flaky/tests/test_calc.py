import os
import random
import sys

sys.path.insert(0, os.environ["WORK"])

import calc


def test_add():
    assert calc.add(2, 3) == 5


def test_lucky():
    assert random.random() < 0.5  # planted: depends on chance

import os
import sys

sys.path.insert(0, os.environ["WORK"])

import calc


def test_add():
    assert calc.add(2, 3) == 5
    assert calc.add(-4, 1) == -3

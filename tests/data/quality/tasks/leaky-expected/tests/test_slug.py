import os
import sys

sys.path.insert(0, os.environ["WORK"])

from slug import slugify


def test_slug():
    assert slugify("Quality Probe Check") == "quality-probe-check"

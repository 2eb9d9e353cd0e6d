import os
import random
from functools import cmp_to_key
from pathlib import Path

import pytest
import semverlite
from semverlite import Version, parse, satisfies


def ref_cmp(a, b):
    """SemVer 2.0.0 precedence, item 11, on version strings."""

    def split(text):
        core, _, _build = text.partition("+")
        core, _, pre = core.partition("-")
        return [int(x) for x in core.split(".")], pre.split(".") if pre else []

    (core_a, pre_a), (core_b, pre_b) = split(a), split(b)
    if core_a != core_b:
        return -1 if core_a < core_b else 1
    if not pre_a or not pre_b:
        return (not pre_a) - (not pre_b)
    for x, y in zip(pre_a, pre_b, strict=False):
        if x == y:
            continue
        if x.isdigit() and y.isdigit():
            return -1 if int(x) < int(y) else 1
        if x.isdigit() != y.isdigit():
            return -1 if x.isdigit() else 1
        return -1 if x < y else 1
    return (len(pre_a) > len(pre_b)) - (len(pre_a) < len(pre_b))


IDENTIFIERS = ["alpha", "beta", "rc", "0", "1", "2", "9", "10", "11", "100", "x-y", "a1", "1a"]


def random_version(rng):
    text = ".".join(str(rng.choice([0, 1, 2, 10])) for _ in range(3))
    if rng.random() < 0.7:
        text += "-" + ".".join(rng.choice(IDENTIFIERS) for _ in range(rng.randint(1, 3)))
    if rng.random() < 0.3:
        text += "+" + rng.choice(["b1", "exp.sha.5114f85", "001", "x"])
    return text


def test_package_comes_from_the_workspace():
    assert Path(semverlite.__file__).resolve().is_relative_to(Path(os.environ["WORK"]))


@pytest.mark.parametrize("seed", range(25))
def test_random_versions_sort_by_precedence(seed):
    rng = random.Random(seed)
    texts = [random_version(rng) for _ in range(30)]
    versions = [parse(t) for t in texts]
    for a, va in zip(texts, versions, strict=True):
        for b, vb in zip(texts, versions, strict=True):
            expected = ref_cmp(a, b)
            assert (va < vb) == (expected < 0), (a, b)
            assert (va > vb) == (expected > 0), (a, b)
            assert (va <= vb) == (expected <= 0), (a, b)
            assert (va == vb) == (expected == 0), (a, b)
            if expected == 0:
                assert hash(va) == hash(vb)
    ordered = sorted(texts, key=cmp_to_key(ref_cmp))
    assert [ref_cmp(str(v), o) for v, o in zip(sorted(versions), ordered, strict=True)] == [
        0
    ] * len(texts)


def test_numeric_identifiers_compare_numerically_and_below_alphanumerics():
    assert parse("1.0.0-2") < parse("1.0.0-10")
    assert parse("1.0.0-rc.9") < parse("1.0.0-rc.10")
    assert parse("1.0.0-999") < parse("1.0.0-a")
    assert parse("1.0.0-alpha") < parse("1.0.0-alpha.0")
    assert parse("1.0.0-rc.1") < parse("1.0.0") < parse("1.0.1-alpha")
    assert parse("2.0.0-alpha") > parse("1.99.99")


def test_build_metadata_is_kept_by_str_but_not_by_precedence():
    a, b = parse("1.0.0-rc.1+001"), parse("1.0.0-rc.1+exp.sha.5114f85")
    assert a == b and not a < b and not b < a
    assert str(b) == "1.0.0-rc.1+exp.sha.5114f85"
    assert parse("1.0.0+x") != parse("1.0.1+x")


@pytest.mark.parametrize(
    ("version", "spec", "expected"),
    [
        ("1.2.3", "^1.2.3", True),
        ("1.2.2", "^1.2.3", False),
        ("1.99.0", "^1.2.3", True),
        ("2.0.0", "^1.2.3", False),
        ("0.2.3", "^0.2.3", True),
        ("0.2.99", "^0.2.3", True),
        ("0.3.0", "^0.2.3", False),
        ("0.0.3", "^0.0.3", True),
        ("0.0.4", "^0.0.3", False),
        ("0.1.0", "^0.0.3", False),
        ("0.0.3-rc.1", "^0.0.3", False),
        ("1.3.0-beta", ">=1.2.0 <2.0.0", True),
        ("2.0.0-rc.1", "<2.0.0", True),
        ("1.2.4", "~1.2.3", True),
        ("1.3.0-alpha", "~1.2.3", True),
        ("1.3.0", "~1.2.3", False),
        ("1.0.0+build", "=1.0.0", True),
        ("1.0.0", "1.0.0+other", True),
        ("1.0.0-rc.1", "1.0.0", False),
        ("5.0.0", "<1.0.0 || >=4.0.0 <6.0.0", True),
        ("3.0.0", "<1.0.0 || >=4.0.0 <6.0.0", False),
        ("1.2.3-alpha.10", ">1.2.3-alpha.9", True),
        ("1.2.3-alpha.10", "<=1.2.3-alpha.beta", True),
    ],
)
def test_ranges(version, spec, expected):
    assert satisfies(version, spec) is expected
    assert satisfies(parse(version), spec) is expected


@pytest.mark.parametrize(
    "text", ["1.0.0-alpha..1", "1.0.0-00", "1.0", "1.0.0.0", " 1.0.0", "1.0.0-Ω"]
)
def test_still_refuses_invalid_versions(text):
    with pytest.raises(ValueError):
        parse(text)


def test_bump_and_constructor_defaults():
    assert Version(1, 2, 3) == parse("1.2.3")
    assert str(parse("1.2.3-rc.1+b").bump("major")) == "2.0.0"
    assert str(parse("1.2.3").bump("patch")) == "1.2.4"

import itertools

import pytest
from semverlite import Version, parse, satisfies


def test_parse_and_str_round_trip():
    version = parse("1.4.0-rc.1+build.7")
    assert version == Version(1, 4, 0, ("rc", "1"), ("build", "7"))
    assert str(version) == "1.4.0-rc.1+build.7"


@pytest.mark.parametrize("text", ["1.2", "v1.2.3", "01.2.3", "1.2.3-01", "1.2.3-", "1.2.3+"])
def test_invalid_versions_are_refused(text):
    with pytest.raises(ValueError):
        parse(text)


def test_precedence_of_the_spec_example():
    chain = [
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-alpha.beta",
        "1.0.0-beta",
        "1.0.0-beta.2",
        "1.0.0-beta.11",
        "1.0.0-rc.1",
        "1.0.0",
    ]
    versions = [parse(text) for text in chain]
    for lower, higher in itertools.pairwise(versions):
        assert lower < higher, (str(lower), str(higher))


def test_build_metadata_is_ignored_by_equality():
    assert parse("1.0.0+linux") == parse("1.0.0+darwin")
    assert len({parse("1.0.0+a"), parse("1.0.0+b")}) == 1


def test_caret_ranges():
    assert satisfies("1.9.9", "^1.2.3")
    assert not satisfies("2.0.0", "^1.2.3")
    assert satisfies("0.2.9", "^0.2.3")
    assert not satisfies("0.3.0", "^0.2.3")


def test_tilde_and_alternatives():
    assert satisfies("1.2.9", "~1.2.3")
    assert not satisfies("1.3.0", "~1.2.3")
    assert satisfies("3.1.0", "^1.0.0 || >=3.0.0 <4.0.0")


def test_bump():
    assert parse("1.2.3-rc.1").bump("minor") == parse("1.3.0")

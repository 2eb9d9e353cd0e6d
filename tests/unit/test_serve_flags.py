"""`sandbox serve` refuses bad flags before it starts, naming the flag and the fix."""

from __future__ import annotations

import pytest

from sandbox.cli import main


def test_an_unknown_warm_policy_is_named_with_the_known_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["serve", "--warm", "default", "--warm", "nosuch", "--port", "1"]) != 0
    err = capsys.readouterr().err
    assert "--warm nosuch: no such policy" in err and "known: default" in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--start-concurrency", "0"),
        ("--max-waiting", "-1"),
        ("--snapshot-ttl", "0"),
        ("--audit-verify-interval", "0"),
    ],
)
def test_a_number_out_of_range_is_refused_by_name(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as refused:
        main(["serve", flag, value])
    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: must be a finite number" in err, err

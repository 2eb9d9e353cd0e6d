"""`sandbox serve` refuses bad flags before it starts, naming the flag and the fix."""

from __future__ import annotations

import subprocess
import sys

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


def test_tracing_without_the_otel_extra_is_refused_saying_what_to_install() -> None:
    # A fresh interpreter in which the OTLP exporter cannot be imported (as without the extra).
    probe = (
        "import sys\n"
        "sys.modules['opentelemetry.exporter.otlp.proto.http.trace_exporter'] = None\n"
        "from sandbox.cli import main\n"
        "sys.exit(main(['serve', '--otel-endpoint', 'http://127.0.0.1:4318', '--port', '1']))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert "traces to http://127.0.0.1:4318 need the OpenTelemetry SDK" in done.stderr
    assert "install the otel extra" in done.stderr and "Traceback" not in done.stderr

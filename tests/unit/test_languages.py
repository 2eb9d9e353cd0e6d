"""Language names, refusals and the per-code parts of a language (main class, file, flags).

What each language compiles and runs is proven end to end in
tests/integration/test_languages.py and tests/api/test_compat_languages.py; these
check the name resolution and code inspection those rely on, without Docker.
"""

from __future__ import annotations

import pytest

from sandbox.errors import InvalidRequestError
from sandbox.judge.drivers import driven_program, without_placeholder
from sandbox.judge.models import TestVerdict as Verdict
from sandbox.judge.report_parsers import parse_report
from sandbox.languages import DRIVER_DONE, LANGUAGES, REFUSED, get_language

# SandboxFusion's language values (its client's list) that we run, and what they resolve to.
FUSION = {
    "python": "python",
    "cpp": "cpp",
    "nodejs": "javascript",
    "go": "go",
    "go_test": "go_test",
    "java": "java",
    "php": "php",
    "csharp": "csharp",
    "bash": "bash",
    "typescript": "typescript",
    "sql": "sql",
    "rust": "rust",
    "lua": "lua",
    "R": "r",
    "perl": "perl",
    "D_ut": "d_ut",
    "ruby": "ruby",
    "scala": "scala",
    "pytest": "pytest",
    "junit": "junit",
    "kotlin_script": "kotlin_script",
    "jest": "jest",
    "verilog": "verilog",
    "racket": "racket",
}


@pytest.mark.parametrize(("name", "ours"), sorted(FUSION.items()))
def test_sandboxfusion_names_resolve(name: str, ours: str) -> None:
    assert get_language(name).name == ours


@pytest.mark.parametrize(
    ("alias", "ours"),
    [
        ("c#", "csharp"),
        ("cs", "csharp"),
        ("Rscript", "r"),
        ("kotlin", "kotlin_script"),
        ("ts", "typescript"),
        ("hs", "haskell"),
        ("sqlite3", "sql"),
        ("dlang", "d"),
    ],
)
def test_aliases(alias: str, ours: str) -> None:
    assert get_language(alias).name == ours


@pytest.mark.parametrize("name", [*sorted(REFUSED), "Julia", "CUDA"])
def test_refused_by_name_with_the_reason(name: str) -> None:
    with pytest.raises(InvalidRequestError) as refused:
        get_language(name)
    message = str(refused.value)
    assert name in message and REFUSED[name.lower()] in message, message
    assert "unknown" not in message


def test_an_unknown_language_lists_the_known_ones() -> None:
    with pytest.raises(InvalidRequestError, match=r"unknown language 'cobol'.*ocaml"):
        get_language("cobol")


def test_java_is_main_but_junit_follows_the_public_class() -> None:
    """As in SandboxFusion: java runs Main from Main.java; junit names the file after
    the public class."""
    code = "import x.y;\n\npublic final class SolutionTest {\n}\n"
    java = get_language("java").for_code(code)
    assert java.source_file == "Main.java" and java.run[-1] == "Main" and "-ea" in java.run
    junit = get_language("junit")
    assert junit.for_code(code).source_file == "SolutionTest.java"
    assert junit.for_code("class A {}\n").source_file == "Main.java"


def test_scala_main_object_is_the_one_with_main() -> None:
    scala = get_language("scala")
    code = "object Helper { def f = 1 }\nobject App2 {\n  def main(a: Array[String]) = ()\n}\n"
    assert scala.for_code(code).run[-1] == "App2"
    assert scala.for_code("object Only { }\n").run[-1] == "Only"
    assert scala.for_code("object Runner extends App { }\n").run[-1] == "Runner"


def test_d_unittests_without_main_get_one() -> None:
    d_ut = get_language("D_ut")
    assert "-fmain" in (d_ut.for_code("unittest { assert(true); }\n").compile or ())
    with_main = d_ut.for_code("unittest {}\nvoid main() {}\n").compile or ()
    assert "-fmain" not in with_main and "-funittest" in with_main


def test_php_gets_its_opening_tag_once() -> None:
    php = get_language("php")
    assert php.source("echo 1;") == b"<?php\necho 1;"
    assert php.source("<?php echo 1;") == b"<?php echo 1;"


def test_csharp_compiles_its_debug_assert_with_the_code() -> None:
    files = get_language("csharp").files("class P { static void Main() {} }")
    assert set(files) == {"main.cs", ".sandbox/Debug.cs"}
    assert b"Environment.Exit(134)" in files[".sandbox/Debug.cs"]


def test_modes_name_their_reports() -> None:
    modes = {name: lang.report for name, lang in LANGUAGES.items() if lang.report}
    assert modes == {
        "pytest": "pytest",
        "junit": "junit",
        "go_test": "go-json",
        "jest": "jest-json",
    }


JEST = (
    '{"numTotalTests": 2, "testResults": [{"name": "/w/main.test.js", "status": "failed",'
    ' "assertionResults": [{"fullName": "adds", "status": "passed", "duration": 3},'
    ' {"fullName": "subtracts", "status": "failed", "failureMessages": ["expected 1"]}]}]}'
)


def test_jest_report_is_read() -> None:
    parsed = parse_report("jest-json", JEST.encode())
    assert parsed.problem is None
    assert [(t.name, t.verdict) for t in parsed.tests] == [
        ("adds", Verdict.PASSED),
        ("subtracts", Verdict.WRONG_ANSWER),
    ]
    assert parsed.tests[1].message == "expected 1"


@pytest.mark.parametrize(
    ("report", "problem"),
    [
        (JEST.replace('"numTotalTests": 2', '"numTotalTests": 3'), "incomplete"),
        ('{"testResults": 1}', "not a jest report"),
        ("not json", "not JSON"),
        (JEST.replace('"failed", "failureMessages"', '"weird", "failureMessages"'), "status"),
    ],
)
def test_an_incomplete_jest_report_is_not_evidence(report: str, problem: str) -> None:
    parsed = parse_report("jest-json", report.encode())
    assert parsed.problem is not None and problem in parsed.problem, parsed.problem


def test_a_jest_file_that_failed_to_run_is_a_failed_test() -> None:
    report = (
        '{"numTotalTests": 0, "testResults": [{"name": "t.js", "status": "failed",'
        ' "message": "SyntaxError", "assertionResults": []}]}'
    )
    parsed = parse_report("jest-json", report.encode())
    assert [t.verdict for t in parsed.tests] == [Verdict.RUNTIME_ERROR]


def test_a_driver_is_appended_and_the_old_placeholder_only_stripped() -> None:
    """No completion token any more (a candidate can read any mark from its own program):
    the program is the code then the driver, and a last line printing the old placeholder
    is dropped from the output before the comparison."""
    assert driven_program("int f(void);\n", "int main(void) {}\n") == (
        "int f(void);\n\nint main(void) {}\n\n"
    )
    assert driven_program("print(1)\n", None) == "print(1)\n"
    assert without_placeholder(f"5\n{DRIVER_DONE}\n") == "5\n"
    assert without_placeholder(f"{DRIVER_DONE}\n5\n") == f"{DRIVER_DONE}\n5\n"

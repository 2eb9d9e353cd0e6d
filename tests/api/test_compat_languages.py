"""SandboxFusion's ``/run_code`` in every language and test-runner mode, through its own client.

The ``sandbox-fusion`` package from PyPI sends each request to a live ``sandbox
serve`` and parses our answers with its own models: a greeting read from stdin
(printed where the language cannot read stdin), a compile error per compiled
language, a failed assertion, a timeout, files given and fetched, a library
SandboxFusion's runtime provides (numpy, lodash, javatuples), and SandboxFusion's
test-runner modes (``pytest``, ``junit``, ``go_test``, ``jest``, ``D_ut``), whose
``Success`` needs the runner's own report. Languages Debian cannot provide are
refused by name, with the reason.

Nothing is mocked: real service, real HTTP, real containers.
"""

from __future__ import annotations

import base64
import typing
from typing import Any

import pytest
import requests

from tests.conftest import Service

pytestmark = pytest.mark.docker

sandbox_fusion = pytest.importorskip("sandbox_fusion")
FUSION_LANGUAGES = set(typing.get_args(sandbox_fusion.RunCodeRequest.__fields__["language"].type_))

# SandboxFusion's language name -> a program greeting the name it reads on stdin.
HELLO = {
    "typescript": (
        'const name: string = require("fs").readFileSync(0, "utf8").trim();\n'
        "console.log(`Hello, ${name}!`);\n"
    ),
    "php": '<?php\n$name = trim(fgets(STDIN));\necho "Hello, $name!\\n";\n',
    "ruby": 'name = gets.strip\nputs "Hello, #{name}!"\n',
    "lua": 'local name = io.read("l")\nprint("Hello, " .. name .. "!")\n',
    "perl": 'my $name = <STDIN>;\nchomp $name;\nprint "Hello, $name!\\n";\n',
    "R": 'name <- readLines(file("stdin"), n = 1)\ncat(sprintf("Hello, %s!\\n", name))\n',
    "csharp": (
        "using System;\n"
        "class Program {\n"
        "    static void Main() {\n"
        "        var name = Console.ReadLine().Trim();\n"
        '        Console.WriteLine($"Hello, {name}!");\n'
        "    }\n"
        "}\n"
    ),
    "scala": (
        "object Greeter {\n"
        "  def main(args: Array[String]): Unit = {\n"
        "    val name = scala.io.StdIn.readLine().trim\n"
        '    println(s"Hello, $name!")\n'
        "  }\n"
        "}\n"
    ),
    "D": (
        "import std.stdio, std.string;\n"
        'void main() { auto name = readln().strip; writefln("Hello, %s!", name); }\n'
    ),
    "kotlin_script": 'val name = readLine()!!.trim()\nprintln("Hello, $name!")\n',
    "racket": (
        "#lang racket/base\n(require racket/string)\n"
        '(printf "Hello, ~a!\\n" (string-trim (read-line)))\n'
    ),
    "haskell": (
        'main :: IO ()\nmain = do\n  name <- getLine\n  putStrLn ("Hello, " ++ name ++ "!")\n'
    ),
    "ocaml": (
        "let () =\n"
        "  let name = String.trim (input_line stdin) in\n"
        '  Printf.printf "Hello, %s!\\n" name\n'
    ),
}
# Languages that do not read stdin here: they print the greeting.
PRINTED = {
    "sql": "SELECT 'Hello, ' || 'sandbox' || '!';\n",
    "verilog": (
        'module tb;\n  initial begin\n    $display("Hello, sandbox!");\n    $finish;\n  end\n'
        "endmodule\n"
    ),
}
COMPILED = {
    "typescript",
    "csharp",
    "scala",
    "D",
    "haskell",
    "ocaml",
    "verilog",
    "kotlin_script",
    "racket",
}
# A compile error per compiled language, and a word the compiler's message must hold.
BROKEN = {
    "typescript": ("let x: number = ;\n", "Expression expected"),
    "csharp": ('class P { static void Main() { int x = "s"; } }\n', "CS0029"),
    "scala": ('object Main { def main(a: Array[String]): Unit = { val x: Int = "s" } }\n', "type"),
    "D": ("void main() { int x = undefined_name; }\n", "undefined_name"),
    "haskell": ("main = putStrLn (1 + True)\n", "error"),
    "ocaml": ('let () = print_int "s"\n', "Error"),
    "verilog": ('module tb; initial begin $display("x") end endmodule\n', "syntax error"),
}
# A failed assertion: the run fails, with a nonzero status.
ASSERTING = {
    "java": (
        "public class Main {\n"
        "    public static void main(String[] args) {\n"
        '        assert 1 + 1 == 3 : "arithmetic";\n'
        "    }\n"
        "}\n"
    ),
    "csharp": (
        "using System.Diagnostics;\n"
        "class Program {\n"
        "    static void Main() {\n"
        "        Debug.Assert(1 + 1 == 2);\n"
        '        System.Console.WriteLine("checked once");\n'
        "        Debug.Assert(1 + 1 == 3);\n"
        '        System.Console.WriteLine("not reached");\n'
        "    }\n"
        "}\n"
    ),
    "php": "<?php\nassert(1 + 1 == 3);\n",
    "R": "stopifnot(isTRUE(all.equal(1 + 1, 3)))\n",
    "ruby": 'raise "assertion failed" unless 1 + 1 == 3\n',
    "lua": "assert(1 + 1 == 3, 'arithmetic')\n",
    "perl": 'die "assertion failed\\n" unless 1 + 1 == 3;\n',
    "typescript": 'import assert from "assert";\nassert.strictEqual(1 + 1, 3);\n',
    "racket": "#lang racket/base\n(require rackunit)\n(check-equal? (+ 1 1) 3)\n(exit 1)\n",
    "haskell": 'import Control.Exception (assert)\nmain = assert (1 + 1 == 3) (putStrLn "x")\n',
}


def fusion_run(service: Service, **fields: Any) -> Any:
    """The real client's run_code (one attempt: a failure must show, not be retried away).

    The client's model names SandboxFusion's languages only: ours beyond them (haskell,
    ocaml, D) are posted as its request would be and parsed with its response model.
    """
    from sandbox_fusion import RunCodeRequest, RunCodeResponse, run_code

    # The client's 10 s default is below a cold JVM compiler's time on a loaded 2-core host.
    fields.setdefault("compile_timeout", 30)
    if fields["language"] in FUSION_LANGUAGES:
        return run_code(RunCodeRequest(**fields), endpoint=service.url, max_attempts=1)
    body = {**RunCodeRequest(**{**fields, "language": "python"}).dict(), **fields}
    response = requests.post(f"{service.url}/run_code", json=body, timeout=120)
    assert response.status_code == 200, response.text
    return RunCodeResponse(**response.json())


@pytest.mark.parametrize("language", sorted(HELLO))
def test_hello_from_stdin(service: Service, language: str) -> None:
    from sandbox_fusion import CommandRunStatus, RunStatus

    response = fusion_run(service, code=HELLO[language], language=language, stdin="sandbox\n")
    assert response.status == RunStatus.Success, response
    run = response.run_result
    assert run.status == CommandRunStatus.Finished
    assert (run.return_code, run.stdout) == (0, "Hello, sandbox!\n"), response
    if language in COMPILED:
        assert response.compile_result.return_code == 0, response
    else:
        assert response.compile_result is None


@pytest.mark.parametrize("language", sorted(PRINTED))
def test_hello_printed(service: Service, language: str) -> None:
    from sandbox_fusion import RunStatus

    response = fusion_run(service, code=PRINTED[language], language=language)
    assert response.status == RunStatus.Success, response
    assert response.run_result.stdout.strip() == "Hello, sandbox!", response


@pytest.mark.parametrize("language", sorted(BROKEN))
def test_compile_error(service: Service, language: str) -> None:
    from sandbox_fusion import RunStatus

    code, sign = BROKEN[language]
    response = fusion_run(service, code=code, language=language)
    assert response.status == RunStatus.Failed, response
    compiled = response.compile_result
    assert compiled is not None and compiled.return_code != 0, response
    assert sign in compiled.stderr + compiled.stdout, response
    assert response.run_result is None


@pytest.mark.parametrize("language", sorted(ASSERTING))
def test_failed_assertion(service: Service, language: str) -> None:
    from sandbox_fusion import CommandRunStatus, RunStatus

    response = fusion_run(service, code=ASSERTING[language], language=language)
    assert response.status == RunStatus.Failed, response
    run = response.run_result
    assert run.status == CommandRunStatus.Finished, response
    assert run.return_code != 0, response
    assert "not reached" not in run.stdout


def test_csharp_debug_assert_passing_is_silent(service: Service) -> None:
    from sandbox_fusion import RunStatus

    code = ASSERTING["csharp"].replace("1 + 1 == 3", "2 + 2 == 4")
    response = fusion_run(service, code=code, language="csharp")
    assert response.status == RunStatus.Success, response
    assert response.run_result.stdout == "checked once\nnot reached\n"


@pytest.mark.parametrize(
    ("language", "code"),
    [
        ("ruby", "loop { }\n"),
        ("typescript", "while (true) {}\n"),
        ("kotlin_script", "while (true) { }\n"),
        ("ocaml", "let rec f () = f () in f ()\n"),
    ],
)
def test_timeout(service: Service, language: str, code: str) -> None:
    from sandbox_fusion import CommandRunStatus, RunStatus

    response = fusion_run(service, code=code, language=language, run_timeout=2)
    assert response.status == RunStatus.Failed, response
    assert response.run_result.status == CommandRunStatus.TimeLimitExceeded, response
    assert response.run_result.execution_time < 5


def test_files_in_and_fetched(service: Service) -> None:
    from sandbox_fusion import RunStatus

    code = (
        'local f = assert(io.open("data/in.txt"))\n'
        "local n = tonumber(f:read('l'))\nf:close()\n"
        'local out = assert(io.open("out.txt", "w"))\nout:write(n * 2, "\\n")\nout:close()\n'
        'print("wrote")\n'
    )
    response = fusion_run(
        service,
        code=code,
        language="lua",
        files={"data/in.txt": base64.b64encode(b"21\n").decode()},
        fetch_files=["out.txt"],
    )
    assert response.status == RunStatus.Success, response
    assert response.run_result.stdout == "wrote\n"
    assert base64.b64decode(response.files["out.txt"]) == b"42\n"


@pytest.mark.parametrize(
    ("language", "code", "printed"),
    [
        (
            "nodejs",
            'const _ = require("lodash");\nconsole.log(_.chunk([1, 2, 3], 2));\n',
            "[ [ 1, 2 ], [ 3 ] ]",
        ),
        (
            "typescript",
            'import _ from "lodash";\nconsole.log(_.sum([1, 2, 3]));\n',
            "6",
        ),
        (
            "java",
            "import org.javatuples.Pair;\n"
            "public class Main {\n"
            "    public static void main(String[] args) {\n"
            '        System.out.println(Pair.with(1, "a"));\n'
            "    }\n"
            "}\n",
            "[1, a]",
        ),
        ("python", "import numpy as np\nprint(int(np.arange(5).sum()))\n", "10"),
    ],
)
def test_a_dependency_import(service: Service, language: str, code: str, printed: str) -> None:
    from sandbox_fusion import RunStatus

    response = fusion_run(service, code=code, language=language)
    assert response.status == RunStatus.Success, response
    assert response.run_result.stdout.strip() == printed


def test_php_without_its_opening_tag(service: Service) -> None:
    """As in SandboxFusion, ``<?php`` is added when the code lacks it."""
    from sandbox_fusion import RunStatus

    response = fusion_run(service, code='echo "no tag\\n";\n', language="php")
    assert response.status == RunStatus.Success, response
    assert response.run_result.stdout == "no tag\n"


def test_java_is_main_java(service: Service) -> None:
    """As in SandboxFusion, the code is Main.java: another public class does not compile."""
    from sandbox_fusion import RunStatus

    code = (
        "public class Solution {\n"
        '  public static void main(String[] a) { System.out.println("s"); }\n'
        "}\n"
    )
    response = fusion_run(service, code=code, language="java")
    assert response.status == RunStatus.Failed, response
    assert "Solution.java" in response.compile_result.stderr, response


# ------------------------------------------------------------------------ test-runner modes

MODES = {
    "pytest": (
        "def add(a, b):\n    return a + b\n\n\ndef test_add():\n    assert add(1, 2) == 3\n",
        "def test_add():\n    assert 1 + 2 == 4\n",
    ),
    "junit": (
        "import org.junit.jupiter.api.Test;\n"
        "import static org.junit.jupiter.api.Assertions.assertEquals;\n\n"
        "public class AddTest {\n"
        "    @Test\n"
        "    void adds() { assertEquals(3, 1 + 2); }\n"
        "}\n",
        "import org.junit.jupiter.api.Test;\n"
        "import static org.junit.jupiter.api.Assertions.assertEquals;\n\n"
        "public class AddTest {\n"
        "    @Test\n"
        "    void adds() { assertEquals(4, 1 + 2); }\n"
        "    @Test\n"
        "    void fine() { assertEquals(2, 1 + 1); }\n"
        "}\n",
    ),
    "go_test": (
        'package main\n\nimport "testing"\n\n'
        "func add(a, b int) int { return a + b }\n\n"
        'func TestAdd(t *testing.T) {\n\tif add(1, 2) != 3 {\n\t\tt.Fatal("add")\n\t}\n}\n',
        'package main\n\nimport "testing"\n\n'
        'func TestAdd(t *testing.T) {\n\tif 1+2 != 4 {\n\t\tt.Fatal("add")\n\t}\n}\n',
    ),
    "jest": (
        "function add(a: number, b: number): number { return a + b; }\n"
        'test("adds", () => { expect(add(1, 2)).toBe(3); });\n',
        'test("adds", () => { expect(1 + 2).toBe(4); });\n',
    ),
    "D_ut": (
        "int add(int a, int b) { return a + b; }\nunittest { assert(add(1, 2) == 3); }\n",
        "unittest { assert(1 + 2 == 4); }\n",
    ),
}


@pytest.mark.parametrize("mode", sorted(MODES))
def test_mode_passing_tests(service: Service, mode: str) -> None:
    from sandbox_fusion import RunStatus

    response = fusion_run(service, code=MODES[mode][0], language=mode)
    assert response.status == RunStatus.Success, response
    assert response.run_result.return_code == 0, response


@pytest.mark.parametrize("mode", sorted(MODES))
def test_mode_failing_tests(service: Service, mode: str) -> None:
    from sandbox_fusion import RunStatus

    response = fusion_run(service, code=MODES[mode][1], language=mode)
    assert response.status == RunStatus.Failed, response
    assert response.run_result is None or response.run_result.return_code != 0, response


@pytest.mark.parametrize(
    ("mode", "code", "why"),
    [
        # An exit status of 0 from inside the tests is not a pass: no report came.
        ("pytest", "import os\n\ndef test_a():\n    os._exit(0)\n", "pytest's report"),
        ("pytest", "def helper():\n    pass\n", "exit status 5"),
        (
            "junit",
            "public class Empty {\n    public void notATest() {}\n}\n",
            "",
        ),
        (
            "go_test",
            'package main\n\nimport (\n\t"os"\n\t"testing"\n)\n\n'
            "func TestExit(t *testing.T) { os.Exit(0) }\n",
            "",
        ),
    ],
    ids=["pytest-os-exit", "pytest-no-test", "junit-no-test", "go-test-os-exit"],
)
def test_mode_without_a_passing_report_fails(
    service: Service, mode: str, code: str, why: str
) -> None:
    from sandbox_fusion import RunStatus

    response = fusion_run(service, code=code, language=mode)
    assert response.status == RunStatus.Failed, response
    assert why in response.message, response


def test_mode_compile_error(service: Service) -> None:
    from sandbox_fusion import RunStatus

    response = fusion_run(service, code="package main\n\nfunc TestX( {}\n", language="go_test")
    assert response.status == RunStatus.Failed, response
    assert response.compile_result is not None and response.compile_result.return_code != 0
    assert response.run_result is None


def test_pytest_mode_takes_args(service: Service) -> None:
    from sandbox_fusion import RunStatus

    code = "def test_one():\n    pass\n\n\ndef test_two():\n    assert False\n"
    for args, status in (([], RunStatus.Failed), (["-k", "one"], RunStatus.Success)):
        # SandboxFusion's client model has no args; its server's has (given to pytest).
        body = {"code": code, "language": "pytest", "args": args}
        response = requests.post(f"{service.url}/run_code", json=body, timeout=120)
        assert response.status_code == 200, response.text
        assert response.json()["status"] == status.value, response.text


# ------------------------------------------------------------------------ refusals


@pytest.mark.parametrize(
    ("language", "why"),
    [
        ("julia", "not packaged in Debian"),
        ("swift", "not packaged in Debian"),
        ("lean", "not packaged in Debian"),
        ("cuda", "GPU"),
        ("python_gpu", "GPU"),
    ],
)
def test_refused_by_name_with_the_reason(service: Service, language: str, why: str) -> None:
    response = requests.post(
        f"{service.url}/run_code", json={"code": "1", "language": language}, timeout=30
    )
    assert response.status_code == 422, response.text
    message = response.json()["message"]
    assert language in message and why in message, message


def test_compile_timeout_bounds_only_builds_sandboxfusion_has(service: Service) -> None:
    """SandboxFusion runs TypeScript without a build: its compile_timeout does not bound ours."""
    from sandbox_fusion import RunStatus

    quick = {"compile_timeout": 0.1, "stdin": "sandbox\n"}
    response = fusion_run(service, code=HELLO["typescript"], language="typescript", **quick)
    assert response.status == RunStatus.Success, response
    response = fusion_run(service, code=HELLO["csharp"], language="csharp", **quick)
    assert response.status == RunStatus.Failed, response
    assert "compilation exceeded its time limit" in response.compile_result.stderr, response


@pytest.mark.parametrize("field", ["files", "fetch_files"])
def test_absolute_paths_are_refused_with_the_reason(service: Service, field: str) -> None:
    """SandboxFusion takes them; our root file system is read-only: a 422 that says so."""
    value: Any = {"/tmp/data.txt": "MQ=="} if field == "files" else ["/etc/passwd"]
    body = {"code": "print(1)", "language": "python", field: value}
    response = requests.post(f"{service.url}/run_code", json=body, timeout=30)
    assert response.status_code == 422, response.text
    message = response.json()["message"]
    assert "read-only" in message and "/workspace" in message, message


def test_modes_are_for_run_code_not_the_judge(service: Service) -> None:
    """The judge's tests are hidden; a mode whose code is the tests has no place there."""
    body = {
        "code": "def test_a():\n    pass\n",
        "language": "pytest",
        "tests": {"kind": "io", "cases": [{"expected_stdout": "1"}]},
    }
    response = requests.post(f"{service.url}/v1/judge", json=body, timeout=30)
    assert response.status_code == 422, response.text
    assert "test-runner mode" in response.json()["message"]


# ------------------------------------------------------------------------ the same guarantees


@pytest.mark.parametrize(
    ("language", "code", "status"),
    [
        ("ruby", 's = "x" * 900_000_000\nputs s.size\n', "memory_limit"),
        (
            "ocaml",
            "let () = let b = Bytes.make 900_000_000 (Char.chr 65) in print_int (Bytes.length b)\n",
            "memory_limit",
        ),
        ("lua", 'while true do io.write(string.rep("y", 65536)) end\n', "output_limit"),
        ("perl", 'print "$<\\n";\n', "ok"),
        (
            "racket",
            "#lang racket/base\n(require ffi/unsafe)\n"
            '(displayln ((get-ffi-obj "getuid" #f (_fun -> _int))))\n',
            "ok",
        ),
    ],
    ids=["ruby-memory", "ocaml-memory", "lua-output", "perl-uid", "racket-uid"],
)
def test_limits_and_uid_hold_in_added_languages(
    service: Service, language: str, code: str, status: str
) -> None:
    response = requests.post(
        f"{service.url}/v1/run", json={"language": language, "code": code}, timeout=120
    )
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["status"] == status, result
    if status == "ok":
        assert result["stdout"] == "10001\n", result  # the sandbox uid

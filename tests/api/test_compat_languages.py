"""SandboxFusion's ``/run_code`` in every language and test-runner mode, through its own client.

The ``sandbox-fusion`` package from PyPI sends each request to a live ``sandbox
serve`` and parses our answers with its own models. Every language of the table
(``sandbox.languages.LANGUAGES``), by SandboxFusion's name, gets:

- one request that checks several things at once: the program reads a name on
  stdin and a number from a file given in ``files``, doubles the number with a
  library (SandboxFusion's runtime's where it has one: numpy, lodash,
  javatuples; else the language's own, kept light: builds are slow), writes it
  to a file fetched with ``fetch_files`` and prints a greeting;
- a failed assertion: the first assertion holds, the second ends the run;
- in compiled languages, a compile error with the compiler's message.

Timeouts once per way a program runs (a build of ours, native code, the JVM,
Mono; interpreted Python is in ``test_compat.py``), and SandboxFusion's
test-runner modes (``pytest``, ``junit``, ``go_test``, ``jest``, ``D_ut``),
whose ``Success`` needs the runner's own report. Languages Debian cannot provide
are refused by name, with the reason.

Nothing is mocked: real service, real HTTP, real containers.
"""

from __future__ import annotations

import base64
import typing
from typing import Any

import pytest
import requests

from sandbox.languages import LANGUAGES
from tests.conftest import Service

pytestmark = pytest.mark.docker

sandbox_fusion = pytest.importorskip("sandbox_fusion")
FUSION_LANGUAGES = set(typing.get_args(sandbox_fusion.RunCodeRequest.__fields__["language"].type_))

# Our names that SandboxFusion spells otherwise.
FUSION_NAMES = {"javascript": "nodejs", "r": "R", "d": "D", "d_ut": "D_ut"}
# The languages (not the test-runner modes), by SandboxFusion's names.
RUN_LANGUAGES = sorted(
    FUSION_NAMES.get(name, name)
    for name, language in LANGUAGES.items()
    if language.report is None and name != "d_ut"
)
COMPILED = {
    FUSION_NAMES.get(name, name) for name, language in LANGUAGES.items() if language.compiled
}

# SandboxFusion language -> a program that reads a name on stdin and a number in
# data/in.txt, doubles the number (with a library SandboxFusion's runtime has: numpy,
# lodash, javatuples; elsewhere with the language's own, kept light: builds are slow),
# writes it to out.txt and greets the name.
PROGRAMS = {
    "python": (
        "import numpy as np\n"
        "name = input().strip()\n"
        "n = int(open('data/in.txt').read())\n"
        "open('out.txt', 'w').write(f'{int(np.multiply(n, 2))}\\n')\n"
        "print(f'Hello, {name}!')\n"
    ),
    "bash": (
        "read -r name\n"
        "read -r n < data/in.txt\n"
        "awk -v n=\"$n\" 'BEGIN { print n * 2 }' > out.txt\n"
        'echo "Hello, $name!"\n'
    ),
    "c": (
        "#include <math.h>\n#include <stdio.h>\n"
        "int main(void) {\n"
        "    char name[64];\n    int n;\n"
        '    if (scanf("%63s", name) != 1) return 1;\n'
        '    FILE *in = fopen("data/in.txt", "r"), *out = fopen("out.txt", "w");\n'
        '    if (!in || !out || fscanf(in, "%d", &n) != 1) return 1;\n'
        '    fprintf(out, "%ld\\n", lround(ldexp(n, 1)));\n'
        "    fclose(out);\n"
        '    printf("Hello, %s!\\n", name);\n'
        "    return 0;\n"
        "}\n"
    ),
    "cpp": (
        "#include <fstream>\n#include <iostream>\n#include <numeric>\n#include <vector>\n"
        "int main() {\n"
        "    std::string name;\n    std::cin >> name;\n"
        '    std::ifstream in("data/in.txt");\n    int n;\n    in >> n;\n'
        "    std::vector<int> twice{n, n};\n"
        '    std::ofstream("out.txt") << std::accumulate(twice.begin(), twice.end(), 0) << "\\n";\n'
        '    std::cout << "Hello, " << name << "!" << std::endl;\n'
        "}\n"
    ),
    "nodejs": (
        'const _ = require("lodash");\nconst fs = require("fs");\n'
        'const name = fs.readFileSync(0, "utf8").trim();\n'
        'const n = Number(fs.readFileSync("data/in.txt", "utf8"));\n'
        'fs.writeFileSync("out.txt", `${_.multiply(n, 2)}\\n`);\n'
        "console.log(`Hello, ${name}!`);\n"
    ),
    "typescript": (
        'import _ from "lodash";\nimport * as fs from "fs";\n'
        'const name: string = fs.readFileSync(0, "utf8").trim();\n'
        'const n: number = Number(fs.readFileSync("data/in.txt", "utf8"));\n'
        'fs.writeFileSync("out.txt", `${_.multiply(n, 2)}\\n`);\n'
        "console.log(`Hello, ${name}!`);\n"
    ),
    "go": (
        'package main\n\nimport (\n\t"fmt"\n\t"os"\n\t"strconv"\n\t"strings"\n)\n\n'
        "func main() {\n"
        "\tvar name string\n\tfmt.Scan(&name)\n"
        '\tdata, err := os.ReadFile("data/in.txt")\n\tif err != nil {\n\t\tpanic(err)\n\t}\n'
        "\tn, _ := strconv.Atoi(strings.TrimSpace(string(data)))\n"
        '\tos.WriteFile("out.txt", []byte(strconv.Itoa(n*2)+"\\n"), 0o644)\n'
        '\tfmt.Printf("Hello, %s!\\n", name)\n'
        "}\n"
    ),
    "java": (
        "import java.nio.file.*;\nimport java.util.Scanner;\nimport org.javatuples.Pair;\n\n"
        "public class Main {\n"
        "    public static void main(String[] args) throws Exception {\n"
        "        String name = new Scanner(System.in).next();\n"
        '        int n = Integer.parseInt(Files.readString(Path.of("data/in.txt")).trim());\n'
        "        Pair<Integer, Integer> p = Pair.with(n, 2);\n"
        '        Files.writeString(Path.of("out.txt"), (p.getValue0() * p.getValue1()) + "\\n");\n'
        '        System.out.println("Hello, " + name + "!");\n'
        "    }\n"
        "}\n"
    ),
    "rust": (
        "use std::fs;\nuse std::io;\n\n"
        "fn main() {\n"
        "    let mut name = String::new();\n"
        "    io::stdin().read_line(&mut name).unwrap();\n"
        '    let n: i64 = fs::read_to_string("data/in.txt").unwrap().trim().parse().unwrap();\n'
        '    fs::write("out.txt", format!("{}\\n", [n, n].iter().sum::<i64>())).unwrap();\n'
        '    println!("Hello, {}!", name.trim());\n'
        "}\n"
    ),
    "php": (
        "<?php\n$name = trim(fgets(STDIN));\n"
        '$n = (int) file_get_contents("data/in.txt");\n'
        'file_put_contents("out.txt", array_sum([$n, $n]) . "\\n");\n'
        'echo "Hello, $name!\\n";\n'
    ),
    "ruby": (
        "require 'json'\nname = gets.strip\n"
        "n = File.read('data/in.txt').to_i\n"
        'File.write(\'out.txt\', "#{JSON.parse("[#{n}, #{n}]").sum}\\n")\n'
        'puts "Hello, #{name}!"\n'
    ),
    "lua": (
        'local name = io.read("l")\n'
        'local n = tonumber(assert(io.open("data/in.txt")):read("l"))\n'
        'local out = assert(io.open("out.txt", "w"))\n'
        'out:write(string.format("%d\\n", n * 2))\nout:close()\n'
        'print("Hello, " .. name .. "!")\n'
    ),
    "perl": (
        "use List::Util qw(sum);\n"
        "my $name = <STDIN>;\nchomp $name;\n"
        "open(my $in, '<', 'data/in.txt') or die;\nmy $n = <$in> + 0;\n"
        "open(my $out, '>', 'out.txt') or die;\nprint $out sum($n, $n), \"\\n\";\nclose $out;\n"
        'print "Hello, $name!\\n";\n'
    ),
    "R": (
        'name <- readLines(file("stdin"), n = 1)\n'
        'n <- as.integer(readLines("data/in.txt", n = 1))\n'
        'writeLines(format(sum(c(n, n))), "out.txt")\n'
        'cat(sprintf("Hello, %s!\\n", name))\n'
    ),
    "csharp": (
        "using System;\nusing System.IO;\nusing System.Linq;\nusing System.Numerics;\n"
        "class Program {\n"
        "    static void Main() {\n"
        "        var name = Console.ReadLine().Trim();\n"
        '        var n = BigInteger.Parse(File.ReadAllText("data/in.txt").Trim());\n'
        '        File.WriteAllText("out.txt", new[] { n, n }.Aggregate(BigInteger.Add) + "\\n");\n'
        '        Console.WriteLine($"Hello, {name}!");\n'
        "    }\n"
        "}\n"
    ),
    "scala": (
        "import java.nio.file.{Files, Paths}\nimport scala.collection.mutable.ArrayBuffer\n\n"
        "object Greeter {\n"
        "  def main(args: Array[String]): Unit = {\n"
        "    val name = scala.io.StdIn.readLine().trim\n"
        '    val n = new String(Files.readAllBytes(Paths.get("data/in.txt"))).trim.toInt\n'
        '    Files.write(Paths.get("out.txt"), s"${ArrayBuffer(n, n).sum}\\n".getBytes)\n'
        '    println(s"Hello, $name!")\n'
        "  }\n"
        "}\n"
    ),
    "D": (
        "import std.conv : to;\nimport std.file : readText, write;\n"
        "import std.stdio : readln, writefln;\nimport std.string : strip;\n\n"
        "void main() {\n"
        "    auto name = readln().strip;\n"
        '    auto n = readText("data/in.txt").strip.to!int;\n'
        '    write("out.txt", (n * 2).to!string ~ "\\n");\n'
        '    writefln("Hello, %s!", name);\n'
        "}\n"
    ),
    "sql": (
        "CREATE TABLE names(name TEXT);\nCREATE TABLE input(n INTEGER);\n"
        ".import /dev/stdin names\n.import data/in.txt input\n"
        ".once out.txt\nSELECT json_extract(json_array(n, n), '$[0]') * 2 FROM input;\n"
        "SELECT 'Hello, ' || name || '!' FROM names;\n"
    ),
    "verilog": (
        "module tb;\n"
        "  reg [8*64-1:0] name;\n  integer n, in, out, got;\n"
        "  initial begin\n"
        '    got = $fscanf(32\'h8000_0000, "%s", name);\n'
        '    in = $fopen("data/in.txt", "r");\n    got = $fscanf(in, "%d", n);\n'
        '    out = $fopen("out.txt", "w");\n    $fdisplay(out, "%0d", n * 2);\n    $fclose(out);\n'
        '    $display("Hello, %0s!", name);\n'
        "    $finish;\n"
        "  end\n"
        "endmodule\n"
    ),
    "kotlin_script": (
        "import java.io.File\nimport kotlin.math.absoluteValue\n"
        "val name = readLine()!!.trim()\n"
        'val n = File("data/in.txt").readText().trim().toInt()\n'
        'File("out.txt").writeText("${(n * 2).absoluteValue}\\n")\n'
        'println("Hello, $name!")\n'
    ),
    "racket": (
        "#lang racket/base\n(define name (read-line))\n"
        '(define n (call-with-input-file "data/in.txt" read))\n'
        '(call-with-output-file "out.txt" (lambda (out) (fprintf out "~a\\n" (* n 2))))\n'
        '(printf "Hello, ~a!\\n" name)\n'
    ),
    "haskell": (
        "import Data.List (foldl')\n\n"
        "main :: IO ()\nmain = do\n"
        "  name <- getLine\n"
        '  n <- read <$> readFile "data/in.txt" :: IO Int\n'
        '  writeFile "out.txt" (show (foldl\' (+) 0 [n, n]) ++ "\\n")\n'
        '  putStrLn ("Hello, " ++ name ++ "!")\n'
    ),
    "ocaml": (
        "let () =\n"
        "  let name = String.trim (input_line stdin) in\n"
        '  let inp = open_in "data/in.txt" in\n'
        '  let n = int_of_string (List.hd (Str.split (Str.regexp "[ \\n]+") (input_line inp))) in\n'
        '  let out = open_out "out.txt" in\n'
        '  Printf.fprintf out "%d\\n" (n * 2);\n'
        "  close_out out;\n"
        '  Printf.printf "Hello, %s!\\n" name\n'
    ),
}

# SandboxFusion language -> a program whose first assertion holds (then it prints
# "checked once") and whose second fails (before "not reached").
ASSERTING = {
    "python": (
        "two = 1 + 1\nassert two == 2\nprint('checked once', flush=True)\n"
        "assert two == 3, 'arithmetic'\nprint('not reached')\n"
    ),
    "bash": (
        "two=$((1 + 1))\n[ \"$two\" -eq 2 ] || exit 1\necho 'checked once'\n"
        "[ \"$two\" -eq 3 ] || exit 1\necho 'not reached'\n"
    ),
    "c": (
        "#include <assert.h>\n#include <stdio.h>\n"
        "int main(void) {\n    int two = 1 + 1;\n    assert(two == 2);\n"
        '    puts("checked once");\n    fflush(stdout);\n'
        '    assert(two == 3);\n    puts("not reached");\n    return 0;\n}\n'
    ),
    "cpp": (
        "#include <cassert>\n#include <iostream>\n"
        "int main() {\n    int two = 1 + 1;\n    assert(two == 2);\n"
        '    std::cout << "checked once" << std::endl;\n'
        '    assert(two == 3);\n    std::cout << "not reached" << std::endl;\n}\n'
    ),
    "nodejs": (
        'const assert = require("assert");\nconst two = 1 + 1;\nassert.strictEqual(two, 2);\n'
        'console.log("checked once");\nassert.strictEqual(two, 3);\nconsole.log("not reached");\n'
    ),
    "typescript": (
        'import assert from "assert";\nconst two: number = 1 + 1;\nassert.strictEqual(two, 2);\n'
        'console.log("checked once");\nassert.strictEqual(two, 3);\nconsole.log("not reached");\n'
    ),
    "go": (
        'package main\n\nimport "fmt"\n\n'
        "func main() {\n\ttwo := 1 + 1\n"
        '\tif two != 2 {\n\t\tpanic("assertion failed")\n\t}\n\tfmt.Println("checked once")\n'
        '\tif two != 3 {\n\t\tpanic("assertion failed")\n\t}\n\tfmt.Println("not reached")\n}\n'
    ),
    "java": (
        "public class Main {\n"
        "    public static void main(String[] args) {\n"
        "        int two = 1 + 1;\n        assert two == 2;\n"
        '        System.out.println("checked once");\n'
        '        assert two == 3 : "arithmetic";\n'
        '        System.out.println("not reached");\n'
        "    }\n"
        "}\n"
    ),
    "rust": (
        "fn main() {\n    let two = 1 + 1;\n    assert_eq!(two, 2);\n"
        '    println!("checked once");\n    assert_eq!(two, 3, "arithmetic");\n'
        '    println!("not reached");\n}\n'
    ),
    "php": (
        '<?php\n$two = 1 + 1;\nassert($two == 2);\necho "checked once\\n";\n'
        'assert($two == 3);\necho "not reached\\n";\n'
    ),
    "ruby": (
        "two = 1 + 1\nraise 'assertion failed' unless two == 2\nputs 'checked once'\n"
        "raise 'assertion failed' unless two == 3\nputs 'not reached'\n"
    ),
    "lua": (
        "local two = 1 + 1\nassert(two == 2)\nprint('checked once')\n"
        "assert(two == 3, 'arithmetic')\nprint('not reached')\n"
    ),
    "perl": (
        'my $two = 1 + 1;\ndie "assertion failed\\n" unless $two == 2;\nprint "checked once\\n";\n'
        'die "assertion failed\\n" unless $two == 3;\nprint "not reached\\n";\n'
    ),
    "R": (
        "two <- 1 + 1\nstopifnot(isTRUE(all.equal(two, 2)))\ncat('checked once\\n')\n"
        "stopifnot(isTRUE(all.equal(two, 3)))\ncat('not reached\\n')\n"
    ),
    "csharp": (
        "using System.Diagnostics;\n"
        "class Program {\n"
        "    static void Main() {\n"
        "        int two = 1 + 1;\n"
        "        Debug.Assert(two == 2);\n"
        '        System.Console.WriteLine("checked once");\n'
        "        Debug.Assert(two == 3);\n"
        '        System.Console.WriteLine("not reached");\n'
        "    }\n"
        "}\n"
    ),
    "scala": (
        "object Main {\n"
        "  def main(args: Array[String]): Unit = {\n"
        '    val two = 1 + 1\n    assert(two == 2)\n    println("checked once")\n'
        '    assert(two == 3, "arithmetic")\n    println("not reached")\n'
        "  }\n"
        "}\n"
    ),
    "D": (
        "import std.stdio : writeln;\n\n"
        "void main() {\n    int two = 1 + 1;\n    assert(two == 2);\n"
        '    writeln("checked once");\n    assert(two == 3, "arithmetic");\n'
        '    writeln("not reached");\n}\n'
    ),
    "sql": (
        "CREATE TABLE two(x CHECK (x = 2));\nINSERT INTO two VALUES (1 + 1);\n"
        "SELECT 'checked once';\n"
        "CREATE TABLE three(x CHECK (x = 3));\nINSERT INTO three VALUES (1 + 1);\n"
        "SELECT 'not reached';\n"
    ),
    "verilog": (
        "module tb;\n  integer two;\n  initial begin\n    two = 1 + 1;\n"
        '    assert (two == 2) else $fatal(1, "assertion failed");\n'
        '    $display("checked once");\n'
        '    assert (two == 3) else $fatal(1, "assertion failed");\n'
        '    $display("not reached");\n    $finish;\n  end\nendmodule\n'
    ),
    "kotlin_script": (
        'val two = 1 + 1\nassert(two == 2)\nprintln("checked once")\n'
        'assert(two == 3) { "arithmetic" }\nprintln("not reached")\n'
    ),
    "racket": (
        "#lang racket/base\n(define two (+ 1 1))\n"
        '(unless (equal? two 2) (error \'check "1 + 1 is not 2"))\n(displayln "checked once")\n'
        '(unless (equal? two 3) (error \'check "1 + 1 is not 3"))\n(displayln "not reached")\n'
    ),
    "haskell": (
        "import Control.Exception (assert)\n\n"
        "main :: IO ()\nmain = do\n  let two = 1 + 1 :: Int\n"
        '  assert (two == 2) (putStrLn "checked once")\n'
        '  assert (two == 3) (putStrLn "not reached")\n'
    ),
    "ocaml": (
        'let () =\n  let two = 1 + 1 in\n  assert (two = 2);\n  print_endline "checked once";\n'
        '  assert (two = 3);\n  print_endline "not reached"\n'
    ),
}

# A compile error per compiled language, and a word the compiler's message must hold.
# (kotlin_script's, a 10 s build, is judged in tests/integration/test_languages.py.)
BROKEN = {
    "c": ("int main(void) { return undefined_name; }\n", "undefined_name"),
    "cpp": ("int main() { std::vector<int> v; }\n", "vector"),
    "go": ("package main\n\nfunc main() {\n\tx := 1\n}\n", "declared"),
    "java": (
        'public class Main { public static void main(String[] a) { int x = "s"; } }\n',
        "incompatible types",
    ),
    "rust": ('fn main() {\n    let x: i32 = "s";\n}\n', "mismatched types"),
    "typescript": ("let x: number = ;\n", "Expression expected"),
    "csharp": ('class P { static void Main() { int x = "s"; } }\n', "CS0029"),
    "scala": ('object Main { def main(a: Array[String]): Unit = { val x: Int = "s" } }\n', "type"),
    "D": ("void main() { int x = undefined_name; }\n", "undefined_name"),
    "racket": ("#lang racket/base\n(displayln undefined-name)\n", "unbound identifier"),
    "haskell": ("main = putStrLn (1 + True)\n", "error"),
    "ocaml": ('let () = print_int "s"\n', "Error"),
    "verilog": ('module tb; initial begin $display("x") end endmodule\n', "syntax error"),
}


def fusion_run(service: Service, **fields: Any) -> Any:
    """The real client's run_code (one attempt: a failure must show, not be retried away).

    The client's model names SandboxFusion's languages only: ours beyond them (c,
    haskell, ocaml, D) are posted as its request would be and parsed with its
    response model.
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


def test_every_language_is_covered() -> None:
    assert set(PROGRAMS) == set(ASSERTING) == set(RUN_LANGUAGES)
    assert set(BROKEN) == (COMPILED & set(RUN_LANGUAGES)) - {"kotlin_script"}


@pytest.mark.parametrize("language", RUN_LANGUAGES)
def test_stdin_files_a_library_and_fetched_output(service: Service, language: str) -> None:
    from sandbox_fusion import CommandRunStatus, RunStatus

    response = fusion_run(
        service,
        code=PROGRAMS[language],
        language=language,
        stdin="sandbox\n",
        files={"data/in.txt": base64.b64encode(b"21\n").decode()},
        fetch_files=["out.txt"],
    )
    assert response.status == RunStatus.Success, response
    run = response.run_result
    assert run.status == CommandRunStatus.Finished
    assert (run.return_code, run.stdout) == (0, "Hello, sandbox!\n"), response
    assert base64.b64decode(response.files["out.txt"]) == b"42\n", response
    if language in COMPILED:
        assert response.compile_result.return_code == 0, response
    else:
        assert response.compile_result is None


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


@pytest.mark.parametrize("language", RUN_LANGUAGES)
def test_failed_assertion(service: Service, language: str) -> None:
    from sandbox_fusion import CommandRunStatus, RunStatus

    response = fusion_run(service, code=ASSERTING[language], language=language)
    assert response.status == RunStatus.Failed, response
    run = response.run_result
    assert run.status == CommandRunStatus.Finished, response
    assert run.return_code != 0, response
    # The holding assertion let the program go on; the failing one stopped it (Icarus
    # Verilog's $fatal prints its message on stdout after).
    assert run.stdout.startswith("checked once\n") and "not reached" not in run.stdout, response


def test_csharp_debug_assert_passing_is_silent(service: Service) -> None:
    from sandbox_fusion import RunStatus

    code = ASSERTING["csharp"].replace("two == 3", "two + 2 == 4")
    response = fusion_run(service, code=code, language="csharp")
    assert response.status == RunStatus.Success, response
    assert response.run_result.stdout == "checked once\nnot reached\n"


# A timeout in each way a program runs: built by us (TypeScript), native code (OCaml),
# the JVM (Java), Mono (C#).
@pytest.mark.parametrize(
    ("language", "code"),
    [
        ("typescript", "while (true) {}\n"),
        ("ocaml", "let rec f () = f () in f ()\n"),
        (
            "java",
            "public class Main { public static void main(String[] a) { while (true) { } } }\n",
        ),
        ("csharp", "class P { static void Main() { while (true) { } } }\n"),
    ],
)
def test_timeout(service: Service, language: str, code: str) -> None:
    from sandbox_fusion import CommandRunStatus, RunStatus

    response = fusion_run(service, code=code, language=language, run_timeout=2)
    assert response.status == RunStatus.Failed, response
    assert response.run_result.status == CommandRunStatus.TimeLimitExceeded, response
    assert response.run_result.execution_time < 5


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
            "the report lists no test that ran",
        ),
        (
            # test2json saw the test pass, but the binary ended before its final event.
            "go_test",
            'package main\n\nimport (\n\t"os"\n\t"testing"\n)\n\n'
            "func TestExit(t *testing.T) { os.Exit(0) }\n",
            "package main has no final event",
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


# A C++ program whose build alone takes about 0.7 s on these machines (a constant the
# compiler evaluates), several times the shortest compile_timeout: a small program's
# build can finish inside 0.1 s (mcs once built the C# one in 0.0999 s).
SLOW_BUILD = (
    "constexpr long spin() { long s = 0; for (long i = 0; i < 3000000; ++i) s += i % 7; "
    "return s; }\nstatic_assert(spin() > 0);\nint main() { return 0; }\n"
)


def test_compile_timeout_bounds_only_builds_sandboxfusion_has(service: Service) -> None:
    """SandboxFusion runs TypeScript without a build: its compile_timeout does not bound ours."""
    from sandbox_fusion import RunStatus

    quick = {"compile_timeout": 0.1}
    code = 'console.log("built by us");\n'
    response = fusion_run(service, code=code, language="typescript", **quick)
    assert response.status == RunStatus.Success, response
    response = fusion_run(service, code=SLOW_BUILD, language="cpp", **quick)
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

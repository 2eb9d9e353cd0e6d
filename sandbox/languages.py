"""How each language's program is written into the sandbox, compiled and run.

Compiled languages build once per submission (as the sandbox uid, under the
policy's ``compile_time_s``) into ``/workspace``; the build's output is the
compile verdict's message. Interpreted languages run their source directly.

Names and commands follow SandboxFusion's (``language`` values as its datasets
send them: ``nodejs``, ``R``, ``D_ut``, ``kotlin_script``, ...; matched without
regard to case). Its test-runner modes (``pytest``, ``junit``, ``go_test``,
``jest``) are languages here too, with a :attr:`Language.report`: the runner's
own report, read by the service, says whether the tests passed. Languages that
Debian cannot provide on this platform are refused by name, with the reason
(:data:`REFUSED`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal

from .errors import InvalidRequestError

# Toolchains that write caches under $HOME or elsewhere get them in /tmp.
_GO_ENV = {"GOCACHE": "/tmp/.gocache", "GOPATH": "/tmp/.gopath", "GO111MODULE": "off"}
# Matplotlib's config and font cache in /tmp, not the workspace (HOME); no GUI backend.
_PYTHON_ENV = {"MPLCONFIGDIR": "/tmp/.matplotlib", "MPLBACKEND": "Agg"}
# A small, fast-starting JVM: one GC thread, no C2 compiler for short programs.
_JVM_FLAGS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto")
_JAVA = "/usr/share/java"
# The jars SandboxFusion's Java runtime puts on the class path (javatuples), from Debian.
JAVA_CLASSPATH = f".:{_JAVA}/javatuples.jar"
JUNIT_CONSOLE = f"{_JAVA}/junit-platform-console-standalone.jar"
JUNIT_CLASSPATH = f"{JAVA_CLASSPATH}:{JUNIT_CONSOLE}:{_JAVA}/junit4.jar:{_JAVA}/hamcrest-core.jar"
SCALA_CLASSPATH = "/usr/share/scala/lib/scala-library.jar"
TS_TRANSPILE = "/opt/sandbox/lang/ts_transpile.js"
KOTLIN_CLASSPATH = (
    f".:/opt/sandbox/lang/kts:{_JAVA}/kotlin-stdlib.jar:{_JAVA}/kotlin-script-runtime.jar"
)
MAIN = "{main}"
"""In a language's file name and commands: the main class or object found in the code."""
DRIVER_DONE = "@@DRIVER_DONE@@"
"""The old completion placeholder: a driver printing it as its last line has that line
dropped before the comparison (it proves nothing, see :mod:`sandbox.judge.drivers`)."""

ReportKind = Literal["pytest", "junit", "go-json", "jest-json"]

_JAVA_PUBLIC_CLASS = re.compile(
    r"^\s*public\s+(?:(?:final|abstract|strictfp)\s+)*(?:class|interface|enum|record)\s+(\w+)",
    re.MULTILINE,
)
_SCALA_OBJECT = re.compile(r"^\s*(?:case\s+)?object\s+(\w+)", re.MULTILINE)
_SCALA_MAIN = re.compile(r"\bdef\s+main\s*\(|\bextends\s+App\b")
_D_MAIN = re.compile(r"\bmain\s*\(")


def java_public_class(code: str) -> str | None:
    """The public top-level type of a Java source (its file must be named after it)."""
    match = _JAVA_PUBLIC_CLASS.search(code)
    return match.group(1) if match else None


def scala_object(code: str) -> str | None:
    """The main object of a Scala source: the first with a ``main`` method (or ``extends
    App``), else the first ``object`` (as SandboxFusion takes)."""
    objects = list(_SCALA_OBJECT.finditer(code))
    if not objects:
        return None
    for match, following in zip(objects, [*objects[1:], None], strict=True):
        body = code[match.end() : following.start() if following is not None else len(code)]
        if _SCALA_MAIN.search(body):
            return match.group(1)
    return objects[0].group(1)


# Mono's Debug.Assert only logs a failed assertion; .NET's (SandboxFusion runs
# dotnet) ends the program. This class, compiled with the code, takes precedence
# over System.dll's (warning CS0436, silenced) and ends it with status 134.
CSHARP_DEBUG_FILE = ".sandbox/Debug.cs"
CSHARP_DEBUG = """\
namespace System.Diagnostics {
    public static class Debug {
        static void Failed(string message) {
            System.Console.Out.Flush();
            System.Console.Error.WriteLine(
                "Debug.Assert failed" + (message == null ? "" : ": " + message)
                + System.Environment.NewLine + new System.Diagnostics.StackTrace(2, true));
            System.Environment.Exit(134);
        }
        public static void Assert(bool ok) { if (!ok) Failed(null); }
        public static void Assert(bool ok, string message) { if (!ok) Failed(message); }
        public static void Assert(bool ok, string message, string detail) {
            if (!ok) Failed(message + " " + detail);
        }
        public static void Fail(string message) { Failed(message); }
        public static void Fail(string message, string detail) { Failed(message + " " + detail); }
        public static void WriteLine(object value) { System.Console.Error.WriteLine(value); }
        public static void WriteLine(string message) { System.Console.Error.WriteLine(message); }
        public static void WriteLine(string format, params object[] args) {
            System.Console.Error.WriteLine(format, args);
        }
        public static void Write(object value) { System.Console.Error.Write(value); }
        public static void Write(string message) { System.Console.Error.Write(message); }
        public static void Print(string message) { System.Console.Error.WriteLine(message); }
        public static void Print(string format, params object[] args) {
            System.Console.Error.WriteLine(format, args);
        }
        public static void WriteIf(bool ok, string message) {
            if (ok) System.Console.Error.Write(message);
        }
        public static void WriteLineIf(bool ok, string message) {
            if (ok) System.Console.Error.WriteLine(message);
        }
    }
}
"""


def _php_source(code: str) -> str:
    return code if "<?php" in code or "<?=" in code else f"<?php\n{code}"


@dataclass(frozen=True)
class Language:
    """One language: its image, the file its code goes in, how to build and run it.

    ``{main}`` in ``source_file``, ``compile`` or ``run`` is the name ``main`` finds
    in the code (else ``default_main``). ``prepare`` turns the code into the file's
    text (PHP's opening tag). A language with a ``report`` is a test runner: the
    run's verdict is the runner's report (``report_path``, stdout or the runner's
    channel), never its exit status alone.
    """

    name: str
    image: str
    source_file: str
    run: tuple[str, ...]
    compile: tuple[str, ...] | None = None
    env: dict[str, str] = field(default_factory=dict)
    main: Callable[[str], str | None] | None = None
    default_main: str = "Main"
    prepare: Callable[[str], str] | None = None
    report: ReportKind | None = None
    report_paths: tuple[str, ...] = ()
    support_files: tuple[tuple[str, str], ...] = ()
    description: str = ""
    #: SandboxFusion runs it without a build (the build is ours): its ``compile_timeout``
    #: does not bound the build, the policy's ``compile_time_s`` does.
    own_build: bool = False

    @property
    def compiled(self) -> bool:
        return self.compile is not None

    def for_code(self, code: str) -> Language:
        """This language with ``{main}`` filled in from ``code``."""
        if self.main is None:
            return self
        name = self.main(code) or self.default_main

        def fill(parts: tuple[str, ...]) -> tuple[str, ...]:
            return tuple(part.replace(MAIN, name) for part in parts)

        return replace(
            self,
            source_file=self.source_file.replace(MAIN, name),
            run=fill(self.run),
            compile=fill(self.compile) if self.compile is not None else None,
            main=None,
        )

    def source(self, code: str) -> bytes:
        """The bytes of the source file for ``code``."""
        return (self.prepare(code) if self.prepare is not None else code).encode()

    def files(self, code: str) -> dict[str, bytes]:
        """The files to write for ``code``: its source and the language's support files."""
        return {
            **{path: text.encode() for path, text in self.support_files},
            self.source_file: self.source(code),
        }


def _d_ut_main(code: str) -> str | None:
    """D unittest programs often have no ``main``: then gdc makes one (``-fmain``)."""
    return None if _D_MAIN.search(code) else "-fmain"


LANGUAGES: dict[str, Language] = {
    lang.name: lang
    for lang in (
        Language(
            "python",
            image="python",
            source_file="main.py",
            run=("python3", "main.py"),
            env=_PYTHON_ENV,
        ),
        Language(
            "bash",
            image="python",
            source_file="main.sh",
            run=("bash", "main.sh"),
        ),
        Language(
            "c",
            image="polyglot",
            source_file="main.c",
            compile=("gcc", "-O2", "-std=gnu17", "-o", "main", "main.c", "-lm"),
            run=("./main",),
        ),
        Language(
            "cpp",
            image="polyglot",
            source_file="main.cpp",
            compile=("g++", "-O2", "-std=gnu++17", "-o", "main", "main.cpp", "-lpthread"),
            run=("./main",),
        ),
        Language(
            "javascript",
            image="polyglot",
            source_file="main.js",
            run=("node", "main.js"),
        ),
        Language(
            "typescript",
            image="polyglot",
            source_file="main.ts",
            compile=("node", TS_TRANSPILE, "main.ts"),
            run=("node", "main.js"),
            description="transpiled without type checking (as tsx), then run by node",
            own_build=True,
        ),
        Language(
            "go",
            image="polyglot",
            source_file="main.go",
            compile=("go", "build", "-o", "main", "main.go"),
            run=("./main",),
            env=_GO_ENV,
        ),
        Language(
            "java",
            image="polyglot",
            source_file="Main.java",
            compile=(
                "javac",
                *(f"-J{flag}" for flag in _JVM_FLAGS),
                "-encoding",
                "UTF-8",
                "-cp",
                JAVA_CLASSPATH,
                "Main.java",
            ),
            run=("java", *_JVM_FLAGS, "-Xss64m", "-ea", "-cp", JAVA_CLASSPATH, "Main"),
            description="Main.java, class Main (as SandboxFusion), assertions on (-ea)",
        ),
        Language(
            "rust",
            image="polyglot",
            source_file="main.rs",
            compile=("rustc", "-O", "--edition", "2021", "-o", "main", "main.rs"),
            run=("./main",),
        ),
        Language(
            "php",
            image="polyglot",
            source_file="main.php",
            run=("php", "-d", "zend.assertions=1", "-d", "assert.exception=1", "-f", "main.php"),
            prepare=_php_source,
        ),
        Language(
            "ruby",
            image="polyglot",
            source_file="main.rb",
            run=("ruby", "main.rb"),
        ),
        Language(
            "lua",
            image="polyglot",
            source_file="main.lua",
            run=("lua5.4", "main.lua"),
        ),
        Language(
            "perl",
            image="polyglot",
            source_file="main.pl",
            run=("perl", "main.pl"),
        ),
        Language(
            "r",
            image="polyglot",
            source_file="main.R",
            run=("Rscript", "main.R"),
        ),
        Language(
            "csharp",
            image="polyglot",
            source_file="main.cs",
            compile=(
                "mcs",
                "-optimize+",
                "-d:DEBUG",
                "-nowarn:436",
                "-r:System.Numerics.dll",
                "-out:main.exe",
                "main.cs",
                CSHARP_DEBUG_FILE,
            ),
            run=("mono", "main.exe"),
            support_files=((CSHARP_DEBUG_FILE, CSHARP_DEBUG),),
            description="Mono's mcs with DEBUG defined; a failed Debug.Assert ends the program",
        ),
        Language(
            "scala",
            image="polyglot",
            source_file="main.scala",
            compile=("scalac", *(f"-J{flag}" for flag in _JVM_FLAGS), "-d", ".", "main.scala"),
            run=("java", *_JVM_FLAGS, "-Xss64m", "-cp", f".:{SCALA_CLASSPATH}", MAIN),
            main=scala_object,
            description="the first object is the main one",
        ),
        Language(
            "d",
            image="polyglot",
            source_file="main.d",
            compile=("gdc", "-o", "main", "main.d"),
            run=("./main",),
        ),
        Language(
            "d_ut",
            image="polyglot",
            source_file="main.d",
            compile=("gdc", "-funittest", MAIN, "-o", "main", "main.d"),
            run=("./main",),
            main=_d_ut_main,
            default_main="-funittest",
            description="unittest blocks run before main (gdc -funittest; -fmain without one)",
        ),
        Language(
            "sql",
            image="polyglot",
            source_file="main.sql",
            run=("sqlite3", "-bail", "-batch", ":memory:", ".read main.sql"),
            description="SQLite, an in-memory database",
        ),
        Language(
            "verilog",
            image="polyglot",
            source_file="main.sv",
            compile=(
                "iverilog",
                "-Wall",
                "-Winfloop",
                "-Wno-timescale",
                "-g2012",
                "-s",
                "tb",
                "-o",
                "main.vvp",
                "main.sv",
            ),
            run=("vvp", "-n", "main.vvp"),
            description="Icarus Verilog, top module tb",
        ),
        Language(
            "kotlin_script",
            image="extra",
            source_file="main.kts",
            compile=("kotlinc", *(f"-J{flag}" for flag in _JVM_FLAGS), "main.kts", "-d", "."),
            run=("java", *_JVM_FLAGS, "-Xss64m", "-ea", "-cp", KOTLIN_CLASSPATH, "KtsMainKt"),
            description="compiled once (kotlinc), run by a launcher of the script class",
            own_build=True,
        ),
        Language(
            "racket",
            image="extra",
            source_file="main.rkt",
            compile=("raco", "make", "main.rkt"),
            run=("racket", "main.rkt"),
            description="compiled once (raco make): a run starts twice as fast",
        ),
        Language(
            "haskell",
            image="extra",
            source_file="main.hs",
            compile=(
                "ghc",
                "-O1",
                "-fno-ignore-asserts",
                "-v0",
                "-outputdir",
                "/tmp/ghc",
                "-o",
                "main",
                "main.hs",
            ),
            run=("./main",),
        ),
        Language(
            "ocaml",
            image="extra",
            source_file="main.ml",
            compile=("ocamlopt", "unix.cmxa", "str.cmxa", "-o", "main", "main.ml"),
            run=("./main",),
        ),
        # SandboxFusion's test-runner modes: the code is the tests.
        Language(
            "pytest",
            image="python",
            source_file="test_main.py",
            # The platform's pytest harness (sandbox/runner/harness), in every image.
            run=("python3", "-I", "/opt/sandbox/runner/harness/pytest_channel.py", "test_main.py"),
            env=_PYTHON_ENV,
            report="pytest",
            description="pytest on the code as a test file; its report on the runner's channel",
        ),
        Language(
            "junit",
            image="polyglot",
            source_file=f"{MAIN}.java",
            compile=(
                "bash",
                "-c",
                f"exec javac -J-XX:+UseSerialGC -encoding UTF-8 -cp {JUNIT_CLASSPATH} *.java",
            ),
            run=(
                "java",
                *_JVM_FLAGS,
                "-ea",
                "-jar",
                JUNIT_CONSOLE,
                "--disable-banner",
                "--details=tree",
                "--class-path",
                JUNIT_CLASSPATH,
                "--scan-class-path",
                "--reports-dir=.junit",
            ),
            main=java_public_class,
            report="junit",
            report_paths=(".junit/TEST-junit-jupiter.xml", ".junit/TEST-junit-vintage.xml"),
            description="JUnit 5 console launcher (JUnit 4 tests too); its XML reports",
        ),
        Language(
            "go_test",
            image="polyglot",
            source_file="main_test.go",
            compile=("go", "test", "-c", "-o", "main.test", "main_test.go"),
            run=("go", "tool", "test2json", "-t", "-p", "main", "./main.test", "-test.v"),
            env=_GO_ENV,
            report="go-json",
            description="go test, built then run through test2json; its JSON events",
        ),
        Language(
            "jest",
            image="polyglot",
            source_file="main.test.ts",
            compile=("node", TS_TRANSPILE, "main.test.ts"),
            run=(
                "jest",
                "--ci",
                "--runInBand",
                "--no-watchman",
                "--cacheDirectory=/tmp/.jest",
                '--config={"transform": {}}',
                "--rootDir=.",
                "--json",
                "--outputFile=.jest-report.json",
                "main.test.js",
            ),
            report="jest-json",
            report_paths=(".jest-report.json",),
            description="jest on the transpiled test file; its JSON report",
            own_build=True,
        ),
    )
}

ALIASES = {
    "python3": "python",
    "sh": "bash",
    "c++": "cpp",
    "js": "javascript",
    "node": "javascript",
    "nodejs": "javascript",
    "ts": "typescript",
    "golang": "go",
    "rs": "rust",
    "rb": "ruby",
    "pl": "perl",
    "rscript": "r",
    "cs": "csharp",
    "c#": "csharp",
    "mono": "csharp",
    "dlang": "d",
    "kotlin": "kotlin_script",
    "kts": "kotlin_script",
    "kt": "kotlin_script",
    "rkt": "racket",
    "hs": "haskell",
    "ml": "ocaml",
    "sqlite": "sql",
    "sqlite3": "sql",
    "systemverilog": "verilog",
    "iverilog": "verilog",
    "go-test": "go_test",
}

#: Languages SandboxFusion runs that this platform refuses, and why.
REFUSED = {
    "julia": "Julia is not packaged in Debian bookworm",
    "swift": "Swift is not packaged in Debian bookworm",
    "lean": "Lean 4 (with Lake and Mathlib) is not packaged in Debian bookworm",
    "cuda": "CUDA needs a GPU and NVIDIA's toolkit, which this platform does not provide",
    "python_gpu": "python_gpu needs a GPU, which this platform does not provide",
    "python2": "Python 2 is not packaged in Debian bookworm; send python (Python 3)",
    "react": "React and its jest setup are not packaged in Debian bookworm",
    "gtest": "GoogleTest mode is not provided here; send cpp with the tests in main",
}


def get_language(name: str) -> Language:
    """The language called ``name`` (or a common alias); a clear error listing them otherwise."""
    key = ALIASES.get(name.lower(), name.lower())
    try:
        return LANGUAGES[key]
    except KeyError:
        if key in REFUSED:
            raise InvalidRequestError(
                f"language {name!r} is not supported here: {REFUSED[key]}"
            ) from None
        known = ", ".join(sorted(LANGUAGES))
        raise InvalidRequestError(f"unknown language {name!r}; use one of: {known}") from None

"""How each language's program is written into the sandbox, compiled and run.

Compiled languages build once per submission (as the sandbox uid, under the
policy's ``compile_time_s``) into ``/workspace``; the build's output is the
compile verdict's message. Interpreted languages run their source directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import InvalidRequestError

# Toolchains that write caches under $HOME or elsewhere get them in /tmp.
_GO_ENV = {"GOCACHE": "/tmp/.gocache", "GOPATH": "/tmp/.gopath", "GO111MODULE": "off"}
# A small, fast-starting JVM: one GC thread, no C2 compiler for short programs.
_JVM_FLAGS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto")


@dataclass(frozen=True)
class Language:
    """One language: its image, the file its code goes in, how to build and run it."""

    name: str
    image: str
    source_file: str
    run: tuple[str, ...]
    compile: tuple[str, ...] | None = None
    env: dict[str, str] = field(default_factory=dict)

    @property
    def compiled(self) -> bool:
        return self.compile is not None


LANGUAGES: dict[str, Language] = {
    lang.name: lang
    for lang in (
        Language("python", image="python", source_file="main.py", run=("python3", "main.py")),
        Language("bash", image="python", source_file="main.sh", run=("bash", "main.sh")),
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
            compile=("g++", "-O2", "-std=gnu++17", "-o", "main", "main.cpp"),
            run=("./main",),
        ),
        Language("javascript", image="polyglot", source_file="main.js", run=("node", "main.js")),
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
                "Main.java",
            ),
            run=("java", *_JVM_FLAGS, "-Xss64m", "-cp", ".", "Main"),
        ),
        Language(
            "rust",
            image="polyglot",
            source_file="main.rs",
            compile=("rustc", "-O", "--edition", "2021", "-o", "main", "main.rs"),
            run=("./main",),
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
    "golang": "go",
    "rs": "rust",
}


def get_language(name: str) -> Language:
    """The language called ``name`` (or a common alias); a clear error listing them otherwise."""
    key = ALIASES.get(name.lower(), name.lower())
    try:
        return LANGUAGES[key]
    except KeyError:
        known = ", ".join(sorted(LANGUAGES))
        raise InvalidRequestError(f"unknown language {name!r}; use one of: {known}") from None

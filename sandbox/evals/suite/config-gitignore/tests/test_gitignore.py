import os
import shutil
import subprocess
from pathlib import Path

WORK = Path(os.environ["WORK"])

PATHS = [
    "README.md",
    "main.py",
    ".gitignore",
    ".env",
    ".env.example",
    ".envrc",
    ".env.local",
    "config/.env.production",
    "config/.env.example",
    "a/b/c/.env",
    "config/settings.toml",
    "src/app/__init__.py",
    "src/app/core.py",
    "src/app/__pycache__/core.cpython-311.pyc",
    "src/app/__pycache__/notes.txt",
    "lib/old.pyc",
    "lib/x.pyc.txt",
    "src/dist/index.js",
    "src/dist/build/bundle.js",
    "build/app.o",
    "build/lib/util.o",
    "packages/web/build/bundle.js",
    "tools/build/release.sh",
    "tools/build/README.md",
    "tools/build/notes.log",
    "tools/build/build/tmp.o",
    "tools/buildx/a.sh",
    "sub/tools/build/x.sh",
    "scripts/build",
    "docs/build.md",
    "dist/app-1.0.tar.gz",
    "docs/dist/guide.md",
    "logs/.gitkeep",
    "logs/app.log",
    "logs/2024/old.txt",
    "logs/sub/.gitkeep",
    "src/logs/keep.txt",
    "logs2/a.txt",
    "node_modules/leftpad/index.js",
    "web/node_modules/react/index.js",
    "node_modules.txt",
    "tests/test_core.py",
    "tests/fixtures/certs/test.pem",
    "tests/fixtures/keys/dev.key",
    "tests/fixtures/deep/a/b/c.key",
    "tests/fixtures/run.log",
    "tests/fixturesX/a.key",
    "tests/unit/a.pem",
    "src/tests/fixtures/a.pem",
    "deploy/prod.key",
    "deploy/server.pem",
    "secrets.key.txt",
    "notes.txt~",
    "dir/file.md~",
    ".main.py.swp",
    "src/.core.py.swp",
    ".DS_Store",
    "src/app/.DS_Store",
    "Thumbs.db",
    "debug.log",
]


def ignored(path):
    parts = path.split("/")
    name, dirs = parts[-1], parts[:-1]
    if "__pycache__" in dirs or name.endswith(".pyc"):
        return True
    if any(d == "build" and not (i == 1 and dirs[0] == "tools") for i, d in enumerate(dirs)):
        return True
    if dirs[:1] == ["dist"] or "node_modules" in dirs:
        return True
    if (name == ".env" or name.startswith(".env.")) and name != ".env.example":
        return True
    if dirs[:1] == ["logs"] and path != "logs/.gitkeep":
        return True
    if name.endswith((".log", "~", ".swp")) or name == ".DS_Store":
        return True
    return name.endswith((".key", ".pem")) and dirs[:2] != ["tests", "fixtures"]


def test_there_is_one_gitignore_at_the_root():
    assert (WORK / ".gitignore").is_file()
    others = [p for p in WORK.rglob(".gitignore") if p != WORK / ".gitignore"]
    assert others == []


def test_git_ignores_exactly_the_required_paths(tmp_path):
    repo = tmp_path / "repo"
    for path in PATHS:
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        if path != ".gitignore":
            (repo / path).write_text(f"{path}\n")
    shutil.copy(WORK / ".gitignore", repo / ".gitignore")
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(tmp_path)}
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True, env=env)
    listed = subprocess.run(
        ["git", "ls-files", "--others", "--exclude-standard"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout.splitlines()
    should_track = {p for p in PATHS if not ignored(p)}
    wrongly_ignored = sorted(should_track - set(listed))
    wrongly_tracked = sorted(set(listed) - should_track)
    assert not wrongly_ignored and not wrongly_tracked, (wrongly_ignored, wrongly_tracked)

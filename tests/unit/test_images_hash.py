"""Image tags follow the content of the sources, and nothing else."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sandbox.errors import InvalidRequestError, NotFoundError
from sandbox.host import images

REAL_ROOT = images.repo_root()


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of images/ and sandbox/runner that the functions read instead of the repo."""
    shutil.copytree(REAL_ROOT / "images", tmp_path / "images")
    runner = tmp_path / "sandbox" / "runner"
    shutil.copytree(REAL_ROOT / "sandbox" / "runner", runner)
    if not any(runner.glob("*.py")):
        (runner / "__main__.py").write_text("print('placeholder')\n")
    monkeypatch.setattr(images, "repo_root", lambda: tmp_path)
    return tmp_path


def test_tag_shape_and_stability(root: Path) -> None:
    tag = images.image_tag("python")
    repository, digest = tag.split(":")
    assert repository == "sandbox-python"
    assert len(digest) == images.HASH_HEX_DIGITS
    int(digest, 16)
    assert images.image_tag("python") == tag
    assert images.base_tag().startswith("sandbox-base:")


def test_copy_hashes_like_the_repo(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copied = images.image_tag("python"), images.base_tag()
    monkeypatch.setattr(images, "repo_root", lambda: REAL_ROOT)
    assert (images.image_tag("python"), images.base_tag()) == copied


def test_dockerfile_change_changes_tag(root: Path) -> None:
    before = images.image_tag("python")
    dockerfile = root / "images" / "python" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "\n# changed\n")
    assert images.image_tag("python") != before


def test_new_file_in_image_dir_changes_tag(root: Path) -> None:
    before = images.image_tag("python")
    (root / "images" / "python" / "extra.txt").write_text("x")
    assert images.image_tag("python") != before


def test_runner_change_changes_tag(root: Path) -> None:
    before = images.image_tag("python")
    source = sorted((root / "sandbox" / "runner").glob("*.py"))[0]
    source.write_text(source.read_text() + "\n# changed\n")
    assert images.image_tag("python") != before


def test_base_change_changes_base_and_image_tags(root: Path) -> None:
    before = images.image_tag("python"), images.base_tag()
    (root / "images" / "base" / "rootfs" / "etc" / "sandbox-extra").write_text("x")
    after = images.image_tag("python"), images.base_tag()
    assert after[0] != before[0]
    assert after[1] != before[1]


def test_unrelated_changes_keep_tag(root: Path) -> None:
    before = images.image_tag("python"), images.base_tag()
    runner = root / "sandbox" / "runner"
    # Bytecode caches and non-Python files of the runner are not part of the image.
    (runner / "__pycache__").mkdir(exist_ok=True)
    (runner / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    (runner / "notes.txt").write_text("not copied")
    # Another part of the library, and another image, do not matter either.
    (root / "sandbox" / "other.py").write_text("x = 1\n")
    other = root / "images" / "other"
    other.mkdir()
    (other / "Dockerfile").write_text("ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\n")
    # Nor does the modification time of an unchanged file.
    dockerfile = root / "images" / "python" / "Dockerfile"
    dockerfile.write_bytes(dockerfile.read_bytes())
    assert (images.image_tag("python"), images.base_tag()) == before


def test_base_kind_is_part_of_the_tag(root: Path) -> None:
    assert images.image_tag("python", "registry") != images.image_tag("python", "debootstrap")
    with pytest.raises(InvalidRequestError):
        images.image_tag("python", "nonsense")


def test_adding_a_directory_adds_an_image(root: Path) -> None:
    assert "extra_lang" not in images.image_names()
    extra_lang = root / "images" / "extra_lang"
    extra_lang.mkdir()
    (extra_lang / "Dockerfile").write_text("ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\n")
    assert "extra_lang" in images.image_names()
    assert images.image_tag("extra_lang").startswith("sandbox-extra_lang:")
    assert "base" not in images.image_names()


def test_unknown_image_is_not_found(root: Path) -> None:
    with pytest.raises(NotFoundError, match="unknown image"):
        images.image_tag("cobol")


def test_image_names_constant_matches_checkout() -> None:
    assert "python" in images.IMAGE_NAMES
    assert images.image_names() == images.IMAGE_NAMES


def test_build_context_hashes_like_its_sources(root: Path, tmp_path: Path) -> None:
    context = tmp_path / "context"
    images._assemble_context("python", context)
    assert (context / "Dockerfile").is_file()
    runner = [rel for rel, _ in images._files(context / "runner")]
    assert runner == [rel for rel, _ in images._files(root / "sandbox" / "runner", "*.py")]
    image_copy = [(rel, p) for rel, p in images._files(context) if not rel.startswith("runner/")]
    runner_copy = images._files(context / "runner")
    digest = images._image_hash("python", "debootstrap", image_copy, runner_copy)
    assert f"sandbox-python:{digest}" == images.image_tag("python")

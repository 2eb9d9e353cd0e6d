"""Unit tests of sandbox.policy: loading, refusals, extends, mounts, limits, digest."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, get_args, get_origin

import pytest
from pydantic import BaseModel, ValidationError

from sandbox.errors import LimitError, PolicyError
from sandbox.policy import (
    MOUNT_ALLOWLIST_ENV,
    Env,
    LimitOverrides,
    Mount,
    Policy,
    Resources,
    effective_limits,
    lint_policy,
    load_policy,
    load_policy_dir,
    parse_policy,
)
from sandbox.policy import limits as policy_mod
from sandbox.policy import model as policy_model

REPO = Path(__file__).resolve().parents[2]
POLICIES = REPO / "policies"


@pytest.fixture(autouse=True)
def _no_ambient_allowlist(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MOUNT_ALLOWLIST_ENV, raising=False)


def refused(text: str, key: str, *fragments: str, **kwargs: Any) -> PolicyError:
    """Assert that ``text`` is refused at ``key`` with every fragment in the message."""
    kwargs.setdefault("name", "t")
    with pytest.raises(PolicyError) as info:
        parse_policy(text, **kwargs)
    err = info.value
    assert err.key == key, str(err)
    for fragment in fragments:
        assert fragment in str(err), str(err)
    assert err.source in str(err)
    return err


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------
# Shipped policies
# ---------------------------------------------------------------------------------------


def test_shipped_policies_load_and_lint() -> None:
    policies = load_policy_dir(POLICIES)
    assert set(policies) == {
        "default",
        "strict",
        "gvisor",
        "harbor",
        "harbor-gvisor",
        "harbor-verifier",
    }
    default, strict, gvisor = policies["default"], policies["strict"], policies["gvisor"]

    assert default.name == "default"
    assert default.resources == Resources()
    assert default.env.set == {"LANG": "C.UTF-8"}
    assert default.runtime == "runc"
    assert (default.pool.warm, default.pool.max, default.pool.max_uses) == (2, 8, 100)
    assert default.digest == Policy(name="x", env=Env(set={"LANG": "C.UTF-8"})).digest
    assert lint_policy(default) == []

    r = strict.resources
    assert (r.cpus, r.memory_mb, r.pids, r.wall_time_s, r.cpu_time_s) == (0.5, 256, 64, 5, 5)
    assert (r.stdout_bytes, r.stderr_bytes) == (256 * 1024, 256 * 1024)
    assert (r.open_files, r.file_size_mb) == (64, 8)
    assert strict.filesystem.workspace.size_mb == 16
    assert strict.filesystem.tmp.size_mb == 16
    assert strict.filesystem.workspace.inodes == default.filesystem.workspace.inodes
    assert (strict.pool.warm, strict.pool.max, strict.pool.max_uses) == (1, 4, 20)
    assert strict.env.set == {"LANG": "C.UTF-8"}
    assert lint_policy(strict) == []

    assert gvisor.runtime == "runsc"
    assert (gvisor.pool.warm, gvisor.pool.max) == (0, 4)
    assert gvisor.resources == default.resources
    warnings = lint_policy(gvisor)
    assert any("pool.warm" in w for w in warnings)
    assert any("runsc" in w for w in warnings)

    harbor = policies["harbor"]  # Harbor's fixed paths writable, long commands
    assert [(t.path, t.size_mb) for t in harbor.filesystem.extra_tmpfs] == [
        ("/logs", 64),
        ("/tests", 64),
        ("/solution", 64),
    ]
    r = harbor.resources
    assert (r.memory_mb, r.wall_time_s, r.cpu_time_s, r.stdout_bytes) == (
        2048,
        3600,
        3600,
        16 << 20,
    )
    assert harbor.filesystem.read_only_root and harbor.network.mode == "none"
    assert harbor.runtime == "runc" and harbor.pool.session_idle_ttl_s == 3600
    assert [w for w in lint_policy(harbor) if "pool.warm" not in w] == []
    verifier = policies["harbor-verifier"]  # the image's own /tests stays visible
    assert [t.path for t in verifier.filesystem.extra_tmpfs] == ["/logs"]
    assert verifier.resources == harbor.resources and verifier.pool == harbor.pool


@pytest.mark.parametrize("name", ["default", "strict", "gvisor", "harbor", "harbor-verifier"])
def test_shipped_files_start_with_a_comment(name: str) -> None:
    assert (POLICIES / f"{name}.yaml").read_text().startswith("# ")


def test_defaults_match_spec() -> None:
    p = Policy(name="d")
    assert p.filesystem.read_only_root is True
    assert (p.filesystem.workspace.size_mb, p.filesystem.workspace.inodes) == (64, 8192)
    assert p.filesystem.shm_mb == 16
    assert p.network.mode == "none"
    assert (p.user.uid, p.user.gid) == (10001, 10001)
    assert p.resources.swap_mb == 0


# ---------------------------------------------------------------------------------------
# extends
# ---------------------------------------------------------------------------------------


def test_extends_deep_merges(tmp_path: Path) -> None:
    write(
        tmp_path / "base.yaml",
        "resources: {memory_mb: 1024, pids: 200}\n"
        "env: {set: {LANG: C.UTF-8, A: '1'}, allow: [SEED]}\n"
        "filesystem: {extra_tmpfs: [{path: /scratch, size_mb: 8, inodes: 100}]}\n",
    )
    write(
        tmp_path / "child.yaml",
        "extends: base\n"
        "resources: {memory_mb: 256}\n"
        "env: {set: {B: '2'}, allow: [OTHER]}\n"
        "filesystem: {extra_tmpfs: [{path: /cache, size_mb: 4, inodes: 50}]}\n",
    )
    child = load_policy(tmp_path / "child.yaml")
    assert child.name == "child"
    assert child.resources.memory_mb == 256  # child wins
    assert child.resources.pids == 200  # inherited
    assert child.env.set == {"LANG": "C.UTF-8", "A": "1", "B": "2"}  # mappings merge
    assert child.env.allow == ("OTHER",)  # lists replace
    assert [t.path for t in child.filesystem.extra_tmpfs] == ["/cache"]


def test_extends_relative_path_and_parse_policy_base_dir(tmp_path: Path) -> None:
    (tmp_path / "common").mkdir()
    write(tmp_path / "common" / "base.yml", "pool: {warm: 1}\n")
    p = load_policy(write(tmp_path / "c.yaml", "extends: common/base.yml\n"))
    assert p.pool.warm == 1
    p = parse_policy("extends: default\n", name="x", base_dir=POLICIES)
    assert p.digest == load_policy(POLICIES / "default.yaml").digest


def test_extends_unknown_parent(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="not found") as info:
        load_policy(write(tmp_path / "c.yaml", "extends: nope\n"))
    assert info.value.key == "extends"
    assert info.value.source.endswith("c.yaml")


def test_extends_needs_a_directory() -> None:
    refused("extends: default\n", "extends", "base_dir")


@pytest.mark.parametrize("ref", ["/etc/passwd", "~/x.yaml", "x.txt/", "sub/file.txt", "''", "3"])
def test_extends_bad_reference(tmp_path: Path, ref: str) -> None:
    with pytest.raises(PolicyError) as info:
        load_policy(write(tmp_path / "c.yaml", f"extends: {ref}\n"))
    assert info.value.key == "extends"


def test_extends_cycle(tmp_path: Path) -> None:
    write(tmp_path / "a.yaml", "extends: b\n")
    write(tmp_path / "b.yaml", "extends: a\n")
    with pytest.raises(PolicyError, match="cycle") as info:
        load_policy(tmp_path / "a.yaml")
    assert info.value.key == "extends"
    with pytest.raises(PolicyError, match="cycle"):
        load_policy(write(tmp_path / "self.yaml", "extends: self\n"))


def test_extends_depth(tmp_path: Path) -> None:
    depth = policy_mod.MAX_EXTENDS_DEPTH
    write(tmp_path / "p0.yaml", "pool: {warm: 0}\n")
    for i in range(1, depth + 2):
        write(tmp_path / f"p{i}.yaml", f"extends: p{i - 1}\n")
    assert load_policy(tmp_path / f"p{depth}.yaml").pool.warm == 0  # 8 hops: fine
    with pytest.raises(PolicyError, match="deep") as info:
        load_policy(tmp_path / f"p{depth + 1}.yaml")  # 9 hops: refused
    assert info.value.key == "extends"


def test_extends_depth_is_the_same_from_text(tmp_path: Path) -> None:
    depth = policy_mod.MAX_EXTENDS_DEPTH
    write(tmp_path / "p0.yaml", "pool: {warm: 0}\n")
    for i in range(1, depth + 1):
        write(tmp_path / f"p{i}.yaml", f"extends: p{i - 1}\n")
    text = f"extends: p{depth - 1}\n"  # 8 hops
    assert parse_policy(text, name="t", base_dir=tmp_path).pool.warm == 0
    with pytest.raises(PolicyError, match="deep"):
        parse_policy(f"extends: p{depth}\n", name="t", base_dir=tmp_path)  # 9 hops


def test_extends_errors_name_the_file_that_set_the_key(tmp_path: Path) -> None:
    write(tmp_path / "base.yaml", "resources: {pids: 1}\n")
    write(tmp_path / "child.yaml", "extends: base\nresources: {memory_mb: 128}\n")
    write(tmp_path / "ok.yaml", "extends: base\nresources: {pids: 64}\n")
    with pytest.raises(PolicyError) as info:
        load_policy(tmp_path / "child.yaml")
    assert info.value.key == "resources.pids"
    assert info.value.source.endswith("base.yaml")
    assert load_policy(tmp_path / "ok.yaml").resources.pids == 64
    # A dangerous key in a parent is reported against the parent.
    write(tmp_path / "bad.yaml", "privileged: true\n")
    with pytest.raises(PolicyError) as info:
        load_policy(write(tmp_path / "c2.yaml", "extends: bad\n"))
    assert info.value.source.endswith("bad.yaml")
    assert info.value.key == "privileged"


# ---------------------------------------------------------------------------------------
# The file and the YAML
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "   \n", "# only a comment\n", "---\n"])
def test_empty_file(text: str) -> None:
    refused(text, "", "empty")


@pytest.mark.parametrize("text", ["- a\n- b\n", "just a string\n", "42\n"])
def test_document_must_be_a_mapping(text: str) -> None:
    refused(text, "", "not a mapping")


def test_huge_file(tmp_path: Path) -> None:
    big = "# " + "x" * policy_mod.MAX_POLICY_BYTES + "\nresources: {}\n"
    refused(big, "", str(policy_mod.MAX_POLICY_BYTES))
    with pytest.raises(PolicyError, match=str(policy_mod.MAX_POLICY_BYTES)):
        load_policy(write(tmp_path / "big.yaml", big))


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin.yaml"
    path.write_bytes(b"env: {set: {A: '\xe9'}}\n")
    with pytest.raises(PolicyError, match="UTF-8"):
        load_policy(path)


def test_invalid_yaml_gives_line_and_column() -> None:
    refused("resources:\n  cpus: [1, 2\n", "", "invalid YAML", "line 3")
    refused("resources: {cpus: 1\n", "", "line", "column")


def test_multiple_documents() -> None:
    refused("resources: {}\n---\npool: {}\n", "", "more than one YAML document")


def test_duplicate_keys_at_any_depth() -> None:
    refused("pool: {}\npool: {}\n", "pool", "duplicate key 'pool'", "line 2")
    refused("resources:\n  cpus: 1\n  cpus: 2\n", "resources.cpus", "duplicate key")
    refused(
        "filesystem:\n  extra_tmpfs:\n    - {path: /a, path: /b, size_mb: 1, inodes: 16}\n",
        "filesystem.extra_tmpfs[0].path",
        "duplicate key",
    )
    refused("env: {set: {A: x, A: y}}\n", "env.set.A", "duplicate key")


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("resources: !!python/object/apply:os.system ['echo pwned > /dev/null']\n", "resources"),
        ("env: {set: {A: !!python/name:os.system ''}}\n", "env.set.A"),
        ("resources: !foo {cpus: 1}\n", "resources"),
        ("resources: {cpus: !!float 1}\n", "resources.cpus"),
        ("env: {set: {A: !!str x}}\n", "env.set.A"),
        ("!!map {pool: {}}\n", ""),
        ("pool: ! {}\n", "pool"),
    ],
)
def test_tags_are_refused(text: str, key: str) -> None:
    refused(text, key, "YAML tags are refused")


def test_python_tag_never_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    text = f"resources: !!python/object/apply:os.system ['touch {marker}']\n"
    refused(text, "resources", "tags")
    assert not marker.exists()


def test_anchors_and_aliases_are_refused() -> None:
    refused("resources: &r {cpus: 1}\n", "resources", "anchors")
    laughs = "a: &a [x, x]\nb: &b [*a, *a]\nc: &c [*b, *b]\nd: [*c, *c]\n"
    refused(laughs, "a", "anchors")


def test_other_yaml_features_are_refused() -> None:
    refused("%YAML 1.1\n---\npool: {}\n", "", "directives")
    refused("resources:\n  <<: {cpus: 1}\n", "resources", "merge keys")
    refused("1: x\n", "", "read as an integer")
    refused("yes: x\n", "", "read as a boolean")
    refused("? [a]\n: x\n", "", "not a string")
    deep = "a: " + "[" * 40 + "]" * 40 + "\n"
    assert "nesting" in str(refused(deep, "a" + "[0]" * 15))


def test_null_values_are_refused() -> None:
    refused("resources:\n", "resources", "no value")
    refused("resources: {cpus: ~}\n", "resources.cpus", "no value")
    refused("env: {allow: [A, null]}\n", "env.allow[1]", "empty")


def test_name_is_not_a_yaml_key() -> None:
    refused("name: other\n", "name", "file name")


# ---------------------------------------------------------------------------------------
# Keys, types and bounds
# ---------------------------------------------------------------------------------------


def test_unknown_keys() -> None:
    err = refused("resources: {memroy_mb: 5}\n", "resources.memroy_mb", "unknown key")
    assert "did you mean 'memory_mb'" in str(err)
    refused("colour: blue\n", "colour", "unknown key", "resources")
    refused("pool: {size: 3}\n", "pool.size", "unknown key", "max_uses")
    refused(
        "filesystem: {extra_tmpfs: [{path: /a, size_mb: 1, inodes: 16, mode: x}]}\n",
        "filesystem.extra_tmpfs[0].mode",
        "unknown key",
    )


@pytest.mark.parametrize(
    ("text", "key", "fragment"),
    [
        ("resources: {memory_mb: '512'}\n", "resources.memory_mb", "without quotes"),
        ("resources: {memory_mb: true}\n", "resources.memory_mb", "whole number"),
        ("resources: {memory_mb: 512.0}\n", "resources.memory_mb", "decimal point"),
        ("resources: {cpus: '1'}\n", "resources.cpus", "expected a number"),
        ("resources: {cpus: true}\n", "resources.cpus", "expected a number"),
        ("resources: {cpus: .inf}\n", "resources.cpus", "finite"),
        ("resources: {cpus: .nan}\n", "resources.cpus", "finite"),
        ("filesystem: {read_only_root: 'true'}\n", "filesystem.read_only_root", "true or false"),
        ("filesystem: {read_only_root: 1}\n", "filesystem.read_only_root", "true or false"),
        ("env: {set: {A: 1}}\n", "env.set.A", "quotes"),
        ("env: {allow: [1]}\n", "env.allow[0]", "expected a string"),
        ("env: {allow: SEED}\n", "env.allow", "expected a list"),
        ("resources: [1]\n", "resources", "expected a mapping"),
        ("runtime: kata\n", "runtime", "runsc"),
        (
            "filesystem: {extra_tmpfs: [{path: /a, size_mb: 1}]}\n",
            "filesystem.extra_tmpfs[0].inodes",
            "required",
        ),
    ],
)
def test_wrong_types(text: str, key: str, fragment: str) -> None:
    refused(text, key, fragment)


def test_cpus_accepts_an_integer() -> None:
    assert parse_policy("resources: {cpus: 2}\n", name="t").resources.cpus == 2.0


@pytest.mark.parametrize(
    ("text", "key", "bound"),
    [
        ("resources: {cpus: 0}\n", "resources.cpus", "0.05"),
        ("resources: {cpus: 65}\n", "resources.cpus", "64"),
        ("resources: {memory_mb: 100000}\n", "resources.memory_mb", "65536"),
        ("resources: {memory_mb: -1}\n", "resources.memory_mb", "16"),
        ("resources: {pids: -5}\n", "resources.pids", "8"),
        ("resources: {pids: 99999}\n", "resources.pids", "4096"),
        ("resources: {wall_time_s: 0}\n", "resources.wall_time_s", "0.1"),
        ("resources: {cpu_time_s: 86400}\n", "resources.cpu_time_s", "3600"),
        ("resources: {stdout_bytes: 0}\n", "resources.stdout_bytes", "1"),
        ("resources: {stderr_bytes: 1000000000}\n", "resources.stderr_bytes", "67108864"),
        ("resources: {open_files: 1}\n", "resources.open_files", "16"),
        ("resources: {file_size_mb: 5000}\n", "resources.file_size_mb", "4096"),
        ("filesystem: {shm_mb: 0}\n", "filesystem.shm_mb", "1"),
        ("filesystem: {workspace: {size_mb: 9000}}\n", "filesystem.workspace.size_mb", "8192"),
        ("filesystem: {tmp: {inodes: 4}}\n", "filesystem.tmp.inodes", "16"),
        ("user: {uid: 500}\n", "user.uid", "1000"),
        ("user: {gid: 2147483647}\n", "user.gid", "2147483646"),
        ("pool: {warm: 65}\n", "pool.warm", "64"),
        ("pool: {max: 0}\n", "pool.max", "1"),
        ("pool: {max_uses: 1000000}\n", "pool.max_uses", "100000"),
    ],
)
def test_bounds_name_the_bound(text: str, key: str, bound: str) -> None:
    err = refused(text, key)
    assert re.search(rf"(maximum|minimum) {re.escape(bound)}\b", str(err)), str(err)


def test_pool_warm_must_not_exceed_max() -> None:
    refused("pool: {warm: 9, max: 8}\n", "pool.warm", "pool.max")


def test_too_many_entries() -> None:
    entries = ", ".join(f"{{path: /t{i}, size_mb: 1, inodes: 16}}" for i in range(9))
    refused(f"filesystem: {{extra_tmpfs: [{entries}]}}\n", "filesystem.extra_tmpfs", "maximum")


def test_partial_tmpfs_keeps_the_other_default() -> None:
    p = parse_policy("filesystem: {workspace: {inodes: 100}}\n", name="t")
    assert (p.filesystem.workspace.size_mb, p.filesystem.workspace.inodes) == (64, 100)


# ---------------------------------------------------------------------------------------
# Dangerous settings
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("privileged: true\n", "privileged"),
        ("cap_add: [SYS_ADMIN]\n", "cap_add"),
        ("resources: {capabilities: [NET_ADMIN]}\n", "resources.capabilities"),
        ("add_capabilities: [ALL]\n", "add_capabilities"),
        ("security_opt: ['seccomp=unconfined']\n", "security_opt"),
        ("filesystem: {seccomp: unconfined}\n", "filesystem.seccomp"),
        ("apparmor: unconfined\n", "apparmor"),
        ("pid: host\n", "pid"),
        ("pid_mode: host\n", "pid_mode"),
        ("ipc: host\n", "ipc"),
        ("ipc_mode: host\n", "ipc_mode"),
        ("uts: host\n", "uts"),
        ("uts_mode: host\n", "uts_mode"),
        ("userns: host\n", "userns"),
        ("userns_mode: host\n", "userns_mode"),
        ("network_mode: host\n", "network_mode"),
        ("network: {network_mode: host}\n", "network.network_mode"),
        ("devices: [/dev/kvm]\n", "devices"),
        ("sysctls: {net.ipv4.ip_forward: '1'}\n", "sysctls"),
        ("volumes: ['/:/host']\n", "volumes"),
        ("filesystem: {binds: ['/:/host']}\n", "filesystem.binds"),
        ("docker_socket: true\n", "docker_socket"),
        ("Cap-Add: [ALL]\n", "Cap-Add"),
        (
            "filesystem: {mounts: [{source: /x, target: /y, privileged: true}]}\n",
            "filesystem.mounts[0].privileged",
        ),
    ],
)
def test_dangerous_keys_get_a_specific_message(text: str, key: str) -> None:
    err = refused(text, key, "dangerous setting", "remove it")
    assert "unknown key" not in str(err)


def test_dangerous_values() -> None:
    refused("network: {mode: host}\n", "network.mode", "host networking is refused")
    refused("network: {mode: bridge}\n", "network.mode", "use one of 'none', 'allowlist'")
    refused("filesystem: {read_only_root: false}\n", "filesystem.read_only_root", "writable root")
    refused("user: {uid: 0}\n", "user.uid", "root")
    refused("user: {gid: 0}\n", "user.gid", "root")
    refused("resources: {swap_mb: 512}\n", "resources.swap_mb", "swap must stay off")
    refused("resources: {swap_mb: -1}\n", "resources.swap_mb", "swap must stay off")


def test_env_names_are_data_not_settings() -> None:
    p = parse_policy("env: {set: {pid: '1', devices: none}}\n", name="t")
    assert p.env.set["pid"] == "1"


@pytest.mark.parametrize(
    ("text", "key", "fragment"),
    [
        ("env: {set: {'1A': x}}\n", "env.set.1A", "not a valid variable name"),
        ("env: {set: {'A-B': x}}\n", "env.set.A-B", "not a valid variable name"),
        ('env: {set: {A: "x\\0y"}}\n', "env.set.A", "NUL"),
        ("env: {set: {LD_PRELOAD: /x.so}}\n", "env.set.LD_PRELOAD", "dynamic loader"),
        ("env: {allow: [PYTHONPATH]}\n", "env.allow[0]", "start-up hook"),
        ("env: {allow: [LD_LIBRARY_PATH]}\n", "env.allow[0]", "dynamic loader"),
        ("env: {allow: [A, A]}\n", "env.allow[1]", "twice"),
        ("env: {set: {A: x}, allow: [A]}\n", "env.allow[0]", "both"),
    ],
)
def test_env_refusals(text: str, key: str, fragment: str) -> None:
    refused(text, key, fragment)


# ---------------------------------------------------------------------------------------
# Mounts and extra tmpfs
# ---------------------------------------------------------------------------------------


def mount_yaml(source: str, target: str = "/data") -> str:
    return f"filesystem:\n  mounts:\n    - {{source: '{source}', target: '{target}'}}\n"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    root = tmp_path / "srv"
    (root / "data").mkdir(parents=True)
    assert os.path.realpath(root) == str(root)
    return root


def test_mount_allowlisted_by_parameter(data_dir: Path) -> None:
    source = str(data_dir / "data")
    p = parse_policy(mount_yaml(source), name="t", mount_allowlist=[str(data_dir)])
    assert p.filesystem.mounts == (Mount.model_construct(source=source, target="/data"),)
    # The allowlisted root itself may be mounted.
    parse_policy(mount_yaml(str(data_dir)), name="t", mount_allowlist=[str(data_dir)])
    assert any("readable by untrusted code" in w for w in lint_policy(p))


def test_mount_allowlisted_by_env(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = str(data_dir / "data")
    refused(
        mount_yaml(source), "filesystem.mounts[0].source", "add its root to " + MOUNT_ALLOWLIST_ENV
    )
    monkeypatch.setenv(MOUNT_ALLOWLIST_ENV, os.pathsep.join(["/nonexistent", str(data_dir)]))
    assert parse_policy(mount_yaml(source), name="t").filesystem.mounts[0].source == source
    # An explicit allowlist replaces the variable; an empty one allows nothing.
    refused(
        mount_yaml(source), "filesystem.mounts[0].source", "allowed: nothing", mount_allowlist=[]
    )
    monkeypatch.setenv(MOUNT_ALLOWLIST_ENV, "")
    refused(mount_yaml(source), "filesystem.mounts[0].source", "not under an allowlisted root")


def test_mount_not_under_the_allowlist(data_dir: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    refused(
        mount_yaml(str(other)),
        "filesystem.mounts[0].source",
        "not under an allowlisted root",
        mount_allowlist=[str(data_dir)],
    )
    # A sibling sharing a prefix is not "under" the root.
    sibling = tmp_path / "srv2"
    sibling.mkdir()
    refused(
        mount_yaml(str(sibling)),
        "filesystem.mounts[0].source",
        "not under",
        mount_allowlist=[str(data_dir)],
    )


def test_bad_allowlist_entries(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = str(data_dir / "data")
    refused(mount_yaml(source), "filesystem.mounts", "absolute", mount_allowlist=["relative"])
    monkeypatch.setenv(MOUNT_ALLOWLIST_ENV, "/")
    refused(mount_yaml(source), "filesystem.mounts", "every host path")
    # A bad allowlist does not matter to a policy without mounts.
    assert parse_policy("pool: {warm: 1}\n", name="t").pool.warm == 1


def test_bad_allowlist_with_malformed_filesystem() -> None:
    refused("filesystem: [1]\n", "filesystem", "expected a mapping", mount_allowlist=["rel"])


def test_symlinked_mount_source(data_dir: Path) -> None:
    link = data_dir / "link"
    link.symlink_to(data_dir / "data")
    refused(
        mount_yaml(str(link)),
        "filesystem.mounts[0].source",
        "symbolic link",
        mount_allowlist=[str(data_dir)],
    )
    # A link higher up the path is caught too.
    (data_dir / "data" / "inner").mkdir()
    refused(
        mount_yaml(str(link / "inner")),
        "filesystem.mounts[0].source",
        "symbolic link",
        mount_allowlist=[str(data_dir)],
    )
    # And a link that points at a system path.
    escape = data_dir / "etc"
    escape.symlink_to("/etc")
    refused(
        mount_yaml(str(escape)),
        "filesystem.mounts[0].source",
        "symbolic link",
        mount_allowlist=[str(data_dir)],
    )


def test_missing_mount_source(data_dir: Path) -> None:
    refused(
        mount_yaml(str(data_dir / "missing")),
        "filesystem.mounts[0].source",
        "does not exist",
        mount_allowlist=[str(data_dir)],
    )


@pytest.mark.parametrize(
    ("source", "fragment"),
    [
        ("/", "whole host filesystem"),
        ("/var/run/docker.sock", "Docker socket"),
        ("/run/docker.sock", "Docker socket"),
        ("/var/run", "Docker socket"),
        ("/run", "Docker socket"),
        ("/var", "Docker socket"),
        ("/etc", "system path"),
        ("/usr", "system path"),
        ("/home", "system path"),
        ("/var/lib", "system path"),
        ("/proc/1/root", "inside /proc"),
        ("/sys/fs/cgroup", "inside /sys"),
        ("/dev/sda", "inside /dev"),
        ("/root/.ssh", "inside /root"),
        ("/var/lib/docker/volumes", "inside /var/lib/docker"),
        ("/run/secrets", "inside /run"),
    ],
)
def test_system_mount_sources_refused_even_if_allowlisted(source: str, fragment: str) -> None:
    allow = ["/etc", "/usr", "/home", "/var", "/proc", "/sys", "/dev", "/root", "/run"]
    refused(mount_yaml(source), "filesystem.mounts[0].source", fragment, mount_allowlist=allow)


@pytest.mark.parametrize(
    ("path", "fragment"),
    [
        ("/srv/../etc", "'..'"),
        ("/srv/data/..", "'..'"),
        ("srv/data", "absolute"),
        ("/srv//data", "'//'"),
        ("/srv/data/", "not normalised"),
        ("/srv/./data", "not normalised"),
        ("/srv/data/.", "not normalised"),
        ("/srv/data ", "spaces"),
        ("/srv/da\tta", "control character"),
        ("/srv/data:/etc", "':'"),
        ("/srv/a,b", "','"),
        ("/" + "a" * 5000, "4096"),
    ],
)
def test_mount_paths_must_be_plain(path: str, fragment: str) -> None:
    refused(mount_yaml(path), "filesystem.mounts[0].source", fragment, mount_allowlist=["/srv"])
    refused(
        mount_yaml("/srv", target=path),
        "filesystem.mounts[0].target",
        fragment,
        mount_allowlist=["/srv"],
    )


def test_nul_in_mount_path() -> None:
    refused(
        'filesystem: {mounts: [{source: "/srv/a\\0b", target: /data}]}\n',
        "filesystem.mounts[0].source",
        "NUL",
        mount_allowlist=["/srv"],
    )


@pytest.mark.parametrize(
    ("target", "fragment"),
    [
        ("/", "container's root"),
        ("/proc", "under /proc"),
        ("/proc/self", "under /proc"),
        ("/sys/kernel", "under /sys"),
        ("/dev/shm", "under /dev"),
        ("/workspace", "/workspace"),
        ("/workspace/data", "/workspace"),
        ("/tmp", "/tmp"),
        ("/opt/sandbox", "/opt/sandbox"),
        ("/opt/sandbox/runner", "/opt/sandbox"),
        ("/opt", "would hide /opt/sandbox"),
    ],
)
def test_bad_targets(data_dir: Path, target: str, fragment: str) -> None:
    refused(
        mount_yaml(str(data_dir), target),
        "filesystem.mounts[0].target",
        fragment,
        mount_allowlist=[str(data_dir)],
    )
    text = f"filesystem: {{extra_tmpfs: [{{path: '{target}', size_mb: 1, inodes: 16}}]}}\n"
    refused(text, "filesystem.extra_tmpfs[0].path", fragment)


def test_duplicate_targets(data_dir: Path) -> None:
    src = str(data_dir)
    text = (
        "filesystem:\n"
        f"  mounts: [{{source: '{src}', target: /data}}, {{source: '{src}', target: /data}}]\n"
    )
    refused(text, "filesystem.mounts[1].target", "already used", mount_allowlist=[src])
    text = (
        "filesystem:\n"
        "  extra_tmpfs: [{path: /data, size_mb: 1, inodes: 16}]\n"
        f"  mounts: [{{source: '{src}', target: /data}}]\n"
    )
    refused(text, "filesystem.mounts[0].target", "extra_tmpfs[0].path", mount_allowlist=[src])


@pytest.mark.parametrize("key", ["read_only", "rw", "readonly", "mode"])
def test_mounts_have_no_write_switch(data_dir: Path, key: str) -> None:
    text = f"filesystem: {{mounts: [{{source: '{data_dir}', target: /data, {key}: false}}]}}\n"
    refused(
        text, f"filesystem.mounts[0].{key}", "always read-only", mount_allowlist=[str(data_dir)]
    )


def test_mount_model_uses_env_without_context(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ValidationError, match="allowlisted"):
        Mount(source=str(data_dir), target="/data")
    monkeypatch.setenv(MOUNT_ALLOWLIST_ENV, str(data_dir))
    assert Mount(source=str(data_dir), target="/data").source == str(data_dir)


# ---------------------------------------------------------------------------------------
# Limits a request may send
# ---------------------------------------------------------------------------------------


def test_effective_limits_lowers() -> None:
    p = load_policy(POLICIES / "default.yaml")
    assert effective_limits(p, None) == p.resources
    assert effective_limits(p, LimitOverrides()) == p.resources
    r = effective_limits(p, LimitOverrides(wall_time_s=2.5, memory_mb=128, stdout_bytes=10))
    assert (r.wall_time_s, r.memory_mb, r.stdout_bytes) == (2.5, 128, 10)
    assert r.cpu_time_s == p.resources.cpu_time_s
    assert r.pids == p.resources.pids
    # Equal to the policy is fine.
    assert effective_limits(p, LimitOverrides(wall_time_s=10)).wall_time_s == 10


def test_effective_limits_refuses_raising() -> None:
    p = load_policy(POLICIES / "default.yaml")
    with pytest.raises(LimitError) as info:
        effective_limits(p, LimitOverrides(wall_time_s=30))
    assert str(info.value) == (
        "wall_time_s=30 exceeds policy 'default' maximum 10; ask for at most 10"
    )
    with pytest.raises(LimitError, match=r"memory_mb=1024 .* maximum 512"):
        effective_limits(p, LimitOverrides(memory_mb=1024))
    with pytest.raises(LimitError, match="open_files"):
        effective_limits(p, LimitOverrides(open_files=1000, wall_time_s=1))


def test_limit_overrides_model() -> None:
    assert "pids" not in LimitOverrides.model_fields
    assert set(LimitOverrides.model_fields) < set(Resources.model_fields)
    with pytest.raises(ValidationError):
        LimitOverrides.model_validate({"pids": 10})
    with pytest.raises(ValidationError):
        LimitOverrides(wall_time_s=0)
    with pytest.raises(ValidationError):
        LimitOverrides.model_validate({"memory_mb": "64"})
    for name, field in LimitOverrides.model_fields.items():
        assert field.default is None
        # Same bounds as the policy's own field.
        bounds = {}
        for meta in Resources.model_fields[name].metadata:
            bounds.update({k: getattr(meta, k) for k in ("ge", "le") if hasattr(meta, k)})
        low, high = bounds["ge"], bounds["le"]
        step = 1 if isinstance(low, int) else low / 2
        assert getattr(LimitOverrides.model_validate({name: low}), name) == low
        assert getattr(LimitOverrides.model_validate({name: high}), name) == high
        for bad in (low - step, high + step):
            with pytest.raises(ValidationError):
                LimitOverrides.model_validate({name: bad})


# ---------------------------------------------------------------------------------------
# Digest and immutability
# ---------------------------------------------------------------------------------------


def test_digest_is_stable_and_content_based(tmp_path: Path) -> None:
    p = load_policy(POLICIES / "strict.yaml")
    assert re.fullmatch(r"[0-9a-f]{64}", p.digest)
    assert p.digest == load_policy(POLICIES / "strict.yaml").digest
    # Same content, different name: same digest.
    assert (
        parse_policy("pool: {warm: 1}\n", name="a").digest
        == parse_policy("pool: {warm: 1}\n", name="b").digest
    )
    # Written differently, same content: same digest.
    a = parse_policy("env: {set: {A: x, B: y}}\nresources: {cpus: 1}\n", name="a")
    b = parse_policy("resources: {cpus: 1.0}\nenv:\n  set: {B: y, A: x}\n", name="b")
    assert a.digest == b.digest
    # Any change changes it.
    assert (
        parse_policy("pool: {warm: 2}\n", name="a").digest
        != parse_policy("pool: {warm: 1}\n", name="a").digest
    )
    assert a.digest != parse_policy("env: {set: {A: x, B: z}}\n", name="a").digest


def test_digest_is_stable_across_processes() -> None:
    code = (
        "from sandbox.policy import load_policy_dir;"
        "print(sorted((n, p.digest) for n, p in load_policy_dir('policies').items()))"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            cwd=REPO,
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2")
    }
    assert len(outputs) == 1


def test_models_are_frozen() -> None:
    p = load_policy(POLICIES / "default.yaml")
    with pytest.raises(ValidationError):
        p.resources.cpus = 8
    with pytest.raises(ValidationError):
        p.name = "other"
    with pytest.raises(TypeError):
        p.env.set["X"] = "y"  # type: ignore[index]
    with pytest.raises(TypeError):
        p.env.set.update(X="y")  # type: ignore[attr-defined]
    assert isinstance(p.filesystem.mounts, tuple)
    assert isinstance(p.env.allow, tuple)
    assert hash(p) == hash(load_policy(POLICIES / "default.yaml"))
    for model in _models():
        assert model.model_config.get("extra") == "forbid", model
        assert model.model_config.get("frozen") is True, model


def _models() -> list[type[BaseModel]]:
    return [
        v
        for v in vars(policy_model).values()
        if isinstance(v, type)
        and issubclass(v, BaseModel)
        and v.__module__ == policy_model.__name__
    ]


# ---------------------------------------------------------------------------------------
# Files and folders
# ---------------------------------------------------------------------------------------


def test_load_policy_file_errors(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="no such file"):
        load_policy(tmp_path / "missing.yaml")
    with pytest.raises(PolicyError, match=r"\.yaml or \.yml"):
        load_policy(write(tmp_path / "p.json", "{}"))
    (tmp_path / "dir.yaml").mkdir()
    with pytest.raises(PolicyError, match="regular file"):
        load_policy(tmp_path / "dir.yaml")
    with pytest.raises(PolicyError) as info:
        load_policy(write(tmp_path / "bad name.yaml", "pool: {}\n"))
    assert info.value.key == "name"


def test_load_policy_dir(tmp_path: Path) -> None:
    write(tmp_path / "a.yaml", "pool: {warm: 1}\n")
    write(tmp_path / "b.yml", "extends: a\n")
    write(tmp_path / "notes.md", "not a policy")
    policies = load_policy_dir(tmp_path)
    assert set(policies) == {"a", "b"}
    assert policies["b"].pool.warm == 1
    write(tmp_path / "c.yaml", "pool: {warm: 1000}\n")
    with pytest.raises(PolicyError) as info:
        load_policy_dir(tmp_path)
    assert info.value.source.endswith("c.yaml")
    (tmp_path / "c.yaml").unlink()
    write(tmp_path / "a.yml", "pool: {}\n")
    with pytest.raises(PolicyError, match="second policy named 'a'"):
        load_policy_dir(tmp_path)
    with pytest.raises(PolicyError, match="not a directory"):
        load_policy_dir(tmp_path / "nope")


# ---------------------------------------------------------------------------------------
# Lint
# ---------------------------------------------------------------------------------------


def test_lint_warnings() -> None:
    p = parse_policy(
        "resources: {memory_mb: 32, wall_time_s: 100, cpu_time_s: 5, pids: 16}\n"
        "filesystem: {workspace: {size_mb: 64}}\n",
        name="t",
    )
    text = "\n".join(lint_policy(p))
    assert "memory_mb is 32" in text
    assert "wall_time_s" in text
    assert "pids is 16" in text
    assert "OOM" in text


# ---------------------------------------------------------------------------------------
# The README stays in step with the model
# ---------------------------------------------------------------------------------------


def _leaf_keys(model: type[BaseModel], prefix: str = "") -> list[tuple[str, Any]]:
    keys: list[tuple[str, Any]] = []
    for name, field in model.model_fields.items():
        if model is Policy and name == "name":
            continue
        key = f"{prefix}{name}"
        annotation = field.annotation
        if get_origin(annotation) is tuple:
            (item, _ellipsis) = get_args(annotation)
            if isinstance(item, type) and issubclass(item, BaseModel):
                keys.append((key, field))
                keys.extend(_leaf_keys(item, f"{key}[]."))
                continue
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            keys.extend(_leaf_keys(annotation, f"{key}."))
            continue
        keys.append((key, field))
    return keys


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and value > 1:
        return str(int(value))
    return str(value)


@pytest.mark.parametrize(
    "readme_path",
    [POLICIES / "README.md", POLICIES.parent / "README.md"],
    ids=lambda p: p.parent.name,
)
def test_readme_table_lists_every_key_with_its_bounds(readme_path: Path) -> None:
    readme = readme_path.read_text()
    table = readme.split("# Every key", 1)[1].split("\n## ", 1)[0]
    rows = {
        m.group(1): m.group(0)
        for m in re.finditer(r"^\| `([^`]+)` \|.*$", table, flags=re.MULTILINE)
    }
    keys = _leaf_keys(Policy)
    assert len(keys) > 30
    for key, field in keys:
        assert key in rows, f"{readme_path} has no table row for {key}"
        cells = [c.strip() for c in rows[key].strip("|").split("|")]
        for meta in field.metadata:
            for attr in ("ge", "le", "max_length"):
                bound = getattr(meta, attr, None)
                if bound is not None:
                    assert re.search(rf"\b{re.escape(_fmt(bound))}\b", cells[3]), (key, cells)
        default = field.default
        if isinstance(default, bool | int | float) and not isinstance(default, BaseModel):
            assert _fmt(default).rstrip("0").rstrip(".") in cells[2], (key, cells)
    documented = set(rows) - {"extends"}
    assert documented <= {k for k, _ in keys}, documented - {k for k, _ in keys}

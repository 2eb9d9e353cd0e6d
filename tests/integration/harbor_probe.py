"""Drives one ``SandboxEnvironment`` the way Harbor's trial code does, printing what came
back as JSON: run by ``test_harbor.py`` with the Harbor venv's Python (``harbor`` needs
3.12+), as ``python harbor_probe.py URL WORKDIR``."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from harbor.models.task.config import EnvironmentConfig, NetworkMode, NetworkPolicy
from harbor.models.trial.paths import TrialPaths

from sandbox.integrations.harbor import SandboxEnvironment, builtin_image

BLOB = bytes(range(256)) * 64  # every byte value, not UTF-8
DOCKERFILES = {
    "plain": "FROM sandbox-python\n",
    "tagged, commented": "# ours\n\nFROM sandbox-polyglot:3a46670a3e98\n# end\n",
    "lower-case from": "from sandbox-python\n",
    "other image": "FROM ubuntu:24.04\n",
    "build steps": "FROM sandbox-python\nRUN true\n",
    "build argument": "ARG BASE=sandbox-python\nFROM ${BASE}\n",
    "empty": "",
}


async def probe(url: str, work: Path) -> dict[str, object]:
    environment_dir = work / "environment"
    environment_dir.mkdir()
    (environment_dir / "Dockerfile").write_text("FROM sandbox-python\n")
    trial = TrialPaths(work / "trial")
    trial.mkdir()
    env = SandboxEnvironment(
        environment_dir=environment_dir,
        environment_name="probe",
        session_id="probe__env",
        trial_paths=trial,
        task_env_config=EnvironmentConfig(network_mode=NetworkMode.NO_NETWORK),
        network_policy=NetworkPolicy(network_mode=NetworkMode.NO_NETWORK),
        url=url,
    )
    found: dict[str, object] = {
        "builtin": {name: builtin_image(text, None) for name, text in DOCKERFILES.items()},
        "builtin_docker_image": [builtin_image(None, "sandbox-python:1"), builtin_image(None, "x")],
    }
    await env.start(force_build=False)
    try:
        quoted = 'it\'s $HOME; `x` "y"\n2nd line'
        result = await env.exec('printf %s "$ODD"; echo; id -u; pwd', env={"ODD": quoted})
        found["env_echo"], found["uid"], found["cwd"] = result.stdout.rsplit("\n", 3)[:3]
        found["exit_7"] = (await env.exec("echo out; echo err >&2; exit 7")).model_dump()
        found["as_root_uid"] = (await env.exec("id -u", user="root")).stdout.strip()
        try:
            await env.exec("sleep 30", timeout_sec=1)
            found["timeout"] = "returned"
        except RuntimeError as exc:
            found["timeout"] = str(exc)
        blob = work / "blob.bin"
        blob.write_bytes(BLOB)
        await env.upload_file(blob, "/logs/agent/deep/blob.bin")
        tree = work / "tree"
        (tree / "sub").mkdir(parents=True)
        (tree / "run.sh").write_text("#!/bin/bash\necho ran\n")
        (tree / "run.sh").chmod(0o755)
        (tree / "sub" / "blob.bin").write_bytes(BLOB)
        await env.upload_dir(tree, "/tests")
        found["uploaded_script"] = (await env.exec("/tests/run.sh")).stdout
        await env.download_file("/logs/agent/deep/blob.bin", work / "back.bin")
        found["file_round_trip"] = (work / "back.bin").read_bytes() == BLOB
        await env.download_dir("/tests", work / "back")
        found["dir_round_trip"] = (work / "back" / "sub" / "blob.bin").read_bytes() == BLOB
        found["readonly_root"] = (await env.exec("touch /etc/x")).return_code
        try:
            await env.download_file("/logs/nothing-here", work / "none")
            found["missing"] = "downloaded"
        except FileNotFoundError as exc:
            found["missing"] = str(exc)
    finally:
        await env.stop(delete=True)
    try:
        await env.exec("true")
        found["after_stop"] = "ran"
    except RuntimeError as exc:
        found["after_stop"] = str(exc)
    return found


if __name__ == "__main__":
    print(json.dumps(asyncio.run(probe(sys.argv[1], Path(sys.argv[2])))))

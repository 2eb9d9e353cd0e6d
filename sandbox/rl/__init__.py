"""The embedded RL trainer: GRPO over a causal LM, with rewards from the sandbox judge.

Needs the optional extra ``.[rl]`` (torch, transformers, matplotlib); nothing
else in the platform imports this package.

The loop: sample prompts from a domain-mixed loader, generate a group of
completions per prompt, have the sandbox judge them (over HTTP or in process;
judging one batch overlaps generating the next), turn rewards into
group-relative advantages, take a PPO-clipped step, and every few steps
evaluate a held-out set: a regression beyond noise rolls back to the last
good checkpoint.
"""

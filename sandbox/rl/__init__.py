"""The embedded RL trainer: GRPO over a causal LM, with rewards from the sandbox judge.

Needs the optional extra ``.[rl]`` (torch, transformers, matplotlib); nothing
else in the platform imports this package.

The loop: sample prompts from a domain-mixed loader, generate a group of
completions per prompt, have the sandbox judge them (over HTTP or in process;
judging one batch overlaps generating the next), turn rewards into
group-relative advantages, take a PPO-clipped step, and every few steps
evaluate a held-out set: a regression beyond noise rolls back to the last
good checkpoint.

With the config's ``agent`` section a rollout is a multi-turn episode of an
evaluator task instead (:mod:`.agentic`, :mod:`.rollouts`, :mod:`.toolcalls`):
tool calls run in the episode's own sandbox session, observations are appended
(and masked out of the loss), the hidden tests give the reward, and generation
runs up to ``max_staleness`` policy versions ahead of training.
"""

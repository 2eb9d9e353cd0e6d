"""Secure code-execution sandboxes for RL post-training and coding-agent evaluation."""

"""What other tools speak: SandboxFusion's ``/run_code`` and OpenRLHF's ``/get_reward``
(:mod:`.compat`), and TRL and verl reward functions (:mod:`.rewards`, re-exported by
:mod:`sandbox.rewards`, the path trainer configs name).
"""

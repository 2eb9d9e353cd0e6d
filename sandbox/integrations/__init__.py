"""What other tools speak: SandboxFusion's ``/run_code`` and OpenRLHF's ``/get_reward``
(:mod:`.compat`), TRL and verl reward functions (:mod:`.rewards`, re-exported by
:mod:`sandbox.rewards`, the path trainer configs name), Harbor's environment
interface (:mod:`.harbor`, imported only where the ``harbor`` package is: ``.venv-harbor``),
and TRL's ``GRPOTrainer(environment_factory=...)`` over episodes (:mod:`.trl_env`).
"""

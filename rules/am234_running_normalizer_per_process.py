"""AM234: an environment normalizer whose running statistics each process keeps alone."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import dotted_name
from migrator.analysis.reach import RUN_CALLS_IT, run_by_other_files
from migrator.rule import Example, Rule

# wrappers that normalize what an environment returns by statistics they update as it runs
_NORMALIZERS = {
    "stable_baselines3.common.vec_env.VecNormalize",
    "stable_baselines3.common.vec_env.vec_normalize.VecNormalize",
    "baselines.common.vec_env.VecNormalize",
    "baselines.common.vec_env.vec_normalize.VecNormalize",
    "gym.wrappers.NormalizeObservation",
    "gym.wrappers.NormalizeReward",
    "gymnasium.wrappers.NormalizeObservation",
    "gymnasium.wrappers.NormalizeReward",
}
_REMEDY = (
    "merge the statistics over the processes after each rollout (all-reduce the sums of count, count * mean and "
    "count * (var + mean**2), then mean = sum / count and var = sum / count - mean**2), or keep them per process "
    "knowingly and save the main process's with the model"
)


class RunningNormalizerPerProcess(Rule):
    """## What it does
    In a script being migrated, and in code other files of the run call on every process,
    names an environment wrapper that normalizes observations or returns by running
    statistics (stable-baselines' and baselines' `VecNormalize`, Gym's and Gymnasium's
    `NormalizeObservation` and `NormalizeReward`), or a class of the file built on one
    (pytorch-a2c-ppo-acktr's `class VecNormalize(VecNormalize_)`), left as written.

    ## Why is this bad?
    Under `accel-launch` every process steps environments of its own, and each wrapper
    updates its mean and variance from its own process's observations only. The policy's
    weights are the same on every process after each step, but each process feeds it
    inputs scaled by different statistics, and the statistics saved beside the model (or
    used to evaluate it) are one process's. The run trains, a little differently from one
    process to the next, with nothing said.

    ## Example
    ```python
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    envs = VecNormalize(DummyVecEnv([make_env(i) for i in range(8)]))
    ```

    Use instead: keep the wrapper, and after each rollout merge its `obs_rms` over the
    processes (`torch.distributed.all_reduce` of the sums of count, count * mean and
    count * (var + mean**2), from which the global mean and variance follow), or keep them
    per process and save the main process's with the model.

    ## Known limits
    Only named, never changed: the statistics are NumPy arrays the wrapper owns, and
    whether to share them is the user's choice. A normalizer made by a helper of a
    library (`make_vec_env(..., wrapper_class=...)`) is not seen.
    """

    code = "AM234"
    name = "running-normalizer-per-process"
    message = (
        "`{call}` normalizes by running statistics each process keeps alone: on N processes each one scales its "
        "inputs by its own environments' statistics while the policy's weights are shared, and what is saved or "
        "evaluated with them is one process's{note}"
    )
    examples = (
        Example(
            before=(
                "import torch\nfrom stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize\n\n"
                "envs = VecNormalize(DummyVecEnv([lambda: None]))\n"
                "model = torch.nn.Linear(3, 2)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "for x in torch.randn(4, 2, 3):\n"
                "    optimizer.zero_grad()\n    model(x).sum().backward()\n    optimizer.step()\n"
            ),
            after=None,
            at=("4:8",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        config = self.ctx.config
        shared = not analysis.migrating and bool(config.run_callers)
        if not analysis.migrating and not shared:
            return
        normalizers = self._normalizer_classes()
        for fact in analysis.facts.calls:
            if (fact.qualified or "") not in _NORMALIZERS and dotted_name(fact.node.func) not in normalizers:
                continue
            if shared and not run_by_other_files(analysis, fact.node, config.run_callers, config.project_unpassed):
                continue
            note = f" ({RUN_CALLS_IT}; {_REMEDY})" if shared else f" (left as written: {_REMEDY})"
            self.report(fact.node, call=f"{dotted_name(fact.node.func)}()", note=note)

    def _normalizer_classes(self) -> set[str]:
        """Classes of this file built on a normalizer: calling them makes one."""
        imports = self.analysis.imports
        return {
            cls.name.value for cls in self.analysis.facts.classes.values()
            if any((imports.qualify(b.value) or "") in _NORMALIZERS for b in cls.bases)
        }

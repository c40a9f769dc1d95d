"""AM222: every process seeded alike draws the same noise in the training loop."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from migrator.analysis import dotted_name
from migrator.analysis.handed_models import handed_model
from migrator.analysis.walk import descendants
from migrator.edits import insert_after
from migrator.rule import Example, FixAvailability, Rule

# Draws from torch's global generator (no `generator=` given).
_DRAWS = {
    "torch.randn", "torch.rand", "torch.randint", "torch.randn_like", "torch.rand_like", "torch.randint_like",
    "torch.normal", "torch.bernoulli", "torch.multinomial", "torch.randperm",
}
_SEEDS = {"torch.manual_seed", "torch.cuda.manual_seed", "torch.cuda.manual_seed_all"}
_PER_PROCESS = ("rank", "process_index", "local_process_index")


class SameNoiseOnEveryProcess(Rule):
    """## What it does
    In a script being migrated that seeds torch with a fixed value
    (`torch.manual_seed(opt.manualSeed)`) and draws random tensors in its training loop
    (`noise = torch.randn(batch_size, nz, 1, 1, device=device)`: a GAN's noise, a
    diffusion model's timesteps), seeds the other processes apart right after prepare():

    ```python
    if not accelerator.is_main_process:
        torch.manual_seed(opt.manualSeed + accelerator.process_index)
    ```

    ## Why is this bad?
    Every process starts from the same seed, so every process draws the same noise at
    every step: N processes train the generator on N copies of one batch of fakes, and
    the batch that should grow N times does not. Seeding after prepare() keeps what must
    agree agreed: the models are built (and prepare() copies process 0's weights to all)
    and the data sets made before it, and the prepared loader agrees on its shuffle by
    itself. The main process keeps its own stream, so one process runs exactly as before.

    ## Example
    ```python
    torch.manual_seed(seed)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    for real in loader:
        fake = generator(torch.randn(real.size(0), nz))
    ```

    Use instead:
    ```python
    torch.manual_seed(seed)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    if not accelerator.is_main_process:
        torch.manual_seed(seed + accelerator.process_index)
    for real in loader:
        fake = generator(torch.randn(real.size(0), nz))
    ```

    An environment the training loop steps (`envs.step(actions)`: reinforcement learning,
    where the experience is the data) and that is reset with a seed that does not differ
    per process (`envs.reset(seed=args.seed)`) is named too: every process plays the same
    episodes, so N processes compute one process's gradients N times. That one is not
    fixed: the seeds of `random`, NumPy and the environments' constructors go with it.
    So is an environment the loop steps that was made by a call handed the seed
    (`envs = make_vec_envs(name, args.seed, ...)`), and, left as written, in a set-up with
    no Accelerator that hands its model to a trainer whose migration is left as written.

    ## Known limits
    Only where the migration writes the prepare() itself, in the scope that seeds, and
    the seed is a literal or a name (`args.seed`, `SEED`). Randomness from Python's
    `random` or NumPy in the loop is not looked at, and an environment is recognised
    only by a `reset(seed=...)` of what the training loop steps.
    """

    code = "AM222"
    name = "same-noise-on-every-process"
    message = "`{seed}` seeds every process alike and the training loop {uses}: {consequence}{note}"
    fix_title = "Seed the other processes apart after prepare()"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import torch\n\ntorch.manual_seed(0)\nmodel = torch.nn.Linear(4, 1).cuda()\n"
                "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "for step in range(10):\n    x = torch.randn(8, 4).cuda()\n    loss = model(x).pow(2).mean()\n"
                "    loss.backward()\n    optimizer.step()\n"
            ),
            after=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n\n"
                "torch.manual_seed(0)\nmodel = torch.nn.Linear(4, 1)\n"
                "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "model, optimizer = accelerator.prepare(model, optimizer)\n"
                "if not accelerator.is_main_process:\n    torch.manual_seed(0 + accelerator.process_index)\n"
                "for step in range(10):\n    x = torch.randn(8, 4).to(accelerator.device)\n    loss = model(x).pow(2).mean()\n"
                "    accelerator.backward(loss)\n    optimizer.step()\n"
            ),
            at=("3:1",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if analysis.migrating:
            self._environments_seeded_alike()
        elif (handed := handed_model(analysis, self.ctx.config)) is not None:
            # a2c-ppo's main.py: `envs = make_vec_envs(name, args.seed, ...)` stepped in the loop that calls
            # `agent.update(rollouts)`, whose trainer is left as written
            drives = {d[1] for d in self.ctx.config.project_drives}
            note = (
                f" (left as written: this file hands `{handed.binding.name}` to the training of `{handed.spelling}`, "
                "which gets no Accelerator; seed them apart when you migrate it by hand)"
            )
            self._environments_seeded_alike(drives, note)
        if not analysis.migrating or analysis.plan is None:
            return
        draw = self._draw_in_training_loop()
        if draw is None:
            return
        seeds = [c for c in analysis.facts.calls if (c.qualified or "") in _SEEDS and len(c.node.args) == 1]
        if not seeds or any(self._per_process(c.node.args[0].value) for c in seeds):
            return
        seed = seeds[-1]
        value = seed.node.args[0].value
        shown = cst.Module([]).code_for_node(seed.node)
        plan = analysis.plan
        why = None
        if seed.scope is not plan.block.scope:
            why = "the seed is set in another scope than the one that prepares"
        elif not isinstance(value, (cst.Integer, cst.Name, cst.Attribute)):
            why = "the seed is an expression; add `+ accelerator.process_index` to it after prepare() by hand"
        elif plan.last_in_block is None:
            why = "the objects are prepared inside a branch"
        elif analysis.order(seed.node) > analysis.order(plan.last_in_block):
            why = "the seed is set after the objects are prepared"
        if why is not None:
            self.report(seed.node, seed=shown, **_noise(draw), note=f" (left as written: {why})")
            return
        after = plan.last_in_block
        accelerator = analysis.accelerator_at(after) or analysis.accelerator
        torch = cst.Module([]).code_for_node(seed.node.func)
        code = cst.Module([]).code_for_node(value)
        statement = cst.parse_statement(
            f"if not {accelerator}.is_main_process:\n    {torch}({code} + {accelerator}.process_index)\n"
        )
        self.report(seed.node, edits=[insert_after(after, statement)], seed=shown, **_noise(draw), note="")

    def _per_process(self, value: cst.BaseExpression, depth: int = 3) -> bool:
        """The seed already differs per process: it reads the rank, itself or through the
        names it is computed from (`seed = args.global_seed * world_size + rank`)."""
        text = cst.Module([]).code_for_node(value)
        if any(word in text for word in _PER_PROCESS):
            return True
        if depth == 0:
            return False
        names = {n.value for n in descendants(value) if isinstance(n, cst.Name)}
        return any(
            b.name in names and b.value is not None and self._per_process(b.value, depth - 1)
            for b in self.analysis.facts.bindings
        )

    def _environments_seeded_alike(self, driving: set[int] = frozenset(), note: str = "") -> None:
        """`envs.reset(seed=args.seed)` and `envs.step(actions)` in the loop that trains
        (cleanrl's DQN and PPO): the experience is the data, and no prepare() shards it.
        Every process plays the same episodes from the same seed, so N processes compute
        one process's gradients N times. Named, not fixed: the seeds of `random`, NumPy and
        the environments' own constructors go with it."""
        facts = self.analysis.facts
        training = {
            id(loop) for c in facts.calls
            if _is_backward(c.node) or self.analysis.position(c.node).start.line in driving for loop in c.loops
        }
        stepped = {
            dotted_name(c.node.func.value) for c in facts.calls
            if isinstance(c.node.func, cst.Attribute) and c.node.func.attr.value == "step"
            and any(id(loop) in training for loop in c.loops)
        }
        for c in facts.calls + self._env_makers(stepped):
            func = c.node.func
            made = isinstance(c, _Made)
            if not made and (not isinstance(func, cst.Attribute) or func.attr.value != "reset" or dotted_name(func.value) not in stepped):
                continue
            seed = _seed_argument(c.node, positional=made)
            if seed is None or isinstance(seed, cst.Name) and seed.value == "None" or self._per_process(seed):
                continue
            env = c.env if made else dotted_name(func.value)
            self.report(
                c.node, seed=_shown(c.node, seed) if made else cst.Module([]).code_for_node(c.node), uses=f"steps `{env}` (`{env}.step(...)`)",
                consequence=(
                    "every process plays the same episodes and learns from the same experience, so N processes "
                    "compute one process's gradients N times; seed each process apart after prepare(): "
                    f"`random`, NumPy and torch with `seed + accelerator.process_index`, and `{env}` past the seeds of "
                    "the others (`seed + accelerator.process_index * n`, n the environments one process makes when "
                    "they are seeded `seed + i`)"
                ),
                note=note,
            )
            return

    def _env_makers(self, stepped: set) -> list["_Made"]:
        """`envs = make_vec_envs(args.env_name, args.seed, ...)`: the environments the loop
        steps, made by a call handed a seed (a name or attribute called `seed`)."""
        out = []
        for b in self.analysis.facts.bindings:
            if b.name in stepped and isinstance(b.value, cst.Call):
                out.append(_Made(b.value, b.name))
        return out

    def _draw_in_training_loop(self) -> str | None:
        """The first random draw from the global generator in a loop that also runs a backward."""
        facts = self.analysis.facts
        training = {id(loop) for c in facts.calls if _is_backward(c.node) for loop in c.loops}
        for c in facts.calls:
            if (c.qualified or "") not in _DRAWS or not any(id(loop) in training for loop in c.loops):
                continue
            if any(a.keyword is not None and a.keyword.value == "generator" for a in c.node.args):
                continue
            return f"{dotted_name(c.node.func) or c.qualified}(...)"
        return None


@dataclass(frozen=True, eq=False)
class _Made:
    node: cst.Call
    env: str


def _seed_argument(call: cst.Call, positional: bool) -> cst.BaseExpression | None:
    """`seed=...`, or (for a maker) an argument spelled `seed` / `args.seed`."""
    for a in call.args:
        if a.keyword is not None and a.keyword.value == "seed":
            return a.value
    if positional:
        for a in call.args:
            if a.keyword is None and (dotted_name(a.value) or "").rsplit(".", 1)[-1] == "seed":
                return a.value
    return None


def _shown(call: cst.Call, seed: cst.BaseExpression) -> str:
    """`make_vec_envs(..., args.seed, ...)`: the maker and the seed it is handed, on one line."""
    return f"{dotted_name(call.func) or 'make'}(..., {cst.Module([]).code_for_node(seed)}, ...)"


def _is_backward(call: cst.Call) -> bool:
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == "backward"


def _noise(draw: str) -> dict[str, str]:
    return {
        "uses": f"draws `{draw}` from it",
        "consequence": "every process draws the same noise; seed the other processes apart after prepare()",
    }

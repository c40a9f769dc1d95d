"""AM001: a training script without an Accelerator."""

from __future__ import annotations

import os

import libcst as cst

from migrator.analysis import Role, dotted_name
from migrator.analysis.handed_models import BUILDS_AND_HANDS, handed_model
from migrator.analysis.options import setup_options
from migrator.cst import LINE_LIMIT
from migrator.edits import ImportChange, insert_before
from migrator.rule import Example, FixAvailability, Rule


class MissingAccelerator(Rule):
    """## What it does
    Finds a script that trains (it builds an optimizer) but creates no `Accelerator`, and
    adds `from runtime import Accelerator` beside the imports and
    `accelerator = Accelerator()` as early as possible in the scope that trains: module
    level for a flat script, the top of `main()` (or whichever function builds the model
    and the loop), or the top of an `if __name__ == "__main__":` block.

    ## Why is this bad?
    Every other step of the migration (`prepare`, `backward`, device placement) goes
    through the Accelerator; without it the script runs on one device in one process.

    ## Example
    ```python
    import torch
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    ```

    Use instead:
    ```python
    import torch
    from runtime import Accelerator

    accelerator = Accelerator()
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    ```

    ## Options and where it goes
    When the script does by hand what the Accelerator can do, the Accelerator gets the
    matching options at creation: `mixed_precision` from autocast/GradScaler (AM401,
    AM402), `gradient_accumulation_steps` from a hand-written accumulation loop (AM310),
    `kwargs_handlers=[DistributedDataParallelKwargs(...)]` from the options of a
    hand-made `DistributedDataParallel(...)` wrap (`find_unused_parameters=True`,
    `broadcast_buffers=False`, `static_graph=True`, ...: those DDP's defaults do not give)
    and from a model whose parameters get no gradient (AM221).
    It is then created after the statements binding the names those options read
    (`args = parser.parse_args()`), unless a device variable needs it earlier (the option
    is then reported instead). When training is set up in a method (`Trainer.__init__`
    builds the optimizer) it becomes `self.accelerator = Accelerator()` and the other
    methods of the class reach it as `self.accelerator`. When a function forms the process
    group by hand (`init_process_group`) and then calls the function that sets up training
    (`main()` → `train(cfg, args)`), the Accelerator, which forms the group now, is created
    in that function, and the training function is handed it (AM002): what runs in between
    (a logger set up for rank 0 from `dist.get_rank()`) still sees the group. Not where a
    name the options read is bound only in the training function.

    ## Known limits
    When a device variable is defined at module level but training happens in a
    function, the Accelerator is created at module level so that
    `device = accelerator.device` can keep working.
    """

    code = "AM001"
    name = "missing-accelerator"
    message = "Training script has no Accelerator{note}"
    fix_title = "Create `accelerator = Accelerator()` where training is set up"
    fix = FixAvailability.ALWAYS
    examples = (
        Example(
            before="import torch\n\ndef main():\n    model = torch.nn.Linear(2, 2)\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n",
            after="import torch\nfrom runtime import Accelerator\n\ndef main():\n    accelerator = Accelerator()\n    model = torch.nn.Linear(2, 2)\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    model, opt = accelerator.prepare(model, opt)\n",
            at=("4:5",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        setup = self.analysis.setup
        if setup is None:
            self._driving_without_one()
            return
        options = setup_options(self.analysis)
        statement = cst.parse_statement(_creation(self.analysis.accelerator, [o.code for o in options], setup.block.owner))
        if isinstance(setup.block.owner, cst.Module) and setup.before is not setup.block.body[0]:
            statement = statement.with_changes(leading_lines=[cst.EmptyLine()])
        note = self._built_elsewhere(setup.block.owner)
        if not self.ctx.config.fix and any(o.code == "cpu=True" for o in options):
            note += _CPU_ONLY  # a lint, or a migration left as written: the hand migration needs to know
        self.report(
            setup.before,
            edits=[insert_before(setup.before, statement)],
            add_imports=[ImportChange(self.ctx.target.module, name) for name in _imported(options)],
            note=note,
        )

    def _built_elsewhere(self, owner: cst.CSTNode) -> str:
        """A set-up in the `__init__` of a class other files of the run build (LightGCN's
        BPRLoss, handed the model main.py built): the Accelerator made here comes after
        that model; say where it belongs."""
        cls = self.analysis.facts.method_of.get(id(owner)) if isinstance(owner, cst.FunctionDef) else None
        if cls is None or owner.name.value != "__init__" or cls.name.value not in self.ctx.config.run_callers:
            return ""
        roles = self.analysis.roles
        params = {p.name.value for p in owner.params.params}
        handed = any(roles.of(p) is Role.MODEL for p in params) or any(
            b.name.startswith("self.") and roles.of(b.name) is Role.MODEL and dotted_name(b.value) in params
            for b in self.analysis.facts.bindings if b.value is not None
        )
        if not handed:
            return ""  # it builds its own model (ddim's runner): the Accelerator is rightly its own
        return (
            f" (here in `{cls.name.value}`, which other files of the run build with what they made: an Accelerator "
            "belongs where they build the model, before it, handed in here)"
        )

    def _driving_without_one(self) -> None:
        """LightGCN's main.py builds the model (`Recmodel = register.MODELS[name](config,
        dataset)`) and hands it to the training of Procedure.py and utils.py (its optimizer
        and backward are there), with no Accelerator anywhere: named where the model is
        built, since an Accelerator made later (where the optimizer is) finds the model's
        own tensors already placed (its sparse graph on cuda:0, which prepare() does not move)."""
        handed = handed_model(self.analysis, self.ctx.config)
        if handed is None:
            return
        first, spelling = handed.binding, handed.spelling
        where = os.path.relpath(handed.where, os.path.dirname(self.ctx.path) or ".").replace(os.sep, "/")
        note = (
            f" (left as written: {BUILDS_AND_HANDS[0]}{first.name}{BUILDS_AND_HANDS[1]}`{spelling}` ({where}), "
            "which gets no Accelerator: create the Accelerator before this line, so that whatever the model places "
            "on a device while it is built lands on this process's (prepare() moves parameters and buffers, not other "
            "tensors it keeps), and hand it in with the model prepared)"
        )
        self.report(first.target, note=note)


# the script moves nothing to a GPU (SimGNN builds every batch on the CPU): what the migration would write
_CPU_ONLY = (
    " (the script never moves anything to a GPU: create it as `Accelerator(cpu=True)` to train on the CPU as "
    "before, or on GPUs move the tensors it builds to `accelerator.device`)"
)


def _creation(name: str, arguments: list[str], owner: cst.CSTNode) -> str:
    """`accelerator = Accelerator(...)`, one argument a line when it would pass LINE_LIMIT."""
    code = f"{name} = Accelerator({', '.join(arguments)})"
    indent = "" if isinstance(owner, cst.Module) else "    "
    if len(indent) + len(code) > LINE_LIMIT:
        code = f"{name} = Accelerator(\n" + "".join(f"    {a},\n" for a in arguments) + ")"
    return code + "\n"


def _imported(options) -> list[str]:
    """`Accelerator`, and what the options' values name (`DistributedDataParallelKwargs`)."""
    return ["Accelerator", *dict.fromkeys(name for o in options for name in o.imports)]

"""AM211: `model.module` of a model wrapped by hand."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import dotted_name
from migrator.analysis.reach import RUN_CALLS_IT, run_by_other_files
from migrator.analysis.wrapped import module_reader_flags
from migrator.edits import replace
from migrator.rule import Example, FixAvailability, Rule


class WrappedModelModule(Rule):
    """## What it does
    While a script is migrated from hand-made `DataParallel`/`DistributedDataParallel`,
    rewrites `model.module` (and the idiom `model.module if hasattr(model, "module") else
    model`) to `accelerator.unwrap_model(model)`.

    ## Why is this bad?
    `.module` existed because of the wrapper the migration removes. The prepared model is
    wrapped only on N processes, so `.module` raises `AttributeError` on one;
    `accelerator.unwrap_model(model)` returns the user's model in both cases.

    In a run of several files, a call that hands models to another file's code reading
    their `.module` (a checkpoint class saving `module.module.state_dict()` of each model
    it holds, `CheckpointIO(path, data_parallel=True, **nets)`) is named at the call and
    left as written: the change is in that file. A reader that reads `.module` only under
    a flag defaulting to False is named only where the call passes the flag. In a file left
    without an Accelerator whose wrap AM210 asks to remove (code other files of the run
    call), `model.module` of that wrap is named too: it goes with the wrap; and so is
    `.module` read in such code of a model another file's function wraps (a base class
    saving `getattr(self, "net" + name).module.state_dict()` of the nets its subclass
    binds to what `networks.define_G(...)` returns wrapped).

    ## Example
    ```python
    model = nn.DataParallel(model)
    torch.save(model.module.state_dict(), path)
    ```

    Use instead:
    ```python
    torch.save(accelerator.unwrap_model(model).state_dict(), path)
    ```

    ## Known limits
    In a script that already has an Accelerator this is AM204's job (prepared-model-module).
    Assignments to `model.module` and code that cannot reach the Accelerator are
    reported, not changed. A model this file wraps by hand and hands to such a reader is
    the verifier's (AM952 refuses the migration that would prepare it); a flag passed by
    position is not read.
    """

    code = "AM211"
    name = "wrapped-model-module"
    message = "{subject} exists only while the model is wrapped; {remedy}{note}"
    fix_title = "Use `accelerator.unwrap_model(model)`"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import torch\nimport torch.nn as nn\n\nmodel = nn.DataParallel(nn.Linear(2, 2))\n"
                "opt = torch.optim.SGD(model.parameters(), lr=0.1)\nweight = model.module.weight\n"
            ),
            after=(
                "import torch\nimport torch.nn as nn\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n\n"
                "model = nn.Linear(2, 2)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "model, opt = accelerator.prepare(model, opt)\nweight = accelerator.unwrap_model(model).weight\n"
            ),
            at=("6:10",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        self._read_in_another_file()
        if analysis.patterns is not None and not analysis.has_accelerator and not analysis.migrating:
            self._beside_wraps_the_run_calls()
            self._of_wraps_another_file_makes()
        if analysis.patterns is None or analysis.has_accelerator or not analysis.migrating:
            return
        for access in analysis.patterns.distribution.module_accesses:
            model = access.body.value if isinstance(access, cst.IfExp) else access.value  # type: ignore[attr-defined]
            name = cst.Module([]).code_for_node(model).strip()
            accelerator = analysis.accelerator_at(access)
            up = analysis.parent(access)
            stored = isinstance(up, (cst.AssignTarget, cst.Del)) or (
                isinstance(up, (cst.AugAssign, cst.AnnAssign)) and up.target is access
            )
            if accelerator is None or stored:
                why = "it is assigned to" if stored else "the Accelerator cannot be reached from here"
                self.report(access, note=f" (left as written: {why})", **_fields(name))
                continue
            new = cst.parse_expression(f"{accelerator}.unwrap_model({name})")
            self.report(access, edits=[replace(access, new.with_changes(lpar=access.lpar, rpar=access.rpar))], note="", **_fields(name))

    def _read_in_another_file(self) -> None:
        """A call handing models to code of another file of the run that reads their
        `.module` (stargan-v2's `CheckpointIO(path, data_parallel=True, **self.nets)`, whose
        save reads `module.module.state_dict()` of each): once the hand wraps go, the
        models are plain (prepare() wraps one on N processes only), and that read fails. Named at the call,
        left as written (the change is the other file's). A model this file wraps by hand
        itself is the verifier's (AM952, once the migration would prepare it)."""
        readers = module_reader_flags(self.ctx.config.project_module_readers)
        if not readers:
            return
        wrapped = self._wrapped_here()
        for fact in self.analysis.facts.calls:
            spelling = dotted_name(fact.node.func)
            if spelling not in readers or readers[spelling] and not _passes_true(fact.node, readers[spelling]):
                continue
            handed = {dotted_name(a.value) for a in fact.node.args} - {None}
            if handed & wrapped:
                continue
            subject = f"`.module`, which `{spelling}(...)` (another file of the run) reads of the models handed here,"
            remedy = "read them there through `accelerator.unwrap_model(...)`"
            note = (
                " (left as written: once the migration removes the hand wraps, the models handed here are plain"
                " (prepare() wraps one on N processes only, and never one it does not prepare), so that read fails;"
                " change it in that file, or stop asking it for `.module` here)"
            )
            self.report(fact.node, subject=subject, remedy=remedy, note=note)

    def _beside_wraps_the_run_calls(self) -> None:
        """stargan-v2's `build_model`: `fan = nn.DataParallel(FAN(...))`, then
        `fan.get_heatmap = fan.module.get_heatmap`, in code other files of the run call.
        AM210 asks for that wrap to go; this read fails with it (reader R1), on any
        process count. Named, left as written, like the wrap."""
        analysis, config = self.analysis, self.ctx.config
        facts = analysis.patterns.distribution
        wraps = {}
        for wrap in facts.wraps:
            bound = analysis.parent(wrap.call)  # `fan = nn.DataParallel(...)`, kept or not
            if isinstance(bound, cst.Assign) and run_by_other_files(analysis, wrap.call, config.run_callers, config.project_unpassed):
                for target in bound.targets:
                    wraps[(dotted_name(target.target), analysis.scope_of(wrap.call))] = wrap
        for access in facts.module_accesses:
            if isinstance(access, cst.IfExp):
                continue  # `m.module if hasattr(m, "module") else m`: right without the wrap too
            name = dotted_name(access.value)  # type: ignore[attr-defined]
            if (name, analysis.scope_of(access)) in wraps and not self._under_wrapper_test(access):
                note = f" ({RUN_CALLS_IT}; AM210 asks for its wrap to go, and this read goes with it)"
                self.report(access, subject=f"`{name}.module`", remedy=f"read `{name}` itself once the wrap goes", note=note)

    def _of_wraps_another_file_makes(self) -> None:
        """CycleGAN's BaseModel: `net = getattr(self, "net" + name)`, then
        `net.module.cpu().state_dict()`, of nets its subclass binds to what networks.py
        returns wrapped in DataParallel (project/hand_wrapped.py), in code other files of the
        run call. AM210 asks for that wrap to go, and this read goes with it."""
        analysis, config = self.analysis, self.ctx.config
        held = dict(config.project_hand_wrapped)
        if not held:
            return
        for access in analysis.nodes("Attribute"):
            if access.attr.value != "module" or isinstance(analysis.parent(access), cst.IfExp) or self._under_wrapper_test(access):
                continue  # `m.module if hasattr(m, "module") else m`: right without the wrap too
            name = dotted_name(access.value)  # type: ignore[attr-defined]
            where = self._held_wrap(access, name, held) if name else None
            if where is None or not run_by_other_files(analysis, access, config.run_callers, config.project_unpassed):
                continue
            note = f" ({RUN_CALLS_IT}; AM210 asks for the wrap at {where} to go, and this read goes with it{self._compiled()})"
            remedy = (
                f"once the wrap goes, read `accelerator.unwrap_model({name})` (the Accelerator handed in): the run prepares "
                "the model, a DistributedDataParallel wrapper on N processes"
            )
            self.report(access, subject=f"`{name}.module`", remedy=remedy, note=note)

    def _compiled(self) -> str:
        """`torch.compile` in this file (CycleGAN's BaseModel.setup compiles each net): the
        wrap's `.module` reached through the compiled module; without the wrap, the state
        dict of the compiled one has `_orig_mod.` keys, which a plain model does not load."""
        calls = [c for c in self.analysis.facts.calls if c.qualified == "torch.compile"]
        if not calls:
            return ""
        line = self.analysis.position(calls[0].node).start.line
        return (
            f"; the models are compiled too (line {line}): save `getattr(m, '_orig_mod', m)` of the unwrapped model `m`, "
            "or the saved keys gain `_orig_mod.`"
        )

    def _held_wrap(self, access: cst.CSTNode, name: str, held: dict[str, str]) -> str | None:
        """Where the wrap is of the model `name` holds: `self.netG` itself, or a name bound in
        the function to `getattr(self, "net" + name)` where every attribute so named holds one."""
        if name.startswith("self.") and name[5:] in held:
            return held[name[5:]]
        scope = self.analysis.scope_of(access)
        values = [b.value for b in self.analysis.facts.bindings if b.name == name and b.scope is scope]
        if len(values) != 1 or not isinstance(values[0], cst.Call) or dotted_name(values[0].func) != "getattr":
            return None
        args = values[0].args
        prefix = _constant_prefix(args[1].value) if len(args) == 2 and dotted_name(args[0].value) == "self" else None
        matching = {where for attr, where in held.items() if prefix and attr.startswith(prefix)}
        return matching.pop() if len(matching) == 1 else None

    def _under_wrapper_test(self, node: cst.CSTNode) -> bool:
        """Under `if isinstance(model, nn.DataParallel):` or `if hasattr(model, "module"):`
        (yassouali's base_trainer): without the wrap that branch is not taken."""
        current = self.analysis.parent(node)
        while current is not None and not isinstance(current, (cst.FunctionDef, cst.Module)):
            if isinstance(current, cst.If):
                test = cst.Module([]).code_for_node(current.test)
                if "DataParallel" in test or "'module'" in test or '"module"' in test:
                    return True
            current = self.analysis.parent(current)
        return False

    def _wrapped_here(self) -> set[str]:
        """Names this file wraps in DataParallel or DDP by hand (the wrapped and the wrapper)."""
        patterns = self.analysis.patterns
        names: set[str] = set()
        for wrap in patterns.distribution.wraps if patterns is not None else ():
            names.add(dotted_name(wrap.inner) or "")
            if isinstance(wrap.statement, cst.Assign):
                names |= {dotted_name(t.target) or "" for t in wrap.statement.targets}
        return names - {""}


def _constant_prefix(expr: cst.BaseExpression) -> str | None:
    """`"net"` of `"net" + name` and of `f"net{name}"`."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add) and isinstance(expr.left, cst.SimpleString):
        return expr.left.evaluated_value if isinstance(expr.left.evaluated_value, str) else None
    if isinstance(expr, cst.FormattedString) and expr.parts and isinstance(expr.parts[0], cst.FormattedStringText):
        return expr.parts[0].value or None
    return None


def _passes_true(call: cst.Call, flag: str) -> bool:
    """`flag=` handed something other than False or None: `CheckpointIO(path, **optims)`
    leaves `data_parallel=` out and never reads `.module`."""
    value = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == flag), None)
    return value is not None and not (isinstance(value, cst.Name) and value.value in ("False", "None"))


def _fields(name: str) -> dict[str, str]:
    return {"subject": f"`{name}.module`", "remedy": f"use `accelerator.unwrap_model({name})`"}

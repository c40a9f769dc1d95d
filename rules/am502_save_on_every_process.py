"""AM502: a model or checkpoint written by every process."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import Role, dotted_name
from migrator.analysis.prepared import accelerator_name_at
from migrator.analysis.reach import NO_ACCELERATOR_YET, ONE_PROCESS, run_by_other_files
from migrator.edits import replace
from migrator.rule import Example, FixAvailability, Rule

_PER_PROCESS = ("rank", "process_index", "local_process_index")
# qualified writer → index of its path argument
_NOT_MODELS = ("Tokenizer", "TokenizerFast", "Processor", "Config", "FeatureExtractor", "ImageProcessor")
_WRITERS = {"safetensors.torch.save_file": 1, "safetensors.torch.save_model": 1, "torch.jit.save": 1}


class SaveOnEveryProcess(Rule):
    """## What it does
    In a file that uses (or is about to get) an Accelerator, reports a model or checkpoint
    written on every process: `model.save_pretrained(dir)` without `is_main_process=`,
    `safetensors.torch.save_file/save_model`, `torch.jit.save`, or uploaded by every
    process (`push_to_hub`, `upload_folder`, `upload_file`), outside
    `if accelerator.is_main_process:` (or another main-process test, an early `return`
    for the other processes, `@accelerator.on_main_process`) and outside functions of the
    file that are only called from such places. For a model's `save_pretrained` it adds
    `is_main_process=accelerator.is_main_process`. A path built from the rank
    (`f"shard_{accelerator.process_index}"`) is a per-process file and is not reported.
    (`torch.save` on every process is AM510's, which rewrites it to `accelerator.save`.)
    In a file given no Accelerator whose code other files of the run call on every process
    (a checkpoint callback's `save_pretrained`), the write is named and left as written.

    ## Why is this bad?
    N processes write the same files at the same time. At best the work is done N
    times; at worst the writes interleave and the checkpoint is corrupt, which is found
    only when it is loaded.

    ## Example
    ```python
    accelerator.unwrap_model(model).save_pretrained(args.output_dir)
    ```

    Use instead:
    ```python
    accelerator.unwrap_model(model).save_pretrained(
        args.output_dir, is_main_process=accelerator.is_main_process
    )
    ```

    ## Known limits
    A write inside a function that this file never calls is not reported: its callers
    decide which processes run it. A tokenizer's `save_pretrained` has no
    `is_main_process` and is reported without a fix.

    ## See also
    - kakaobrain/scrl#5: a checkpoint corrupted by several processes writing it at once
      (https://github.com/kakaobrain/scrl/issues/5)
    - NVIDIA/apex#886: `save_checkpoint` corrupted when one process per node writes it
    - skorch-dev/skorch#1008: "all processes saving the parameters, when only the main
      process should"
    """

    code = "AM502"
    name = "save-on-every-process"
    message = "`{call}` runs on every process: N processes {what} at once{note}"
    fix_title = "Pass `is_main_process=accelerator.is_main_process`"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "model = accelerator.prepare(torch.nn.Linear(2, 2))\n"
                "accelerator.unwrap_model(model).save_pretrained(\"out\")\n"
            ),
            after=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "model = accelerator.prepare(torch.nn.Linear(2, 2))\n"
                "accelerator.unwrap_model(model).save_pretrained(\"out\", is_main_process=accelerator.is_main_process)\n"
            ),
            at=("6:1",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        elsewhere = not analysis.migrating and bool(self.ctx.config.run_callers)
        if not analysis.migrating and not elsewhere:
            return  # a file about to get its Accelerator too: a refused one still names the write
        for fact in analysis.facts.calls:
            call = fact.node
            func = call.func
            if elsewhere:
                self._in_code_run_elsewhere(call)
                continue
            pretrained = isinstance(func, cst.Attribute) and func.attr.value == "save_pretrained"
            if _uploads(func):
                if not self._main_only(call):
                    self.report(call, call=f"{dotted_name(func) or 'push_to_hub'}()", what=f"upload to {_repository(call)}", note="")
                continue
            index = 0 if pretrained else _WRITERS.get(analysis.imports.qualify(func) or "")
            if index is None or len(call.args) <= index or call.args[index].keyword is not None:
                continue
            if pretrained and any(a.keyword is not None and a.keyword.value == "is_main_process" for a in call.args):
                continue
            shown = cst.Module([]).code_for_node(call.args[index].value)
            if any(word in shown for word in _PER_PROCESS) or self._main_only(call):
                continue
            fields = {"call": f"{dotted_name(func) or func.attr.value}()", "what": f"write `{shown}`" if len(shown) <= 40 else "write the files", "note": ""}  # type: ignore[union-attr]
            accelerator = accelerator_name_at(analysis, call)
            if pretrained and accelerator is not None and self._is_model(func.value):  # type: ignore[union-attr]
                self.report(call, edits=[replace(call, _with_main_process(call, accelerator))], **fields)
            else:
                self.report(call, **fields)

    def _in_code_run_elsewhere(self, call: cst.Call) -> None:
        """A file given no Accelerator whose code other files of the run call on every
        process (Bert-Multi-Label's ModelCheckpoint, `model.save_pretrained(dir)` each
        epoch): each process writes the model. Named, left as written."""
        func = call.func
        name = func.attr.value if isinstance(func, cst.Attribute) else ""
        writes = name == "save_pretrained" or _uploads(func) or (self.analysis.imports.qualify(func) or "") in _WRITERS
        branches = self.analysis.branches
        if not writes or branches.branch_of(call) is not None or branches.runs_only_on_main(call):
            return
        if any(a.keyword is not None and a.keyword.value == "is_main_process" for a in call.args):
            return
        if not run_by_other_files(self.analysis, call, self.ctx.config.run_callers, self.ctx.config.project_unpassed):
            return
        shown = f"{dotted_name(func) or name}()"
        what = f"upload to {_repository(call)}" if _uploads(func) else "write the same files"
        self.report(call, call=shown, what=what, note=_ELSEWHERE)

    def _main_only(self, call: cst.Call) -> bool:
        branches = self.analysis.branches
        if branches.branch_of(call) is not None:
            return True  # main-only is right; others-only is AM901's business
        function = branches.function_of(call)
        return function is not None and (not branches.callers(function) or branches.runs_only_on_main(call))

    def _is_model(self, receiver: cst.BaseExpression) -> bool:
        """`accelerator.unwrap_model(model)`, a name bound to one, or a model built here
        (not a tokenizer, processor or config, whose save_pretrained has no is_main_process)."""
        if _is_unwrap(receiver):
            return True
        name = dotted_name(receiver)
        values = [b.value for b in self.analysis.facts.bindings if b.name == name and b.value is not None]
        if any(_is_unwrap(v) for v in values):
            return True
        for value in values:
            func = value.func if isinstance(value, cst.Call) else value
            while isinstance(func, cst.Attribute):
                if func.attr.value.endswith(_NOT_MODELS):
                    return False
                func = func.value
            if isinstance(func, cst.Name) and func.value.endswith(_NOT_MODELS):
                return False
        return self.analysis.roles.of(name) is Role.MODEL


_ELSEWHERE = f" ({NO_ACCELERATOR_YET}: run it on one process only, at the call or here {ONE_PROCESS})"
# uploads to a model hub: `model.push_to_hub(repo)`, cleanrl's `push_to_hub(args, ...)`,
# `huggingface_hub.upload_folder(repo_id=..., folder_path=...)`, `HfApi().upload_file(...)`
_UPLOADERS = ("push_to_hub", "upload_folder", "upload_file")


def _uploads(func: cst.BaseExpression) -> bool:
    name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
    return name in _UPLOADERS


def _repository(call: cst.Call) -> str:
    """The repository an upload names (`repo_id=`), else "the hub"."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value in ("repo_id", "repo_name"):
            shown = cst.Module([]).code_for_node(arg.value)
            return f"`{shown}`" if len(shown) <= 40 else "the hub"
    return "the hub"


def _is_unwrap(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Call) and (dotted_name(expr.func) or "").endswith("unwrap_model")


def _with_main_process(call: cst.Call, accelerator: str) -> cst.Call:
    """The call with `is_main_process=...` appended, in the call's own layout (one
    argument per line stays one argument per line)."""
    args = list(call.args)
    last = args[-1].comma
    arg = cst.Arg(
        cst.parse_expression(f"{accelerator}.is_main_process"),
        keyword=cst.Name("is_main_process"),
        equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
    )
    if isinstance(last, cst.Comma):  # a trailing comma: the new argument takes it over
        between = args[-2].comma if len(args) > 1 else cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        args[-1] = args[-1].with_changes(comma=between)
        arg = arg.with_changes(comma=last)
    else:
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return call.with_changes(args=[*args, arg])

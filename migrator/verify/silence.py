"""No training code passes in silence: a file that calls backward, steps an optimizer or
clips gradients by hand, and gets neither a migration nor a single finding, is reported.

The last safety net behind every rule: whatever shape hid the set-up (a base class in
another module, a framework-style trainer), the user hears that this file trains and was
left as written.
"""

from __future__ import annotations

import ast
import os
from typing import Iterator

from migrator.verify.pair import Problem
from migrator.verify.program import Program, call_name, dotted, iterated, last

CODE = "AM916"
_LIMIT = 3  # places named per file: enough to find them, not a wall of text


def silent_training(text: str, called: frozenset[str] = frozenset()) -> list[Problem]:
    """`called`: names of this file that other files of the run call (Config.run_callers):
    a training call inside one of them has its set-up in the run, handed over without an
    Accelerator (the caller's AM914 says why), not missing."""
    program = Program.parse(text)
    if program is None or program.prepares or _has_accelerator(program):
        return []  # already migrated: its remaining steps are the Accelerator's own
    found = list(_training_calls(program))[:_LIMIT]
    if not found:
        return list(_wrapped_for_training(program, text))
    return [
        Problem(CODE, call.lineno, call.col_offset + 1, _reason(what, _owner(program, call), called))
        for what, call in found
    ]


_WRAPS = ("DataParallel", "DistributedDataParallel", "DataParallelWithCallback")


def wrapped_for_training(text: str, reported: bool = False) -> list[Problem]:
    """`_wrapped_for_training` of a file that got findings on code other files call only
    (`reported`: its wording does not say nothing was reported)."""
    program = Program.parse(text)
    if program is None or program.prepares or _has_accelerator(program):
        return []
    return list(_wrapped_for_training(program, text, reported))


def _wrapped_for_training(program: Program, text: str, reported: bool = False) -> Iterator[Problem]:
    """yassouali's BaseTrainer: `__init__` wraps the model in DataParallel and builds its
    optimizer through a factory (`get_instance(torch.optim, ...)`), the subclass in another
    file runs the backward. Nothing here calls backward, and no set-up is readable: the
    wrap, in a file that builds an optimizer, is named (once)."""
    if "optim" not in text:
        return
    nothing = "nothing here was migrated" if reported else "nothing here was migrated or reported"
    for call in program.calls:
        if last(call_name(call)) in _WRAPS:
            yield Problem(
                CODE, call.lineno, call.col_offset + 1,
                f"`{call_name(call)}(...)` wraps a model this file builds an optimizer for, but {nothing}: its "
                "set-up could not be read whole (an optimizer or loaders from a factory, or the training loop in "
                "another file); migrate it by hand, preparing the model together with its optimizer in place of the "
                "wrap, and the training loader where it is built (one handed in is prepared by its caller; a scheduler "
                "sized from `len(loader)` then counts the prepared loader's batches and stays out of prepare())",
            )
            return


def driven_training(
    text: str, drives: tuple[tuple, ...], path: str = "", entering: frozenset[str] = frozenset(), besides: str = "",
) -> list[Problem]:
    """The calls by which an unmigrated file runs the training of another file of the run
    (`trainer.train_step(...)` of a FasterRCNNTrainer whose methods call backward):
    project/drives.py. The first one is named, once per function or class. The other file
    is named from the folder the two share (trainer/trainer.py for base/base_trainer.py);
    when the run only read it, its findings show in a run given both files. A class that
    creates its own Accelerator (`entering`), fed batch by batch from a loader of this file,
    is migrated alone: the loader is what this file must prepare, with that Accelerator.
    `besides`: the model AM001 already names as handed to a training left as written; only
    the drives it does not reach are named (pytorch-a2c's GAIL `discr.update(...)` beside
    the policy handed to PPO)."""
    program = Program.parse(text)
    if program is None or program.prepares or _has_accelerator(program):
        return []
    out, seen = [], set()
    for spelling, line, col, file, name, in_run, *held in drives:
        if name in seen or besides and _reached_by(program, line, besides):
            continue
        seen.add(name)
        # read around this file only: its findings show in a run given both files (which may still refuse)
        together = "" if in_run else ", in a run given both files,"
        where = _from_common_folder(file, path)
        # `get_model()`: a factory returning one of several classes that train (project/drives.py)
        whose = f"the model `{name}` returns" if name.endswith("()") else f"`{name}`"
        findings_of = f"the classes `{name}` returns" if name.endswith("()") else where
        loader = _drawn_from(program, line)
        if name in entering:
            fed = loader or _iterated_at(program, line)
            if fed:
                out.append(Problem(CODE, line, col, _fed_unprepared(spelling, name, where, fed, known=bool(loader))))
            continue
        each = "them all" if loader and "`, `" in loader else "it"
        batches = f"; the loop here draws its batches from `{loader}`: prepare {each} with them" if loader else ""
        drawn = {last(n) for n in (loader or "").split("`, `")}
        others = sorted(n for n in program.loader_names if n not in drawn and _iterated_here(program, n))
        if loader and others:
            shown = ", ".join(f"`{n}`" for n in others[:4])
            batches += (
                f" ({shown}: as written each process reads {'them' if len(others) > 1 else 'it'} on its own, a shuffled "
                "one in its own order; prepared, gather what is measured there, or the metrics and a plateau scheduler "
                "see one share per process)"
            )
        holder = held[0] if held else ""
        alongside = (
            f"it trains beside `{besides}`, which AM001 asks to prepare: prepare the model it trains and its optimizer "
            "with the same Accelerator when you migrate by hand, or each process trains a copy of its own and the "
            f"copies drift apart; the findings of {findings_of}{together} name anything else in the way"
        )
        why = alongside if besides else (
            f"`{name}` is also called by {holder}, which this run only reads: it would not be updated to pass the "
            "Accelerator, so neither is migrated (run the tool on that file too, or migrate them by hand)"
            if holder else
            "the two are migrated together or not at all, and this file makes no Accelerator to hand over (it "
            f"prepares nothing itself); the findings of {findings_of}{together} name anything else in the way"
        )
        out.append(Problem(
            CODE, line, col,
            f"`{spelling}(...)` runs the training of {whose} ({where}), which needs the Accelerator, "
            f"but nothing here was migrated or reported: {why}{batches}",
        ))
    return out[:_LIMIT]


def _reached_by(program: Program, line: int, model: str) -> bool:
    """The drive on `line` is handed `model`, or is a method of an object built with it
    (`agent = algo.PPO(actor_critic, ...)`, then `agent.update(rollouts)`)."""
    def hands(call: ast.Call) -> bool:
        given = [*call.args, *(k.value for k in call.keywords)]
        return any(dotted(a) == model for a in given)

    for call in program.calls:
        if call.lineno != line:
            continue
        if hands(call):
            return True
        receiver = dotted(call.func.value) if isinstance(call.func, ast.Attribute) else None
        if receiver is not None and any(
            isinstance(a.value, ast.Call) and hands(a.value) for a in program.assigns if a.target == receiver
        ):
            return True
    return False


def _fed_unprepared(spelling: str, name: str, where: str, loader: str, known: bool) -> str:
    """The loop feeding a class that creates its own Accelerator: its loader is this file's."""
    it = "them" if "`, `" in loader else "it"
    what = f"`{loader}`" if known else f"`{loader}` (the DataLoader it is, or holds)"
    return (
        f"`{spelling}(...)` runs the training of `{name}` ({where}), which creates its own Accelerator, but the loop "
        f"here draws its batches from `{loader}`, which nothing prepares: every process reads all of {it}, each in "
        f"its own order if shuffled; prepare {what} with the Accelerator `{name}` holds, before the loop"
    )


def _iterated_at(program: Program, line: int) -> str | None:
    """What the innermost `for` around the call on `line` iterates, by name, whatever it is."""
    loops = [
        n for n in ast.walk(program.tree)
        if isinstance(n, (ast.For, ast.AsyncFor)) and n.lineno <= line <= (n.end_lineno or n.lineno)
    ]
    return iterated(max(loops, key=lambda n: n.lineno).iter) if loops else None


def _drawn_from(program: Program, line: int) -> str | None:
    """What the innermost `for` around the call on `line` iterates, when it is a loader
    this file builds (Attention-Gated-Networks' `for ... in tqdm(enumerate(train_loader, 1))`,
    calling `model.optimize_parameters()`): the script's share of the migration (reader R1,
    twentieth session)."""
    loops = [
        n for n in ast.walk(program.tree)
        if isinstance(n, (ast.For, ast.AsyncFor)) and n.lineno <= line <= (n.end_lineno or n.lineno)
    ]
    if not loops:
        return None
    loop = max(loops, key=lambda n: n.lineno)
    source = loop.iter
    while isinstance(source, ast.Call) and last(call_name(source)) in ("enumerate", "tqdm") and source.args:
        source = source.args[0]
    if isinstance(source, ast.Call) and last(call_name(source)) == "zip":  # MUNIT's zip(train_loader_a, train_loader_b)
        names = [dotted(a) for a in source.args]
        if names and all(n is not None and _a_loader(program, n) for n in names):
            return "`, `".join(names)  # type: ignore[arg-type]
        return None
    name = iterated(loop.iter)
    return name if name is not None and _a_loader(program, name) else None


def _a_loader(program: Program, name: str) -> bool:
    """A DataLoader this file builds, or one a helper of the run hands it, named as one
    (`train_loader_a` from `get_all_data_loaders(config)`)."""
    return program.is_loader(name) or "loader" in last(name).lower()


def _iterated_here(program: Program, name: str) -> bool:
    """A loader of this file some loop of it iterates (`for images, labels in valid_loader`,
    or through `zip([valid_loader, test_loader], ...)`)."""
    return any(
        isinstance(n, (ast.For, ast.AsyncFor)) and any(isinstance(m, ast.Name) and m.id == name for m in ast.walk(n.iter))
        for n in ast.walk(program.tree)
    )


def _from_common_folder(file: str, path: str) -> str:
    if not path:
        return os.path.basename(file)
    both = [os.path.abspath(file), os.path.abspath(path)]
    return os.path.relpath(both[0], os.path.commonpath([os.path.dirname(p) for p in both]))


def _reason(what: str, owner: str | None, called: frozenset[str]) -> str:
    if owner is not None and owner in called:
        return (
            f"`{what}` trains, but nothing here was migrated or reported: the set-up it belongs to is in "
            f"another file of this project, which calls `{owner}` without an Accelerator it could hand over (its "
            "AM914 says why); migrate the two by hand, passing the Accelerator in"
        )
    return (
        f"`{what}` trains, but nothing here was migrated or reported: the set-up it belongs to "
        "(model, optimizer, loaders) is not in this file; migrate it with the file that builds "
        "them, or pass the Accelerator in by hand"
    )


def _owner(program: Program, call: ast.Call) -> str | None:
    """The top-level function or class of the module the call sits in."""
    for node in program.tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and any(n is call for n in ast.walk(node)):
            return node.name
    return None


def _has_accelerator(program: Program) -> bool:
    """The file creates or uses an Accelerator (migrated, or handed one)."""
    for call in program.calls:
        if last(call_name(call)) == "Accelerator":
            return True
        if isinstance(call.func, ast.Attribute) and program.is_accelerator(call.func.value):
            return True
    return False


def _training_calls(program: Program) -> Iterator[tuple[str, ast.Call]]:
    for call in program.calls:
        func = call.func
        if not isinstance(func, ast.Attribute):
            if isinstance(func, ast.Name) and func.id in ("clip_grad_norm_", "clip_grad_value_"):
                yield f"{func.id}(...)", call
            continue
        receiver = dotted(func.value) or ""
        if last(receiver) == "accelerator":
            continue
        if func.attr == "backward":
            yield f"{ast.unparse(func.value)}.backward()", call
        elif func.attr == "step" and "optim" in last(receiver).lower():
            yield f"{receiver}.step()", call
        elif func.attr in ("clip_grad_norm_", "clip_grad_value_") and "accelerator" not in call_name(call):
            yield f"{call_name(call)}(...)", call

"""The engine's callers written as one function appended below the engine while it is
migrated, so its rules see what they see when caller and engine share a file; cut off
again before anything is shown or written."""

from __future__ import annotations

from migrator.analysis.reach import CALLERS_STUB
from migrator.findings import FileResult, FileStatus
from migrator.project.calls import MAIN_ONLY, TORCH_DEVICE
from migrator.project.index import ACCELERATOR, Function

STUB = CALLERS_STUB
SEPARATOR = "\n\n\n# accel-migrate: the callers in other files of this run (removed after migration)\n"


# What the stub binds a prepared parameter to, by its role in the caller, so the engine's
# analysis gives the parameter the same role (never run: the stub is cut off).
_STAND_INS = {
    "model": "torch.nn.Module()",
    "optimizer": "torch.optim.SGD([], lr=0.0)",
    "dataloader": "torch.utils.data.DataLoader([])",
    "scheduler": "torch.optim.lr_scheduler.LambdaLR(None, None)",
}


def caller_stub(files, mine, prepared, target_import: str) -> tuple[str | None, set[tuple[str, str]]]:
    """The callers of `mine` as one function: the Accelerator, `device = accelerator.device`
    where the callers pass its device (`torch.device(accelerator.device)` where they passed
    a torch.device before), one prepare() of what they pass prepared, then one
    call per function; and the functions left out of it. The engine's analysis knows names,
    not scopes, so a function is left out when a parameter name would mean two things (a
    `loader` prepared at one call and not at another, here or in a function taken before)."""
    engine = files[mine[0][0]]
    kinds: dict[str, str] = {}
    lines = []
    left_out = set()
    mapped_all = {t: parameter_kinds(engine.functions[t[1]].params, prepared.get(t, [])) for t in mine}
    # the function handed the most prepared objects first (the training one): its names win
    order = sorted(mine, key=lambda t: (-sum(k.startswith("prepared:") for k in (mapped_all[t] or {}).values()), t))
    for target in order:
        function = engine.functions[target[1]]
        mapped = mapped_all[target]
        names = _own_names(mapped, kinds, target[1]) if mapped is not None else {}
        mapped = {names[p]: k for p, k in mapped.items()} if mapped is not None else None
        if mapped is None or _clashes(mapped, kinds):
            left_out.add(target)
            continue
        args = [names[p] for p in function.params if p in names] + [f"{p}={names[p]}" for p in function.kwonly if p in names]
        if function.threaded_before:  # its callers pass the Accelerator already (an earlier run)
            args.append(f"{ACCELERATOR}={ACCELERATOR}")
        missing = [p for p in function.params if p not in names]
        if missing and any(function.params.index(p) < len(args) for p in missing):
            left_out.add(target)  # an argument the callers leave to its default sits between given ones
            continue
        audiences = {call.get(MAIN_ONLY, "every") for call in prepared.get(target, [])}
        if len(audiences) > 1:
            left_out.add(target)  # called by every process here, by the main one there
            continue
        kinds.update(mapped)
        methods = _method_calls(function, target, prepared, kinds) if function.is_class else []
        if audiences == {"main"}:  # its callers call it on the main process only
            lines.append(f"    if {ACCELERATOR}.is_main_process:\n        {target[1]}({', '.join(args)})\n")
        elif methods:  # an instance the callers call methods of, handed prepared objects
            instance = f"_{target[1].lower()}"
            lines.append(f"    {instance} = {target[1]}({', '.join(args)})\n")
            lines += [f"    {instance}{'' if m == '__call__' else '.' + m}({', '.join(a)})\n" for m, a in methods]
        else:
            lines.append(f"    {target[1]}({', '.join(args)})\n")
    if not lines:
        return None, left_out
    params = sorted(kinds)
    head = [f"def {STUB}({', '.join(p for p in params if kinds[p] == 'other')}):\n",
            "    import torch\n",
            f"    from {target_import} import Accelerator\n",
            f"    {ACCELERATOR} = Accelerator()\n"]
    head += [f"    {p} = {ACCELERATOR}.device\n" for p in params if kinds[p] == "device"]
    # a torch.device in the callers before the migration too: the engine's verifier sees
    # it was one (a `device == "cuda"` there was False already, and stays so)
    head += [f"    {p} = torch.device({ACCELERATOR}.device)\n" for p in params if kinds[p] == TORCH_DEVICE]
    ready = [p for p in params if kinds[p].startswith("prepared:")]
    whole = [p for p in params if kinds[p] == "whole:dataloader"]  # handed over before (or without) prepare()
    head += [f"    {p} = {_STAND_INS.get(kinds[p].partition(':')[2], 'object()')}\n" for p in ready + whole]
    if ready:
        targets = ", ".join(ready) + ("," if len(ready) == 1 else "")
        head.append(f"    {targets} = {ACCELERATOR}.prepare({', '.join(ready)})\n")
    return "".join(head + lines), left_out


def _method_calls(cls: Function, target, prepared, kinds: dict[str, str]) -> list[tuple[str, list[str]]]:
    """The calls the callers make of an instance's methods with a prepared object, as the
    stub makes them (method, arguments); `kinds` takes their parameters. A method whose
    calls disagree, or whose parameter names mean something else already, is left out."""
    out = []
    for method, params in cls.methods:
        calls = prepared.get((target[0], f"{target[1]}.{method}"), [])
        mapped = parameter_kinds(params, calls) if calls else None
        if not mapped or not any(k.startswith("prepared:") for k in mapped.values()):
            continue
        states = next((names for m, _, names, _ in cls.method_states if m == method), ())
        mapped = {p: "prepared:model" if k == "prepared:" and p in states else k for p, k in mapped.items()}  # its state is saved
        if _clashes(mapped, kinds):
            continue
        if any(call.get(MAIN_ONLY) == "main" for call in calls):
            continue
        args = [p for p in params if p in mapped]
        if args != list(params[: len(args)]):
            continue  # an argument left to its default sits between given ones
        kinds.update(mapped)
        out.append((method, args))
    return out


def _own_names(mapped: dict[str, str], kinds: dict[str, str], function: str) -> dict[str, str]:
    """Parameter → the stub's name for what the callers pass it: the parameter's own name,
    or a name of its own (`model_load_checkpoint`) for an object the callers pass unprepared
    where a function taken before was passed a prepared one under that name, so the
    function is still called (its callers' arguments shown) without the two meeting."""
    names = {}
    for p, kind in mapped.items():
        clash = kinds.get(p, kind) != kind and kind == "other"
        names[p] = f"{p}_{function.lower()}" if clash else p
    return names


def _clashes(mapped: dict[str, str], kinds: dict[str, str]) -> bool:
    """A parameter name that already means something else in the stub, or one of the
    names the stub itself binds."""
    return any(kinds.get(p, k) != k for p, k in mapped.items()) or bool({ACCELERATOR, "torch", "Accelerator", STUB} & set(mapped))


def parameter_kinds(params: tuple[str, ...], calls: list[dict[object, str]]) -> dict[str, str] | None:
    """Parameter → what every call passes it; None when calls disagree or overflow."""
    kinds: dict[str, str] = {}
    for call in calls:
        for key, kind in call.items():
            if key == MAIN_ONLY:
                continue
            if isinstance(key, int):
                if key >= len(params):
                    return None
                key = params[key]
            if kinds.setdefault(key, kind) != kind:
                return None
    return kinds


def with_stub(text: str, stub: str) -> str:
    """The engine's text with its callers' stub appended (no line of `text` moves)."""
    return text + ("" if text.endswith("\n") else "\n") + SEPARATOR + stub


def without_stub(result: FileResult, text: str) -> FileResult | None:
    """The engine's result with the stub cut off again, findings on its lines dropped;
    None when the stub is not where it was put (the migration moved code around it)."""
    from dataclasses import replace

    lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    after = result.after
    if after is None:
        return None
    at = after.rfind(SEPARATOR + f"def {STUB}(")
    if at < 0:
        return None
    after = after[:at] + ("" if text.endswith("\n") else "")
    if not text.endswith("\n") and after.endswith("\n"):
        after = after[:-1]
    findings = tuple(f for f in result.findings if f.start.line <= lines)
    touched = frozenset(n for n in result.touched_lines if n <= lines)
    status = FileStatus.CHANGED if after != text else FileStatus.UNCHANGED
    return replace(result, before=text, after=after, findings=findings, touched_lines=touched, status=status)

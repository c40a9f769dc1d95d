"""What a project's own distribution helpers do, read from their bodies.

Hand-distributed projects keep their plumbing in a `utils.py`: `init_distributed_mode(args)`
reads the launcher's variables, joins the process group and sets `args.rank`, `args.gpu`,
`args.distributed`; `get_rank()`, `get_world_size()`, `is_main_process()` and
`save_on_master(...)` wrap torch.distributed. A caller migrated onto the Accelerator must
know what each call does to replace it: the set-up helper by the attributes it sets,
each read from the Accelerator, the others by the Accelerator's own property or method.

Read with `ast` from the defining file; a helper whose body does something else is not
one of these (the caller then keeps the call, and the verifier refuses a set-up helper
left running beside the Accelerator).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

# What a helper's call becomes, by kind.
PROPERTIES = {
    "process_index": "process_index",
    "num_processes": "num_processes",
    "local_process_index": "local_process_index",
    "is_main_process": "is_main_process",
}
_ENV = {
    "RANK": "process_index", "SLURM_PROCID": "process_index", "WORLD_SIZE": "num_processes",
    "SLURM_NTASKS": "num_processes", "LOCAL_RANK": "local_process_index", "SLURM_LOCALID": "local_process_index",
}
_QUERIES = {"get_rank": "process_index", "get_world_size": "num_processes"}
# How the attribute a set-up helper sets reads once the Accelerator places the process.
ATTRIBUTE_VALUES = {
    "process_index": "{acc}.process_index",
    "num_processes": "{acc}.num_processes",
    "local_process_index": "{acc}.local_process_index",
    "distributed": "{acc}.num_processes > 1",
}


@dataclass(frozen=True)
class Helper:
    """`kind`: a key of PROPERTIES, "save_on_master", "reduced" (returns its argument
    all-reduced: the same on every process), "log_file" (sends the log to a file),
    "wraps_model" (wraps a model it is handed in DataParallel or DDP), or "setup". For
    "setup": `attributes`
    holds (attribute of its parameter, meaning: a key of ATTRIBUTE_VALUES or "" when
    unknown), and `prints` the helper it calls to silence print on the other processes."""

    kind: str
    attributes: tuple[tuple[str, str], ...] = ()
    prints: str = ""


def summarise(tree: ast.Module) -> dict[str, Helper]:
    """The module's top-level functions that are distribution helpers, by name."""
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    out: dict[str, Helper] = {}
    for _ in range(3):  # helpers built on helpers: is_main_process() → get_rank()
        for name, function in functions.items():
            if name not in out:
                helper = _helper(function, out)
                if helper is not None:
                    out[name] = helper
    return out


def _helper(function: ast.FunctionDef, known: dict[str, Helper]) -> Helper | None:
    returns = [n.value for n in ast.walk(function) if isinstance(n, ast.Return) and n.value is not None]
    if returns and _wraps_argument(function):
        return Helper("wraps_model")
    if returns and _reduces_argument(function):
        return Helper("reduced")
    if returns:
        kinds = {_meaning(r, known) for r in returns if not _constant(r)}
        if len(kinds) == 1 and (kind := kinds.pop()) in PROPERTIES:
            return Helper(kind)
        return None
    if _saves_on_master(function, known):
        return Helper("save_on_master")
    if _opens_log_file(function):
        return Helper("log_file")
    return _setup(function, known)


def _opens_log_file(function: ast.FunctionDef) -> bool:
    """`logging.FileHandler(path)` or `logging.basicConfig(filename=...)` in the body: a
    helper that sends the log to a file (cs230's `set_logger(log_path)`)."""
    for node in ast.walk(function):
        if isinstance(node, ast.Call):
            name = _callee(node)
            if name.rsplit(".", 1)[-1] in ("FileHandler", "RotatingFileHandler", "TimedRotatingFileHandler"):
                return True
            if name.rsplit(".", 1)[-1] == "basicConfig" and any(k.arg == "filename" for k in node.keywords):
                return True
    return False


_MODEL_WRAPS = ("DataParallel", "DistributedDataParallel")


def _wraps_argument(function: ast.FunctionDef) -> bool:
    """`nn.DataParallel(model, ...)` of a parameter, then a return: the helper hands back
    its model wrapped (lonePatient's `model, device = model_device(n_gpu, model)`), which
    beside prepare() nests two wrappers or splits one process's batch over every GPU."""
    args = function.args
    params = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
    return any(
        isinstance(n, ast.Call) and _callee(n).rsplit(".", 1)[-1] in _MODEL_WRAPS and n.args
        and isinstance(n.args[0], ast.Name) and n.args[0].id in params
        for n in ast.walk(function)
    )


def _reduces_argument(function: ast.FunctionDef) -> bool:
    """`dist.all_reduce(value)` on a parameter, then a return: what it returns is the same
    on every process (`reduce_mean(loss)`), so a caller summing it sums a reduced value."""
    params = {a.arg for a in function.args.args}
    # and names copied from one (Swin's `rt = tensor.clone()`, then `dist.all_reduce(rt)`)
    params |= {
        t.id for n in ast.walk(function) if isinstance(n, ast.Assign)
        and any(isinstance(m, ast.Name) and m.id in params for m in ast.walk(n.value))
        for t in n.targets if isinstance(t, ast.Name)
    }
    return any(
        isinstance(n, ast.Call) and _callee(n).rsplit(".", 1)[-1] == "all_reduce" and n.args
        and isinstance(n.args[0], ast.Name) and n.args[0].id in params
        for n in ast.walk(function)
    )


def _constant(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant)


def _meaning(node: ast.AST, known: dict[str, Helper]) -> str:
    """"process_index" for `dist.get_rank()`, `int(os.environ["RANK"])`, `get_rank()` of a
    known helper; "is_main_process" for such a rank compared `== 0`; "" otherwise."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq):
        right = node.comparators[0]
        if isinstance(right, ast.Constant) and right.value == 0 and _meaning(node.left, known) == "process_index":
            return "is_main_process"
        return ""
    if isinstance(node, ast.Call):
        name = _callee(node)
        if name == "int" and len(node.args) == 1:
            return _ENV.get(_environ_key(node.args[0]) or "", "")
        last = name.rsplit(".", 1)[-1]
        if last in _QUERIES and (name.startswith(("dist.", "torch.distributed.")) or name == last and last not in known):
            return _QUERIES[last]
        if name in known and known[name].kind in PROPERTIES:
            return known[name].kind
    return ""


def _callee(call: ast.Call) -> str:
    try:
        return ast.unparse(call.func)
    except Exception:  # noqa: BLE001 - any odd node is simply not a helper
        return ""


def _environ_key(node: ast.AST) -> str | None:
    if isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("environ"):
        key = node.slice
        return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None
    if isinstance(node, ast.Call) and _callee(node).endswith("environ.get") and node.args:
        key = node.args[0]
        return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None
    return None


def _saves_on_master(function: ast.FunctionDef, known: dict[str, Helper]) -> bool:
    """`if is_main_process(): torch.save(*args, **kwargs)` and nothing else."""
    body = [s for s in function.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if len(body) != 1 or not isinstance(body[0], ast.If) or body[0].orelse:
        return False
    test, inner = body[0].test, body[0].body
    main = isinstance(test, ast.Call) and not test.args and known.get(_callee(test), Helper("")).kind == "is_main_process"
    main = main or _meaning(test, known) == "is_main_process"
    return (
        main and len(inner) == 1 and isinstance(inner[0], ast.Expr) and isinstance(inner[0].value, ast.Call)
        and _callee(inner[0].value) == "torch.save"
    )


def _setup(function: ast.FunctionDef, known: dict[str, Helper]) -> Helper | None:
    """A function of one parameter that joins the process group and records what it
    found on that parameter (`args.rank = int(os.environ["RANK"])`)."""
    params = [a.arg for a in function.args.args]
    if len(params) != 1 or function.args.vararg or function.args.kwarg:
        return None
    calls = [_callee(n) for n in ast.walk(function) if isinstance(n, ast.Call)]
    if not any(c.rsplit(".", 1)[-1] == "init_process_group" for c in calls):
        return None
    holder = params[0]
    meanings: dict[str, set[str]] = {}
    for node in ast.walk(function):
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == holder:
                meanings.setdefault(target.attr, set()).add(_attribute_meaning(node.value, holder, meanings, known))
    attributes = tuple(sorted((a, m.pop() if len(m) == 1 else "") for a, m in meanings.items()))
    prints = next((c for c in calls if c == "setup_for_distributed"), "")
    return Helper("setup", attributes, prints)


def _attribute_meaning(value: ast.AST, holder: str, meanings: dict[str, set[str]], known: dict[str, Helper]) -> str:
    if isinstance(value, ast.Constant) and isinstance(value.value, bool):
        return "distributed"
    if (
        isinstance(value, ast.BinOp) and isinstance(value.op, ast.Mod)
        and "device_count" in ast.unparse(value.right)
        and _holder_attribute(value.left, holder, meanings) == "process_index"
    ):
        return "local_process_index"  # args.gpu = args.rank % torch.cuda.device_count()
    attribute = _holder_attribute(value, holder, meanings)
    if attribute:
        return attribute
    return _meaning(value, known) if _meaning(value, known) in ATTRIBUTE_VALUES else ""


def _holder_attribute(value: ast.AST, holder: str, meanings: dict[str, set[str]]) -> str:
    """`args.rank` read back inside the helper: what it was set to."""
    if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and value.value.id == holder:
        found = meanings.get(value.attr, set())
        return next(iter(found)) if len(found) == 1 else ""
    return ""


# Only a file that names torch.distributed, a model wrap, or a log file handler can define one of these helpers.
MARKS = (b"distributed", b"DataParallel", b"FileHandler", b"basicConfig")


def distribution_calls(sources: dict[str, bytes], files) -> dict[str, tuple]:
    """For each file of the run that calls another file's distribution helper: (the call
    as spelled there, kind, attributes, print helper as spelled there), as
    Config.project_distribution takes them. A set-up helper's attributes are those some
    file but the helper's reads (`args.gpu`): (attribute, meaning, read by another file
    than the caller); one it sets without a meaning we know
    and that another file reads keeps the whole call out (it then stays, and the
    verifier refuses it beside the Accelerator)."""
    targets = {c.target for f in files.values() for c in f.calls if c.target[0] != f.path}
    summaries: dict[str, dict[str, Helper]] = {}
    for path in sorted({t[0] for t in targets}):
        if any(mark in sources.get(path, b"") for mark in MARKS):
            try:
                summaries[path] = summarise(ast.parse(sources[path]))
            except (SyntaxError, ValueError):
                continue
    out = {}
    for path, f in files.items():
        read = {w for p, other in files.items() if p not in summaries for w in other.words}
        elsewhere = {w for p, other in files.items() if p not in summaries and p != path for w in other.words}
        calls = set()
        for c in f.calls:
            helper = summaries.get(c.target[0], {}).get(c.target[1])
            if helper is None or c.target[0] == path:
                continue
            attributes = tuple((a, m, a in elsewhere) for a, m in helper.attributes if a in read)
            if any(not m for _, m, _ in attributes):
                continue
            prints = ""
            if helper.prints and "." in c.spelling and helper.prints in summaries[c.target[0]] | _names(files, c.target[0]):
                prints = f"{c.spelling.rsplit('.', 1)[0]}.{helper.prints}"
            calls.add((c.spelling, helper.kind, attributes, prints))
        if calls:
            out[path] = tuple(sorted(calls))
    for path, names in _gated_log_helpers(sources, files, summaries).items():
        out[path] = tuple(sorted(set(out.get(path, ())) | {(name, "log_file_gated", (), "") for name in names}))
    return out


def _gated_log_helpers(sources: dict[str, bytes], files, summaries: dict[str, dict[str, Helper]]) -> dict[str, set[str]]:
    """For each helper's file, its log-file helpers whose every call in the run is a
    statement of its own (the callers put those under `if accelerator.is_main_process:`,
    AM519), so the file handler inside them is not every process's any more."""
    calls: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for path, f in files.items():
        for c in f.calls:
            if summaries.get(c.target[0], {}).get(c.target[1], Helper("")).kind == "log_file" and c.target[0] != path:
                calls.setdefault(c.target, []).append((path, c.spelling))
    out: dict[str, set[str]] = {}
    for target, where in calls.items():
        if all(_standalone(sources[path], spelling) for path, spelling in where):
            out.setdefault(target[0], set()).add(target[1])
    return out


def _standalone(source: bytes, spelling: str) -> bool:
    """Every call spelled `spelling` in the file is an expression statement of its own."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _callee(n) == spelling]
    alone = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
    return bool(found) and all(id(n) in alone for n in found)


def _names(files, path: str) -> dict[str, object]:
    owner = files.get(path)
    return dict(owner.functions) if owner is not None else {}

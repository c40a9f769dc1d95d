"""What a set-up hands to functions of other files, read from what those functions do.

`model = get_model(cfg)`, `optimizer = get_optimizer(cfg, model)`: built by helpers the
set-up's own analysis cannot read, these names get no role, the file does not look like
training code, and nothing is said. But the set-up then calls
`simclr_train(train_loader, model, criterion, optimizer, epoch)`, whose body calls
`optimizer.zero_grad()`, `model.train()` and iterates `train_loader` into the model: the
index reads those uses (index.py `_param_roles`), and the set-up is migrated with
`Config.project_roles` saying, for each such call, which argument is which role. A name
keeps any role its own file gives it (roles.assign_roles).
"""

from __future__ import annotations

from migrator.project.index import FileIndex


def role_calls(
    sources: dict[str, bytes], files: dict[str, FileIndex], read_only: frozenset[str] = frozenset(),
) -> dict[str, tuple[tuple[str, tuple[tuple[str, str], ...]], ...]]:
    """For each file of the run that calls such a function of another file: (the call as
    spelled there, ((position or parameter name, role), ...)), as Config.project_roles takes them.
    A function of a file the run only reads speaks only when an earlier run threaded it or
    its caller has an Accelerator already: otherwise the caller would be prepared for an
    engine that stays as written."""
    out = {}
    for path, f in files.items():
        calls = set()
        for c in f.calls:
            owner = files.get(c.target[0])
            function = owner.functions.get(c.target[1]) if owner is not None and c.target[0] != path else None
            if function is None or not function.param_roles:
                continue
            if c.target[0] in read_only and not function.threaded_before and b"Accelerator(" not in sources.get(path, b""):
                continue  # a caller set up already (a migrated file) prepares nothing new for it
            keys = []
            for name, role in function.param_roles:
                keys.append((name, role))
                if name in function.params:
                    keys.append((str(function.params.index(name)), role))
            calls.add((c.spelling, tuple(sorted(keys))))
        if calls:
            out[path] = tuple(sorted(calls))
    return out

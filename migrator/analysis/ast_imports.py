"""What a module's imports make of the names it calls, read with `ast` (the project
readers and the rules that read another file's code as text): `vutils.save_image` is
`torchvision.utils.save_image` after `import torchvision.utils as vutils`."""

from __future__ import annotations

import ast


def module_imports(tree: ast.Module) -> dict[str, str]:
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                out[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                out[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return out


def qualify(func: ast.expr, imports: dict[str, str]) -> str:
    parts = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name):
        return ""
    head = imports.get(func.id, func.id)
    return ".".join([head, *reversed(parts)])

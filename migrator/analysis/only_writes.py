"""Functions that do nothing but write a file, read with `ast`.

A helper that opens a file for writing and otherwise only formats, prints and writes
(returns nothing, sets nothing outside itself) can run on the main process alone: no
other process needs anything it does. The project's readers (project/writers.py) name
its calls from other files; AM517 leaves its own writes to those calls.
"""

from __future__ import annotations

import ast

from migrator.analysis.ast_imports import module_imports, qualify

# calls a helper may make and still do nothing but format and write its file
_PLAIN = {
    "print", "open", "len", "str", "int", "float", "bool", "round", "repr", "dict", "list", "tuple",
    "sorted", "enumerate", "zip", "range", "isinstance", "vars", "format", "hasattr", "getattr", "min", "max",
    "abs", "sum", "any", "all", "np.isscalar", "numpy.isscalar", "time.strftime", "time.time",
    "json.dump", "json.dumps", "yaml.dump", "yaml.safe_dump", "pickle.dump",
    "os.path.join", "os.path.exists", "os.path.isfile", "os.path.basename", "os.path.dirname", "os.path.abspath",
}
# calls that write the file at their second argument (`torch.save(state, path)`,
# `shutil.copyfile(path, best)`): a checkpoint helper only writes too
_SAVERS = {"torch.save", "shutil.copyfile", "shutil.copy", "shutil.copy2"}
# methods of files and strings (`f.write(...)`, `"{}".format(...)`, `d.items()`), and a
# template's or document's text (`self.doc.render()`: dominate, jinja2)
_METHODS = {
    "write", "writelines", "flush", "close", "format", "items", "keys", "values", "join", "replace", "lower",
    "upper", "strip", "rstrip", "lstrip", "split", "startswith", "endswith", "get", "render",
}
# image files written from a tensor (the path is the second argument)
_IMAGE_SAVERS = {"torchvision.utils.save_image"}
# what an image helper computes the picture with: new tensors, nothing changed in place
_TENSOR_MAKERS = {"torch.cat", "torch.stack", "torchvision.utils.make_grid"}
_TENSOR_METHODS = {
    "expand", "detach", "cpu", "clone", "float", "view", "reshape", "permute", "squeeze", "unsqueeze", "repeat",
    "numpy", "size", "contiguous",
}
# a picture made with Pillow (`image_pil = Image.fromarray(array)`), changed into new ones
# (`image_pil.resize(...)`) and written with its `save(path)` (pytorch-CycleGAN-and-pix2pix's
# util.save_image)
_PIL_MAKERS = {"PIL.Image.fromarray", "PIL.Image.new", "PIL.Image.open", "PIL.Image.merge"}
_PIL_METHODS = {"resize", "convert", "crop", "rotate", "transpose", "copy", "thumbnail"}


def only_writes(function: ast.FunctionDef, module: "ModuleWriters | None" = None) -> int | None:
    """When `function` opens a file for writing and otherwise only formats, prints and
    writes (no value returned, nothing set outside it, no other call): the position of
    the parameter it opens (-1 when the path is built inside); None otherwise. With the
    `module` it belongs to, image files (`vutils.save_image(grid, path)`) and the tensors
    they are made of count, and so do calls of the module's own functions that do no more
    (MUNIT's `write_2images` through `__write_images`)."""
    opened = _effects(function, module)
    if not opened:
        return None
    params = [a.arg for a in function.args.args]
    first = opened[0]
    return params.index(first.id) if isinstance(first, ast.Name) and first.id in params else -1


class ModuleWriters:
    """A module's imports and what its top-level functions do, for `only_writes`: a
    function that only formats (`write_one_row_html(html_file, ...)`, writing to a file
    handed in) or only writes may be called by another that only writes."""

    def __init__(self, tree: ast.Module) -> None:
        self.imports = module_imports(tree)
        self.functions: dict[str, list[ast.expr]] = {}  # name -> the paths it opens ([] for none)
        pending = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        for _ in range(3):  # helpers of helpers, a few levels down
            for name, node in list(pending.items()):
                opened = _effects(node, self)
                if opened is not None:
                    self.functions[name] = opened
                    del pending[name]

    def qualify(self, func: ast.expr) -> str:
        return qualify(func, self.imports)


def _effects(function: ast.FunctionDef, module: ModuleWriters | None) -> list[ast.expr] | None:
    """The paths `function` opens for writing ([] for none) when it does nothing else
    anyone could see; None when it returns a value, sets something outside itself or
    makes another call."""
    opened: list[ast.expr] = []
    pictures = _pictures(function, module)
    for node in ast.walk(function):
        if isinstance(node, (ast.Yield, ast.YieldFrom, ast.Global, ast.Nonlocal, ast.Await, ast.Lambda)):
            return None
        if isinstance(node, ast.Return) and node.value is not None:
            return None
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node is not function:
            return None
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if not all(isinstance(n, ast.Name) for t in targets for n in elements(t)):
                return None  # sets an attribute or an item: something the caller may read
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name in _PLAIN:
                if name == "open" and opens_for_writing(node):
                    opened.append(node.args[0] if node.args else ast.Constant(None))
                continue
            if name in _SAVERS:
                opened.append(node.args[1] if len(node.args) > 1 else ast.Constant(None))
                continue
            if isinstance(node.func, ast.Attribute) and node.func.attr in _METHODS:
                continue
            if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) and node.func.value.id in pictures:
                if node.func.attr == "save":
                    opened.append(node.args[0] if node.args else ast.Constant(None))
                elif node.func.attr not in _PIL_METHODS:
                    return None
                continue
            if module is None:
                return None
            qualified = module.qualify(node.func)
            if qualified in _PIL_MAKERS:
                continue
            if qualified in _IMAGE_SAVERS:
                opened.append(node.args[1] if len(node.args) > 1 else ast.Constant(None))
            elif isinstance(node.func, ast.Name) and node.func.id in module.functions:
                opened.extend(ast.Constant(None) for _ in module.functions[node.func.id][:1])  # a path it builds
            elif not (qualified in _TENSOR_MAKERS or isinstance(node.func, ast.Attribute) and node.func.attr in _TENSOR_METHODS):
                return None
    return opened


def _pictures(function: ast.FunctionDef, module: ModuleWriters | None) -> set[str]:
    """Names the function binds to Pillow images only: made by Image.fromarray (or open,
    new, merge), or by a picture's own resize or convert."""
    if module is None:
        return set()
    made: set[str] = set()
    other: set[str] = set()
    for node in ast.walk(function):
        if not isinstance(node, ast.Assign):
            continue
        value = node.value
        picture = isinstance(value, ast.Call) and (
            module.qualify(value.func) in _PIL_MAKERS
            or isinstance(value.func, ast.Attribute) and value.func.attr in _PIL_METHODS
            and isinstance(value.func.value, ast.Name) and value.func.value.id in made
        )
        for target in node.targets:
            for name in elements(target):
                if isinstance(name, ast.Name):
                    (made if picture else other).add(name.id)
    return made - other


def elements(target: ast.expr):
    """The names and attributes an assignment target binds, through tuples and lists."""
    if isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            yield from elements(element)
    else:
        yield target


def opens_for_writing(call: ast.Call) -> bool:
    """`open(path, "w")` (any mode that writes)."""
    mode = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "mode"), None)
    return isinstance(mode, ast.Constant) and isinstance(mode.value, str) and any(c in mode.value for c in "wax+")


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else None
    return None

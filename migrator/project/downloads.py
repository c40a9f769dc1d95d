"""Functions of the run that download a data set, read from their bodies.

`utils.get_training_dataloader(...)` builds `torchvision.datasets.CIFAR100(root,
download=True, ...)` and returns a DataLoader; the set-up calls it from another file. On
N processes every one downloads and unpacks into the same folder. The set-up is migrated
with `Config.project_downloads` naming those calls, and AM220 puts them under
`with accelerator.main_process_first():` as it does a download written in the file.
Read with `ast`; a function that calls another of its file that downloads downloads too.
"""

from __future__ import annotations

import ast
import os

from migrator.analysis.weights import fetches_text_data, fetches_weights
from migrator.analysis.ast_imports import module_imports, qualify
from migrator.project.deep_downloads import deep_downloaders, random_draws
from migrator.project.index import FileIndex, class_method_calls, init_of, trees_mentioning

_MARKS = (b"download", b"pretrained", b"weights=", b"hub.", b"model_zoo", b"torchtext", b"urlretrieve", b"urlopen", b"wget", b"gdown")
_DATASET_MODULES = ("torchvision.datasets.", "torchaudio.datasets.")
_DOWNLOADERS = {"download_url", "download_and_extract_archive", "download_file_from_google_drive"}


def download_calls(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, tuple[str, ...]]:
    """For each file of the run that calls a downloading function of another file: the
    calls as spelled there, as Config.project_downloads takes them. A function downloads
    through the run's other files too, a few calls deep (project/deep_downloads.py)."""
    downloading = _downloading(sources, files)
    out = {}
    for path, f in files.items():
        calls = {c.spelling for c in f.calls if c.target in downloading and c.target[0] != path}
        calls |= {spelled for spelled, _ in class_method_calls(sources.get(path, b""), path, downloading)}
        if calls:
            out[path] = tuple(sorted(calls))
    return out


def download_draw_calls(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, tuple[tuple[str, str], ...]]:
    """For each file of the run that calls a downloading function of another file which
    draws from a global random generator while it runs (a random split written beside the
    data): (the call as spelled there, where the draw is), as Config.project_download_draws
    takes them. Under `main_process_first()` only the main process makes that draw on a
    first run, so its generator ends up elsewhere than the others'."""
    downloading = _downloading(sources, files)
    draws = random_draws(sources, files, downloading)
    out = {}
    for path, f in files.items():
        calls = {
            (c.spelling, f"{os.path.relpath(draws[c.target][0], os.path.dirname(path) or '.')}:{draws[c.target][1]}")
            for c in f.calls if c.target in draws and c.target[0] != path
        }
        if calls:
            out[path] = tuple(sorted(calls))
    return out


def _downloading(sources: dict[str, bytes], files: dict[str, FileIndex]) -> set[tuple[str, str]]:
    """The run's functions and classes, called from another file, that download; and the
    methods of its classes called on the class (`mydatasets.MRDataset.splits()`)."""
    targets = {c.target for f in files.values() for c in f.calls if c.target[0] != f.path}
    targets |= _class_methods_called(sources, files)
    downloading: set[tuple[str, str]] = set()
    for path in sorted({t[0] for t in targets}):
        if not any(mark in sources.get(path, b"") for mark in _MARKS):
            continue
        try:
            tree = ast.parse(sources[path])
        except (SyntaxError, ValueError):
            continue
        downloading |= {(path, name) for name in downloaders(tree)}
    downloading |= deep_downloaders(sources, files, targets - downloading)
    return downloading


def _class_methods_called(sources: dict[str, bytes], files: dict[str, FileIndex]) -> set[tuple[str, str]]:
    """(file, "Class.method") of the run's classes' methods that another file calls on the class."""
    methods = set()
    for path, tree, _ in trees_mentioning(sources, files, (b"classmethod", b"staticmethod")):
        methods |= {
            (path, f"{node.name}.{m.name}") for node in tree.body if isinstance(node, ast.ClassDef)
            for m in node.body if isinstance(m, ast.FunctionDef) and m.decorator_list
        }
    return {target for path in files for _, target in class_method_calls(sources.get(path, b""), path, methods)} if methods else set()


def downloaders(tree: ast.Module) -> set[str]:
    """The module's top-level functions that download, directly or through another one,
    and its classes whose `__init__` does (`ContentLoss()` building a pretrained VGG19)."""
    imports = module_imports(tree)
    functions: dict[str, ast.AST] = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    functions |= {n.name: init for n in tree.body if isinstance(n, ast.ClassDef) and (init := init_of(n)) is not None}
    found = {name for name, f in functions.items() if any(_downloads(n, imports) for n in ast.walk(f))}
    for _ in range(2):
        found |= {
            name for name, f in functions.items()
            if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in found for n in ast.walk(f))
        }
    return found


def _downloads(node: ast.AST, imports: dict[str, str]) -> bool:
    if not isinstance(node, ast.Call):
        return False
    qualified = qualify(node.func, imports)
    if qualified.rsplit(".", 1)[-1] in _DOWNLOADERS and "torchvision" in qualified:
        return True
    if fetches_weights(qualified, {k.arg: ast.unparse(k.value) for k in node.keywords if k.arg}) or fetches_text_data(qualified):
        return True
    for keyword in node.keywords:
        if keyword.arg == "download":
            value = keyword.value
            if not qualified.startswith(_DATASET_MODULES):  # a project's own data set class
                return isinstance(value, ast.Constant) and value.value is True
            return not (isinstance(value, ast.Constant) and value.value in (False, None))
    return False

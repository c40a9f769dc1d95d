"""Import aliases → qualified names, from one look at the file's imports.

Cheaper than LibCST's QualifiedNameProvider (which needs full scope analysis) and enough
for what rules ask: "is this call torch.nn.utils.clip_grad_norm_, however it was imported?"
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst


# Import roots of libraries (and common standard modules): code under them is not the
# project's own to read or to migrate.
LIBRARY_ROOTS = frozenset({
    "torch", "torchvision", "torchaudio", "torchtext", "transformers", "datasets",
    "accelerate", "runtime", "numpy", "np", "sklearn", "scipy", "pandas", "tqdm", "timm",
    "lightning", "pytorch_lightning", "matplotlib", "wandb", "tensorboard", "os", "sys",
    "math", "random", "time", "json", "logging", "functools", "itertools", "copy", "diffusers",
    "PIL", "cv2", "einops", "yaml", "h5py", "skimage", "librosa", "soundfile", "omegaconf", "hydra",
    "tensorboardX", "visdom", "seaborn", "nltk", "spacy",
})


def dotted_name(node: cst.CSTNode) -> str | None:
    """`a.b.c` for a chain of Names and Attributes, None for anything else."""
    parts: list[str] = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if not isinstance(node, cst.Name):
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


def code_of(node: cst.CSTNode) -> str:
    """The source text of one node, stripped (for messages and comparing expressions)."""
    return cst.Module([]).code_for_node(node).strip()


def call_argument(call: cst.Call, keyword: str, position: int | None) -> cst.Arg | None:
    """The argument of `call` given as `keyword=` or at `position` (None: keyword only)."""
    for i, arg in enumerate(call.args):
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg
        if arg.keyword is None and arg.star == "" and position is not None and i == position:
            return arg
    return None


def _module_name(node: cst.BaseExpression | None) -> str:
    return dotted_name(node) or "" if node is not None else ""


# standard modules a star import commonly brings along, read as themselves when nothing
# else binds the name
_STAR_MODULES = frozenset({"os", "shutil", "json", "time", "pickle", "glob"})


@dataclass
class ImportTable:
    """Local name → qualified name for every name an import statement binds."""

    aliases: dict[str, str] = field(default_factory=dict)
    # a module-level `from utils import *`: it may bring the standard modules utils imports
    # (monodepth2's trainer.py calls `os.makedirs` with `os` from there)
    star: bool = False

    def add(self, node: cst.Import | cst.ImportFrom) -> None:
        if isinstance(node, cst.Import):
            for alias in node.names:
                full = _module_name(alias.name)
                if alias.asname is not None:
                    self.aliases[dotted_name(alias.asname.name) or full] = full
                else:
                    head = full.split(".")[0]
                    self.aliases[head] = head
            return
        if isinstance(node.names, cst.ImportStar):
            self.star = True
            return
        if node.relative:
            return
        module = _module_name(node.module)
        for alias in node.names:
            name = dotted_name(alias.name) or ""
            local = dotted_name(alias.asname.name) if alias.asname else name
            self.aliases[local or name] = f"{module}.{name}"

    def qualify(self, node: cst.CSTNode) -> str | None:
        """The qualified name of an expression, resolved through the imports.

        Returns None when the expression's head is not an imported name.
        """
        dotted = dotted_name(node)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        base = self.aliases.get(head)
        if base is None and self.star and rest and head in _STAR_MODULES:
            base = head  # `os.makedirs(...)` with `os` from a star import: the standard module
        if base is None:
            return None
        return f"{base}.{rest}" if rest else base

    def local_names_for(self, qualified: str) -> list[str]:
        """Local names bound to exactly `qualified` (used to find imports to drop)."""
        return [local for local, full in self.aliases.items() if full == qualified]

"""AM220: a data set downloaded (and unpacked) by every process at once."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import dotted_name
from migrator.analysis.reach import accelerator_home
from migrator.analysis.weights import fetches_text_data, fetches_weights
from migrator.cst import adjacent_runs, wrap_statements
from migrator.edits import Fix, replace
from migrator.rule import Example, FixAvailability, Rule

# Functions that fetch files into a folder every process then reads.
_DOWNLOADERS = {
    "torchvision.datasets.utils.download_url",
    "torchvision.datasets.utils.download_and_extract_archive",
    "torchvision.datasets.utils.download_file_from_google_drive",
    "torchvision.datasets.utils.extract_archive",
}
_DATASET_MODULES = ("torchvision.datasets.", "torchaudio.datasets.")


# making the data set draws from a global generator (open-reid's viper: a random split)
_DRAWS = (
    "making it can draw from the global random generator ({where}): under `main_process_first()` only the main "
    "process would draw on a first run, the others finding its files, and every draw after it (a shuffle, a "
    "train/val split made in the same call) would differ between the processes; download the data once before "
    "launching (make the data set on one process), so every process finds the files and draws alike"
)
_FIRST = "; the main process downloads first (`with accelerator.main_process_first():`), the others then read its copy"


class DatasetDownloadOnEveryProcess(Rule):
    """## What it does
    In a script being migrated, puts the statement that builds a data set with
    `download=True` (`datasets.MNIST(root, train=True, download=True)`, any torchvision
    or torchaudio data set, also inside the `DataLoader(...)` it feeds; a data set class of
    the project's own when it is given `download=True` literally) or calls
    torchvision's `download_url`/`download_and_extract_archive`, or fetches pretrained
    weights into the torch hub cache (a torchvision or timm model built with
    `pretrained=True` or `weights=...`, `torch.hub.load`, `load_state_dict_from_url`), under
    `with accelerator.main_process_first():`. Statements of that kind one after another
    share one `with`.

    ## Why is this bad?
    Under `accel-launch` every process runs the script: on a fresh machine N processes
    download the same archive into the same folder and unpack it over each other, and a
    process can read files another one is still writing (a corrupt archive, a failed
    checksum, or a crash the first time only). With `main_process_first()` the main
    process downloads while the others wait; they then find the files in place and only
    read them.

    ## Example
    ```python
    train_set = datasets.MNIST("../data", train=True, download=True, transform=transform)
    ```

    Use instead:
    ```python
    with accelerator.main_process_first():
        train_set = datasets.MNIST("../data", train=True, download=True, transform=transform)
    ```

    In a run of several files, a call of another file's function that downloads that way
    (`get_training_dataloader(...)` building `CIFAR100(root, download=True)` in utils.py,
    `get_model(...)` building `vgg16(pretrained=True)`), or of a class whose `__init__` does,
    is treated the same, at the call: the other file stays as it is.

    ## Fix safety
    `main_process_first()` is itself a collective (a barrier before and after the
    main process's turn), so the statement is wrapped only where every process runs it:
    not under a rank test, not in a function that this file never calls or calls only
    from the main process, and not in a statement that runs another collective.

    A data set of the run that draws from a global random generator while it is made (a
    random split written beside the data) is left as written: under `main_process_first()`
    only the main process would make that draw on a first run, and every later draw would
    differ between the processes.

    ## Known limits
    A download written by hand (`urllib`, `requests` and `tarfile`) is not recognised.
    A statement that is not a simple one of its own line (a download in a loop header,
    a `with` item, several statements on one line) or that comes before the Accelerator
    exists is reported and left as it is. So is a download in a file with no set-up of its
    own that hands over to a class or function of another file of the run that creates the
    Accelerator itself (`Trainer(config, loaders)`): nothing there can order it.
    """

    code = "AM220"
    name = "dataset-download-on-every-process"
    message = "`{call}` downloads into the same folder on every process at once{note}"
    fix_title = "Download on the main process first (`with accelerator.main_process_first():`)"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import torch\nfrom torchvision import datasets\nfrom runtime import Accelerator\n\n"
                "accelerator = Accelerator()\n"
                "train_set = datasets.MNIST(\"data\", train=True, download=True)\n"
            ),
            after=(
                "import torch\nfrom torchvision import datasets\nfrom runtime import Accelerator\n\n"
                "accelerator = Accelerator()\nwith accelerator.main_process_first():\n"
                "    train_set = datasets.MNIST(\"data\", train=True, download=True)\n"
            ),
            at=("6:13",),
        ),
        Example(
            before=(
                "import torch\nfrom torchvision import models\nfrom runtime import Accelerator\n\n"
                "accelerator = Accelerator()\n"
                "model = models.resnet18(weights=models.ResNet18_Weights.DEFAULT)\n"
            ),
            after=(
                "import torch\nfrom torchvision import models\nfrom runtime import Accelerator\n\n"
                "accelerator = Accelerator()\nwith accelerator.main_process_first():\n"
                "    model = models.resnet18(weights=models.ResNet18_Weights.DEFAULT)\n"
            ),
            at=("6:9",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if not analysis.migrating:
            self._before_the_accelerator()
            return
        wrappable: list[tuple[cst.Call, cst.SimpleStatementLine, str]] = []
        draws = dict(self.ctx.config.project_download_draws)
        for fact in analysis.facts.calls:
            if not self._downloads(fact):
                continue
            call = fact.node
            shown = f"{dotted_name(call.func) or fact.qualified}()"
            if self._main_only(call):
                continue
            line, why = self._line(call)
            if fact.func in draws:
                why = _DRAWS.format(where=draws[fact.func])
            if why is not None:
                self.report(call, call=shown, note=f" (left as written: {why})")
            elif line is not None:
                wrappable.append((call, line, shown))
        for group in adjacent_runs(wrappable, analysis.parent):
            item = cst.WithItem(cst.parse_expression(f"{analysis.accelerator_at(group[0][1])}.main_process_first()"))
            pairs = wrap_statements([line for _, line, _ in group], lambda body: cst.With(items=[item], body=body))
            fix = Fix(tuple(replace(n, r) for n, r in pairs))  # type: ignore[arg-type]
            for call, _, shown in group:  # the remedy is said too: a refused migration shows the finding unfixed
                self.report(call, edits=fix, call=shown, note=_FIRST)

    def _before_the_accelerator(self) -> None:
        """A file with no set-up of its own that hands over to a class or function of the
        run that creates the Accelerator itself (RAM's `Trainer(config, loaders)`): every
        process runs what comes before, with no Accelerator to order the download."""
        config = self.ctx.config
        enters = config.project_enters
        if not enters:
            return
        live = [e for e in enters if e not in config.project_refused]  # a trainer left as written creates none
        if live:
            why = (
                f"the Accelerator is created later, in `{live[0]}`; download the data once before launching, "
                "or build the loaders where the Accelerator exists, under `main_process_first()`"
            )
        else:
            why = (
                f"no Accelerator is created: the migration of `{enters[0]}` is left as written; download the data "
                "once before launching, or build the loaders under `main_process_first()` of the Accelerator you create"
            )
        for fact in self.analysis.facts.calls:
            if self._downloads(fact) and not self.analysis.branches.branch_of(fact.node):
                shown = f"{dotted_name(fact.node.func) or fact.qualified}()"
                self.report(fact.node, call=shown, note=f" (left as written: {why})")

    def _downloads(self, fact) -> bool:
        told_not_to = any(
            a.keyword is not None and a.keyword.value == "download" and isinstance(a.value, cst.Name)
            and a.value.value in ("False", "None") for a in fact.node.args
        )
        if told_not_to:
            return False  # `Images(root, download=False)`: whatever its class can do, this call does not
        if fact.func is not None and fact.func in self.ctx.config.project_downloads:
            return True  # a function of another file of the run that downloads (project/downloads.py)
        qualified = fact.qualified or ""
        if qualified in _DOWNLOADERS:
            return True
        keywords = {
            a.keyword.value: cst.Module([]).code_for_node(a.value) for a in fact.node.args if a.keyword is not None
        }
        if fetches_weights(qualified, keywords) or fetches_text_data(qualified):
            return True
        for arg in fact.node.args:
            if arg.keyword is not None and arg.keyword.value == "download":
                if not qualified.startswith(_DATASET_MODULES):  # a project's own data set class
                    return isinstance(arg.value, cst.Name) and arg.value.value == "True"
                return not (isinstance(arg.value, cst.Name) and arg.value.value in ("False", "None"))
        return False

    def _main_only(self, call: cst.Call) -> bool:
        """Run by the main process only (AM901 reports what only the others run), or in a
        function this file never calls: its callers decide who runs it. The function that
        holds the set-up is the exception: the migration has every process run it (the
        agent's `__init__` building its loaders, started by name from another file)."""
        branches = self.analysis.branches
        if branches.branch_of(call) is not None:
            return True
        function = branches.function_of(call)
        if function is None:
            return False
        if branches.runs_only_on_main(call):
            return True
        home = accelerator_home(self.analysis)
        return not branches.callers(function) and (home is None or home.scope is not function)

    def _line(self, call: cst.Call) -> tuple[cst.SimpleStatementLine | None, str | None]:
        """The statement line to wrap, or why there is none."""
        analysis = self.analysis
        line = analysis.line_of(call)
        if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
            return None, "it is not a statement of its own line"
        if not isinstance(analysis.parent(line), (cst.IndentedBlock, cst.Module)):
            return None, "it is not a statement of its own line"
        if analysis.accelerator_at(line) is None:
            return None, "the Accelerator cannot be reached here"
        inside = {id(n) for n in _walk(line)}
        for collective in analysis.branches.collectives:
            if id(collective.call) in inside:
                return None, f"the statement also runs `{collective.name}`"
        if self._within_main_process_first(line):
            return None, None
        return line, None

    def _within_main_process_first(self, line: cst.CSTNode) -> bool:
        current = self.analysis.parent(line)
        while current is not None and not isinstance(current, (cst.FunctionDef, cst.Module)):
            if isinstance(current, cst.With) and any(
                "main_process_first" in cst.Module([]).code_for_node(item.item) for item in current.items
            ):
                return True
            current = self.analysis.parent(current)
        return False


def _walk(node: cst.CSTNode):
    yield node
    for child in node.children:
        yield from _walk(child)

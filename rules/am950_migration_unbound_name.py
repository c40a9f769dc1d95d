"""AM950: the migration would use a name where it is not bound; the file is left as written."""

from __future__ import annotations

from migrator.rule import Example, Rule


class MigrationUnboundName(Rule):
    """## What it does
    Reported by the engine's verifier, which re-reads every migrated file before anything
    is printed or written. When the migrated code would use a name before it is bound, or
    where it cannot be seen, the whole file is left as written and this finding says where:
    `prepare()` above the line that creates the Accelerator, `accelerator=accelerator`
    passed from a function that has none, `self.config` read in `__init__` before it is
    assigned.

    ## Why is this bad?
    The result would raise NameError, UnboundLocalError or AttributeError at run time, on
    one process and on many. Writing it would hand the user a diff that looks finished.

    ## Example
    ```python
    class Trainer:
        def __init__(self, config):
            self.device = torch.device("cuda")
            self.config = config
            self.scaler = torch.cuda.amp.GradScaler(enabled=self.config.amp)
    ```
    The Accelerator replaces the device, so it is created where the device was chosen;
    `Accelerator(mixed_precision=... self.config.amp ...)` there would read `self.config`
    one line too early. (Without the device line it simply goes below the assignment.)

    Use instead: move the set-up by hand below the assignments it reads, then run the
    migration again:
    ```python
    class Trainer:
        def __init__(self, config):
            self.config = config
            self.accelerator = Accelerator(mixed_precision="fp16" if self.config.amp else "no")
            self.device = self.accelerator.device
    ```

    ## Known limits
    Names are checked with pyflakes' def-use analysis, compared with the original, so
    undefined names the script already had are not blamed on the migration.
    """

    code = "AM950"
    name = "migration-unbound-name"
    message = "{reason}"
    reported_by_verifier = True
    examples = (
        Example(
            before=(
                'import torch\n'
                '\n'
                '\n'
                'class Trainer:\n'
                '    def __init__(self, config, model, loader):\n'
                '        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
                '        self.config = config\n'
                '        self.model = model.to(self.device)\n'
                '        self.loader = loader\n'
                '        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)\n'
                '        if self.config.use_amp:\n'
                '            self.scaler = torch.amp.GradScaler("cuda")\n'
                '\n'
                '    def fit(self):\n'
                '        for x in self.loader:\n'
                '            with torch.autocast("cuda", enabled=self.config.use_amp):\n'
                '                loss = self.model(x.to(self.device)).sum()\n'
                '            self.scaler.scale(loss).backward()\n'
                '            self.scaler.step(self.optimizer)\n'
                '            self.scaler.update()\n'
            ),
            at=('7:1',),
        ),
    )

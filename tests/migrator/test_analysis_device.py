"""Device analysis: which moves prepare() makes redundant (only where it places the
object), how a script's device choice reads as `Accelerator(cpu=...)`, and which uses of
a string device need it as a string."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper

from migrator.analysis import ScriptAnalysis, analyze
from migrator.analysis.device_strings import string_uses

_TRAIN = """
model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    loss = model(x).sum()
    loss.backward()
    optimizer.step()
"""


def _analyze(code: str) -> ScriptAnalysis:
    module = cst.parse_module(textwrap.dedent(code))
    return analyze(MetadataWrapper(module, unsafe_skip_copy=True))


def _dropped(analysis: ScriptAnalysis) -> list[str]:
    return [
        analysis.module.code_for_node(m.call)
        for m in analysis.device_moves
        if id(m.call) in analysis.droppable_moves
    ]


def _kept(analysis: ScriptAnalysis) -> list[str]:
    return [
        analysis.module.code_for_node(m.call)
        for m in analysis.device_moves
        if id(m.call) not in analysis.droppable_moves
    ]


def test_a_model_rebuilt_after_training_keeps_its_move():
    analysis = _analyze(
        """
        import torch
        device = torch.device("cuda")
        loader = torch.utils.data.DataLoader(data)
        model = Net().to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            x = x.to(device)
            loss = model(x).sum()
            loss.backward()
            optimizer.step()
        model = Net().to(device)
        model.to(device)
        print(model(sample.to(device)))
        """
    )
    assert _dropped(analysis) == ["Net().to(device)", "x.to(device)"]
    assert _kept(analysis) == ["Net().to(device)", "model.to(device)", "sample.to(device)"]
    assert analysis.surviving_device_uses["device"] == 3


def test_a_model_built_in_another_function_keeps_its_move():
    analysis = _analyze(
        """
        import torch
        device = torch.device("cuda")

        def inference():
            model = Net().to(device)
            return model

        def main():
            loader = torch.utils.data.DataLoader(data)
            model = Net().to(device)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x in loader:
                model(x).sum().backward()
                optimizer.step()
        """
    )
    assert _kept(analysis) == ["Net().to(device)"]
    assert analysis.position(next(m.call for m in analysis.device_moves if id(m.call) not in analysis.droppable_moves)).start.line == 6


def test_a_prepared_model_moved_to_the_cpu_is_moved_back():
    analysis = _analyze(
        """
        import torch
        device = torch.device("cuda")
        loader = torch.utils.data.DataLoader(data)
        model = Net().to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x in loader:
            model(x).sum().backward()
            optimizer.step()
            model.eval().cpu()
            torch.save(model.state_dict(), "ckpt.pt")
            model.to(device).train()
        """
    )
    assert _dropped(analysis) == ["Net().to(device)"]
    assert _kept(analysis) == ["model.to(device)"]


def test_batches_of_a_loader_that_is_never_prepared_keep_their_moves():
    analysis = _analyze(
        """
        import torch
        device = torch.device("cuda")

        def run(model, loader):
            for x in loader:
                model(x.to(device))

        train_loader = torch.utils.data.DataLoader(data)
        model = Net()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x in train_loader:
            model(x.to(device)).sum().backward()
            optimizer.step()
        run(model, train_loader)
        run(model, torch.utils.data.DataLoader(other))
        """
    )
    assert [analysis.position(m.call).start.line for m in analysis.device_moves if id(m.call) in analysis.droppable_moves] == [13]


@pytest.mark.parametrize(
    "choice,cpu",
    [
        ('device = torch.device("cuda" if torch.cuda.is_available() else "cpu")', None),
        (
            'use_cuda = not args.no_cuda and torch.cuda.is_available()\n'
            'device = torch.device("cuda" if use_cuda else "cpu")',
            "args.no_cuda",
        ),
        (
            "use_accel = not args.no_accel and torch.accelerator.is_available()\n"
            "if use_accel:\n    device = torch.accelerator.current_accelerator()\n"
            'else:\n    device = torch.device("cpu")',
            "args.no_accel",
        ),
        (
            "use_mps = opt.mps and torch.backends.mps.is_available()\n"
            'if opt.cuda:\n    device = torch.device("cuda:0")\n'
            'elif use_mps:\n    device = torch.device("mps")\n'
            'else:\n    device = torch.device("cpu")',
            "not opt.cuda and not opt.mps",
        ),
        ('device = torch.device("cuda" if args.backend == "gpu" and torch.cuda.is_available() else "cpu")', 'args.backend != "gpu"'),
        ("device = torch.device(args.device)", 'args.device == "cpu"'),
        ('device = "cpu" if args.cpu else "cuda"', "args.cpu"),
        (
            'if torch.cuda.is_available():\n    if args.gpu:\n        device = torch.device("cuda:1")\n'
            '    else:\n        device = torch.device("cuda")\nelse:\n    device = torch.device("cpu")',
            None,
        ),
        ("args.cuda = not args.no_cuda and torch.cuda.is_available()\nif args.cuda:\n    model.cuda()", "args.no_cuda"),
        # a store_true switch the script reads where it moves things
        ('parser.add_argument("-gpu", action="store_true")\nif args.gpu:\n    model.cuda()', "not args.gpu"),
        ('parser.add_argument("--no-cuda", action="store_true")\nif not args.no_cuda:\n    model.cuda()', "args.no_cuda"),
        ('parser.add_argument("--fast", dest="use_gpu", action="store_true")\nif args.use_gpu:\n    model.cuda()', "not args.use_gpu"),
        # an option read as a bool is a switch too (ssd.pytorch's `--cuda false`, reader R25)
        ('parser.add_argument("--cuda", default=True, type=str2bool)\nif args.cuda:\n    model.cuda()', "not args.cuda"),
        # an option holding a GPU index is no switch
        ('parser.add_argument("--gpu", type=int, default=None)\nif args.gpu:\n    model.cuda()', None),
    ],
)
def test_the_users_cpu_choice_becomes_the_cpu_option(choice, cpu):
    analysis = _analyze(f"import torch\nargs = parser.parse_args()\n{choice}\n{textwrap.dedent(_TRAIN)}")
    options = {o.keyword: o.value for o in analysis.patterns.options}
    assert options.get("cpu") == cpu
    assert analysis.patterns.cpu_problem is None


def test_a_choice_that_cannot_be_read_is_a_problem():
    analysis = _analyze(
        f'import torch\ndevice = torch.device("cpu") if args.cpu else pick_gpu()\n{textwrap.dedent(_TRAIN)}'
    )
    assert "cpu" not in {o.keyword for o in analysis.patterns.options}
    assert analysis.patterns.cpu_problem is not None


def test_a_variable_derived_from_the_device_is_not_a_choice():
    analysis = _analyze(
        'import torch\ndevice = "cuda" if torch.cuda.is_available() else "cpu"\n'
        'device_type = "cuda" if "cuda" in device else "cpu"\n'
    )
    assert [v.name for v in analysis.device_variables] == ["device"]


def test_string_uses_of_a_device():
    analysis = _analyze(
        """
        device = "cuda"
        a = device == "cuda"
        b = "cuda" in device
        c = device.startswith("cuda")
        d = device != "cuda:1"
        e = device in ("cuda", "mps")
        f = torch.zeros(1, device=device)
        with torch.autocast(device_type=device):
            pass
        scaler = torch.amp.GradScaler(device)
        print(device)
        """
    )
    uses = string_uses(analysis.facts, "device", analysis.module, analysis.parent)
    got = [(analysis.position(u.node).start.line, u.kind) for u in uses]
    assert got == [(3, "type"), (4, "str"), (5, "str"), (6, "str"), (7, "type"), (9, "type"), (11, "type")]


@pytest.mark.parametrize(
    "move,literal",
    [
        ("x.cuda()", True),
        ("x.cuda(0)", True),
        ("x.cuda(local_rank)", False),
        ('x.to("cuda:0")', True),
        ("x.to(0)", True),
        ('x.to(torch.device("cuda"))', True),
        ('x.to(device="cuda:1", non_blocking=True)', True),
        ("x.to(device)", False),
        ("x.to(args.device)", False),
        ('x.to("cpu")', False),
    ],
)
def test_literal_devices(move, literal):
    from migrator.analysis.device import literal_device

    analysis = _analyze(f"import torch\ndevice = torch.device('cuda')\ny = {move}\n")
    moves = list(analysis.device_moves)
    assert bool(moves) and literal_device(moves[0], analysis.imports) is literal or (not moves and not literal)


def test_an_output_moved_to_the_cpu_is_not_the_model():
    analysis = _analyze(
        """
        import torch
        loader = torch.utils.data.DataLoader(data)
        model = Net()
        model.cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x in loader:
            model(x).sum().backward()
            optimizer.step()
        sample = model.decode(z).cpu()
        """
    )
    assert _dropped(analysis) == ["model.cuda()"]


def test_a_device_from_a_helper_of_the_file_is_a_choice_the_migrator_does_not_read():
    analysis = _analyze(
        "import torch\n\ndef get_device(args):\n    return torch.device('cpu' if args.no_cuda else 'cuda')\n\n"
        f"device = get_device(args)\n{textwrap.dedent(_TRAIN)}"
    )
    assert "cpu" not in {o.keyword for o in analysis.patterns.options}
    assert "get_device()" in analysis.patterns.cpu_problem


def test_a_cpu_script_training_in_a_function_its_loop_calls_stays_on_the_cpu():
    """SimGNN's fit() loops over batches and calls `self.process_batch(batch)`, which builds
    the batch's tensors on the CPU and calls backward: nothing names a device, so the
    migration keeps it on the CPU (`cpu=True`) rather than move the model alone to a GPU
    (reader R27)."""
    analysis = _analyze('''\
        import torch

        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


        def process_batch(x):
            optimizer.zero_grad()
            loss = model(x).sum()
            loss.backward()
            optimizer.step()


        for step in range(10):
            process_batch(torch.randn(2, 4))
    ''')
    assert {o.keyword: o.value for o in analysis.patterns.options}.get("cpu") == "True"


def test_the_lint_of_a_cpu_script_says_the_accelerator_keeps_it_on_the_cpu():
    """A lint (and a migration left as written, whose findings are a lint's) writes no
    `Accelerator(cpu=True)`: AM001 says it, for the hand migration."""
    from migrator.api import migrate_source
    from migrator.config import Config

    source = "import torch\n\nmodel = torch.nn.Linear(4, 1)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n" + (
        "for step in range(10):\n    optimizer.zero_grad()\n    model(torch.randn(2, 4)).sum().backward()\n    optimizer.step()\n"
    )
    linted = migrate_source(source, "train.py", Config(fix=False))
    migrated = migrate_source(source, "train.py", Config())
    assert "create it as `Accelerator(cpu=True)`" in next(f.message for f in linted.findings if f.code == "AM001")
    assert "Accelerator(cpu=True)" in migrated.after
    assert "create it as" not in next(f.message for f in migrated.findings if f.code == "AM001")

"""analysis/wrapped.py: which `model.attr` reach through the prepared model's wrapper."""

from __future__ import annotations

import textwrap

import libcst as cst
from libcst.metadata import MetadataWrapper

from migrator.analysis import ScriptAnalysis, analyze
from migrator.analysis.wrapped import MODULE_API, forward_in_training_step, wrapped_uses


def _analyze(code: str) -> ScriptAnalysis:
    module = cst.parse_module(textwrap.dedent(code))
    return analyze(MetadataWrapper(module, unsafe_skip_copy=True))


def _uses(code: str) -> list[str]:
    analysis = _analyze(code)
    return [analysis.module.code_for_node(u.attribute) for u in wrapped_uses(analysis)]


SCRIPT = """
import torch
from runtime import Accelerator

accelerator = Accelerator()
model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
hidden = model.init_hidden(4)  # before prepare: the plain model
model, optimizer = accelerator.prepare(model, optimizer)


def train():
    model.train()
    return model.init_hidden(8)


def sample(net, z):
    return net.decode(z)


def other(net):
    return net.decode(0)


print(sample(model, 0), model.linear.weight, train())
plain = Net()
other(plain)
model = Net()
model.load_state_dict({})
"""


def test_uses_after_prepare_in_functions_and_through_parameters() -> None:
    uses = _uses(SCRIPT)
    assert uses == ["model.train", "model.init_hidden", "net.decode", "model.linear"]


def test_torch_module_api_is_answered_by_the_wrapper() -> None:
    assert {"parameters", "train", "eval", "to", "zero_grad", "named_parameters"} <= MODULE_API
    assert not {"state_dict", "load_state_dict", "module", "no_sync", "generate"} & MODULE_API


def test_a_prepared_attribute_of_self_is_followed_in_every_method() -> None:
    uses = _uses(
        """
        import torch
        from runtime import Accelerator
        class Trainer:
            def __init__(self, model):
                self.accelerator = Accelerator()
                self.model = model
                self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
                self.model, self.optimizer = self.accelerator.prepare(self.model, self.optimizer)
            def sample(self):
                return self.model.generate(4), self.optimizer.param_groups
        """
    )
    assert uses == ["self.model.generate"]


def test_a_method_running_layers_in_the_training_step_is_a_forward_that_skips_ddp() -> None:
    analysis = _analyze(
        """
        import torch
        from runtime import Accelerator
        class Net(torch.nn.Module):
            def encode(self, x):
                return self.enc(x)
            def decode(self, z):
                return self.finish(z)
            def finish(self, z):
                return self.dec(z)
            def init_hidden(self, n):
                return next(self.parameters()).new_zeros(n, 4)
        accelerator = Accelerator()
        model = Net()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        model, optimizer = accelerator.prepare(model, optimizer)
        for epoch in range(2):
            for x in data:
                h = model.init_hidden(4)
                loss = model.decode(model.encode(x)).sum() + model.pretrained_head(x).sum()
                accelerator.backward(loss)
            with torch.no_grad():
                model.decode(x)
            model.encode(x)
        for x in data:
            x = model.prepare_inputs(x)
            accelerator.backward(model(x).sum())
        """
    )
    found = [
        (analysis.module.code_for_node(u.attribute), forward_in_training_step(analysis, u))
        for u in wrapped_uses(analysis)
    ]
    assert found == [
        ("model.init_hidden", False),  # builds a tensor, runs no layer
        ("model.decode", True),  # through another method of the class
        ("model.encode", True),
        ("model.pretrained_head", True),  # not defined here: assumed to run layers
        ("model.decode", False),  # under no_grad
        ("model.encode", False),  # outside the loop that steps
        ("model.prepare_inputs", False),  # the step also runs the wrapper's forward
    ]

"""analysis/manual_update.py: the model a hand-written update trains, when there is no optimizer."""

from __future__ import annotations

import textwrap

import libcst as cst
from libcst.metadata import MetadataWrapper

from migrator.analysis import Role, analyze
from migrator.analysis.manual_update import hand_updated_models


def _analysis(source: str):
    module = cst.parse_module(textwrap.dedent(source))
    return analyze(MetadataWrapper(module, unsafe_skip_copy=True))


def test_update_forms_name_the_model_they_walk() -> None:
    analysis = _analysis(
        """
        import torch

        a = torch.nn.Linear(2, 1)
        b = make_other()
        c = make_third()
        for p in a.parameters():
            p.data.add_(p.grad, alpha=-0.1)
        with torch.no_grad():
            for name, w in b.named_parameters():
                w -= 0.1 * w.grad
        for q in c.parameters():
            q.data.sub_(0.1 * q.grad.data)
        """
    )
    assert hand_updated_models(analysis.facts) == ["a", "b", "c"]


def test_loops_that_do_not_update_from_the_gradient_are_not_updates() -> None:
    analysis = _analysis(
        """
        import torch

        critic = torch.nn.Linear(2, 1)
        for p in critic.parameters():
            p.data.clamp_(-0.01, 0.01)
        for p in critic.parameters():
            print(p.grad.norm())
        for p in critic.parameters():
            p.grad.zero_()
        """
    )
    assert hand_updated_models(analysis.facts) == []


def test_without_an_optimizer_the_updated_model_is_planned_alone() -> None:
    analysis = _analysis(
        """
        import torch
        import net

        lm = net.Model()
        for step in range(10):
            loss = lm(torch.zeros(1)).sum()
            loss.backward()
            for p in lm.parameters():
                p.data.add_(p.grad, alpha=-0.1)
        """
    )
    assert analysis.roles.of("lm") is Role.MODEL
    assert analysis.plan is not None and analysis.plan.names == {"lm"}
    assert analysis.migrating


def test_with_an_optimizer_a_hand_update_decides_nothing() -> None:
    analysis = _analysis(
        """
        import torch

        model = torch.nn.Linear(2, 1)
        other = make_other()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(10):
            loss = model(torch.zeros(1, 2)).sum() + other(1)
            loss.backward()
            optimizer.step()
            for p in other.parameters():
                p.data.add_(p.grad, alpha=-0.1)
        """
    )
    assert analysis.roles.of("other") is None
    assert analysis.plan is not None and "other" not in analysis.plan.names

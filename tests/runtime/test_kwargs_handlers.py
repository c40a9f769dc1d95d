"""DistributedDataParallelKwargs: only the options that differ reach DDP; other handlers are refused."""

from __future__ import annotations

import pytest

from runtime.kwargs_handlers import DistributedDataParallelKwargs, ddp_options


def test_only_the_options_that_differ_from_ddp_defaults() -> None:
    assert DistributedDataParallelKwargs().to_kwargs() == {}
    handler = DistributedDataParallelKwargs(find_unused_parameters=True, broadcast_buffers=False)
    assert handler.to_kwargs() == {"find_unused_parameters": True, "broadcast_buffers": False}
    assert ddp_options([handler]) == handler.to_kwargs()
    assert ddp_options(None) == {} == ddp_options([])


def test_the_public_name_is_the_handler() -> None:
    import runtime

    assert runtime.DistributedDataParallelKwargs is DistributedDataParallelKwargs


def test_a_handler_of_another_kind_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="DistributedDataParallelKwargs.*got dict"):
        ddp_options([{"find_unused_parameters": True}])
    with pytest.raises(ValueError, match="twice"):
        ddp_options([DistributedDataParallelKwargs(), DistributedDataParallelKwargs(static_graph=True)])


def test_the_accelerator_refuses_a_wrong_handler_before_joining_anything() -> None:
    from runtime import Accelerator

    with pytest.raises(TypeError, match="kwargs_handlers"):
        Accelerator(cpu=True, kwargs_handlers=[object()])

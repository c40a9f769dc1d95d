"""accel-launch: a thin front for torch.distributed.run (torchrun)."""

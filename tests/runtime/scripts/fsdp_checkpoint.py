"""save_state / load_state under FSDP: a run resumed in new processes ends where an uninterrupted one does.

`--mode full` trains STEPS steps and saves the (sharded) state after SAVE_AT of them;
`--mode resume` loads it in fresh processes and trains the rest. Shuffling, dropout, AdamW
state, a prepared scheduler and a custom object all have to come back for the final full
state dict (gathered on rank 0, written to OUT/<mode>.pt) to match.
"""

import argparse
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from runtime import Accelerator, FullyShardedDataParallelPlugin, set_seed

STEPS, SAVE_AT = 12, 7  # 5 steps per epoch on 2 processes: the save falls mid-epoch


class StepCounter:
    def __init__(self):
        self.step = 0

    def state_dict(self):
        return {"step": self.step}

    def load_state_dict(self, state):
        self.step = state["step"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["full", "resume"], required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    acc = Accelerator(fsdp_plugin=FullyShardedDataParallelPlugin(min_num_params=100))
    set_seed(3)
    g = torch.Generator().manual_seed(5)
    data = TensorDataset(torch.randn(40, 6, generator=g), torch.randn(40, 1, generator=g))
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.7)
    loader = DataLoader(data, batch_size=4, shuffle=True)
    model, opt, loader, sched = acc.prepare(model, opt, loader, sched)
    counter = StepCounter()
    acc.register_for_checkpointing(counter)
    state_dir = os.path.join(args.out, "state")
    if args.mode == "resume":
        acc.load_state(state_dir)
        assert counter.step == SAVE_AT, f"the custom object was not restored: step {counter.step}"
    while counter.step < STEPS:
        for x, y in loader:
            acc.backward(nn.functional.mse_loss(model(x), y))
            acc.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad()
            counter.step += 1
            if args.mode == "full" and counter.step == SAVE_AT:
                acc.save_state(state_dir)
            if counter.step == STEPS:
                break
    state = acc.get_state_dict(model)
    if acc.is_main_process:
        torch.save(state, os.path.join(args.out, f"{args.mode}.pt"))
    # save_model gathers the shards too: small shards, so the safetensors index is exercised.
    acc.save_model(model, os.path.join(args.out, f"{args.mode}_model"), max_shard_size="1KB")
    acc.end_training()


if __name__ == "__main__":
    main()

"""Prints which samples each batch of a prepared, shuffled DataLoader holds, for 2 epochs.

The global RNG is consumed between epochs (as dropout or noise would), so a runtime that
draws its shuffle seed at another moment than torch's RandomSampler shows a different order.
"""

import argparse
import json

import torch
from torch.utils.data import DataLoader

from runtime import Accelerator

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, required=True)
parser.add_argument("--generator", action="store_true", help="shuffle with a generator of the script's own")
args = parser.parse_args()

accelerator = Accelerator()
torch.manual_seed(0)
own = {"generator": torch.Generator().manual_seed(5)} if args.generator else {}
loader = accelerator.prepare(DataLoader(list(range(32)), batch_size=args.batch_size, shuffle=True, **own))
for epoch in range(2):
    for batch in loader:
        print(json.dumps({"rank": accelerator.process_index, "epoch": epoch, "batch": batch.tolist()}))
    torch.rand(3)
accelerator.end_training()

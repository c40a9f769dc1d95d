"""Misbehaving ranks for the launcher tests.

`--fail-rank R`: rank R raises once the group has formed while the others wait on it.
`--hang`: every rank reports ready (a file in --out) and then sleeps, for the Ctrl-C test.
"""

import argparse
import os
import time

from runtime import Accelerator


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--fail-rank", type=int, default=None)
    parser.add_argument("--hang", action="store_true")
    args = parser.parse_args()
    acc = Accelerator()
    acc.wait_for_everyone()
    open(os.path.join(args.out, f"ready_{acc.process_index}"), "w").close()
    if acc.process_index == args.fail_rank:
        raise RuntimeError(f"deliberate failure on rank {acc.process_index}")
    if args.hang:
        time.sleep(600)
    acc.wait_for_everyone()  # the healthy ranks block here until the launcher stops them
    time.sleep(600)


if __name__ == "__main__":
    main()

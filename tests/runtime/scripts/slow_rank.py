"""Rank 0 works alone for `--seconds` before the barrier every rank reaches (an evaluation
on the main process, the others waiting at `wait_for_everyone()`)."""

import argparse
import time

from runtime import Accelerator


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, required=True)
    args = parser.parse_args()
    accelerator = Accelerator()
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        time.sleep(args.seconds)
    accelerator.wait_for_everyone()
    print(f"through rank {accelerator.process_index}")


if __name__ == "__main__":
    main()

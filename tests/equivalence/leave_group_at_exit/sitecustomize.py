"""For the Hugging Face Accelerate runs only (tests): leave the process group at exit.

Accelerate does not destroy the process group when a script ends without end_training(),
and a gloo group alive at interpreter teardown aborts a finished rank now and then
("terminate called without an active exception", SIGABRT; pytorch/pytorch#179291). Our
launcher's worker leaves the group itself (runtime/launch/child.py); this gives Accelerate's
runs the same ending, so a finished run is not reported as failed. Training is untouched:
it runs once the script is over.
"""

import atexit
import sys
import time


def _leave_process_group():
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
        time.sleep(0.05)  # let gloo's worker free the barrier (it needs the GIL) before teardown


atexit.register(_leave_process_group)

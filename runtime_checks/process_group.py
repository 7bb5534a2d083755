"""Process-group setup shared by the distributed reference programs (run under torchrun, which
puts this folder on sys.path as the script's own)."""
import os

import torch
import torch.distributed as dist


def init(device_type: str) -> torch.device:
    """This rank's device, with the process group started. One thread per process on CPU (gloo
    crawls otherwise); NCCL when every rank has a GPU of its own, gloo when ranks share one."""
    rank, world = int(os.environ["LOCAL_RANK"]), int(os.environ["WORLD_SIZE"])
    if device_type == "cuda":
        count = torch.cuda.device_count()
        device = torch.device("cuda", rank % count)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl" if count >= world else "gloo")
    else:
        torch.set_num_threads(1)
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    return device

"""FSDP1 on CPU (device_id=cpu): wrap first, then the optimizer; accumulate inside no_sync()."""
import gc

import contextlib

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

torch.set_num_threads(1)
dist.init_process_group("gloo")
torch.manual_seed(0)
model = FSDP(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2)),
             device_id=torch.device("cpu"))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
accum_steps = 2
dataset = TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,)))
loader = DataLoader(dataset, batch_size=4, sampler=DistributedSampler(dataset, shuffle=False))

for step, (x, y) in enumerate(loader):
    boundary = (step + 1) % accum_steps == 0
    with contextlib.nullcontext() if boundary else model.no_sync():
        (F.cross_entropy(model(x), y) / accum_steps).backward()
    if boundary:
        model.clip_grad_norm_(1.0)
        optimizer.step()
        optimizer.zero_grad()
# Free the sharded model (its process group work) before the group: torch 2.13 gloo otherwise
# aborts at exit now and then ("terminate called without an active exception").
del model, optimizer
gc.collect()
dist.destroy_process_group()

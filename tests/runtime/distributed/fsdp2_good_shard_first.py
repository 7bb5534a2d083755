"""TL305 clean twin on FSDP2: shard first, then build the optimizer; accumulate 2 micro-batches
with gradient sync off on the first (set_requires_gradient_sync)."""
import gc

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

torch.set_num_threads(1)
dist.init_process_group("gloo")
mesh = init_device_mesh("cpu", (dist.get_world_size(),))
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
fully_shard(model[0], mesh=mesh)
fully_shard(model, mesh=mesh)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
accum_steps = 2
dataset = TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,)))
loader = DataLoader(dataset, batch_size=4, sampler=DistributedSampler(dataset, shuffle=False))

for step, (x, y) in enumerate(loader):
    boundary = (step + 1) % accum_steps == 0
    model.set_requires_gradient_sync(boundary)
    (F.cross_entropy(model(x), y) / accum_steps).backward()
    if boundary:
        optimizer.step()
        optimizer.zero_grad()
# Free the sharded model (its process group work) before the group: torch 2.13 gloo otherwise
# aborts at exit now and then ("terminate called without an active exception").
del model, optimizer
gc.collect()
dist.destroy_process_group()

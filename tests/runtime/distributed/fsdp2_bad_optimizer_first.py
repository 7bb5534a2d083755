"""TL305 on 2 gloo processes: the optimizer holds the parameters fully_shard replaces."""
import gc

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

torch.set_num_threads(1)
dist.init_process_group("gloo")
mesh = init_device_mesh("cpu", (dist.get_world_size(),))
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)  # expect: TL305
fully_shard(model[0], mesh=mesh)
fully_shard(model, mesh=mesh)

for step in range(4):
    x, y = torch.randn(4, 8), torch.randint(0, 2, (4,))
    optimizer.zero_grad()
    F.cross_entropy(model(x), y).backward()
    optimizer.step()
# Free the sharded model (its process group work) before the group: torch 2.13 gloo otherwise
# aborts at exit now and then ("terminate called without an active exception").
del model, optimizer
gc.collect()
dist.destroy_process_group()

"""TL305 on FSDP1 (device_id=cpu): the optimizer was built over the unwrapped model."""
import gc

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

torch.set_num_threads(1)
dist.init_process_group("gloo")
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)  # expect: TL305
model = FSDP(model, device_id=torch.device("cpu"))

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

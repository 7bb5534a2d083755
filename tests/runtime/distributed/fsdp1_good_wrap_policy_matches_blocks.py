"""TL307 clean on FSDP1 (device_id=cpu): the auto-wrap policy names the model's own block class, so
each block is an FSDP unit of its own."""
import functools
import gc

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy

torch.set_num_threads(1)
dist.init_process_group("gloo")
torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ff = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 8))

    def forward(self, x):
        return x + self.ff(x)


net = nn.Sequential(Block(), Block(), nn.Linear(8, 2))
policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={Block})
model = FSDP(net, auto_wrap_policy=policy, device_id=torch.device("cpu"))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

for step in range(3):
    x, y = torch.randn(4, 8), torch.randint(0, 2, (4,))
    optimizer.zero_grad()
    F.cross_entropy(model(x), y).backward()
    optimizer.step()
# Free the sharded model (its process group work) before the group: torch 2.13 gloo otherwise
# aborts at exit now and then ("terminate called without an active exception").
del model, optimizer
gc.collect()
dist.destroy_process_group()

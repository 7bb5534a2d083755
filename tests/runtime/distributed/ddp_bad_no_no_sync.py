"""TL203 on 2 gloo processes: DDP accumulates 2 micro-batches but every backward all-reduces."""
import gc

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

torch.set_num_threads(1)
dist.init_process_group("gloo")
torch.manual_seed(0)
model = DDP(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2)))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
dataset = TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,)))
sampler = DistributedSampler(dataset, shuffle=True)
loader = DataLoader(dataset, batch_size=4, sampler=sampler)
accum_steps = 2

for epoch in range(2):
    sampler.set_epoch(epoch)
    for i, (x, y) in enumerate(loader):
        loss = F.cross_entropy(model(x), y) / accum_steps
        loss.backward()  # expect: TL203
        if (i + 1) % accum_steps == 0 or i + 1 == len(loader):
            optimizer.step()
            optimizer.zero_grad()
# Free DDP (its reducer holds gloo work) before the group: torch 2.13 gloo otherwise aborts at
# exit in about 1 run in 10 ("terminate called without an active exception").
del model, optimizer
gc.collect()
dist.destroy_process_group()

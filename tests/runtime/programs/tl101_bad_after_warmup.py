"""TL101, late: the loop clips before the step during warmup and after it from then on. The guard
has sampled the steady loop for a while when the change comes (see trainlint/runtime/sampling.py);
a sampled step finds it."""
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
loader = DataLoader(TensorDataset(torch.randn(3200, 8), torch.randint(0, 2, (3200,))), batch_size=8)
warmup_steps = 200

for step, (x, y) in enumerate(loader):
    optimizer.zero_grad()
    F.cross_entropy(model(x), y).backward()
    warming_up = step < warmup_steps
    if warming_up:
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    if not warming_up:
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # expect: TL101

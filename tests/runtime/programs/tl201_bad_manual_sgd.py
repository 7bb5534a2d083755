"""TL201 without an optimizer object: SGD written by hand under no_grad, every second batch, over the
mean losses of both micro-batches, never divided by the accumulation steps."""
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
loader = DataLoader(TensorDataset(torch.randn(32, 8), torch.randint(0, 2, (32,))), batch_size=4)
lr = 0.1
accum_steps = 2

for epoch in range(2):
    for i, (x, y) in enumerate(loader):
        loss = F.cross_entropy(model(x), y)
        loss.backward()  # expect: TL201
        if (i + 1) % accum_steps == 0:
            with torch.no_grad():
                for p in model.parameters():
                    p.data.add_(p.grad, alpha=-lr)
                    p.grad.zero_()

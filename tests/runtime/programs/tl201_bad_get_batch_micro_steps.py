"""TL201 without a DataLoader: a nanoGPT-style loop slices its batches from one tensor with
get_batch() and accumulates k micro-steps of a mean loss that is never divided by k."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
data = torch.randint(0, 32, (512,))
model = nn.Sequential(nn.Embedding(32, 16), nn.Linear(16, 32))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
gradient_accumulation_steps = 4


def get_batch():
    starts = torch.randint(0, len(data) - 9, (4,))
    x = torch.stack([data[i:i + 8] for i in starts])
    y = torch.stack([data[i + 1:i + 9] for i in starts])
    return x, y


for iteration in range(5):
    for micro_step in range(gradient_accumulation_steps):
        x, y = get_batch()
        loss = F.cross_entropy(model(x).view(-1, 32), y.view(-1))
        loss.backward()  # expect: TL201
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)

"""TL201 clean without a DataLoader: one forward per step, and each of its task losses is
backpropagated from the same line with retain_graph=True: several losses of one batch, not
accumulation over micro-batches."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
trunk = nn.Linear(8, 16)
heads = nn.ModuleList([nn.Linear(16, 1) for _ in range(3)])
optimizer = torch.optim.SGD(list(trunk.parameters()) + list(heads.parameters()), lr=0.01)

for step in range(4):
    x, targets = torch.randn(8, 8), torch.randn(3, 8, 1)
    optimizer.zero_grad()
    features = trunk(x)
    for head, target in zip(heads, targets):
        F.mse_loss(head(features), target).backward(retain_graph=True)
    optimizer.step()

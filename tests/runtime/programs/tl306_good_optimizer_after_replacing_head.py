"""TL306 clean: The head is replaced first, then the optimizer is built over the parameters that still train."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
backbone = nn.Sequential(nn.Linear(8, 16), nn.ReLU())
model = nn.Sequential(backbone, nn.Linear(16, 10))
backbone.requires_grad_(False)
model[1] = nn.Linear(16, 3)
optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)
for step in range(6):
    x, y = torch.randn(4, 8), torch.randint(0, 3, (4,))
    optimizer.zero_grad()
    F.cross_entropy(model(x), y).backward()
    optimizer.step()

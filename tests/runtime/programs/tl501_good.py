"""TL501 clean twin: train() again after validating; a frozen submodule stays in eval on purpose."""
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
backbone = torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.BatchNorm1d(64), torch.nn.Linear(64, 16))
model = torch.nn.Sequential(backbone, torch.nn.Dropout(0.1), torch.nn.Linear(16, 2))
backbone.requires_grad_(False)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(32, 8), torch.randint(0, 2, (32,))), batch_size=8)


def validate():
    model.eval()
    with torch.no_grad():
        return sum(F.cross_entropy(model(x), y).item() for x, y in loader)


for epoch in range(2):
    model.train()
    backbone.eval()
    for x, y in loader:
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
    validate()

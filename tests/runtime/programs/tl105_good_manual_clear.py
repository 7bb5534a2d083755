"""TL105 clean twin: gradients cleared by hand (set to None, or zeroed in place), not by zero_grad()."""
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(32, 8), torch.randint(0, 2, (32,))), batch_size=8)

for epoch in range(2):
    for x, y in loader:
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        if epoch == 0:
            for p in model.parameters():
                p.grad = None
        else:
            for p in model.parameters():
                p.grad.zero_()

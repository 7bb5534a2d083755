"""TL901 clean: the epoch checkpoint holds the weights and the epoch but no optimizer state, and
there is none to hold: plain SGD without momentum keeps nothing between steps and the learning
rate is constant, so resuming from it continues the same run."""
import os
import tempfile

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
out_dir = tempfile.mkdtemp()
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
loader = DataLoader(TensorDataset(torch.randn(32, 8), torch.randint(0, 2, (32,))), batch_size=8)

for epoch in range(2):
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    torch.save({"model": model.state_dict(), "epoch": epoch}, os.path.join(out_dir, "ckpt.pt"))

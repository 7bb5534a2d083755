"""TL901: AdamW with a cosine schedule, the model's weights alone saved every few steps inside the
training loop: resuming from one restarts Adam's moments and the schedule."""
import os
import tempfile

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
out_dir = tempfile.mkdtemp()
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=16)
loader = DataLoader(TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,))), batch_size=8)

for epoch in range(2):
    for step, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        scheduler.step()
        if step % 3 == 0:
            torch.save(model.state_dict(), os.path.join(out_dir, f"weights_{epoch}_{step}.pt"))  # expect: TL901

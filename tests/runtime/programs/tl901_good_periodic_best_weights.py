"""TL901 clean: AdamW with a schedule; every few steps the weights are saved only when the
validation loss improved, to best.pt: an export of the best model, not a resume point."""
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
val_x, val_y = torch.randn(16, 8), torch.randint(0, 2, (16,))
best_loss = float("inf")

for epoch in range(2):
    for step, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        scheduler.step()
        if step % 3 == 0:
            with torch.no_grad():
                val_loss = F.cross_entropy(model(val_x), val_y).item()
            if val_loss < best_loss:
                best_loss = val_loss
                torch.save(model.state_dict(), os.path.join(out_dir, "best.pt"))

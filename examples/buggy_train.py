"""A small training script with two classic silent bugs; `trainlint examples/buggy_train.py` finds both."""
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
loader = DataLoader(TensorDataset(torch.randn(256, 16), torch.randint(0, 4, (256,))), batch_size=32)
scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=3e-3, total_steps=10 * len(loader))

for epoch in range(10):
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        scheduler.step()
        optimizer.step()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)

"""A long, correct fp16 run the guard samples: GradScaler, accumulation over 4 batches with the loss
divided, unscale_ before clipping, OneCycleLR stepped after each optimizer step (its horizon is
the run's optimizer steps), validation every 100 steps with train() after it, and checkpoints that
hold the optimizer. Nothing to report, sampled or not."""
import os
import tempfile

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Dropout(0.1), torch.nn.Linear(32, 2))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
loader = DataLoader(TensorDataset(torch.randn(1200 * 4, 8), torch.randint(0, 2, (1200 * 4,))), batch_size=4)
accum_steps = 4
epochs = 2
scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=1e-3, total_steps=epochs * len(loader) // accum_steps)
scaler = torch.amp.GradScaler("cpu")
x_val, y_val = torch.randn(64, 8), torch.randint(0, 2, (64,))
checkpoint = os.path.join(tempfile.mkdtemp(), "checkpoint.pt")

step = 0
for epoch in range(epochs):
    model.train()
    for i, (x, y) in enumerate(loader):
        with torch.autocast("cpu", dtype=torch.float16):
            loss = F.cross_entropy(model(x), y) / accum_steps
        scaler.scale(loss).backward()
        if (i + 1) % accum_steps == 0 or i + 1 == len(loader):
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            scheduler.step()
            step += 1
            if step % 100 == 0:
                model.eval()
                with torch.no_grad():
                    val_loss = F.cross_entropy(model(x_val), y_val).item()
                model.train()
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step}, checkpoint)

"""GradScaler skips the first steps (its initial scale overflows fp16 gradients), the scheduler
steps every iteration after scaler.step(): pytorch#44511, not a TL102 finding."""
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 / (1 + step))
# A scale of 2**100 overflows the fp16 gradients: the first scaler.step() skips optimizer.step().
scaler = torch.amp.GradScaler("cpu", init_scale=2.0**100, backoff_factor=2.0**-90)
loader = DataLoader(TensorDataset(torch.randn(32, 8), torch.randint(0, 2, (32,))), batch_size=8)

for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = F.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    scheduler.step()

"""TL810 in a sampled fp16 run: 300 steps into a clean run (the guard samples it by then) the
weights are corrupted to NaN; from then on every loss is NaN and GradScaler skips every step, so
the optimizer never steps again. The skipped steps bring full checking back, which sees the NaN."""
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
scaler = torch.amp.GradScaler("cpu")
loader = DataLoader(TensorDataset(torch.randn(3200, 8), torch.randint(0, 2, (3200,))), batch_size=8)

for step, (x, y) in enumerate(loader):
    if step == 300:
        with torch.no_grad():
            model[0].weight[0, 0] = float("nan")  # e.g. a bad checkpoint average, a broken custom op
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = F.cross_entropy(model(x), y)
    scaler.scale(loss).backward()  # expect: TL810
    scaler.step(optimizer)
    scaler.update()

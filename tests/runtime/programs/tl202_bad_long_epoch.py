"""TL202 over long epochs: 803 batches, k = 4, so each pass ends with 3 micro-batches never stepped.
The guard samples the middle of each epoch and checks every step again before its end (forecast
from the loader's length), where the remainder is."""
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
loader = DataLoader(TensorDataset(torch.randn(803 * 4, 8), torch.randint(0, 2, (803 * 4,))), batch_size=4)
accum_steps = 4

for epoch in range(2):
    for i, (x, y) in enumerate(loader):
        loss = F.cross_entropy(model(x), y) / accum_steps
        loss.backward()
        if (i + 1) % accum_steps == 0:  # expect: TL202
            optimizer.step()
            optimizer.zero_grad()

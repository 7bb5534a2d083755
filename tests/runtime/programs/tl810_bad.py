"""TL810: a NaN in the data makes the loss NaN at one step; clipping then sees a NaN norm."""
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
inputs = torch.randn(32, 8)
inputs[13, 2] = float("nan")  # a corrupt sample in the fourth batch
loader = DataLoader(TensorDataset(inputs, torch.randn(32, 1)), batch_size=4)

for x, y in loader:
    optimizer.zero_grad()
    loss = F.mse_loss(model(x), y)
    loss.backward()  # expect: TL810
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # expect: TL810
    optimizer.step()

"""TL801 clean twin: raw logits to cross_entropy; log_softmax with nll_loss."""
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(32, 8), torch.randint(0, 3, (32,))), batch_size=8)

for x, y in loader:
    optimizer.zero_grad()
    logits = model(x)
    loss = F.cross_entropy(logits, y) + F.nll_loss(F.log_softmax(logits, dim=1), y)
    loss.backward()
    optimizer.step()

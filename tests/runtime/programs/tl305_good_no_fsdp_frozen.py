"""TL305 clean: an optimizer whose parameters never receive a gradient, in a program without
FSDP (the backbone it was built over is frozen after it; only the head trains, under another
optimizer). FSDP did not replace any parameter: not TL305; the optimizer updating nothing is TL306."""
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
backbone = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU())
head = torch.nn.Linear(16, 2)
backbone_optimizer = torch.optim.SGD(backbone.parameters(), lr=0.01)  # expect: TL306
head_optimizer = torch.optim.SGD(head.parameters(), lr=0.1)
backbone.requires_grad_(False)
loader = DataLoader(TensorDataset(torch.randn(32, 8), torch.randint(0, 2, (32,))), batch_size=8)

for x, y in loader:
    backbone_optimizer.zero_grad()
    head_optimizer.zero_grad()
    loss = F.cross_entropy(head(backbone(x)), y)
    loss.backward()
    backbone_optimizer.step()
    head_optimizer.step()

"""TL501: the first evaluation puts the model back in train mode; a later one, added for sampling,
does not, and training goes on in eval mode from then on."""
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Dropout(0.1), torch.nn.Linear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(32, 8), torch.randint(0, 2, (32,))), batch_size=8)


def validate():
    model.eval()
    with torch.no_grad():
        loss = sum(F.cross_entropy(model(x), y).item() for x, y in loader)
    model.train()
    return loss


def sample():
    model.eval()  # expect: TL501
    with torch.no_grad():
        return model(torch.randn(4, 8)).argmax(dim=1)


model.train()
for epoch in range(3):
    for x, y in loader:
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
    validate()
    if epoch == 1:
        sample()

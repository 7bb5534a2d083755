"""TL501, late: the first validation, 250 steps into a long epoch, leaves the model in eval mode. The
guard samples the steady loop by then; the eval() call brings full checking back at once."""
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Dropout(0.1), torch.nn.Linear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
loader = DataLoader(TensorDataset(torch.randn(3200, 8), torch.randint(0, 2, (3200,))), batch_size=8)
x_val, y_val = torch.randn(64, 8), torch.randint(0, 2, (64,))

model.train()
for step, (x, y) in enumerate(loader):
    optimizer.zero_grad()
    F.cross_entropy(model(x), y).backward()
    optimizer.step()
    if step == 250:
        model.eval()  # expect: TL501
        with torch.no_grad():
            val_loss = F.cross_entropy(model(x_val), y_val).item()

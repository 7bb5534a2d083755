"""TL801: probabilities from softmax fed to cross_entropy, which applies log_softmax itself."""
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(32, 8), torch.randint(0, 3, (32,))), batch_size=8)

for x, y in loader:
    optimizer.zero_grad()
    probs = F.softmax(model(x), dim=1)
    loss = F.cross_entropy(probs, y)  # expect: TL801
    loss.backward()
    optimizer.step()

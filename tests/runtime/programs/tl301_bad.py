"""TL301: a shuffling DistributedSampler iterated for several epochs without set_epoch()."""
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
dataset = TensorDataset(torch.randn(32, 8), torch.randint(0, 2, (32,)))
train_sampler = DistributedSampler(dataset, num_replicas=1, rank=0, shuffle=True)
loader = DataLoader(dataset, batch_size=8, sampler=train_sampler)

for epoch in range(3):
    for x, y in loader:  # expect: TL301
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()

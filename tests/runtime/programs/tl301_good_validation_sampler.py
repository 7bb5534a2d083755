"""TL301 clean: the validation loader's DistributedSampler shuffles (its default) and never gets
set_epoch, but evaluating is not training: the order of validation batches changes no weight.
The training sampler gets set_epoch every epoch."""
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
train_set = TensorDataset(torch.randn(32, 8), torch.randint(0, 2, (32,)))
val_set = TensorDataset(torch.randn(16, 8), torch.randint(0, 2, (16,)))
train_sampler = DistributedSampler(train_set, num_replicas=1, rank=0)
train_loader = DataLoader(train_set, batch_size=8, sampler=train_sampler)
val_loader = DataLoader(val_set, batch_size=8, sampler=DistributedSampler(val_set, num_replicas=1, rank=0))

for epoch in range(3):
    train_sampler.set_epoch(epoch)
    model.train()
    for x, y in train_loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in val_loader:
            correct += (model(x).argmax(1) == y).sum().item()
    print(f"epoch {epoch}: {correct} of {len(val_set)} correct")

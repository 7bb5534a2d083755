"""Accumulation with a token-normalised loss: summed over tokens, divided by the tokens of the whole
accumulated batch (padding ignored). Not a TL201 finding."""
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
vocab = 16
model = torch.nn.Sequential(torch.nn.Embedding(vocab, 8), torch.nn.Linear(8, vocab))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
tokens = torch.randint(0, vocab, (32, 6))
labels = torch.where(torch.rand(32, 6) < 0.2, torch.full_like(tokens, -100), tokens)
loader = DataLoader(TensorDataset(tokens, labels), batch_size=4)
accum_steps = 2

for epoch in range(2):
    for i, (x, y) in enumerate(loader):
        logits = model(x)
        n_tokens = (y != -100).sum().clamp(min=1) * accum_steps
        loss = F.cross_entropy(logits.view(-1, vocab), y.view(-1), ignore_index=-100, reduction="sum") / n_tokens
        loss.backward()
        if (i + 1) % accum_steps == 0 or i + 1 == len(loader):
            optimizer.step()
            optimizer.zero_grad()

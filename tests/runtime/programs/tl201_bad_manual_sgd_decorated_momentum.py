"""TL201 without an optimizer object: SGD with momentum written by hand in a function decorated with
no_grad, run every fourth get_batch() micro-step of an undivided mean loss; model.zero_grad() after it."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
data = torch.randint(0, 32, (512,))
model = nn.Sequential(nn.Embedding(32, 16), nn.Linear(16, 32))
velocity = {w: torch.zeros_like(w) for w in model.parameters()}
gradient_accumulation_steps = 4


def get_batch():
    starts = torch.randint(0, len(data) - 9, (4,))
    x = torch.stack([data[i:i + 8] for i in starts])
    y = torch.stack([data[i + 1:i + 9] for i in starts])
    return x, y


@torch.no_grad()
def apply_momentum(net, lr=0.05, momentum=0.9):
    for name, w in net.named_parameters():
        buf = velocity[w]
        buf.mul_(momentum).add_(w.grad)
        w -= lr * buf


for iteration in range(5):
    for micro_step in range(gradient_accumulation_steps):
        x, y = get_batch()
        loss = F.cross_entropy(model(x).view(-1, 32), y.view(-1))
        loss.backward()  # expect: TL201
    apply_momentum(model)
    model.zero_grad(set_to_none=True)

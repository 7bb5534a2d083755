"""TL803 clean twin: dropout_p gated on self.training."""
import torch
import torch.nn.functional as F


class Attention(torch.nn.Module):
    def __init__(self, dim, dropout):
        super().__init__()
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.dropout = dropout

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0, is_causal=True)


torch.manual_seed(0)
model = Attention(8, 0.1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data = torch.randn(4, 5, 8)
for step in range(3):
    model.train()
    optimizer.zero_grad()
    loss = model(data).pow(2).mean()
    loss.backward()
    optimizer.step()
    model.eval()
    with torch.no_grad():
        val_loss = model(data).pow(2).mean()

"""TL805: a causal mask built as True above the diagonal (the masked_fill convention) given to
scaled_dot_product_attention, which attends where the mask is True."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Attention(nn.Module):
    def __init__(self, dim=16, heads=2, context=8):
        super().__init__()
        self.heads = heads
        self.qkv, self.out = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.register_buffer("mask", torch.triu(torch.ones(context, context), diagonal=1).bool())

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=self.mask[:t, :t])  # expect: TL805
        return self.out(y.transpose(1, 2).reshape(b, t, c))


model = nn.Sequential(nn.Embedding(32, 16), Attention(), nn.Linear(16, 32))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(4):
    tokens = torch.randint(0, 32, (4, 8))
    optimizer.zero_grad()
    loss = F.cross_entropy(model(tokens[:, :-1]).reshape(-1, 32), tokens[:, 1:].reshape(-1))
    loss.backward()
    optimizer.step()

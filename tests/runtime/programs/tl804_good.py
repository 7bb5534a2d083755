"""TL804 clean twin: the causal mask folded into attn_mask."""
import torch
import torch.nn.functional as F

torch.manual_seed(0)
q = k = v = torch.randn(2, 2, 5, 8)
padding_mask = torch.ones(5, 5, dtype=torch.bool)
causal = torch.ones(5, 5, dtype=torch.bool).tril()
y = F.scaled_dot_product_attention(q, k, v, attn_mask=padding_mask & causal)

"""TL804: a padding mask passed together with is_causal=True."""
import torch
import torch.nn.functional as F

torch.manual_seed(0)
q = k = v = torch.randn(2, 2, 5, 8)
padding_mask = torch.ones(5, 5, dtype=torch.bool)
y = F.scaled_dot_product_attention(q, k, v, attn_mask=padding_mask, is_causal=True)  # expect: TL804

"""A small GPT trained on a repeating token sequence: the reference program for the optimizer,
schedule, accumulation and attention rules.

    python runtime_checks/gpt.py [--device cpu|cuda] [--steps N] [--bug NAME] [--compile]

Clean, it clips after backward and before the step, steps the schedule after the optimizer,
divides the mean loss by the accumulation steps and calls SDPA with is_causal=True alone and
dropout only while training. Each --bug switches one of these off (see BUGS).
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

BUGS = {
    "clip-after-step": ("TL101",),
    "scheduler-first": ("TL102",),
    "no-divide": ("TL201",),
    "sdpa-mask-and-causal": ("TL804",),
    "eval-dropout": ("TL803",),
}
VOCAB, CONTEXT, DIM, HEADS, LAYERS, DROPOUT = 64, 32, 64, 4, 2, 0.1
ACCUM = 2  # micro-batches per optimizer step


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=30, help="optimizer steps")
    parser.add_argument("--bug", choices=sorted(BUGS))
    parser.add_argument("--compile", action="store_true", help="train through torch.compile(model)")
    return parser.parse_args()


def math_attention(q, k, v):
    """softmax(QK^T / sqrt(d)) V under a causal mask, written out: the reference SDPA must match."""
    t = q.size(-2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    causal = torch.ones(t, t, dtype=torch.bool, device=q.device).tril()
    return scores.masked_fill(~causal, float("-inf")).softmax(dim=-1) @ v


class CausalSelfAttention(nn.Module):
    def __init__(self, dropout: float, bug=None):
        super().__init__()
        self.qkv = nn.Linear(DIM, 3 * DIM)
        self.proj = nn.Linear(DIM, DIM)
        self.dropout = dropout
        self.bug = bug

    def forward(self, x, reference: bool = False):
        b, t, _ = x.shape
        q, k, v = (z.view(b, t, HEADS, DIM // HEADS).transpose(1, 2) for z in self.qkv(x).split(DIM, dim=2))
        if reference:
            y = math_attention(q, k, v)
        elif self.bug == "sdpa-mask-and-causal":
            # Bug: an explicit causal mask as well as is_causal=True (TL804). Without dropout, as
            # here, torch 2.13's CPU path silently combines the two; with dropout_p > 0 it raises.
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=True)
        elif self.bug == "eval-dropout":
            # Bug: the functional call does not know model.eval(), so dropout stays on (TL803).
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=self.dropout)
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                               dropout_p=self.dropout if self.training else 0.0)
        return self.proj(y.transpose(1, 2).reshape(b, t, DIM))


class Block(nn.Module):
    def __init__(self, bug):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(DIM), nn.LayerNorm(DIM)
        self.attn = CausalSelfAttention(DROPOUT, bug)
        self.mlp = nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.GELU(), nn.Linear(4 * DIM, DIM), nn.Dropout(DROPOUT))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, bug=None):
        super().__init__()
        self.tokens = nn.Embedding(VOCAB, DIM)
        self.positions = nn.Embedding(CONTEXT, DIM)
        self.blocks = nn.Sequential(*(Block(bug) for _ in range(LAYERS)))
        self.ln = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, idx):
        pos = torch.arange(idx.size(1), device=idx.device)
        return self.head(self.ln(self.blocks(self.tokens(idx) + self.positions(pos))))


@torch.no_grad()
def check_sdpa_matches_math(device):
    """SDPA with is_causal=True computes the causal attention the math reference writes out.
    A dropout-free twin of the model's clean attention in eval mode, so the result is deterministic."""
    attn = CausalSelfAttention(0.0).to(device).eval()
    x = torch.randn(2, CONTEXT, DIM, device=device)
    fast, reference = attn(x), attn(x, reference=True)
    assert torch.allclose(fast, reference, atol=1e-4, rtol=1e-4), (fast - reference).abs().max()


def loader(device):
    """Windows over a random 24-token pattern repeated: predictable once the model copies from
    24 positions back, so the loss falls quickly from log(64)."""
    pattern = torch.randint(0, VOCAB, (24,))
    seq = pattern.repeat(64)
    windows = torch.stack([seq[i:i + CONTEXT + 1] for i in range(256)])
    # 256 / 8 = 32 micro-batches per pass, a multiple of ACCUM: no remainder left unstepped.
    return DataLoader(TensorDataset(windows[:, :-1], windows[:, 1:]), batch_size=8, shuffle=True)


def main():
    args = parse_args()
    torch.manual_seed(0)
    device = torch.device(args.device)
    check_sdpa_matches_math(device)

    model = GPT(args.bug).to(device)
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]  # biases and LayerNorm gains
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=3e-3)
    warmup = 5

    def lr_factor(step):  # linear warmup, then cosine down to 10% at the last step
        if step < warmup:
            return (step + 1) / warmup
        return 0.1 + 0.45 * (1 + math.cos(math.pi * min(1.0, (step - warmup) / max(1, args.steps - warmup))))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor)
    data = loader(device)
    forward = torch.compile(model) if args.compile else model

    losses, step = [], 0
    while step < args.steps:
        for i, (x, y) in enumerate(data):
            x, y = x.to(device), y.to(device)
            loss = F.cross_entropy(forward(x).view(-1, VOCAB), y.view(-1))
            if args.bug == "no-divide":
                loss.backward()  # bug: the gradient of ACCUM mean losses is ACCUM times too large (TL201)
            else:
                (loss / ACCUM).backward()
            if (i + 1) % ACCUM:
                continue
            if args.bug == "scheduler-first":
                scheduler.step()  # bug: the schedule runs one step ahead of the optimizer (TL102)
            if args.bug != "clip-after-step":
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            if args.bug == "clip-after-step":
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # bug: clips applied gradients (TL101)
            if args.bug != "scheduler-first":
                scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(loss.item())
            step += 1
            if step == args.steps:
                break

    # An evaluation pass after training: dropout must be off in eval mode.
    model.eval()
    with torch.no_grad():
        x, y = next(iter(data))
        x, y = x.to(device), y.to(device)
        eval_loss = F.cross_entropy(model(x).view(-1, VOCAB), y.view(-1)).item()
    print(f"first loss {losses[0]:.4f} final loss {losses[-1]:.4f} eval loss {eval_loss:.4f}")
    if args.bug is None:
        assert losses[-1] < losses[0], "the clean run did not learn"


if __name__ == "__main__":
    main()

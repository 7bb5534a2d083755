"""SGD with momentum written by hand, no optimizer object: the reference program for steps taken by
updating the parameters from their gradients under torch.no_grad().

    python runtime_checks/manual_sgd.py [--device cpu|cuda] [--steps N] [--bug NAME]

Clean, it accumulates the gradients of ACCUM micro-batches of a mean cross-entropy, each divided by
ACCUM, then, under torch.no_grad(), moves every parameter by a momentum buffer fed from its
gradient (with weight decay) and clears the gradient (p.grad = None). The guard takes that update
for the optimizer step and the clearing for its zero_grad. Each --bug breaks one rule (see BUGS).
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

BUGS = {
    "no-divide": ("TL201",),
    "no-zero": ("TL105",),
}
FEATURES, HIDDEN, CLASSES, ACCUM = 32, 128, 10, 4
LR, MOMENTUM, DECAY = 0.05, 0.9, 1e-4


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=30, help="parameter updates")
    parser.add_argument("--bug", choices=sorted(BUGS))
    return parser.parse_args()


def loader():
    """Ten Gaussian clusters: separable, so a clean run's loss falls fast."""
    centers = torch.randn(CLASSES, FEATURES) * 3
    labels = torch.randint(0, CLASSES, (4096,))
    inputs = centers[labels] + torch.randn(4096, FEATURES)
    return DataLoader(TensorDataset(inputs, labels), batch_size=32, shuffle=True, drop_last=True)


def main():
    args = parse_args()
    torch.manual_seed(0)
    device = torch.device(args.device)
    model = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, CLASSES)).to(device)
    velocity = {p: torch.zeros_like(p) for p in model.parameters()}

    losses, step = [], 0
    while step < args.steps:
        for i, (x, y) in enumerate(loader()):
            x, y = x.to(device), y.to(device)
            loss = F.cross_entropy(model(x), y)
            if args.bug == "no-divide":
                loss.backward()  # bug: the gradient of ACCUM mean losses is ACCUM times too large (TL201)
            else:
                (loss / ACCUM).backward()
            losses.append(loss.item())
            if (i + 1) % ACCUM != 0:
                continue
            with torch.no_grad():
                for p in model.parameters():
                    buf = velocity[p]
                    buf.mul_(MOMENTUM).add_(p.grad + DECAY * p)
                    p.sub_(LR * buf)
                    if args.bug != "no-zero":  # bug: the gradients of every update so far add up (TL105)
                        p.grad = None
            step += 1
            if step == args.steps:
                break

    first, last = sum(losses[:ACCUM]) / ACCUM, sum(losses[-ACCUM:]) / ACCUM
    print(f"first loss {first:.4f} final loss {last:.4f} after {step} updates by hand")
    if args.bug is None:
        assert last < first, "the clean run did not learn"


if __name__ == "__main__":
    main()

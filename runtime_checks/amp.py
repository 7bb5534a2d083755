"""fp16 mixed precision with a GradScaler: the reference program for the AMP rules.

    python runtime_checks/amp.py [--device cpu|cuda] [--steps N] [--bug NAME]

Clean, it runs forward under fp16 autocast, backward through scaler.scale(loss), unscales before
clipping, steps through the scaler, updates the scale and steps the schedule after the optimizer.
The first steps overflow at the initial scale of 2**16 and are skipped by the scaler; stepping the
schedule after such a skipped step is still the right order, and no finding (PyTorch's own
scheduler-order warning fires there, wrongly: pytorch#44511). Each --bug breaks one rule (see BUGS).
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

BUGS = {
    "clip-scaled": ("TL103",),
    "no-scaler": ("TL401",),
    "step-bypasses-scaler": ("TL402", "TL810"),  # inf steps not skipped: the loss turns NaN
}
FEATURES, HIDDEN, CLASSES = 32, 256, 10


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=40, help="optimizer steps")
    parser.add_argument("--bug", choices=sorted(BUGS))
    return parser.parse_args()


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(FEATURES, HIDDEN)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(HIDDEN), nn.Linear(HIDDEN, HIDDEN), nn.GELU()) for _ in range(3)
        )
        self.out = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        h = self.inp(x)
        for block in self.blocks:
            h = h + block(h)
        return self.out(h)


def loader():
    """Ten Gaussian clusters: separable, so a clean run's loss falls fast."""
    centers = torch.randn(CLASSES, FEATURES) * 3
    labels = torch.randint(0, CLASSES, (2048,))
    inputs = centers[labels] + torch.randn(2048, FEATURES)
    return DataLoader(TensorDataset(inputs, labels), batch_size=64, shuffle=True, drop_last=True)


def main():
    args = parse_args()
    torch.manual_seed(0)
    device = torch.device(args.device)
    model = Classifier().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.LinearLR(optimizer, 1.0, 0.1, total_iters=args.steps)
    scaler = torch.amp.GradScaler(device.type, enabled=args.bug != "no-scaler")
    data = loader()

    losses, skipped, step = [], 0, 0
    while step < args.steps:
        for x, y in data:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast(device.type, dtype=torch.float16):
                loss = F.cross_entropy(model(x), y)
            if args.bug == "no-scaler":
                # Bug: fp16 gradients without loss scaling underflow to zero (TL401).
                loss.backward()
                optimizer.step()
            else:
                scaler.scale(loss).backward()
                if args.bug == "clip-scaled":
                    # Bug: clips gradients still multiplied by the loss scale (TL103).
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                else:
                    scaler.unscale_(optimizer)
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scale = scaler.get_scale()
                if args.bug == "step-bypasses-scaler":
                    optimizer.step()  # bug: steps with scaled (or inf) gradients (TL402)
                else:
                    scaler.step(optimizer)
                scaler.update()
                skipped += scaler.get_scale() < scale  # the scale backs off when a step was skipped
            scheduler.step()
            losses.append(loss.item())
            step += 1
            if step == args.steps:
                break

    print(f"first loss {losses[0]:.4f} final loss {losses[-1]:.4f}, {skipped} step(s) skipped by the scaler")
    if args.bug is None:
        assert skipped > 0, "no step overflowed: the skipped-step case is not exercised"
        assert losses[-1] < losses[0], "the clean run did not learn"


if __name__ == "__main__":
    main()

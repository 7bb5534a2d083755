"""DistributedDataParallel with gradient accumulation: the reference program for the distributed
and accumulation rules. Run it with torchrun:

    torchrun --nproc_per_node=2 runtime_checks/ddp_accum.py [--device cpu|cuda] [--epochs N] [--bug NAME]

Clean, it shards the data with a DistributedSampler and reshuffles it every epoch (set_epoch),
divides each micro-batch's mean loss by the accumulation steps, runs the micro-steps' forward and
backward inside no_sync() so that only the boundary all-reduces, and steps the optimizer on the
epoch's last, shorter window too. At the end every rank must hold the same weights. Each --bug
breaks one of these (see BUGS).
"""
import argparse
import contextlib
import gc

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import process_group  # runtime_checks/process_group.py

BUGS = {
    "no-no-sync": ("TL203",),
    "no-set-epoch": ("TL301",),
    "no-divide": ("TL201",),
    "drop-remainder": ("TL202",),
}
ACCUM = 4  # micro-batches per optimizer step
SAMPLES, BATCH = 200, 8  # 100 samples per rank on 2 ranks: 13 micro-batches, the last window is 1


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--bug", choices=sorted(BUGS))
    return parser.parse_args()


def dataset():
    """A noisy linear regression, the same on every rank (seeded), sharded by the sampler."""
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(SAMPLES, 16, generator=generator)
    targets = inputs @ torch.randn(16, 1, generator=generator) + 0.1 * torch.randn(SAMPLES, 1, generator=generator)
    return TensorDataset(inputs, targets)


def main():
    args = parse_args()
    device = process_group.init(args.device)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1)).to(device))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    data = dataset()
    sampler = DistributedSampler(data, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=BATCH, sampler=sampler)

    epoch_losses = []
    for epoch in range(args.epochs):
        losses = []
        if args.bug != "no-set-epoch":
            sampler.set_epoch(epoch)  # without it, every epoch repeats epoch 0's order (TL301)
        for i, (x, y) in enumerate(loader):
            x, y = x.to(device), y.to(device)
            if args.bug == "drop-remainder":
                boundary = (i + 1) % ACCUM == 0  # bug: the epoch's last window is never stepped (TL202)
            else:
                boundary = (i + 1) % ACCUM == 0 or i + 1 == len(loader)
            # DDP decides at forward whether backward all-reduces: no_sync must cover both.
            skip_sync = not boundary and args.bug != "no-no-sync"  # bug: all-reduce every micro-step (TL203)
            with model.no_sync() if skip_sync else contextlib.nullcontext():
                loss = F.mse_loss(model(x), y)
                if args.bug == "no-divide":
                    loss.backward()  # bug: the step applies the sum of ACCUM mean gradients (TL201)
                else:
                    (loss / ACCUM).backward()
            if boundary:
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            losses.append(loss.item())
        epoch_losses.append(sum(losses) / len(losses))

    # Every rank must end with the same weights: DDP's whole contract.
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    gathered = [torch.empty_like(flat) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, flat)
    assert all(torch.equal(gathered[0], other) for other in gathered[1:]), "ranks diverged"
    if dist.get_rank() == 0:
        print("mean loss per epoch (rank 0): " + " ".join(f"{loss:.4f}" for loss in epoch_losses))
    if args.bug is None and args.epochs > 1:
        assert epoch_losses[-1] < epoch_losses[0], "the clean run did not learn"
    # Free DDP (its reducer holds gloo work) before the group: torch 2.13 gloo otherwise aborts at
    # exit in about 1 run in 10 ("terminate called without an active exception").
    del model, optimizer
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""FSDP2 (fully_shard) with gradient accumulation: the reference program for the sharding rules.
Run it with torchrun:

    torchrun --nproc_per_node=2 runtime_checks/fsdp.py [--device cpu|cuda] [--steps N] [--bug NAME]

Clean, it shards every block and then the root, builds the optimizer over the sharded
parameters, turns gradient sync off for the micro-steps (set_requires_gradient_sync(False)) and
on for the boundary, and clips the sharded gradients before each step. Each --bug breaks one of
these (see BUGS).
"""
import argparse
import gc

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import process_group  # runtime_checks/process_group.py

BUGS = {
    "optimizer-before-shard": ("TL305",),
    "sync-every-micro-step": ("TL203",),
}
ACCUM = 2
DIM, CLASSES = 32, 4


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=12, help="optimizer steps")
    parser.add_argument("--bug", choices=sorted(BUGS))
    return parser.parse_args()


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(DIM)
        self.mlp = nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.GELU(), nn.Linear(4 * DIM, DIM))

    def forward(self, x):
        return x + self.mlp(self.norm(x))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(3))
        self.head = nn.Linear(DIM, CLASSES)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def loader():
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(512, DIM, generator=generator)
    labels = (inputs[:, :CLASSES] * 2).argmax(dim=1)  # learnable from the first features
    data = TensorDataset(inputs, labels)
    return DataLoader(data, batch_size=16, sampler=DistributedSampler(data, shuffle=False))


def param_groups(model):
    """Weight decay on matrices only: not on biases and LayerNorm gains."""
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    return [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]


def main():
    args = parse_args()
    device = process_group.init(args.device)
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    torch.manual_seed(0)
    model = Model().to(device)
    if args.bug == "optimizer-before-shard":
        # Bug: the optimizer holds the parameters fully_shard replaces; they never get gradients (TL305).
        optimizer = torch.optim.AdamW(param_groups(model), lr=3e-3)
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    if args.bug != "optimizer-before-shard":
        optimizer = torch.optim.AdamW(param_groups(model), lr=3e-3)

    losses, step = [], 0
    for i, (x, y) in enumerate(loader()):
        x, y = x.to(device), y.to(device)
        boundary = (i + 1) % ACCUM == 0
        # Micro-steps only accumulate locally; the boundary's backward reduce-scatters the sum.
        model.set_requires_gradient_sync(boundary or args.bug == "sync-every-micro-step")
        loss = F.cross_entropy(model(x), y)
        (loss / ACCUM).backward()
        losses.append(loss.item())
        if boundary:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()
            step += 1
            if step == args.steps:
                break

    if dist.get_rank() == 0:
        print(f"first loss {losses[0]:.4f} final loss {losses[-1]:.4f}")
    if args.bug is None:
        assert losses[-1] < losses[0], "the clean run did not learn"
    # Free the sharded model (its process group work) before the group: torch 2.13 gloo otherwise
    # aborts at exit now and then ("terminate called without an active exception").
    del model, optimizer
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

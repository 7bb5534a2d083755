"""Worker 1 of torch.multiprocessing.spawn is killed by a signal before it trains: it reports
nothing, so the guard's report has an error for it instead of a clean run."""
import os
import signal

import torch
import torch.multiprocessing as mp


def train(rank):
    if rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    torch.set_num_threads(1)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        optimizer.zero_grad()
        model(torch.ones(2, 4)).sum().backward()
        optimizer.step()


if __name__ == "__main__":
    mp.spawn(train, nprocs=2)

"""multiprocessing workers of the spawn and forkserver methods, started through a target, a Process
subclass's run() and a run set on the process object: each trains without zero_grad()."""
import functools
import multiprocessing

import torch


def train(steps):
    torch.set_num_threads(1)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        model(torch.ones(2, 4)).sum().backward()
        optimizer.step()  # expect: TL105


class Trainer(multiprocessing.get_context("forkserver").Process):
    def run(self):
        train(3)


if __name__ == "__main__":
    spawn = multiprocessing.get_context("spawn")
    set_run = spawn.Process()
    set_run.run = functools.partial(train, 3)
    workers = [spawn.Process(target=train, args=(3,)), Trainer(), set_run]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()

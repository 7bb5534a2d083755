"""A program that trains in processes it starts itself is not silently "clean": the guard says
which workers it did not check. DataLoader workers are not training processes."""
import subprocess
import sys
import textwrap

SPAWNED = textwrap.dedent('''
    import torch
    import torch.multiprocessing as mp


    def worker(rank):
        torch.set_num_threads(1)
        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            model(torch.ones(2, 4)).sum().backward()
            optimizer.step()  # no zero_grad: a TL105 the guard cannot see from here


    if __name__ == "__main__":
        mp.spawn(worker, nprocs=1)
''')

LOADER_WORKERS = textwrap.dedent('''
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    if __name__ == "__main__":
        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = DataLoader(TensorDataset(torch.randn(8, 4)), batch_size=4, num_workers=1)
        for (x,) in loader:
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
''')


def _run(tmp_path, source, *options):
    (tmp_path / "train.py").write_text(source)
    return subprocess.run([sys.executable, "-m", "trainlint", "run", *options, "train.py"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=180)


def test_spawned_training_workers_are_reported_unchecked(tmp_path):
    for options in ((), ("--mode", "collect")):
        result = _run(tmp_path, SPAWNED, *options)
        assert result.returncode == 0, result.stderr
        assert "1 worker process started at train.py:16 ran unchecked" in result.stderr
        assert "no optimizer step ran in this process, so nothing was checked" in result.stderr


def test_dataloader_workers_are_not_training_processes(tmp_path):
    result = _run(tmp_path, LOADER_WORKERS)
    assert result.returncode == 0, result.stderr
    assert "unchecked" not in result.stderr

"""``trainlint run script.py`` behaves as ``python script.py``: the same ``__file__``, the script's
globals alive in ``__main__`` while its atexit handlers run, the same warnings printed as often."""
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent('''
    import atexit
    import warnings

    import torch

    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1)
    for epoch in range(5):
        warnings.warn("once per location")
        optimizer.zero_grad()
        model(torch.ones(1, 2)).sum().backward()
        optimizer.step()
        scheduler.step(epoch)  # an explicit epoch: PyTorch warns, the guard relays it every step


    def at_exit():
        import __main__
        print("atexit main has the model:", type(getattr(__main__, "model", None)).__name__)
        print("atexit main has __file__:", hasattr(__main__, "__file__"))


    print("file", __file__)


    atexit.register(at_exit)
''')


def _run(tmp_path, *prefix):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    return subprocess.run([sys.executable, *prefix, "train.py"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)


def test_run_matches_python(tmp_path):
    plain = _run(tmp_path)
    guarded = _run(tmp_path, "-m", "trainlint", "run")
    assert plain.returncode == guarded.returncode == 0, guarded.stderr
    assert plain.stdout == guarded.stdout
    assert f"file {tmp_path / 'train.py'}" in guarded.stdout
    assert "atexit main has the model: Linear" in guarded.stdout
    for text in ("once per location", "epoch parameter"):
        assert plain.stderr.count(text) == guarded.stderr.count(text) >= 1, guarded.stderr


def test_a_script_that_does_not_compile_prints_only_its_syntax_error(tmp_path):
    (tmp_path / "broken.py").write_text("x = (\n")
    plain = subprocess.run([sys.executable, "broken.py"], cwd=tmp_path, capture_output=True, text=True)
    guarded = subprocess.run([sys.executable, "-m", "trainlint", "run", "broken.py"], cwd=tmp_path,
                             capture_output=True, text=True)
    assert plain.returncode == guarded.returncode == 1
    assert guarded.stderr.startswith(plain.stderr)

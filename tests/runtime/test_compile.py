"""Under torch.compile the guard is invisible to dynamo: a compiled model traces torch's own
functions (no graph break, no recompile when the guard samples the steady loop), the eager part of
the step is still checked, and after the guard nothing of it is left in torch. So is a train step
compiled whole, hooked calls inside: the same graphs and graph breaks as without the guard, no
recompile, the same weights, and the checks that run at its graph breaks still run.

Each case runs in a fresh interpreter: compiling changes how the guard swaps its per-step hooks
for the rest of the process, and dynamo's counters count the whole process (see
trainlint/runtime/patches.py)."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

PROGRAM = textwrap.dedent('''
    import json, sys
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from torch._dynamo.utils import counters
    import trainlint

    torch.manual_seed(0)
    torch.set_num_threads(1)
    GUARD, BUG = sys.argv[1] == "guard", sys.argv[2] == "bug"


    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv, self.out = nn.Linear(16, 48), nn.Linear(16, 16)

        def forward(self, x):
            q, k, v = self.qkv(x).view(x.size(0), x.size(1), 3, 2, 8).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.out(y.transpose(1, 2).reshape(x.shape))


    model = nn.Sequential(nn.Embedding(32, 16), Attention(), nn.Linear(16, 32))
    compiled = torch.compile(model, backend="aot_eager")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, 400)


    def train(steps):
        for _ in range(steps):
            x = torch.randint(0, 32, (4, 8))
            optimizer.zero_grad()
            loss = F.cross_entropy(compiled(x).view(-1, 32), x.view(-1))
            loss.backward()
            if BUG:
                scheduler.step()  # before the optimizer: TL102
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            if not BUG:
                scheduler.step()


    originals = (F.scaled_dot_product_attention, F.cross_entropy, torch.autograd.backward)
    rules = []
    if GUARD:
        with trainlint.guard(mode="collect") as session:
            train(300)  # past the fully checked start: the guard samples the steady loop
        rules = sorted({f.rule for f in session.findings})
    else:
        train(300)
    print(json.dumps({
        "graphs": counters["stats"]["unique_graphs"],
        "breaks": sum(counters["graph_break"].values()),
        "rules": rules,
        "restored": originals == (F.scaled_dot_product_attention, F.cross_entropy, torch.autograd.backward),
        "weights": float(sum(p.detach().double().sum() for p in model.parameters())),
    }))
''')


def _run(tmp_path, *args):
    script = tmp_path / "compiled.py"
    script.write_text(PROGRAM, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_compiled_model_compiles_once_and_trains_bitwise_alike(tmp_path):
    plain = _run(tmp_path, "plain", "clean")
    guarded = _run(tmp_path, "guard", "clean")
    assert guarded["graphs"] == plain["graphs"] == 1  # no recompile when the guard samples
    assert guarded["breaks"] == plain["breaks"] == 0
    assert guarded["rules"] == []
    assert guarded["restored"]
    assert guarded["weights"] == plain["weights"]


def test_the_eager_part_of_a_compiled_step_is_still_checked(tmp_path):
    guarded = _run(tmp_path, "guard", "bug")
    assert guarded["rules"] == ["TL102"]
    assert guarded["graphs"] == 1


STEP_PROGRAM = textwrap.dedent('''
    import json, sys
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from torch._dynamo.utils import counters
    import trainlint

    torch.manual_seed(0)
    torch.set_num_threads(1)
    GUARD, BUG, SCALER = sys.argv[1] == "guard", sys.argv[2] == "bug", sys.argv[2] == "scaler"


    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv, self.out = nn.Linear(16, 48), nn.Linear(16, 16)

        def forward(self, x):
            q, k, v = self.qkv(x).view(x.size(0), x.size(1), 3, 2, 8).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.out(y.transpose(1, 2).reshape(x.shape))


    model = nn.Sequential(nn.Embedding(32, 16), Attention(), nn.Linear(16, 32))
    compiled = torch.compile(model, backend="aot_eager")
    # A tensor learning rate: the schedule changes it without recompiling the optimizer step.
    optimizer = torch.optim.AdamW(model.parameters(), lr=torch.tensor(1e-3))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / 10))
    scaler = torch.amp.GradScaler("cpu")


    @torch.compile(backend="aot_eager")
    def train_step(x, scale):
        loss = F.cross_entropy(compiled(x).view(-1, 32), x.view(-1)) * scale
        if SCALER:
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            # GradScaler.step is a graph break; dynamo compiles the optimizer step it calls as a
            # frame of its own, with the guard too
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()  # a graph break, with or without the guard: its hook runs eagerly
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
        optimizer.zero_grad()
        return loss.detach()


    def train(steps):
        for i in range(steps):
            x = torch.randint(0, 32, (4, 8))
            train_step(x, torch.tensor(float("nan") if BUG and i == 20 else 1.0))
            scheduler.step()


    rules = []
    if GUARD:
        with trainlint.guard(mode="collect") as session:
            train(30)
        rules = sorted({f.rule for f in session.findings})
    else:
        train(30)
    print(json.dumps({
        "frames": counters["frames"]["total"],
        "graphs": counters["stats"]["unique_graphs"],
        "breaks": sum(counters["graph_break"].values()),
        "rules": rules,
        "weights": [p.detach().tolist() for p in model.parameters()],
    }))
''')


def _run_step(tmp_path, *args):
    """The compiled train step's figures, with the recompiles dynamo logged."""
    script = tmp_path / f"compiled_step_{'_'.join(args)}.py"
    script.write_text(STEP_PROGRAM, encoding="utf-8")
    env = dict(os.environ, TORCH_LOGS="recompiles")
    done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    figures["recompiles"] = done.stderr.count("Recompiling function")
    return figures


@pytest.fixture(scope="module")
def plain_step(tmp_path_factory):
    return _run_step(tmp_path_factory.mktemp("plain"), "plain", "clean")


def test_a_compiled_train_step_compiles_as_without_the_guard(tmp_path, plain_step):
    plain = plain_step
    guarded = _run_step(tmp_path, "guard", "clean")
    assert plain["graphs"] > 1 and plain["breaks"] > 0  # the step is split at backward(), as compiled steps are
    # The same frames compiled into the same graphs, split at the same graph breaks.
    assert (guarded["frames"], guarded["graphs"], guarded["breaks"]) == (plain["frames"], plain["graphs"], plain["breaks"])
    assert guarded["recompiles"] == plain["recompiles"] == 0
    # The optimizer steps and clips ran inside compiled code, unseen: nothing is reported missing.
    assert guarded["rules"] == []
    assert guarded["weights"] == plain["weights"]  # bitwise: floats compare exactly


def test_what_torch_calls_back_at_a_graph_break_compiles_as_without_the_guard(tmp_path):
    # The guard checks GradScaler.step eagerly with dynamo off, and calls torch's function with
    # dynamo on again: the optimizer step inside it is compiled as without the guard (run with
    # dynamo off, it would be eager, and the weights would differ).
    plain = _run_step(tmp_path, "plain", "scaler")
    guarded = _run_step(tmp_path, "guard", "scaler")
    assert (guarded["frames"], guarded["graphs"], guarded["breaks"]) == (plain["frames"], plain["graphs"], plain["breaks"])
    assert guarded["recompiles"] == plain["recompiles"] == 0
    assert guarded["rules"] == []
    assert guarded["weights"] == plain["weights"]


def test_checks_at_a_compiled_steps_graph_breaks_still_run(tmp_path, plain_step):
    # The NaN loss reaches backward(), which runs eagerly at its graph break: TL810 reads its value
    # there, without adding a graph break or a recompile.
    plain = plain_step
    guarded = _run_step(tmp_path, "guard", "bug")
    assert guarded["rules"] == ["TL810"]
    assert (guarded["graphs"], guarded["breaks"], guarded["recompiles"]) == (plain["graphs"], plain["breaks"], 0)


FLUSH_PROGRAM = textwrap.dedent('''
    import json
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.utils.data import DataLoader, TensorDataset
    import trainlint

    torch.manual_seed(0)
    model = nn.Linear(8, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(torch.randn(40, 8), torch.randint(0, 4, (40,))), batch_size=4)


    @torch.compile(backend="eager")
    def flush():
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()


    with trainlint.guard(mode="collect") as session:
        for epoch in range(2):
            for i, (x, y) in enumerate(loader):  # 10 batches: 2 left after the last boundary
                (F.cross_entropy(model(x), y) / 4).backward()
                if (i + 1) % 4 == 0:  # FLUSHED
                    optimizer.step()
                    optimizer.zero_grad()
            flush()  # steps the remainder, in compiled code the guard does not see
        for epoch in range(2):
            for i, (x, y) in enumerate(loader):
                (F.cross_entropy(model(x), y) / 4).backward()
                if (i + 1) % 4 == 0:  # DROPPED
                    optimizer.step()
                    optimizer.zero_grad()
    lines = open(__file__).read().splitlines()
    print(json.dumps(sorted([f.rule, lines[f.line - 1].split("# ")[-1]] for f in session.findings)))
''')


def test_a_step_compiled_code_ran_unseen_is_not_reported_missing(tmp_path):
    # The guard cannot see the optimizer step inside flush() (dynamo traces torch's own step), so
    # it forgets what that step could have done: the first loop's remainder is not reported as
    # dropped, while the second loop's, which nothing steps, still is.
    script = tmp_path / "flush.py"
    script.write_text(FLUSH_PROGRAM, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [["TL202", "DROPPED"]]

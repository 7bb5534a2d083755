"""Under torch.compile the guard is invisible to dynamo: a compiled model traces torch's own
functions (no graph break, no recompile when the guard samples the steady loop), the eager part of
the step is still checked, and after the guard nothing of it is left in torch.

Each case runs in a fresh interpreter: importing dynamo changes how the guard swaps its per-step
hooks for the rest of the process (see trainlint/runtime/patches.py)."""
import json
import subprocess
import sys
import textwrap

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

"""Valid Python that libcst alone would refuse is still analyzed."""
from __future__ import annotations

from cli_support import run_json, write


def test_a_form_feed_in_indentation_is_valid_python(tmp_path):
    # CPython restarts the indentation count after a form feed; libcst's parser rejects the block.
    path = write(
        tmp_path, "train.py",
        "import torch\n\n\ndef train(model, loader, optimizer):\n\x0c    for x in loader:\n"
        "        loss = model(x).mean()\n        loss.backward()\n        optimizer.step()\n"
        "        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n        optimizer.zero_grad()\n"
        "    return model\n",
    )
    result, data = run_json("--no-cache", str(path))
    assert data["errors"] == [] and [(f["rule"], f["line"]) for f in data["findings"]] == [("TL101", 9)]
    assert result.exit_code == 1


def _elif_chain(links: int) -> str:
    lines = ["import torch", "", "def train(model, loader, optimizer, cfg):", "    for x, y in loader:",
             "        model(x).mean().backward()", "        if cfg.k == 0:", "            optimizer.step()"]
    for i in range(1, links):
        lines += [f"        elif cfg.k == {i}:", "            optimizer.step()"]
    lines += ["        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)", "        optimizer.zero_grad()"]
    return "\n".join(lines) + "\n"


def test_an_elif_chain_longer_than_the_recursion_limit_is_analyzed(tmp_path):
    # CPython and libcst accept it; the engine's walkers and libcst's positions must too.
    source = _elif_chain(1500)
    compile(source, "train.py", "exec")
    _, data = run_json("--no-cache", str(write(tmp_path, "train.py", source)))
    assert data["errors"] == [] and [(f["rule"], f["line"]) for f in data["findings"]] == [("TL101", 3006)]


def test_syntax_warnings_of_the_checked_code_are_not_printed(tmp_path):
    # ``0x1for`` (and, from Python 3.12, "\\d") compile with a SyntaxWarning: the user's, not ours.
    # A subprocess: pytest would capture the warning itself.
    import subprocess
    import sys

    path = write(tmp_path, "train.py", "x = [0x1for y in range(3)]\nimport torch\nloss = torch.ones(1)\nloss.backward()\n")
    done = subprocess.run([sys.executable, "-m", "trainlint", "--no-cache", str(path)], capture_output=True, text=True)
    assert done.returncode == 0 and "SyntaxWarning" not in done.stderr

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

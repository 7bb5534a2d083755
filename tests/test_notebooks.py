"""Notebooks: code cells in execution order, magics skipped, findings located by cell."""
from __future__ import annotations

import json

from cli_support import run, run_json, write


def notebook(*cells, counts=None, markdown_first=True):
    items = [{"cell_type": "markdown", "metadata": {}, "source": ["# Training\n"]}] if markdown_first else []
    for index, source in enumerate(cells):
        items.append({
            "cell_type": "code",
            "execution_count": None if counts is None else counts[index],
            "metadata": {},
            "outputs": [],
            "source": source.splitlines(keepends=True),
        })
    return json.dumps({"cells": items, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


SETUP = "%matplotlib inline\n!pip install torch\nimport torch\nmodel = torch.nn.Linear(4, 2)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
LOOP = (
    "for x, y in loader:\n"
    "    optimizer.zero_grad()\n"
    "    loss = torch.nn.functional.mse_loss(model(x), y)\n"
    "    loss.backward()\n"
    "    optimizer.step()\n"
    "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
)


def test_finding_is_reported_by_cell_and_line(tmp_path):
    path = write(tmp_path, "train.ipynb", notebook(SETUP, LOOP))
    result = run(path)
    assert result.exit_code == 1
    assert result.stdout.startswith(f"{path.as_posix()}:cell 3:6:5: TL101 [clip-after-step] ")
    assert "optimizer.step() (cell 3, line 5)" in result.stdout
    assert "loss.backward() (cell 3, line 4)" in result.stdout


def test_json_carries_the_cell(tmp_path):
    _, data = run_json(write(tmp_path, "train.ipynb", notebook(SETUP, LOOP)))
    (finding,) = data["findings"]
    assert (finding["rule"], finding["cell"], finding["line"], finding["column"]) == ("TL101", 3, 6, 5)


def test_execution_order_decides_the_flow(tmp_path):
    # The scheduler cell ran after the loop cell was defined but before it ran: execution counts rule.
    sched = "scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, total_steps=100)\n"
    loop = LOOP.replace("    optimizer.step()\n    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n",
                        "    scheduler.step()\n    optimizer.step()\n")
    _, data = run_json(write(tmp_path, "a.ipynb", notebook(SETUP, loop, sched, counts=[1, 3, 2])))
    assert [(f["rule"], f["cell"]) for f in data["findings"]] == [("TL102", 3)]


def test_magics_cell_magics_and_invalid_cells_do_not_crash(tmp_path):
    cells = ["%%bash\necho hi\n", "files = !ls\n%time x = 1\nmodel?\n", "def broken(:\n", SETUP, LOOP]
    result, data = run_json(write(tmp_path, "m.ipynb", notebook(*cells)))
    assert result.exit_code == 1
    assert [f["cell"] for f in data["findings"]] == [6]


def test_clean_notebook(tmp_path):
    good = LOOP.replace("    optimizer.step()\n    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n",
                        "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n    optimizer.step()\n")
    result = run(write(tmp_path, "ok.ipynb", notebook(SETUP, good)))
    assert result.exit_code == 0


def test_broken_notebook_is_a_per_file_error(tmp_path):
    write(tmp_path, "broken.ipynb", '{"cells": [')
    write(tmp_path, "nocells.ipynb", '{"metadata": {}}')
    good = write(tmp_path, "good.ipynb", notebook(SETUP, LOOP))
    result, data = run_json(tmp_path)
    assert result.exit_code == 2
    assert [f["path"] for f in data["findings"]] == [good.as_posix()]
    messages = {e["path"].rsplit("/", 1)[-1]: e["message"] for e in data["errors"]}
    assert messages["broken.ipynb"].startswith("broken notebook: invalid JSON")
    assert messages["nocells.ipynb"] == "broken notebook: no 'cells' list"


def test_directories_include_notebooks(tmp_path):
    write(tmp_path, "nb/train.ipynb", notebook(SETUP, LOOP))
    _, data = run_json(tmp_path)
    assert [f["path"].rsplit("/", 1)[-1] for f in data["findings"]] == ["train.ipynb"]


def test_a_cell_source_of_the_wrong_type_is_a_broken_notebook(tmp_path):
    # Before: "".join() of the ints raised TypeError, reported as "internal error: TypeError: ...".
    good = write(tmp_path, "good.ipynb", notebook(SETUP, LOOP))
    sources = {"ints.ipynb": [1, 2], "nested.ipynb": [["import torch\n"]], "nulls.ipynb": ["x = 1\n", None],
               "number.ipynb": 42, "object.ipynb": {"text": "x = 1\n"}}
    for name, source in sources.items():
        cells = [{"cell_type": "code", "execution_count": 1, "metadata": {}, "outputs": [], "source": "x = 1\n"},
                 {"cell_type": "code", "execution_count": 2, "metadata": {}, "outputs": [], "source": source}]
        write(tmp_path, name, json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    result, data = run_json(tmp_path)
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert [f["path"] for f in data["findings"]] == [good.as_posix()], "the good notebook is still checked"
    messages = {e["path"].rsplit("/", 1)[-1]: e["message"] for e in data["errors"]}
    assert messages == {name: "broken notebook: cell 2's source is neither text nor a list of lines of text"
                        for name in sources}


EVALUATE = "model.eval()\nwith torch.no_grad():\n    print(model(torch.randn(2, 4)))\n"
TRAIN_STEPS = (
    "for step in range(100):\n"
    "    x, y = torch.randn(8, 4), torch.randn(8, 2)\n"
    "    optimizer.zero_grad()\n"
    "    torch.nn.functional.mse_loss(model(x), y).backward()\n"
    "    optimizer.step()\n"
)
SETUP_DROPOUT = "import torch\nmodel = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Dropout(0.1), torch.nn.Linear(8, 2))\n"


def test_a_model_made_in_a_later_cell_is_a_new_object(tmp_path):
    """Objects are the same across cells, and a new model built in a later cell is another one:
    the first model's eval() says nothing of the mode the new one trains in."""
    rebuilt = SETUP_DROPOUT + "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    path = write(tmp_path, "fresh.ipynb", notebook(SETUP_DROPOUT, EVALUATE, rebuilt, TRAIN_STEPS))
    assert run_json(path)[1]["findings"] == []


def test_the_same_model_evaluated_in_one_cell_and_trained_in_a_later_one_is_tl501(tmp_path):
    optimizer = "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    path = write(tmp_path, "same.ipynb", notebook(SETUP_DROPOUT, EVALUATE, optimizer, TRAIN_STEPS))
    assert [f["rule"] for f in run_json(path)[1]["findings"]] == ["TL501"]

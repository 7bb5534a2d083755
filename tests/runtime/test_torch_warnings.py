"""PyTorch's own scheduler warnings use stacklevel=2; under the guard they still name the user's
line, not trainlint's wrapper."""
import inspect
import warnings

import torch

import trainlint


def test_scheduler_order_warning_names_the_users_line():
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
    with warnings.catch_warnings(record=True) as caught, trainlint.guard(mode="collect"):
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1
        scheduler.step()
        optimizer.step()
    torch_warnings = [w for w in caught if "lr_scheduler.step()" in str(w.message)]
    assert len(torch_warnings) == 1
    assert torch_warnings[0].filename == __file__
    assert torch_warnings[0].lineno == line


def test_deprecated_epoch_argument_warning_names_the_users_line():
    optimizer = torch.optim.SGD(torch.nn.Linear(4, 2).parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
    optimizer.step()
    with warnings.catch_warnings(record=True) as caught, trainlint.guard(mode="collect"):
        warnings.simplefilter("always")
        scheduler.step(3)
    deprecations = [w for w in caught if "epoch" in str(w.message)]
    assert deprecations and all(w.filename == __file__ for w in deprecations)

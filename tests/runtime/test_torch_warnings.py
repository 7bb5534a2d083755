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


def test_order_warning_after_a_step_gradscaler_skipped_says_it_is_a_false_alarm():
    """pytorch#44511: GradScaler skipped the first optimizer step (inf gradients), so PyTorch warns
    that the scheduler stepped first; the guard knows better and says so next to the warning."""
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**100)
    with warnings.catch_warnings(record=True) as caught, trainlint.guard(mode="collect") as guard:
        warnings.simplefilter("always")
        with torch.autocast("cpu", dtype=torch.float16):
            loss = model(torch.ones(2, 4)).float().sum()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
    order = [w for w in caught if "lr_scheduler.step()" in str(w.message)]
    assert len(order) == 1 and "false alarm" in str(order[0].message) and "pytorch#44511" in str(order[0].message)
    assert order[0].filename == __file__
    assert not guard.findings


def test_order_warning_for_a_real_misordering_has_no_note():
    optimizer = torch.optim.SGD(torch.nn.Linear(4, 2).parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
    with warnings.catch_warnings(record=True) as caught, trainlint.guard(mode="collect"):
        warnings.simplefilter("always")
        scheduler.step()
        optimizer.step()
    order = [w for w in caught if "lr_scheduler.step()" in str(w.message)]
    assert len(order) == 1 and "trainlint" not in str(order[0].message)

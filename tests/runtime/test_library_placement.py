"""A finding raised inside an installed library the user's code calls (Accelerate's backward, a
trainer's step helper) is placed at the user's line that called the library, as the static
analyzer places it; with no user frame on the stack it stays at the library's line."""
import inspect
import sys
import textwrap
from pathlib import Path

import torch

import trainlint

LIBRARY = textwrap.dedent('''
    import torch


    def update(model, optimizer):
        optimizer.step()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # clipped after the step: TL101
''')


def test_finding_inside_an_installed_library_lands_on_the_users_call(tmp_path, monkeypatch):
    package = tmp_path / "site-packages" / "steplib"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(LIBRARY)
    monkeypatch.syspath_prepend(str(package.parent))
    monkeypatch.delitem(sys.modules, "steplib", raising=False)
    import steplib

    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with trainlint.guard(mode="collect", select="TL101") as guard:
        for _ in range(2):
            optimizer.zero_grad()
            model(torch.ones(2, 4)).sum().backward()
            line = inspect.currentframe().f_lineno + 1
            steplib.update(model, optimizer)
    assert [(f.rule, str(Path(f.path).resolve()), f.line) for f in guard.findings] == [("TL101", __file__, line)]

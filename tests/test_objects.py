"""The object layer (trainlint/static/objects.py): which training objects an expression can be.

Each test builds a small program and asks the role table (a view of the object flow) or the
flow itself; the fixtures check the rules end to end.
"""
from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst

from trainlint.static import project as project_modules
from trainlint.static.module import ModuleModel


def _model(source: str) -> ModuleModel:
    source = textwrap.dedent(source)
    return ModuleModel(cst.parse_module(source), source)


def _project(tmp_path: Path, files: dict, checked: str) -> ModuleModel:
    for name, source in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source), encoding="utf-8")
    project_modules.forget_parsed()
    return project_modules._load(tmp_path / checked)


def test_a_loader_from_a_local_builder_keeps_its_inline_sampler():
    model = _model('''
        from torch.utils.data import DataLoader, DistributedSampler
        def prepare(ds):
            return DataLoader(ds, sampler=DistributedSampler(ds))
        def main(ds):
            loaders = {"train": prepare(ds)}
    ''')
    loader = model.roles.get("loaders['train']")
    assert loader.kind == "loader" and loader.sampler == "loaders['train'].sampler"
    assert model.roles.get(loader.sampler).shuffle is True


def test_an_annotation_never_overrides_the_object_that_flows_in():
    model = _model('''
        import torch
        from torch.utils.data import DataLoader, DistributedSampler
        def main(ds, train_data: DataLoader):
            train_data = DataLoader(ds, sampler=DistributedSampler(ds, shuffle=False))
    ''')
    loader = model.roles.get("train_data")
    assert loader.sampler is not None and model.roles.get(loader.sampler).shuffle is False


def test_an_annotation_is_the_fallback_where_no_object_reaches():
    model = _model('''
        from torch.utils.data import DataLoader
        def run(loader: DataLoader):
            for batch in loader:
                pass
    ''')
    assert model.roles.get("loader").kind == "loader"


def test_a_local_function_named_like_a_library_method_is_read_not_matched():
    """``prepare`` is Accelerate's method name; a project function of that name is its own."""
    model = _model('''
        import torch
        def prepare(model, ds):
            return torch.utils.data.DataLoader(ds, batch_size=4)
        def main(model, ds):
            model_out, loader = prepare(model, ds), None
            loader = prepare(model, ds)
    ''')
    assert model.roles.get("loader").kind == "loader"
    assert model.roles.get("model_out").kind == "loader"


def test_one_object_reached_by_two_paths_is_one_target():
    model = _model('''
        from torch.utils.data import DataLoader, DistributedSampler
        def main(ds):
            train_sampler = DistributedSampler(ds)
            loader = DataLoader(ds, sampler=train_sampler)
    ''')
    assert model.roles.get("loader").sampler == "train_sampler"
    assert model.roles.name_of("loader.sampler") == "train_sampler"


def test_an_instance_of_a_class_without_init_is_an_object(tmp_path):
    model = _model('''
        import torch
        class Holder:
            pass
        def main(model):
            holder = Holder()
            holder.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    ''')
    assert model.roles.get("holder.optimizer").kind == "optimizer"


def test_objects_cross_modules_through_a_package_star_reexport(tmp_path):
    model = _project(tmp_path, {
        "kit/__init__.py": "from .data import *\n",
        "kit/data.py": '''
            from torch.utils.data import DataLoader, DistributedSampler
            def build(ds):
                sampler = DistributedSampler(ds)
                return DataLoader(ds, sampler=sampler), sampler
        ''',
        "train.py": '''
            import kit
            from kit import build
            def main(ds):
                loader, sampler = build(ds)
        ''',
    }, "train.py")
    assert model.roles.get("loader").sampler == model.roles.name_of("sampler")
    assert model.roles.get("sampler").kind == "sampler"


def test_constructor_arguments_become_the_instance_fields_in_another_module(tmp_path):
    model = _project(tmp_path, {
        "trainer.py": '''
            class Trainer:
                def __init__(self, model, train_data, optimizer):
                    self.train_data = train_data
                    self.optimizer = optimizer
        ''',
        "train.py": '''
            import torch
            from trainer import Trainer
            def main(model, ds):
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                trainer = Trainer(model, torch.utils.data.DataLoader(ds), optimizer)
        ''',
    }, "train.py")
    assert model.roles.get("trainer.train_data").kind == "loader"
    assert model.roles.name_of("trainer.optimizer") == "optimizer"


def test_a_flow_that_failed_is_computed_again_not_read_half_done(monkeypatch):
    """A run that fails (a stack too shallow for a deep tree) is retried on a deeper stack by
    the analyzer: the retry must compute the objects again, not read what the failed run left."""
    from trainlint.static.objects import ObjectFlow

    model = _model("""
        import torch
        optimizer = torch.optim.SGD(params, lr=0.1)
    """)
    real_run = ObjectFlow.run
    calls = []

    def failing_once(flow):
        calls.append(flow)
        if len(calls) == 1:
            raise RecursionError("too deep")
        real_run(flow)

    monkeypatch.setattr(ObjectFlow, "run", failing_once)
    try:
        model.roles
    except RecursionError:
        pass
    else:
        raise AssertionError("the first run was meant to fail")
    assert model.roles.get("optimizer").kind == "optimizer"
    assert len(calls) == 2


def test_an_object_from_elsewhere_is_known_by_its_methods():
    """No name says what ``updater`` is: stepped and zeroed, it is an optimizer; a scaler steps
    the optimizer it is given and updates itself."""
    model = _model("""
        def train(net, batches, updater, amp):
            for x in batches:
                updater.zero_grad()
                amp.scale(net(x).sum()).backward()
                amp.step(updater)
                amp.update()
    """)
    assert model.roles.get("updater").kind == "optimizer"
    assert model.roles.get("amp").kind == "scaler"


def test_entries_stored_into_an_empty_dict_are_its_entries():
    """``loaders = {}`` then ``loaders["train"] = DataLoader(...)``: the dict is an object from the
    start, so what is stored into it later, in the same function or (for ``self.loaders``) in
    another method, is found there."""
    model = _model('''
        from torch.utils.data import DataLoader, DistributedSampler
        def main(ds):
            loaders = {}
            loaders["train"] = DataLoader(ds, sampler=DistributedSampler(ds))
        class Trainer:
            def __init__(self, ds):
                self.loaders = {}
                self.setup(ds)
            def setup(self, ds):
                self.loaders["train"] = DataLoader(ds, sampler=DistributedSampler(ds, shuffle=False))
    ''')
    local = model.roles.get("loaders['train']")
    assert local.kind == "loader" and model.roles.get(local.sampler).shuffle is True
    held = model.roles.get("self.loaders['train']")
    assert held.kind == "loader" and model.roles.get(held.sampler).shuffle is False


def test_a_parameter_its_callers_fill_holds_only_what_they_pass():
    """Read before or after its callers in the text, a parameter that this module's calls fill
    (a function's, or ``__init__``'s through the class's construction) holds their objects only,
    not also an unknown object from outside: an alias of it, or the attribute it is stored in,
    is the loss module the caller built."""
    model = _model('''
        import torch
        class Runner:
            def __init__(self, net, criterion):
                self.net = net
                self.criterion = criterion
        def step(net, criterion, x, y):
            crit = criterion
            return crit(net(x), y)
        def main(x, y):
            net = torch.nn.Linear(3, 2)
            criterion = torch.nn.CrossEntropyLoss()
            step(net, criterion, x, y)
            Runner(net, criterion)
    ''')
    step = next(f for f in model.all_functions if f.name == "step")
    init = next(f for f in model.all_functions if f.name == "__init__")
    assert [o.role.kind for o in model.objects.eval(cst.parse_expression("crit"), step)] == ["loss_fn"]
    assert [o.role.kind for o in model.objects.eval(cst.parse_expression("self.criterion"), init)] == ["loss_fn"]


def test_a_parameter_annotated_with_a_project_class_is_an_instance_of_it_where_nothing_reaches(tmp_path):
    model = _project(tmp_path, {
        "data.py": '''
            from torch.utils.data import DataLoader
            class Source:
                def __init__(self, ds):
                    self.ds = ds
                def loader(self):
                    return DataLoader(self.ds)
        ''',
        "train.py": '''
            from typing import Optional
            from data import Source
            def annotated(source: Optional["Source"]):
                batches = source.loader()
            def unannotated(source):
                batches = source.loader()
            def passed(ds, source: Source):
                batches = source.loader()
            def main(ds, other):
                passed(ds, other)
        ''',
    }, "train.py")
    flow = model.objects
    kinds = {fn.name: {o.role.kind for o in flow.eval(cst.parse_expression("batches"), fn) if o.role}
             for fn in model.all_functions if fn.name != "main"}
    # a caller's object wins over the annotation, whatever that object is
    assert kinds == {"annotated": {"loader"}, "unannotated": set(), "passed": set()}


def test_what_a_method_called_as_a_statement_stores_is_read_by_a_later_call():
    model = _model('''
        from torch.utils.data import DataLoader, DistributedSampler
        class Data:
            def __init__(self, ds):
                self.ds = ds
                self.loader = None
            def setup(self):
                self.loader = DataLoader(self.ds, sampler=DistributedSampler(self.ds))
            def train_dataloader(self):
                return self.loader
        def fit(ds):
            data = Data(ds)
            data.setup()
            batches = data.train_dataloader()
    ''')
    loader = model.roles.get("batches")
    assert loader is not None and loader.kind == "loader" and model.roles.get(loader.sampler).shuffle is True

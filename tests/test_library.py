"""Library models as data: trainlint/libraries/*.toml and a project's [tool.trainlint.library]."""
from __future__ import annotations

import libcst as cst
import pytest

from trainlint.cache import key
from trainlint.config import ConfigError, find_config
from trainlint.engine import Settings, check_paths
from trainlint.events import EventKind
from trainlint.static import library
from trainlint.static.library import LibraryError, build, shipped_tables


def test_every_shipped_description_loads_and_names_its_library():
    tables = shipped_tables()
    assert {name for name, _ in tables} >= {"accelerate.toml", "deepspeed.toml", "lightning.toml", "timm.toml", "transformers.toml"}
    built = build(tables)
    assert built.objects and built.methods and built.returning_calls


def test_a_class_re_exported_inside_its_package_matches():
    built = build(shipped_tables())
    assert built.constructed("accelerate.accelerator.Accelerator", "Accelerator").role == "accelerator"
    assert built.constructed("accelerate.Accelerator", "Accelerator").role == "accelerator"
    assert built.constructed("mylib.Accelerator", "Accelerator") is None  # another package's class
    assert built.constructed(None, "Accelerator").role == "accelerator"  # bare: distinctive name


def test_globs_match_the_hugging_face_schedule_factories():
    built = build(shipped_tables())
    warmup = built.constructed("transformers.optimization.get_linear_schedule_with_warmup", "get_linear_schedule_with_warmup")
    assert (warmup.role, warmup.cadence, warmup.optimizer.position) == ("scheduler", "batch", 0)
    assert built.constructed("transformers.get_scheduler", "get_scheduler").optimizer.position == 1


def test_timm_loss_scaler_is_a_scaled_backward_then_a_step():
    effects = build(shipped_tables()).method("loss_scaler", "__call__")
    assert [e.event for e in effects] == [
        EventKind.BACKWARD, EventKind.UNSCALE, EventKind.CLIP, EventKind.OPTIMIZER_STEP, EventKind.SCALER_UPDATE,
    ]
    assert effects[0].scaled and effects[3].unless_false == "update_grad"


def test_a_projects_entry_takes_precedence_over_the_shipped_one():
    project = ("[tool.trainlint.library]", {"objects": [{"calls": ["accelerate.Accelerator"], "role": "engine"}]})
    assert build(shipped_tables() + [project]).constructed("accelerate.Accelerator", "Accelerator").role == "engine"


@pytest.mark.parametrize("table, message", [
    ({"objects": [{"calls": ["Updater"], "role": "engine"}]}, "qualified names"),
    ({"methods": [{"names": ["apply"], "effects": [{"event": "teleport"}]}]}, "effect needs event"),
    ({"methods": [{"names": ["apply"], "effects": [{"event": "backward", "loss": "halved"}]}]}, "loss is"),
    ({"objects": [{"calls": ["a.B"], "role": "Not A Role"}]}, "role is a lowercase name"),
    ({"widgets": []}, "unknown tables"),
    ({"loader_passes": [{"classes": ["a.Loader"], "begins": "begin"}]}, "a loader pass is"),
    ({"loader_passes": [{"classes": ["a.*Loader"], "begins": "begin", "ends": "end"}]}, "names its classes exactly"),
])
def test_malformed_descriptions_are_refused_with_the_reason(table, message):
    with pytest.raises(LibraryError, match=message):
        build([("mine", table)])


def test_a_malformed_project_description_is_a_config_error_naming_the_file(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.trainlint.library]\nmethods = [{ names = ["apply"], effects = [{ event = "teleport" }] }]\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="pyproject.toml"):
        find_config(tmp_path)


def test_cached_results_depend_on_the_project_description():
    shipped = library.activate()
    extended = library.activate({"objects": [{"calls": ["ourlab.Updater"], "role": "updater"}]})
    try:
        assert shipped.digest != extended.digest
        assert key(b"x", ".py", frozenset({"TL102"}), {}, shipped.digest) != key(b"x", ".py", frozenset({"TL102"}), {}, extended.digest)
    finally:
        library.activate()


def test_the_project_description_is_what_finds_the_bug(tmp_path):
    (tmp_path / "train.py").write_text(
        "import torch\nfrom ourlab import Updater\n\n\n"
        "def fit(model, loader, epochs):\n"
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    updater = Updater()\n"
        "    for epoch in range(epochs):\n"
        "        for x, y in loader:\n"
        "            loss = torch.nn.functional.mse_loss(model(x), y)\n"
        "            updater.apply(loss, optimizer)\n", encoding="utf-8")
    rules = frozenset({"TL105"})
    # unknown, the Updater may zero the gradients itself: no finding
    assert not check_paths([str(tmp_path)], Settings(rules=rules, cache=False)).findings
    (tmp_path / "pyproject.toml").write_text(
        '[tool.trainlint.library]\nobjects = [{ calls = ["ourlab.Updater"], role = "updater" }]\n'
        '[[tool.trainlint.library.methods]]\nrole = "updater"\nnames = ["apply"]\n'
        'effects = [{ event = "backward", loss = "argument", argument = { position = 0 } },'
        ' { event = "optimizer_step", optimizer = "argument", argument = { position = 1 } }]\n', encoding="utf-8")
    try:
        report = check_paths([str(tmp_path)], Settings(rules=rules, config=find_config(tmp_path), cache=False))
    finally:
        library.activate()
    assert [(f.rule, f.line) for f in report.findings] == [("TL105", 11)]


def test_lightning_training_step_is_a_framework_loop_counted_by_batch_idx():
    built = build(shipped_tables())
    loop = built.loop_methods("lightning.pytorch.core.module.LightningModule", "LightningModule")
    assert loop is not None and loop.methods == ("training_step",)
    assert (loop.counter.position, loop.counter.keyword) == (1, "batch_idx")
    assert built.loop_methods("torch.nn.Module", "Module") is None


def test_a_described_loss_applies_only_to_the_call_that_asks_for_it():
    built = build(shipped_tables())

    def call(text):
        return cst.parse_expression(text)

    assert built.loss_of("transformer_lens.HookedTransformer", call('model(tokens, return_type="loss")')) == "mean"
    assert built.loss_of("transformer_lens.HookedTransformer.from_pretrained", call('model(t, return_type="loss")')) == "mean"
    assert built.loss_of("transformer_lens.HookedTransformer", call('model(t, return_type="logits")')) is None
    assert built.loss_of("transformer_lens.HookedTransformer",
                         call('model(t, return_type="loss", loss_per_token=True)')) == "unknown"
    assert built.loss_of("mylib.HookedTransformer", call('model(t, return_type="loss")')) is None


def test_a_malformed_loss_description_is_refused():
    with pytest.raises(LibraryError, match="a loss needs"):
        build([("mine", {"losses": [{"classes": ["a.B"], "loss": "average"}]})])

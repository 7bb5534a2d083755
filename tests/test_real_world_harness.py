"""The real-world harness (benchmarks/real_world): its data files and its matching logic.

No network and no /work/.mirror: the logic tests build a small git repository in tmp_path
and hand it to run.py through the mirror mechanism.
"""
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HARNESS = ROOT / "benchmarks" / "real_world"
HELD_OUT = {
    "pytorch/vision", "pytorch/tutorials", "pytorch/examples", "facebookresearch/dino",
    "facebookresearch/dinov2", "facebookresearch/moco", "facebookresearch/moco-v3",
    "facebookresearch/detr", "facebookresearch/deit", "facebookresearch/convnext",
    "facebookresearch/mae", "microsoft/unilm", "facebookresearch/detectron2",
    "huggingface/pytorch-image-models", "wongkinyiu/yolov7", "nvidia/deeplearningexamples",
    "lightning-ai/litgpt", "allenai/olmo", "kellerjordan/modded-nanogpt", "huggingface/nanotron",
    "jzhang38/tinyllama", "microsoft/deepspeedexamples", "eleutherai/gpt-neox",
    "rasbt/llms-from-scratch", "karpathy/nn-zero-to-hero", "karpathy/nanochat",
    "labmlai/annotated_deep_learning_paper_implementations",
}
HELD_OUT_OWNERS = {"ultralytics"}


def load_harness():
    spec = importlib.util.spec_from_file_location("real_world_run", HARNESS / "run.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


rw = load_harness()


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Never clone from GitHub in these tests, and look in no default mirror root."""
    monkeypatch.setenv("TRAINLINT_NO_CLONE", "1")
    monkeypatch.setattr(rw, "DEFAULT_MIRROR_ROOT", "/nonexistent-trainlint-mirrors")


# ------------------------------------------------------------------------ data files

def test_corpus_is_large_diverse_pinned_and_not_held_out():
    rows = rw.read_tsv(HARNESS / "corpus.tsv", rw.CORPUS_HEADER)
    corpus = rw.load_corpus(HARNESS / "corpus.tsv")
    assert len(corpus) >= 25
    assert len(rows) >= 2000
    assert len({(r["repo"], r["path"]) for r in rows}) == len(rows), "duplicate paths"
    for repo, (commit, paths) in corpus.items():
        assert re.fullmatch(r"[0-9a-f]{40}", commit), repo
        assert repo.lower() not in HELD_OUT, repo
        assert repo.split("/")[0].lower() not in HELD_OUT_OWNERS, repo
        assert len(paths) <= 0.25 * len(rows), f"{repo} has {len(paths)} of {len(rows)} files"
        assert all(p.endswith(".py") and not p.startswith("/") and ".." not in p.split("/")
                   for p in paths), repo


def test_ledger_parses_with_valid_verdicts():
    path = HARNESS / "ledger.tsv"
    assert path.read_text().splitlines()[0].split("\t") == rw.LEDGER_HEADER
    ledger = rw.load_ledger(path)
    corpus = rw.load_corpus(HARNESS / "corpus.tsv")
    for (repo, file, line, rule), row in ledger.items():
        assert row["verdict"] in ("true", "debatable", "false")
        assert re.fullmatch(r"TL\d{3}", rule)
        assert line >= 1
        assert row["reason"].strip(), f"{repo} {file}:{line} has no reason"
        assert repo in corpus and file in corpus[repo][1], f"{repo} {file} is not in the corpus"


def test_bugs_parse():
    path = HARNESS / "bugs.tsv"
    assert path.read_text().splitlines()[0].split("\t") == rw.BUGS_HEADER
    for row in rw.load_bugs(path):  # load_bugs checks repo names, 40-hex commits, line ranges
        assert re.fullmatch(r"TL\d{3}", row["rule"]), row
        assert row["repo"].lower() not in HELD_OUT


VALIDATION = HARNESS / "validation"


def _development_repos():
    return ({r["repo"].lower() for r in rw.read_tsv(HARNESS / "corpus.tsv", rw.CORPUS_HEADER)}
            | {r["repo"].lower() for r in rw.load_bugs(HARNESS / "bugs.tsv")})


def test_validation_corpus_is_new_pinned_triaged_and_not_held_out():
    """The frozen validation split (README): repositories the development harness never saw."""
    corpus = rw.load_corpus(VALIDATION / "corpus.tsv")
    assert len(corpus) >= 15
    development = _development_repos()
    for repo, (commit, paths) in corpus.items():
        assert repo.lower() not in development, repo
        assert repo.lower() not in HELD_OUT and repo.split("/")[0].lower() not in HELD_OUT_OWNERS, repo
        assert re.fullmatch(r"[0-9a-f]{40}", commit) and paths, repo
    for (repo, file, line, rule), row in rw.load_ledger(VALIDATION / "ledger.tsv").items():
        assert repo in corpus and file in corpus[repo][1], f"{repo} {file} is not in the validation corpus"
        assert row["verdict"] in ("true", "debatable", "false") and row["reason"].strip()


def test_validation_bugs_are_new_and_not_held_out():
    bugs = rw.load_bugs(VALIDATION / "bugs.tsv")  # checks repo names, 40-hex commits, line ranges
    assert len(bugs) >= 25
    development = _development_repos()
    for row in bugs:
        assert re.fullmatch(r"TL\d{3}", row["rule"]), row
        assert row["repo"].lower() not in development and row["repo"].lower() not in HELD_OUT, row["repo"]


def test_bad_rows_are_rejected(tmp_path):
    ledger = tmp_path / "ledger.tsv"
    ledger.write_text("\t".join(rw.LEDGER_HEADER) + "\na/b\tx.py\t3\tTL101\tmaybe\twhy\n")
    with pytest.raises(ValueError, match="verdict"):
        rw.load_ledger(ledger)
    corpus = tmp_path / "corpus.tsv"
    corpus.write_text("repo\tcommit\tpath\na/b\tabc123\tx.py\n")
    with pytest.raises(ValueError, match="40 hex"):
        rw.load_corpus(corpus)
    corpus.write_text("repo\tpath\na/b\tx.py\n")
    with pytest.raises(ValueError, match="first line"):
        rw.load_corpus(corpus)
    assert rw.parse_lines("7") == (7, 7)
    assert rw.parse_lines("7-9") == (7, 9)
    with pytest.raises(ValueError):
        rw.parse_lines("9-7")


def test_chunks_bound_the_command_line():
    paths = [f"dir/file_{i:04d}.py" for i in range(1000)]
    batches = list(rw.chunks(paths, limit=500))
    assert [p for b in batches for p in b] == paths
    assert all(sum(len(p) + 1 for p in b) <= 500 for b in batches)
    assert len(batches) > 1


# ---------------------------------------------------------------------------- logic

BUGGY = """\
import torch


def train(model, loader, epochs):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
"""
CLIP_LINE = 12  # the clip_grad_norm_ call in BUGGY
FIXED = BUGGY.replace(
    "            optimizer.step()\n            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n",
    "            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n            optimizer.step()\n")
HELPER = "def unrelated():\n    return 1\n"


def git(*args, cwd):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main",
                    *args], cwd=cwd, check=True, capture_output=True)


def rev(cwd):
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def mirror(tmp_path):
    """A bare mirror ROOT/acme+trainer/repo with two commits: buggy, then fixed."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    work = tmp_path / "work"
    work.mkdir()
    git("init", "-q", cwd=work)
    (work / "train.py").write_text(BUGGY)
    (work / "pkg").mkdir()
    (work / "pkg" / "helper.py").write_text(HELPER)
    git("add", ".", cwd=work)
    git("commit", "-q", "-m", "buggy", cwd=work)
    buggy = rev(work)
    (work / "train.py").write_text(FIXED)
    git("commit", "-q", "-am", "fixed", cwd=work)
    fixed = rev(work)
    root = tmp_path / "mirrors"
    git("clone", "-q", "--bare", str(work), str(root / "acme+trainer" / "repo"), cwd=tmp_path)
    return root, buggy, fixed


def write(path, header, rows):
    path.write_text("\n".join("\t".join(map(str, r)) for r in [header, *rows]) + "\n")
    return path


def test_materialise_uses_the_mirror_then_the_cache(tmp_path, mirror):
    root, buggy, fixed = mirror
    clones = tmp_path / "clones"
    tree, how = rw.materialise("acme/trainer", buggy, clones, [root])
    assert tree == clones / f"acme+trainer@{buggy[:12]}"
    assert how.startswith("mirror")
    assert (tree / "train.py").read_text() == BUGGY
    assert (tree / "pkg" / "helper.py").exists()
    assert rw.materialise("acme/trainer", buggy, clones, [root]) == (tree, "cached")
    other, _ = rw.materialise("acme/trainer", fixed, clones, [root])
    assert (other / "train.py").read_text() == FIXED
    # In no mirror, and cloning is off in these tests: skipped.
    missing, why = rw.materialise("acme/" + "x" * 30, "0" * 40, clones, [root])
    assert missing is None and why
    assert sorted(p.name for p in clones.iterdir()) == sorted([tree.name, other.name])


def test_blob_fallback_writes_what_the_mirror_has(tmp_path, mirror):
    root, buggy, _ = mirror
    into = tmp_path / "blobs"
    into.mkdir()
    assert rw.extract_blobs(root / "acme+trainer" / "repo", buggy, into)
    assert (into / "train.py").read_text() == BUGGY
    assert (into / "pkg" / "helper.py").read_text() == HELPER


def test_precision_matches_findings_to_the_ledger(tmp_path, mirror, capsys):
    root, buggy, fixed = mirror
    corpus = write(tmp_path / "corpus.tsv", rw.CORPUS_HEADER,
                   [("acme/trainer", buggy, "train.py"), ("acme/trainer", buggy, "pkg/helper.py")])
    ledger = write(tmp_path / "ledger.tsv", rw.LEDGER_HEADER, [
        ("acme/trainer", "train.py", CLIP_LINE, "TL101", "true", "clip after step"),
        ("acme/trainer", "train.py", 3, "TL105", "false", "stale row: nothing reported here"),
    ])
    bugs = write(tmp_path / "bugs.tsv", rw.BUGS_HEADER, [])
    out = tmp_path / "out.json"
    argv = ["--clones", str(tmp_path / "clones"), "--corpus", str(corpus), "--ledger", str(ledger),
            "--bugs", str(bugs), "--no-recall", "--json", str(out), "--strict", "--verbose"]
    assert rw.main(argv, roots=[root]) == 0  # every finding is triaged
    printed = capsys.readouterr().out
    report = json.loads(out.read_text())
    tl101 = [f for f in report["findings"] if f["rule"] == "TL101"]
    assert [(f["repo"], f["path"], f["line"], f["verdict"]) for f in tl101] == [
        ("acme/trainer", "train.py", CLIP_LINE, "true")]
    assert report["precision"]["TL101"]["true"] == 1
    assert report["precision"]["TL101"]["precision"] == 1.0
    assert report["totals"]["error"]["findings"] >= 1
    assert [r["rule"] for r in report["no_longer_reported"]] == ["TL105"]
    assert "no longer reported: TL105 1" in printed
    assert "untriaged findings: 0" in printed

    # Without the ledger the same finding is untriaged: --strict fails and it is listed.
    write(ledger, rw.LEDGER_HEADER, [])
    assert rw.main(argv, roots=[root]) == 1
    printed = capsys.readouterr().out
    assert f"acme/trainer train.py:{CLIP_LINE} TL101 " in printed
    assert json.loads(out.read_text())["precision"]["TL101"]["untriaged"] == 1


def test_false_verdicts_lower_precision():
    findings = [dict(repo="a/b", path="t.py", line=n, rule="TL101", name="clip-after-step",
                     severity="error", message="m") for n in (1, 2, 3, 4)]
    ledger = {("a/b", "t.py", 1, "TL101"): {"verdict": "true"},
              ("a/b", "t.py", 2, "TL101"): {"verdict": "false"},
              ("a/b", "t.py", 3, "TL101"): {"verdict": "debatable"}}
    figures = rw.tally(findings, ledger)["TL101"].figures()
    assert (figures["true"], figures["false"], figures["debatable"], figures["untriaged"]) == (1, 1, 1, 1)
    assert figures["precision"] == 0.5


def test_recall_counts_hits_inside_the_line_range(tmp_path, mirror, capsys):
    root, buggy, fixed = mirror
    bugs = write(tmp_path / "bugs.tsv", rw.BUGS_HEADER, [
        ("acme/trainer", buggy, "train.py", f"{CLIP_LINE - 1}-{CLIP_LINE}", "TL101", fixed, "clip after step"),
        ("acme/trainer", buggy, "train.py", "1-3", "TL101", fixed, "wrong lines: a miss"),
        ("acme/trainer", fixed, "train.py", str(CLIP_LINE), "TL101", fixed, "fixed code: a miss"),
        ("acme/trainer", buggy, "train.py", str(CLIP_LINE), "TL102", fixed, "wrong rule: a miss"),
        ("acme/nowhere", "1" * 40, "train.py", "1", "TL101", "2" * 40, "unobtainable: skipped"),
    ])
    results = rw.check_bugs(rw.load_bugs(bugs), tmp_path / "clones", roots=[root])
    assert [r["status"] for r in results] == ["hit", "miss", "miss", "miss", "skipped"]
    figures = rw.report_recall(results)
    assert figures["TL101"] == {"bugs": 4, "hits": 1, "misses": 2, "skipped": 1, "recall": 0.3333}
    assert figures["all"]["hits"] == 1 and figures["all"]["misses"] == 3
    printed = capsys.readouterr().out
    assert "misses:" in printed and "wrong rule: a miss" in printed
    # --rules keeps only the selected rules' bugs.
    only = rw.check_bugs(rw.load_bugs(bugs), tmp_path / "clones", rules="TL102", roots=[root])
    assert [r["rule"] for r in only] == ["TL102"]


def test_missing_bugs_file_is_created_with_its_header_only(tmp_path):
    path = tmp_path / "bugs.tsv"
    rw.ensure_file(path, rw.BUGS_HEADER)
    assert path.read_text() == "\t".join(rw.BUGS_HEADER) + "\n"
    path.write_text(path.read_text() + "a/b\t" + "1" * 40 + "\tx.py\t3\tTL101\t" + "2" * 40 + "\td\n")
    rw.ensure_file(path, rw.BUGS_HEADER)  # never overwrites
    assert len(rw.load_bugs(path)) == 1

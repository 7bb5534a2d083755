"""Rebuild corpus.tsv from local bare mirrors (a maintainer's tool, stdlib only).

    python benchmarks/real_world/select_corpus.py /work/.mirror > corpus.tsv

For every repository in REPOS it reads the mirror's HEAD, keeps the .py files
whose text looks like training code (see SIGNALS), skips tests, docs and
setup files, ranks them by how many signals they show and keeps at most
MAX_PER_REPO of them.  Only repository names, commits and paths are written.
"""

import re
import subprocess
import sys

REPOS = """
huggingface/diffusers huggingface/accelerate huggingface/peft
pyg-team/pytorch_geometric dmlc/dgl karpathy/nanoGPT karpathy/minGPT
karpathy/llama2.c eriklindernoren/PyTorch-GAN facebookresearch/fairseq
facebookresearch/DiT openai/improved-diffusion openai/guided-diffusion
mlfoundations/open_clip microsoft/Swin-Transformer Megvii-BaseDetection/YOLOX
kuangliu/pytorch-cifar tloen/alpaca-lora tatsu-lab/stanford_alpaca
haotian-liu/LLaVA salesforce/BLIP facebookresearch/barlowtwins
facebookresearch/swav facebookresearch/vicreg pytorch/opacus pytorch/ignite
pytorch/torchtune pytorch/torchtitan NVlabs/stylegan2-ada-pytorch
Lightning-AI/lit-llama kohya-ss/sd-scripts princeton-nlp/SimCSE microsoft/LoRA
hpcaitech/ColossalAI lucidrains/denoising-diffusion-pytorch
lucidrains/DALLE-pytorch catalyst-team/catalyst Spijkervet/SimCLR
kan-bayashi/ParallelWaveGAN milesial/Pytorch-UNet kekmodel/FixMatch-pytorch
victorchall/EveryDream2trainer tatsu-lab/alpaca_farm k2-fsa/icefall
speechbrain/speechbrain lm-sys/FastChat huggingface/trl meta-llama/llama-recipes
OpenNMT/OpenNMT-py lucidrains/imagen-pytorch pytorch/rl yang-song/score_sde_pytorch
NVlabs/edm jik876/hifi-gan openai/consistency_models
clovaai/deep-text-recognition-benchmark facebookresearch/mmf lucidrains/x-transformers
""".split()

SIGNALS = [r"\.backward\(", r"optimizer", r"DataLoader", r"torch\.save\(",
           r"autocast", r"lr_scheduler", r"DistributedSampler", r"zero_grad\(",
           r"GradScaler", r"clip_grad", r"\.train\(\)", r"\.eval\(\)",
           r"no_grad", r"set_epoch", r"gradient_accumulation"]
STRONG = re.compile(r"\.backward\(|optimizer|zero_grad\(|lr_scheduler|DataLoader|"
                    r"DistributedSampler|GradScaler|clip_grad|autocast|torch\.save\(|"
                    r"Trainer\(|train_one_epoch")
SKIP = re.compile(r"(^|/)(tests?|testing|docs?|benchmarks?|\.github)/|(^|/)test_[^/]*$|"
                  r"_test\.py$|(^|/)(setup|conftest|__init__)\.py$")
MAX_PER_REPO = 300


def git(mirror, *args):
    return subprocess.run(["git", "--git-dir", mirror, *args], check=True,
                          capture_output=True).stdout


def select(mirror):
    commit = git(mirror, "rev-parse", "HEAD").decode().strip()
    paths = [p for p in git(mirror, "ls-tree", "-r", "--name-only", commit).decode().splitlines()
             if p.endswith(".py") and not SKIP.search(p)]
    scored = []
    for path in paths:
        text = git(mirror, "show", f"{commit}:{path}").decode("utf-8", "replace")
        if "torch" not in text or not STRONG.search(text):
            continue
        score = sum(1 for s in SIGNALS if re.search(s, text))
        scored.append((-score, path))
    scored.sort()
    return commit, sorted(p for _, p in scored[:MAX_PER_REPO])


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "/work/.mirror"
    print("repo\tcommit\tpath")
    for repo in REPOS:
        mirror = f"{root}/{repo.replace('/', '+')}/repo"
        try:
            commit, paths = select(mirror)
        except (subprocess.CalledProcessError, FileNotFoundError) as exc:
            print(f"skip {repo}: {exc}", file=sys.stderr)
            continue
        print(f"{repo}: {len(paths)}", file=sys.stderr)
        for path in paths:
            print(f"{repo}\t{commit}\t{path}")


if __name__ == "__main__":
    main()

"""``python -m trainlint.runtime SCRIPT [ARGS]...``: the ``trainlint run`` command on its own."""
from .command import run

run(prog_name="trainlint run")

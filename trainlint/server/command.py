"""The ``trainlint server`` command. pygls is an optional extra (``trainlint[server]``): it is
imported only here, once the command runs, so static checking needs libcst and click alone."""
from __future__ import annotations

import importlib
import os
import sys

import click

INSTALL_HINT = "trainlint server needs pygls: install trainlint[server] (pip install 'trainlint[server]')"


@click.command()
@click.option("--config", "config_file", type=click.Path(dir_okay=False),
              help="Use this pyproject.toml/trainlint.toml for every file (default: found upward from each file, as `trainlint check` does).")
@click.option("--select", multiple=True, metavar="RULES", help="As `trainlint check --select`.")
@click.option("--extend-select", multiple=True, metavar="RULES", help="As `trainlint check --extend-select`.")
@click.option("--ignore", multiple=True, metavar="RULES", help="As `trainlint check --ignore`.")
@click.option("--no-cache", is_flag=True, help="Do not read or write .trainlint_cache/.")
def server(config_file, select, extend_select, ignore, no_cache) -> None:
    """Run a Language Server Protocol server on stdin/stdout for editors (VS Code, Neovim, Helix...).

    Diagnostics on open, change and save, quick fixes (the proven autofixes and `# noqa`), and
    hovers with the rule's documentation and the finding's witness. Editor settings (the
    `trainlint` section: select, extendSelect, ignore, config) take the same values as the options.
    """
    try:
        importlib.import_module("pygls")  # only to say clearly what is missing
    except ImportError:
        click.echo(f"error: {INSTALL_HINT}", err=True)
        sys.exit(2)
    from .analysis import Options
    from .protocol import serve

    options = Options(config=config_file, select=tuple(select), extend_select=tuple(extend_select),
                      ignore=tuple(ignore), cache=not no_cache)
    code = serve(options)
    # The analysis thread may still be in a file (up to its 20 s budget): the editor asked us to
    # go, so go now, once what was written is flushed, rather than wait for it.
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)

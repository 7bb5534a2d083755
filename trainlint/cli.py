"""Command line: ``trainlint [OPTIONS] PATH...`` checks files; ``rules``, ``explain`` document them."""
from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple

import click

from . import __version__
from .catalog import Rule, get_rule, load_catalog, unknown_selectors
from .config import ConfigError, configs_for, load_config, resolve_selection, split_selectors
from .reporters import FORMATS, HUMAN, choose_format, render
from .reporters.text import color_enabled, render_errors, summary

if TYPE_CHECKING:  # the engine loads when files are checked: --version, rules, explain stay light
    from .engine import Report, Settings

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
_checked = False  # a `check` ran to its exit status: see ``entry``


class DefaultToCheck(click.Group):
    """``trainlint PATH...`` means ``trainlint check PATH...``: a first argument that names no
    subcommand goes to ``check`` (subcommands added later, such as ``run``, are routed by name)."""

    # Commands loaded on first use, so `trainlint PATH` (pre-commit) never imports the guard or
    # the language server.
    lazy = {"run": ("trainlint.runtime.command", "run"), "server": ("trainlint.server.command", "server")}

    def parse_args(self, ctx: click.Context, args: List[str]) -> List[str]:
        names = set(self.commands) | set(self.lazy)
        if args and args[0] not in names and args[0] not in ("--help", "-h", "--version"):
            args = ["check", *args]
        return super().parse_args(ctx, args)

    def list_commands(self, ctx: click.Context) -> List[str]:
        return sorted(set(self.commands) | set(self.lazy))

    def get_command(self, ctx: click.Context, name: str) -> Optional[click.Command]:
        if name in self.lazy and name not in self.commands:
            import importlib

            module, attribute = self.lazy[name]
            self.add_command(getattr(importlib.import_module(module), attribute), name)
        return super().get_command(ctx, name)


@click.group(cls=DefaultToCheck, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="trainlint")
def main() -> None:
    """trainlint: finds silent PyTorch training bugs (clip after step, scheduler before step,
    accumulation without division, DistributedSampler without set_epoch, ...).

    Run `trainlint PATH...` to check files, `trainlint rules` for the catalog, and
    `trainlint explain TL101` for a rule's documentation.
    """


def _plan(
    paths: Sequence[str], config_file: Optional[str], select: Sequence[str], ignore: Sequence[str],
    extend_select: Sequence[str] = (), **options
) -> List[Tuple[List[str], Settings]]:
    """The paths to check under each configuration: ``--config`` for all of them, or the config
    found upward from each path."""
    from .engine import Settings

    cli_select, cli_ignore, cli_extend = split_selectors(select), split_selectors(ignore), split_selectors(extend_select)
    unknown = unknown_selectors(cli_select + cli_ignore + cli_extend)
    if unknown:
        raise click.BadParameter(f"unknown rule(s): {', '.join(unknown)} (see `trainlint rules`)", param_hint="--select/--ignore")
    try:
        groups = [(load_config(Path(config_file)), list(paths))] if config_file else configs_for(paths)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    plan = []
    for config, group in groups:
        selection = resolve_selection(config, cli_select or None, cli_ignore, cli_extend)
        plan.append((group, Settings(rules=selection.rules, advice=selection.advice, config=config, **options)))
    return plan


@main.command()
# readable=False: a path that cannot be read is that path's error (exit 2), not a usage error
# that would stop the other paths from being checked.
@click.argument("paths", nargs=-1, required=True, type=click.Path(readable=False))
@click.option("--select", multiple=True, metavar="RULES", help="Rules to run instead of the default set: ids, names, "
              "prefixes (TL1), ADVICE or ALL, comma-separated.")
@click.option("--extend-select", multiple=True, metavar="RULES", help="Rules to run on top of the default set (or "
              "the config's); `--extend-select ADVICE` adds every advice-tier rule and finding.")
@click.option("--ignore", multiple=True, metavar="RULES", help="Rules not to run.")
@click.option("--output-format", type=click.Choice(list(FORMATS)), help="full: each finding with its source lines "
              "(the default on a terminal); concise (also named text): one line each (the default otherwise); json, "
              "sarif, github.")
@click.option("--format", "format_option", type=click.Choice(list(FORMATS)), help="The same as --output-format.")
@click.option("--statistics", is_flag=True, help="Count the findings of each rule (and how many --fix would fix) "
              "instead of listing them.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings.")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="Use this pyproject.toml/trainlint.toml.")
@click.option("--output-file", "-o", type=click.Path(dir_okay=False, writable=True), help="Write the report here instead of stdout.")
@click.option("--quiet", "-q", is_flag=True, help="No summary line.")
@click.option("--no-cache", is_flag=True, help="Do not read or write .trainlint_cache/.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, help="Parallel processes (default: number of cores).")
@click.option("--no-respect-gitignore", is_flag=True, help="Also check files that .gitignore excludes.")
@click.option("--fix", is_flag=True, help="Apply the autofixes (TL101 TL102 TL103 TL201 TL301 TL803 TL804) in place.")
@click.option("--diff", "show_diff", is_flag=True, help="Print the autofixes as a unified diff; write nothing.")
@click.option("--trace", is_flag=True, help="Show each finding's witness: the calls across functions and files, the "
              "conditions assumed, the statements involved.")
@click.option("--add-noqa", is_flag=True, help="Add `# noqa: TLnnn` comments that suppress every current finding; "
              "write them in place.")
@click.option("--baseline", "baseline_file", type=click.Path(dir_okay=False), help="Leave out the findings recorded "
              "in this baseline (written by --write-baseline).")
@click.option("--write-baseline", type=click.Path(dir_okay=False), help="Record the current findings in this file.")
def check(paths, select, extend_select, ignore, output_format, format_option, statistics, exit_zero, config_file,
          output_file, quiet, no_cache, jobs, no_respect_gitignore, fix, show_diff, trace, add_noqa, baseline_file,
          write_baseline) -> None:
    """Check PATHS (files, directories, notebooks) for training bugs.

    Directories are searched for *.py and *.ipynb files, skipping VCS, virtualenv and build
    directories and what .gitignore excludes. A file named on the command line is checked even
    there, unless the configuration's `exclude` matches it.

    Exit status: 0 clean, 1 findings, 2 usage error or a file that could not be analyzed.
    """
    global _checked
    _checked = True
    output_format = choose_format(output_format, format_option, terminal=not output_file and sys.stdout.isatty())
    if statistics and output_format not in HUMAN | {"json"}:
        raise click.UsageError(f"--statistics prints a table (or, with --output-format json, JSON), not {output_format}")
    from .engine import Report, check_paths, combine, default_jobs, display_path, fix_paths
    from .files import path_error
    from .findings import FileError

    # Paths that cannot even be looked at (missing, a symbolic link loop, refused by the file
    # system) are errors of their own; looking for their configuration would fail, so they are
    # set aside first and the other paths are checked.
    problems = {name: path_error(name) for name in paths}
    errors = [FileError(display_path(Path(name)), problem) for name, problem in problems.items() if problem]
    plan = _plan(
        [name for name, problem in problems.items() if problem is None], config_file, select, ignore, extend_select,
        cache=not no_cache, jobs=jobs or default_jobs(), respect_gitignore=not no_respect_gitignore,
    )
    if fix or show_diff:
        unanalyzed: List[FileError] = []
        changes = [change for group, settings in plan for change in fix_paths(group, settings, fix, unanalyzed)]
        if show_diff:
            click.echo("".join(change.diff for change in changes), nl=False)
            click.echo(render_errors(Report(errors=sorted(errors + unanalyzed))), err=True, nl=False)
            click.echo(f"{len(changes)} file{'s' if len(changes) != 1 else ''} would be fixed.", err=True)
            sys.exit(EXIT_ERROR if errors or unanalyzed else EXIT_FINDINGS if changes else EXIT_CLEAN)
        for change in changes:
            if change.error is None:
                click.echo(f"Fixed {', '.join(change.rules)} in {change.path}", err=True)
        errors += [FileError(change.path, change.error) for change in changes if change.error is not None]
    report = combine([Report(errors=errors), *(check_paths(group, settings) for group, settings in plan)])
    known = 0  # findings left out as the baseline records them
    if baseline_file or write_baseline or add_noqa:
        from .adoption import adopt

        known = adopt(report, baseline_file, write_baseline, add_noqa)  # exits after writing
    color = output_format in HUMAN and not output_file and color_enabled(sys.stdout)
    legend = ""
    if statistics:
        from . import statistics as stats

        table = stats.rows(report, plan)
        rendered = stats.render_json(table) if output_format == "json" else stats.render_table(table, color)
        legend = stats.legend(table)
    else:
        rendered = render(output_format, report, color, trace)
    if output_file:
        Path(output_file).write_text(rendered, encoding="utf-8")
    else:
        click.echo(rendered, nl=False, color=color)  # click strips the colour codes otherwise
    if output_format in HUMAN:
        click.echo(render_errors(report), err=True, nl=False)
        if not quiet:
            if not report.files and not report.errors:
                click.echo("warning: no Python files found under the given paths" + _git_ignored_hint(report), err=True)
            click.echo(summary(report) + (f"\n{legend}" if legend else ""), err=True)
            if known:
                click.echo(f"{known} finding{'s' if known != 1 else ''} left out: recorded in {baseline_file}.", err=True)
    if report.errors:
        sys.exit(EXIT_ERROR)
    sys.exit(EXIT_FINDINGS if report.findings and not exit_zero else EXIT_CLEAN)


def _git_ignored_hint(report: Report) -> str:
    """Why a directory full of Python files checked none: git ignores them all (an installed
    package inside a tool's git-managed tree, a build output)."""
    if not report.git_ignored:
        return ""
    files = f"{report.git_ignored} file{'s' if report.git_ignored != 1 else ''}"
    return f" ({files} left out because git ignores them; --no-respect-gitignore checks them)"


def entry() -> None:
    """The ``trainlint`` console script and ``python -m trainlint``: ``main``, then, once a check
    has given its exit status and its output is flushed, a hard exit. A check leaves nothing to
    clean up (its worker processes are joined, its cache entries written and renamed into place),
    and tearing the interpreter down object by object (libcst's classes, the parsed trees) cost
    about 30 ms of a 220 ms pre-commit run on one small file. mypy ends its runs the same way.
    Other commands exit normally: ``trainlint run`` executes the user's script, whose exit
    handlers (loggers, writers) must run."""
    try:
        main()
        code = EXIT_CLEAN
    except SystemExit as done:
        code = done.code
    if not _checked or not (code is None or isinstance(code, int)):
        sys.exit(code)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe (`trainlint . | head`): Python's own exit reports it
        sys.exit(code)
    os._exit(code or EXIT_CLEAN)


@main.command()
@click.option("--format", "output_format", type=click.Choice(["text", "json", "markdown"]), default="text", show_default=True)
def rules(output_format: str) -> None:
    """List the rule catalog (`--format markdown` writes rules/README.md)."""
    catalog = list(load_catalog().values())
    if output_format == "markdown":
        click.echo(render_index(catalog), nl=False)
        return
    if output_format == "json":
        click.echo(json.dumps([_rule_json(r) for r in catalog], indent=2))
        return
    header = f"{'id':<6} {'name':<32} {'tier':<16} {'autofix':<7} {'runtime':<7} summary"
    click.echo(header)
    for r in catalog:
        click.echo(
            f"{r.id:<6} {r.name:<32} {_tier_text(r):<16} {'yes' if r.autofix else 'no':<7} "
            f"{'yes' if r.runtime_confirmed else 'no':<7} {r.summary}" + ("" if r.static else " (runtime only)")
        )
    click.echo("\n" + TIER_POLICY)


# The policy, as `trainlint rules` and the README state it.
TIER_POLICY = (
    "Tiers: error = training silently computes something other than intended; warning = a change a "
    "reviewer would ask for (a leak that grows without bound, a resume that loses state the program "
    "relies on); advice = recipes and costs, off unless selected (`--extend-select ADVICE`). A rule "
    "marked +advice also has findings of the advice tier (see `trainlint explain`)."
)


def _tier_text(rule: Rule) -> str:
    return rule.tier + ("+advice" if rule.advice and not rule.opt_in else "")


def render_index(catalog: Sequence[Rule]) -> str:
    """rules/README.md: the catalog's index, generated (a test fails when the file is stale)."""
    lines = [
        "# Rule catalog",
        "",
        "Generated by `trainlint rules --format markdown > rules/README.md` from the entries in this",
        "directory; `trainlint explain ID` shows an entry in full.",
        "",
        TIER_POLICY,
        "",
        "| id | name | tier | autofix | runtime | summary |",
        "|----|------|----------|---------|---------|---------|",
    ]
    for r in catalog:
        lines.append(
            f"| [{r.id}]({r.id}-{r.name}.toml) | {r.name} | {_tier_text(r)} | "
            f"{'yes' if r.autofix else 'no'} | {'confirmed' if r.runtime_confirmed else 'no'}{'' if r.static else ' (runtime only)'} | {r.summary} |"
        )
    return "\n".join(lines) + "\n"


def _rule_json(rule: Rule) -> dict:
    return {
        "id": rule.id, "name": rule.name, "severity": rule.severity, "tier": rule.tier, "summary": rule.summary,
        "autofix": rule.autofix, "runtime_confirmed": rule.runtime_confirmed, "opt_in": rule.opt_in,
        "static": rule.static,
    }


@main.command()
@click.argument("rule")
def explain(rule: str) -> None:
    """Show the documentation of RULE (an id such as TL101, or a name such as clip-after-step)."""
    found = get_rule(rule)
    if found is None:
        near = suggest(rule)
        hint = f" Did you mean {', '.join(near)}?" if near else " See `trainlint rules`."
        raise click.UsageError(f"unknown rule {rule!r}.{hint}")
    click.echo(render_explanation(found))


def suggest(key: str) -> List[str]:
    """Rules a mistyped id or name probably meant: ids it prefixes, names containing it, and close
    spellings of either (``TL1O1``, ``clip-after-stpe``)."""
    key = key.strip().lower()
    catalog = list(load_catalog().values())
    import difflib  # only for a mistyped rule

    close = set(difflib.get_close_matches(key, [r.id.lower() for r in catalog] + [r.name for r in catalog], n=3, cutoff=0.7))
    return [r.id for r in catalog if key and (r.id.lower().startswith(key) or key in r.name or {r.id.lower(), r.name} & close)]


def render_explanation(rule: Rule) -> str:
    def section(title: str, body: str) -> str:
        return f"## {title}\n{body.strip()}\n"

    def code(body: str) -> str:
        return "```python\n" + textwrap.dedent(body).strip() + "\n```"

    parts = [
        f"# {rule.id} {rule.name} ({rule.tier}{', opt-in' if rule.opt_in else ''}"
        f"{'' if rule.static else ', runtime only'})\n",
        section("What it does", rule.summary),
        section("Why this breaks training", rule.rationale),
        section("Example", code(rule.bad)),
        section("Use instead", code(rule.good)),
        section("Fix", rule.fix),
        *([section("Advice tier", "These findings are advice, shown only with `--extend-select ADVICE`: " + rule.advice)]
          if rule.advice and not rule.opt_in else []),
        section("Runtime", rule.runtime if rule.runtime_confirmed or rule.runtime.startswith("Static only")
                else "Not confirmed at runtime yet; the runtime guard is planned to do it as follows. " + rule.runtime),
    ]
    return "\n".join(parts)

"""The `llmfix` command line: ask, probe, kb, site.

Exit codes (DESIGN.md): 0 nothing wrong found, 1 an error finding or a confirmed cause,
2 bad usage or unreadable input, always as one line ``Error: <file>: <problem>``.
Heavy parts (torch probes, the site builder) are imported inside their commands only.
"""
from __future__ import annotations

import errno
import json
import os
import sys
import time
from typing import Any

import click

from . import __version__
from .diagnosis import Diagnosis, Question
from .errors import LlmfixError
from .observations import Fact, Observations


def clip(text: str, limit: int = 60) -> str:
    """A user value as it goes into a one-line message: bounded, escapes shown, not obeyed."""
    text = text if len(text) <= limit else text[:limit - 3] + "..."
    return text.encode("unicode_escape").decode("ascii") if not text.isprintable() else text


class Failure(click.ClickException):
    """Exit 2 with one line; click prints it as 'Error: ...'."""

    exit_code = 2


def _kb():
    from .knowledge import load

    try:
        return load()
    except LlmfixError as err:
        raise Failure(str(err)) from None


def stdin_is_tty() -> bool:
    return sys.stdin is not None and not sys.stdin.closed and sys.stdin.isatty()


def _finish(diag: Diagnosis, as_json: bool, top: int) -> None:
    if as_json:
        click.echo(json.dumps(diag.to_json(), ensure_ascii=False, indent=1))
    else:
        from .report.terminal import render

        click.echo(render(diag, top=top), nl=False)
    sys.exit(1 if diag.problem_found else 0)


class _Group(click.Group):
    """The command group, plus one-line errors for what no command can prevent: stdout on a full
    disk or a closed pipe (`llmfix ask ... | head`)."""

    def main(self, *args: Any, standalone_mode: bool = True, **extra: Any) -> Any:
        """Click's own usage errors as one line too (its standalone mode prints a usage banner)."""
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **extra)
        try:
            code = super().main(*args, standalone_mode=False, **extra)
        except click.ClickException as err:
            hint = " (see --help)" if isinstance(err, click.UsageError) else ""
            click.echo(f"Error: {clip(err.format_message(), 400)}{hint}", err=True)
            sys.exit(err.exit_code)
        except click.exceptions.Abort:
            click.echo("Aborted.", err=True)
            sys.exit(130)
        sys.exit(code if isinstance(code, int) else 0)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            sys.stderr.close()  # the reader left; say nothing more
            sys.exit(2)
        except OSError as err:
            if err.errno not in (errno.ENOSPC, errno.EIO, errno.EPIPE):
                raise
            raise Failure(f"<stdout>: cannot write the report ({err.strerror})") from None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="llmfix")
@click.pass_context
def main(ctx: click.Context) -> None:
    """Diagnose LLM training problems from a description or from real artifacts."""
    if os.environ.get("NO_COLOR"):  # https://no-color.org
        ctx.color = False


# --------------------------------------------------------------------------- ask
def _parse_answers(kb, answers: tuple[str, ...]) -> dict[str, Fact]:
    out = {}
    for item in answers:
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep:
            raise Failure(f"--answer {clip(item)}: expected FACT=VALUE, e.g. data.mask.binary=no")
        spec = kb.facts.get(name)
        if spec is None:
            raise Failure(f"--answer {clip(item)}: unknown fact '{clip(name)}' (list them: llmfix kb list; "
                          f"one: llmfix kb show FACT)")
        try:
            out[name] = Fact(name, spec.parse(raw), "user")
        except ValueError as err:
            raise Failure(f"--answer {clip(item)}: {err}") from None
    return out


def _prompt_answer(kb, question: Question) -> Any:
    """Ask one question on the terminal (stderr, so --json stdout stays clean)."""
    spec = kb.facts[question.fact]
    click.echo(click.style(f"\n? {question.text}", bold=True), err=True)
    if question.how:
        click.echo(f"  how: {question.how.strip()}", err=True)
    if question.probe:
        click.echo(f"  or let llmfix measure it: {question.probe}", err=True)
    if spec.choices:
        click.echo("  " + "  ".join(f"{i}) {c}" for i, c in enumerate(spec.choices, 1)), err=True)
    hint = {"bool": "[y]es / [n]o / [?] don't know", "number": "a number, or ? if unknown",
            "choice": "a number or name, or ?", "text": "text, or ?"}[spec.type]
    while True:
        click.echo(f"  ({hint}) > ", nl=False, err=True)
        raw = sys.stdin.readline()
        if not raw:
            raise EOFError
        raw = raw.strip()
        if raw in ("?", "", "dk", "don't know", "dont know", "不知道", "unknown"):
            return None
        try:
            return spec.parse(raw)
        except ValueError as err:
            click.echo(f"  {err}", err=True)


def _choose_symptom(candidates) -> list:
    click.echo(click.style("Which of these is closest?", bold=True), err=True)
    for i, m in enumerate(candidates, 1):
        click.echo(f"  {i}) {m.id}  {m.title}", err=True)
    click.echo("  (number, Enter for all) > ", nl=False, err=True)
    raw = sys.stdin.readline().strip()
    if raw.isdigit() and 1 <= int(raw) <= len(candidates):
        return [candidates[int(raw) - 1]]
    return candidates


def _run_probes(paths: tuple[str, ...], **switches: Any) -> Observations:
    from .loaders import detect
    from .probes import ProbeContext, run_all

    try:
        artifacts = [detect(p) for p in paths]
        return run_all(ProbeContext(artifacts, **switches))
    except LlmfixError as err:
        raise Failure(str(err)) from None


@main.command()
@click.argument("text", nargs=-1, required=True)
@click.option("--answer", "-a", "answers", multiple=True, metavar="FACT=VALUE", help="Pre-answer a check (repeatable).")
@click.option("--probe", "probe_paths", multiple=True, type=click.Path(), metavar="PATH",
              help="Let probes answer questions from a checkpoint, log or batch (repeatable).")
@click.option("--no-input", is_flag=True, help="Never prompt; rank with what is known and list open questions.")
@click.option("--json", "as_json", is_flag=True, help="Print one llmfix/diagnosis-v1 JSON object.")
@click.option("--top", default=5, show_default=True, type=click.IntRange(1), help="Causes to show.")
def ask(text: tuple[str, ...], answers: tuple[str, ...], probe_paths: tuple[str, ...], no_input: bool,
        as_json: bool, top: int) -> None:
    """Diagnose from a description, e.g.  llmfix ask "loss went nan"."""
    from .engine import diagnose
    from .matcher import SymptomMatcher, pick

    kb = _kb()
    query = " ".join(text).strip()
    facts = _parse_answers(kb, answers)
    observations = _run_probes(probe_paths) if probe_paths else Observations()
    interactive = not no_input and stdin_is_tty()
    matches, ambiguous = pick(SymptomMatcher(kb).match(query))
    if not matches and not observations.facts:
        if as_json:
            _finish(Diagnosis(query=query), as_json, top)
        click.echo(f"No symptom matched {query!r}. Known symptoms:", err=True)
        for s in kb.symptoms.values():
            click.echo(f"  {s.id:<18} {s.title}", err=True)
        click.echo('Try different words, e.g. llmfix ask "loss went nan".', err=True)
        sys.exit(0)
    if ambiguous and interactive:
        matches = _choose_symptom(matches)
    weights = {m.id: m.score / matches[0].score for m in matches}  # empty: the probes decide
    asker = (lambda q: _prompt_answer(kb, q)) if interactive else None
    diag = diagnose(kb, weights, observations, facts, asker, query=query)
    for s in diag.symptoms:
        s.score = next((m.score for m in matches if m.id == s.id), s.score)
    _finish(diag, as_json, top)


# --------------------------------------------------------------------------- probe
def _progress_line():
    """A one-line progress report on stderr for streams over large checkpoints."""
    last = [0.0]

    def report(done: int, total: int, name: str) -> None:
        now = time.monotonic()
        if now - last[0] < 0.2 and done < total:
            return
        last[0], gib = now, 1024 ** 3
        click.echo(f"\r\033[Kreading weights {done / gib:.1f}/{total / gib:.1f} GiB  {name[-50:]}", nl=False, err=True)
    return report


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print one llmfix/diagnosis-v1 JSON object.")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@click.option("--model-factory", metavar="MODULE:CALLABLE", help="Build the model with your code (module or file.py).")
@click.option("--static", is_flag=True, help="Never run the model (no forward/backward probes).")
@click.option("--forward", is_flag=True, help="Run model probes even above the documented size caps.")
@click.option("--plot", type=click.Path(dir_okay=False), help="Draw the training curves with events to this PNG.")
@click.option("--answer", "-a", "answers", multiple=True, metavar="FACT=VALUE", help="Add what you know (repeatable).")
@click.option("--top", default=5, show_default=True, type=click.IntRange(1))
def probe(paths: tuple[str, ...], as_json: bool, device: str, model_factory: str | None, static: bool,
          forward: bool, plot: str | None, answers: tuple[str, ...], top: int) -> None:
    """Probe checkpoints, training logs and data batches; rank causes from what they show."""
    from .engine import diagnose

    if not paths and not model_factory:
        raise click.UsageError("give at least one PATH (checkpoint, log, batch) or --model-factory")
    kb = _kb()
    facts = _parse_answers(kb, answers)
    progress = _progress_line() if sys.stderr.isatty() else None
    observations = _run_probes(paths, device=device, static=static, forward=forward,
                               model_factory=model_factory, progress=progress)
    if progress:
        click.echo("\r\033[K", nl=False, err=True)
    if plot:
        from .report.plot import write_plots

        observations.findings += write_plots(observations.attachments, plot)
    _finish(diagnose(kb, {}, observations, facts), as_json, top)


# --------------------------------------------------------------------------- kb
@main.group()
def kb() -> None:
    """Browse and check the knowledge base."""


@kb.command("list")
def kb_list() -> None:
    """Symptoms, their causes and fixes, with ids."""
    from .report.kbview import listing

    click.echo(listing(_kb()), nl=False)


@kb.command("show")
@click.argument("item_id")
def kb_show(item_id: str) -> None:
    """Show a symptom, cause, fix or fact by id."""
    from .report.kbview import show

    base = _kb()
    item = base.lookup(item_id)
    if item is None:
        raise Failure(f"unknown id '{item_id}' (list them: llmfix kb list)")
    click.echo(show(base, item), nl=False)


@kb.command("lint")
def kb_lint() -> None:
    """Check rules/ and kb/: schema, references, reachability, articles, contract ids."""
    from .knowledge.lint import lint

    try:
        problems = lint()
    except LlmfixError as err:
        raise Failure(str(err)) from None
    for p in problems:
        click.echo(str(p))
    click.echo(f"{len(problems)} problem(s)" if problems else "kb lint: clean", err=bool(problems))
    sys.exit(1 if problems else 0)


# --------------------------------------------------------------------------- site
@main.group()
def site() -> None:
    """The knowledge base as a static website."""


@site.command("build")
@click.argument("out", type=click.Path(file_okay=False))
def site_build(out: str) -> None:
    """Render every symptom, cause and fix into OUT (works offline)."""
    from .site.build import build

    count = build(_kb(), out)
    click.echo(f"wrote {count} pages to {out}")


@site.command("serve")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option("--dir", "directory", type=click.Path(file_okay=False), help="Serve this built site instead of building one.")
def site_serve(port: int, directory: str | None) -> None:
    """Build the site into a temporary folder and serve it on localhost."""
    from .site.build import serve

    serve(_kb(), port, directory)

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


def did_you_mean(word: str, known) -> str:
    """' Did you mean 'x'?' for the closest known spelling, or ''."""
    import difflib

    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return f" Did you mean '{close[0]}'?" if close else ""


class Choice(click.Choice):
    """click.Choice whose error suggests the closest value (``--device gpu`` -> 'cpu'?)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter as err:
            hint = did_you_mean(str(value), self.choices)
            if not hint:
                raise
            raise click.BadParameter(f"{err.message}{hint}", ctx, param) from None


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


def _finish(diag: Diagnosis, as_json: bool, top: int, fail_on: str = "error", all_fixes: bool = False,
            interrupted: bool = False, unusable: bool = False) -> None:
    """Print the report; exit with the --fail-on status, 130 after Ctrl-C (the partial report), or 2
    when nothing usable was read at all."""
    if as_json:
        click.echo(json.dumps(diag.to_json(), ensure_ascii=False, indent=1))
    else:
        from .report.terminal import render

        click.echo(render(diag, top=top, all_fixes=all_fixes), nl=False)
    if unusable and not diag.problem_found:
        click.echo("Error: nothing usable was read from the given paths "
                   "(see the findings for what to give instead)", err=True)
        sys.exit(2)
    sys.exit(130 if interrupted else exit_code(diag, fail_on))


def exit_code(diag: Diagnosis, fail_on: str) -> int:
    """1 when the report reaches the --fail-on threshold (DESIGN.md CLI contract), else 0.

    ``error`` (the default): an error finding (a probe crash is one) or a confirmed cause;
    ``warning``: a warning finding or a likely cause too; ``never``: always 0."""
    if fail_on == "never":
        return 0
    if diag.problem_found:
        return 1
    if fail_on == "warning":
        warned = any(f.severity == "warning" for f in diag.findings)
        return 1 if warned or any(c.status == "likely" for c in diag.causes) else 0
    return 0


def report_options(command):
    """--fixes and --fail-on, shared by ask and probe."""
    command = click.option("--fail-on", type=Choice(["error", "warning", "never"]), default="error",
                           show_default=True, help="What makes the exit status 1 (for CI).")(command)
    return click.option("--fixes", "all_fixes", is_flag=True,
                        help="Print the fix steps of every cause shown, not only confirmed / likely ones.")(command)


class _Group(click.Group):
    """The command group, plus one-line errors for what no command can prevent: stdout on a full
    disk or a closed pipe (`llmfix ask ... | head`), also while printing --help."""

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
        except BrokenPipeError:
            sys.stderr.close()  # the reader left; say nothing more
            sys.exit(2)
        except OSError as err:  # --help, --version and reports alike
            if err.errno not in (errno.ENOSPC, errno.EIO, errno.EPIPE):
                raise
            click.echo(f"Error: <stdout>: cannot write the report ({err.strerror})", err=True)
            sys.exit(2)
        sys.exit(code if isinstance(code, int) else 0)


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
            raise Failure(f"--answer {clip(item)}: unknown fact '{clip(name)}'.{did_you_mean(name, kb.facts)} "
                          f"(list them: llmfix kb list --facts)")
        try:
            out[name] = Fact(name, spec.parse(raw), "user")
        except ValueError as err:
            hint = did_you_mean(raw.strip(), spec.choices) if spec.choices else ""
            raise Failure(f"--answer {clip(item)}: {err}.{hint}".rstrip(".")) from None
    return out


ASK_AT_MOST = 12  # questions in one interactive session (engine.diagnose's max_questions)
DONT_KNOW = ("?", "", "dk", "don't know", "dont know", "不知道", "unknown")
FINISH = ("q", "quit", "exit", "done")
ANSWER_HINT = {"bool": "[y]es / [n]o / [?] don't know", "number": "a number, or ? if unknown",
               "choice": "a number or name, or ?", "text": "text, or ?"}


class Interview:
    """The interactive asker for engine.diagnose: one question at a time on stderr (so --json stdout
    stays clean), with 'question k of at most n' and the running top 3 after each answer.

    ``q`` or Ctrl-D finish with the ranking so far (EOFError stops the engine's loop); Ctrl-C does
    the same and sets ``interrupted`` so that the command exits 130 after printing the report."""

    def __init__(self, kb, matched: dict[str, float], observations: Observations, facts: dict[str, Fact]):
        self.kb, self.matched, self.observations, self.facts = kb, matched, observations, facts
        self.answers: dict[str, Fact] = {}
        self.asked = 0
        self.interrupted = False

    def __call__(self, question: Question) -> Any:
        from .report.terminal import hang, terminal_width

        width = min(terminal_width(), 100)
        now = self._now()
        if self.asked:
            self._show_top3(now, width)
        self.asked += 1
        total = min(ASK_AT_MOST, self.asked - 1 + len(now.questions))
        click.echo(click.style(f"\nQuestion {self.asked} of at most {max(total, self.asked)}"
                               "  (q to finish)", dim=True), err=True)
        for line in hang("? ", question.text, width):
            click.echo(click.style(line, bold=True), err=True)
        if question.how:
            click.echo("\n".join(hang("  how: ", " ".join(question.how.split()), width)), err=True)
        if question.probe:
            click.echo(f"  or let llmfix measure it: {question.probe}", err=True)
        value = self._read(self.kb.facts[question.fact])
        if value is not None:
            self.answers[question.fact] = Fact(question.fact, value, "user")
        return value

    def _read(self, spec) -> Any:
        if spec.choices:
            click.echo("  " + "  ".join(f"{i}) {c}" for i, c in enumerate(spec.choices, 1)), err=True)
        while True:
            raw = self._line(f"  ({ANSWER_HINT[spec.type]}, q to finish) > ").strip()
            if raw.lower() in FINISH:
                raise EOFError
            if raw.lower() in DONT_KNOW:
                return None
            try:
                return spec.parse(raw)
            except ValueError as err:  # the message without the internal fact id
                words = str(err).removeprefix(f"{spec.name}: ").removeprefix(f"{spec.name} ")
                click.echo(f"  That answer {words}; ? if you do not know, q to finish.", err=True)

    def _line(self, prompt: str) -> str:
        click.echo(prompt, nl=False, err=True)
        try:
            raw = sys.stdin.readline()
        except KeyboardInterrupt:
            self.interrupted = True
            raw = ""
        if not raw:  # Ctrl-D (or Ctrl-C): the report must start on a fresh line
            click.echo(err=True)
            raise EOFError
        return raw

    def _now(self) -> Diagnosis:
        from .engine import diagnose

        return diagnose(self.kb, self.matched, self.observations, {**self.facts, **self.answers})

    def _show_top3(self, now: Diagnosis, width: int) -> None:
        from .report.terminal import hang, status_label

        causes = [c for c in now.causes if c.status != "ruled-out"][:3]
        click.echo(click.style("  Top causes so far:", dim=True), err=True)
        for i, c in enumerate(causes, 1):
            click.echo("\n".join(hang(f"    {i}. {status_label(c)} ", c.title, width, 7)), err=True)


def _choose_symptom(candidates, weak: bool) -> list:
    """The user's pick; Enter keeps all of an ambiguous match and none of a weak one."""
    if weak:
        click.echo("The match is weak: your words fit no symptom well.", err=True)
    click.echo(click.style("Which of these is closest?", bold=True), err=True)
    for i, m in enumerate(candidates, 1):
        click.echo(f"  {i}) {m.id}  {m.title}", err=True)
    click.echo(f"  (number, Enter for {'none of these' if weak else 'all'}) > ", nl=False, err=True)
    raw = sys.stdin.readline().strip()
    if raw.isdigit() and 1 <= int(raw) <= len(candidates):
        return [candidates[int(raw) - 1]]
    return [] if weak else candidates


def _shows_a_fault(kb, observations: Observations, answers: dict) -> bool:
    """What was read or answered points to a problem by itself: an artifact was probed, the text
    holds an error signature, or a fact implies or shows a symptom (a NaN loss, an OOM). A setting
    named in a question ("flash attention", "bf16", "lr 2e-5") describes the setup, not a fault:
    it leaves an off-topic text off-topic."""
    from .engine import symptom_table

    facts = {**observations.facts, **answers}
    return bool(observations.artifacts or observations.findings or observations.symptoms
                or symptom_table(kb, {}, facts, observations.symptoms))


def _no_fault(query: str) -> None:
    """A question about how to do or choose something, or a word that the run is fine: nothing to
    diagnose; say what would make it diagnosable, in the writer's language."""
    from .prose import is_chinese

    if is_chinese(query):
        click.echo("没有描述故障：这段话是在问怎么做、怎么选，或是说训练正常；llmfix 诊断的是出了问题的训练。")
        click.echo('如果确实出了问题，请写出看到的现象（如 llmfix ask "loss 在 2000 步后变成 nan"）、'
                   "报错的那一行，或给出训练日志（llmfix probe train.log）。已知的症状：llmfix kb list")
        return
    click.echo("No fault described: this asks how to do or choose something, or says the run is fine; "
               "llmfix diagnoses training runs that went wrong.")
    click.echo('If something did go wrong, say what you see (llmfix ask "loss went nan after 2k steps"), '
               "paste the error line, or give the log (llmfix probe train.log). The symptoms it knows: llmfix kb list")


def _not_covered(query: str) -> None:
    click.echo(f"This is not something llmfix covers: {query!r} is not about training a language model.")
    click.echo('llmfix diagnoses LLM training problems, e.g. llmfix ask "loss went nan"; '
               "the symptoms it knows: llmfix kb list")


def _run_probes(paths: tuple[str, ...], **switches: Any) -> Observations:
    from .loaders import detect
    from .probes import ProbeContext, run_all

    artifacts, unreadable = [], []
    for path in paths:
        try:
            artifacts.append(detect(path))
        except LlmfixError as err:
            unreadable.append(err)
    try:
        if unreadable and not artifacts:
            raise unreadable[0]
        observations = run_all(ProbeContext(artifacts, **switches))
    except LlmfixError as err:
        raise Failure(str(err)) from None
    for err in unreadable:  # one bad path among good ones: an error finding, the others still probed
        observations.find("input.unreadable", "error", str(err), getattr(err, "path", ""))
    return observations


@main.command()
@click.argument("text", nargs=-1, required=True)
@click.option("--answer", "-a", "answers", multiple=True, metavar="FACT=VALUE", help="Pre-answer a check (repeatable).")
@click.option("--probe", "probe_paths", multiple=True, type=click.Path(readable=False), metavar="PATH",
              help="Let probes answer questions from a checkpoint, log or batch (repeatable).")
@click.option("--no-input", is_flag=True, help="Never prompt; rank with what is known and list open questions.")
@click.option("--json", "as_json", is_flag=True, help="Print one llmfix/diagnosis-v1 JSON object.")
@click.option("--top", default=5, show_default=True, type=click.IntRange(1), help="Causes to show.")
@report_options
def ask(text: tuple[str, ...], answers: tuple[str, ...], probe_paths: tuple[str, ...], no_input: bool,
        as_json: bool, top: int, all_fixes: bool, fail_on: str) -> None:
    """Diagnose from a description, e.g.  llmfix ask "loss went nan".

    TEXT "-" reads the description from standard input: a paste too long for the command line
    (... | llmfix ask -)."""
    from .diagnosis import SymptomMatch
    from .engine import diagnose
    from .matcher import SymptomMatcher

    kb = _kb()
    from_stdin = text == ("-",)
    query = _description_from_stdin() if from_stdin else " ".join(text).strip()
    facts = _parse_answers(kb, answers)
    from .evidence import from_text

    on_phase = _phase_lines() if stderr_is_tty() else None
    probed = _run_probes(probe_paths, on_phase=on_phase) if probe_paths else Observations()
    observations = from_text(kb, query).merge(probed)  # text < probes < answers
    interactive = not no_input and not from_stdin and stdin_is_tty()
    verdict, matches, candidates = _symptoms_in_words(kb, query, interactive)
    if verdict == "off-topic" and not _shows_a_fault(kb, observations, facts):
        if as_json:
            _finish(Diagnosis(query=query), as_json, top, fail_on)
        if SymptomMatcher(kb).names_no_fault(query):
            _no_fault(query)
        else:
            _not_covered(query)
        sys.exit(0)
    matched = {m.id: m.score for m in matches}
    interview = Interview(kb, matched, observations, facts) if interactive else None
    diag = diagnose(kb, matched, observations, facts, interview, max_questions=ASK_AT_MOST, query=query)
    if candidates:  # a guess is no diagnosis: list the candidates (weight 0, no causes) and say so
        listed = {s.id for s in diag.symptoms}
        diag.symptoms += [SymptomMatch(m.id, m.title, m.score, m.score, weight=0.0)
                          for m in candidates if m.id not in listed]
        diag.weak_match = True
    _finish(diag, as_json, top, fail_on, all_fixes, interrupted=bool(interview and interview.interrupted))


def _description_from_stdin() -> str:
    """The description piped in, read within the console budget (head and tail of a long paste)."""
    from .loaders.setup.read import STDIN, read_console

    if sys.stdin is None or sys.stdin.closed:
        raise click.UsageError("<stdin>: standard input is closed: pipe the description in (... | llmfix ask -)")
    text = read_console(STDIN)[0].strip()
    if not text:
        raise click.UsageError("<stdin>: nothing was piped in: give the description as TEXT or pipe it "
                               "(... | llmfix ask -)")
    return text


def _symptoms_in_words(kb, query: str, interactive: bool) -> tuple[str, list, list]:
    """The matcher's verdict, the symptoms to diagnose, and the candidates of a weak match that
    nobody picked (listed, never ranked). On a terminal the user picks among close or weak ones."""
    from .matcher import MIN_SCORE, SymptomMatcher, pick

    matcher = SymptomMatcher(kb)
    ranked = matcher.match_report(query)
    verdict = matcher.verdict(query, ranked)
    if verdict == "weak":
        candidates = [m for m in ranked if m.score >= MIN_SCORE][:3]
        chosen = _choose_symptom(candidates, weak=True) if interactive else []
        return verdict, chosen, [] if chosen else candidates
    matches, ambiguous = pick(ranked) if verdict == "match" else ([], False)
    if interactive and ambiguous:
        matches = _choose_symptom(matches, weak=False)
    return verdict, matches, []


# --------------------------------------------------------------------------- probe
def _progress_line():
    """A one-line progress report on stderr for streams over large checkpoints."""
    last = [0.0]

    def report(done: int, total: int, name: str) -> None:
        now = time.monotonic()
        if now - last[0] < 0.2 and done < total:
            return
        last[0], gib = now, 1024 ** 3
        click.echo(f"\r\033[Kreading weights {done / gib:.1f}/{total / gib:.1f} GiB  {clip(name[-50:])}",
                   nl=False, err=True)
    return report


def stderr_is_tty() -> bool:
    return sys.stderr is not None and sys.stderr.isatty()


def _phase_lines():
    """Slow probe steps on stderr: 'building the model ...' while it runs, then its elapsed time."""
    def report(name: str, elapsed: float | None) -> None:
        if elapsed is None:
            click.echo(f"\r\033[K{name} ...", nl=False, err=True)
        else:
            click.echo(f"\r\033[K{name} ... {elapsed:.1f} s", err=True)
    return report


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(readable=False))
@click.option("--json", "as_json", is_flag=True, help="Print one llmfix/diagnosis-v1 JSON object.")
@click.option("--device", type=Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@click.option("--model-factory", metavar="MODULE:CALLABLE", help="Build the model with your code (module or file.py).")
@click.option("--static", is_flag=True, help="Never run the model (no forward/backward probes).")
@click.option("--forward", is_flag=True, help="Run model probes even above the documented size caps.")
@click.option("--plot", type=click.Path(dir_okay=False), help="Draw the training curves with events to this PNG.")
@click.option("--answer", "-a", "answers", multiple=True, metavar="FACT=VALUE", help="Add what you know (repeatable).")
@click.option("--top", default=5, show_default=True, type=click.IntRange(1), help="Causes to show.")
@report_options
def probe(paths: tuple[str, ...], as_json: bool, device: str, model_factory: str | None, static: bool,
          forward: bool, plot: str | None, answers: tuple[str, ...], top: int, all_fixes: bool, fail_on: str) -> None:
    """Probe checkpoints, training logs and data batches; rank causes from what they show."""
    from .engine import diagnose

    if not paths and not model_factory:
        raise click.UsageError("give at least one PATH (checkpoint, log, batch) or --model-factory")
    kb = _kb()
    facts = _parse_answers(kb, answers)
    terminal = stderr_is_tty()
    progress = _progress_line() if terminal else None
    observations = _run_probes(paths, device=device, static=static, forward=forward, model_factory=model_factory,
                               progress=progress, on_phase=_phase_lines() if terminal else None)
    if progress:
        click.echo("\r\033[K", nl=False, err=True)
    if plot:
        from .report.plot import write_plots

        observations.findings += write_plots(observations.attachments, plot)
    unusable = {f.where for f in observations.findings if f.id == "input.nothing_usable"}
    if unusable and unusable >= {a.path for a in observations.artifacts} and not facts:
        _finish(diagnose(kb, {}, observations, facts), as_json, top, fail_on, all_fixes, unusable=True)
    _finish(diagnose(kb, {}, observations, facts), as_json, top, fail_on, all_fixes)


# --------------------------------------------------------------------------- kb
@main.group()
def kb() -> None:
    """Browse and check the knowledge base."""


@kb.command("list")
@click.option("--facts", is_flag=True, help="List the facts that --answer FACT=VALUE accepts instead.")
def kb_list(facts: bool) -> None:
    """Symptoms, their causes and fixes, with ids (or the facts, with --facts)."""
    from .report.kbview import fact_listing, listing
    from .report.terminal import terminal_width

    base = _kb()
    click.echo(fact_listing(base, terminal_width()) if facts else listing(base), nl=False)


@kb.command("show")
@click.argument("item_id")
@click.option("--answer", "-a", "answers", multiple=True, metavar="FACT=VALUE",
              help="Compute the numbers in fix steps from what you know (repeatable).")
def kb_show(item_id: str, answers: tuple[str, ...]) -> None:
    """Show a symptom, cause, fix or fact by id; fix steps computed from --answer values."""
    from .report.kbview import show
    from .report.terminal import terminal_width

    base = _kb()
    item = base.lookup(item_id)
    if item is None:
        known = [*base.symptoms, *base.causes, *base.fixes, *base.facts, *base.findings]
        raise Failure(f"unknown id '{clip(item_id)}'.{did_you_mean(item_id, known)} (list them: llmfix kb list)")
    values = {name: fact.value for name, fact in _parse_answers(base, answers).items()}
    click.echo(show(base, item, values, terminal_width()), nl=False)


@kb.command("new")
@click.argument("symptom_id")
@click.option("--root", default=".", show_default=True, type=click.Path(readable=False),
              help="The knowledge tree (the folder holding rules/ and kb/).")
def kb_new(symptom_id: str, root: str) -> None:
    """Write rules/SYMPTOM_ID.yaml and kb/SYMPTOM_ID.md to fill in (docs/extending.md)."""
    from pathlib import Path

    from .knowledge.scaffold import new_symptom

    try:
        written = new_symptom(Path(root), symptom_id)
    except LlmfixError as err:
        raise Failure(str(err)) from None
    click.echo("wrote " + " and ".join(map(str, written)) + "; fill in the TODOs, then: llmfix kb lint")


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
@click.argument("out", type=click.Path(readable=False))
def site_build(out: str) -> None:
    """Render every symptom, cause and fix into OUT (works offline)."""
    from .site.build import build

    count = build(_kb(), out)
    click.echo(f"wrote {count} pages to {out}")


@site.command("serve")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option("--dir", "directory", type=click.Path(readable=False),
              help="Serve this built site instead of building one.")
def site_serve(port: int, directory: str | None) -> None:
    """Build the site into a temporary folder and serve it on localhost."""
    from .site.build import serve

    serve(_kb(), port, directory)

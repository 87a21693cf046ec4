"""`llmfix site build`: every page exists, every link resolves, nothing external loads, hostile
knowledge stays inert, and the exported data agrees with the Python it was read from.

The site is built twice: from a small knowledge tree written here (always), and from the shipped
rules/ + kb/ (skipped, with the reason, while `llmfix kb lint` is not clean).
"""
from __future__ import annotations

import ast
import html
import json
import random
import re
import shutil
import subprocess
from pathlib import Path

import linkcheck
import pytest

from troubleshoot.knowledge import load
from troubleshoot.knowledge.read import load_with_problems

HOSTILE = "<script>alert(1)</script>"

FACTS = """\
data.mask.binary: {type: bool, description: Every attention_mask value is 0 or 1.}
data.has_nonfinite: {type: bool, description: Some float tensor of the batch holds NaN or Inf.}
train.precision: {type: choice, choices: [fp16, bf16, fp32], description: The training precision.}
train.lr: {type: number, description: The peak learning rate.}
logs.nan_step: {type: number, description: The first step whose loss is NaN., unit: iterations}
model.hidden_size: {type: number, description: The hidden size of the model.}
model.num_layers: {type: number, description: The number of transformer layers.}
weights.nonfinite: {type: bool, description: Some weight tensor holds NaN or Inf (measured by the weights probe).}
train.warmup_end: {type: bool, description: The spike comes right after the learning-rate warmup ends.}
optimizer.beta2: {type: number, description: Adam beta2.}
"""

NAN_LOSS = """\
id: nan-loss
title: Loss becomes NaN or Inf
summary: The training loss turns into `nan` or `inf` and never comes back.
aliases:
  en: ["loss is nan", "loss went nan", "loss becomes inf", "nan loss after a few steps"]
  zh: ["loss变nan", "损失为nan", "训练时损失变成nan"]
  errors: ["Gradient overflow. Skipping step, loss scaler 0 reducing loss scale"]
checks:
  - fact: data.mask.binary
    ask: Are all `attention_mask` values exactly 0 or 1?
    how: "`torch.unique(batch['attention_mask'])` must print `tensor([0, 1])`."
    probe: llmfix probe batch.pt
    cost: 1
  - fact: data.has_nonfinite
    ask: Does the batch hold NaN or Inf?
    cost: 1
  - fact: train.precision
    ask: Which precision do you train in?
    cost: 2
  - fact: train.lr
    ask: What is the peak learning rate?
    cost: 2
  - fact: logs.nan_step
    ask: At which step does the loss first become NaN?
    cost: 3
    after: train.lr
causes:
  - id: nan-loss.invalid-mask
    title: Attention mask is not binary
    summary: A mask value other than 0/1 reaches the softmax.
    prior: 0.10
    evidence:
      - {when: data.mask.binary == false, lr: 30, else_lr: 0.05, confirms: true, says: The mask holds other values.}
    fixes: [fix-binary-mask]
    sources: ["000_43af7a7a7fac43b8.txt", "KNOWLEDGE.md nan_loss"]
  - id: nan-loss.nonfinite-data
    title: NaN or Inf in the data
    prior: 0.10
    evidence:
      - {when: data.has_nonfinite, lr: 40, else_lr: 0.05, says: The batch itself holds NaN.}
    fixes: [fix-clean-data]
    sources: ["003_10afe1a0742d2c2f.txt"]
  - id: nan-loss.lr-too-high
    title: Learning rate too high early in training
    prior: 0.15
    evidence:
      - {when: train.lr > 0.001, lr: 5, else_lr: 0.3}
      - {when: train.lr > 0.001 and logs.nan_step < 100, lr: 4, says: Early NaN at a high LR.}
    fixes: [fix-lower-lr]
    sources: ["003_10afe1a0742d2c2f.txt", "arXiv:2309.14322"]
  - id: nan-loss.fp16-overflow
    title: fp16 overflow
    prior: 0.12
    evidence:
      - {when: "train.precision == 'fp16'", lr: 4, else_lr: 0.4}
      - {when: "train.precision in ['bf16', 'fp32'] and weights.nonfinite", lr: 0.5}
    fixes: [fix-lower-lr]
    sources: ["https://example.org/fp16-notes"]
  - id: nan-loss.bad-init
    title: Initialisation std too large for the model width
    prior: 0.05
    evidence:
      - {when: weights.nonfinite == true, lr: 3}
    fixes: [fix-init-std]
    sources: ["004_39428b208c12ba79.txt"]
fixes:
  - id: fix-binary-mask
    title: Build the attention mask as 0/1 with 1 = keep
    steps:
      - "Convert with `attention_mask = (attention_mask > 0).long()`."
    sources: ["000_43af7a7a7fac43b8.txt"]
  - id: fix-clean-data
    title: Drop or repair samples with NaN
    steps: ["Assert `torch.isfinite(x).all()` in the collator."]
    sources: ["003_10afe1a0742d2c2f.txt"]
  - id: fix-lower-lr
    title: Lower the learning rate
    steps:
      - "Divide the LR by 5: use {{ train.lr / 5 :.2e }}."
    sources: ["003_10afe1a0742d2c2f.txt"]
    did_not_work:
      - {text: Changing the seed only moved the spike elsewhere., sources: ["004_39428b208c12ba79.txt"]}
  - id: fix-init-std
    title: Use the small-init std for the width
    steps:
      - "Set `--init-method-std {{ sqrt(2/(5*model.hidden_size)) :.5f }}`."
      - "Scale output layers by {{ 1/sqrt(2*model.num_layers) :.3g }} ({{ model.num_layers }} layers)."
    sources: ["004_39428b208c12ba79.txt", "See [the paper](https://arxiv.org/abs/1910.05895)"]
"""

LOSS_SPIKE = """\
id: loss-spike
title: Loss spikes mid-training
summary: Sudden loss spikes or divergence after a stable start.
aliases:
  en: ["loss spikes", "loss suddenly jumps", "training diverges after warmup"]
  zh: ["loss突然飙升", "损失尖峰"]
checks:
  - fact: train.warmup_end
    ask: Does the spike come right after warmup ends?
    cost: 1
  - fact: optimizer.beta2
    ask: What is Adam beta2?
    cost: 1
causes:
  - id: loss-spike.warmup-end
    title: The spike follows the end of warmup
    prior: 0.2
    evidence:
      - {when: train.warmup_end, lr: 6, else_lr: 0.3}
    fixes: [fix-lower-lr]
    sources: ["002_2969b0ea5896ed69.txt"]
  - id: loss-spike.adam-beta2
    title: Adam beta2 too high
    prior: 0.15
    evidence:
      - {when: optimizer.beta2 >= 0.99, lr: 3, else_lr: 0.4}
    fixes: [fix-beta2]
    sources: ["002_2969b0ea5896ed69.txt"]
fixes:
  - id: fix-beta2
    title: Use beta2 = 0.95
    steps: ["Set `--adam-beta2 0.95`."]
    sources: ["002_2969b0ea5896ed69.txt"]
    did_not_work:
      - {text: A longer warmup did not stop the spikes., sources: ["004_39428b208c12ba79.txt"]}
"""

# every field a person writes, with markup that must stay text
HOSTILE_RULES = f"""\
id: hostile
title: "{HOSTILE} Evil title"
summary: "Summary </script><script>alert(2)</script> and <img src=x onerror=alert(3)>"
aliases:
  en: ["{HOSTILE}", "evil alias"]
  zh: ["</script>恶意"]
checks:
  - fact: data.mask.binary
    ask: "Is it {HOSTILE}?"
    how: "<b>bold</b> [x](javascript:alert(7))"
    probe: "llmfix probe </script>"
causes:
  - id: hostile.evil
    title: "<img src=x onerror=alert(3)> cause"
    summary: "{HOSTILE}"
    prior: 0.2
    evidence:
      - {{when: "data.mask.binary == false", lr: 2, says: "</script><script>alert(4)</script>"}}
    fixes: [fix-evil]
    sources: ["{HOSTILE}", "javascript:alert(5)"]
    not_this_when: "<iframe src=https://evil.example/></iframe>"
fixes:
  - id: fix-evil
    title: "{HOSTILE} fix"
    steps: ["Run </script><script>alert(6)</script> {{{{ model.hidden_size * 2 }}}}", "{{{{ '</script>' }}}}"]
    sources: ["<a href=https://evil.example>x</a>"]
    did_not_work:
      - {{text: "{HOSTILE}", sources: ["{HOSTILE}"]}}
"""

ARTICLE = """\
---
id: {id}
title: {title}
---
## What you see
```
loss = nan
```
## Why it happens
Because of `nan-loss.invalid-mask` (see [the fix](fix-binary-mask) and [the spike page](loss-spike.md)).
A [dangling link](nowhere.md) loses its link, an [outside one](https://example.org/x) keeps it.
## How to confirm
Run `llmfix probe batch.pt`.
## Fixes, safest first
1. `fix-binary-mask`
## What did not work
Changing the seed (seed 004_39428b208c12ba79.txt).
## When this is not the cause
When the mask is bool.
## References
- arXiv:2309.14322
"""

HOSTILE_ARTICLE = f"""\
---
id: hostile
title: "{HOSTILE}"
---
## What you see
{HOSTILE}

<iframe src="https://evil.example/"></iframe>

[click](javascript:alert(1)) ![pixel](https://evil.example/pixel.png) ![local](pixel.png)

<a href="https://evil.example">raw html link</a>
## Why it happens
`</script>` in code, and </script> in text.
"""

TOPIC = """\
---
id: checkpoints
title: Rolling back to a checkpoint
---
## Why
Keep the `latest` file in sync. See `loss-spike` and [nan](nan-loss.md).
"""


def write_tree(root: Path, hostile: bool = True) -> Path:
    """A small but complete knowledge tree: two symptoms, shared fixes, a topic, optional hostile one."""
    (root / "rules" / "_facts").mkdir(parents=True)
    (root / "kb").mkdir()
    (root / "rules" / "_facts" / "base.yaml").write_text(FACTS, encoding="utf-8")
    (root / "rules" / "nan-loss.yaml").write_text(NAN_LOSS, encoding="utf-8")
    (root / "rules" / "loss-spike.yaml").write_text(LOSS_SPIKE, encoding="utf-8")
    (root / "kb" / "nan-loss.md").write_text(ARTICLE.format(id="nan-loss", title="Loss becomes NaN"), encoding="utf-8")
    (root / "kb" / "loss-spike.md").write_text(ARTICLE.format(id="loss-spike", title="Loss spikes"), encoding="utf-8")
    (root / "kb" / "checkpoints.md").write_text(TOPIC, encoding="utf-8")
    if hostile:
        (root / "rules" / "hostile.yaml").write_text(HOSTILE_RULES, encoding="utf-8")
        (root / "kb" / "hostile.md").write_text(HOSTILE_ARTICLE, encoding="utf-8")
    return root


def mini_kb(root: Path, hostile: bool = True):
    write_tree(root, hostile)
    kb, problems = load_with_problems(root)
    assert not problems, problems
    return kb


def build_site(kb, out: Path) -> int:
    from troubleshoot.site.build import build

    return build(kb, out)


@pytest.fixture(scope="module")
def mini_site(tmp_path_factory):
    root = tmp_path_factory.mktemp("kb")
    kb = mini_kb(root)
    out = tmp_path_factory.mktemp("site") / "site"
    count = build_site(kb, out)
    return kb, out, count


def shipped_or_skip():
    """The shipped knowledge, or skip with the reason while `llmfix kb lint` is not clean."""
    try:
        from troubleshoot.knowledge.lint import lint

        problems = lint()
    except Exception as err:  # the linter itself is being edited by others right now
        pytest.skip(f"llmfix kb lint cannot run yet ({type(err).__name__}: {err})")
    if problems:
        pytest.skip(f"llmfix kb lint is not clean yet ({len(problems)} problems, first: {problems[0]}); "
                    "the site is tested on a small tree meanwhile")
    return load()


@pytest.fixture(scope="module")
def shipped_site(tmp_path_factory):
    kb = shipped_or_skip()
    out = tmp_path_factory.mktemp("shipped") / "site"
    count = build_site(kb, out)
    return kb, out, count


# --------------------------------------------------------------------------- pages and links
def _pages_and_links(kb, out: Path, count: int) -> None:
    html = sorted(out.rglob("*.html"))
    assert count == len(html)
    assert (out / "index.html").is_file() and (out / "sources.html").is_file()
    for sid in kb.symptoms:
        assert (out / "symptoms" / f"{sid}.html").is_file(), sid
        assert (out / "data" / f"symptom-{sid}.js").is_file(), sid
    for cid in kb.causes:
        assert (out / "causes" / f"{cid}.html").is_file(), cid
    for fid in kb.fixes:
        assert (out / "fixes" / f"{fid}.html").is_file(), fid
    problems = linkcheck.check(out)
    assert not problems, "\n".join(problems[:20])
    external = linkcheck.external_resources(out)
    assert not external, "\n".join(external[:20])


def test_mini_site_pages_and_links(mini_site):
    _pages_and_links(*mini_site)


def test_shipped_site_pages_and_links(shipped_site):
    _pages_and_links(*shipped_site)


def test_every_source_is_on_the_sources_page(mini_site):
    kb, out, _ = mini_site
    from troubleshoot.site.markup import source_anchor

    page = (out / "sources.html").read_text(encoding="utf-8")
    sources = {s for c in kb.causes.values() for s in c.sources} | {s for f in kb.fixes.values() for s in f.sources}
    for src in sources:
        assert f'id="{source_anchor(src)}"' in page, src
    assert "004_39428b208c12ba79.txt" in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    # an arXiv id becomes a plain outside link, never a loaded resource
    assert '<a href="https://arxiv.org/abs/2309.14322" rel="noopener"' in page


def test_cross_links(mini_site):
    kb, out, _ = mini_site
    cause = (out / "causes" / "nan-loss.invalid-mask.html").read_text(encoding="utf-8")
    assert 'href="../symptoms/nan-loss.html"' in cause
    assert 'href="../fixes/fix-binary-mask.html"' in cause
    assert "×30" in cause and "×0.05" in cause and "confirms" in cause
    fix = (out / "fixes" / "fix-lower-lr.html").read_text(encoding="utf-8")
    assert 'href="../causes/nan-loss.lr-too-high.html"' in fix and 'href="../causes/loss-spike.warmup-end.html"' in fix
    symptom = (out / "symptoms" / "nan-loss.html").read_text(encoding="utf-8")
    assert "<svg" in symptom and 'href="../causes/nan-loss.invalid-mask.html"' in symptom
    assert 'id="check-data.mask.binary"' in symptom
    # article links: a known id becomes a page link, an unknown relative link loses its href
    assert 'href="../symptoms/loss-spike.html"' in symptom and "nowhere.md" not in symptom
    assert 'href="articles/checkpoints.html"' in (out / "index.html").read_text(encoding="utf-8")


def test_seed_lessons_come_from_the_knowledge(mini_site):
    kb, out, _ = mini_site
    index = (out / "index.html").read_text(encoding="utf-8")
    lessons = index.split('id="lessons"', 1)[1]
    assert "004_39428b208c12ba79.txt" in lessons
    assert "Changing the seed only moved the spike elsewhere." in lessons   # a did_not_work citing a seed
    assert 'href="fixes/fix-init-std.html"' in lessons                     # a fix citing the same seed


def test_decision_tree_labels_and_order(mini_site):
    """Questions (not fact ids) numbered in ask order, full cause titles, ratios on every line."""
    kb, out, _ = mini_site
    from troubleshoot.site.export import question_order

    page = (out / "symptoms" / "nan-loss.html").read_text(encoding="utf-8")
    svg = page[page.index("<svg"):page.index("</svg>")]
    text = re.sub(r"<[^>]+>", "", svg)
    assert "×30 / ×0.05 ✓" in text and "×5 / ×0.3" in text
    assert "n-probe" in svg and 'data-q="weights.nonfinite"' in svg      # probe-only fact drawn dashed
    order = question_order(kb, "nan-loss")
    first = re.search(r"<text[^>]*>1\. ([^<]+)</text>", svg).group(1)
    ask = next(c.ask for c in kb.symptoms["nan-loss"].checks if c.fact == order[0]).replace("`", "")
    assert ask.startswith(first.strip())
    for cause in kb.symptoms["nan-loss"].causes:   # every word of every title is drawn, none cut off
        assert f'data-c="{cause.id}"' in svg
        words = re.findall(r"<text[^>]*>([^<]*)</text>", svg[svg.index(f'class="n-c" data-c="{cause.id}"'):])
        drawn = " ".join(words[:6])
        assert all(w in drawn for w in html.escape(cause.title, quote=False).split()), (cause.title, drawn)
    # the outline view carries the same links, with the question text
    outline = page[page.index('id="tree-list"'):]
    assert "Q1" in outline and outline.count('class="tl-cause"') == len(kb.symptoms["nan-loss"].causes)


def test_tree_layout_crosses_less_than_declaration_order():
    """The barycentre ordering beats the rules' own order on crossings for every shipped symptom."""
    from troubleshoot.site.export import question_order
    from troubleshoot.site.svg import crossings, tree_model

    kb = shipped_or_skip()
    for sid, symptom in kb.symptoms.items():
        model = tree_model(kb, symptom, question_order(kb, sid), "../")
        laid = crossings(model.links, {q.fact: i for i, q in enumerate(model.questions)},
                         {c.id: i for i, c in enumerate(model.causes)})
        plain = crossings(model.links, {q.fact: i for i, q in enumerate(sorted(model.questions, key=lambda q: q.fact))},
                          {c.id: i for i, c in enumerate(symptom.causes)})
        assert laid <= plain, (sid, laid, plain)


def test_fix_titles_are_unique():
    kb = shipped_or_skip()
    seen = {}
    for fix in kb.fixes.values():
        assert fix.title not in seen, f"{fix.id} and {seen.get(fix.title)} share the title {fix.title!r}"
        seen[fix.title] = fix.id


def test_home_orders_symptoms_by_how_often_people_hit_them(shipped_site):
    from troubleshoot.site.build import site_config

    kb, out, _ = shipped_site
    index = (out / "index.html").read_text(encoding="utf-8")
    shown = re.findall(r'<li class="card" data-symptom="([^"]+)"', index)
    assert sorted(shown) == sorted(kb.symptoms)
    listed = [sid for sid in site_config()["symptom_order"] if sid in kb.symptoms]
    assert shown[:len(listed)] == listed and shown[0] == "nan-loss"


def test_a_cause_page_shows_the_settings_that_lead_to_it(shipped_site):
    kb, out, _ = shipped_site
    risky = [c for c in kb.causes.values() if c.risk]
    assert risky
    for cause in risky:
        page = (out / "causes" / f"{cause.id}.html").read_text(encoding="utf-8")
        assert "Settings that lead to it" in page and cause.risk.when.source in html.unescape(page), cause.id
    quiet = next(c for c in kb.causes.values() if not c.risk)
    assert "Settings that lead to it" not in (out / "causes" / f"{quiet.id}.html").read_text(encoding="utf-8")


def test_calculator_inputs_have_human_labels_and_own_placeholders(shipped_site):
    kb, out, _ = shipped_site
    labels, placeholders = [], set()
    for page in (out / "fixes").glob("*.html"):
        text = page.read_text(encoding="utf-8")
        for label, fact, placeholder in re.findall(
                r'<span class="calc-label">([^<]+)</span>\s*<input [^>]*data-fact="([^"]+)"[^>]*placeholder="([^"]*)"', text):
            labels.append((label, fact))
            placeholders.add((fact, placeholder))
    assert len(labels) > 5
    assert all(fact not in label for label, fact in labels), labels[:5]
    assert len({p for _, p in placeholders}) > 5                      # not all "e.g. 4096"
    assert ("train.lr", "e.g. 3e-4") in placeholders


def test_favicon_is_linked_and_shipped(mini_site):
    kb, out, _ = mini_site
    assert (out / "static" / "favicon.svg").is_file()
    for page in ("index.html", "symptoms/nan-loss.html"):
        assert 'rel="icon"' in (out / page).read_text(encoding="utf-8")


# --------------------------------------------------------------------------- safety
def test_hostile_knowledge_is_inert(mini_site):
    kb, out, _ = mini_site
    files = [p for p in out.rglob("*") if p.is_file()]
    own_script = re.compile(r'<script src="(\.\./)?(static|data)/[\w.-]+\.js"></script>')
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert HOSTILE not in text, path
        assert "<img" not in text and "<iframe" not in text, path
        if path.suffix == ".html":
            tags = re.findall(r"<script\b[^>]*>.*?</script>", text, re.S)
            assert all(own_script.fullmatch(t) for t in tags), (path, tags)
            assert not re.search(r"<[a-z][^>]*\sonerror=", text, re.I), path
            assert not re.search(r"<a [^>]*href=\"javascript:", text, re.I), path
        if path.parent.name == "data":
            assert "<" not in text and ">" not in text, path   # \u003c: inert even inline
    page = (out / "symptoms" / "hostile.html").read_text(encoding="utf-8")
    assert "&lt;script&gt;alert(1)&lt;/script&gt; Evil title" in page
    assert "&lt;b&gt;bold&lt;/b&gt;" in page
    article = page.split('class="prose article"', 1)[1]
    assert "&lt;iframe" in article and 'href="https://evil.example/pixel.png" rel="noopener"' in article


def test_hostile_data_round_trips(mini_site):
    """The escaped data files still carry the exact strings (the browser sees the real text)."""
    kb, out, _ = mini_site
    text = (out / "data" / "symptom-hostile.js").read_text(encoding="utf-8")
    payload = json.loads(text.split(" = ", 2)[-1].rstrip().rstrip(";"))
    assert payload["title"] == kb.symptoms["hostile"].title
    assert payload["causes"][0]["evidence"][0]["says"] == "</script><script>alert(4)</script>"


def test_rebuild_replaces_an_old_site_but_refuses_other_folders(mini_site, tmp_path):
    from troubleshoot.site.build import SiteError

    kb, out, count = mini_site
    stale = out / "causes" / "gone.html"
    stale.write_text("old", encoding="utf-8")
    assert build_site(kb, out) == count and not stale.exists()
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(SiteError, match="not empty"):
        build_site(kb, busy)
    assert (busy / "notes.txt").read_text(encoding="utf-8") == "mine"


def test_cli_site_build(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from troubleshoot import cli

    kb = mini_kb(tmp_path / "kb")
    monkeypatch.setattr(cli, "_kb", lambda: kb)   # load() is cached per root: hand the tree in directly
    runner = CliRunner()
    result = runner.invoke(cli.main, ["site", "build", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert re.search(r"wrote \d+ pages", result.output)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "x").write_text("x")
    result = runner.invoke(cli.main, ["site", "build", str(tmp_path / "other")])
    assert result.exit_code == 2 and "Error:" in result.output and "not empty" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


# --------------------------------------------------------------------------- data agrees with Python
def test_js_regex_keeps_the_python_meaning():
    from troubleshoot.knowledge.expr import ExprError
    from troubleshoot.site.export import js_regex

    source, flags = js_regex(re.compile(r"(?P<key>[^\s:]{1,5})\S[]x]", re.ASCII | re.IGNORECASE))
    space = r"\u0009\u000a\u000b\u000c\u000d\u0020"
    assert (source, flags) == (f"(?<key>[^{space}:]{{1,5}})[^{space}][]x]", "i")
    assert "\\u3000" in js_regex(re.compile(r"\s"))[0]           # Python's \s has U+3000 without re.ASCII
    for pattern in (r"\bx", r"\w", r"\d"):                       # ASCII in a browser, Unicode in Python
        with pytest.raises(ExprError, match="re.ASCII"):
            js_regex(re.compile(pattern))


def test_expression_trees_cover_the_whitelist():
    from troubleshoot.site.export import expr_tree

    tree = expr_tree("not (a.b in [1, 'x']) and -c.d ** 2 % 3 <= max(1, e.f) < 4 or none")
    assert tree["k"] == "bool" and tree["op"] == "or"
    assert tree["vs"][1] == {"k": "const", "t": "none", "v": None}
    assert expr_tree("a.b == true and unknown(c.d)")["vs"][1] == {"k": "unknown", "n": "c.d"}
    from troubleshoot.knowledge.expr import ExprError

    with pytest.raises(ExprError):
        expr_tree("__import__('os')")


# --------------------------------------------------------------------------- JS == Python
# The same cases run through static/llmfix.js (under node here, in Chromium in the browser test)
# and through troubleshoot.matcher / troubleshoot.engine / expr.render_template; results must match.
AGREEMENT_JS = r"""
function runCases(L, index, symptoms, input) {
  var m = new L.Matcher(index);
  var out = {matches: input.queries.map(function (q) {
    return m.match(q).map(function (r) { return [r.id, r.score]; }); }), states: [],
    reports: input.reports.map(function (r) {
      return {clean: m.clean(r), matches: m.matchReport(r).map(function (x) { return [x.id, x.score]; })}; })};
  input.states.forEach(function (st) {
    var sym = symptoms[st.symptom];
    if (!sym) { out.states.push(null); return; }
    var facts = new Map();
    st.facts.forEach(function (f) { facts.set(f[0], L.V(f[1], f[2])); });
    var ranked = L.rank(sym, facts).map(function (r) { return [r.id, r.score, r.status]; });
    var questions = L.openQuestions(sym, facts, new Set(st.unknown)).map(function (q) { return q.fact; });
    var steps = {};
    Object.keys(sym.fixes).forEach(function (fid) {
      steps[fid] = sym.fixes[fid].steps.map(function (slots) {
        return slots.map(function (s) { return s.expr ? L.computeSlot(s, facts).text : s.text; }).join("");
      });
    });
    out.states.push({ranked: ranked, questions: questions, steps: steps});
  });
  return out;
}
"""

NODE_RUNNER = AGREEMENT_JS + r"""
const fs = require("fs"), path = require("path"), vm = require("vm");
global.window = global;
const site = process.argv[2];
for (const f of fs.readdirSync(path.join(site, "data")).sort())
  vm.runInThisContext(fs.readFileSync(path.join(site, "data", f), "utf8"));
vm.runInThisContext(fs.readFileSync(path.join(site, "static", "llmfix.js"), "utf8"));
const input = JSON.parse(fs.readFileSync(process.argv[3], "utf8"));
console.log(JSON.stringify(runCases(window.LLMFIX, window.LLMFIX_SEARCH, window.LLMFIX_SYMPTOMS, input)));
"""


def _typed(value) -> list:
    kind = {bool: "bool", int: "int", float: "float", str: "str"}[type(value)]
    return [kind, value]


def _numbers_near(kb, name: str) -> list:
    """Numbers around the constants the conditions compare this fact with (both sides of each edge)."""
    out = {0, 1, 3}
    for cause in kb.causes.values():
        for ev in cause.evidence:
            if name in ev.when.facts:
                for node in ast.walk(ast.parse(ev.when.source, mode="eval")):
                    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
                            and not isinstance(node.value, bool):
                        c = node.value
                        out |= {c, c * 2, c / 2, c + 1, c - 1, -c}
    return sorted(out, key=repr)


# Pieces of pasted issue reports: template headings, checklists, environment lines, links, paths,
# versions and hashes (what prose() removes) among the words that stay, in odd whitespace too.
REPORT_PIECES = [
    "### System Info", "### 复现", "**Describe the bug**", "## Expected behavior:", "> ### Reproduction",
    "System Info / 系統信息", "### Who can help?", "- [x] I have searched the existing issues", "- [ ] official scripts",
    "- Python version: 3.10.14", "- `transformers` version: 4.44.2", "- PyTorch version (GPU?): 2.4.0+cu121 (True)",
    "- Platform: Linux-5.15.0-x86_64", "- 平台：Linux", "- GPU type: NVIDIA A100-SXM4-80GB", "- loss: 0.5.1",
    "- lr: 1.2.3", "Accelerate config: not found", "A clear and concise description of what the bug is.",
    "请在此处填写问题描述", "https://github.com/ggerganov/llama.cpp/pull/2276", "see www.example.com/a/b?c=1",
    "@muellerzr", "/home/me/runs/sft/train.py", "./scripts/finetune.sh", r"C:\Users\me\train.py",
    "ds_config.json", "commit 3f9a2c1d", "v0.9.5", "2.0.1+cu118", "4.46.0.dev0", "loss 0.0", "loss went nan",
    "grad_norm is nan", "训练 loss 变成 nan", "CUDA out of memory during evaluation", "the saved model is empty",
    "NCCL watchdog timeout", "\u3000### 复现\u3000", "\x1c", "\x85", "\ufeff", "\U0001f600", "ＡＢＣ　ｌｏｓｓ",
    "İstanbul", "ΣΑΣ",
]
REPORT_GLUE = [" ", "\n", "\n\n", "\r\n", "\r", "\v", "\u2028", "\t"]


def agreement_reports(rng: random.Random) -> list[str]:
    """Real-looking reports (tests/test_prose.py), random mixes of REPORT_PIECES, and a paste too long
    to be read whole (its head and tail are, counted in characters: astral ones too)."""
    from test_prose import LLAMAFACTORY_STYLE, TRANSFORMERS_STYLE

    reports = [TRANSFORMERS_STYLE, LLAMAFACTORY_STYLE, TRANSFORMERS_STYLE.replace("\n", "\r\n") + "\n\n"]
    for _ in range(40):
        reports.append("".join(rng.choice(REPORT_PIECES) + rng.choice(REPORT_GLUE) for _ in range(rng.randint(3, 30))))
    reports.append(("\U0001f600 loss went nan " + LLAMAFACTORY_STYLE) * 12)
    return reports


def agreement_cases(kb, seed: int = 7, states_per_symptom: int = 25, symptoms=None) -> dict:
    """Queries, pasted reports and fact states, with what the Python matcher and engine say about each."""
    from troubleshoot.engine import State, open_questions, rank
    from troubleshoot.knowledge.expr import render_template
    from troubleshoot.matcher import SymptomMatcher, bounded
    from troubleshoot.observations import Fact
    from troubleshoot.prose import prose

    rng = random.Random(seed)
    aliases = [a for s in kb.symptoms.values() for a in s.all_aliases()]
    queries = ["loss变nan", "loss went nan", "", "  ", "模型输出重复", "怎么解决loss变nan的问题", "overflwo",
               "nccl timout after 1800 seconds", "Loss NaN!!!", "ｌｏｓｓ　ｎａｎ", "training", "12abc x 7",
               "RuntimeError: CUDA error: device-side assert triggered"]
    queries += rng.sample(aliases, min(40, len(aliases)))
    for alias in rng.sample(aliases, min(25, len(aliases))):
        chars = list(alias)
        for _ in range(rng.randint(1, 3)):                     # typos
            i = rng.randrange(len(chars) or 1)
            chars[i:i + 1] = rng.choice([[], [rng.choice("abcxyz")], chars[i:i + 1] * 2])
        words = "".join(chars).split()
        rng.shuffle(words)
        queries.append(" ".join(words))
    for alias in rng.sample(aliases, min(10, len(aliases))):   # pasted inside a longer report
        queries.append(f"[rank3]: step 1200 {alias} while training, see log above " * rng.randint(1, 3))
    words = " ".join(aliases).split()
    for _ in range(6):                                          # long pastes mixing several symptoms
        queries.append(" ".join(rng.choice(words) for _ in range(rng.randint(40, 120))))
    matcher = SymptomMatcher(kb)
    py_matches = [[[m.id, m.score] for m in matcher.match(q)] for q in queries]
    reports = agreement_reports(rng)
    py_reports = [{"clean": prose(bounded(r)), "matches": [[m.id, m.score] for m in matcher.match_report(r)]}
                  for r in reports]

    states, py_states = [], []
    for sid in symptoms or kb.symptoms:
        s = kb.symptoms[sid]
        checks = {c.fact for c in s.checks}
        names = sorted(checks | {f for c in s.causes for ev in c.evidence for f in ev.when.facts}
                       | {f for c in s.causes for fid in c.fixes if fid in kb.fixes
                          for step in kb.fixes[fid].steps for f in re.findall(r"[a-z_]+\.[a-z0-9_.]+", step)
                          if f in kb.facts})
        for _ in range(states_per_symptom):
            facts, unknown = {}, []
            for name in names:
                r = rng.random()
                if r < 0.4:
                    continue
                if r < 0.5 and name in checks:
                    unknown.append(name)
                    continue
                spec = kb.facts.get(name)
                kind = spec.type if spec else "text"
                if kind == "bool":
                    facts[name] = rng.random() < 0.5
                elif kind == "number":
                    facts[name] = rng.choice(_numbers_near(kb, name))
                elif kind == "choice":
                    facts[name] = rng.choice(spec.choices)
                else:
                    facts[name] = rng.choice(["", "x", "fp16", "none"])
            state = State(kb, {sid: 1.0}, {n: Fact(n, v, "user") for n, v in facts.items()}, set(unknown))
            values = state.values()
            steps = {fid: [render_template(step, values)[0] for step in kb.fixes[fid].steps]
                     for c in s.causes for fid in c.fixes if fid in kb.fixes}
            states.append({"symptom": sid, "facts": [[n, *_typed(v)] for n, v in facts.items()],
                           "unknown": unknown})
            py_states.append({"ranked": [[c.id, c.score, c.status] for c in rank(state)],
                              "questions": [q.fact for q in open_questions(state)], "steps": steps})
    return {"js_input": {"queries": queries, "states": states, "reports": reports}, "queries": queries,
            "matches": py_matches, "states": py_states, "reports": py_reports}


def compare_agreement(cases: dict, js: dict, min_states: int = 1) -> None:
    for query, py, got in zip(cases["queries"], cases["matches"], js["matches"]):
        assert got == py, f"search {query!r}: JS {got[:3]} != Python {py[:3]}"
    assert len(js["reports"]) == len(cases["reports"])
    for report, py, got in zip(cases["js_input"]["reports"], cases["reports"], js["reports"]):
        assert got["clean"] == py["clean"], f"prose({report[:200]!r}): JS {got['clean']!r} != Python {py['clean']!r}"
        assert got["matches"] == py["matches"], f"report {report[:200]!r}: JS {got['matches'][:3]} != Python {py['matches'][:3]}"
    compared = 0
    for state, py, got in zip(cases["js_input"]["states"], cases["states"], js["states"]):
        if got is None:
            continue
        compared += 1
        where = f"{state['symptom']} with {state['facts']} unknown {state['unknown']}"
        assert [r[0] for r in got["ranked"]] == [r[0] for r in py["ranked"]], f"ranking differs: {where}"
        for g, p in zip(got["ranked"], py["ranked"]):
            assert g[1] == pytest.approx(p[1], rel=1e-12, abs=1e-15) and g[2] == p[2], f"{g} != {p}: {where}"
        assert got["questions"] == py["questions"], f"question order differs: {where}"
        for fid, steps in py["steps"].items():
            for g, p in zip(got["steps"][fid], steps):
                if "(cannot compute" not in p:
                    assert g == p, f"{fid}: JS {g!r} != Python {p!r} ({where})"
    assert compared >= min_states


NODE = shutil.which("node")


@pytest.mark.skipif(NODE is None, reason="node is not installed (the browser test checks the same in Chromium)")
def test_js_engine_and_matcher_agree_with_python_in_node(mini_site, tmp_path):
    """Run static/llmfix.js under node on the exported data; compare with the Python engine/matcher."""
    kb, out, _ = mini_site
    _agree_in_node(kb, out, tmp_path)


@pytest.mark.skipif(NODE is None, reason="node is not installed (the browser test checks the same in Chromium)")
def test_js_agrees_with_python_on_the_shipped_knowledge(shipped_site, tmp_path):
    kb, out, _ = shipped_site
    _agree_in_node(kb, out, tmp_path, per_symptom=12)


def _agree_in_node(kb, out: Path, tmp: Path, per_symptom: int = 25) -> None:
    cases = agreement_cases(kb, states_per_symptom=per_symptom)
    (tmp / "run.js").write_text(NODE_RUNNER, encoding="utf-8")
    (tmp / "cases.json").write_text(json.dumps(cases["js_input"]), encoding="utf-8")
    result = subprocess.run([NODE, str(tmp / "run.js"), str(out), str(tmp / "cases.json")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    compare_agreement(cases, json.loads(result.stdout), min_states=len(kb.symptoms))
    # the cases reach every status and render placeholders, so the comparison covers them
    statuses = {r[2] for state in cases["states"] for r in state["ranked"]}
    assert {"untested", "ruled-out", "possible"} <= statuses, statuses
    assert any(re.search(r"<[A-Z_]+>", step) for state in cases["states"]
               for steps in state["steps"].values() for step in steps)


# --------------------------------------------------------------------------- serve
def test_serve_on_localhost_and_ctrl_c_exits_cleanly(mini_site, tmp_path):
    """`llmfix site serve --port 0 --dir SITE`: 127.0.0.1 only, serves the pages, SIGINT -> exit 0."""
    import os
    import signal
    import sys
    import urllib.request

    kb, out, _ = mini_site
    root = write_tree(tmp_path / "kb")
    env = {**os.environ, "LLMFIX_KNOWLEDGE": str(root), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "troubleshoot", "site", "serve", "--port", "0", "--dir", str(out)],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
    try:
        line = proc.stderr.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert match, line
        with urllib.request.urlopen(f"http://127.0.0.1:{match.group(1)}/symptoms/nan-loss.html", timeout=10) as resp:
            assert resp.status == 200 and b"Loss becomes NaN" in resp.read()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0
        assert "Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()


def test_serve_refuses_a_folder_without_a_site(tmp_path):
    from troubleshoot.site.build import SiteError, serve

    with pytest.raises(SiteError, match="no index.html"):
        serve(None, 0, str(tmp_path))


def _contrast(fg: str, bg: str) -> float:
    """WCAG 2 contrast ratio of two #rrggbb colours."""
    def luminance(colour: str) -> float:
        channels = [int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
        linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]
    hi, lo = sorted((luminance(fg), luminance(bg)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_status_badges_meet_wcag_aa_contrast():
    """Every status colour, in the light and the dark theme, on the page and on a card (small text: 4.5:1)."""
    css = (Path(__file__).resolve().parents[1] / "troubleshoot" / "site" / "static" / "style.css").read_text(encoding="utf-8")
    light, dark = re.findall(r":root \{(.*?)\}", css, re.S)[:2]
    for theme in (light, dark):
        colours = dict(re.findall(r"--([\w-]+): (#[0-9a-f]{6})", theme))
        for status in ("confirmed", "likely", "possible", "ruled", "untested"):
            for ground in ("bg", "card"):
                assert _contrast(colours[status], colours[ground]) >= 4.5, (status, ground, colours[status])
    assert ".badge.st-untested" in css and "st-untested .tc-head a { color: var(--fg); }" in css   # never struck through

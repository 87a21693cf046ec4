"""`llmfix ask` / `kb` end to end through click's CliRunner."""
import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from troubleshoot import cli
from troubleshoot.knowledge import load

SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "docs" / "diagnosis-v1.schema.json").read_text())


REPO = Path(__file__).resolve().parent.parent


def run(*args, input=None):
    return CliRunner().invoke(cli.main, list(args), input=input)


@pytest.fixture
def mini_cli(mini_root, monkeypatch):
    """The CLI reading the minimal knowledge tree, with stdin treated as a terminal."""
    monkeypatch.setattr("troubleshoot.knowledge.loading.knowledge_root", lambda: mini_root)
    monkeypatch.setattr(cli, "stdin_is_tty", lambda: True)
    load.cache_clear()
    yield
    load.cache_clear()


# ---------------------------------------------------------------- shipped knowledge
def test_ask_loss_went_nan_json_contract():
    result = run("ask", "--no-input", "--json", "loss went nan")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)  # exactly one JSON object on stdout
    jsonschema.validate(data, SCHEMA)
    assert data["symptoms"][0]["id"] == "nan-loss"
    assert data["causes"] and all(c["symptom"] == "nan-loss" for c in data["causes"][:3])
    assert data["questions"], "open questions are listed in --no-input mode"


def test_answer_confirms_a_cause_and_exits_1():
    result = run("ask", "--no-input", "--json", "loss is nan", "--answer", "data.mask.binary=no")
    data = json.loads(result.output)
    jsonschema.validate(data, SCHEMA)
    first = data["causes"][0]
    assert first["id"] == "nan-loss.invalid-mask" and first["status"] == "confirmed"
    assert any(e["fact"] == "data.mask.binary" and e["from"] == "user" for e in first["evidence"])
    assert result.exit_code == 1
    assert all(q["fact"] != "data.mask.binary" for q in data["questions"])


def test_terminal_report_explains_scores():
    result = run("ask", "--no-input", "loss went nan", "-a", "data.mask.binary=no", "--top", "2")
    assert "nan-loss.invalid-mask" in result.output and "why: prior" in result.output
    assert "More: llmfix kb show" in result.output


@pytest.mark.parametrize("args, message", [
    (["ask", "--no-input", "x", "--answer", "nonsense"], "expected FACT=VALUE"),
    (["ask", "--no-input", "x", "--answer", "no.such.fact=1"], "unknown fact 'no.such.fact'"),
    (["ask", "--no-input", "x", "--answer", "data.mask.binary=maybe"], "expects yes or no"),
    (["kb", "show", "no-such-id"], "unknown id 'no-such-id'"),
    (["ask", "--top", "0", "x"], "Invalid value"),
])
def test_bad_usage_is_one_line_and_exit_2(args, message):
    result = run(*args)
    assert result.exit_code == 2 and message in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("query", ["qwxz zzkv", "how do I bake bread", "what is the capital of France"])
def test_off_topic_text_is_not_something_llmfix_covers(query):
    result = run("ask", "--no-input", query)
    assert result.exit_code == 0
    assert "not something llmfix covers" in result.output and "llmfix kb list" in result.output
    data = json.loads(run("ask", "--no-input", "--json", query).stdout)
    jsonschema.validate(data, SCHEMA)
    assert data["symptoms"] == [] and data["causes"] == []


@pytest.mark.parametrize("query, says", [
    ("how do I enable flash attention in llama factory", "No fault described"),
    ("loss went from 10.5 to 2.1 and is still going down, is that normal? bf16, lr 2e-5", "No fault described"),
    ("[Feature] support for YaRN rope scaling", "No fault described"),
    ("请问如何进行多机多卡训练？用 zero3 和 bf16", "没有描述故障"),
    ("loss 正常下降，请问训练几个epoch合适", "没有描述故障"),
])
def test_a_question_without_a_fault_is_answered_in_its_language(query, says):
    """How-to, healthy progress and feature requests are not diagnosed, whatever settings they
    name (bf16, lr, zero3 are facts of the setup, not faults): the answer says no fault was
    described and what to bring, in the writer's language; JSON has no symptom and no cause."""
    result = run("ask", "--no-input", query)
    assert result.exit_code == 0 and says in result.output and "llmfix probe" in result.output
    assert "Causes" not in result.output
    data = json.loads(run("ask", "--no-input", "--json", query).stdout)
    jsonschema.validate(data, SCHEMA)
    assert data["symptoms"] == [] and data["causes"] == [] and data["weak_match"] is False


@pytest.mark.parametrize("query, symptom", [
    ("how do I fix loss nan", "nan-loss"),
    ("训练loss一直不下降，请问怎么调整？", "loss-plateau"),
    ("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB. How should I set the batch size?",
     "system-failure"),
])
def test_a_question_that_names_a_fault_is_still_diagnosed(query, symptom):
    data = json.loads(run("ask", "--no-input", "--json", query).stdout)
    assert data["symptoms"][0]["id"] == symptom and data["causes"] and not data["weak_match"]


def test_kb_list_show_lint():
    listing = run("kb", "list")
    assert listing.exit_code == 0 and "nan-loss.invalid-mask" in listing.output
    for item in ("nan-loss", "nan-loss.invalid-mask", "data.mask.binary"):
        shown = run("kb", "show", item)
        assert shown.exit_code == 0 and item in shown.output
    fix_id = load().causes["nan-loss.invalid-mask"].fixes[0]
    assert fix_id in run("kb", "show", fix_id).output
    lint = run("kb", "lint")
    assert lint.exit_code == 0, lint.output


def test_stdin_not_a_tty_never_prompts():
    result = run("ask", "loss went nan", input="")  # CliRunner stdin is not a TTY
    assert result.exit_code == 0 and "?" not in result.output.splitlines()[0]
    assert "Questions that would sharpen this" in result.output


# ---------------------------------------------------------------- interactive, minimal knowledge
def test_interactive_questions_in_order_and_answers_change_ranking(mini_cli):
    result = run("ask", "loss is nan", input="y\ny\n?\n")
    out = result.output
    mask, early, precision = (out.index(t) for t in ("attention_mask values", "first 100 steps", "Which precision"))
    assert mask < early < precision
    assert result.exit_code == 0
    report = out[out.index("Symptom: nan-loss"):]
    assert report.index("nan-loss.lr-too-high") < report.index("Ruled out: nan-loss.invalid-mask")


def test_interactive_confirmation_ends_questions(mini_cli):
    result = run("ask", "loss is nan", input="n\n")
    assert "first 100 steps" not in result.stderr  # the prompts
    assert "[confirmed" in result.output and result.exit_code == 1


def test_interactive_reprompts_on_bad_answer(mini_cli):
    result = run("ask", "loss is nan", input="perhaps\nn\n")
    assert "expects yes or no" in result.output and "[confirmed" in result.output


def test_eof_ends_cleanly_with_what_is_known(mini_cli):
    result = run("ask", "loss is nan", input="y\n")
    assert result.exit_code == 0 and "Traceback" not in result.output
    assert "nan-loss.lr-too-high" in result.output


def test_interactive_json_keeps_stdout_clean(mini_cli):
    runner = CliRunner()
    result = runner.invoke(cli.main, ["ask", "--json", "loss is nan"], input="n\n")
    data = json.loads(result.stdout)
    assert data["causes"][0]["status"] == "confirmed"
    assert "attention_mask" in result.stderr


def test_ambiguous_query_lets_the_user_pick(mini_cli, mini_root):
    twin = (mini_root / "rules" / "nan-loss.yaml").read_text()
    twin = (twin.replace("id: nan-loss\n", "id: loss-nan\n").replace("nan-loss.", "loss-nan.")
            .replace("fix-", "fix-twin-").replace("nanloss.early", "lossnan.early")
            .replace("title: Loss becomes NaN", "title: Loss becomes NaN again"))
    (mini_root / "rules" / "loss-nan.yaml").write_text(twin)
    (mini_root / "kb" / "loss-nan.md").write_text((mini_root / "kb" / "nan-loss.md").read_text().replace("nan-loss", "loss-nan"))
    listing = run("ask", "loss is nan", input="").stderr
    assert "Which of these is closest?" in listing
    number = next(line.split(")")[0].strip() for line in listing.splitlines() if "loss-nan " in line)
    result = run("ask", "loss is nan", input=f"{number}\nn\n")
    chosen = result.output[result.output.index("Symptom:"):]
    assert chosen.count("Symptom:") == 1 and "loss-nan.invalid-mask" in chosen


def test_ask_with_probe_answers_the_question_from_the_batch(tmp_path):
    import batchfactory as B

    batch = B.healthy_batch()
    batch["attention_mask"][1, 3] = 2
    path = B.save_pt(batch, tmp_path / "batch.pt")
    result = run("ask", "--no-input", "--json", "--probe", str(path), "loss went nan")
    data = json.loads(result.stdout)
    jsonschema.validate(data, SCHEMA)
    assert data["causes"][0]["id"] == "nan-loss.invalid-mask"
    assert any(e["from"] == "probe:batch" for e in data["causes"][0]["evidence"])
    assert all(q["fact"] != "data.mask.binary" for q in data["questions"])
    assert data["artifacts"][0]["kind"] == "batch" and result.exit_code == 1


def test_probe_bad_paths_are_one_line_errors(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "junk.bin").write_bytes(b"\x00\x01garbage" * 10)
    for path, message in ((tmp_path / "missing.pt", "no such file or directory"),
                          (tmp_path / "empty", "empty directory"),
                          (tmp_path / "junk.bin", "junk.bin")):
        result = run("probe", str(path))
        assert result.exit_code == 2 and message in result.output, result.output
        assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


def test_without_torch_logs_still_work_and_tensors_say_what_to_install(tmp_path):
    """`pip install llmfix` without extras: text artifacts are probed, .pt files get one line."""
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[1]
    (tmp_path / "b.pt").write_bytes(b"PK\x03\x04" + b"\x00" * 64)
    code = ("import sys; sys.modules.update(torch=None, safetensors=None, transformers=None, numpy=None)\n"
            "from troubleshoot.cli import main; main()")
    logs = subprocess.run([sys.executable, "-c", code, "probe", "examples/train.log", "examples/batch.jsonl"],
                          cwd=repo, capture_output=True, text=True)
    assert logs.returncode == 0 and "logs.spike" in logs.stdout and "Traceback" not in logs.stderr
    assert "probe 'batch' skipped: needs torch" in logs.stdout
    pt = subprocess.run([sys.executable, "-c", code, "probe", str(tmp_path / "b.pt")], cwd=repo,
                        capture_output=True, text=True)
    assert pt.returncode == 2 and "needs torch" in pt.stderr and "Traceback" not in pt.stderr


def test_unmatched_words_with_a_probe_let_the_probe_decide(tmp_path):
    import batchfactory as B

    batch = B.healthy_batch()
    batch["labels"] = batch["input_ids"].clone()
    path = B.save_pt(batch, tmp_path / "batch.pt")
    result = run("ask", "--no-input", "--json", "--probe", str(path), "qwxz zzkv")
    data = json.loads(result.stdout)
    assert data["causes"][0]["id"] == "mask-error.padding-not-ignored" and result.exit_code == 1
    empty = run("ask", "--no-input", "--json", "qwxz zzkv")
    assert empty.exit_code == 0 and json.loads(empty.stdout)["symptoms"] == []


# ---------------------------------------------------------------- statuses and symptoms on evidence (issue 12)
def test_loss_went_nan_rules_nothing_out_without_evidence():
    result = run("ask", "--no-input", "loss went nan")
    assert result.exit_code == 0 and "Ruled out" not in result.output and "ruled-out" not in result.output
    assert "[untested" in result.output
    data = json.loads(run("ask", "--no-input", "--json", "loss went nan").stdout)
    jsonschema.validate(data, SCHEMA)
    statuses = {c["status"] for c in data["causes"]}
    assert "untested" in statuses and statuses <= {"untested", "possible"}  # the words only say "NaN happened"
    scores = [c["score"] for c in data["causes"]]
    assert scores == sorted(scores, reverse=True)
    nan = data["symptoms"][0]  # "loss went nan" is itself a reading of logs.nan (text): observed, weight 1
    assert nan["id"] == "nan-loss" and nan["observed"] is True and nan["implied"] is None
    assert nan["weight"] == 1.0 and nan["match"] < nan["score"]


def test_the_example_probe_no_longer_lists_nan_loss():
    """examples/train.log has no NaN: nan-loss is contradicted, its questions are not asked."""
    result = run("probe", "--json", "examples/train.log", "examples/batch.jsonl")
    data = json.loads(result.stdout)
    jsonschema.validate(data, SCHEMA)
    symptoms = {s["id"]: s for s in data["symptoms"]}
    assert "nan-loss" not in symptoms and all(c["symptom"] != "nan-loss" for c in data["causes"])
    assert symptoms["loss-spike"]["observed"] is True and symptoms["loss-spike"]["match"] is None
    assert all(not q["fact"].startswith(("logs.nan", "nanloss.")) for q in data["questions"])
    text = run("probe", "examples/train.log", "examples/batch.jsonl").output
    assert "nan-loss" not in text and "NaN appear" not in text


@pytest.mark.parametrize("symptom, text, answer", [
    ("moe-routing", "mixtral experts", "moe.dead_experts=4"),
    ("preference-divergence", "DPO training", "logs.pref.chosen_logps_falling=true"),
    ("save-export", "saved model", "weights.empty_tensors=12"),
])
def test_a_measured_fact_shows_the_newer_symptoms_happened(symptom, text, answer):
    """observed_when of the symptoms added in issue 15: a reading that shows the symptom outranks
    a symptom the words only suggest; without it the same words leave it unobserved."""
    observed = json.loads(run("ask", "--no-input", "--json", "-a", answer, text).stdout)["symptoms"]
    assert observed[0]["id"] == symptom and observed[0]["observed"] is True
    plain = {s["id"]: s for s in json.loads(run("ask", "--no-input", "--json", text).stdout)["symptoms"]}
    assert symptom not in plain or plain[symptom]["observed"] is not True


def test_a_weak_match_lists_candidates_and_ranks_no_cause():
    data = json.loads(run("ask", "--no-input", "--json", "who won the world cup").stdout)
    jsonschema.validate(data, SCHEMA)
    assert data["weak_match"] is True and data["causes"] == [] and data["symptoms"]
    assert all(s["score"] < 0.5 and s["weight"] == 0 for s in data["symptoms"])
    text = run("ask", "--no-input", "who won the world cup").output
    assert "The match is weak" in text and f"Symptom: {data['symptoms'][0]['id']}" in text


def test_a_weak_match_asks_which_symptom_on_a_terminal(monkeypatch):
    monkeypatch.setattr(cli, "stdin_is_tty", lambda: True)
    query = "内容循环往复"  # a report the matcher is unsure of (repetition; "模型生成内容循环往复" now matches it)
    listing = run("ask", "--json", query, input="\n")
    assert "The match is weak" in listing.stderr and "Enter for none of these" in listing.stderr
    assert json.loads(listing.stdout)["weak_match"] is True
    number = next(line.split(")")[0].strip() for line in listing.stderr.splitlines() if " repetition " in line)
    chosen = json.loads(run("ask", "--json", query, input=f"{number}\n" + "?\n" * 12).stdout)
    assert chosen["weak_match"] is False and chosen["causes"][0]["symptom"] == "repetition"


# ---------------------------------------------------------------- a paste piped in: ask -
ASSERT_PASTE = ("Traceback (most recent call last):\n  File \"train.py\", line 88, in <module>\n"
                "RuntimeError: CUDA error: device-side assert triggered\n"
                "../aten/src/ATen/native/cuda/Indexing.cu:1146: indexSelectLargeIndex: block: [0,0,0], "
                "thread: [0,0,0] Assertion `srcIndex < srcSelectDimSize` failed.\n")


def test_ask_reads_a_piped_paste_and_its_tail_survives_a_long_log():
    """`... | llmfix ask -`: the paste is the description; past the console budget the head and the
    tail are kept, so the error at the end of a long console log still decides the cause."""
    data = json.loads(run("ask", "--json", "-", input=ASSERT_PASTE).stdout)
    assert data["causes"][0]["id"] == "nan-loss.token-out-of-range"
    noise = "".join(f"[rank0] step {i} loss 2.31 lr 3e-4 tokens/s 1200\n" for i in range(200_000))
    long = json.loads(run("ask", "--json", "-", input=noise + ASSERT_PASTE).stdout)
    assert long["causes"][0]["id"] == "nan-loss.token-out-of-range"


def test_ask_dash_without_a_paste_is_one_line_exit_2():
    empty = run("ask", "-", input="")
    assert empty.exit_code == 2 and "nothing was piped in" in empty.output
    closed = subprocess.run(["bash", "-c", f"'{sys.executable}' -m troubleshoot ask --no-input - <&-"],
                            capture_output=True, text=True, cwd=REPO, timeout=120)
    assert closed.returncode == 2 and "Traceback" not in closed.stderr
    assert closed.stderr.strip().count("\n") == 0 and "standard input is closed" in closed.stderr


# ---------------------------------------------------------------- folders given to kb new / site
@pytest.mark.parametrize("command", [["kb", "new", "grad-stall", "--root"], ["site", "serve", "--port", "0", "--dir"]])
@pytest.mark.parametrize("kind,problem", [("missing", "no such folder"), ("file", "not a folder")])
def test_a_folder_option_that_is_no_folder_is_our_one_line(tmp_path, command, kind, problem):
    target = tmp_path / "site-or-tree"
    if kind == "file":
        target.write_text("not a folder")
    result = run(*command, str(target))
    assert result.exit_code == 2 and result.output == f"Error: {target}: {problem}\n", result.output


def test_site_build_into_a_file_is_our_one_line(tmp_path):
    target = tmp_path / "out"
    target.write_text("x")
    result = run("site", "build", str(target))
    assert result.exit_code == 2 and result.output == f"Error: {target}: exists and is not a folder\n", result.output


# Reports whose facts were read from overlapping spans ("QLoRA" inside a longer QLoRA phrase),
# and a paste with many facts: the answer must not depend on Python's string-hash seed.
SEED_REPORTS = [
    "QLoRA训练后把lora合并到原始fp16模型，合并后效果变差",
    "Loss goes nan after 200 steps with --fp16 and lr=3e-4 on llama-2-7b, grad_norm nan, "
    "trainable params: 4194304 || all params: 6742609920",
]


@pytest.mark.parametrize("report", SEED_REPORTS, ids=["overlapping-spans", "many-facts"])
def test_the_answer_does_not_depend_on_the_hash_seed(report):
    answers = []
    for seed in ("1", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-m", "troubleshoot", "ask", "--no-input", "--json", report],
                              capture_output=True, text=True, env=env, cwd=REPO)
        answers.append(json.loads(done.stdout))
    assert answers[0] == answers[1]

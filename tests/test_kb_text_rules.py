"""Text rules for signals that several public reports of one cause share (knowledge round 5): a log
that stays empty under nohup (buffered output), an eval batch size nobody set (the default 8), an
eval loop without torch.no_grad, Megatron's padded embedding refused at load. Each rule sets its
fact from those words and stays silent on the near misses; the cause then ranks first for a report
worded that way. The phrases are written for this test in the words such reports use."""
import json

import pytest
from click.testing import CliRunner

from troubleshoot.cli import main
from troubleshoot.evidence import extract
from troubleshoot.knowledge import load


@pytest.fixture(scope="module")
def kb():
    return load()


def facts(kb, text):
    return {name: hit.value for name, hit in extract(kb, text).facts.items()}


SET = [
    ("nohup python train.py > train.log 2>&1 & and the log file stays empty for an hour", "system.logs_delayed", True),
    ("the slurm-12345.out file is not updated although the GPUs are busy", "system.logs_delayed", True),
    ("nohup.out only has one line while training runs", "system.logs_delayed", True),
    ("adding python -u to the command fixed it, the lines show up now", "system.logs_delayed", True),
    ("nohup 后台运行训练，日志文件是空的", "system.logs_delayed", True),
    ("OOM at the first eval step; I never set per_device_eval_batch_size", "evaloom.eval_batch_larger", True),
    ("eval_batch_size is left at the default while my train batch is 1", "evaloom.eval_batch_larger", True),
    ("evaluation silently uses the default batch size and runs out of memory", "evaloom.eval_batch_larger", True),
    ("没有设置 per_device_eval_batch_size，一评估就爆显存", "evaloom.eval_batch_larger", True),
    ("validation memory keeps growing, I forgot torch.no_grad in my loop", "evaloom.no_grad", False),
    ("验证循环里忘了加 torch.no_grad", "evaloom.no_grad", False),
    ("size mismatch for embedding.word_embeddings.weight: copying a param with shape torch.Size([102400, 2048])",
     "tp.vocab_padding_differs", True),
    ("模型并行加载 checkpoint 时 word embedding 大小不匹配", "tp.vocab_padding_differs", True),
]


@pytest.mark.parametrize("text,fact,value", SET)
def test_the_shared_signal_sets_the_fact(kb, text, fact, value):
    assert facts(kb, text).get(fact) == value


NEAR_MISSES = [
    ("nohup python -u train.py > train.log 2>&1 &", "system.logs_delayed"),
    ("the log file shows Watchdog caught collective operation timeout", "system.logs_delayed"),
    ("I set per_device_eval_batch_size to 1 and it still runs out of memory", "evaloom.eval_batch_larger"),
    ("training with batch size 1 is fine, evaluation runs out of memory", "evaloom.eval_batch_size"),
    ("size mismatch for model.embed_tokens.weight after resize_token_embeddings", "tp.vocab_padding_differs"),
]


@pytest.mark.parametrize("text,fact", NEAR_MISSES)
def test_near_misses_leave_the_fact_unset(kb, text, fact):
    assert fact not in facts(kb, text)


def test_an_eval_loop_under_no_grad_is_not_read_as_missing_it(kb):
    assert facts(kb, "my eval loop already runs under with torch.no_grad() and memory still grows")["evaloom.no_grad"] is True


def test_a_named_eval_batch_size_is_still_read(kb):
    assert facts(kb, "eval batch size 1 and it still runs out of memory")["evaloom.eval_batch_size"] == 1


@pytest.mark.parametrize("query,cause", [
    ("nohup python train.py > train.log 2>&1 &: the log file stays empty for an hour but nvidia-smi shows 100% "
     "utilization, is training stuck?", "system-failure.buffered-logs"),
    ("training with batch size 1 is fine but OOM when evaluation starts; I never set per_device_eval_batch_size",
     "eval-oom.eval-batch-too-large"),
    ("after converting to mcore: size mismatch for embedding.word_embeddings.weight: copying a param with shape "
     "torch.Size([102400, 2048]) from checkpoint, the shape in current model is torch.Size([102416, 2048])",
     "tp-mismatch.vocab-padding"),
])
def test_the_cause_ranks_first(query, cause):
    result = CliRunner().invoke(main, ["ask", "--no-input", "--json", "--top", "10", query])
    assert result.exit_code in (0, 1), result.output
    ranked = [c["id"] for c in json.loads(result.output)["causes"]]
    assert ranked[0] == cause, ranked[:5]

"""safetensors' shared-tensor refusal (save-export.shared-tensors-refused): the error text sets the
fact, and a report that quotes it ranks the cause first; a report without it does not."""
import pytest
from asking import ranked

from troubleshoot.evidence import extract

CAUSE = "save-export.shared-tensors-refused"
FACT = "export.shared_tensors_refused"
ERROR = ("RuntimeError: Some tensors share memory, this will lead to duplicate memory on disk and "
         "potential differences when loading them again: [{'lm_head.weight', 'model.embed_tokens.weight'}]")


@pytest.mark.parametrize("text", [
    ERROR,
    "Class MvpForCausalLM cannot be saved using safetensors",
    "see https://huggingface.co/docs/safetensors/torch_shared_tensors",
])
def test_the_error_sets_the_fact(shipped_kb, text):
    assert extract(shipped_kb, text).facts[FACT].value is True


def test_shared_memory_in_another_sense_sets_nothing(shipped_kb):
    text = "the dataloader workers run out of shared memory (/dev/shm) while saving a checkpoint"
    assert FACT not in extract(shipped_kb, text).facts


def test_a_report_quoting_the_error_ranks_the_cause_first():
    report = f"Fine-tuned gemma-2-2b with Trainer; the first checkpoint save crashes.\n{ERROR}"
    assert ranked(report)[0] == CAUSE


def test_a_tie_lost_after_loading_is_another_cause():
    report = ("After save_pretrained and from_pretrained, lm_head.weight is newly initialized and the "
              "model outputs garbage; tie_word_embeddings is true in config.json")
    assert ranked(report)[0] != CAUSE

"""Configuration dumps pasted whole into reports: DeepSpeed's engine print and Megatron's argument
list, both "name ..... value" with dot leaders (evidence/patterns.py, _LEADER). Every setting the
knowledge has a key for is read from them, as from a config file."""
from __future__ import annotations

import pytest

from troubleshoot.evidence import extract
from troubleshoot.knowledge import load

# As DeepSpeed's DeepSpeedEngine prints its configuration at start (runtime/config.py, print()).
DEEPSPEED_PRINT = """\
[2023-04-24 13:26:47,820] [INFO] [config.py:957:print] DeepSpeedEngine configuration:
[2023-04-24 13:26:47,820] [INFO] [config.py:957:print]   fp16_auto_cast ............... None
[2023-04-24 13:26:47,820] [INFO] [config.py:957:print]   fp16_enabled ................. True
[2023-04-24 13:26:47,821] [INFO] [config.py:957:print]   fp16_master_weights_and_gradients  False
[2023-04-24 13:26:47,822] [INFO] [config.py:957:print]   gradient_accumulation_steps .. 2
[2023-04-24 13:26:47,823] [INFO] [config.py:957:print]   gradient_clipping ............ 0.0
[2023-04-24 13:26:47,824] [INFO] [config.py:957:print]   initial_dynamic_scale ........ 65536
[2023-04-24 13:26:47,825] [INFO] [config.py:957:print]   zero_optimization_stage ...... 3
"""

# As Megatron-LM prints its arguments at start (megatron/training/arguments.py, _print_args).
MEGATRON_ARGS = """\
------------------------ arguments ------------------------
  adam_beta2 ...................................... 0.95
  bf16 ............................................ True
  clip_grad ....................................... 1.0
  fp16 ............................................ False
  hidden_size ..................................... 4096
  init_method_std ................................. 0.02
  lr .............................................. 0.0003
  micro_batch_size ................................ 1
  num_layers ...................................... 32
  tensor_model_parallel_size ...................... 2
-------------------- end of arguments ---------------------
"""


@pytest.fixture(scope="module")
def kb():
    return load()


@pytest.mark.parametrize("dump, expected", [
    (DEEPSPEED_PRINT, {"train.precision": "fp16", "train.grad_clip": 0.0, "train.zero_stage": 3,
                       "train.grad_accum_steps": 2}),
    (MEGATRON_ARGS, {"train.precision": "bf16", "train.grad_clip": 1.0, "train.lr": 0.0003,
                     "optimizer.beta2": 0.95, "model.hidden_size": 4096, "model.num_layers": 32,
                     "model.initializer_range": 0.02, "tp.size": 2, "train.micro_batch_size": 1}),
], ids=["deepspeed-engine-print", "megatron-arguments"])
def test_every_keyed_setting_of_a_pasted_dump_is_read(kb, dump, expected):
    got = {name: hit.value for name, hit in extract(kb, dump).facts.items()}
    assert {name: got.get(name) for name in expected} == expected



def test_each_setting_quotes_its_own_line(kb):
    """What `why` shows is the dump's line, so the user sees which printed value was read."""
    facts = extract(kb, DEEPSPEED_PRINT).facts
    assert facts["train.grad_clip"].kind == "key" and "gradient_clipping" in facts["train.grad_clip"].span

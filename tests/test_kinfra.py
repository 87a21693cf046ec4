"""Knowledge added from the kinfra survey of public tracker threads (system-failure, eval-oom,
no-grad-flow): a JIT extension build that waits on a stale lock, a GPU starved by its input
pipeline, ZeRO CPU offload that slows every step, a running loss that keeps its graph, and an
eval OOM that only one release or one model's code produces.

The words set their facts, near misses do not, the pasted lines set what their signatures say,
and short reports written for this test in the words such reports use rank the cause in the
top 3 of `llmfix ask --no-input --json`."""

import pytest
from asking import fact_value, ranked

FACT_CASES = [
    # a rank parked on the build lock of torch's JIT extension loader
    ("system.extension_lock_wait", "py-spy dump shows every rank in FileBaton.wait under _jit_compile"),
    ("system.extension_lock_wait", "there is a leftover lock in ~/.cache/torch_extensions/py310_cu121/fused_adam"),
    ("system.jit_extension_build", "Using /root/.cache/torch_extensions/py311_cu121 as PyTorch extensions root..."),
    # the GPU waiting for input
    ("system.low_gpu_util", "GPU utilization is very low, around 10%, and training takes forever"),
    ("system.low_gpu_util", "GPU utilization falls back to 0% between the batches"),
    ("system.low_gpu_util", "训练的时候GPU利用率很低，只有百分之十几"),
    ("system.dataloader_bound", "the profiler says 70% of the step time is spent in the data loader"),
    ("system.dataloader_bound", "I think the dataloader has become the bottleneck of training"),
    ("system.dataloader_bound", "the GPUs are mostly waiting for the CPUs to prepare batches"),
    ("system.dataloader_bound", "数据加载太慢，GPU一直在等"),
    ("system.dataloader_workers_set", "DataLoader(train_set, batch_size=64, num_workers=2)"),
    ("system.training_slow", "the training is extremely slow on 8 A100s"),
    ("system.training_slow", "zero3训练速度非常慢，一个step要一分钟"),
    # the host optimizer step of ZeRO-Offload
    ("system.offload_step_slow", "with optimizer offload the cpu_adam step is very slow, 8 s per step"),
    ("system.offload_step_slow", "zero2 with cpu offload is 5x slower than without it"),
    ("system.offload_step_slow", "开了 offload 之后训练变得很慢"),
    # memory climbing step after step, and the running loss that holds it
    ("system.memory_grows_per_step", "GPU memory keeps growing every iteration until CUDA out of memory"),
    ("system.memory_grows_per_step", "显存一直增加，跑到第二个epoch就OOM了"),
    ("system.loss_accumulated_with_graph", "epoch_loss is a sum of non-detached tensors"),
    ("system.loss_accumulated_with_graph", "running_loss += loss  # printed every 100 steps"),
    ("system.loss_accumulated_with_graph", "辅助loss累积了计算图，所以显存越来越大"),
    # eval-oom: the code of one model or release, and memory growing during eval
    ("evaloom.other_models_fine", "other models like qwen and llama don't have this problem"),
    ("evaloom.other_models_fine", "换成其他模型就没有这个问题"),
]


@pytest.mark.parametrize("fact, text", FACT_CASES)
def test_the_words_set_the_fact(shipped_kb, fact, text):
    assert fact_value(shipped_kb, text, fact) is True


def test_growing_eval_memory_is_an_oom_partway_through(shipped_kb):
    for text in ("during the validation loop GPU memory keeps growing", "eval的时候显存会一直增加"):
        assert fact_value(shipped_kb, text, "evaloom.oom_moment") == "partway", text


def test_volatile_means_the_eval_loop_builds_graphs(shipped_kb):
    """`volatile=True` stopped disabling autograd in PyTorch 0.4: such an eval loop has no no_grad."""
    assert fact_value(shipped_kb, "x = Variable(images.cuda(), volatile=True)", "evaloom.no_grad") is False


NEAR_MISSES = [
    # an extension that loads, a lock that is not torch's
    ("system.extension_lock_wait", "Loading extension module fused_adam... Time to load fused_adam op: 0.02 seconds"),
    ("system.extension_lock_wait", "the dataset cache has a lock file from datasets"),
    # busy GPUs; a high utilisation with low power is not an idle GPU
    ("system.low_gpu_util", "GPU utilization stays at 100% the whole time"),
    ("system.low_gpu_util", "GPU利用率100%，但是功率很低"),
    ("system.dataloader_bound", "the loss is the bottleneck of my research, not the hardware"),
    # speed words that are not a slow run
    ("system.training_slow", "the loss decreases very slowly"),
    ("system.offload_step_slow", "offload_optimizer device cpu, pin_memory true"),
    # memory that is flat, a loss logged as a number
    ("system.memory_grows_per_step", "GPU memory stays flat at 21 GB for the whole run"),
    ("system.loss_accumulated_with_graph", "total_loss += loss.item() after each step"),
    ("system.loss_accumulated_with_graph", "inside the step: loss += 0.01 * aux_loss, then loss.backward()"),
    ("evaloom.other_models_fine", "other models are bigger, so I chose this one"),
]


@pytest.mark.parametrize("fact, text", NEAR_MISSES)
def test_near_misses_set_nothing(shipped_kb, fact, text):
    assert fact_value(shipped_kb, text, fact) is None


@pytest.mark.parametrize("line, fact", [
    ('  File "/usr/lib/python3.10/site-packages/torch/utils/file_baton.py", line 42, in wait', "system.extension_lock_wait"),
    ("UserWarning: The 'train_dataloader' does not have many workers which may be a bottleneck. "
     "Consider increasing the value of the `num_workers` argument", "system.dataloader_bound"),
])
def test_the_pasted_line_sets_the_fact(shipped_kb, line, fact):
    assert fact_value(shipped_kb, line, fact) is True


REPORTS = [
    ("deepspeed training hangs at start-up, no error. The last log line is 'Using /home/me/.cache/torch_extensions/py310_cu118 "
     "as PyTorch extensions root...' and py-spy shows wait (torch/utils/file_baton.py:42) in _jit_compile",
     "system-failure.stale-extension-lock"),
    ("8 x A100 fine-tuning is far slower than expected. nvidia-smi shows GPU utilization dropping to 0% between steps and "
     "the profiler says most of the step time is spent in the data loader; dataloader_num_workers is not set",
     "system-failure.input-bound"),
    ("训练速度很慢，GPU利用率很低，数据加载是瓶颈，num_workers 只设了 1", "system-failure.input-bound"),
    ("Llama-2-13B full fine-tune with ZeRO-3, offload_optimizer device cpu and offload_param cpu: it fits, but every step "
     "takes 40 s and the cpu_adam step is very slow, GPUs idle most of the time",
     "system-failure.offload-slow"),
    ("my own PyTorch loop: GPU memory keeps growing every iteration until CUDA out of memory after 3000 steps. "
     "I log running_loss += loss each step and print it every 100 steps",
     "system-failure.graph-kept-across-steps"),
    ("自己写的预训练脚本，显存一直增加，训练一段时间后就爆显存，后来发现 aux loss 累积了计算图",
     "system-failure.graph-kept-across-steps"),
    ("LoRA fine-tuning model X with LLaMA-Factory trains fine, but the eval step runs out of CUDA memory even with "
     "per_device_eval_batch_size 1; other models like qwen and llama don't have this problem with the same config",
     "eval-oom.framework-regression"),
    ("升级 LLaMA-Factory 之后，训练正常，一到 eval 阶段就爆显存 OOM，per_device_eval_batch_size 已经是 1，降级到之前的版本就正常了",
     "eval-oom.framework-regression"),
]


@pytest.mark.parametrize("report, cause", REPORTS)
def test_the_report_ranks_the_cause_in_the_top_3(report, cause):
    top = ranked(report)[:3]
    assert cause in top, top


def test_an_oom_at_the_first_step_is_not_a_leak():
    """A config too big for the GPU fails at once; the leak needs steps to grow."""
    top = ranked("full fine-tune of a 7B model on one 24 GB GPU, batch 8, seq 4096: torch.OutOfMemoryError: "
                 "CUDA out of memory at the very first step")
    assert top.index("system-failure.train-oom") < top.index("system-failure.graph-kept-across-steps"), top[:5]


def test_a_slow_run_without_offload_is_not_the_offload():
    top = ranked("training is very slow and GPU utilization is low; offload_optimizer device none, the dataloader is the bottleneck")
    assert top[0] == "system-failure.input-bound", top[:3]

"""Knowledge added from the k10sys survey of public threads (system-failure, eval-oom): a
prediction run that loads a whole model on every GPU, an eval batch size picked automatically
(lm-evaluation-harness `--batch_size auto`), eval images whose visual tokens are not capped, and
the line Ray prints when its memory monitor kills a worker for host RAM, and a report that an
earlier commit or release of a library runs the same job.

The words set their facts, near misses do not, the pasted line sets what its signature says, and
short reports written for this test rank the cause in the top 3 of `llmfix ask --no-input --json`."""

import pytest
from asking import fact_value, ranked

FACT_CASES = [
    # prediction that copies the model to every GPU
    ("evaloom.model_on_every_gpu", "when I run predict on 8 GPUs, each GPU loads the full model and then OOMs"),
    ("evaloom.model_on_every_gpu", "all 4 GPUs load the whole model separately during inference"),
    ("evaloom.model_on_every_gpu", "推理的时候每张卡都会加载一遍完整的模型，显存不够"),
    ("evaloom.model_on_every_gpu", "72B 模型 do_predict 时所有的显卡同时加载整个模型"),
    ("evaloom.model_on_every_gpu", "看起来预测时没有做分布式加载"),
    ("evaloom.model_on_every_gpu", "听说 predict 不支持 deepspeed"),
    # an automatically chosen eval batch size
    ("evaloom.auto_batch_size", "lm_eval --model hf --model_args pretrained=my-7b --tasks mmlu --batch_size auto"),
    ("evaloom.auto_batch_size", "lm_eval ... --batch_size auto:4 runs out of memory on the second task"),
    ("evaloom.auto_batch_size", 'HFLM(pretrained=model, batch_size="auto") then simple_evaluate twice'),
    ("evaloom.auto_batch_size", "Passed argument batch_size = auto. Detecting largest batch size"),
    # eval images without a cap on their visual tokens
    ("evaloom.images_uncapped", "Qwen2-VL eval OOMs on one sample; I never set max_pixels"),
    ("evaloom.images_uncapped", "the benchmark has some very large images and the eval dies on them"),
    ("evaloom.images_uncapped", "测试集里有几张大图，一到这些样本就爆显存"),
    ("evaloom.images_uncapped", "验证集的图片分辨率很大"),
    ("evaloom.images_uncapped", "评估时没有设置 max_pixels，显存爆了"),
    # an earlier release that runs the same job
    ("dist.older_release_works", "when I build transformers from an earlier commit the same script works"),
    ("dist.older_release_works", "the older version is fine, the new one crashes at the first step"),
    ("dist.older_release_works", "it works fine with the previous release of trl"),
    ("dist.older_release_works", "换成之前的版本就正常了"),
    ("dist.older_release_works", "旧版本没有问题"),
]


@pytest.mark.parametrize("fact, text", FACT_CASES)
def test_the_words_set_the_fact(shipped_kb, fact, text):
    assert fact_value(shipped_kb, text, fact) is True


NEAR_MISSES = [
    # sharded or split models, and data split across GPUs, are not a full copy per GPU
    ("evaloom.model_on_every_gpu", "with FSDP the model is sharded across all GPUs"),
    ("evaloom.model_on_every_gpu", "each GPU gets a different slice of the eval set"),
    ("evaloom.model_on_every_gpu", "we load the full model on the CPU first, then move it"),
    ("evaloom.model_on_every_gpu", "每张卡分到的数据不一样"),
    # a fixed batch size, or "auto" about something else
    ("evaloom.auto_batch_size", "per_device_eval_batch_size: 8"),
    ("evaloom.auto_batch_size", "batch size 16 with torch_dtype auto"),
    # "large" that is not about images, and images already small
    ("evaloom.images_uncapped", "the large language model runs out of memory during eval"),
    ("evaloom.images_uncapped", "all images are resized to 224x224 first"),
    # "previous" and "since the last release" that are not about a library version
    ("dist.older_release_works", "the previous step works fine, step 120 crashes"),
    ("dist.older_release_works", "I have trained on this corpus since the last release of the dataset"),
    ("dist.older_release_works", "版本是 4.45"),
]


@pytest.mark.parametrize("fact, text", NEAR_MISSES)
def test_near_misses_set_nothing(shipped_kb, fact, text):
    assert fact_value(shipped_kb, text, fact) is None


@pytest.mark.parametrize("line", [
    "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
    "worker exit: exit_type = NODE_OUT_OF_MEMORY, exit_detail = memory monitor",
])
def test_the_ray_memory_monitor_line_means_host_ram(shipped_kb, line):
    assert fact_value(shipped_kb, line, "system.killed_signal9") is True


def test_a_ray_actor_that_died_of_a_segfault_is_not_the_memory_monitor(shipped_kb):
    assert fact_value(shipped_kb, "ray.exceptions.RayActorError: The actor died because of an error raised in its "
                                  "creation task", "system.killed_signal9") is None


REPORTS = [
    ("LLaMA-Factory LoRA on a 70B model trains fine with ZeRO-3 on 8 A100s, but do_predict with predict_with_generate "
     "runs out of CUDA memory when predicting: each GPU loads the full model",
     "eval-oom.model-copy-per-gpu"),
    ("batch prediction on 4 cards runs out of memory when predicting; all 4 GPUs load the whole 32B model separately",
     "eval-oom.model-copy-per-gpu"),
    ("lm_eval --model hf --tasks arc_easy,mmlu --batch_size auto: arc runs, then CUDA out of memory during evaluation "
     "on mmlu, although mmlu alone evaluates fine",
     "eval-oom.eval-batch-too-large"),
    ("evaluating Qwen2.5-VL-7B on a document benchmark: CUDA out of memory during evaluation on one sample with a very "
     "large image; max_pixels was left at the default",
     "eval-oom.long-eval-sequences"),
    ("OpenRLHF PPO with colocated vLLM engines dies while loading: ray.exceptions.OutOfMemoryError: Task was killed "
     "due to the node running low on memory",
     "system-failure.host-memory"),
    ("fine-tuning with the example script now crashes with a TypeError in the trainer; when I install the library "
     "from an earlier commit the same script works",
     "system-failure.framework-regression"),
    ("训练脚本没改，新版本启动就报错，换成之前的版本就正常了", "system-failure.framework-regression"),
]


@pytest.mark.parametrize("report, cause", REPORTS)
def test_the_report_ranks_the_cause_in_the_top_3(report, cause):
    top = ranked(report)[:3]
    assert cause in top, top


def test_a_model_that_fits_one_gpu_points_at_the_eval_batch_not_the_copies():
    """Without a word about copies on every GPU, the new cause stays behind the usual suspects."""
    top = ranked("Trainer.evaluate runs out of CUDA memory on the first eval batch; per_device_eval_batch_size is "
                 "larger than the training batch")
    assert top.index("eval-oom.eval-batch-too-large") < top.index("eval-oom.model-copy-per-gpu"), top[:5]

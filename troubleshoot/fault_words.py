"""Whether a text tells of a fault, or only asks how to do, choose or read something.

Questions about training share their words with reports of training going wrong: "how do I
enable flash attention", "学习率设置多少合适", "how many epochs should I train", "loss went from 10.5
to 2.1 and is still going down, is that normal?". Word similarity alone turns them into a symptom
("still going down" is close to the alias "loss not going down"). What a report has and such a
question lacks is a *fault word*: that something broke (error, NaN, OOM, hang, crash, 报错, 卡住),
did not happen (not decreasing, can't load, 不收敛, 不下降, 无法, 没有效果) or happened badly (repeats,
garbage, too slow, worse than, 乱码, 变差, 太慢), or a request to fix it (fix, solve, avoid, 解决).

``asks_without_fault``: the text asks how / which / how much / whether it is normal, or says
the run is going fine, and has no fault word. ``names_only_a_topic``: a one-line title that names
a method, model, framework or stage and nothing else ("DPO training", "Qwen3 fine-tuning", "关于微调
的问题"): a topic, not a report. Everything else is left to the symptom matcher.
The words are English stems and Chinese words (a Latin word inside Chinese text is bounded by
Latin letters only, so "loss为nan" says nan).
"""
from __future__ import annotations

import functools
import re
import unicodedata

_L, _R = r"(?<![a-z])", r"(?![a-z])"  # a Latin word's edges, also between Chinese characters


def _words(*alternatives: str) -> str:
    return _L + "(?:" + "|".join(alternatives) + ")"


# Something broke, happened badly, or needs fixing (English stems: "fail" is failed / fails too).
_BROKE = _words(
    r"errors?", r"exceptions?", r"traceback", r"crash", r"fail", r"broken", r"bug", r"hangs?", r"hung", r"stuck",
    r"freez", r"frozen", r"deadlock", r"time[ds]? ?out", r"killed", r"core dumped", r"out of memory", r"overflow",
    r"underflow", r"diverg", r"explod", r"blow(?:s|n)? up", r"spikes?", r"spiking", r"jump", r"plateau", r"flat",
    r"stagnat", r"collaps", r"degrad", r"worse", r"repeat", r"repetit", r"gibberish", r"garbage", r"garbled",
    r"nonsense", r"empty", r"blank", r"wrong", r"incorrect", r"mismatch", r"inconsistent", r"unexpected",
    r"abnormal", r"weird", r"strange", r"unstable", r"instabilit", r"negative", r"overfit", r"underfit", r"forget",
    r"forgot", r"hallucinat", r"slow", r"leak", r"warn", r"dead", r"vanish", r"infinite", r"endless", r"loop",
    r"truncat", r"cut off", r"incomplete", r"ignor", r"unused", r"differs?", r"differed", r"duplicat", r"bad",
    r"fluctuat", r"oscillat", r"gaps?", r"artifact", r"strongly recommend", r"missing", r"terrible", r"discrepanc",
    r"opposite", r"barely", r"hardly", r"unchanged", r"correctly", r"properly", r"con't", r"level(?:s|ed)? off",
    r"disappear", r"ramble", r"rambling", r"shak(?:y|ing|es)", r"inferior", r"poor(?:ly)?", r"panic", r"hack",
    r"sudden(?:ly)?", r"nothing but", r"(?:generat|output|return|produc)\w* nothing", r"never (?:stop|end)",
    r"(?:can'?n'?t|could ?n[o']t|cannot) (?:stop|end|load|converge|learn|train|save|run|start|reproduce)",
    r"(?:became|becomes?|got|gets|getting|grew|grows?) (?:larger|bigger|worse|higher|lower|smaller)",
    r"(?:a (?:little|bit)|slightly|rather|somewhat) (?:high|low|large|big|slow)",
    r"(?:is|are|was|were|very|so|quite|extremely) (?:big|large|huge|small|tiny|poor)",
    r"(?:zero|no|0) trainable", r"all (?:labels?|tokens?|targets?) (?:are|were|is|become) (?:-100|masked|ignored)",
    r"(?:problems?|issues?|trouble) (?:with|when|while|in|after|during|saving|loading|training)",
    r"(?:memory|vram|oom|cuda) (?:issues?|problems?)",
    r"grad\w*\W{0,3}(?:=|is|are|will be|became|becomes?)\W{0,3}none\b",
    r"(?:stays?|stayed|remains?|remained|hovers?|hovering|sits?) (?:around|at|about|near|the same|constant|flat)",
    r"keeps? (?:generat|repeat|output|talk)", r"(?:only|just) (?:output|answer|generat|return|predict|repeat|"
    r"respond|repl|produc)", r"always (?:zero|0|the same|same|constant)", r"only \d+ ?[km]b", r"zero (?:loss|grad)",
    r"too (?:high|low|large|big|small|slow|fast|much|many|long)", r"(?:lower|higher|worse) than",
    r"(?:is|are|very|so|quite|extremely) (?:low|high|slow)")
_SHORT = (_words(r"nans?", r"inf", r"ooms?", r"nccl", r"sigsegv", r"sigkill", r"segfault", r"lost", r"lose", r"loses",
                 r"losing") + _R
          + r"|[a-z]+(?:error|exception)(?![a-z])")  # ValueError, OutOfMemoryError: a pasted exception
# Something did not happen: a negation before a verb ("not decreasing", "can't load"), not before a
# noun or a doubt ("not the network alpha", "not sure which").
_DID_NOT = (_words(r"not", r"never", r"no longer", r"cannot", r"can't", r"can not", r"unable", r"doesn't",
                   r"does not", r"didn't", r"did not", r"don't", r"won't", r"isn't", r"aren't", r"wasn't", r"hasn't",
                   r"haven't") + _R
            + r"(?! sure| certain| only| the | a | an | into | in | for | with | familiar| clear| yet| know"
              r"| understand| see)"
            + "|" + _words(r"stopped", r"stops", r"stop (?:going|decreas|improv|learn|converg|mov|chang|updat)",
                           r"without (?:decreas|improv|converg|learn|going down)",
                           r"no (?:improvement|effect|change|output|progress|gradient|grad)"))
_FIX = _words(r"fix", r"solve", r"resolv", r"avoid", r"prevent", r"debug", r"workaround", r"troubleshoot",
              r"speed(?:ing)? up")
# A value of exactly zero where it should not be: "loss is 0", "loss为0", "学习率变成了0", "一直为零".
_ZERO = (r"(?:is|are|been|becomes?|became|goes to|went to|drops? to|dropped to|stays? at|stuck at|reach(?:es|ed)?"
         r"|为|变成了?|降到|降至|到了?|是|=)\s?(?:0(?:\.0+)?(?![\d%]|\.\d)|零|zero(?![a-z]))"
         r"|(?:loss|grad\w*|reward|梯度|损失)\W{0,3}0(?:\.0+)?(?![\d%]|\.\d)")
# A quantity that should fall rising, one that should rise falling.
_RISES = (_words(r"loss", r"norm", r"memory", r"usage", r"perplexity", r"ppl", r"time", r"latency") + r"[^.?!\n]{0,30}"
          + _words(r"increas", r"rising", r"rises", r"grow", r"(?:goes|go|going|went|scales?) up", r"jump", r"higher"))
_FALLS = (_words(r"accuracy", r"performance", r"score", r"scale", r"scaler", r"reward", r"quality", r"metric",
                 r"logp", r"chosen") + r"[^.?!\n]{0,40}"
          + _words(r"drop", r"decreas", r"declin", r"fell", r"fall", r"lower", r"(?:going|goes|go|went) down")
          + r"|(?:效果|性能|指标|精度|准确率|分数|能力|奖励|reward)[^，。,.!?？！\n]{0,8}(?:下降|降低|不如)")
_CHINESE = (
    r"报错|错误|出错|异常|失败|崩溃|崩了|挂了|卡住|卡死|卡在|死锁|超时|爆显存|显存(?:不足|不够|溢出|爆)|溢出|爆炸|发散|飙升"
    r"|突增|激增|震荡|波动|上升|变大|重复|复读|乱码|胡言乱语|乱说|乱答|胡说|幻觉|遗忘|过拟合|欠拟合|变差|退化|很差|太差"
    r"|警告|负数|负值|为负|是负|无法|未能|失效|怎么回事|解决|修复|避免|太[快慢大小高低多长]|[偏过很][高低大小]|[高低]于|慢"
    r"|不全|截断|缺少|缺失|自问自答|答非所问|死循环|无限|停不下来|越.{1,2}越|丧失|失去|丢失|被杀|杀掉|未被|没被|徘徊|停滞"
    r"|[保维]持在|停在|一直(?:是|为|在)\s?\d|只(?:能|会|输出|回答|生成|有\d)|才(?:到|降到|有)|遇到.{0,8}问题|降不下"
    r"|有问题|出问题|不对劲|混乱|差距|差(?:很多|了很多|得多|太多|一些)|比[^，。,.!?？！\n]{0,16}差|不是很好|不太好|并不好|不理想"
    r"|尖峰|跳变|突变|震动|抖动|坍塌|消失|没了|无中止|不停|停止不了|乱回|中断|自动退出|退出了|挂掉|掉卡"
    r"|(?:内存|显存|loss|损失|时间|耗时)[^，。,.!?？！\n]{0,6}(?:增长|增加|上涨|升高)|未进行[^，。,.]{0,6}更新|没有(?:被)?更新"
    r"|未(?:保存|更新|生效|使用)|无.{0,4}效果|效果[^，。,.]{0,4}没有"
    r"|(?<![能好行对够])不(?:收敛|下降|降|动|变|对|行|生效|起作用|工作|正常|正确|一致|稳定|准|好|能|够|足|出|更新|保存"
    r"|匹配|了)|(?<!有)没(?:有)?(?:怎么)?(?:下降|变|效果|反应|输出|生效|收敛|学到|起作用|用|保存|使用)")
_FAULT = "|".join([_BROKE, _SHORT, _DID_NOT, _FIX, _ZERO, _RISES, _FALLS, _CHINESE])


@functools.cache
def _fault() -> re.Pattern:
    """The fault words, compiled on first use: the 4 KB alternation takes ~7 ms to compile, which
    every `llmfix ask` start paid although most reports never reach a test that needs it."""
    return re.compile(_FAULT)

# Asking how to do, set or choose something, whether a value is normal, when a model is
# supported; and saying that the run is fine.
ASKS = re.compile("|".join([
    _words(r"how (?:do|does|can|could|should|would|to|is|are|much|many|long|often|big|large)",
           r"what(?:'s| is| are)? (?:the )?(?:best|recommended|right|proper|correct|appropriate|suitable|typical|"
           r"default|optimal|reasonable|expected|final|ideal|difference|purpose|meaning|format)",
           r"which (?:\w+ ){0,3}(?:should|is|are|do|does|would|to)", r"should (?:i|we)", r"can (?:i|we|you)",
           r"is it (?:possible|ok|okay|fine|normal|expected|necessary|recommended|right|correct|reasonable)",
           r"(?:is|are) (?:this|that|it|these|those) (?:all )?(?:normal|expected|ok|okay|fine|right|correct|"
           r"reasonable|good|as expected)", r"does (?:it|this|that) (?:look|seem) (?:normal|right|ok|fine)",
           r"(?:is|be|seems?) (?:expected|normal)", r"confirm", r"wonder(?:ing)?", r"curious",
           r"any (?:recommend|suggest|advice|tips?|guid)", r"recommend", r"suggest", r"advice",
           r"(?:could|can|would) you (?:please )?(?:share|provide|give|release|explain|tell)",
           r"would it be possible", r"is there (?:a|an|any) way", r"when (?:will|is|can|do)", r"be supported",
           r"(?:is|are) \w+ supported", r"(?:do|does|will) (?:you|it|\w+) support",
           r"(?:still )?(?:going|goes|went|came|coming) down", r"decreas(?:es|ing)", r"improv(?:es|ing)",
           r"converg\w* (?:well|nicely|normally|fine|as expected)",
           r"looks? (?:good|fine|ok|okay|normal|reasonable|right)"),
    r"如何|怎么(?!办)|怎样|多少|什么时候|[吗呢么][？?]|几个|哪个|哪些|推荐|建议|是否|能否|能不能|可不可以|可以吗|支持吗"
    r"|正常吗|正常么|正常的[吗么]|合理吗|合适|为佳|请教|可以.{0,12}吗|有没有|正常下降|在下降|持续下降|稳步下降|下降正常|下降中"
    r"|在降|收敛(?:了|得?很好|正常)|效果(?:不错|很好|挺好)",
]))


def _text(text: str) -> str:
    return unicodedata.normalize("NFKC", text).lower().replace("’", "'")


def names_a_fault(text: str) -> bool:
    """The text says something went wrong, did not happen, or asks how to fix it."""
    return bool(_fault().search(_text(text)))


# That something failed, errored or raised, said of every symptom alike ("微调chatglm2报错",
# "Fine-tuning failure", a pasted RuntimeError): a fault, but not which one.
_FAILED = re.compile(_words(r"errors?", r"fail\w*", r"exceptions?", r"traceback", r"bugs?", r"[a-z]*error",
                            r"[a-z]*exception", r"crash\w*", r"issues?", r"problems?") + _R
                     + r"|报错|错误|出错|失败|异常|问题")


def names_what_went_wrong(text: str) -> bool:
    """The text names a fault beyond that something failed or errored: what went wrong (NaN, 0,
    hangs, repeats, 不下降, 卡住)."""
    return bool(_fault().search(_FAILED.sub(" ", _text(text))))


def asks_without_fault(text: str) -> bool:
    """A question about how to do, choose or read something, or a word that the run is fine,
    with no fault word anywhere in it."""
    text = _text(text)
    return bool(ASKS.search(text)) and not _fault().search(text)


# Words a title uses to name what it is about, not what went wrong: methods, stages, frameworks,
# model families, parts of a model and a run, and the function words around them. A one-line
# title made of these words only ("GRPO training", "Qwen2.5-VL SFT", "LoRA merge", "MoE router")
# names a topic: the matcher still lists the symptoms it is close to, but claims none.
_TOPIC_EN = frozenset("""
a an the of in on for with and or to is are was be do does did what which how when where who you your we our
i my it its this that these those have has any some there here can could would should will use used using about
vs versus between into from by as at than more also new own other best practice practices during after before while
train training trained trainer fine tune tuning tuned finetune finetuning finetuned pretrain pretraining pre post
continual continued pretrained model models run runs script scripts code recipe recipes example examples guide
tutorial doc
docs documentation question questions discussion help request report version versions support release config
configuration setup setting settings parameter parameters param params hyperparameter hyperparameters experiment
experiments performance stage phase step steps epoch epochs data dataset datasets corpus sample samples batch size
length context long sequence token tokens vocab vocabulary tokenizer template chat prompt prompts inference
generation decoding serving deploy deployment evaluation eval evaluate benchmark metric metrics score scores weight
weights checkpoint checkpoints ckpt save saving load loading resume export convert conversion merge merging merged
adapter adapters base instruct reasoning thinking multimodal vision vl vlm language audio video image embedding
embeddings reward rewards critic actor policy value reference ref rollout rollouts kl entropy loss losses grad
gradient gradients norm lr learning rate scheduler warmup optimizer adam adamw muon precision mixed fp16 bf16 fp32
fp8 fp4 int8 int4 amp quantization quantized quant memory gpu gpus cpu node nodes multi single distributed parallel
parallelism tensor pipeline expert experts router routing moe dense sparse attention flash sdpa packing padding mask
masking position positional rope yarn ntk alibi activation checkpointing offload offloading zero sharding shard
shards fsdp ddp deepspeed megatron mcore accelerate transformers peft trl verl openrlhf slime nemo torchtitan
unsloth axolotl swift llamafactory factory xtuner litgpt vllm sglang ray colab kaggle lora qlora dora full sft dpo
ipo kto orpo simpo ppo grpo dapo gspo rloo rlhf rlvr rl reinforce distillation distill alignment preference rm cpt
llama qwen mistral mixtral gemma phi deepseek glm chatglm baichuan internlm intern yi gpt oss bert t5 bloom falcon
olmo minicpm llava internvl kimi minimax mamba rwkv opt pythia starcoder codellama vicuna alpaca nemotron granite
smollm tinyllama mllm llm llms lm hf huggingface pytorch torch jax
curve curves log logs logging format formats choice choose combination combine alpha rank scale scaling test
testing result results trend trends final value values initial first continue update updates implement
implementation readme md capability capabilities ability abilities comparison compare optimal free task
tasks domain specific custom customized input inputs output outputs behavior behaviour detail details
""".split())
_TOPIC_ZH = re.compile("|".join(sorted("""
微调 训练 预训练 继续预训练 二次预训练 增量预训练 全参数 全参 全量 参数
超参 量化 合并 导出 转换 强化学习 多模态 长文本 上下文 大模型 模型
关于 问题 咨询 请教 求助 部署 推理 数据集 数据 分布式 多机 多卡 单卡
显卡 使用 进行 一下 一些 相关 方法 方式 流程 脚本 代码 配置 设置
教程 文档 实验 效果 版本 支持 评估 评测 奖励 损失 梯度 学习率 权重
检查点 保存 加载 断点续训 混合精度 半精度 精度 显存 内存 注意力 掩码
位置编码 专家 路由 负载均衡 张量并行 流水线并行 并行 对齐 偏好 蒸馏
思考 模板 对话 多轮 分词器 词表 扩充 框架 基座 指令 任务 领域 垂直
曲线 日志 格式 样例 示例 结合 选择 实验 指标 性能 能力 最终 初始
分类 阶段 过程 时候 结果 情况 方案 策略 技巧 经验 细节 原理 实现
疑问 疑惑 讨论 分享 单机 值 之后 以后 之前 期间 基于
""".split(), key=len, reverse=True)))
_TOPIC_FILLER = frozenset("的和与及了吗呢吧是在中后时用对把被将从个这那些于为以")
_SIZE_OR_VERSION = re.compile(r"(?:v?\d[\d.]*[a-z]{0,3}|[a-z]\d+[a-z]?\d*)")  # 7b, 2.5, v3, a3b, 4bit, h100, x1


def names_only_a_topic(text: str) -> bool:
    """A one-line text, with no fault word, whose every word names a method, stage, framework,
    model or part of a run ("DPO training", "Qwen3 fine-tuning", "MoE router", "关于微调的问题")."""
    text = _text(text).strip()
    if not text or "\n" in text:
        return False
    chinese = "" if text.isascii() else "".join(re.findall(r"[\u3400-\u9fff]+", text))
    if any(ch not in _TOPIC_FILLER for ch in _TOPIC_ZH.sub("", chinese)):
        return False
    words = re.findall(r"[a-z0-9][a-z0-9.]*", text if not chinese else re.sub(r"[\u3400-\u9fff]+", " ", text))
    for word in words:
        word = word.strip(".")
        bare = re.sub(r"[\d.]+[a-z]{0,2}$", "", word) or word  # qwen2.5 -> qwen, llama3 -> llama
        if not (_SIZE_OR_VERSION.fullmatch(word) or bare in _TOPIC_EN or bare.rstrip("s") in _TOPIC_EN):
            return False
    return bool(words or chinese) and not _fault().search(text)  # the costly test last

"""Ids that other tools rely on (DESIGN.md "Contracts"): they must exist and never change."""

SCHEMA = "llmfix/diagnosis-v1"

SYMPTOM_IDS = (
    "nan-loss", "fp16-overflow", "loss-spike", "loss-plateau", "repetition", "forgetting", "eval-oom",
    "bad-init", "mask-error", "no-grad-flow", "tp-mismatch", "data-artifacts", "system-failure",
    "position-encoding", "zero-loss", "preference-divergence", "moe-routing", "save-export",
)

CAUSE_IDS = (
    "nan-loss.invalid-mask", "nan-loss.no-target-tokens", "nan-loss.nonfinite-data",
    "nan-loss.nonfinite-weights", "nan-loss.token-out-of-range", "nan-loss.lr-too-high",
    "nan-loss.grad-explosion", "nan-loss.unsafe-math", "nan-loss.bad-init",
    "fp16-overflow.activation-overflow", "fp16-overflow.loss-scale-collapse",
    "loss-spike.warmup-end", "loss-spike.adam-beta2", "loss-spike.bad-data-window",
    "loss-spike.lr-too-high", "loss-spike.init-std", "loss-spike.no-embed-norm",
    "loss-plateau.no-grad-flow", "loss-plateau.lr-mistuned",
    "repetition.missing-eos", "repetition.eos-masked", "repetition.eos-config-mismatch",
    "forgetting.no-replay", "forgetting.full-finetune-drift",
    "eval-oom.eval-batch-too-large",
    "bad-init.std-too-large", "bad-init.output-layers-unscaled",
    "mask-error.non-binary", "mask-error.inverted", "mask-error.padding-not-ignored",
    "mask-error.causal-leak", "mask-error.mask-not-applied",
    "no-grad-flow.frozen-params", "no-grad-flow.dead-layers",
    "tp-mismatch.qkv-layout",
    "data-artifacts.escape-characters",
    # issue 15: shared with the corpus helper, who labels real threads with them
    "zero-loss.all-labels-masked", "zero-loss.attention-kernel", "zero-loss.fp16-kernel-overflow",
    "zero-loss.loss-reduction",
    "preference-divergence.likelihood-displacement", "preference-divergence.reference-mismatch",
    "preference-divergence.lr-too-high", "preference-divergence.beta-mistuned",
    "preference-divergence.reward-hacking", "preference-divergence.kl-instability",
    "preference-divergence.template-mismatch",
    "moe-routing.aux-loss-off", "moe-routing.no-router-z-loss", "moe-routing.capacity-dropping",
    "moe-routing.expert-parallel-bug", "moe-routing.router-precision",
    "save-export.zero3-empty-save", "save-export.rank0-only-save", "save-export.lora-merge-4bit",
    "save-export.conversion-rope-permute", "save-export.tied-embeddings-broken",
    "save-export.new-tokens-not-saved", "save-export.fsdp-sharded-state-dict",
    "no-grad-flow.ddp-gradient-checkpointing", "loss-plateau.fsdp-mixed-precision",
    "loss-plateau.pure-bf16-lost-updates", "nan-loss.untrained-special-tokens", "repetition.new-token-init",
    "nan-loss.framework-regression", "nan-loss.unchecked-bf16-nan", "loss-spike.fp8-divergence",
    "loss-spike.no-grad-clipping", "data-artifacts.sampler-epoch-not-set",
)

ARTICLE_SECTIONS = (
    "What you see", "Why it happens", "How to confirm", "Fixes, safest first", "What did not work",
    "When this is not the cause", "References",
)

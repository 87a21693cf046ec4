"""Ids that other tools rely on (DESIGN.md "Contracts"): they must exist and never change."""

SCHEMA = "llmfix/diagnosis-v1"

SYMPTOM_IDS = (
    "nan-loss", "fp16-overflow", "loss-spike", "loss-plateau", "repetition", "forgetting", "eval-oom",
    "bad-init", "mask-error", "no-grad-flow", "tp-mismatch", "data-artifacts", "system-failure",
    "position-encoding",
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
)

ARTICLE_SECTIONS = (
    "What you see", "Why it happens", "How to confirm", "Fixes, safest first", "What did not work",
    "When this is not the cause", "References",
)

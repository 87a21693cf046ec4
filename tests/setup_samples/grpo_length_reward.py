from datasets import load_dataset
from trl import GRPOConfig, GRPOTrainer

dataset = load_dataset("trl-lib/tldr", split="train")


def reward_len(completions, **kwargs):
    """Reward completions that are close to 20 characters."""
    return [abs(20 - len(completion)) for completion in completions]


def reward_format(completions, **kwargs):
    return [1.0 if completion.strip().endswith(".") else 0.0 for completion in completions]


args = GRPOConfig(output_dir="Qwen2-0.5B-GRPO", learning_rate=1e-6, logging_steps=10, bf16=True)
trainer = GRPOTrainer(model="Qwen/Qwen2-0.5B-Instruct", reward_funcs=[reward_len, reward_format], args=args,
                      train_dataset=dataset)
trainer.train()

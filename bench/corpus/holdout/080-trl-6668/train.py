import torch
from datasets import Dataset

from trl import SFTConfig, SFTTrainer

MODEL_ID = "EleutherAI/pythia-160m"

# Long prompt, short completion: as max_length shrinks, the completion is truncated away first.
data = Dataset.from_list(
    [
        {
            "prompt": f"You are a helpful assistant. Please answer this arithmetic question number {i}. "
                      f"Think about it carefully before responding. What is {i} plus {i}?",
            "completion": f" The answer is {2 * i}.",
        }
        for i in range(64)
    ]
)

for max_length in (128, 48, 32, 24, 16):
    args = SFTConfig(
        output_dir=f"/tmp/repro_{max_length}", max_length=max_length, completion_only_loss=True,
        packing=False, num_train_epochs=1, per_device_train_batch_size=8, learning_rate=5e-5,
        logging_steps=1, report_to="none", use_cp

from dataclasses import dataclass, field
from typing import Literal

import tyro

from opendm.constants.robot import ActionMode
from opendm.data.augmentations import NoAugmentationPipeline
from opendm.data.collator import TrainingCollator
from opendm.data.dataset import JsonlDataset
from opendm.data.transforms import (
    ChatTokenization,
    LoadImages,
    Normalize,
    PadAction,
    Pipeline,
    PixelTransform,
)
from opendm.exp.dm05_exp import (
    DM05DataConfig as _DM05DataConfig,
)
from opendm.exp.dm05_exp import (
    DM05Exp as _DM05Exp,
)
from opendm.exp.dm05_exp import (
    DM05ModelConfig as _DM05ModelConfig,
)
from opendm.exp.dm05_exp import (
    DM05OptimizerConfig as _DM05OptimizerConfig,
)
from opendm.exp.dm05_exp import (
    DM05TrainerConfig as _DM05TrainerConfig,
)


@dataclass
class DM05DataConfig(_DM05DataConfig):
    dataset_name: str = field(default="libero_pi0_all")
    action_mode: ActionMode = field(default=ActionMode.ABSOLUTE)
    add_state: bool = field(default=False)

    def build_dataset(
        self,
        processor,
        action_horizon: int,
        tokenizer_max_length: int = 1024,
    ) -> tuple:
        dataset_info = self._dataset_info()
        image_keys = dataset_info["image_keys"]
        pipeline = Pipeline([
            self._action_transform(action_horizon),
            LoadImages(image_keys=image_keys, image_dir=dataset_info["image_dir"]),
            PixelTransform(
                transform_pipeline=NoAugmentationPipeline(),
                image_keys=image_keys,
            ),
            Normalize(
                norm_stats_path=str(self.norm_stats_path(action_horizon)),
                norm_keys=["state", "action"],
                use_quantiles=True,
            ),
            ChatTokenization(
                processor=processor,
                n_bins=self.n_bins,
                max_length=tokenizer_max_length,
                image_keys=image_keys,
                add_state=self.add_state,
            ),
            PadAction(32),
        ])
        dataset = JsonlDataset(
            jsonl_dir=dataset_info["jsonl_dir"],
            transforms=pipeline,
            dataset_name=self.dataset_name,
            dataset_meta=self._dataset_meta(dataset_info),
        )

        collator = TrainingCollator(
            pad_token_id=processor.tokenizer.pad_token_id,
            max_length=tokenizer_max_length,
        )

        return dataset, collator


@dataclass
class DM05ModelConfig(_DM05ModelConfig):
    model_name_or_path: str | None = field(default=("./checkpoints/DM05"))
    chunk_size: int = field(default=10)
    llm_attn_implementation: Literal["auto", "eager", "sdpa", "flex_attention"] = field(
        default="eager"
    )
    vision_attn_implementation: Literal[
        "auto", "eager", "sdpa", "flash_attention_2"
    ] = field(default="sdpa")
    action_attn_implementation: Literal["auto", "eager", "sdpa", "flex_attention"] = (
        field(default="sdpa")
    )
    vlm_gradient_checkpointing: bool = field(default=False)
    ae_gradient_checkpointing: bool = field(default=False)


@dataclass
class DM05OptimizerConfig(_DM05OptimizerConfig):
    base_lr: float = field(default=5e-4)
    warmup_steps: int = field(default=500)


@dataclass
class DM05TrainerConfig(_DM05TrainerConfig):
    fsdp1: bool | None = field(default=False)
    per_device_train_batch_size: int = field(default=4)
    gradient_accumulation_steps: int = field(default=1)
    save_steps: int = field(default=10000)
    num_train_steps: int = field(default=50000)
    save_only_model: bool = field(default=True)


@dataclass
class DM05Exp(_DM05Exp):
    use_lora: bool | None = field(default=True)
    model_config: DM05ModelConfig = field(default_factory=DM05ModelConfig)
    optimizer_config: DM05OptimizerConfig = field(default_factory=DM05OptimizerConfig)
    trainer_config: DM05TrainerConfig = field(default_factory=DM05TrainerConfig)
    data_config: DM05DataConfig = field(default_factory=DM05DataConfig)


if __name__ == "__main__":
    exp = tyro.cli(DM05Exp)
    if exp.task == "train":
        exp.train()
    elif exp.task == "inference":
        exp.inference()
    else:
        raise ValueError(f"Invalid task: {exp.task}")

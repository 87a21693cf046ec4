"""Build data batches, tiny tokenizers and checkpoint folders for the data-probe tests.

Nothing is downloaded: the tokenizer is a ``tokenizers`` WordLevel model over 60 made-up words
saved through transformers, config files are written as the JSON that ``save_pretrained`` writes,
and the "weights" are one embedding matrix in a real safetensors file.

Token ids of the tiny vocabulary: 0 <pad>, 1 <s>, 2 </s>, 3 <unk>, 4.. words "w4" .. "w63".
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

PAD, BOS, EOS, UNK = 0, 1, 2, 3
VOCAB = 64
SPECIALS = {"<pad>": PAD, "<s>": BOS, "</s>": EOS, "<unk>": UNK}


def words(ids) -> str:
    return " ".join(f"w{int(i)}" for i in ids)


def make_tokenizer(folder: Path, *, eos: str = "</s>", pad: str | None = "<pad>", add_eos: bool = True,
                   chat_template: str | None = None, extra: dict[str, int] | None = None) -> Path:
    """A WordLevel tokenizer over <specials> + w4..w63 (+ ``extra``), saved with save_pretrained."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {**SPECIALS, **{f"w{i}": i for i in range(4, VOCAB)}, **(extra or {})}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    single = "<s> $A </s>" if add_eos else "<s> $A"
    tok.post_processor = processors.TemplateProcessing(
        single=single, special_tokens=[("<s>", BOS), ("</s>", EOS)])
    kwargs = {"bos_token": "<s>", "eos_token": eos, "unk_token": "<unk>"}
    if pad is not None:
        kwargs["pad_token"] = pad
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, **kwargs)
    if chat_template:
        fast.chat_template = chat_template
    folder.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(folder))
    return folder


def make_checkpoint(folder: Path, *, vocab: int = VOCAB, eos: int | list[int] = EOS, pad: int | None = PAD,
                    gen_eos: int | list[int] | None = None, embedding_rows: int | None = None,
                    tokenizer: bool = True, tok_eos: str = "</s>", tok_pad: str | None = "<pad>",
                    special_tokens_map: dict | None = None, **tok_kwargs) -> Path:
    """A checkpoint folder: config.json, generation_config.json, tokenizer, model.safetensors."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": vocab,
              "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 16,
              "max_position_embeddings": 128, "bos_token_id": BOS, "eos_token_id": eos,
              "pad_token_id": pad, "torch_dtype": "float32"}
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    gen = {"bos_token_id": BOS, "eos_token_id": eos if gen_eos is None else gen_eos}
    (folder / "generation_config.json").write_text(json.dumps(gen, indent=2))
    rows = embedding_rows or vocab
    save_file({"model.embed_tokens.weight": torch.zeros(rows, 8)}, str(folder / "model.safetensors"))
    if tokenizer:
        make_tokenizer(folder, eos=tok_eos, pad=tok_pad, **tok_kwargs)
    if special_tokens_map is not None:
        (folder / "special_tokens_map.json").write_text(json.dumps(special_tokens_map))
    return folder


def healthy_batch(rows: int = 4, width: int = 24, *, side: str = "right", seed: int = 0,
                  pad: int = PAD, eos: int = EOS) -> dict[str, torch.Tensor]:
    """BOS + words + EOS, padded to ``width``; mask 1 on tokens; labels = ids, -100 on padding.

    Row i has ``width - 3*i`` real tokens (row 0 is unpadded), so rows differ in padding length.
    """
    g = torch.Generator().manual_seed(seed)
    ids = torch.full((rows, width), pad, dtype=torch.long)
    mask = torch.zeros((rows, width), dtype=torch.long)
    for i in range(rows):
        n = max(4, width - 3 * i)
        body = torch.randint(4, VOCAB, (n - 2,), generator=g)
        seq = torch.cat([torch.tensor([BOS]), body, torch.tensor([eos])])
        sl = slice(0, n) if side == "right" else slice(width - n, width)
        ids[i, sl] = seq
        mask[i, sl] = 1
    labels = ids.masked_fill(mask == 0, -100)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def save_pt(batch: dict, path: Path) -> Path:
    torch.save(batch, str(path))
    return path


def save_safetensors(batch: dict, path: Path, metadata: dict | None = None) -> Path:
    from safetensors.torch import save_file

    save_file({k: v.contiguous() for k, v in batch.items() if isinstance(v, torch.Tensor)}, str(path),
              metadata=metadata)
    return path


def records_from_batch(batch: dict) -> list[dict]:
    """One JSON record per row, with the padding cut off (what a tokenised dataset stores)."""
    out = []
    mask = batch["attention_mask"]
    for i in range(mask.shape[0]):
        keep = mask[i].bool()
        out.append({k: v[i][keep].tolist() for k, v in batch.items() if isinstance(v, torch.Tensor)})
    return out


def save_jsonl(records: list[dict], path: Path) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def text_records(n: int = 40, seed: int = 0) -> list[dict]:
    """Distinct natural-looking text samples made of the tiny vocabulary's words."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        body = words(torch.randint(4, VOCAB, (12,), generator=g))
        out.append({"text": f"Sample {i}: {body}.\nSecond line of sample {i}."})
    return out

model.save_pretrained_merged("my_model", tokenizer, save_method = "merged_16bit",)
model, tokenizer = FastLanguageModel.from_pretrained(
    model_name="my_model",
    max_seq_length=max_seq_length,
    load_in_4bit=True,
    dtype=None,
)

def compute_metrics(pred):
    sacrebleu = datasets.load_metric("metrics/sacrebleu.py")
    labels_ids = pred.label_ids
    pred_ids = pred.predictions

    labels_ids[labels_ids == -100] = tokenizer.pad_token_id
    label_str = tokenizer.batch_decode(labels_ids, skip_special_tokens=True)
    pred_str = tokenizer.batch_decode(np.argmax(pred_ids[0],axis=-1), skip_special_tokens=True)

    label_string = []
    for l in label_str:
        label_string.append([l])

    sacrebleu_output = sacrebleu.compute(predictions=pred_str, references=label_string)

    return {
        "bleu": sacrebleu_output["score"]
    }

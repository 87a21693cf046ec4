preds_host = logits if preds_host is None else nested_concat(preds_host, logits, padding_index=-100)

# tasks/seq2seq/dataset.py
## line 834
if len(source_tokens) < self.max_src_length:
    source_tokens = source_tokens + [pad_id] * (self.max_src_length - len(source_tokens))
sep = len(source_tokens)
## line 858
sample = {'text': np.array(tokens, dtype=np.int64), 'target': np.array(target_ids, dtype=np.int64),
          'attention_mask': np.array(sep, dtype=np.int64),
          'loss_mask': np.array(loss_mask, dtype=np.int64),
          "position_id": np.array(position_ids, dtype=np.int64), "uid": example.guid}

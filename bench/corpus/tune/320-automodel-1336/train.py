# Current problematic implementation
loss_mask[labels == self._pad_token_id] = 0.0

# For padded sequences, ensure the embedding layer can map the token ID
tokens[tokens == self._pad_token_id] = 0
labels[labels == self._pad_token_id] = 0

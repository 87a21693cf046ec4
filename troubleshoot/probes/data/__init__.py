"""The data family: what the model is fed. ``batch.run`` is the probe (token tensors and records),
``labels`` the label / EOS / range / repetition checks, ``text`` the checks on raw text records."""

"""The model-running families: ``gradflow`` (one forward + backward, the first non-finite module
through ``nonfinite``) and ``masks`` (causality and mask invariants), sharing one model built by
``model`` from an HF folder (``hf``) or the user's ``--model-factory`` (``factory``), within ``caps``."""

"""`python -m troubleshoot ...` is `llmfix ...`."""
from .cli import main

main()

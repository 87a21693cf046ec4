"""llmfix: a troubleshooting expert system for LLM training.

Data flow (DESIGN.md): free text -> matcher; artifacts -> loaders -> probes; both -> facts ->
engine (rules/*.yaml) -> Diagnosis -> report (terminal / JSON / HTML).
"""
__version__ = "0.1.0"

"""Renderers: one Diagnosis (or one knowledge item) to terminal text, JSON or HTML."""

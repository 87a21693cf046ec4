"""README.md's sample output is the real output (regenerate: python tests/readme_samples.py)."""
import readme_samples


def test_readme_samples_match_the_real_output():
    text = readme_samples.README.read_text(encoding="utf-8")
    assert len(readme_samples.commands(text)) >= 2
    assert readme_samples.regenerate(text) == text, "README samples drifted: run python tests/readme_samples.py"


def test_regenerating_notices_a_drift():
    text = readme_samples.README.read_text(encoding="utf-8")
    drifted = text.replace("Causes, most likely first", "Causes, in some order", 1)
    assert drifted != text and readme_samples.regenerate(drifted) == text

"""Every fact of the seed documents maps to the rule ids that encode it (issue 3: ≥ 60 rows)."""
from pathlib import Path

import yaml
from seedorigins import cites

FOLDER = Path(__file__).resolve().parent / "seed_facts"


def rows():
    out = []
    for path in sorted(FOLDER.glob("*.yaml")):
        out += [(path.name, row) for row in yaml.safe_load(path.read_text(encoding="utf-8"))["rows"]]
    return out


def test_table_is_large_and_covers_every_seed():
    table = rows()
    assert len(table) >= 60
    seeds = {row["seed"] for _, row in table}
    assert {s[:3] for s in seeds} >= {"000", "001", "002", "003", "004"}


def test_every_id_in_the_table_exists(shipped_kb):
    known = shipped_kb.symptoms.keys() | shipped_kb.causes.keys() | shipped_kb.fixes.keys()
    missing = [(file, row["fact"], i) for file, row in rows() for i in row["ids"] if i not in known]
    assert not missing, missing


def test_the_encoding_rule_cites_the_seed(shipped_kb):
    """A row's ids must really carry the seed: at least one of them cites it."""
    uncited = []
    for file, row in rows():
        cited = [i for i in row["ids"]
                 if any(cites(row["seed"], s) for s in getattr(shipped_kb.causes.get(i) or shipped_kb.fixes.get(i), "sources", []))]
        if not cited and not any(i in shipped_kb.symptoms for i in row["ids"]):
            uncited.append((file, row["fact"]))
    assert not uncited, uncited

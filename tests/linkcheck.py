"""A small link checker for a built static site (no network, standard library only).

``check(root)`` parses every HTML file and returns one line per broken internal link: an href or
src (also SVG ``<a href>``) that points to a file that does not exist, to a fragment id that
the target page does not define, or that starts with ``/`` (which breaks file:// browsing).
``external_resources(root)`` returns one line per resource a page or stylesheet would *load* from
outside (script/style/img/iframe/... src or href, CSS url()/@import); plain outside ``<a>`` links
are allowed. Usable by hand too::

    python tests/linkcheck.py site/
"""
from __future__ import annotations

import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

LINK_ATTRS = {"href", "src", "xlink:href", "action", "poster", "data"}
# elements whose URL attribute makes the browser load something
LOADING = {"script": "src", "link": "href", "img": "src", "iframe": "src", "frame": "src", "embed": "src",
           "source": "src", "track": "src", "audio": "src", "video": "src", "object": "data",
           "image": "href", "use": "href", "input": "src", "feimage": "href"}
EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//)", re.I)
CSS_URL = re.compile(r"""url\(\s*['"]?([^'")\s]+)|@import\s+['"]([^'"]+)""", re.I)


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[tuple[str, str, str]] = []  # (tag, attr, value)
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name in ("id", "name") and tag != "input":
                self.ids.add(value)
            if name in LINK_ATTRS or (name == "srcset"):
                self.links.append((tag, name, value))

    handle_startendtag = handle_starttag


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    page.close()
    return page


def check(root: str | Path) -> list[str]:
    """Broken internal links under ``root``, as 'page: href -> problem' lines."""
    root = Path(root).resolve()
    pages = {p: _parse(p) for p in sorted(root.rglob("*.html"))}
    problems = []
    for path, page in pages.items():
        rel = path.relative_to(root)
        for tag, attr, value in page.links:
            if attr == "action" and tag == "form":
                continue  # a search form's fallback target; checked like a link below only if local
            if attr == "srcset" or EXTERNAL.match(value) or not value.strip():
                continue
            if value.startswith("/"):
                problems.append(f"{rel}: {value} -> absolute path (breaks file:// browsing)")
                continue
            parts = urlsplit(value)
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if parts.path and not target.is_file():
                where = "outside the site" if root not in target.parents else "missing file"
                problems.append(f"{rel}: {value} -> {where}")
                continue
            fragment = unquote(parts.fragment)
            if fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else _parse(target).ids
                if fragment not in ids:
                    problems.append(f"{rel}: {value} -> no id '{fragment}' in {target.relative_to(root)}")
    return problems


def external_resources(root: str | Path) -> list[str]:
    """Everything that would be loaded from outside the site (must be empty for air-gapped use)."""
    root = Path(root).resolve()
    found = []
    for path in sorted(root.rglob("*.html")):
        rel = path.relative_to(root)
        for tag, attr, value in _parse(path).links:
            loads = LOADING.get(tag) in (attr, attr.split(":")[-1]) or attr == "srcset"
            if loads and (EXTERNAL.match(value.strip()) or attr == "srcset" and "//" in value):
                found.append(f"{rel}: <{tag} {attr}={value!r}> loads an outside resource")
            if tag == "a" and EXTERNAL.match(value) and not value.lower().startswith(("http:", "https:", "mailto:")):
                found.append(f"{rel}: <a href={value!r}> uses a non-web scheme")
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"<style\b[^>]*>(.*?)</style>", text, re.S | re.I):
            found += [f"{rel}: inline style loads {u}" for u in _css_urls(m.group(1)) if EXTERNAL.match(u)]
    for path in sorted(root.rglob("*.css")):
        for url in _css_urls(path.read_text(encoding="utf-8")):
            if EXTERNAL.match(url) and not url.startswith("data:"):
                found.append(f"{path.relative_to(root)}: loads {url}")
    for path in sorted(root.rglob("*.js")):
        if path.parent.name == "data":
            continue  # exported knowledge: JSON text, its URLs are data for plain <a> links
        text = path.read_text(encoding="utf-8")
        for pattern in (r"\bfetch\s*\(", r"XMLHttpRequest", r"import\s*\(", r"\bimportScripts\b", r"https?://"):
            if re.search(pattern, text):
                found.append(f"{path.relative_to(root)}: script contains {pattern!r} (would load or point outside)")
    return found


def _css_urls(css: str) -> list[str]:
    return [a or b for a, b in CSS_URL.findall(css)]


if __name__ == "__main__":
    site = Path(sys.argv[1] if len(sys.argv) > 1 else "site")
    issues = check(site) + external_resources(site)
    print("\n".join(issues) or f"{site}: all links resolve, nothing loads from outside")
    sys.exit(1 if issues else 0)

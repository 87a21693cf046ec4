"""Screenshots of the built site for the README: home, a symptom after three answers, a cause, a fix,
each at desktop (1400x900) and phone (390x844) size.

    python tests/site_screenshots.py            # rebuilds the shipped site, rewrites docs/screenshots/

`tests/test_site_browser.py::test_screenshots` takes the same shots into a temporary folder on every
run (the test is skipped without Debian's chromium and chromedriver). With Pillow installed the
PNGs are reduced to 64 colours, which keeps the committed set well under 2 MB.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
SIZES = {"desktop": (1400, 900), "phone": (390, 844)}
SYMPTOM, CAUSE = "nan-loss", "nan-loss.invalid-mask"
ANSWERS = ("yes", "no", "yes")     # the first three questions, "don't know" where a number is asked


def start_chromium(profile: str):
    """Headless Debian chromium through its own chromedriver; Selenium Manager never downloads."""
    import os

    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ["SE_OFFLINE"] = "true"
    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
                "--window-size=1400,900", "--hide-scrollbars", f"--user-data-dir={profile}"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=opts)
    drv.set_page_load_timeout(30)
    viewport(drv, SIZES["desktop"])
    return drv


def viewport(drv, size: tuple[int, int]) -> None:
    """Exact CSS viewport (a window size would include the browser's own frame)."""
    drv.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": size[0], "height": size[1],
                                                               "deviceScaleFactor": 1, "mobile": size[0] < 600})


def _answer_three(drv) -> None:
    from selenium.webdriver.common.by import By

    for wanted in ANSWERS:
        card = drv.find_element(By.CSS_SELECTOR, "#ts-ask .ts-next")
        buttons = card.find_elements(By.CSS_SELECTOR, f'button[data-answer="{wanted}"]')
        (buttons or card.find_elements(By.CSS_SELECTOR, 'button[data-answer="unknown"]'))[0].click()


def _calc_fix(site: Path) -> str:
    """A fix page whose steps compute a number from the hidden size (shows the calculator)."""
    for page in sorted((site / "fixes").glob("*.html")):
        if 'data-fact="model.hidden_size"' in page.read_text(encoding="utf-8"):
            return f"fixes/{page.name}"
    return f"fixes/{min((site / 'fixes').glob('*.html')).name}"


def take(drv, site: Path, out: Path) -> list[Path]:
    """Save the eight shots into ``out`` and return their paths."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def visit(page: str) -> None:
        drv.get((site / page).resolve().as_uri())
        WebDriverWait(drv, 10).until(lambda d: d.execute_script("return document.documentElement.classList.contains('js')"))

    fix = _calc_fix(site)
    shots = []
    try:
        for size_name, size in SIZES.items():
            viewport(drv, size)
            visit("index.html")
            shots.append(_save(drv, out / f"home-{size_name}.png"))
            visit(f"symptoms/{SYMPTOM}.html")
            drv.execute_script("window.sessionStorage.clear()")
            visit(f"symptoms/{SYMPTOM}.html")
            if size_name == "desktop":
                drv.execute_script("document.getElementById('troubleshoot').scrollIntoView()")
            _answer_three(drv)
            if size_name == "desktop":
                drv.execute_script("document.getElementById('troubleshoot').scrollIntoView()")
            shots.append(_save(drv, out / f"symptom-3-answers-{size_name}.png"))
            visit(f"causes/{CAUSE}.html")
            drv.execute_script("document.getElementById('ev-h').scrollIntoView()")
            drv.execute_script("window.scrollBy(0, -document.querySelector('.top').offsetHeight - 8)")
            shots.append(_save(drv, out / f"cause-{size_name}.png"))
            visit(fix)
            field = drv.find_elements(By.CSS_SELECTOR, '.calc-facts input[data-fact="model.hidden_size"]')
            if field:
                field[0].send_keys("4096")
            shots.append(_save(drv, out / f"fix-{size_name}.png"))
    finally:
        viewport(drv, SIZES["desktop"])
    return shots


def _save(drv, path: Path) -> Path:
    drv.save_screenshot(str(path))
    try:
        from PIL import Image
    except ImportError:
        return path
    with Image.open(path) as img:
        small = img.convert("RGB").quantize(colors=64, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)
    return path


def main() -> int:
    sys.path.insert(0, str(REPO))
    from troubleshoot.knowledge import load
    from troubleshoot.site.build import build

    out = REPO / "docs" / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="llmfix-shots-") as tmp:
        site = Path(tmp) / "site"
        build(load(), site)
        drv = start_chromium(str(Path(tmp) / "profile"))
        try:
            shots = take(drv, site, out)
        finally:
            drv.quit()
    total = sum(p.stat().st_size for p in shots)
    print(f"{len(shots)} screenshots, {total / 1e6:.2f} MB, in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

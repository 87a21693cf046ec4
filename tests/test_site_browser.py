"""The built site in a real browser (headless Debian Chromium through selenium, from file://).

Searches "loss变nan" and lands on nan-loss; walks the nan-loss tree by clicking answers, checking
after every click that the page ranks the causes and picks the next question exactly like the
Python engine; runs the JS matcher/engine agreement cases inside Chromium; computes a number in a
fix step; checks phone width (no horizontal scroll) and saves screenshots (LLMFIX_UPDATE_SCREENSHOT=1
also copies one to docs/site-screenshot.png for the README).

Needs /usr/bin/chromium, /usr/bin/chromedriver (Debian: apt-get install chromium chromium-driver)
and `pip install selenium`; skipped cleanly without them. Selenium Manager never downloads
anything: the driver path is explicit and SE_OFFLINE is set.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from test_site_build import AGREEMENT_JS, agreement_cases, build_site, compare_agreement, mini_kb, shipped_or_skip

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
REPO = Path(__file__).resolve().parents[1]
TARGET = "nan-loss.invalid-mask"

pytestmark = pytest.mark.browser

selenium = pytest.importorskip("selenium", reason="selenium is not installed (pip install selenium)")
if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
    pytest.skip("needs /usr/bin/chromium and /usr/bin/chromedriver (apt-get install chromium chromium-driver)",
                allow_module_level=True)

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support import expected_conditions as ec  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


@pytest.fixture(scope="module")
def driver():
    os.environ["SE_OFFLINE"] = "true"   # Selenium Manager must not try to download a driver
    profile = tempfile.mkdtemp(prefix="llmfix-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
            "--window-size=1280,1000", f"--user-data-dir={profile}"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        drv = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=opts)
    except Exception as err:  # a broken local chromium is an environment problem, not a site bug
        shutil.rmtree(profile, ignore_errors=True)
        pytest.skip(f"headless chromium did not start: {type(err).__name__}: {str(err)[:200]}")
    drv.set_page_load_timeout(30)
    yield drv
    drv.quit()
    shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="module")
def mini(tmp_path_factory):
    kb = mini_kb(tmp_path_factory.mktemp("kb"))
    out = tmp_path_factory.mktemp("site") / "site"
    build_site(kb, out)
    return kb, out


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    kb = shipped_or_skip()
    out = tmp_path_factory.mktemp("shipped") / "site"
    build_site(kb, out)
    return kb, out


def open_page(drv, path: Path) -> None:
    drv.get(path.resolve().as_uri())
    WebDriverWait(drv, 10).until(lambda d: d.execute_script("return document.documentElement.classList.contains('js')"))


def console_errors(drv) -> list:
    return [e for e in drv.get_log("browser") if e.get("level") == "SEVERE"]


# --------------------------------------------------------------------------- search
def _search_lands_on_nan_loss(drv, site: Path) -> None:
    open_page(drv, site / "index.html")
    box = drv.find_element(By.ID, "search")
    box.send_keys("loss变nan")
    first = WebDriverWait(drv, 10).until(ec.visibility_of_element_located((By.CSS_SELECTOR, "#search-results a.hit")))
    assert first.get_attribute("href").endswith("symptoms/nan-loss.html"), first.get_attribute("href")
    first.click()
    WebDriverWait(drv, 10).until(lambda d: d.current_url.endswith("symptoms/nan-loss.html"))
    assert drv.find_element(By.TAG_NAME, "h1").text.strip() == drv.execute_script(
        "return window.LLMFIX_SYMPTOMS['nan-loss'].title")
    # Enter opens the first hit too, from any page
    box = drv.find_element(By.ID, "search")
    box.send_keys("loss went nan", Keys.ENTER)
    WebDriverWait(drv, 10).until(lambda d: d.current_url.endswith("symptoms/nan-loss.html"))
    assert not console_errors(drv), console_errors(drv)


def test_search_lands_on_nan_loss(driver, mini):
    _search_lands_on_nan_loss(driver, mini[1])


def test_search_lands_on_nan_loss_shipped(driver, shipped):
    _search_lands_on_nan_loss(driver, shipped[1])


# --------------------------------------------------------------------------- walking the tree
def _options(kb, fact: str) -> list:
    """Every answer a user could click for a question (numbers: around the rule constants)."""
    from test_site_build import _numbers_near

    spec = kb.facts[fact]
    if spec.type == "bool":
        return [True, False, None]
    if spec.type == "choice":
        return [*spec.choices, None]
    if spec.type == "number":
        return [*_numbers_near(kb, fact), None]
    return [None]


def _best_answer(kb, sid: str, facts: dict, unknown: set, fact: str, target: str = TARGET):
    """The answer that puts ``target`` furthest ahead of every other cause (the engine decides)."""
    from troubleshoot.engine import State, rank
    from troubleshoot.observations import Fact

    def margin(value):
        f = dict(facts)
        u = set(unknown)
        if value is None:
            u.add(fact)
        else:
            f[fact] = value
        ranked = rank(State(kb, {sid: 1.0}, {n: Fact(n, v, "user") for n, v in f.items()}, u))
        mine = next(c for c in ranked if c.id == target)
        best_other = max((c.score for c in ranked if c.id != target), default=0.0)
        return (mine.status == "confirmed", mine.score - best_other)

    return max(_options(kb, fact), key=margin)


def _python_view(kb, sid: str, facts: dict, unknown: set):
    from troubleshoot.engine import State, open_questions, rank
    from troubleshoot.observations import Fact

    state = State(kb, {sid: 1.0}, {n: Fact(n, v, "user") for n, v in facts.items()}, set(unknown))
    ranked = rank(state)
    confirmed = bool(ranked) and ranked[0].status == "confirmed"
    questions = [] if confirmed else [q.fact for q in open_questions(state)]
    return [(c.id, c.status) for c in ranked], questions[:1]


def _page_view(drv):
    items = drv.find_elements(By.CSS_SELECTOR, "#ts-causes li[data-cause]")
    ranked = [(li.get_attribute("data-cause"), li.get_attribute("data-status")) for li in items]
    nxt = drv.find_elements(By.CSS_SELECTOR, "#ts-ask .ts-next")
    return ranked, [n.get_attribute("data-fact") for n in nxt]


def _click_answer(drv, kb, fact: str, value) -> None:
    card = drv.find_element(By.CSS_SELECTOR, "#ts-ask .ts-next")
    if value is None:
        card.find_element(By.CSS_SELECTOR, 'button[data-answer="unknown"]').click()
    elif isinstance(value, bool):
        card.find_element(By.CSS_SELECTOR, f'button[data-answer="{"yes" if value else "no"}"]').click()
    elif kb.facts[fact].type == "choice":
        next(b for b in card.find_elements(By.CSS_SELECTOR, "button.ans") if b.get_attribute("data-answer") == value).click()
    else:
        card.find_element(By.CSS_SELECTOR, "input.ts-input").send_keys(repr(value), Keys.ENTER)


def _walk_nan_loss(drv, kb, site: Path, shots: Path, target: str = TARGET) -> list:
    """Answer the page's next question until none is left, checking the page against Python."""
    sid = "nan-loss"
    open_page(drv, site / "symptoms" / f"{sid}.html")
    drv.execute_script("window.sessionStorage.clear()")   # answers survive reloads: start fresh
    open_page(drv, site / "symptoms" / f"{sid}.html")
    facts, unknown, walked = {}, set(), []
    for _ in range(15):
        page, python = _page_view(drv), _python_view(kb, sid, facts, unknown)
        assert page == python, f"after {walked}: page shows {page[0][:3]}, Python says {python[0][:3]}"
        if not page[1]:
            break
        fact = page[1][0]
        value = _best_answer(kb, sid, facts, unknown, fact, target)
        _click_answer(drv, kb, fact, value)
        walked.append((fact, value))
        if len(walked) == 1:   # mid-walk: an answer, the next question, a re-ranked list (README shot)
            WebDriverWait(drv, 5).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, ".ts-answers li")) == 1)
            drv.execute_script("window.scrollTo(0, 0)")
            drv.save_screenshot(str(shots / "midwalk.png"))
        if value is None:
            unknown.add(fact)
        else:
            facts[fact] = value
        WebDriverWait(drv, 5).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, ".ts-answers li")) == len(walked))
    first = drv.find_element(By.CSS_SELECTOR, "#ts-causes li[data-cause]")
    assert first.get_attribute("data-cause") == target, walked
    assert first.get_attribute("data-status") in ("confirmed", "likely")
    assert not console_errors(drv), console_errors(drv)
    drv.execute_script("document.getElementById('troubleshoot').scrollIntoView()")
    drv.save_screenshot(str(shots / "walk.png"))
    return walked


def test_walk_nan_loss_tree(driver, mini, tmp_path):
    walked = _walk_nan_loss(driver, *mini, tmp_path)
    assert walked[-1] == ("data.mask.binary", False)   # confirmed: no more questions


def test_walk_nan_loss_tree_shipped(driver, shipped, tmp_path):
    walked = _walk_nan_loss(driver, *shipped, tmp_path)
    assert ("data.mask.binary", False) in walked
    _screenshots(driver, shipped[1], tmp_path, readme=True)


def test_walk_with_numbers_and_dont_know(driver, mini, tmp_path):
    """Typed numbers and "don't know" go through the same checks (towards the LR cause this time)."""
    walked = _walk_nan_loss(driver, *mini, tmp_path, target="nan-loss.lr-too-high")
    kinds = {type(v).__name__ for _, v in walked}
    assert {"float", "bool"} <= kinds or {"int", "bool"} <= kinds, walked
    assert any(f == "logs.nan_step" for f, _ in walked)   # asked only after train.lr (`after:`)
    answers = driver.find_elements(By.CSS_SELECTOR, ".ts-answers li")
    assert len(answers) == len(walked)
    answers[0].find_element(By.CSS_SELECTOR, "button.undo").click()      # "change" forgets an answer
    WebDriverWait(driver, 5).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, ".ts-answers li")) == len(walked) - 1)
    assert driver.find_element(By.CSS_SELECTOR, "#ts-ask .ts-next").get_attribute("data-fact") == walked[0][0]


def _screenshots(drv, site: Path, shots: Path, readme: bool = False) -> None:
    """Desktop screenshot of the walked troubleshooter; phone width: no horizontal scrolling."""
    if readme and os.environ.get("LLMFIX_UPDATE_SCREENSHOT") == "1":
        shutil.copyfile(shots / "midwalk.png", REPO / "docs" / "site-screenshot.png")
    try:
        drv.set_window_size(390, 844)
        for page in ("index.html", f"causes/{TARGET}.html", "sources.html", "symptoms/nan-loss.html"):
            open_page(drv, site / page)
            width, inner = drv.execute_script("return [document.documentElement.scrollWidth, window.innerWidth]")
            assert width <= inner, f"{page}: {width}px wide at a {inner}px phone screen"
        drv.execute_script("document.getElementById('troubleshoot').scrollIntoView()")
        drv.save_screenshot(str(shots / "phone.png"))
    finally:
        drv.set_window_size(1280, 1000)


def test_phone_width_and_screenshots(driver, mini, tmp_path):
    _walk_nan_loss(driver, *mini, tmp_path)
    _screenshots(driver, mini[1], tmp_path)
    assert (tmp_path / "midwalk.png").stat().st_size > 10_000 and (tmp_path / "phone.png").stat().st_size > 5_000


# --------------------------------------------------------------------------- numbers in fix steps
def test_fix_step_number_is_computed_in_the_browser(driver, mini):
    kb, site = mini
    open_page(driver, site / "fixes" / "fix-init-std.html")
    spans = driver.find_elements(By.CSS_SELECTOR, ".calc")
    assert spans[0].text == "sqrt(2/(5*model.hidden_size))"
    driver.find_element(By.CSS_SELECTOR, '.calc-facts input[data-fact="model.hidden_size"]').send_keys("11600")
    WebDriverWait(driver, 5).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".calc")[0].text == "0.00587")
    driver.find_element(By.CSS_SELECTOR, '.calc-facts input[data-fact="model.num_layers"]').send_keys("70")
    from troubleshoot.knowledge.expr import render_template

    expected, _ = render_template(kb.fixes["fix-init-std"].steps[1], {"model.num_layers": 70})
    WebDriverWait(driver, 5).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".calc")[1].text in expected)
    assert driver.find_elements(By.CSS_SELECTOR, ".calc")[2].text == "70"


# --------------------------------------------------------------------------- JS == Python in Chromium
def _agree_in_browser(drv, kb, site: Path, per_symptom: int) -> None:
    open_page(drv, site / "symptoms" / "nan-loss.html")
    cases = agreement_cases(kb, seed=11, states_per_symptom=per_symptom, symptoms=["nan-loss"])
    drv.set_script_timeout(60)
    got = drv.execute_script(AGREEMENT_JS + "\nreturn JSON.stringify(runCases(window.LLMFIX, window.LLMFIX_SEARCH,"
                             " window.LLMFIX_SYMPTOMS, arguments[0]));", cases["js_input"])
    compare_agreement(cases, json.loads(got), min_states=per_symptom)


def test_js_agrees_with_python_in_chromium(driver, mini):
    _agree_in_browser(driver, *mini, per_symptom=30)


def test_js_agrees_with_python_in_chromium_shipped(driver, shipped):
    _agree_in_browser(driver, *shipped, per_symptom=30)

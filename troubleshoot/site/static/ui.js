/* The pages: search box, interactive troubleshooter, computed numbers in fix steps.
 * All scoring is in llmfix.js; all text goes in with textContent (never innerHTML). */
(function () {
  "use strict";
  var L = window.LLMFIX;
  var root = document.body.getAttribute("data-root") || "";
  var facts = new Map();          // fact -> value {t, v}: answers and calculator inputs, shared
  var unknown = new Set();        // answered "don't know"
  var answered = [];              // facts in the order they were answered (for the list, undo)
  var symptom = null;             // this page's exported symptom, when there is one
  var SPECS = {};                 // fact -> {type, choices, unit, description}

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (attrs[k] === null || attrs[k] === undefined) return;
      if (k === "text") node.textContent = attrs[k];
      else if (k === "class") node.className = attrs[k];
      else node.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) { if (c) node.appendChild(typeof c === "string" ? document.createTextNode(c) : c); });
    return node;
  }

  // `code` spans in knowledge text, as DOM (the only markup questions use)
  function richText(text) {
    var frag = document.createDocumentFragment();
    String(text || "").split("`").forEach(function (part, i) {
      if (!part) return;
      frag.appendChild(i % 2 ? el("code", { text: part }) : document.createTextNode(part));
    });
    return frag;
  }

  function show(value) {
    if (!value) return "?";
    if (value.t === "bool") return value.v ? "yes" : "no";
    return L.pyStr(value);
  }

  function pct(p) { return p >= 0.01 ? (100 * p).toFixed(0) + "%" : (100 * p).toFixed(1) + "%"; }

  function setBars(scope) {
    Array.prototype.forEach.call((scope || document).querySelectorAll(".bar-fill[data-p]"), function (bar) {
      bar.style.width = Math.max(1, Math.min(100, 100 * Number(bar.getAttribute("data-p")))) + "%";
    });
  }

  // ------------------------------------------------------------------ search
  // An ARIA 1.2 combobox: focus stays in the input, arrow keys move aria-activedescendant over the
  // options, Enter opens the active option (or the first), Escape closes the list, then clears it.
  // A paste is scored on what it says, without issue-template text, as `llmfix ask` scores it.
  // Strong hits are the ones `llmfix ask` would offer (matcher.pick: close to the best); the other
  // matches above MIN_SCORE are listed apart, as weaker.

  function setupSearch() {
    var form = document.getElementById("search-form"), input = document.getElementById("search");
    var box = document.getElementById("search-results");
    if (!form || !input || !box || !window.LLMFIX_SEARCH) return;
    var matcher = new L.Matcher(window.LLMFIX_SEARCH), timer = null, active = -1, pasted = null;

    // An <input> holds one line, but template headings and environment lines are lines: a
    // multi-line paste (an issue report) is shown on one line (a space per line-break character,
    // so positions agree) and scored as pasted, until edited.
    function setQuery(text) {
      input.value = text.replace(/[\r\n]/g, " ");
      pasted = input.value === text ? null : { text: text, shown: input.value };
    }

    function query() { return pasted && pasted.shown === input.value ? pasted.text : input.value; }

    function options() { return Array.prototype.slice.call(box.querySelectorAll("[role=option]")); }

    function setOpen(open) {
      box.hidden = !open;
      input.setAttribute("aria-expanded", open ? "true" : "false");
      if (!open) setActive(-1);
    }

    function setActive(i) {
      var list = options();
      active = list.length ? Math.max(-1, Math.min(i, list.length - 1)) : -1;
      list.forEach(function (o, j) { o.setAttribute("aria-selected", j === active ? "true" : "false"); o.classList.toggle("active", j === active); });
      if (active >= 0) {
        input.setAttribute("aria-activedescendant", list[active].id);
        list[active].scrollIntoView({ block: "nearest" });
      } else {
        input.removeAttribute("aria-activedescendant");
      }
    }

    function group(label, id) {
      var g = el("div", { role: "group", "aria-labelledby": id });
      g.appendChild(el("p", { class: "res-h", id: id, text: label }));
      box.appendChild(g);
      return g;
    }

    function option(parent, cls, href, id, title, meta) {
      parent.appendChild(el("a", { class: "hit " + cls, href: href, role: "option", id: "opt-" + options().length,
                                   "data-id": id, "aria-selected": "false", tabindex: "-1" },
                            [el("span", { class: "hit-title", text: title }), el("span", { class: "hit-meta", text: meta })]));
    }

    function render() {
      var q = query();
      box.textContent = "";
      if (!q.trim()) { setOpen(false); return; }
      var text = matcher.clean(q), matches = matcher.match(text), strong = matcher.pick(matches).close;
      var weak = matches.filter(function (m) { return m.score >= matcher.c.MIN_SCORE && strong.indexOf(m) < 0; })
        .slice(0, Math.max(0, 6 - strong.length));
      function meta(m) { return "match " + m.score.toFixed(2) + (m.alias ? " · “" + m.alias + "”" : ""); }
      if (strong.length) {
        var g1 = group("Symptoms", "res-h-strong");
        strong.forEach(function (m) { option(g1, "hit-strong", root + m.url, m.id, m.title, meta(m)); });
      } else {
        box.appendChild(el("p", { class: "res-none", text: "No symptom matched. Try other words, e.g. “loss went nan” or “输出重复”, or paste the error line." }));
      }
      if (weak.length) {
        var g2 = group("Weaker matches", "res-h-weak");
        weak.forEach(function (m) { option(g2, "hit-weak", root + m.url, m.id, m.title, "weak " + meta(m)); });
      }
      var related = matcher.related(text, 5);
      if (related.length) {
        var g3 = group("Causes and fixes", "res-h-items");
        related.forEach(function (r) { option(g3, "hit-item", root + r.item.url, r.item.id, r.item.title, r.item.kind + " · " + r.item.id); });
      }
      setOpen(true);
      setActive(-1);
    }

    function go(i) {
      var list = options(), target = list[i >= 0 ? i : 0];
      if (target) window.location.href = target.href;
    }

    // a pasted log takes a few hundred ms to score: wait for the typing to settle first
    input.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(render, input.value.length > 200 ? 350 : 60);
    });
    input.addEventListener("paste", function (ev) {
      var text = ev.clipboardData ? ev.clipboardData.getData("text/plain") : "";
      if (!/[\r\n]/.test(text)) return;          // one line: the input takes it as it is
      ev.preventDefault();
      var v = query();
      setQuery(v.slice(0, input.selectionStart) + text + v.slice(input.selectionEnd));
      input.dispatchEvent(new Event("input"));
    });
    input.addEventListener("focus", function () { if (input.value.trim() && box.hidden) render(); });
    form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      clearTimeout(timer);
      var chosen = box.hidden ? -1 : active;
      if (chosen < 0) render();     // the list may still show an older query
      go(chosen);
    });
    input.addEventListener("keydown", function (ev) {
      var n = options().length;
      if (ev.key === "ArrowDown" || ev.key === "ArrowUp") {
        ev.preventDefault();
        clearTimeout(timer);
        if (box.hidden) { render(); n = options().length; }
        if (!n) return;
        var down = ev.key === "ArrowDown";
        setActive(active < 0 ? (down ? 0 : n - 1) : (active + (down ? 1 : -1) + n) % n);
      } else if (ev.key === "Escape") {
        ev.preventDefault();
        if (!box.hidden) setOpen(false); else input.value = "";
      } else if (ev.key === "Tab") {
        setOpen(false);
      }
    });
    box.addEventListener("mousedown", function (ev) { ev.preventDefault(); });   // keep focus in the input
    document.addEventListener("click", function (ev) { if (!form.contains(ev.target)) setOpen(false); });
    var q = new URLSearchParams(window.location.search).get("q");
    if (q) { setQuery(q); render(); }
  }

  // ------------------------------------------------------------------ computed numbers
  function exprFacts(node, out) {
    if (!node || typeof node !== "object") return out;
    if (node.k === "fact" || node.k === "unknown") out.push(node.n);
    ["l", "r", "e"].forEach(function (k) { if (node[k]) exprFacts(node[k], out); });
    ["vs", "rs", "es", "args"].forEach(function (k) { (node[k] || []).forEach(function (n) { exprFacts(n, out); }); });
    return out;
  }

  function refreshCalcs() {
    Array.prototype.forEach.call(document.querySelectorAll(".calc[data-expr]"), function (span) {
      if (!span._slot) {
        var expr = JSON.parse(span.getAttribute("data-expr"));
        span._slot = { expr: expr, fmt: span.getAttribute("data-fmt") || "", src: span.getAttribute("data-src") || "",
                       facts: exprFacts(expr, []).filter(function (f, i, a) { return a.indexOf(f) === i; }).sort() };
      }
      var r = L.computeSlot(span._slot, facts), target = span.querySelector("code") || span;
      target.textContent = r.text;
      span.classList.toggle("done", !!r.computed);
      span.classList.toggle("needs", !!r.missing);
      span.title = r.computed ? "computed from " + span._slot.src
        : r.missing ? "enter " + r.missing.join(", ") + " to compute this" : span._slot.src;
    });
    Array.prototype.forEach.call(document.querySelectorAll(".calc-facts [data-fact]"), function (input) {
      var v = facts.get(input.getAttribute("data-fact"));
      if (document.activeElement === input) return;
      input.value = !v ? "" : v.t === "bool" ? (v.v ? "yes" : "no") : L.pyStr(v);
    });
  }

  function setupCalcForms(onChange) {
    Array.prototype.forEach.call(document.querySelectorAll(".calc-facts"), function (form) {
      form.hidden = false;
      form.addEventListener("submit", function (ev) { ev.preventDefault(); });
      Array.prototype.forEach.call(form.querySelectorAll("[data-fact]"), function (input) {
        var name = input.getAttribute("data-fact"), type = input.getAttribute("data-type");
        var spec = SPECS[name] || { type: type, choices: Array.prototype.map.call(input.querySelectorAll("option"), function (o) { return o.value; }).filter(Boolean) };
        input.addEventListener(input.tagName === "SELECT" ? "change" : "input", function () {
          var raw = input.value.trim(), value = raw ? L.parseAnswer(spec, raw) : null;
          input.classList.toggle("bad", !!raw && value === null);
          if (value === null) facts.delete(name); else facts.set(name, value);
          onChange();
        });
      });
    });
  }

  // ------------------------------------------------------------------ troubleshooter
  // per page path: every site opened from file:// shares one origin, hence one sessionStorage
  function storeKey() { return "llmfix:" + window.location.pathname + ":" + symptom.id; }

  function save() {
    try {
      var data = { answers: answered.filter(function (f) { return facts.has(f); }).map(function (f) { return [f, facts.get(f)]; }),
                   unknown: Array.from(unknown) };
      window.sessionStorage.setItem(storeKey(), JSON.stringify(data));
    } catch (e) { /* storage may be off for file:// pages; answers just do not survive a reload */ }
  }

  function restore() {
    try {
      var data = JSON.parse(window.sessionStorage.getItem(storeKey()) || "null");
      if (!data) return;
      data.answers.forEach(function (pair) {
        if (SPECS[pair[0]] && pair[1] && typeof pair[1].t === "string") { facts.set(pair[0], pair[1]); answered.push(pair[0]); }
      });
      data.unknown.forEach(function (f) { if (SPECS[f]) { unknown.add(f); answered.push(f); } });
    } catch (e) { /* a stale or foreign value: start fresh */ }
  }

  // an answer keeps its place in the list when it is changed; a new one goes last
  function answer(fact, value) {
    if (answered.indexOf(fact) < 0) answered.push(fact);
    facts.delete(fact);
    unknown.delete(fact);
    if (value === null) unknown.add(fact); else facts.set(fact, value);
    reasking = null;
    renderTS(true);
  }

  var reasking = null;            // the fact whose answer the user is changing: asked again, kept until replaced

  function reask(fact) {
    reasking = fact;
    renderTS(true);
  }

  function checkOf(fact) {
    return symptom.checks.filter(function (c) { return c.fact === fact; })[0] || { fact: fact, ask: fact };
  }

  function current(fact) {
    if (unknown.has(fact)) return "unknown";
    var v = facts.get(fact);
    return v === undefined ? null : v.t === "bool" ? (v.v ? "yes" : "no") : L.pyStr(v);
  }

  function controls(q) {
    var spec = SPECS[q.fact] || { type: "text", choices: [] }, box = el("div", { class: "ts-buttons" });
    var now = current(q.fact);
    function btn(label, value, cls) {
      var key = value === null ? "unknown" : String(value);
      var b = el("button", { type: "button", class: "ans " + (cls || ""), "data-answer": key, text: label });
      if (now !== null) b.setAttribute("aria-pressed", now === key ? "true" : "false");
      b.addEventListener("click", function () { answer(q.fact, value === null ? null : L.parseAnswer(spec, value)); });
      return b;
    }
    if (spec.type === "bool") {
      box.appendChild(btn("Yes", "yes", "yes"));
      box.appendChild(btn("No", "no", "no"));
    } else if (spec.type === "choice") {
      spec.choices.forEach(function (c) { box.appendChild(btn(c, c, "choice")); });
    } else {
      var input = el("input", { type: "text", class: "ts-input", "aria-label": "Your answer: " + q.check.ask.replace(/`/g, ""),
                                inputmode: spec.type === "number" ? "decimal" : "text",
                                placeholder: spec.type === "number" ? "a number" + (spec.unit ? " (" + spec.unit + ")" : "") : "text" });
      if (now !== null && now !== "unknown") input.value = now;
      var msg = el("span", { class: "ts-msg", role: "status" });
      var ok = el("button", { type: "button", class: "ans ok", "data-answer": "submit", text: "OK" });
      var submit = function () {
        var value = L.parseAnswer(spec, input.value);
        if (value === null || !input.value.trim()) { msg.textContent = "expects " + (spec.type === "number" ? "a number" : "text"); return; }
        answer(q.fact, value);
      };
      ok.addEventListener("click", submit);
      input.addEventListener("keydown", function (ev) { if (ev.key === "Enter") { ev.preventDefault(); submit(); } });
      box.appendChild(input);
      box.appendChild(ok);
      box.appendChild(msg);
    }
    box.appendChild(btn("Don't know", null, "dk"));
    return box;
  }

  function questionCard(q, label, main) {
    var check = q.check, card = el("div", { class: main ? "ts-next" : "ts-other", "data-fact": q.fact });
    if (label) card.appendChild(el("p", { class: "ts-step", text: label }));
    card.appendChild(el("p", { class: "ts-q", tabindex: main ? "-1" : null }, [richText(check.ask)]));
    if (check.how) {
      card.appendChild(el("details", { class: "ts-how" }, [el("summary", { text: "How to tell" }), el("p", {}, [richText(check.how)])]));
    }
    if (check.probe) card.appendChild(el("p", { class: "ts-probe" }, ["or let llmfix measure it: ", el("code", { text: check.probe })]));
    card.appendChild(controls(q));
    return card;
  }

  // like RankedCause.explain(), in the page's words: 'prior 0.10 × 30 (answer 2: no) → 0.77', one
  // factor per item; answers are numbered as in "Your answers" (calculator values keep their fact name)
  function explain(r) {
    var parts = ["prior " + L.pyFormat(L.V("float", r.cause.prior), ".2f")];
    r.lines.forEach(function (line) {
      if (line.factor === 1) return;
      var vals = line.facts.filter(function (f) { return facts.has(f); }).map(function (f) {
        var n = answered.indexOf(f);
        return (n >= 0 ? "answer " + (n + 1) + ": " : f + " = ") + show(facts.get(f));
      }).join(", ");
      parts.push("× " + L.pyFormat(L.V("float", line.factor), "g") + " (" + vals + ")");
    });
    if (parts.length === 1) return parts[0];
    return parts.join(" ") + " → " + L.pyFormat(L.V("float", r.score), ".2f");
  }

  function fixClone(fid) {
    var bank = document.getElementById("fix-bank");
    var found = Array.prototype.filter.call(bank ? bank.querySelectorAll(".fix") : [], function (f) { return f.getAttribute("data-fix") === fid; })[0];
    return found ? found.cloneNode(true) : null;
  }

  // fixes open by themselves only for a cause the evidence backs: likely or confirmed
  var OPENS_FIXES = { confirmed: true, likely: true };

  function badge(status) { return el("span", { class: "badge st-" + status, text: status }); }

  // the top three, next to the question: on a phone the full ranking is a screen further down
  function liveTop(ranked) {
    var box = el("div", { class: "ts-live", "aria-hidden": "true" });
    box.appendChild(el("p", { class: "ts-live-h" }, ["Top causes now · ", el("a", { href: "#ts-rank", text: "all " + ranked.length })]));
    var list = el("ol", { class: "ts-live-list" });
    ranked.slice(0, 3).forEach(function (r) {
      list.appendChild(el("li", { class: "st-" + r.status, "data-cause": r.id }, [
        el("span", { class: "ts-live-t" }, [richText(r.cause.title)]), " ", badge(r.status),
        el("span", { class: "tc-score", text: pct(r.score) })]));
    });
    box.appendChild(list);
    return box;
  }

  function announce(ranked, next) {
    var live = document.getElementById("ts-announce");
    if (!live || !ranked.length) return;
    var top = ranked[0];
    live.textContent = "Top cause now: " + top.cause.title.replace(/`/g, "") + ", " + top.status + ", " + pct(top.score) + "." +
      (next ? " Next question: " + next.replace(/`/g, "") : "");
  }

  function renderAnswers(ask) {
    var done = el("ol", { class: "ts-answers", "aria-label": "Your answers" });
    answered.forEach(function (f) {
      var undo = el("button", { type: "button", class: "undo", "data-undo": f, text: "change",
                                "aria-label": "Change your answer to: " + checkOf(f).ask.replace(/`/g, "") });
      undo.addEventListener("click", function () { reask(f); });
      done.appendChild(el("li", { class: f === reasking ? "changing" : "" }, [
        el("span", { class: "ts-a-q" }, [richText(checkOf(f).ask)]), " ",
        el("strong", { text: unknown.has(f) ? "don't know" : show(facts.get(f)) }), " ", undo]));
    });
    ask.appendChild(el("p", { class: "ts-a-h", text: "Your answers" }));
    ask.appendChild(done);
    var reset = el("button", { type: "button", class: "reset", text: "Start over" });
    reset.addEventListener("click", function () {
      answered.forEach(function (f) { facts.delete(f); unknown.delete(f); });
      answered = [];
      reasking = null;
      renderTS(true);
    });
    ask.appendChild(reset);
  }

  function renderRanking(list, ranked, count) {
    list.textContent = "";
    ranked.forEach(function (r, i) {
      var item = el("li", { class: "tc st-" + r.status, "data-cause": r.id, "data-status": r.status });
      item.appendChild(el("div", { class: "tc-head" }, [
        el("a", { href: root + r.cause.url }, [richText(r.cause.title)]), " ", badge(r.status),
        el("span", { class: "tc-score", text: pct(r.score) })]));
      item.appendChild(el("div", { class: "bar" }, [el("span", { class: "bar-fill", "data-p": String(r.score) })]));
      item.appendChild(el("p", { class: "tc-why", text: explain(r) }));
      if (i < 3 && r.status !== "ruled-out" && count && r.cause.fixes.length) {
        var fixes = el("details", { class: "tc-fixes" }, [el("summary", { text: "Fixes (" + r.cause.fixes.length + ")" })]);
        fixes.open = i === 0 && OPENS_FIXES[r.status] === true;
        r.cause.fixes.forEach(function (fid) { var c = fixClone(fid); if (c) fixes.appendChild(c); });
        item.appendChild(fixes);
      }
      list.appendChild(item);
    });
    setBars(list);
  }

  // ``moved``: after a click (not on load), move focus to the new question and announce the new top cause
  function renderTS(moved) {
    var ask = document.getElementById("ts-ask"), list = document.getElementById("ts-causes");
    var ranked = L.rank(symptom, facts), questions = L.openQuestions(symptom, facts, unknown);
    var confirmed = ranked.length && ranked[0].status === "confirmed";
    var count = answered.length, main = null;
    ask.textContent = "";
    if (reasking) {
      main = questionCard({ fact: reasking, check: checkOf(reasking) }, "Change your answer", true);
      var keep = el("button", { type: "button", class: "ans keep", "data-answer": "keep", text: "Keep my answer" });
      keep.addEventListener("click", function () { reasking = null; renderTS(true); });
      main.querySelector(".ts-buttons").appendChild(keep);
    } else if (confirmed) {
      main = el("div", { class: "ts-done ts-next-done" }, [
        el("p", { class: "ts-q", tabindex: "-1" }, [el("strong", { text: "Confirmed: " }), richText(ranked[0].cause.title), ". "]),
        document.createTextNode("No more questions needed; its fixes are listed first.")]);
    } else if (questions.length) {
      main = questionCard(questions[0], "Question " + (count + 1) + " of at most " + (count + questions.length), true);
    } else {
      main = el("div", { class: "ts-done ts-next-done" }, [el("p", { class: "ts-q", tabindex: "-1",
        text: count ? "No question left that would change the ranking." : "This symptom has no questions to ask." })]);
    }
    ask.appendChild(main);
    if (count) ask.appendChild(liveTop(ranked));
    var rest = questions.filter(function (q) { return q.fact !== reasking && (confirmed || reasking || q !== questions[0]); });
    if (rest.length) {
      var more = el("details", { class: "ts-more" }, [el("summary", { text: "Other questions (" + rest.length + "), most useful first" })]);
      rest.forEach(function (q) { more.appendChild(questionCard(q, "", false)); });
      ask.appendChild(more);
    }
    if (count) renderAnswers(ask);
    renderRanking(list, ranked, count);
    refreshCalcs();
    save();
    if (moved) {
      var next = reasking ? checkOf(reasking).ask : !confirmed && questions.length ? questions[0].check.ask : "";
      announce(ranked, next);
      var target = main.querySelector(".ts-q");
      if (target) target.focus({ preventScroll: true });
      keepInView(main, ask.querySelector(".ts-live") || main);
    }
  }

  // scroll so that the question and the live top 3 under it are both on screen, below the sticky header
  function keepInView(first, last) {
    var header = document.querySelector(".top"), top = header ? header.getBoundingClientRect().bottom : 0;
    var a = first.getBoundingClientRect(), b = last.getBoundingClientRect();
    if (a.top < top || b.bottom > window.innerHeight) window.scrollBy(0, a.top - top - 8);
  }

  function setupTroubleshooter() {
    var box = document.getElementById("ts");
    if (!box || !window.LLMFIX_SYMPTOMS) return;
    symptom = window.LLMFIX_SYMPTOMS[box.getAttribute("data-symptom")];
    if (!symptom) return;
    SPECS = symptom.facts;
    restore();
    renderTS();
  }

  // ------------------------------------------------------------------ decision tree
  // Highlight a cause's (or a question's) lines and show their ratios: on hover, on keyboard focus,
  // and on a first tap (a second tap follows the link), since touch screens have no hover.
  function setupTree() {
    var svg = document.querySelector("svg.tree"), sec = document.getElementById("tree");
    if (!svg || !sec) return;
    var lit = null, pointer = "mouse";

    var nodes = Array.prototype.slice.call(svg.querySelectorAll("a[data-q], a[data-c]"));
    var parts = Array.prototype.slice.call(svg.querySelectorAll("path[data-q], g.lab"));

    function light(node) {
      var key = node ? (node.hasAttribute("data-c") ? "c" : "q") : null, other = key === "c" ? "q" : "c";
      var id = node ? node.getAttribute("data-" + key) : null, near = {};
      lit = node;
      svg.classList.toggle("hl", !!node);
      parts.forEach(function (part) {
        var mine = !!node && part.getAttribute("data-" + key) === id;
        if (part.tagName.toLowerCase() === "path") {
          part.classList.toggle("on", mine);
          if (mine) near[part.getAttribute("data-" + other)] = true;
        } else {     // a cause shows its ratios next to each question, a question next to each cause
          part.classList.toggle("on", mine && part.classList.contains("at-" + other));
        }
      });
      nodes.forEach(function (a) {
        a.classList.toggle("on", a === node);
        a.classList.toggle("near", !!node && near[a.getAttribute("data-" + other)] === true);
      });
    }

    nodes.forEach(function (a) {
      a.addEventListener("mouseenter", function () { light(a); });
      a.addEventListener("focus", function () { light(a); });
      a.addEventListener("pointerdown", function (ev) { pointer = ev.pointerType; });
      a.addEventListener("click", function (ev) {
        if (pointer !== "mouse" && lit !== a) { ev.preventDefault(); light(a); }
      });
    });
    svg.addEventListener("mouseleave", function () { if (pointer === "mouse") light(null); });
    svg.addEventListener("focusout", function (ev) { if (!svg.contains(ev.relatedTarget)) light(null); });

    var toggle = el("button", { type: "button", class: "tree-toggle", "aria-controls": "tree-list", "aria-expanded": "false",
                                text: "Show as a list" });
    toggle.addEventListener("click", function () {
      var list = sec.classList.toggle("as-list");
      toggle.textContent = list ? "Show as a diagram" : "Show as a list";
      toggle.setAttribute("aria-expanded", list ? "true" : "false");
    });
    sec.insertBefore(toggle, sec.querySelector(".tree-wrap"));
  }

  setupSearch();
  setupTree();
  setBars(document);
  setupTroubleshooter();
  setupCalcForms(function () { if (symptom) renderTS(); else refreshCalcs(); });
  refreshCalcs();
  document.documentElement.classList.add("js");
})();

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
  function setupSearch() {
    var form = document.getElementById("search-form"), input = document.getElementById("search");
    var box = document.getElementById("search-results");
    if (!form || !input || !box || !window.LLMFIX_SEARCH) return;
    var matcher = new L.Matcher(window.LLMFIX_SEARCH), timer = null;

    function hits() { return box.querySelectorAll("a.hit"); }

    function render() {
      var q = input.value;
      box.textContent = "";
      if (!q.trim()) { box.hidden = true; return; }
      var good = matcher.match(q).filter(function (m) { return m.score >= matcher.c.MIN_SCORE; }).slice(0, 6);
      if (good.length) {
        box.appendChild(el("p", { class: "res-h", text: "Symptoms" }));
        good.forEach(function (m, i) {
          var meta = m.id + " · match " + m.score.toFixed(2) + (m.alias ? " · “" + m.alias + "”" : "");
          box.appendChild(el("a", { class: "hit" + (i === 0 ? " first" : ""), href: root + m.url, role: "option",
                                    "data-id": m.id },
                             [el("span", { class: "hit-title", text: m.title }), el("span", { class: "hit-meta", text: meta })]));
        });
      } else {
        box.appendChild(el("p", { class: "res-none", text: "No symptom matched. Try other words, e.g. “loss went nan” or “输出重复”, or paste the error line." }));
      }
      var related = matcher.related(q, 5);
      if (related.length) {
        box.appendChild(el("p", { class: "res-h", text: "Causes and fixes" }));
        related.forEach(function (r) {
          box.appendChild(el("a", { class: "hit hit-item", href: root + r.item.url, role: "option", "data-id": r.item.id },
                             [el("span", { class: "hit-title", text: r.item.title }), el("span", { class: "hit-meta", text: r.item.kind + " · " + r.item.id })]));
        });
      }
      box.hidden = false;
    }

    // a pasted log takes a few hundred ms to score: wait for the typing to settle first
    input.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(render, input.value.length > 200 ? 350 : 60);
    });
    input.addEventListener("focus", function () { if (input.value.trim()) render(); });
    form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      render();
      var first = hits()[0];
      if (first) window.location.href = first.href;
    });
    form.addEventListener("keydown", function (ev) {
      var list = Array.prototype.slice.call(hits()), at = list.indexOf(document.activeElement);
      if (ev.key === "Escape") { box.hidden = true; input.focus(); }
      else if (ev.key === "ArrowDown" && list.length) { ev.preventDefault(); list[Math.min(at + 1, list.length - 1)].focus(); }
      else if (ev.key === "ArrowUp" && list.length) { ev.preventDefault(); (at <= 0 ? input : list[at - 1]).focus(); }
    });
    document.addEventListener("click", function (ev) { if (!form.contains(ev.target)) box.hidden = true; });
    var q = new URLSearchParams(window.location.search).get("q");
    if (q) { input.value = q; render(); }
  }

  // ------------------------------------------------------------------ computed numbers
  function exprFacts(node, out) {
    if (!node || typeof node !== "object") return out;
    if (node.k === "fact") out.push(node.n);
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

  function answer(fact, value) {
    answered = answered.filter(function (f) { return f !== fact; });
    facts.delete(fact);
    unknown.delete(fact);
    if (value === null) unknown.add(fact); else facts.set(fact, value);
    answered.push(fact);
    renderTS();
  }

  function forget(fact) {
    answered = answered.filter(function (f) { return f !== fact; });
    facts.delete(fact);
    unknown.delete(fact);
    renderTS();
  }

  function controls(q) {
    var spec = SPECS[q.fact] || { type: "text", choices: [] }, box = el("div", { class: "ts-buttons" });
    function btn(label, value, cls) {
      var b = el("button", { type: "button", class: "ans " + (cls || ""), "data-answer": label.toLowerCase() === "don't know" ? "unknown" : String(value), text: label });
      b.addEventListener("click", function () { answer(q.fact, label.toLowerCase() === "don't know" ? null : L.parseAnswer(spec, value)); });
      return b;
    }
    if (spec.type === "bool") {
      box.appendChild(btn("Yes", "yes", "yes"));
      box.appendChild(btn("No", "no", "no"));
    } else if (spec.type === "choice") {
      spec.choices.forEach(function (c) { box.appendChild(btn(c, c, "choice")); });
    } else {
      var input = el("input", { type: "text", class: "ts-input", "aria-label": q.fact,
                                inputmode: spec.type === "number" ? "decimal" : "text",
                                placeholder: spec.type === "number" ? "a number" + (spec.unit ? " (" + spec.unit + ")" : "") : "text" });
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

  function questionCard(q, n, main) {
    var check = q.check, card = el("div", { class: main ? "ts-next" : "ts-other", "data-fact": q.fact });
    if (main) card.appendChild(el("p", { class: "ts-step", text: "Question " + n }));
    card.appendChild(el("p", { class: "ts-q" }, [richText(check.ask)]));
    if (check.how) {
      card.appendChild(el("details", { class: "ts-how" }, [el("summary", { text: "How to tell" }), el("p", {}, [richText(check.how)])]));
    }
    if (check.probe) card.appendChild(el("p", { class: "ts-probe" }, ["or let llmfix measure it: ", el("code", { text: check.probe })]));
    card.appendChild(controls(q));
    return card;
  }

  // RankedCause.explain(): 'prior 0.10 × 30 (data.mask.binary = no) → 0.77', one factor per item
  function explain(r) {
    var parts = ["prior " + L.pyFormat(L.V("float", r.cause.prior), ".2f")];
    r.lines.forEach(function (line) {
      if (line.factor === 1) return;
      var vals = line.facts.filter(function (f) { return facts.has(f); })
        .map(function (f) { return f + " = " + show(facts.get(f)); }).join(", ");
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

  function renderTS() {
    var ask = document.getElementById("ts-ask"), list = document.getElementById("ts-causes");
    var ranked = L.rank(symptom, facts), questions = L.openQuestions(symptom, facts, unknown);
    var confirmed = ranked.length && ranked[0].status === "confirmed";
    ask.textContent = "";
    var count = answered.length;
    if (confirmed) {
      ask.appendChild(el("div", { class: "ts-done", role: "status" }, [
        el("strong", { text: "Confirmed: " }), document.createTextNode(ranked[0].cause.title + ". "),
        document.createTextNode("No more questions needed; its fixes are listed first.")]));
    } else if (questions.length) {
      ask.appendChild(questionCard(questions[0], count + 1, true));
    } else {
      ask.appendChild(el("p", { class: "ts-done", role: "status",
        text: count ? "No question left that would change the ranking." : "This symptom has no questions to ask." }));
    }
    var rest = confirmed ? questions : questions.slice(1);
    if (rest.length) {
      var more = el("details", { class: "ts-more" }, [el("summary", { text: "Other questions (" + rest.length + "), most useful first" })]);
      rest.forEach(function (q) { more.appendChild(questionCard(q, 0, false)); });
      ask.appendChild(more);
    }
    if (count) {
      var done = el("ol", { class: "ts-answers", "aria-label": "Your answers" });
      answered.forEach(function (f) {
        var check = symptom.checks.filter(function (c) { return c.fact === f; })[0];
        var undo = el("button", { type: "button", class: "undo", "data-undo": f, text: "change" });
        undo.addEventListener("click", function () { forget(f); });
        done.appendChild(el("li", {}, [el("span", { class: "ts-a-q" }, [richText(check ? check.ask : f)]), " ",
                                       el("strong", { text: unknown.has(f) ? "don't know" : show(facts.get(f)) }), " ", undo]));
      });
      ask.appendChild(el("p", { class: "ts-a-h", text: "Your answers" }));
      ask.appendChild(done);
      var reset = el("button", { type: "button", class: "reset", text: "Start over" });
      reset.addEventListener("click", function () {
        answered.forEach(function (f) { facts.delete(f); unknown.delete(f); });
        answered = [];
        renderTS();
      });
      ask.appendChild(reset);
    }

    list.textContent = "";
    ranked.forEach(function (r, i) {
      var item = el("li", { class: "tc st-" + r.status, "data-cause": r.id, "data-status": r.status });
      item.appendChild(el("div", { class: "tc-head" }, [
        el("a", { href: root + r.cause.url }, [richText(r.cause.title)]), " ",
        el("span", { class: "badge st-" + r.status, text: r.status }),
        el("span", { class: "tc-score", text: pct(r.score) })]));
      item.appendChild(el("div", { class: "bar" }, [el("span", { class: "bar-fill", "data-p": String(r.score) })]));
      item.appendChild(el("p", { class: "tc-why", text: explain(r) }));
      if (i < 3 && r.status !== "ruled-out" && count) {
        var fixes = el("details", { class: "tc-fixes" }, [el("summary", { text: "Fixes (" + r.cause.fixes.length + ")" })]);
        if (i === 0) fixes.open = true;
        r.cause.fixes.forEach(function (fid) { var c = fixClone(fid); if (c) fixes.appendChild(c); });
        item.appendChild(fixes);
      }
      list.appendChild(item);
    });
    setBars(list);
    refreshCalcs();
    save();
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

  setupSearch();
  setBars(document);
  setupTroubleshooter();
  setupCalcForms(function () { if (symptom) renderTS(); else refreshCalcs(); });
  refreshCalcs();
  document.documentElement.classList.add("js");
})();

/* llmfix in the browser: the symptom matcher and the inference engine, ported line by line.
 *
 * Nothing here knows any troubleshooting advice. The data comes from the build (data/*.js,
 * exported by troubleshoot/site/export.py from the loaded knowledge and a live SymptomMatcher);
 * this file only repeats the arithmetic of
 *   troubleshoot/matcher.py   tokens(), idf-weighted words, rapidfuzz ratio/token_set_ratio;
 *   troubleshoot/prose.py     prose(): a pasted report without template text (its expressions
 *                             and headings are data: prose.rules(), exported by the build);
 *   troubleshoot/engine.py    score_cause(), status_of(), rank(), open_questions();
 *   knowledge/expr.py         the whitelisted expression interpreter and render_template(),
 * with Python's semantics (int/float/bool/str/None values, chained comparisons, short-circuit
 * and/or, Python's format() mini-language). tests/test_site_build.py (node) and
 * tests/test_site_browser.py (Chromium) compare every result with the Python code.
 * No DOM in this file: ui.js draws the pages.
 */
(function (root) {
  "use strict";

  // ------------------------------------------------------------------ matcher.py: text
  var WORD = /[a-z][a-z0-9]*|[0-9]+[a-z][a-z0-9]*|[\u3400-\u9fff]+/g;
  var ZERO = /(?<![0-9A-Za-z.])0(?:\.0+)?(?!\.?[0-9A-Za-z])/g;   // matcher._ZERO: "loss 0" says 'zero'

  function normalize(text) {
    return String(text).normalize("NFKC").toLowerCase()
      .replace(/[^0-9a-z\u3400-\u9fff]+/g, " ").trim();
  }

  function stem(word) {
    var suffixes = ["ing", "ed", "es", "s"];
    for (var i = 0; i < suffixes.length; i++) {
      var s = suffixes[i];
      if (word.length > s.length + 3 && word.slice(-s.length) === s && word.slice(-2) !== "ss") {
        return word.slice(0, -s.length);
      }
    }
    return word;
  }

  function isCJK(ch) { return ch >= "\u3400" && ch <= "\u9fff"; }

  function tokens(text, stopwords, cjkStop, glue) {
    var out = [], found = normalize(String(text).replace(ZERO, " zero ")).match(WORD) || [];
    cjkStop = cjkStop || new Set();
    glue = glue || "";
    found.forEach(function (tok) {
      if (isCJK(tok[0])) {
        // a glue character ends a word: no bigram across it (matcher.CJK_GLUE)
        var runs = [], run = "";
        for (var c = 0; c < tok.length; c++) {
          if (glue.indexOf(tok[c]) >= 0) { runs.push(run); run = ""; } else run += tok[c];
        }
        runs.push(run);
        runs.forEach(function (r) {
          var grams = [];
          if (r.length === 1) grams.push(r);
          else for (var i = 0; i < r.length - 1; i++) grams.push(r.slice(i, i + 2));
          grams.forEach(function (g) { if (g && !cjkStop.has(g)) out.push(g); });
        });
      } else if (!stopwords.has(tok) && tok.length > 1) {
        out.push(stem(tok));
      }
    });
    return out;
  }

  // ------------------------------------------------------------------ prose.py: what a report says
  // prose()'s steps; what they remove (headings, expressions) is prose.rules() in the data.
  var LINE_BREAK = /\r\n|[\n\v\f\r\x1c-\x1e\x85\u2028\u2029]/;   // str.splitlines()

  function Prose(rules) {
    var self = this;
    this.headings = new Set(rules.headings);
    this.space = new RegExp("^[" + rules.space + "]+|[" + rules.space + "]+$", "g");   // str.strip()
    this.match = {}; this.search = {}; this.sub = {};
    Object.keys(rules.match).forEach(function (k) {      // re.match: anchored at the start
      self.match[k] = new RegExp("^(?:" + rules.match[k][0] + ")", rules.match[k][1]);
    });
    Object.keys(rules.search).forEach(function (k) { self.search[k] = new RegExp(rules.search[k][0], rules.search[k][1]); });
    Object.keys(rules.sub).forEach(function (k) { self.sub[k] = new RegExp(rules.sub[k][0], rules.sub[k][1] + "g"); });
  }

  Prose.prototype.strip = function (text) { return text.replace(this.space, ""); };

  Prose.prototype.clean = function (text) {           // prose.prose()
    var self = this, lines = String(text).split(LINE_BREAK);
    if (lines[lines.length - 1] === "") lines.pop();
    var out = lines.filter(function (line) { return !self.templateLine(line); }).join("\n");
    out = out.replace(this.sub.prompts, " ").replace(this.sub.url, function (url) { return self.repository(url); });
    out = out.replace(this.sub.path, function (path) { return self.fileName(path); });
    return out.replace(this.sub.hash, " ").replace(this.sub.version, " ");
  };

  Prose.prototype.repository = function (url) {       // prose._repository
    var repo = this.search.repo_url.exec(url);
    return repo ? " " + repo.groups.repo.split(".").join(" ") + " " : " ";
  };

  Prose.prototype.fileName = function (path) {         // prose._file_name
    var parts = path.split(/[\/\\]/), name = parts[parts.length - 1], dot = name.lastIndexOf(".");
    return dot >= 0 ? " " + name.slice(0, dot) + " " : " ";
  };

  Prose.prototype.templateLine = function (line) {     // prose._template_line
    var self = this;
    if (this.match.checkbox.test(line)) return true;
    var heading = line.replace(this.sub.heading_marks, "").toLowerCase().replace(/？/g, "?");
    if (heading && heading.split("/").every(function (part) { return self.headings.has(self.strip(part)); })) return true;
    var env = this.match.env_line.exec(line);
    if (!env) return false;
    var key = this.strip(env.groups.key).toLowerCase(), value = this.strip(line.slice(env[0].length));
    return this.search.env_keys.test(key) || (this.match.package_version.test(value) && !this.search.metric.test(key));
  };

  function bounded(query, limit) {                     // matcher.bounded, counted in code points
    if (query.length <= limit) return query;
    var chars = Array.from(query), half = Math.floor(limit / 2);
    if (chars.length <= limit) return query;
    return chars.slice(0, half).join("") + "\n...\n" + chars.slice(chars.length - half).join("");
  }

  // ------------------------------------------------------------------ rapidfuzz
  // Indel distance = len1 + len2 - 2 * LCS; LCS by the bit-parallel method (Hyyroe), 32 bits a word.
  var PATTERNS = new Map();                     // aliases and words come back on every keystroke

  function pattern(a) {
    var cached = PATTERNS.get(a);
    if (cached) return cached;
    var words = Math.ceil(a.length / 32), masks = new Map();
    for (var i = 0; i < a.length; i++) {
      var code = a.charCodeAt(i), m = masks.get(code);
      if (!m) { m = new Uint32Array(words); masks.set(code, m); }
      m[i >> 5] = (m[i >> 5] | (1 << (i & 31))) >>> 0;
    }
    var single = new Map();
    if (words === 1) masks.forEach(function (m, code) { single.set(code, m[0]); });
    var p = { n: a.length, words: words, masks: masks, single: single, scratch: new Uint32Array(words), chars: new Set(a) };
    if (PATTERNS.size > 20000) PATTERNS.clear();
    PATTERNS.set(a, p);
    return p;
  }

  function lcsWith(p, b, from, to) {          // LCS of the pattern and b[from:to]
    if (p.n === 0) return 0;
    var j, M, s, u, sum, carry;
    if (p.words === 1) {                         // most aliases: one 32-bit word, no arrays
      var S0 = 0xffffffff, single = p.single;
      for (j = from; j < to; j++) {
        M = single.get(b.charCodeAt(j));
        if (M === undefined) continue;           // S + (S & 0) | S == S: nothing changes
        u = (S0 & M) >>> 0;
        S0 = (((S0 + u) >>> 0) | (S0 & ~u)) >>> 0;
      }
      return p.n - popcount(S0 & (p.n === 32 ? 0xffffffff : ((1 << p.n) - 1)));
    }
    var S = p.scratch, k;
    S.fill(0xffffffff);
    for (j = from; j < to; j++) {
      M = p.masks.get(b.charCodeAt(j));
      if (M === undefined) continue;
      carry = 0;
      for (k = 0; k < p.words; k++) {
        s = S[k]; u = (s & M[k]) >>> 0; sum = s + u + carry;
        carry = sum > 0xffffffff ? 1 : 0;
        S[k] = ((sum >>> 0) | (s & ~u)) >>> 0;
      }
    }
    var ones = 0;
    for (k = 0; k < p.words; k++) {
      var bits = Math.min(32, p.n - 32 * k);
      ones += popcount(S[k] & (bits === 32 ? 0xffffffff : ((1 << bits) - 1)));
    }
    return p.n - ones;
  }

  function popcount(x) {
    x = x >>> 0;
    x -= (x >>> 1) & 0x55555555;
    x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
    return (((x + (x >>> 4)) & 0x0f0f0f0f) * 0x01010101) >>> 24;
  }

  function lcs(a, b) { return a.length <= b.length ? lcsWith(pattern(a), b, 0, b.length) : lcsWith(pattern(b), a, 0, a.length); }
  function indel(a, b) { return a.length + b.length - 2 * lcs(a, b); }

  function ratio(a, b) {                       // fuzz.ratio = normalized Indel similarity * 100
    var lensum = a.length + b.length;
    var normDist = lensum ? indel(a, b) / lensum : 0;
    return (1.0 - normDist) * 100;
  }

  // The most ratio() can give two strings of these lengths (the Indel distance is at least the
  // length difference): used to skip work whose result could not change anything, never to guess.
  function ratioBound(len1, len2) {
    var lensum = len1 + len2;
    return lensum ? (1.0 - Math.abs(len1 - len2) / lensum) * 100 : 100;
  }

  function sortedTokens(s) { return s.split(/\s+/).filter(Boolean).sort().join(" "); }
  function tokenSortRatio(a, b) { return ratio(sortedTokens(a), sortedTokens(b)); }

  // fuzz.partial_ratio: the best ratio of the shorter string against any window of the longer,
  // windows cut at the ends included. Full windows are searched with branch and bound: moving a
  // window by one changes its Indel distance by at most 2, so a stretch whose bound cannot beat
  // the best distance so far is skipped; the result is the exact best, as rapidfuzz computes it.
  // `cutoff` (0..100, optional): the caller only needs the score when it is above the cutoff;
  // below it any value <= cutoff may come back. Above it the result is exact.
  function partialImpl(s1, s2, cutoff) {      // len(s1) <= len(s2)
    var len1 = s1.length, len2 = s2.length, p = pattern(s1), best = 0;
    if (!len1) return 0;
    cutoff = cutoff || 0;
    function sim(from, to) { var d = len1 + (to - from) - 2 * lcsWith(p, s2, from, to); return (1.0 - d / (len1 + to - from)) * 100; }
    function canBeat(len) {                    // a window of this length cannot do better than
      var lensum = len1 + len;                 // the length difference allows
      return (1.0 - Math.abs(len1 - len) / lensum) * 100 > Math.max(best, cutoff);
    }
    var last = len2 - len1, dist = new Map();
    function d(i) { if (!dist.has(i)) dist.set(i, 2 * len1 - 2 * lcsWith(p, s2, i, i + len1)); return dist.get(i); }
    // windows at distance >= bound cannot reach the cutoff: (1 - d / 2len1) * 100 > cutoff
    var bound = cutoff > 0 ? Math.ceil(2 * len1 * (1 - cutoff / 100)) + 1 : Infinity;
    var bestDist = Infinity, stride = Math.max(1, len1 >> 2), points = [];
    for (var i = 0; i < last; i += stride) points.push(i);
    points.push(last);
    points.forEach(function (i) { bestDist = Math.min(bestDist, d(i)); });
    var stack = [];
    for (var k = 0; k + 1 < points.length; k++) stack.push([points[k], points[k + 1]]);
    while (stack.length && bestDist > 0) {
      var iv = stack.pop(), a = iv[0], b = iv[1];
      if (b - a < 2 || (d(a) + d(b)) / 2 - (b - a) >= Math.min(bestDist, bound)) continue;
      var mid = (a + b) >> 1;
      bestDist = Math.min(bestDist, d(mid));
      stack.push([a, mid], [mid, b]);
    }
    if (bestDist === 0) return 100;
    best = (1.0 - bestDist / (2 * len1)) * 100;
    for (i = 1; i < len1; i++) if (p.chars.has(s2[i - 1]) && canBeat(i)) best = Math.max(best, sim(0, i));
    for (i = last + 1; i < len2; i++) if (p.chars.has(s2[i]) && canBeat(len2 - i)) best = Math.max(best, sim(i, len2));
    return best;
  }

  function partialRatio(s1, s2, cutoff) {
    if (!s1.length && !s2.length) return 100;
    var swap = s1.length > s2.length, shorter = swap ? s2 : s1, longer = swap ? s1 : s2;
    var score = partialImpl(shorter, longer, cutoff);
    if (score !== 100 && s1.length === s2.length) score = Math.max(score, partialImpl(longer, shorter, cutoff));
    return score;
  }

  // ------------------------------------------------------------------ matcher.py: SymptomMatcher
  function Matcher(index) {
    this.c = index.consts;
    this.stop = new Set(index.stopwords);
    this.cjkStop = new Set(index.cjk_stopwords || []);
    this.glue = index.cjk_glue || "";
    this.vocab = index.vocab;
    this.idf = new Map();
    for (var i = 0; i < index.vocab.length; i++) this.idf.set(index.vocab[i], index.idf[i]);
    this.entries = index.entries.map(function (e) {
      return { id: e.id, title: e.title, url: e.url, phrases: e.phrases, words: new Map(e.words) };
    });
    this.items = index.items || [];
    this.prose = new Prose(index.prose);
  }

  // What a pasted report says (matcher.match_report): the search box scores this, like `llmfix ask`.
  Matcher.prototype.clean = function (report) { return this.prose.clean(bounded(report, this.c.MAX_MATCH_CHARS)); };
  // matcher.headline: the first line of a report of several lines, when short enough to be a title.
  Matcher.prototype.headline = function (report) {
    var self = this;
    var lines = this.prose.strip(report).split(LINE_BREAK).map(function (l) { return self.prose.strip(l); }).filter(Boolean);
    return lines.length > 1 && Array.from(lines[0]).length <= this.c.HEADLINE_CHARS ? lines[0] : null;
  };
  // A confident headline counts HEADLINE_WEIGHT of every score (matcher.match_report).
  Matcher.prototype.matchReport = function (report) {
    var ranked = this.match(this.clean(report)), head = this.headline(report), c = this.c;
    var heads = head === null ? [] : this.match(this.clean(head));
    if (!heads.length || heads[0].score < c.HEADLINE_MIN) return ranked;
    var byId = new Map(heads.map(function (m) { return [m.id, m.score]; }));
    ranked.forEach(function (m) {
      m.score = Number(((1 - c.HEADLINE_WEIGHT) * m.score + c.HEADLINE_WEIGHT * byId.get(m.id)).toFixed(4));
    });
    ranked.sort(function (x, y) { return y.score - x.score || (x.id < y.id ? -1 : x.id > y.id ? 1 : 0); });
    return ranked;
  };

  Matcher.prototype.tokens = function (text) { return tokens(text, this.stop, this.cjkStop, this.glue); };

  Matcher.prototype.known = function (queryTokens) {   // typos snap to the nearest known word
    var known = [], seen = new Set(), self = this;
    queryTokens.forEach(function (tok) {
      if (seen.has(tok)) return;
      seen.add(tok);
      if (self.idf.has(tok)) { known.push(tok); return; }
      if (tok.length >= 4 && /^[\x00-\x7f]*$/.test(tok)) {
        var best = null, bestScore = -1;
        for (var i = 0; i < self.vocab.length; i++) {
          if (ratioBound(tok.length, self.vocab[i].length) < self.c.TYPO_CUTOFF) continue;
          var s = ratio(tok, self.vocab[i]);
          if (s >= self.c.TYPO_CUTOFF && s > bestScore) { best = self.vocab[i]; bestScore = s; }
        }
        if (best !== null) known.push(best);
      }
    });
    return known;
  };

  Matcher.prototype.phrase = function (norm, entry) {
    var best = 0.0, bestAlias = "", c = this.c;
    if (!norm) return [0.0, ""];
    for (var i = 0; i < entry.phrases.length; i++) {
      var alias = entry.phrases[i];
      if (alias.length >= 10 && norm.indexOf(alias) >= 0) return [1.0, alias];
      var lengthFactor = Math.min(1.0, (alias.length + 6) / 20), score = 0;
      // ratio and token_sort_ratio only matter when they could lift this alias above `best`
      if (ratioBound(norm.length, alias.length) / 100 * lengthFactor + 1e-12 > best) {
        score = Math.max(ratio(norm, alias), tokenSortRatio(norm, alias)) / 100;
      }
      if (alias.length >= 8 && norm.length > 1.5 * alias.length && c.PASTED_DISCOUNT * lengthFactor > best) {
        // only a window scoring above this can change `best` (a little slack for rounding)
        var need = Math.max(0, best / (c.PASTED_DISCOUNT * lengthFactor) * 100 - 1e-6);
        score = Math.max(score, c.PASTED_DISCOUNT * partialRatio(alias, norm, need) / 100);
      }
      score *= lengthFactor;
      if (score > best) { best = score; bestAlias = alias; }
    }
    return [best, bestAlias];
  };

  Matcher.prototype.match = function (query) {
    query = bounded(query, this.c.MAX_MATCH_CHARS);
    var norm = normalize(query), known = this.known(this.tokens(query)), self = this;
    var total = 0;
    known.forEach(function (t) { total += self.idf.get(t); });
    total = Math.min(total, self.c.word_mass_cap) || 1.0;   // a long query is not diluted by its length
    var results = this.entries.map(function (entry) {
      var words = 0;
      known.forEach(function (t) { if (entry.words.has(t)) words += self.idf.get(t) * entry.words.get(t); });
      words = Math.min(1.0, words / total);
      var p = self.phrase(norm, entry);
      var score = self.c.WORD_WEIGHT * words + self.c.PHRASE_WEIGHT * p[0];
      return { id: entry.id, title: entry.title, url: entry.url, score: Number(score.toFixed(4)),
               words: words, phrase: p[0], alias: p[1] };
    });
    results.sort(function (x, y) { return y.score - x.score || (x.id < y.id ? -1 : x.id > y.id ? 1 : 0); });
    return results;
  };

  Matcher.prototype.pick = function (matches) {     // matcher.pick: good ones, and whether to ask
    var c = this.c;
    var good = matches.filter(function (m) { return m.score >= c.MIN_SCORE; });
    if (!good.length) return { close: [], ambiguous: false };
    var close = good.filter(function (m) { return good[0].score - m.score < c.AMBIGUOUS_MARGIN; }).slice(0, 3);
    return { close: close, ambiguous: close.length > 1 };
  };

  // A looser second list for the search box (not in the CLI): causes and fixes by title words.
  Matcher.prototype.related = function (query, limit) {
    var self = this, known = this.known(this.tokens(query));
    if (!known.length) return [];
    var want = new Set(known), total = 0;
    want.forEach(function (t) { total += self.idf.get(t); });
    var scored = [];
    this.items.forEach(function (item) {
      var have = new Set(self.tokens(item.title)), s = 0;
      want.forEach(function (t) { if (have.has(t)) s += self.idf.get(t); });
      if (s > 0) scored.push({ item: item, score: s / total });
    });
    scored.sort(function (a, b) { return b.score - a.score || (a.item.id < b.item.id ? -1 : 1); });
    return scored.filter(function (x) { return x.score >= 0.5; }).slice(0, limit || 6);
  };

  // ------------------------------------------------------------------ expr.py: values
  // A value is {t: "int"|"float"|"bool"|"str"|"none"|"list", v: ...}, like Python's types.
  function V(t, v) { return { t: t, v: v }; }
  var NONE = V("none", null), TRUE = V("bool", true), FALSE = V("bool", false);

  function Unknown(name) { this.fact = name; }
  function ExprError(message) { this.message = message; }

  function isNum(x) { return x.t === "int" || x.t === "float" || x.t === "bool"; }
  function num(x) {
    if (!isNum(x)) throw new ExprError("unsupported operand type: " + x.t);
    return x.t === "bool" ? (x.v ? 1 : 0) : x.v;
  }
  function numType(a, b) { return (a.t === "float" || b.t === "float") ? "float" : "int"; }
  function truthy(x) {
    switch (x.t) {
      case "bool": return x.v;
      case "int": case "float": return x.v !== 0;
      case "str": case "list": return x.v.length > 0;
      default: return false;
    }
  }
  function makeNum(t, v) {
    if (t === "int" && !Number.isInteger(v) && isFinite(v)) t = "float";
    if (t === "int" && v === 0) v = 0;  // Python ints have no negative zero (0 * -4 is 0, not -0)
    return V(t, v);
  }

  function pyEq(a, b) {
    if (isNum(a) && isNum(b)) return num(a) === num(b);
    if (a.t !== b.t) return false;
    if (a.t === "none") return true;
    if (a.t === "str") return a.v === b.v;
    if (a.t === "list") {
      if (a.v.length !== b.v.length) return false;
      for (var i = 0; i < a.v.length; i++) if (!pyEq(a.v[i], b.v[i])) return false;
      return true;
    }
    return false;
  }

  function pyCmp(a, b) {                       // -1/0/1 for <, or TypeError like Python
    if (isNum(a) && isNum(b)) { var x = num(a), y = num(b); return x < y ? -1 : x > y ? 1 : 0; }
    if (a.t === "str" && b.t === "str") return a.v < b.v ? -1 : a.v > b.v ? 1 : 0;
    if (a.t === "list" && b.t === "list") {
      for (var i = 0; i < Math.min(a.v.length, b.v.length); i++) {
        if (!pyEq(a.v[i], b.v[i])) return pyCmp(a.v[i], b.v[i]);
      }
      return a.v.length - b.v.length < 0 ? -1 : a.v.length > b.v.length ? 1 : 0;
    }
    throw new ExprError("'<' not supported between " + a.t + " and " + b.t);
  }

  function compare(op, a, b) {
    switch (op) {
      case "==": return pyEq(a, b);
      case "!=": return !pyEq(a, b);
      case "<": return pyCmp(a, b) < 0;
      case "<=": return pyCmp(a, b) <= 0;
      case ">": return pyCmp(a, b) > 0;
      case ">=": return pyCmp(a, b) >= 0;
      case "in": case "not in":
        var found;
        if (b.t === "list") found = b.v.some(function (x) { return pyEq(a, x); });
        else if (b.t === "str" && a.t === "str") found = b.v.indexOf(a.v) >= 0;
        else throw new ExprError("'in' needs a list or text");
        return op === "in" ? found : !found;
    }
    throw new ExprError("unknown comparison " + op);
  }

  function pyMod(a, b) {
    if (b === 0) throw new ExprError("modulo by zero");
    var r = a % b;
    if (r !== 0 && (r < 0) !== (b < 0)) r += b;
    return r;
  }

  function binary(op, a, b) {
    if (op === "+" && a.t === "str" && b.t === "str") return V("str", a.v + b.v);
    if (op === "+" && a.t === "list" && b.t === "list") return V("list", a.v.concat(b.v));
    if (op === "*" && (a.t === "str" || b.t === "str")) {
      var s = a.t === "str" ? a : b, n = a.t === "str" ? b : a;
      if (n.t !== "int" && n.t !== "bool") throw new ExprError("can't multiply text by " + n.t);
      return V("str", num(n) > 0 ? s.v.repeat(num(n)) : "");
    }
    var x = num(a), y = num(b), t = numType(a, b);
    switch (op) {
      case "+": return makeNum(t, x + y);
      case "-": return makeNum(t, x - y);
      case "*": return makeNum(t, x * y);
      case "/":
        if (y === 0) throw new ExprError("division by zero");
        return V("float", x / y);
      case "%": return makeNum(t, pyMod(x, y));
      case "**":
        if (x === 0 && y < 0) throw new ExprError("0 cannot be raised to a negative power");
        if (x < 0 && !Number.isInteger(y)) throw new ExprError("negative number to a fractional power");
        var r = Math.pow(x, y);
        if (t === "int" && y < 0) t = "float";
        if (t === "float" && !isFinite(r) && isFinite(x) && isFinite(y)) throw new ExprError("overflow");
        return makeNum(t, r);
    }
    throw new ExprError("unknown operator " + op);
  }

  function floatArg(x) { return num(x); }
  function mathResult(r) {
    if (isNaN(r)) throw new ExprError("math domain error");
    return V("float", r);
  }

  var FUNCTIONS = {
    sqrt: function (args) { arity(args, 1, 1); var x = floatArg(args[0]); if (x < 0) throw new ExprError("math domain error"); return V("float", Math.sqrt(x)); },
    log: function (args) {
      arity(args, 1, 2);
      var x = floatArg(args[0]);
      if (x <= 0) throw new ExprError("math domain error");
      if (args.length === 1) return mathResult(Math.log(x));
      var base = floatArg(args[1]);
      if (base <= 0) throw new ExprError("math domain error");
      if (Math.log(base) === 0) throw new ExprError("division by zero");
      return mathResult(Math.log(x) / Math.log(base));
    },
    log2: function (args) { arity(args, 1, 1); var x = floatArg(args[0]); if (x <= 0) throw new ExprError("math domain error"); return V("float", Math.log2(x)); },
    exp: function (args) {
      arity(args, 1, 1); var x = floatArg(args[0]), r = Math.exp(x);
      if (!isFinite(r) && isFinite(x)) throw new ExprError("math range error");
      return V("float", r);
    },
    abs: function (args) { arity(args, 1, 1); var x = args[0]; return makeNum(x.t === "float" ? "float" : "int", Math.abs(num(x))); },
    min: function (args) { return extreme(args, -1); },
    max: function (args) { return extreme(args, 1); },
    round: function (args) {
      arity(args, 1, 2);
      var x = args[0];
      if (!isNum(x)) throw new ExprError("round() needs a number");
      if (args.length === 1 || args[1].t === "none") {
        if (x.t !== "float") return V("int", num(x));
        if (!isFinite(x.v)) throw new ExprError("cannot round " + x.v);
        return V("int", roundHalfEven(x.v, 0));
      }
      if (args[1].t !== "int" && args[1].t !== "bool") throw new ExprError("round() digits must be an integer");
      var n = num(args[1]);
      if (x.t !== "float") return n >= 0 ? V("int", num(x)) : V("int", roundHalfEven(num(x) / Math.pow(10, -n), 0) * Math.pow(10, -n));
      return V("float", roundHalfEven(x.v, n));
    }
  };

  function arity(args, lo, hi) {
    if (args.length < lo || args.length > hi) throw new ExprError("wrong number of arguments");
  }

  function extreme(args, sign) {
    var items = args;
    if (args.length === 1) {
      if (args[0].t === "list") items = args[0].v;
      else if (args[0].t === "str") items = Array.from(args[0].v).map(function (c) { return V("str", c); });
      else throw new ExprError("object is not iterable");
    }
    if (!items.length) throw new ExprError("empty sequence");
    var best = items[0];
    for (var i = 1; i < items.length; i++) if (pyCmp(items[i], best) * sign > 0) best = items[i];
    return best;
  }

  function evaluate(node, facts) {
    switch (node.k) {
      case "fact":
        var value = facts.get(node.n);
        if (value === undefined || value === null || value.t === "none") throw new Unknown(node.n);
        return value;
      case "const":
        if (node.t === "float" && typeof node.v === "string") return V("float", Number(node.v.replace("inf", "Infinity")));
        return node.t === "none" ? NONE : V(node.t, node.v);
      case "bin": return binary(node.op, evaluate(node.l, facts), evaluate(node.r, facts));
      case "un":
        var e = evaluate(node.e, facts);
        if (node.op === "not") return V("bool", !truthy(e));
        return makeNum(e.t === "float" ? "float" : "int", node.op === "-" ? -num(e) : num(e));
      case "bool":                              // Kleene: an operand that decides is enough, wherever it stands
        var deciding = node.op === "or", missing = null;
        for (var i = 0; i < node.vs.length; i++) {
          try {
            if (truthy(evaluate(node.vs[i], facts)) === deciding) return deciding ? TRUE : FALSE;
          } catch (err) {
            if (!(err instanceof Unknown)) throw err;
            if (missing === null) missing = err;
          }
        }
        if (missing !== null) throw missing;
        return deciding ? FALSE : TRUE;
      case "cmp":
        var left = evaluate(node.l, facts);
        for (var j = 0; j < node.ops.length; j++) {
          var right = evaluate(node.rs[j], facts);
          if (!compare(node.ops[j], left, right)) return FALSE;
          left = right;
        }
        return TRUE;
      case "list": return V("list", node.es.map(function (n) { return evaluate(n, facts); }));
      case "unknown":                           // unknown(fact): true while the fact has no value
        var given = facts.get(node.n);
        return V("bool", given === undefined || given === null || given.t === "none");
      case "call":
        var fn = FUNCTIONS[node.f];
        if (!fn) throw new ExprError("unknown function " + node.f);
        return fn(node.args.map(function (n) { return evaluate(n, facts); }));
    }
    throw new ExprError("cannot evaluate " + node.k);
  }

  // ------------------------------------------------------------------ Python's format()
  // Exact decimal expansion of a double (BigInt), so rounding is Python's: half-even on the exact value.
  function exactDigits(x) {                    // x finite, >= 0 -> {d: "digits", p: digits before the point}
    if (x === 0) return { d: "0", p: 1 };
    var view = new DataView(new ArrayBuffer(8));
    view.setFloat64(0, x);
    var hi = view.getUint32(0), lo = view.getUint32(4);
    var e = (hi >>> 20) & 0x7ff, mant = (BigInt(hi & 0xfffff) << 32n) | BigInt(lo);
    if (e === 0) e = 1; else mant |= 1n << 52n;
    e -= 1075;
    if (e >= 0) { var s = (mant << BigInt(e)).toString(); return { d: s, p: s.length }; }
    var k = -e, digits = (mant * (5n ** BigInt(k))).toString();
    while (digits.length <= k) digits = "0" + digits;
    return { d: digits, p: digits.length - k };
  }

  // Round the decimal {d, p} to keep `keep` digits (may be <= 0) with ties to even.
  function roundDigits(dec, keep) {
    var d = dec.d, p = dec.p;
    if (keep < 0) { d = "0".repeat(-keep) + d; p += -keep; keep = 0; }
    if (keep >= d.length) return { d: d + "0".repeat(keep - d.length), p: p };
    var kept = d.slice(0, keep), rest = d.slice(keep), up;
    if (rest[0] > "5") up = true;
    else if (rest[0] < "5") up = false;
    else if (/[1-9]/.test(rest.slice(1))) up = true;
    else up = kept.length ? (Number(kept[kept.length - 1]) % 2 === 1) : false;
    if (up) {
      var arr = kept.split(""), i = arr.length - 1;
      while (i >= 0 && arr[i] === "9") { arr[i] = "0"; i--; }
      if (i >= 0) arr[i] = String(Number(arr[i]) + 1);
      else { arr.unshift("1"); p += 1; }
      kept = arr.join("");
    }
    return { d: kept, p: p };
  }

  function fixed(x, prec) {                     // '%.{prec}f' of |x|
    var dec = exactDigits(Math.abs(x)), r = roundDigits(dec, dec.p + prec);
    var intPart = r.d.slice(0, r.p).replace(/^0+(?=\d)/, "") || "0", frac = r.d.slice(r.p);
    return prec > 0 ? intPart + "." + frac : intPart;
  }

  function sci(x, prec, upper) {                 // '%.{prec}e' of |x|
    var dec = exactDigits(Math.abs(x)), first = dec.d.search(/[1-9]/);
    if (first < 0) return "0" + (prec > 0 ? "." + "0".repeat(prec) : "") + (upper ? "E+00" : "e+00");
    var exp = dec.p - first - 1, r = roundDigits({ d: dec.d.slice(first), p: 1 }, prec + 1);
    if (r.d.length > prec + 1) { r.d = r.d.slice(0, prec + 1); exp += 1; }
    var mant = r.d[0] + (prec > 0 ? "." + r.d.slice(1) : "");
    var es = Math.abs(exp) < 10 ? "0" + Math.abs(exp) : String(Math.abs(exp));
    return mant + (upper ? "E" : "e") + (exp < 0 ? "-" : "+") + es;
  }

  function stripSci(s) {                        // '1.500e+02' -> '1.5e+02', '1.000e+02' -> '1e+02'
    return s.replace(/(\.\d*?)0+(?=[eE])/, "$1").replace(/\.(?=[eE])/, "");
  }

  // 'g' (and the empty type with a precision, noType): Python's rules from the format spec docs
  function general(a, prec, alt, upper, noType) {
    if (prec === 0) prec = 1;
    var s = sci(a, prec - 1, false), exp = Number(s.slice(s.indexOf("e") + 1));
    var out;
    if (exp >= -4 && exp < (noType ? prec - 1 : prec)) {
      out = fixed(a, Math.max(prec - 1 - exp, 0));
      if (!alt && out.indexOf(".") >= 0) out = out.replace(/0+$/, "").replace(/\.$/, noType ? ".0" : "");
      if (noType && out.indexOf(".") < 0) out += ".0";
    } else {
      out = alt ? s : stripSci(s);
    }
    return upper ? out.toUpperCase() : out;
  }

  function floatRepr(x) {                        // Python repr(float): shortest round-trip digits
    if (isNaN(x)) return "nan";
    if (!isFinite(x)) return x > 0 ? "inf" : "-inf";
    var e = Math.abs(x).toExponential(), m = e.split("e"), digits = m[0].replace(".", ""), exp = Number(m[1]);
    var sign = x < 0 || Object.is(x, -0) ? "-" : "";
    if (exp >= -4 && exp < 16) {
      var out;
      if (exp >= 0) {
        out = digits.length > exp + 1 ? digits.slice(0, exp + 1) + "." + digits.slice(exp + 1)
                                      : digits + "0".repeat(exp + 1 - digits.length) + ".0";
      } else {
        out = "0." + "0".repeat(-exp - 1) + digits;
      }
      return sign + out;
    }
    var mant = digits.length > 1 ? digits[0] + "." + digits.slice(1) : digits;
    return sign + mant + "e" + (exp < 0 ? "-" : "+") + (Math.abs(exp) < 10 ? "0" : "") + Math.abs(exp);
  }

  function group(intDigits, sep) {
    return intDigits.replace(/\B(?=(\d{3})+(?!\d))/g, sep);
  }

  var SPEC = /^(?:(.)?([<>=^]))?([+\- ])?(z)?(#)?(0)?(\d+)?([,_])?(?:\.(\d+))?([bcdeEfFgGnosxX%])?$/;

  function pyStr(x) {
    switch (x.t) {
      case "bool": return x.v ? "True" : "False";
      case "none": return "None";
      case "int": return Number.isSafeInteger(x.v) ? String(x.v) : BigInt(Math.trunc(x.v)).toString();
      case "float": return floatRepr(x.v);
      case "str": return x.v;
      case "list": return "[" + x.v.map(function (e) { return e.t === "str" ? "'" + e.v + "'" : pyStr(e); }).join(", ") + "]";
    }
    return String(x.v);
  }

  function pyFormat(x, spec) {
    if (!spec) return pyStr(x);
    var m = SPEC.exec(spec);
    if (!m) throw new ExprError("Invalid format specifier");
    var fill = m[1] || (m[6] ? "0" : " "), align = m[2] || (m[6] ? "=" : ""), sign = m[3] || "-";
    var alt = !!m[5], width = m[7] ? Number(m[7]) : 0, sep = m[8] || "", prec = m[9] !== undefined ? Number(m[9]) : null;
    var type = m[10] || "", body, neg = false;
    if (x.t === "str") {
      if (type && type !== "s") throw new ExprError("Unknown format code '" + type + "' for object of type 'str'");
      body = prec !== null ? x.v.slice(0, prec) : x.v;
      return pad(body, "", width, fill, align || "<");
    }
    if (!isNum(x)) throw new ExprError("unsupported format string passed to " + x.t);
    var v = num(x), isInt = x.t !== "float";
    if (isInt && type === "n") type = "d";
    if ("bcdoxX".indexOf(type) >= 0 && type) {
      if (!isInt) throw new ExprError("Unknown format code '" + type + "' for object of type 'float'");
      neg = v < 0;
      var radix = { b: 2, c: 10, d: 10, o: 8, x: 16, X: 16 }[type];
      if (type === "c") return pad(String.fromCharCode(v), "", width, fill, align || "<");
      body = Math.abs(v).toString(radix);
      if (type === "X") body = body.toUpperCase();
      if (sep) body = type === "d" ? group(body, sep) : body;
      if (alt && type !== "d") body = "0" + type + body;
    } else if (isInt && !type) {
      neg = v < 0;
      body = Number.isSafeInteger(v) ? String(Math.abs(v)) : BigInt(Math.trunc(Math.abs(v))).toString();
      if (sep) body = group(body, sep);
    } else {
      if (type === "s") throw new ExprError("Unknown format code 's' for a number");
      neg = v < 0 || Object.is(v, -0);
      var a = Math.abs(v);
      if (isNaN(v)) body = "nan";
      else if (!isFinite(v)) body = "inf";
      else if (type === "f" || type === "F") body = fixed(a, prec === null ? 6 : prec);
      else if (type === "e" || type === "E") body = sci(a, prec === null ? 6 : prec, type === "E");
      else if (type === "%") body = fixed(a * 100, prec === null ? 6 : prec) + "%";
      else if (type === "g" || type === "G" || type === "n") body = general(a, prec === null ? 6 : prec, alt, type === "G");
      else if (prec === null) body = floatRepr(a);           // no type, no precision: str()
      else body = general(a, prec, alt, false, true);
      if (type === "F" || type === "E" || type === "G") body = body.toUpperCase();
      if (sep && isFinite(v)) {
        var cut = body.search(/[.eE%]/), head = cut < 0 ? body : body.slice(0, cut);
        body = group(head, sep) + (cut < 0 ? "" : body.slice(cut));
      }
    }
    var signStr = neg ? "-" : sign === "+" ? "+" : sign === " " ? " " : "";
    return pad(body, signStr, width, fill, align || ">");
  }

  function pad(body, sign, width, fill, align) {
    var len = Array.from(sign + body).length;
    if (len >= width) return sign + body;
    var n = width - len, f = fill.repeat(n);
    if (align === "<") return sign + body + f;
    if (align === "^") return fill.repeat(Math.floor(n / 2)) + sign + body + fill.repeat(n - Math.floor(n / 2));
    if (align === "=") return sign + f + body;
    return f + sign + body;
  }

  function roundHalfEven(x, n) {
    if (!isFinite(x)) return x;
    var neg = x < 0, dec = exactDigits(Math.abs(x)), r = roundDigits(dec, dec.p + n);
    var s = r.d.slice(0, r.p) + (r.d.length > r.p ? "." + r.d.slice(r.p) : "");
    var out = Number(s || "0");
    return neg ? -out : out;
  }

  // render_template(): a step's pieces -> [{text}|{value, src}|{missing: [facts], src}|{error, src}]
  function plain(value) { return value.t === "float" ? pyFormat(value, ".6g") : pyStr(value); }

  function computeSlot(slot, facts) {
    try {
      var value = evaluate(slot.expr, facts);
      return { text: slot.fmt ? pyFormat(value, slot.fmt) : plain(value), computed: true };
    } catch (err) {
      if (err instanceof Unknown) {
        var missing = slot.facts.filter(function (f) { var v = facts.get(f); return !v || v.t === "none"; });
        return { text: withPlaceholders(slot.src, slot.facts, missing, facts), missing: missing };
      }
      if (err instanceof ExprError) return { text: slot.src + " (cannot compute: " + err.message + ")", error: true };
      throw err;
    }
  }

  // expr.placeholder() / with_placeholders(): unknown facts read <NAME>, known ones their value
  function placeholder(fact) { return "<" + fact.slice(fact.lastIndexOf(".") + 1).toUpperCase() + ">"; }

  function withPlaceholders(src, names, missing, facts) {
    var shared = new Set(missing.filter(function (n) {
      return missing.filter(function (m) { return placeholder(m) === placeholder(n); }).length > 1;
    }).map(placeholder));
    return src.replace(/[A-Za-z_][A-Za-z0-9_.]*/g, function (name) {
      if (names.indexOf(name) < 0) return name;
      if (missing.indexOf(name) < 0) return plain(facts.get(name));
      var mark = placeholder(name);
      return shared.has(mark) ? "<" + name.replace(/\./g, "_").toUpperCase() + ">" : mark;
    }).trim();
  }

  // ------------------------------------------------------------------ engine.py
  function scoreCause(cause, facts, consts) {   // a factor <= COUNTERS defeats a confirms item
    var odds = cause.prior / (1 - cause.prior), lines = [], confirmed = false, countered = false;
    cause.evidence.forEach(function (ev) {
      var holds;
      try {
        holds = truthy(evaluate(ev.when, facts));
      } catch (err) {
        if (err instanceof Unknown || err instanceof ExprError) return;
        throw err;
      }
      var factor = holds ? ev.lr : ev.else_lr;
      odds *= factor;
      confirmed = confirmed || (holds && ev.confirms);
      countered = countered || factor <= consts.COUNTERS;
      lines.push({ facts: ev.facts, factor: factor, holds: holds, says: holds ? ev.says : "", src: ev.src });
    });
    return { score: odds / (1 + odds), lines: lines, confirmed: confirmed && !countered };
  }

  // status_of(): untested until a factor other than 1 applied; ruled-out only when the factors
  // below 1 are what put the posterior under RULED_OUT; likely from the score shown
  function statusOf(prior, lines, confirmed, posterior, weight, consts) {
    if (confirmed) return "confirmed";
    var byItem = new Map();                     // one factor per evidence item (applied_factors)
    lines.forEach(function (l) { byItem.set(l.src, l.factor); });
    var factors = Array.from(byItem.values()).filter(function (f) { return f !== 1; });
    if (!factors.length) return "untested";
    var supported = prior / (1 - prior);
    factors.forEach(function (f) { if (f > 1) supported *= f; });
    if (posterior < consts.RULED_OUT && consts.RULED_OUT <= supported / (1 + supported)) return "ruled-out";
    return posterior * weight >= consts.LIKELY ? "likely" : "possible";
  }

  function rank(symptom, facts, weight) {        // sorted by the score shown: weight × posterior
    weight = weight === undefined ? 1.0 : weight;
    var ranked = symptom.causes.map(function (cause) {
      var s = scoreCause(cause, facts, symptom.consts), score = s.score * weight;
      return { id: cause.id, cause: cause, score: score, posterior: s.score, weight: weight, lines: s.lines,
               status: statusOf(cause.prior, s.lines, s.confirmed, s.score, weight, symptom.consts) };
    });
    ranked.sort(function (a, b) {
      var ca = a.status === "confirmed" ? 1 : 0, cb = b.status === "confirmed" ? 1 : 0;
      return (b.score - a.score) || (cb - ca) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
    });
    return contestedMadePossible(ranked, symptom.consts);
  }

  // _contested_made_possible(): likely only for a cause LIKELY_LEAD times every other cause the
  // evidence moved, and LIKELY_LEAD_PRIOR times every other cause still untested
  function contestedMadePossible(ranked, consts) {
    ranked.forEach(function (c) {
      if (c.status !== "likely") return;
      var contested = ranked.some(function (r) {
        var lead = r.status === "untested" ? consts.LIKELY_LEAD_PRIOR : consts.LIKELY_LEAD;
        return r !== c && c.score < lead * r.score;
      });
      if (contested) c.status = "possible";
    });
    return ranked;
  }

  function openQuestions(symptom, facts, unknown, weight) {
    weight = weight === undefined ? 1.0 : weight;
    var posteriors = new Map();
    symptom.causes.forEach(function (c) { posteriors.set(c.id, scoreCause(c, facts, symptom.consts).score); });
    var known = new Set(Array.from(facts.keys()).concat(Array.from(unknown)));
    var best = new Map();
    symptom.checks.forEach(function (check) {
      if (known.has(check.fact) || (check.after && !facts.has(check.after))) return;
      if (undefinedFact(symptom.facts[check.fact], facts)) return;
      var value = weight * movement(symptom, check.fact, posteriors, known);
      var current = best.get(check.fact);
      if (current === undefined || value > current.value) best.set(check.fact, { fact: check.fact, check: check, value: value });
    });
    var min = symptom.consts.MIN_QUESTION_VALUE;
    var questions = Array.from(best.values()).filter(function (q) { return q.value >= min; });
    questions.sort(function (a, b) {
      var ra = Number((a.value / Math.sqrt(symptom.cost[a.fact])).toFixed(3)),
          rb = Number((b.value / Math.sqrt(symptom.cost[b.fact])).toFixed(3));
      return (rb - ra) || (symptom.cost[a.fact] - symptom.cost[b.fact]) || (a.fact < b.fact ? -1 : a.fact > b.fact ? 1 : 0);
    });
    return questions;
  }

  function undefinedFact(spec, facts) {         // engine._undefined(): defined_when is false
    if (!spec || !spec.defined_when) return false;
    try {
      return !truthy(evaluate(spec.defined_when, facts));
    } catch (err) {
      if (err instanceof Unknown || err instanceof ExprError) return false;
      throw err;
    }
  }

  function movement(symptom, fact, posteriors, known) {
    var total = 0.0;
    symptom.causes.forEach(function (cause) {
      cause.evidence.forEach(function (ev) {
        if (ev.facts.indexOf(fact) < 0) return;
        for (var i = 0; i < ev.facts.length; i++) if (ev.facts[i] !== fact && !known.has(ev.facts[i])) return;
        total += posteriors.get(cause.id) * ev.span;
      });
    });
    return total;
  }

  // FactSpec.parse(): a typed answer -> a value, or null when it is not one
  function parseAnswer(spec, raw) {
    var text = String(raw).trim(), low = text.toLowerCase();
    if (spec.type === "bool") {
      if (["y", "yes", "true", "1", "是", "对", "有"].indexOf(low) >= 0) return TRUE;
      if (["n", "no", "false", "0", "否", "不是", "没有"].indexOf(low) >= 0) return FALSE;
      return null;
    }
    if (spec.type === "number") {
      if (/[.eE]/.test(text)) {
        if (!/^[+-]?(\d+\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?|inf|infinity|nan)$/i.test(text.replace(/_/g, ""))) return null;
        return V("float", Number(text.replace(/_/g, "").replace(/^([+-]?)inf(inity)?$/i, "$1Infinity")));
      }
      if (!/^[+-]?\d+$/.test(text.replace(/_/g, ""))) return null;
      return V("int", Number(text.replace(/_/g, "")));
    }
    if (spec.type === "choice") {
      if (/^\d+$/.test(text) && Number(text) >= 1 && Number(text) <= spec.choices.length) return V("str", spec.choices[Number(text) - 1]);
      for (var i = 0; i < spec.choices.length; i++) if (spec.choices[i].toLowerCase() === low) return V("str", spec.choices[i]);
      return null;
    }
    return V("str", text);
  }

  var api = {
    normalize: normalize, tokens: tokens, stem: stem, lcs: lcs, ratio: ratio, tokenSortRatio: tokenSortRatio,
    partialRatio: partialRatio, bounded: bounded,
    Matcher: Matcher, Prose: Prose, V: V, evaluate: evaluate, truthy: truthy, Unknown: Unknown, ExprError: ExprError,
    pyFormat: pyFormat, pyStr: pyStr, floatRepr: floatRepr, computeSlot: computeSlot, placeholder: placeholder,
    scoreCause: scoreCause, statusOf: statusOf, rank: rank, openQuestions: openQuestions, parseAnswer: parseAnswer
  };
  root.LLMFIX = api;
  if (typeof module !== "undefined" && module.exports) module.exports = api;
})(typeof window !== "undefined" ? window : globalThis);

// kubedash live.js: the little the pages need beyond htmx.
//  1. Time-based state, every second, with no server round trip: "renewed 12s ago",
//     ages, and whatever the kinds' scripts add (kubedash.onTick: e.g. the Lease pages' "renewed
//     12s ago", "expires in 4s" and a lease row flipping from held to expired, coordination/leases.js).
//     Exact times (time[data-abs], and the hover titles of relative ones) in UTC, or in the
//     browser's time zone once the viewer ticks "Local time" (#tz-local; kept in localStorage).
//  2. The websocket's state in #live-status ("Catching up…" / "Live" / "Reconnecting…" /
//     "Reloading…"): "Live" only once the server says the page has everything it missed (LIVE);
//     while it is down the page is marked stale (#live-stale), countdowns pause, and "Retry now"
//     (#live-retry). A page whose view no longer fits a push is reloaded (close code 4409).
//     A heartbeat: a socket that stays open but silent for two beats counts as down too.
//  3. Reconnects resume from the newest revision the page has seen (#live-rv). Pushes are
//     applied at the next animation frame (all that came since, together), and a pushed row
//     already on the page takes only its changed cells (the row element stays).
//  4. Copy buttons, confirmations (form[data-confirm]), and focus on a form's error summary.
//  5. Keyboard shortcuts (the help dialog, #shortcuts, is in base.html).
//  6. List filters that apply as they are chosen (#list-filters: menus at once, the name
//     search after a pause in typing), keeping the focus in the field across the reload.
(function () {
  "use strict";
  document.documentElement.classList.add("js");   // (CSS hides what only no-JS pages need)

  // The server's clock is the reference: a browser whose clock is off by a minute must not
  // show a held lease as expired. body[data-server-now] is the render time.
  var skew = Date.parse(document.body.dataset.serverNow || "") - Date.now();
  if (isNaN(skew)) skew = 0;

  // apimachinery's HumanDuration: the same text the server renders.
  function human(ms) {
    var s = Math.floor(ms / 1000), m = Math.floor(s / 60), h = Math.floor(s / 3600), d = Math.floor(h / 24);
    if (s < 120) return s + "s";
    if (m < 10) return m + "m" + (s % 60 ? (s % 60) + "s" : "");
    if (m < 180) return m + "m";
    if (h < 8) return h + "h" + (m % 60 ? (m % 60) + "m" : "");
    if (h < 48) return h + "h";
    if (h < 192) return d + "d" + (h % 24 ? (h % 24) + "h" : "");
    if (d < 730) return d + "d";
    var y = Math.floor(d / 365);
    return y + "y" + (y < 8 && d % 365 ? (d % 365) + "d" : "");
  }

  // An element's data-<key> instant (epoch ms), parsed again only when the attribute changes.
  function instant(el, key) {
    var text = el.dataset[key], memo = el["__kd" + key];
    if (!memo || memo[0] !== text) memo = el["__kd" + key] = [text, Date.parse(text)];
    return memo[1];
  }

  function each(selector, fn) {
    Array.prototype.forEach.call(document.querySelectorAll(selector), fn);
  }

  function setText(el, text) {
    if (el && el.textContent !== text) el.textContent = text;
  }

  // A count, and its badge greyed out (class "zero") when it is 0.
  function count(el, n) {
    if (!el) return;
    setText(el, String(n));
    var tone = el.closest(".tone");
    if (tone) tone.classList.toggle("zero", n === 0);
  }

  // While the live connection is down, time stands still on the page (see setStale).
  var frozenAt = null;

  // The heartbeat (dashboard/web/consumers.py): the server sends BEAT every beatMs, the page
  // answers PONG. Time on a live page runs only as far as the server vouches for it: up to
  // one beat (and a little) past the last thing heard (a beat, a push); a page that heard
  // nothing for two beats is not live (see "the websocket" below).
  var BEAT = "beat", PONG = "pong", LIVE = "live", livePage = !!document.getElementById("live-status");
  var beatMs = +(document.body.dataset.heartbeatMs || 0) || 5000, BEAT_SLACK_MS = 1500;
  var LOST_MS = 2 * beatMs + BEAT_SLACK_MS;
  var heardAt = Date.parse(document.body.dataset.serverNow || "") || (Date.now() + skew);
  function confirmedUntil() {
    return livePage ? heardAt + beatMs + BEAT_SLACK_MS : Infinity;
  }

  // Rows out of view keep their time texts until they scroll into view: rewriting 2,000 texts
  // a second re-lays out a 1,000-row table (long main-thread tasks, dropped frames). State
  // flips (held -> expired) still happen everywhere, so the counts stay right.
  var inView = new WeakSet(), watched = new WeakSet(), seen = null;
  if (window.IntersectionObserver) {
    seen = new IntersectionObserver(function (entries) {
      var any = false;
      entries.forEach(function (e) {
        if (e.isIntersecting) { inView.add(e.target); any = true; } else inView.delete(e.target);
      });
      if (any) tick();
    }, {rootMargin: "200px 0px"});
  }
  function shown(el) {
    if (!seen) return true;
    var row = el.__kdRow;   // (looked up once per element: the tick asks for every row each second)
    if (row === undefined) row = el.__kdRow = el.closest("#items > *");
    if (!row) return true;
    if (!watched.has(row)) { watched.add(row); seen.observe(row); return false; }   // (reported soon)
    return inView.has(row);
  }
  // Rows that skip their rendering out of view (content-visibility: auto, the big lists in
  // app.css) say when they do, so no observer need follow them (1,000 observed rows cost
  // their intersections at every frame). A row coming into view gets its texts at the next frame.
  document.addEventListener("contentvisibilityautostatechange", function (e) {
    var row = e.target;
    if (!seen || !row.matches("#items > *")) return;
    if (!watched.has(row)) watched.add(row); else seen.unobserve(row);
    if (e.skipped) { inView.delete(row); return; }
    inView.add(row);
    tickSoon();
  }, true);

  // A followed cluster's copy that is not current (the stale banner, web/cluster_scope.py):
  // its countdowns and ages stop at the time the copy is as of (a lease nobody saw renewed
  // must not turn "expired"); the banner's own "… ago" keeps moving with the real clock.
  function clusterAsOf() {
    // (A page as of a past moment, ?at=, stops at that moment the same way: #asof-banner.)
    var banner = document.querySelector("#asof-banner [data-as-of], #cluster-banner [data-as-of]");
    return banner ? Date.parse(banner.dataset.asOf) : NaN;
  }

  var ticks = [];
  function tick() {
    var real = Date.now() + skew, asOf = clusterAsOf();
    var now = frozenAt !== null ? frozenAt : Math.min(isNaN(asOf) ? real : Math.min(asOf, real), confirmedUntil());
    each("[data-ago-since]", function (el) {
      setText(el, human(Math.max(real - Date.parse(el.dataset.agoSince), 0)));
    });
    each("[data-age-since]", function (el) {
      if (shown(el)) setText(el, human(Math.max(now - instant(el, "ageSince"), 0)));
    });
    // The kinds' own time-based state (their scripts, declared by KindWeb.scripts, register
    // with kubedash.onTick: e.g. a Lease row flipping from held to expired).
    ticks.forEach(function (fn) { fn(now); });
  }

  // tick() at the next frame; one waiting at most (a hidden tab has no frames, and must not
  // come back to a pile of them).
  var tickFrame = 0;
  function tickSoon() {
    if (!tickFrame) tickFrame = requestAnimationFrame(function () { tickFrame = 0; tick(); });
  }

  // --- exact times: UTC (as the server renders them) or the browser's time zone ------------
  var TZ_KEY = "kubedash.times", localTimes = false;
  try { localTimes = localStorage.getItem(TZ_KEY) === "local"; } catch (e) { /* storage off */ }
  function pad(n) { return (n < 10 ? "0" : "") + n; }
  function zoneName(d) {
    try {
      var part = new Intl.DateTimeFormat([], {timeZoneName: "short"}).formatToParts(d)
        .filter(function (p) { return p.type === "timeZoneName"; })[0];
      if (part) return part.value;
    } catch (e) { /* old browser */ }
    var off = -d.getTimezoneOffset();
    return "UTC" + (off < 0 ? "-" : "+") + pad(Math.floor(Math.abs(off) / 60)) + ":" + pad(Math.abs(off) % 60);
  }
  // "2026-01-02 03:04:05 UTC" (present.clock) or the same instant on the browser's clock.
  function exact(ms) {
    var d = new Date(ms);
    if (!localTimes) return d.toISOString().slice(0, 19).replace("T", " ") + " UTC";
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
      pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds()) + " " + zoneName(d);
  }
  // [selector, the data attribute holding the instant, the title's prefix]; kinds add theirs
  // (kubedash.titled).
  var TITLED = [["[data-age-since]", "ageSince", "created "]];
  // Rewrites what is not yet in the chosen zone: all of it after a switch, the pushed rows
  // after a push. A page that never left UTC has nothing to do (the server wrote UTC).
  var zoneShown = "utc";
  function showTimes(all) {
    var want = localTimes ? "local" : "utc";
    if (!all && want === "utc" && zoneShown === "utc") return;
    zoneShown = want;
    var pick = all ? "" : ':not([data-zone="' + want + '"])';
    each("time[data-abs]" + pick, function (el) {
      var t = Date.parse(el.getAttribute("datetime"));
      if (!isNaN(t)) setText(el, exact(t));
      el.dataset.zone = want;
    });
    TITLED.forEach(function (spec) {
      each(spec[0] + pick, function (el) {
        var t = Date.parse(el.dataset[spec[1]]);
        if (!isNaN(t)) el.title = spec[2] + exact(t);
        el.dataset.zone = want;
      });
    });
  }
  var tzSwitch = document.getElementById("tz-local");
  if (tzSwitch) {
    tzSwitch.checked = localTimes;
    tzSwitch.closest("[hidden]") && tzSwitch.closest("[hidden]").removeAttribute("hidden");
    tzSwitch.addEventListener("change", function () {
      localTimes = tzSwitch.checked;
      try { localStorage.setItem(TZ_KEY, localTimes ? "local" : "utc"); } catch (e) { /* storage off */ }
      showTimes(true);
    });
  }
  if (localTimes) showTimes(true);
  document.addEventListener("htmx:wsAfterMessage", function () { showTimes(false); });

  tick();
  // Each second's texts are written at the start of a frame, with any push waiting for it (one
  // style and layout pass for both), never between frames.
  setInterval(function () { watchdog(); tickSoon(); }, 1000);

  // What a kind's script (KindWeb.scripts, loaded after this one) builds on.
  window.kubedash = {
    human: human, each: each, setText: setText, count: count, shown: shown, instant: instant,
    // fn(now) every second (now: the server's clock, frozen while the page is stale).
    onTick: function (fn) { ticks.push(fn); tick(); },
    // now, or earlier for an element inside [data-as-of]: a part of the page about a followed
    // cluster that is not current (the Overview's clusters table) stops at its own moment.
    at: function (el, now) {
      var part = el.closest("[data-as-of]"), asOf = part ? Date.parse(part.dataset.asOf) : NaN;
      return isNaN(asOf) ? now : Math.min(now, asOf);
    },
    // Elements whose data-<key> instant is also their exact time's hover title.
    titled: function (selector, key, prefix) {
      TITLED.push([selector, key, prefix || ""]);
      if (zoneShown !== "utc") showTimes(true);
    }
  };

  // --- copy buttons: [data-copy] names the field (its value) or element (its text) copied --
  function copied(button, ok) {
    var note = document.getElementById(button.dataset.copy + "-copied");
    setText(note, ok ? "Copied" : "Press Ctrl+C (or ⌘C) to copy");
    if (ok) setTimeout(function () { setText(note, ""); }, 4000);
  }
  document.addEventListener("click", function (e) {
    var button = e.target.closest && e.target.closest("button[data-copy]");
    var field = button && document.getElementById(button.dataset.copy);
    if (!field) return;
    var isField = /^(INPUT|TEXTAREA)$/.test(field.tagName);
    var text = isField ? field.value : field.textContent;
    function select() {     // what execCommand("copy") copies: the field's text, selected
      if (isField) { field.select(); return; }
      var range = document.createRange();
      range.selectNodeContents(field);
      var sel = window.getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
    }
    if (isField) field.select();
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(function () { copied(button, true); },
        function () { select(); copied(button, document.execCommand("copy")); });
    } else {
      select();
      copied(button, document.execCommand("copy"));
    }
  });
  // A list row's copy buttons (templates/web/_copy_row.html) carry their text: the button says
  // "Copied" for a moment, and the list's #copy-status tells a screen reader what was copied.
  document.addEventListener("click", function (e) {
    var button = e.target.closest && e.target.closest("button[data-copy-text]");
    if (!button) return;
    var text = button.dataset.copyText, status = document.getElementById("copy-status");
    function done(ok) {
      if (!ok) { window.prompt("Copy:", text); return; }
      button.dataset.copied = "1";
      if (!button.dataset.label) button.dataset.label = button.textContent;
      setText(button, "Copied");
      setText(status, "Copied " + text);
      clearTimeout(button.copiedTimer);
      button.copiedTimer = setTimeout(function () {
        delete button.dataset.copied;
        setText(button, button.dataset.label);
      }, 2000);
    }
    function fallback() {     // (no async clipboard: not a secure context, or refused)
      var area = document.createElement("textarea");
      area.value = text;
      area.setAttribute("readonly", "");
      area.className = "vh";
      document.body.appendChild(area);
      area.select();
      var ok = false;
      try { ok = document.execCommand("copy"); } catch (err) { ok = false; }
      area.remove();
      button.focus();
      done(ok);
    }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(function () { done(true); }, fallback);
    } else {
      fallback();
    }
  });
  document.addEventListener("focusin", function (e) {
    if (e.target.matches && e.target.matches("input[data-select-all]")) e.target.select();
  });

  // --- confirmations: a form[data-confirm] submits only after its question is answered ----
  var dialog = null;
  function confirmDialog() {
    if (dialog) return dialog;
    dialog = document.createElement("dialog");
    dialog.className = "confirm";
    dialog.setAttribute("aria-labelledby", "confirm-q");
    dialog.innerHTML = '<form method="dialog"><p id="confirm-q"></p><div class="form-actions">' +
      '<button value="yes" class="primary"></button><button value="no" autofocus>Cancel</button></div></form>';
    document.body.appendChild(dialog);
    return dialog;
  }
  document.addEventListener("submit", function (e) {
    var form = e.target;
    if (!form.dataset || !form.dataset.confirm || form.dataset.confirmed) return;
    e.preventDefault();
    var d = confirmDialog();
    setText(d.querySelector("#confirm-q"), form.dataset.confirm);
    setText(d.querySelector("button[value=yes]"), form.dataset.confirmButton || "OK");
    d.returnValue = "";
    d.onclose = function () {
      if (d.returnValue !== "yes" || !form.isConnected) return;
      form.dataset.confirmed = "1";
      form.requestSubmit ? form.requestSubmit() : form.submit();
    };
    d.showModal();
  }, true);

  // --- forms: a refused save puts focus on its error summary, whose links focus the fields -
  var summary = document.getElementById("form-errors");
  if (summary) summary.focus();
  document.addEventListener("click", function (e) {
    var link = e.target.closest && e.target.closest("a[data-focus-field]");
    var field = link && document.getElementById(link.getAttribute("href").slice(1));
    if (!field) return;
    e.preventDefault();
    var label = document.querySelector('label[for="' + field.id + '"]');
    (label || field).scrollIntoView({block: "center"});
    field.focus({preventScroll: true});
  });

  // --- the cluster selector (header): choosing a cluster opens the same page in it. With a
  // pointer, at once; from the keyboard (arrows move through the options of a closed select),
  // Enter or the Switch button confirms, so walking the list does not leave the page.
  var clusterKeyed = false;
  document.addEventListener("keydown", function (e) {
    if (e.target.matches && e.target.matches("select[data-cluster-switch]")) {
      clusterKeyed = e.key !== "Enter";
      if (e.key === "Enter") { e.preventDefault(); goCluster(e.target); }
    }
  }, true);
  document.addEventListener("pointerdown", function () { clusterKeyed = false; }, true);
  document.addEventListener("change", function (e) {
    if (e.target.matches && e.target.matches("select[data-cluster-switch]") && !clusterKeyed) goCluster(e.target);
  });
  function goCluster(select) {
    var u = new URL(location.href);
    ["cluster", "continue", "page"].forEach(function (k) { u.searchParams.delete(k); });
    if (select.value !== "local") u.searchParams.set("cluster", select.value);
    if (u.href !== location.href) location.href = u.href;
  }

  // --- keyboard shortcuts -------------------------------------------------------------------
  // "/" search, "?" this help (a modal <dialog>: it keeps focus inside and Esc closes it),
  // j / k move a row focus, Enter opens the row, "g" then a letter goes to a page (the header
  // links carry their letter in data-go). Never while typing in a field, never with Ctrl/Alt/⌘.
  var goPending = 0, focusedRowId = "";
  function typing(el) {
    var clicked = el && el.tagName === "INPUT" && /^(checkbox|radio|button|submit|reset)$/.test(el.type);
    return el && !clicked && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName) ||
                  (el.closest && el.closest("dialog[open]:not(#shortcuts)")));
  }
  function rows() {
    return Array.prototype.slice.call(document.querySelectorAll("#items > tr, #items > .card"));
  }
  function focusRow(row) {
    if (!row) return;
    rows().forEach(function (r) { r.classList.remove("kb-row"); });
    row.classList.add("kb-row");
    if (!row.hasAttribute("tabindex")) row.setAttribute("tabindex", "-1");
    focusedRowId = row.id;
    row.focus();
    row.scrollIntoView({block: "nearest"});
  }
  function moveRow(step) {
    var all = rows();
    if (!all.length) return;
    var at = all.indexOf(document.activeElement && document.activeElement.closest &&
                         document.activeElement.closest("#items > *"));
    if (at < 0) at = all.findIndex(function (r) { return r.id === focusedRowId; });
    focusRow(all[at < 0 ? (step > 0 ? 0 : all.length - 1) : Math.max(0, Math.min(all.length - 1, at + step))]);
  }
  document.addEventListener("keydown", function (e) {
    if (e.defaultPrevented || e.ctrlKey || e.metaKey || e.altKey || typing(e.target)) return;
    var help = document.getElementById("shortcuts");
    if (help && help.open) return;   // the dialog handles its own keys (Esc closes it)
    var key = e.key;
    if (goPending && Date.now() - goPending < 1500) {
      goPending = 0;
      var link = document.querySelector('a[data-go="' + (key.length === 1 ? key.toLowerCase() : "") + '"]');
      if (link) { e.preventDefault(); location.href = link.href; }
      return;
    }
    goPending = 0;
    if (key === "/") {
      // The page's own search (a list's name filter), else the header's search of all kinds.
      var search = document.querySelector("[data-search]") || document.querySelector("[data-search-global]");
      if (search) { e.preventDefault(); search.focus(); if (search.select) search.select(); }
    } else if (key === "?") {
      if (help) { e.preventDefault(); help.showModal(); }
    } else if (key === "j" || key === "k") {
      e.preventDefault();
      moveRow(key === "j" ? 1 : -1);
    } else if (key === "Enter" && e.target.matches && e.target.matches("#items > *")) {
      var open = e.target.querySelector("a[href]");
      if (open) { e.preventDefault(); open.click(); }
    } else if (key === "g") {
      goPending = Date.now();
    } else if (key === "e" || key === "y" || key === "d" || key === "x") {
      if (objectKey(key)) e.preventDefault();
    } else if (key === "<" || key === ">" || key === "-") {
      if (sortKey(key)) e.preventDefault();
    }
  });
  // The object keys (issue 41): e edit, y YAML, d delete (its confirmation page), x select. On a
  // detail page they follow the toolbar's links (a[data-key]: only there for those who may
  // edit; "y" without them shows the YAML panel); on a list, the focused row's object, and only
  // in a list the user may change (its rows sit in the bulk form: templates/web/_list_base.html).
  var ROW_PAGES = {e: "edit/", y: "yaml/", d: "delete/"};
  function currentRow() {
    var el = document.activeElement, row = el && el.closest && el.closest("#items > *");
    return row || (focusedRowId && document.getElementById(focusedRowId)) || null;
  }
  function objectKey(key) {
    var link = document.querySelector('#edit-toolbar a[data-key="' + key + '"][href]');
    if (link) { location.href = link.href; return true; }
    var row = currentRow(), box = row && row.querySelector("input[data-bulk-row]");
    if (!box) {
      var yaml = key === "y" && !document.getElementById("items") && document.getElementById("object-yaml");
      if (yaml) { yaml.scrollIntoView({block: "start"}); yaml.focus({preventScroll: true}); return true; }
      return false;
    }
    var mayEdit = !!row.closest("form.bulk-form");
    if (key === "x") {
      if (!mayEdit) return false;
      box.click();      // (the bulk code below counts it and shows the bar)
      return true;
    }
    var open = row.querySelector("a[href]");
    if (!open) return false;
    var url = new URL(open.href);
    if (mayEdit) url.pathname += ROW_PAGES[key];
    else if (key === "y") url.hash = "object-yaml";
    else return false;
    location.href = url.href;
    return true;
  }
  // Sort keys: > and < the next and previous sort column, - the other order; through the list's
  // own "Sort by" menu (#f-sort: each column's ascending and descending options in pairs), so the
  // new order is the view's canonical address, as if chosen there.
  function sortKey(key) {
    var select = document.getElementById("f-sort");
    if (!select || !select.options.length) return false;
    var at = Math.max(0, select.selectedIndex), n = select.options.length;
    select.selectedIndex = key === "-" ? Math.min(n - 1, at ^ 1) : (at + (key === ">" ? 2 : n - 2)) % n;
    select.dispatchEvent(new Event("change", {bubbles: true}));
    return true;
  }
  document.addEventListener("click", function (e) {
    var close = e.target.closest && e.target.closest("[data-close-dialog]");
    if (close) close.closest("dialog").close();
  });
  // A live push replaces a row element: the row focus stays on it.
  document.addEventListener("htmx:wsAfterMessage", function () {
    if (!focusedRowId || document.activeElement !== document.body) return;
    var row = document.getElementById(focusedRowId);
    if (row) focusRow(row);
  });

  // --- list filters that apply as they are chosen --------------------------------------------
  // A menu (namespace, page size, sort) applies when it changes; the name search after a
  // pause in typing; the label selector (half-typed, it is an error) on Enter, or Apply.
  // Applying loads the first page of the new view; the field keeps the focus (and what was
  // typed meanwhile) across that load: sessionStorage "kubedash.refocus".
  // On a phone the filters wait behind their "Filters" disclosure (open without JS, after an
  // error in them, or when coming back to a field being typed in).
  var filtersBox = document.getElementById("filters-box");
  var phone = window.matchMedia && window.matchMedia("(max-width: 640px)").matches;
  var REFOCUS_KEY = "kubedash.refocus", TYPING_PAUSE_MS = 600;
  var filters = document.getElementById("list-filters"), typingTimer = 0, applying = null;
  function applyFilters(field) {
    clearTimeout(typingTimer);
    applying = field;
    if (filters.requestSubmit) filters.requestSubmit(); else filters.submit();
  }
  if (filters) {
    filters.addEventListener("change", function (e) {
      if (e.target.tagName === "SELECT") applyFilters(e.target);
    });
    filters.addEventListener("input", function (e) {
      if (!e.target.matches("[data-search]")) return;
      clearTimeout(typingTimer);
      typingTimer = setTimeout(function () { applyFilters(e.target); }, TYPING_PAUSE_MS);
    });
    // The view's one address: the settings chosen, empty and default ones left out (the server sends
    // any other spelling to the same address, views.canonical_redirect).
    filters.addEventListener("submit", function (e) {
      clearTimeout(typingTimer);
      e.preventDefault();
      var query = new URLSearchParams();
      Array.prototype.forEach.call(filters.elements, function (el) {
        if (el.name && !el.disabled && el.value !== "" && el.value !== el.dataset.default) query.set(el.name, el.value);
      });
      var text = query.toString();
      location.href = location.pathname + (text ? "?" + text : "");
    });
    window.addEventListener("pagehide", function () {
      if (!applying || document.activeElement !== applying) return;
      try {
        sessionStorage.setItem(REFOCUS_KEY, JSON.stringify({
          path: location.pathname, id: applying.id, value: applying.value,
          caret: applying.selectionStart === undefined ? null : applying.selectionStart}));
      } catch (e) { /* storage off */ }
    });
    var back = null;
    try { back = JSON.parse(sessionStorage.getItem(REFOCUS_KEY) || "null"); sessionStorage.removeItem(REFOCUS_KEY); }
    catch (e) { back = null; }
    var field = back && back.path === location.pathname && document.getElementById(back.id);
    if (filtersBox && phone && !filtersBox.hasAttribute("data-keep-open") && !(field && filters.contains(field))) {
      filtersBox.open = false;
    }
    if (field && filters.contains(field)) {
      field.focus();
      if (field.matches("[data-search]") && field.value !== back.value) {
        // Typed while the page was loading: keep it, and apply it in turn.
        field.value = back.value;
        typingTimer = setTimeout(function () { applyFilters(field); }, TYPING_PAUSE_MS);
      }
      if (back.caret !== null && field.setSelectionRange) {
        try { field.setSelectionRange(field.value.length, field.value.length); } catch (e) { /* not text */ }
      }
    }
  }

  // --- the websocket ----------------------------------------------------------------------
  // Honest reconnects: while the socket is down the page shows what it last knew, says so
  // (with the last moment it heard the server), and stops counting down at that moment: a lease it cannot see being
  // renewed must not be shown as expired. Reconnects are retried with a jittered backoff
  // capped at RETRY_CAP_MS (1 s, jittered to 0.5-1 s: the page is back within about a second
  // of the server, and many pages do not all come back in the same instant), and
  // "Retry now" tries at once.
  var status = document.getElementById("live-status");
  var staleNote = document.getElementById("live-stale");
  var retryButton = document.getElementById("live-retry");
  var RETRY_FIRST_MS = 250, RETRY_CAP_MS = 1000, GATE_TICK_MS = 100, CLOSE_BEHIND = 4408, CLOSE_RELOAD = 4409;
  var attempts = 0, nextAttemptAt = 0, everOpen = false;

  function show(state, text) {
    if (!status) return;
    status.dataset.state = state;
    setText(status, text);
  }

  // "21:03:04" (UTC, or the browser's zone with "Local time").
  function clock(ms) {
    var d = new Date(ms);
    return localTimes ? pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds())
                      : d.toISOString().slice(11, 19) + " UTC";
  }

  function setStale(down) {
    if (down === (frozenAt !== null)) return;
    // Time stops at the last moment the server was heard (a beat or a push: what the page shows
    // was current then), and the note states that very moment: every countdown shows what it
    // said at the stated time, not a few seconds past it (issue 41). The rows look frozen
    // (body.is-stale: app.css dims them).
    frozenAt = down ? Math.min(Date.now() + skew, heardAt) : null;
    document.body.classList.toggle("is-stale", down);
    if (staleNote) {
      setText(document.getElementById("live-stale-text"),
              down ? "Not live since " + clock(frozenAt) + " — reconnecting. Showing the state as of " +
                     clock(frozenAt) + "; countdowns paused." : "");
      staleNote.hidden = !down;
      staleNote.dataset.frozenAt = down ? new Date(frozenAt).toISOString() : "";
    }
    tick();
  }

  // The socket in use (open), the wrapper that reopens it, and when the one being opened started.
  var current = null, wrapper = null, pendingSince = 0;
  // Nothing heard for two beats: the server stopped answering without closing the socket (a
  // paused or wedged process, a dead network path). Drop that socket (its late messages and
  // close are ignored) and reconnect, catching up as after any reconnect. A socket that does
  // not open within the same time is given up too (the extension then tries again).
  function watchdog() {
    var now = Date.now() + skew;
    if (current && current.readyState === 1 && now - heardAt > LOST_MS) {
      var gone = current;
      current = null;
      gone.onclose = gone.onerror = null;
      try { gone.close(); } catch (e) { /* already closing */ }
      show("down", "Reconnecting…");
      setStale(true);
      if (wrapper) wrapper.reconnect();
    } else if (pending && pending.readyState === 0 && pendingSince && Date.now() - pendingSince > LOST_MS) {
      pendingSince = 0;
      pending.close();
    }
  }

  // The delay before attempt n (0-based): doubling from RETRY_FIRST_MS, capped, jittered to
  // 50-100 % of that so that many pages do not all come back at the same instant.
  function backoff(n) {
    var ceiling = Math.min(RETRY_CAP_MS, RETRY_FIRST_MS * Math.pow(2, n));
    return ceiling / 2 + Math.random() * ceiling / 2;
  }

  var pending = null;   // the socket being opened, if any
  if (retryButton) retryButton.addEventListener("click", function () {
    nextAttemptAt = 0;
    show("down", "Reconnecting…");
    // An attempt still waiting for an answer is abandoned: its close starts a fresh one.
    if (pending && pending.readyState === WebSocket.CONNECTING) pending.close();
  });

  document.addEventListener("htmx:wsOpen", function (e) {
    everOpen = true;
    attempts = 0;
    current = pending;
    wrapper = e.detail && e.detail.socketWrapper;
    heardAt = Date.now() + skew;
    // Not "Live" yet: the server first sends what the page missed, then LIVE (caughtUp).
    show("catching-up", "Catching up…");
  });
  // LIVE, applied after the pushes that came before it: the page shows everything it missed.
  function caughtUp() {
    show("live", "Live");
    setStale(false);
  }
  document.addEventListener("htmx:wsError", function () { show("down", "Reconnecting…"); });
  document.addEventListener("htmx:wsClose", function (e) {
    var code = e.detail && e.detail.event ? e.detail.event.code : 0;
    if (code === CLOSE_RELOAD) {   // what the page must show does not fit a push: the page, afresh
      show("catching-up", "Reloading…");
      location.reload();
      return;
    }
    // 4408: this page fell too far behind the server's pushes: reconnect and catch up.
    if (code >= 4000 && code !== CLOSE_BEHIND) {   // the server ended this page's access: see "access ended" below
      accessEnded(code);
      return;
    }
    show("down", everOpen ? "Reconnecting…" : "Connecting…");
    if (everOpen) setStale(true);
    // The extension retries by itself only after abnormal closes (1006, 1011-1013); a clean
    // close (a restarting server says 1001) must reconnect too, or the page goes stale.
    if ([1006, 1011, 1012, 1013].indexOf(code) < 0 && e.detail && e.detail.socketWrapper) {
      if (code === CLOSE_BEHIND) nextAttemptAt = 0;   // at once: the server is there
      setTimeout(e.detail.socketWrapper.reconnect, 0);
    }
  });

  if (window.htmx) {
    // The extension asks for a socket every GATE_TICK_MS while down; this factory decides
    // when one is really opened (the backoff above, or at once after "Retry now"). Until
    // then it answers with a stand-in that closes straight away, costing no network.
    htmx.config.wsReconnectDelay = function () { return GATE_TICK_MS; };
    htmx.createWebSocket = function (url) {
      var now = Date.now();
      if (now < nextAttemptAt) return standIn();
      nextAttemptAt = now + backoff(attempts++);
      // Reconnect from the newest revision seen: pushes update #live-rv (hx-swap-oob).
      var mark = document.getElementById("live-rv");
      var u = new URL(url, location.href);
      if (mark && mark.dataset.rv) u.searchParams.set("rv", mark.dataset.rv);
      // ... and from the "N new" count the page shows (the server counts on from it).
      var announced = document.getElementById("items-new");
      if (announced && announced.dataset.count) u.searchParams.set("announced", announced.dataset.count);
      u.searchParams.set("ready", "1");   // (the server says LIVE once this page has caught up)
      url = u.href;
      var socket = new WebSocket(url, []);
      socket.binaryType = htmx.config.wsBinaryType;
      pending = socket;
      pendingSince = Date.now();
      // The extension's message listeners (added after this returns) get the pushes at the
      // next frame (deferPush); the rest of its listeners are its own.
      var add = socket.addEventListener.bind(socket), extension = [];
      socket.addEventListener = function (type, fn, options) {
        if (type === "message") extension.push(fn); else add(type, fn, options);
      };
      // A dropped socket's messages are ignored; a beat is answered and goes no further;
      // anything heard keeps the page live.
      add("message", function (e) {
        if (socket !== current) return;
        heardAt = Date.now() + skew;
        if (e.data === BEAT) {
          try { socket.send(PONG); } catch (err) { /* closing */ }
          tick();
          return;
        }
        if (e.data === LIVE) {
          deferPush(socket, [caughtUp], e);
          return;
        }
        deferPush(socket, extension, e);
      });
      return socket;
    };
  }

  // Pushes wait for the next animation frame, so that the DOM is written right before the
  // browser's style and layout pass, once for all the pushes of that frame (and the second's
  // texts, tick), never in the middle of a frame. A hidden tab has no frames: at most
  // PUSH_WAIT_MS then. A push of a socket dropped meanwhile is discarded: the reconnect
  // catches up from the last revision applied (#live-rv).
  var PUSH_WAIT_MS = 1000, pushes = [], pushFrame = 0, pushTimer = 0;
  function deferPush(socket, listeners, event) {
    pushes.push([socket, listeners, event]);
    if (pushFrame) return;
    pushFrame = requestAnimationFrame(applyPushes);
    pushTimer = setTimeout(applyPushes, PUSH_WAIT_MS);
  }
  function applyPushes() {
    cancelAnimationFrame(pushFrame);
    clearTimeout(pushTimer);
    pushFrame = pushTimer = 0;
    var batch = pushes;
    pushes = [];
    batch.forEach(function (p) {
      if (p[0] === current) p[1].forEach(function (fn) { fn(p[2]); });
    });
  }

  // A pushed row (or card) already on the page (web/live.py pushes whole rows, hx-swap-oob)
  // takes only what changed: its attributes and the cells (children) that differ. The row
  // element stays, and with it its checkbox, keyboard focus and observers, and the browser
  // lays out only what changed.
  var KEPT = {id: 1, tabindex: 1};   // (set on the page: live.js's row focus)
  document.addEventListener("htmx:oobBeforeSwap", function (e) {
    var old = e.detail.target, fragment = e.detail.fragment;
    var fresh = fragment && fragment.firstElementChild;
    if (!old || !fresh || fresh !== fragment.lastElementChild || !old.parentNode || old.parentNode.id !== "items" ||
        fresh.tagName !== old.tagName || fresh.id !== old.id || fresh.children.length !== old.children.length) return;
    var focused = old.classList.contains("kb-row");
    Array.prototype.slice.call(old.attributes).forEach(function (a) {
      if (!KEPT[a.name] && !fresh.hasAttribute(a.name)) old.removeAttribute(a.name);
    });
    Array.prototype.forEach.call(fresh.attributes, function (a) {
      if (!KEPT[a.name] && old.getAttribute(a.name) !== a.value) old.setAttribute(a.name, a.value);
    });
    if (focused) old.classList.add("kb-row");
    Array.prototype.slice.call(fresh.children).forEach(function (cell, i) {
      var was = old.children[i];
      if (!was.isEqualNode(cell)) old.replaceChild(cell, was);
    });
    e.detail.shouldSwap = false;
  });

  function standIn() {
    var socket = {readyState: 0, CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3, binaryType: "blob",
                  send: function () {}, close: function () {}, addEventListener: function () {},
                  removeEventListener: function () {}};
    setTimeout(function () {
      socket.readyState = 3;
      if (socket.onclose) socket.onclose({type: "close", code: 1006, reason: "waiting to retry", wasClean: false});
    }, 0);
    return socket;
  }

  // --- access ended (close codes 4xxx; dashboard/web/consumers.py) --------------------------
  // The server closed the socket because this page's access ended: no retry can help, so the
  // page says why instead of "reconnecting". 4401: the viewer was signed out (logout in any
  // tab, session expired, account deactivated); 4403: no longer allowed (share link revoked,
  // role or namespace taken away); others (4400 bad address): reload.
  function accessEnded(code) {
    if (retryButton) retryButton.hidden = true;
    setStale(true);
    var texts = {4401: ["off", "Signed out"], 4403: ["off", "No access — reload"]};
    var state = texts[code] || ["off", "Disconnected — reload"];
    show(state[0], state[1]);
    if (code !== 4401) return;
    setText(document.getElementById("live-stale-text"), "");
    var banner = document.getElementById("signed-out-banner");
    if (!banner) {
      banner = document.createElement("div");
      banner.id = "signed-out-banner";
      banner.className = "alert signed-out";
      banner.setAttribute("role", "alert");
      banner.appendChild(document.createTextNode("You have been signed out — "));
      var link = document.createElement("a");
      link.href = "/accounts/login/?next=" + encodeURIComponent(location.pathname + location.search);
      link.textContent = "sign in again";
      banner.appendChild(link);
      document.body.insertBefore(banner, document.body.firstChild);
    }
  }

})();

// Bulk actions on the list pages (templates/web/_bulk.html, web/bulk_views.py): "select all on
// this page", shift-click for a range, and the action bar shown only while rows are selected.
// Without JS the bar is always there and the server asks to select rows first.
// Selections are state, not DOM: a Set of the selected objects' keys ("namespace/name", the
// checkboxes' values). A live push that replaces a row checks it again from the set; the count
// is the set's; a selected object whose row leaves the page (deleted, or out of the view)
// leaves the set, and the bar says so.
(function () {
  var selected = new Set(), anchor = null;
  function boxes(form) { return Array.from(form.querySelectorAll("input[data-bulk-row]")); }
  function sync(form) {
    var rows = boxes(form), onPage = new Set(), left = [];
    rows.forEach(function (b) { onPage.add(b.value); b.checked = selected.has(b.value); });
    selected.forEach(function (key) { if (!onPage.has(key)) left.push(key); });
    left.forEach(function (key) { selected.delete(key); });
    var n = selected.size;
    var bar = form.querySelector("[data-bulk-bar]");
    var note = form.querySelector("[data-bulk-note]");
    if (note && left.length) {
      note.textContent = left.join(", ") + (left.length === 1 ? " is" : " are") +
        " no longer in this view (deleted?) and no longer selected.";
      note.hidden = false;
    }
    if (bar) bar.hidden = n === 0 && !(note && !note.hidden);
    var count = form.querySelector("[data-bulk-count]");
    if (count) count.textContent = n + " selected:";
    form.querySelectorAll("[data-bulk-bar] button[name=action]").forEach(function (b) { b.disabled = n === 0; });
    var all = form.querySelector("input[data-bulk-all]");
    if (all) { all.checked = n > 0 && n === rows.length; all.indeterminate = n > 0 && n < rows.length; }
  }
  function clearNote(form) {
    var note = form.querySelector("[data-bulk-note]");
    if (note) { note.hidden = true; note.textContent = ""; }
  }
  document.addEventListener("click", function (e) {
    var box = e.target.closest && e.target.closest("input[data-bulk-row]");
    var form = box && box.closest("form.bulk-form");
    if (!form) return;
    var rows = boxes(form), at = rows.indexOf(box), from = anchor ? rows.indexOf(anchor) : -1;
    // Shift-click: every row between the last clicked one and this one takes this one's state.
    var range = e.shiftKey && from >= 0 ? rows.slice(Math.min(from, at), Math.max(from, at) + 1) : [box];
    range.forEach(function (b) { if (box.checked) selected.add(b.value); else selected.delete(b.value); });
    anchor = box;
    clearNote(form);
    sync(form);
  });
  document.addEventListener("change", function (e) {
    var form = e.target.closest && e.target.closest("form.bulk-form");
    if (!form || !e.target.matches("input[data-bulk-all]")) return;
    boxes(form).forEach(function (b) { if (e.target.checked) selected.add(b.value); else selected.delete(b.value); });
    clearNote(form);
    sync(form);
  });
  function syncAll() { document.querySelectorAll("form.bulk-form").forEach(sync); }
  document.addEventListener("DOMContentLoaded", function () {
    // (a page restored with boxes already checked, e.g. back/forward)
    document.querySelectorAll("form.bulk-form input[data-bulk-row]:checked").forEach(function (b) { selected.add(b.value); });
    syncAll();
  });
  document.addEventListener("htmx:wsAfterMessage", syncAll);
})();

// kubedash: the command palette (":") and pins ("s") (issue 40). Kept apart from live.js, whose
// other keys (j/k, g o, /, ?) it leaves alone; it runs the same rule: never while typing in a
// field or inside another dialog, never with Ctrl/Alt/⌘.
(function () {
  "use strict";
  var dialog = document.getElementById("palette");
  if (!dialog || !dialog.dataset.palette) return;
  var data = JSON.parse(dialog.dataset.palette);
  var input = document.getElementById("palette-input");
  var list = document.getElementById("palette-list");
  var status = document.getElementById("pin-status");
  var options = [], active = -1;

  function typing(el) {
    // (the palette's own field, just closed: focus may not have gone back yet)
    if (el && el.closest && el.closest("#palette") && !dialog.open) return false;
    return el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName) ||
                  (el.closest && el.closest("dialog[open]")));
  }
  function inCluster(url, name) {
    var u = new URL(url, location.href);
    if (name === undefined) name = data.cluster;
    if (name && name !== "local") u.searchParams.set("cluster", name); else u.searchParams.delete("cluster");
    return u.pathname + u.search;
  }
  function starts(text, word) { return text.toLowerCase().indexOf(word.toLowerCase()) === 0; }
  function has(text, word) { return text.toLowerCase().indexOf(word.toLowerCase()) >= 0; }

  // What the typed command may mean: [{label, hint, url}], best first.
  // The suggestions, fetched when the palette first opens (not with every page).
  var loaded = null;
  function load() {
    if (!loaded) {
      var url = "/views/palette/" + (data.cluster ? "?cluster=" + encodeURIComponent(data.cluster) : "");
      loaded = fetch(url, {credentials: "same-origin", headers: {"Accept": "application/json"}})
        .then(function (r) { if (!r.ok) throw new Error(r.status); return r.json(); })
        .then(function (found) { Object.assign(data, found); })
        .catch(function () { loaded = null; });
    }
    return loaded || Promise.resolve();
  }
  function suggest(text) {
    if (!data.kinds) return [];
    var words = text.trim().replace(/^:/, "").split(/\s+/).filter(Boolean);
    var cmd = (words[0] || "").toLowerCase(), arg = words.slice(1).join(" "), out = [];
    var kinds = [{name: "overview", title: "Overview", url: "/"}].concat(data.kinds);
    kinds.forEach(function (k) {
      if (!starts(k.name, cmd)) return;
      if (words.length > 1 && k.name !== "overview") {
        var names = data.namespaces.filter(function (ns) { return starts(ns, arg); });
        if (names.indexOf(arg) < 0) names.push(arg);   // (a namespace the menu does not know yet)
        names.forEach(function (ns) {
          out.push({label: ":" + k.name + " " + ns, hint: k.title + " in namespace " + ns,
                    url: inCluster(k.url + "?namespace=" + encodeURIComponent(ns))});
        });
      } else if (words.length <= 1) {
        out.push({label: ":" + k.name, hint: k.title, url: inCluster(k.url)});
      }
    });
    if (starts("views", cmd) && words.length <= 1) out.push({label: ":views", hint: "Saved views", url: "/views/"});
    if (cmd === "view" || (starts("view", cmd) && cmd && words.length <= 1)) {
      data.views.filter(function (v) { return has(v.name, arg); }).forEach(function (v) {
        out.push({label: ":view " + v.name, hint: "Saved view", url: v.url});
      });
    }
    if (starts("cluster", cmd) && cmd) {
      data.clusters.filter(function (c) { return starts(c, arg); }).forEach(function (c) {
        var here = new URL(location.href);
        ["continue", "page"].forEach(function (k) { here.searchParams.delete(k); });
        out.push({label: ":cluster " + c, hint: "This page in cluster " + c, url: inCluster(here.href, c)});
      });
    }
    return out.slice(0, 30);
  }

  function render() {
    options = suggest(input.value);
    active = options.length ? 0 : -1;
    list.textContent = "";
    options.forEach(function (o, i) {
      var li = document.createElement("li");
      li.id = "palette-opt-" + i;
      li.setAttribute("role", "option");
      li.dataset.index = i;
      var strong = document.createElement("strong");
      strong.textContent = o.label;
      var hint = document.createElement("span");
      hint.className = "muted";
      hint.textContent = " " + o.hint;
      li.appendChild(strong); li.appendChild(hint);
      list.appendChild(li);
    });
    input.setAttribute("aria-expanded", options.length ? "true" : "false");
    mark();
    document.getElementById("palette-status").textContent = !data.kinds ? "Loading suggestions…" :
      options.length ? options.length + (options.length === 1 ? " suggestion" : " suggestions") + " · ↑↓ choose · Enter go · Esc close"
                     : "No such command: try leases, jobs team-a, views, view name, cluster name";
  }
  function mark() {
    Array.prototype.forEach.call(list.children, function (li, i) {
      li.setAttribute("aria-selected", i === active ? "true" : "false");
    });
    if (active >= 0) {
      input.setAttribute("aria-activedescendant", "palette-opt-" + active);
      list.children[active].scrollIntoView({block: "nearest"});
    } else {
      input.removeAttribute("aria-activedescendant");
    }
  }
  function go(i) {
    var o = options[i];
    if (!o) return;
    dialog.close();
    location.href = o.url;
  }
  function open() {
    input.value = "";
    dialog.showModal();
    input.focus();
    render();
    if (!data.kinds) load().then(function () { if (dialog.open) render(); });
  }

  input.addEventListener("input", render);
  dialog.addEventListener("close", function () { input.blur(); });
  input.addEventListener("keydown", function (e) {
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      e.preventDefault();
      if (!options.length) return;
      active = (active + (e.key === "ArrowDown" ? 1 : -1) + options.length) % options.length;
      mark();
    } else if (e.key === "Enter") {
      e.preventDefault();
      if (data.kinds) go(active);
      else load().then(function () { render(); go(active); });   // (typed before the suggestions came)
    }
  });
  list.addEventListener("click", function (e) {
    var li = e.target.closest && e.target.closest("[role=option]");
    if (li) go(Number(li.dataset.index));
  });
  dialog.addEventListener("click", function (e) { if (e.target === dialog) dialog.close(); });   // the backdrop

  // --- pins -----------------------------------------------------------------------------------
  // A toggle button (aria-pressed; its name stays "Pin …"): on an object's page (the server renders
  // it, a form that works without JavaScript), on each row of a list (added here, again after a
  // live push re-renders a row), and "s" on the focused row or the page.
  var pinned = new Set(data.pinned || []);
  function say(text) { if (status) { status.textContent = ""; status.textContent = text; } }
  function show(button, on) {
    button.setAttribute("aria-pressed", on ? "true" : "false");
    button.querySelector("[aria-hidden]").textContent = on ? "★" : "☆";
  }
  function pin(url, what, button) {
    var body = new URLSearchParams({url: url});
    return fetch("/pins/", {method: "POST", body: body, credentials: "same-origin",
                            headers: {"Accept": "application/json", "X-CSRFToken": data.csrf}})
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.json(); })
      .then(function (answer) {
        var path = new URL(url, location.href).pathname;
        if (answer.pinned) pinned.add(path); else pinned.delete(path);
        if (button) show(button, answer.pinned);
        say((answer.pinned ? "Pinned " : "Unpinned ") + what);
      })
      .catch(function () { say("Could not pin " + what); });
  }
  document.addEventListener("submit", function (e) {
    var form = e.target.closest && e.target.closest("form[data-pin]");
    if (!form) return;
    e.preventDefault();
    var button = form.querySelector(".pin-star");
    pin(form.elements.url.value, (button && button.querySelector(".vh").textContent.trim()) || "this", button);
  });

  // (from the attribute: a pushed fragment's links are not in this document yet)
  function pathOf(link) { return new URL(link.getAttribute("href"), location.href).pathname; }
  // A list row's object: its first link to an object of this list (/<plural>/<ns>/<name>/).
  function rowLink(row) {
    var links = row.querySelectorAll("a[href]");
    for (var i = 0; i < links.length; i++) {
      var path = pathOf(links[i]);
      if (path.indexOf(location.pathname) === 0 && path.slice(location.pathname.length).split("/").length === 3) return links[i];
    }
    return null;
  }
  function rowWhat(link) {
    return pathOf(link).slice(location.pathname.length).replace(/\/$/, "");
  }
  function decorateRow(row) {
    if (row.querySelector(".row-pin")) return;
    var link = rowLink(row);
    if (!link) return;
    var button = document.createElement("button");
    button.type = "button";
    button.className = "pin-star row-pin";
    button.setAttribute("aria-label", "Pin " + rowWhat(link));
    button.title = "Pin to the Overview (s)";
    var icon = document.createElement("span");
    icon.setAttribute("aria-hidden", "true");
    button.appendChild(icon);
    show(button, pinned.has(pathOf(link)));
    link.after(button);
  }
  function decorate() { document.querySelectorAll("#items > *").forEach(decorateRow); }
  // A pushed row gets its star before live.js compares it with the row on the page (a capturing
  // listener runs first), so an unchanged name cell stays as it is (live.js keeps unchanged cells).
  document.addEventListener("htmx:oobBeforeSwap", function (e) {
    var fragment = e.detail && e.detail.fragment;
    if (fragment && fragment.querySelectorAll) {
      fragment.querySelectorAll("tr[id], .card[id]").forEach(decorateRow);
    }
  }, true);
  document.addEventListener("click", function (e) {
    var button = e.target.closest && e.target.closest(".row-pin");
    if (!button) return;
    e.preventDefault();
    e.stopPropagation();
    var link = rowLink(button.closest("#items > *"));
    if (link) pin(link.getAttribute("href"), rowWhat(link), button);
  }, true);
  decorate();
  document.addEventListener("htmx:wsAfterMessage", decorate);
  document.addEventListener("htmx:afterSettle", decorate);

  function focusedRow() {
    var el = document.activeElement;
    var row = el && el.closest && el.closest("#items > *");
    return row || document.querySelector("#items > .kb-row");
  }

  document.addEventListener("keydown", function (e) {
    if (e.defaultPrevented || e.ctrlKey || e.metaKey || e.altKey || typing(e.target)) return;
    if (e.key === ":") {
      e.preventDefault();
      open();
    } else if (e.key === "s") {
      var row = focusedRow(), link = row && (rowLink(row) || row.querySelector("a[href^='/views/']"));
      if (link) {
        e.preventDefault();
        pin(link.getAttribute("href"), row.querySelector(".row-pin") ? rowWhat(link) : link.textContent.trim(),
            row.querySelector(".pin-star"));
        return;
      }
      var button = document.querySelector("form[data-pin] .pin-star");
      if (button) { e.preventDefault(); button.form.requestSubmit(); }
    }
  });
})();

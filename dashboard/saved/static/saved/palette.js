// kubedash: the command palette (":") and pins ("s") (issue 40). Kept apart from live.js, whose
// other keys (j/k, g o, /, ?) it leaves alone; it runs the same rule: never while typing in a
// field or inside another dialog, never with Ctrl/Alt/⌘.
(function () {
  "use strict";
  var dataEl = document.getElementById("palette-data");
  var dialog = document.getElementById("palette");
  if (!dataEl || !dialog) return;
  var data = JSON.parse(dataEl.textContent);
  var input = document.getElementById("palette-input");
  var list = document.getElementById("palette-list");
  var status = document.getElementById("pin-status");
  var options = [], active = -1;

  function typing(el) {
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
  function suggest(text) {
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
    document.getElementById("palette-status").textContent =
      options.length ? options.length + (options.length === 1 ? " suggestion" : " suggestions") + " · ↑↓ choose · Enter go · Esc close"
                     : "No such command: try leases, jobs team-a, views, view name, cluster prod";
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
  }

  input.addEventListener("input", render);
  input.addEventListener("keydown", function (e) {
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      e.preventDefault();
      if (!options.length) return;
      active = (active + (e.key === "ArrowDown" ? 1 : -1) + options.length) % options.length;
      mark();
    } else if (e.key === "Enter") {
      e.preventDefault();
      go(active);
    }
  });
  list.addEventListener("click", function (e) {
    var li = e.target.closest && e.target.closest("[role=option]");
    if (li) go(Number(li.dataset.index));
  });
  dialog.addEventListener("click", function (e) { if (e.target === dialog) dialog.close(); });   // the backdrop

  // --- pins -----------------------------------------------------------------------------------
  function say(text) { if (status) { status.textContent = ""; status.textContent = text; } }
  function pin(url, what, button) {
    var body = new URLSearchParams({url: url});
    return fetch("/pins/", {method: "POST", body: body, credentials: "same-origin",
                            headers: {"Accept": "application/json", "X-CSRFToken": data.csrf}})
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.json(); })
      .then(function (answer) {
        if (button) {
          button.setAttribute("aria-pressed", answer.pinned ? "true" : "false");
          button.querySelector("[aria-hidden]").textContent = answer.pinned ? "★" : "☆";
          button.querySelector(".pin-text").textContent = answer.pinned ? "Pinned" : "Pin";
        }
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
      var row = focusedRow(), link = row && row.querySelector("a[href]");
      if (link) {
        e.preventDefault();
        var star = row.querySelector(".pin-star");
        pin(link.getAttribute("href"), link.textContent.trim(), star);
        return;
      }
      var button = document.querySelector("form[data-pin] .pin-star");
      if (button) { e.preventDefault(); button.form.requestSubmit(); }
    }
  });
})();

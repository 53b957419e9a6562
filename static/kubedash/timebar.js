// The time bar (templates/web/_timebar.html, issue 38): "[" the previous change, "]" the next,
// Esc back to now, the slider and the date-time input. Kept apart from live.js's keys; nothing
// happens while typing in a field or with a dialog open.
//
// From one past moment to another the page moves in place: the next moment's page is fetched
// and its <main> (the bar, the banner and the content) replaces this one, the address pushed
// to the history. Back to now, or to another page, is a real navigation: the live page needs
// its socket. Anything that goes wrong falls back to a real navigation too.
(function () {
  "use strict";
  function typing(e) {
    var t = e.target;
    return t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName));
  }
  function inPast() { return !!document.querySelector("#asof-banner.asof"); }
  function go(url) {
    var target = new URL(url, window.location.href);
    if (!inPast() || !target.searchParams.get("at") || target.pathname !== window.location.pathname ||
        target.origin !== window.location.origin || !window.fetch || !window.DOMParser) {
      window.location.assign(target.href);
      return;
    }
    var main = document.getElementById("main");
    main.setAttribute("aria-busy", "true");
    fetch(target.href, {credentials: "same-origin", headers: {"Accept": "text/html"}})
      .then(function (r) { if (!r.ok || r.redirected) throw new Error("not a page"); return r.text(); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var next = doc.getElementById("main");
        if (!next || !next.querySelector("#asof-banner.asof")) throw new Error("not a past page");
        main.replaceWith(document.adoptNode(next));
        document.title = doc.title;
        window.history.pushState({timebar: true}, "", target.href);
        var note = document.querySelector("#asof-banner .asof-note");
        if (note) note.focus({preventScroll: true});
      })
      .catch(function () { window.location.assign(target.href); });
  }
  // Back and forward between moments moved in place: load what the address says.
  window.addEventListener("popstate", function () { window.location.reload(); });

  function follow(selector) {
    var link = document.querySelector(selector);
    if (link) { go(link.href); return true; }
    return false;
  }
  document.addEventListener("keydown", function (e) {
    if (e.defaultPrevented || e.ctrlKey || e.metaKey || e.altKey || typing(e)) return;
    if (document.querySelector("dialog[open], details.account[open]")) return;
    var done = false;
    if (e.key === "[") done = follow("[data-timebar-prev]");
    else if (e.key === "]") done = follow("[data-timebar-next]");
    else if (e.key === "Escape") done = follow("[data-timebar-now]");
    if (done) e.preventDefault();
  });
  // The bar's own links (presets, previous / next change) move in place too.
  document.addEventListener("click", function (e) {
    var link = e.target.closest && e.target.closest("#asof-banner .timebar-presets a, [data-timebar-prev], [data-timebar-next]");
    if (!link || e.button !== 0 || e.ctrlKey || e.metaKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    go(link.href);
  });

  // The form (date-time input or slider) as an address: the date-time input is UTC, sent with
  // its zone so the address says what it means; the slider's value is a moment (epoch seconds).
  function formUrl(form, at) {
    var params = new URLSearchParams(new FormData(form));
    params.set("at", at);
    return form.action.split("?")[0] + "?" + params.toString();
  }
  function sliderMoment(slider) { return new Date(+slider.value * 1000).toISOString().slice(0, 19) + "Z"; }
  document.addEventListener("input", function (e) {
    var slider = e.target.closest && e.target.closest("[data-timebar-slider]");
    if (slider) slider.setAttribute("aria-valuetext", sliderMoment(slider).replace("T", " ").replace("Z", " UTC"));
  });
  document.addEventListener("change", function (e) {
    var slider = e.target.closest && e.target.closest("[data-timebar-slider]");
    if (slider && slider.form) go(formUrl(slider.form, sliderMoment(slider)));
  });
  document.addEventListener("submit", function (e) {
    var form = e.target.closest && e.target.closest("form[data-timebar]");
    var input = form && form.querySelector("#timebar-at");
    if (!input || !input.value) return;
    var value = input.value;
    if (!/Z$/.test(value)) value = (value.length === 16 ? value + ":00" : value) + "Z";
    e.preventDefault();
    go(formUrl(form, value));
  });
})();

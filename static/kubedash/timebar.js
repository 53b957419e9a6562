// The time bar's keys (templates/web/_timebar.html, issue 38): "[" the previous change, "]"
// the next, Esc back to now. Kept apart from live.js's keys; nothing happens while typing
// in a field or with a dialog open.
(function () {
  "use strict";
  function typing(e) {
    var t = e.target;
    return t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName));
  }
  function follow(selector) {
    var link = document.querySelector(selector);
    if (link) { window.location.assign(link.href); return true; }
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
  // The slider: its value is a moment (epoch seconds); released, it goes there (the form's
  // other fields kept). While it moves, it says the moment it points at.
  var slider = document.querySelector("[data-timebar-slider]");
  function sliderMoment() { return new Date(+slider.value * 1000).toISOString().slice(0, 19) + "Z"; }
  if (slider) {
    slider.addEventListener("input", function () {
      slider.setAttribute("aria-valuetext", sliderMoment().replace("T", " ").replace("Z", " UTC"));
    });
    slider.addEventListener("change", function () {
      var form = slider.form, input = form && form.querySelector("#timebar-at");
      if (!input) return;
      input.type = "text";
      input.value = sliderMoment();
      form.submit();
    });
  }
  // The date-time input is UTC: send it with its zone, so the address says what it means.
  var form = document.querySelector("form[data-timebar]");
  if (form) {
    form.addEventListener("submit", function () {
      var input = form.querySelector("#timebar-at");
      if (input && input.value && !/Z$/.test(input.value)) {
        input.value = input.value.length === 16 ? input.value + ":00" : input.value;
        input.type = "text";
        input.value = input.value + "Z";
      }
    });
  }
})();

// The Job pages' part of the live-page script (dashboard/web/static/kubedash/live.js runs it): a finished
// Job's "deleted in 3m 10s" (ttlSecondsAfterFinished) counting down every second, as
// batch/web.py ttl_text writes it, frozen with the rest while the page is not live.
(function () {
  "use strict";
  var k = window.kubedash, each = k.each, setText = k.setText, shown = k.shown, instant = k.instant;

  function countdown(s) {
    s = Math.max(Math.floor(s), 0);
    if (s >= 3600) return Math.floor(s / 3600) + "h " + Math.floor(s % 3600 / 60) + "m";
    return s >= 60 ? Math.floor(s / 60) + "m " + (s % 60) + "s" : s + "s";
  }

  k.titled("[data-ttl-at]", "ttlAt", "deleted at ");
  k.onTick(function (now) {
    each("[data-ttl-at]", function (el) {
      if (!shown(el)) return;
      var left = (instant(el, "ttlAt") - now) / 1000;
      setText(el, left > 0 ? "deleted in " + countdown(left + 0.999) : "due for deletion " + countdown(-left) + " ago");
    });
  });
})();

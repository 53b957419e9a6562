// The Lease pages' part of the live-page script (dashboard/web/static/kubedash/live.js runs it): "renewed 12s
// ago", "expires in 4s" / "expired 3s ago", a lease row (or the detail summary) flipping from
// held to expired, and the overview's held / expired counts, every second with no round trip.
(function () {
  "use strict";
  var k = window.kubedash, human = k.human, each = k.each, setText = k.setText, count = k.count, shown = k.shown,
      instant = k.instant;

  k.titled("[data-renewed-at]", "renewedAt");
  k.titled("[data-expires-at]", "expiresAt");
  k.onTick(function (now) {
    each("[data-renewed-at]", function (el) {
      if (!shown(el)) return;
      var t = now - instant(el, "renewedAt");
      setText(el, "renewed " + (t < 1000 ? "just now" : human(t) + " ago"));
    });
    each("[data-expires-at]", function (el) {
      var left = instant(el, "expiresAt") - now;
      if (shown(el)) {
        setText(el, left > 0 ? "expires in " + human(Math.ceil(left / 1000) * 1000) : "expired " + human(-left) + " ago");
      }
      // A lease row (or the detail summary) flips held <-> expired: class and text.
      var row = el.__kdLease;   // (looked up once per element: every lease, every second)
      if (row === undefined) row = el.__kdLease = el.closest("[data-lease-live]");
      if (row && row.classList.contains("is-held") !== left > 0) {
        row.classList.toggle("is-held", left > 0);
        row.classList.toggle("is-expired", left <= 0);
        setText(row.querySelector("[data-state-label]"), left > 0 ? "held" : "expired");
      }
    });
    // Overview cards: held / expired counted from the leases' expiry instants (epoch ms).
    each("[data-expiries]", function (el) {
      var held = +(el.dataset.heldBase || 0), expired = 0, at = k.at(el, now);
      el.dataset.expiries.split(" ").forEach(function (t) {
        if (t) { if (+t > at) held++; else expired++; }
      });
      count(el.querySelector("[data-held]"), held);
      count(el.querySelector("[data-expired]"), expired);
    });
  });
})();

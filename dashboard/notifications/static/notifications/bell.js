// The header's bell (dashboard/notifications): its count is pushed by the page socket
// (web/badges.py). When a push raises it and the user has allowed it ("Allow browser
// notifications" on /notifications/), the browser shows a notification too.
(function () {
  "use strict";
  function unread() {
    var count = document.querySelector("#notify-bell .count");
    return count ? +count.getAttribute("data-unread") || 0 : 0;
  }
  var seen = unread();
  function check() {
    var now = unread();
    if (now > seen && "Notification" in window && Notification.permission === "granted") {
      var fresh = now - seen;
      new Notification("kubedash", { body: fresh + " new notification" + (fresh > 1 ? "s" : ""), tag: "kubedash-bell" });
    }
    seen = now;
  }
  document.addEventListener("htmx:wsAfterMessage", check);
  document.addEventListener("DOMContentLoaded", function () {
    seen = unread();
    var ask = document.getElementById("notify-allow");
    if (!ask || !("Notification" in window)) return;
    ask.hidden = Notification.permission !== "default";
    ask.addEventListener("click", function () {
      Notification.requestPermission().then(function () { ask.hidden = true; });
    });
  });
})();

// amcp inspector: search as you type. The only script; loaded from this node (CSP
// script-src 'self'), no inline handlers. The server renders and escapes every result:
// this file only asks for /ui/results with the form's fields and swaps the answer in.
(function () {
  "use strict";
  var form = document.getElementById("search");
  var target = document.getElementById("results");
  if (!form || !target) { return; }
  var timer = null;
  var inflight = null;
  var DELAY_MS = 120; // a keystroke pause, short enough to feel immediate

  function params() {
    var data = new URLSearchParams(new FormData(form));
    return data.toString();
  }

  function refresh() {
    var query = params();
    if (inflight) { inflight.abort(); }
    inflight = new AbortController();
    fetch(form.dataset.results + "?" + query, {
      signal: inflight.signal, credentials: "same-origin", headers: { "Accept": "text/html" }
    }).then(function (resp) {
      if (resp.status === 401) { window.location.assign("/ui/login"); return null; }
      return resp.text();
    }).then(function (html) {
      if (html === null || html === undefined) { return; }
      target.innerHTML = html; // server-rendered, every string escaped there
      window.history.replaceState(null, "", form.action + "?" + query);
    }).catch(function (err) {
      if (err.name !== "AbortError") { target.textContent = "Search failed: " + err.message; }
    });
  }

  function later() {
    if (timer) { clearTimeout(timer); }
    timer = setTimeout(refresh, DELAY_MS);
  }

  form.addEventListener("input", later);
  form.addEventListener("change", later);
  form.addEventListener("submit", function (ev) { ev.preventDefault(); refresh(); });
})();

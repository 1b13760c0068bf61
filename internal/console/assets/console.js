// mcp-gateway console: keeps the live part of the page (main#live) up to
// date from the server's event stream. The server renders and escapes
// everything; this script only swaps the HTML it sends.
"use strict";
(function () {
  const body = document.body;
  const live = document.getElementById("live");
  const url = body && body.dataset.events;
  if (!live || !url) {
    return;
  }
  const state = document.getElementById("live-state");
  const show = (on) => {
    body.dataset.live = on ? "on" : "off";
    if (state) {
      state.textContent = on ? "· live" : "· not live: reconnecting";
    }
  };
  const open = () => {
    const events = new EventSource(url);
    events.onopen = () => show(true);
    events.addEventListener("update", (e) => {
      // Keep the <details> a person opened open across updates.
      const opened = new Set();
      live.querySelectorAll("details[open]").forEach((d) => opened.add(d.dataset.viewDetails));
      live.innerHTML = e.data;
      live.querySelectorAll("details").forEach((d) => {
        if (opened.has(d.dataset.viewDetails)) {
          d.open = true;
        }
      });
      show(true);
    });
    events.addEventListener("ended", () => {
      events.close();
      window.location.assign(url.replace(/\/events$/, "/login"));
    });
    events.onerror = () => {
      show(false);
      if (events.readyState === EventSource.CLOSED) {
        // Refused (the session ended, the gateway restarted): the page
        // itself says what is wrong, or asks to log in again.
        window.setTimeout(() => window.location.reload(), 5000);
      }
    };
  };
  open();
})();

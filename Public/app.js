// The Band Licence web shell: no framework, no third-party requests, no inline code (CSP).
"use strict";

const statusLine = document.getElementById("status");

function announce(text) {
  statusLine.textContent = text;
}

function show(id) {
  for (const section of ["signed-out", "signed-in"]) {
    document.getElementById(section).hidden = section !== id;
  }
}

// The session decides the view. A 401 is the ordinary signed-out answer, never an error.
async function loadSession() {
  let response;
  try {
    response = await fetch("/api/client/v1/session", {
      credentials: "same-origin",
      cache: "no-store",
      headers: { Accept: "application/json" },
    });
  } catch {
    show("signed-out");
    announce("You appear to be offline. Your account will show when the connection returns.");
    return;
  }
  if (response.status === 200) {
    const session = await response.json();
    document.getElementById("account-summary").textContent =
      `${session.account.displayName} (${session.account.email})`;
    show("signed-in");
    return;
  }
  show("signed-out");
  if (response.status !== 401 && response.status !== 404) {
    announce("Your account could not be loaded just now. Please try again shortly.");
  }
}

if ("serviceWorker" in navigator) {
  navigator.serviceWorker.register("/sw.js", { scope: "/" }).catch(() => {
    // The shell works without it; only offline support is lost.
  });
}

loadSession();

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

// Outside production the deployment is shown on every screen: its label, a colour of its own
// (styles.css keys it on data-environment) and a title prefix, so staging is never mistaken for
// production.
async function showDeployment() {
  let config;
  try {
    const response = await fetch("/api/client/v1/config", { cache: "no-store", headers: { Accept: "application/json" } });
    if (!response.ok) return;
    config = await response.json();
  } catch {
    return;
  }
  const { environment, label } = config.deployment;
  document.documentElement.dataset.environment = environment;
  if (environment === "production") return;
  const badge = document.getElementById("deployment");
  badge.textContent = label;
  badge.hidden = false;
  document.title = `[${label}] ${document.title}`;
  const colours = { staging: "#b45309", development: "#047857" };
  const meta = document.querySelector('meta[name="theme-color"]');
  if (meta && colours[environment]) meta.content = colours[environment];
}

if ("serviceWorker" in navigator) {
  navigator.serviceWorker.register("/sw.js", { scope: "/" }).catch(() => {
    // The shell works without it; only offline support is lost.
  });
}

showDeployment();
loadSession();

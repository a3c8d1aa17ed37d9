// The Band Licence web shell: no framework, no third-party requests, no inline code (CSP).
"use strict";

const statusLine = document.getElementById("status");

function announce(text) {
  statusLine.textContent = text;
}

// Both views start hidden (index.html): nothing is shown until the session is known.
function show(id) {
  for (const section of ["signed-out", "signed-in"]) {
    document.getElementById(section).hidden = section !== id;
  }
  document.getElementById("main").removeAttribute("aria-busy");
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
    showSession(await response.json());
    show("signed-in");
    loadDevices();
    return;
  }
  show("signed-out");
  if (response.status !== 401 && response.status !== 404) {
    announce("Your account could not be loaded just now. Please try again shortly.");
  }
}

const roleNames = { administrator: "Administrator", teacher: "Teacher", read_only: "Read-only" };

// Name, email and the school switcher, straight from the session answer (never stored).
function showSession(session) {
  document.getElementById("account-name").textContent = session.account.displayName;
  document.getElementById("account-email").textContent = session.account.email;
  const select = document.getElementById("school");
  const role = document.getElementById("school-role");
  select.replaceChildren();
  for (const school of session.schools) {
    const option = document.createElement("option");
    option.value = school.id;
    option.textContent = school.name;
    option.dataset.role = roleNames[school.role] || school.role;
    option.dataset.administrator = school.role === "administrator" ? "yes" : "";
    select.append(option);
  }
  const none = session.schools.length === 0;
  document.getElementById("school-field").hidden = none;
  document.getElementById("no-schools").hidden = !none;
  // Administrators reach the chosen school's People page from here (the server page's link).
  const people = document.getElementById("people");
  const showRole = () => {
    const chosen = select.selectedOptions[0];
    role.textContent = chosen ? `Your role here: ${chosen.dataset.role}` : "";
    const manages = Boolean(chosen && chosen.dataset.administrator);
    document.getElementById("people-item").hidden = !manages;
    if (manages) {
      people.href = `/schools/${encodeURIComponent(chosen.value)}/people`;
      people.textContent = `People at ${chosen.textContent}`;
    }
  };
  select.onchange = () => {
    showRole();
    announce(`Now working in ${select.selectedOptions[0].textContent}.`);
  };
  showRole();
}

// Times in the browser's own time zone, with the zone named (server pages use the deployment's).
const timeFormat = new Intl.DateTimeFormat(document.documentElement.lang || undefined, {
  day: "numeric",
  month: "short",
  year: "numeric",
  hour: "2-digit",
  minute: "2-digit",
  timeZoneName: "short",
});

function deviceName(session) {
  if (session.kind !== "native") return session.browser || "Web browser";
  const platform = { ios: "iPhone or iPad app", android: "Android app" }[session.platform] || "App";
  return session.appVersion ? `${platform} ${session.appVersion}` : platform;
}

// Active sessions, each with a "Sign out" button (DELETE from this page: same-origin, cookie).
async function loadDevices() {
  const list = document.getElementById("devices");
  let sessions;
  try {
    const response = await fetch("/api/client/v1/sessions", { credentials: "same-origin", cache: "no-store" });
    if (!response.ok) return;
    sessions = (await response.json()).sessions;
  } catch {
    return;
  }
  list.replaceChildren();
  for (const session of sessions) {
    const item = document.createElement("li");
    const name = `${deviceName(session)}${session.current ? " (this browser)" : ""}`;
    const text = document.createElement("span");
    const seen = document.createElement("time");
    seen.dateTime = session.lastSeenAt;
    seen.textContent = timeFormat.format(new Date(session.lastSeenAt));
    text.append(`${name}, last seen `, seen);
    const button = document.createElement("button");
    button.type = "button";
    button.className = "button danger small";
    button.textContent = "Sign out";
    button.setAttribute("aria-label", `Sign out: ${name}`);
    button.addEventListener("click", () => revoke(session));
    item.append(text, " ", button);
    list.append(item);
  }
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  document.getElementById("devices-zone").textContent =
    `Times are in this device's time zone${zone ? ` (${zone})` : ""}.`;
}

async function revoke(session) {
  const response = await fetch(`/api/client/v1/sessions/${encodeURIComponent(session.id)}`, {
    method: "DELETE",
    credentials: "same-origin",
  }).catch(() => null);
  if (!response || (response.status !== 204 && response.status !== 404)) {
    announce("That device could not be signed out just now. Please try again.");
    return;
  }
  if (session.current) {
    signedOut("You have signed out.");
    return;
  }
  announce(`${deviceName(session)} was signed out.`);
  loadDevices();
}

function signedOut(message) {
  show("signed-out");
  document.getElementById("devices").replaceChildren();
  announce(message);
}

document.getElementById("sign-out").addEventListener("click", async () => {
  const response = await fetch("/api/client/v1/session", { method: "DELETE", credentials: "same-origin" }).catch(
    () => null,
  );
  if (response && (response.status === 204 || response.status === 401)) {
    signedOut("You have signed out.");
  } else {
    announce("You could not be signed out just now. Please try again.");
  }
});

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
  // The offline page shows the same label when the server cannot be reached (offline.js): only
  // the deployment's public name is kept, nothing of the account.
  try {
    localStorage.setItem("band-licence-deployment", JSON.stringify({ environment, label }));
  } catch {
    // Storage may be off; the offline page then shows no label.
  }
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

// The offline page: a retry that reloads the page the person asked for, and the deployment's
// label and colour as app.js last saw them (the page cannot ask the server: it is not answering).
"use strict";
document.getElementById("retry").addEventListener("click", () => {
  document.getElementById("status").textContent = "Trying again…";
  window.location.reload();
});

(() => {
  let deployment;
  try {
    deployment = JSON.parse(localStorage.getItem("band-licence-deployment") || "null");
  } catch {
    return;
  }
  if (!deployment || typeof deployment.environment !== "string" || typeof deployment.label !== "string") return;
  const { environment, label } = deployment;
  if (!["production", "staging", "development"].includes(environment)) return;
  document.documentElement.dataset.environment = environment;
  if (environment === "production") return;
  const badge = document.getElementById("deployment");
  badge.textContent = label;
  badge.hidden = false;
  document.title = `[${label}] ${document.title}`;
  const colours = { staging: "#b45309", development: "#047857" };
  const meta = document.querySelector('meta[name="theme-color"]');
  if (meta && colours[environment]) meta.content = colours[environment];
})();

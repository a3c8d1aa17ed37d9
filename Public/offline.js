// The offline page: a retry that reloads the page the person asked for.
"use strict";
document.getElementById("retry").addEventListener("click", () => {
  document.getElementById("status").textContent = "Trying again…";
  window.location.reload();
});

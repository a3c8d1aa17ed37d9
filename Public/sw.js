// Band Licence service worker.
//
// It stores exactly the precache list that `band-edge shell build` writes below (the public shell
// and the offline page) and nothing else: there is no runtime caching, so no account, school,
// session, sign-in or API response can ever be kept on the device.
"use strict";

const VERSION = /* band-edge:version */ "";
const PRECACHE = /* band-edge:precache */ [];
const CACHE = `band-licence-shell-${VERSION}`;
const PRECACHED = new Set(PRECACHE);

self.addEventListener("install", (event) => {
  event.waitUntil(
    caches.open(CACHE)
      .then((cache) => cache.addAll(PRECACHE.map((url) => new Request(url, { cache: "reload" }))))
      .then(() => self.skipWaiting()),
  );
});

self.addEventListener("activate", (event) => {
  event.waitUntil(
    caches.keys()
      .then((names) => Promise.all(names.filter((name) => name !== CACHE).map((name) => caches.delete(name))))
      .then(() => self.clients.claim()),
  );
});

self.addEventListener("fetch", (event) => {
  const request = event.request;
  if (request.method !== "GET") return;
  const url = new URL(request.url);
  if (url.origin !== self.location.origin) return;

  if (request.mode === "navigate") {
    // Network first, so that pages are never stale; the offline page when there is no network.
    event.respondWith(fetch(request).catch(() => caches.match("/offline.html")));
    return;
  }
  if (PRECACHED.has(url.pathname)) {
    // Fingerprinted shell files never change under their names: the precached copy is right.
    event.respondWith(caches.match(url.pathname).then((hit) => hit || fetch(request)));
  }
  // Everything else goes to the network untouched and is never stored.
});

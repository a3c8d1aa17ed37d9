import Edge

#if canImport(Glibc)
  import Glibc
#endif

/// Routes the executable adds on its own: health, and the routes the test suites drive.
enum EdgeRoutes {
  /// `/healthz`: alive (prebuilt, on the loop).
  static func health() -> [Route] {
    [Route(.get, "/healthz", cacheClass: .private, fixed: .text(.ok, "ok\n"))]
  }

  /// Routes for the end-to-end suites, added only with `--test-routes`.
  static func testing() -> [Route] {
    [
      // A blocking handler on the pool: sleeps `ms` milliseconds (at most 10 s).
      Route(.get, "/_test/sleep", cacheClass: .private, execution: .pooled) { request in
        let ms = min(max(Int(request.queryItem("ms") ?? "") ?? 100, 0), 10_000)
        usleep(UInt32(ms) * 1000)
        return .text(.ok, "slept \(ms)\n")
      },
      // Echoes the decoded body and the number of trailers; the same under /api/, where the
      // engine's own refusals (413, 503) are JSON.
      Route(.post, "/_test/echo", cacheClass: .private) { request in echo(request) },
      Route(.post, "/api/_test/echo", cacheClass: .private) { request in echo(request) },
      // `n` bytes of content (at most 64 MiB), for clients that read slowly.
      Route(.get, "/_test/bytes", cacheClass: .private) { request in
        let n = min(max(Int(request.queryItem("n") ?? "") ?? 1024, 0), 64 << 20)
        // Shared bytes: a large body goes out as its own segment (sendmsg with several iovecs).
        return Response(
          status: .ok, headers: [("Content-Type", "application/octet-stream")],
          body: .shared(SharedBytes([UInt8](repeating: UInt8(ascii: "x"), count: n))))
      },
    ]
  }

  private static func echo(_ request: Request) -> Response {
    Response(
      status: .ok,
      headers: [
        ("Content-Type", "application/octet-stream"), ("X-Trailer-Count", "\(request.trailers.count)"),
      ],
      body: .bytes(request.body))
  }
}

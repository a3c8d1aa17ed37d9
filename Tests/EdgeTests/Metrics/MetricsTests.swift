import Testing

@testable import Edge

/// The exposition, the shards' sums, the bounded labels, and the one completion point both
/// protocols count at.
@Suite("Metrics")
struct MetricsTests {
  /// The sample lines (no comments) of an exposition.
  static func samples(_ metrics: Metrics) -> [String] {
    metrics.exposition().split(separator: "\n").map(String.init).filter { !$0.hasPrefix("#") }
  }

  static func value(_ metrics: Metrics, _ series: String) -> String? {
    samples(metrics).first { $0.hasPrefix(series + " ") }.map { String($0.dropFirst(series.count + 1)) }
  }

  @Test("every exposed family has HELP and TYPE once, names under band_edge_, counters ending in _total")
  func families() {
    // Listed first: a family another test registers meanwhile is not in this exposition.
    let families = MetricCatalog.families
    let text = Metrics(namespace: "band_edge").exposition()
    for family in families {
      guard let name = family.exposedName(namespace: "band_edge") else { continue }
      #expect(name.hasPrefix("band_edge_"))
      #expect(family.kind != .counter || name.hasSuffix("_total"), "\(name)")
      #expect(text.components(separatedBy: "# HELP \(name) ").count == 2, "\(name)")
      #expect(text.contains("# TYPE \(name) \(family.kind.rawValue)\n"), "\(name)")
    }
  }

  @Test(
    "a request is counted by route, method, protocol and code; what is not in a label's list is other",
    arguments: [
      (HTTPMethod.get, 200, MetricProtocol.http1, #"method="GET",protocol="http1",code="200""#),
      (HTTPMethod.head, 304, MetricProtocol.h2, #"method="HEAD",protocol="h2",code="304""#),
      (HTTPMethod("BREW"), 418, MetricProtocol.http1, #"method="other",protocol="http1",code="other""#),
      (HTTPMethod.post, 429, MetricProtocol.h2, #"method="POST",protocol="h2",code="429""#),
      (nil, 400, MetricProtocol.http1, #"method="other",protocol="http1",code="400""#),
      (HTTPMethod.delete, 999, MetricProtocol.http1, #"method="DELETE",protocol="http1",code="other""#),
    ])
  func requestLabels(method: HTTPMethod?, status: Int, protocol: MetricProtocol, labels: String) throws {
    let metrics = Metrics(namespace: "band_edge")
    let shard = try #require(metrics.shard())
    let route = RouteNames.index("/metrics-test/labels")
    shard.served(
      route: route, method: method, protocol: `protocol`, status: status, cacheClass: .private, bytes: 10,
      durationNanoseconds: 1000)
    let line = "band_edge_http_requests_total{route=\"/metrics-test/labels\",\(labels)}"
    #expect(Self.value(metrics, line) == "1")
    // Series that counted nothing are not shown.
    #expect(Self.samples(metrics).filter { $0.hasPrefix("band_edge_http_requests_total") }.count == 1)
  }

  @Test("no route is `none`; a route's name keeps its index")
  func routeNames() {
    #expect(RouteNames.names.first == "none")
    let a = RouteNames.index("/metrics-test/a")
    #expect(RouteNames.index("/metrics-test/a") == a)
    #expect(RouteNames.names[a] == "/metrics-test/a")
    let family = MetricCatalog.engine[MetricID.requests.rawValue]
    let series = MetricFamily.requestSeries(route: a, method: .get, protocol: .h2, status: 204)
    #expect(
      family.labelValues(series, routes: RouteNames.names).map { "\($0.0)=\($0.1)" } == [
        "route=/metrics-test/a", "method=GET", "protocol=h2", "code=204",
      ])
  }

  @Test(
    "a histogram counts a value in the first bucket whose bound it does not pass; the exposition is cumulative",
    arguments: [
      (400_000 as UInt64, "0.0005"), (500_000, "0.0005"), (500_001, "0.001"), (7_000_000, "0.01"),
      (10_000_000_000, "10"), (11_000_000_000, "+Inf"),
    ])
  func histogram(nanoseconds: UInt64, bucket: String) throws {
    let metrics = Metrics(namespace: "band_edge")
    try #require(metrics.shard()).observe(.requestDuration, 1, nanoseconds)
    let bounds = MetricFamily.durationBuckets.map(Metrics.number) + ["+Inf"]
    let first = try #require(bounds.firstIndex(of: bucket))
    for (i, bound) in bounds.enumerated() {
      let line = "band_edge_http_request_duration_seconds_bucket{class=\"revalidate\",le=\"\(bound)\"}"
      #expect(Self.value(metrics, line) == (i >= first ? "1" : "0"), "\(bound)")
    }
    #expect(Self.value(metrics, #"band_edge_http_request_duration_seconds_count{class="revalidate"}"#) == "1")
    #expect(
      Self.value(metrics, #"band_edge_http_request_duration_seconds_sum{class="revalidate"}"#)
        == Metrics.number(Double(nanoseconds) / 1e9))
  }

  @Test("each thread counts in its own shard; a scrape sums them")
  func shardsSum() async throws {
    let metrics = Metrics(namespace: "band_edge")
    await withTaskGroup(of: Void.self) { group in
      for _ in 0..<4 {
        group.addTask {
          // A thread of its own, as loops and workers are.
          await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            startThread {
              for _ in 0..<1000 { metrics.shard()?.count(.h2Streams) }
              done.resume()
            }
          }
        }
      }
    }
    #expect(metrics.total(.h2Streams) == 4000)
    #expect(Self.value(metrics, "band_edge_h2_streams_total") == "4000")
  }

  /// Families registered as the composition registers its application's: once per process.
  static let widgets = MetricCatalog.register(
    MetricFamily(
      name: "band_edge_test_widgets_total", kind: .counter, help: "Widgets made, by colour.",
      labels: [MetricLabel("colour", ["red", "blue"])]))
  static let waits = MetricCatalog.register(
    MetricFamily(
      name: "band_edge_test_wait_seconds", kind: .histogram, help: "Waits.", buckets: [0.001, 0.01],
      scale: 1e9))
  static let late = MetricCatalog.register(
    MetricFamily(
      name: "band_edge_test_late_total", kind: .counter, help: "Registered after a shard was made."))

  @Test("a registered family is shown after the engine's, zeros included, and counted through its handle")
  func registered() throws {
    let (widgets, waits) = (Self.widgets, Self.waits)
    let metrics = Metrics(namespace: "band_edge")
    let text = metrics.exposition()
    #expect(
      text.contains(
        "# HELP band_edge_test_widgets_total Widgets made, by colour.\n"
          + "# TYPE band_edge_test_widgets_total counter\n"
          + "band_edge_test_widgets_total{colour=\"red\"} 0\nband_edge_test_widgets_total{colour=\"blue\"} 0\n"
      ))
    let engineEnd = try #require(text.range(of: "# HELP band_edge_reloads_total "))
    let registeredStart = try #require(text.range(of: "# HELP band_edge_test_widgets_total "))
    #expect(engineEnd.lowerBound < registeredStart.lowerBound)
    let shard = try #require(metrics.shard())
    shard.count(widgets, 1, by: 2)
    shard.observe(waits, 0, 5_000_000)
    #expect(Self.value(metrics, #"band_edge_test_widgets_total{colour="blue"}"#) == "2")
    #expect(metrics.total(widgets) == 2)
    #expect(Self.value(metrics, #"band_edge_test_wait_seconds_bucket{le="0.001"}"#) == "0")
    #expect(Self.value(metrics, #"band_edge_test_wait_seconds_bucket{le="0.01"}"#) == "1")
    #expect(Self.value(metrics, "band_edge_test_wait_seconds_sum") == "0.005")
    // The engine's own families keep their cells.
    #expect(metrics.total(.h2Streams) == 0)
  }

  @Test("the engine's names begin with the registry's namespace; registered families and gauges keep theirs")
  func namespace() throws {
    _ = Self.widgets
    let metrics = Metrics(namespace: "shop")
    metrics.set(GaugeFamily("band_edge_test_gauge", "A gauge.") { [(labels: [], value: 1)] })
    let text = metrics.exposition()
    for name in [
      "shop_http_requests_total", "shop_h2_streams_total", "shop_http_requests_in_flight",
      "shop_connections_open",
      "band_edge_test_widgets_total", "band_edge_test_gauge",
    ] {
      #expect(text.contains("# HELP \(name) "), "\(name)")
    }
    #expect(!text.contains("band_edge_h2_streams_total") && !text.contains("edge_http_requests_in_flight"))
    #expect(Metrics().namespace == "edge")
    metrics.namespace = "band_edge"
    #expect(metrics.exposition().contains("# HELP band_edge_reloads_total "))
  }

  @Test("a family registered after a shard was made is counted in it")
  func registeredLate() throws {
    let metrics = Metrics(namespace: "band_edge")
    let shard = try #require(metrics.shard())
    shard.count(Self.late)
    #expect(Self.value(metrics, "band_edge_test_late_total") == "1")
  }

  @Test("metrics off: nothing is counted and only gauges are shown")
  func off() {
    let metrics = Metrics(namespace: "band_edge")
    metrics.enabled = false
    #expect(metrics.shard() == nil)
    metrics.set(GaugeFamily("band_edge_test_gauge", "A gauge.") { [(labels: [], value: 2)] })
    #expect(Self.samples(metrics) == ["band_edge_test_gauge 2"])
  }

  @Test("gauge label values are escaped as exposition 0.0.4 says; a gauge of the same name replaces the last")
  func gauges() {
    let metrics = Metrics(namespace: "band_edge")
    metrics.set(GaugeFamily("band_edge_test_gauge", "A gauge.") { [(labels: [("v", "x")], value: 1)] })
    metrics.set(
      GaugeFamily("band_edge_test_gauge", "A gauge.") { [(labels: [("v", "a\"b\\c\nd")], value: 0.25)] })
    let lines = Self.samples(metrics).filter { $0.hasPrefix("band_edge_test_gauge") }
    #expect(lines == [#"band_edge_test_gauge{v="a\"b\\c\nd"} 0.25"#])
  }

  @Test("in flight and open connections are derived from counters and never negative")
  func derived() throws {
    let metrics = Metrics(namespace: "band_edge")
    let shard = try #require(metrics.shard())
    shard.count(.requestsDispatched, by: 3)
    shard.count(.requestsCompleted, by: 1)
    shard.count(.connectionsAccepted, 1, by: 4)  // tls
    shard.count(.connectionsChosen, MetricProtocol.h2.rawValue, by: 2)
    shard.count(.connectionsChosen, MetricProtocol.http1.rawValue)
    shard.count(.connectionsClosedBy, 2)  // an h2 one closed
    #expect(Self.value(metrics, "band_edge_http_requests_in_flight") == "2")
    #expect(Self.value(metrics, #"band_edge_connections_open{protocol="h2"}"#) == "1")
    #expect(Self.value(metrics, #"band_edge_connections_open{protocol="http1"}"#) == "1")
    #expect(Self.value(metrics, #"band_edge_connections_open{protocol="pending"}"#) == "1")
  }

  @Test("HTTP/1 and HTTP/2 answers are counted at the same completion point, with their protocol")
  func bothProtocols() throws {
    let metrics = Metrics(namespace: "band_edge")
    var h1 = Harness()
    h1.context.metrics = metrics.shard()
    h1.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\nGET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n")
    #expect(
      Self.value(
        metrics, #"band_edge_http_requests_total{route="/hello",method="GET",protocol="http1",code="200"}"#)
        == "1")
    #expect(
      Self.value(
        metrics, #"band_edge_http_requests_total{route="none",method="GET",protocol="http1",code="404"}"#)
        == "1")
    // A refusal on a matched route (415 on its body policy) is counted under that route.
    h1.send("POST /api/json HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nhi")
    #expect(
      Self.value(
        metrics,
        #"band_edge_http_requests_total{route="/api/json",method="POST",protocol="http1",code="415"}"#)
        == "1")
    let h2 = try HTTP2ConnectionTests.Harness(metrics: metrics.shard())
    _ = h2.client.request("GET", "/hello")
    h2.send(h2.client.pendingBytes())
    #expect(
      Self.value(
        metrics, #"band_edge_http_requests_total{route="/hello",method="GET",protocol="h2",code="200"}"#)
        == "1")
    #expect(Self.value(metrics, "band_edge_h2_streams_total") == "1")
    #expect(Self.value(metrics, #"band_edge_http_response_size_bytes_count{class="revalidate"}"#) == "2")
  }
}

/// Why an HTTP/1 connection ends, for `band_edge_connections_closed_total{reason}`.
@Suite("Close reasons")
struct CloseReasonTests {
  @Test(
    "a broken request is a parse error, one past a size limit a limit, an unsupported coding a parse error",
    arguments: [
      ("GET / HTTP/1.1\nHost: x\r\n\r\n", CloseReason.parseError),
      ("GET /" + String(repeating: "a", count: 9000) + " HTTP/1.1\r\nHost: x\r\n\r\n", .limit),
      ("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", .parseError),
      ("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n", nil),
    ] as [(String, CloseReason?)])
  func reasons(request: String, reason: CloseReason?) {
    var h = Harness()
    h.send(request)
    #expect(h.machine.closeReason == reason)
  }

  @Test("a connection that times out says so")
  func timeout() {
    var h = Harness()
    h.send("GET /hello HTTP/1.1\r\nHo")
    _ = h.timeout(after: .seconds(11))
    #expect(h.machine.closeReason == .timeout)
  }
}

/// Which clients the admin listener serves.
@Suite("IP networks")
struct IPNetworkTests {
  @Test(
    "CIDR networks contain what they should",
    arguments: [
      ("10.0.0.0/8", [10, 1, 2, 3] as [UInt8], true),
      ("10.0.0.0/8", [11, 0, 0, 1], false),
      ("192.168.1.7", [192, 168, 1, 7], true),
      ("192.168.1.7", [192, 168, 1, 8], false),
      ("192.168.0.0/23", [192, 168, 1, 255], true),
      ("192.168.0.0/23", [192, 168, 2, 0], false),
      ("0.0.0.0/0", [8, 8, 8, 8], true),
      ("127.0.0.0/8", [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 127, 0, 0, 1], true),
      ("::1", [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], true),
      ("2001:db8::/32", [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9], true),
      ("2001:db8::/32", [0x20, 0x01, 0x0d, 0xb9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9], false),
      ("2001:db8::/32", [10, 0, 0, 1], false),
      ("::ffff:10.0.0.0/104", [10, 9, 8, 7], true),
      ("::ffff:10.0.0.0/104", [11, 9, 8, 7], false),
    ])
  func contains(network: String, address: [UInt8], expected: Bool) throws {
    #expect(try #require(IPNetwork(network)).contains(address) == expected)
  }

  @Test(
    "what is not a network is refused",
    arguments: ["", "10.0.0.0/33", "10.0.0/8", "::1/129", "host/8", "1.2.3.4/-1", "1.2.3.4/"])
  func refused(text: String) {
    #expect(IPNetwork(text) == nil)
  }

  @Test("a network prints with its host bits cleared")
  func description() {
    #expect(IPNetwork("10.1.2.3/8")?.description == "10.0.0.0/8")
    #expect(IPNetwork("2001:db8::1/32")?.description == "2001:db8::/32")
  }
}

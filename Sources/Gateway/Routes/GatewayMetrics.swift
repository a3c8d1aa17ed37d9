import Edge

/// The gateway's own metric family: the forwarded requests it refused before anything went
/// upstream, by the status it answered (400 a missing or malformed Idempotency-Key, 401, 403 a role
/// too low or a cross-origin change, 404 not a member, 413, 415, 426, 429, 503 switched off, 500 a
/// store failure). The upstream's own answers are counted by the engine's upstream families.
public struct GatewayMetrics: Sendable {
  public let refusals: MetricHandle

  /// The statuses counted by number; any other is `other`.
  static let statuses = ["400", "401", "403", "404", "413", "415", "426", "429", "500", "503", "other"]

  /// The process's, registered once, the first time it is asked for.
  public static let process = GatewayMetrics()

  /// Registers the family with the engine's catalog (once per process; later calls do nothing).
  public static func register() { _ = process }

  private init() {
    refusals = MetricCatalog.register(
      MetricFamily(
        name: "band_edge_gateway_refusals_total",
        kind: .counter, help: "Forwarded requests refused before anything went upstream, by status.",
        labels: [MetricLabel("status", Self.statuses)]))
  }

  /// Counts `response` when it is a refusal (anything but a forward), in this thread's shard.
  func counted(_ response: consuming Response) -> Response {
    count(response)
    return response
  }

  /// Counts `response` when it is a refusal, without a copy of it.
  func count(_ response: borrowing Response) {
    guard response.forward == nil else { return }
    let code = String(response.status.code)
    Metrics.process.shard()?.count(refusals, Self.statuses.firstIndex(of: code) ?? Self.statuses.count - 1)
  }
}

import Accounts
import ClientAPI
import Deployment
import Edge

#if canImport(Glibc)
  import Glibc
#endif

/// What operators watch (docs/operations.md): the admin listener's address and clients, its
/// routes (`/metrics`, `/healthz`, `/readyz`), and the gauges that describe this process and its
/// configuration, republished at every reload so that a kill switch shows on a graph.
enum Operators {
  /// The version this build says it is; the commit comes from `BAND_EDGE_COMMIT` (set by
  /// `build/run`), there being no build step that could stamp it.
  static let version = "0.16.0"

  /// Where the admin listener listens and whom it serves: `text` is `HOST:PORT` or a bare `PORT`
  /// (on 127.0.0.1); a non-loopback host needs `allow`, the client networks it serves.
  static func admin(listen text: String, allow: [String]) -> Result<(SocketAddress, [IPNetwork]), UsageError>
  {
    let address = UInt16(text).map { SocketAddress.v4(host: "127.0.0.1", port: $0) } ?? SocketAddress(text)
    guard let address else {
      return .failure(UsageError("the admin listener takes a numeric host:port or a port, not '\(text)'"))
    }
    var networks: [IPNetwork] = []
    for entry in allow {
      guard let network = IPNetwork(entry) else {
        return .failure(
          UsageError("--admin-allow takes networks such as 10.0.0.0/8 or 2001:db8::/32, not '\(entry)'"))
      }
      networks.append(network)
    }
    if !address.isLoopback && networks.isEmpty {
      return .failure(
        UsageError(
          "the admin listener \(address) is not on loopback: name the networks it serves with --admin-allow (or the config file's admin.allow)"
        ))
    }
    return .success((address, networks))
  }

  /// The admin listener's routes: the exposition, alive and ready.
  static func router(readiness: [Route], metrics: Metrics) throws -> Router {
    try Router(
      [
        Route(.get, "/metrics", cacheClass: .private) { _ in
          Response(
            status: .ok, headers: [("Content-Type", "text/plain; version=0.0.4; charset=utf-8")],
            body: .bytes(Array(metrics.exposition().utf8)))
        }
      ] + EdgeRoutes.health() + readiness, privatePrefixes: EngineRules.privatePrefixes,
      errors: EngineRules.errors(page: nil))
  }

  /// The gauges of the process: build, start time, readiness and the mail outbox.
  static func publishProcess(_ metrics: Metrics, readiness: ReadinessWatch) {
    let commit = ProcessEnvironment.value("BAND_EDGE_COMMIT").map(Self.labelSafe) ?? "unknown"
    let started = Double(time(nil))
    metrics.set(
      GaugeFamily("band_edge_build_info", "The running build: version and commit (always 1).") {
        [(labels: [("version", version), ("commit", commit)], value: 1)]
      })
    metrics.set(
      GaugeFamily("band_edge_start_time_seconds", "When the process started, in seconds since 1970.") {
        [(labels: [], value: started)]
      })
    metrics.set(
      GaugeFamily("band_edge_ready", "1 when /readyz answers 200 (the store answers), checked every second.")
      {
        readiness.ready < 0 ? [] : [(labels: [], value: Double(readiness.ready))]
      })
    metrics.set(
      GaugeFamily(
        "band_edge_mail_outbox_pending", "Mail in the outbox not yet sent, as the sender last counted."
      ) {
        let pending = MailDelivery.pending.load(ordering: .relaxed)
        return pending < 0 ? [] : [(labels: [], value: Double(pending))]
      })
  }

  /// The gauges of a configuration (at start and after each reload): its environment, its
  /// capabilities after kill switches, and the certificate's expiry.
  static func publish(_ deployment: Deployment, tls: TLSContext?, to metrics: Metrics) {
    let environment = deployment.environment.rawValue
    metrics.set(
      GaugeFamily("band_edge_deployment_info", "The deployment's environment (always 1).") {
        [(labels: [("environment", environment)], value: 1)]
      })
    let capabilities = Capabilities.names.map { ($0, deployment.capabilities[$0]) }
    metrics.set(
      GaugeFamily(
        "band_edge_capability_enabled", "Whether each capability is on, after kill switches (1 or 0)."
      ) {
        capabilities.map { (labels: [("capability", $0.0)], value: $0.1 ? 1 : 0) }
      })
    let notAfter = tls?.certificateNotAfter
    metrics.set(
      GaugeFamily(
        "band_edge_tls_certificate_expiry_timestamp_seconds",
        "When the served certificate (the earliest, with several) expires, in seconds since 1970."
      ) { notAfter.map { [(labels: [], value: Double($0))] } ?? [] })
  }

  /// A value fit for a label: visible ASCII, at most 40 characters.
  static func labelSafe(_ text: String) -> String {
    String(
      String.UnicodeScalarView(text.unicodeScalars.filter { $0.value > 0x20 && $0.value < 0x7F }.prefix(40)))
  }
}

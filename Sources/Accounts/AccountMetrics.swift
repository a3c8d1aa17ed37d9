import Edge

/// The metric families of the accounts and the client API — sign-ins, lockouts, native exchanges,
/// handoffs, sessions, the session cache, the database and the mail outbox — registered with the
/// engine's catalog. The composition registers them at start (`register()`), so that `/metrics`
/// lists them from the first scrape; anything that counts one registers them all first.
public struct AccountMetrics: Sendable {
  public let signInAttempts: MetricHandle
  public let lockoutsStarted: MetricHandle
  public let nativeExchanges: MetricHandle
  public let handoffsCreated: MetricHandle
  public let sessionsCreated: MetricHandle
  public let sessionsRevoked: MetricHandle
  public let sessionCacheLookups: MetricHandle
  public let databaseStatementDuration: MetricHandle
  public let databaseErrors: MetricHandle
  public let mailDeliveries: MetricHandle

  /// The process's, registered once, in this order, the first time any is asked for.
  public static let process = AccountMetrics()

  /// Registers the families with the engine's catalog (once per process; later calls do nothing).
  public static func register() { _ = process }

  /// Session revocation reasons, as the store writes them; any other is `other`.
  public static let revocationReasons = [
    "signed_out", "replaced_at_sign_in", "revoked_by_owner", "handoff_replayed", "operator", "password_reset",
    "password_set", "password_changed", "account_deleted", "account_disabled", "email_restored",
    "other",
  ]

  static let statementBuckets = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
  ]

  // swift-format-ignore
  private init() {
    let channel = MetricLabel("channel", ["web", "native"])
    let engine = MetricLabel("engine", ["sqlite", "postgres"])
    func register(_ name: String, _ help: String, _ labels: [MetricLabel] = [], kind: MetricKind = .counter,
      buckets: [Double] = [], scale: Double = 1) -> MetricHandle {
      MetricCatalog.register(
        MetricFamily(name: name, kind: kind, help: help, labels: labels, buckets: buckets, scale: scale))
    }
    signInAttempts = register("band_edge_signin_attempts_total", "Sign-in attempts, by form and outcome.",
      [channel, MetricLabel("outcome", ["ok", "bad_credentials", "locked", "rate_limited", "refused"])])
    lockoutsStarted = register("band_edge_lockouts_started_total",
      "Emails or trusted devices locked after repeated failures.")
    nativeExchanges = register("band_edge_native_exchanges_total", "Native handoff code exchanges, by outcome.",
      [MetricLabel("outcome", ["issued", "idempotent_retry", "invalid_grant", "replay_revoked"])])
    handoffsCreated = register("band_edge_handoffs_created_total", "Native sign-in handoff codes issued.")
    sessionsCreated = register("band_edge_sessions_created_total", "Sessions started, by form.", [channel])
    sessionsRevoked = register("band_edge_sessions_revoked_total", "Sessions revoked, by reason.",
      [MetricLabel("reason", Self.revocationReasons)])
    sessionCacheLookups = register("band_edge_session_cache_lookups_total",
      "Sessions looked up in the loops' caches (GET /session answers, forwarded reads' callers), by result.", [MetricLabel("result", ["hit", "miss"])])
    databaseStatementDuration = register("band_edge_db_statement_duration_seconds",
      "Database statement durations, by engine.", [engine], kind: .histogram, buckets: Self.statementBuckets,
      scale: 1e9)
    databaseErrors = register("band_edge_db_errors_total", "Database statements that failed, by engine.", [engine])
    mailDeliveries = register("band_edge_mail_deliveries_total", "Outbox mail handed to the SMTP server, by result.",
      [MetricLabel("result", ["sent", "failed"])])
  }
}

/// The sign-in form a person used.
public enum SignInChannel: Int, Sendable {
  case web, native
}

/// How a sign-in attempt ended.
public enum SignInOutcome: Int, Sendable {
  case ok, badCredentials, locked, rateLimited, refused
}

/// How a native code exchange ended.
public enum ExchangeMetric: Int, Sendable {
  case issued, idempotentRetry, invalidGrant, replayRevoked
}

/// The database engines.
public enum EngineName: Int, Sendable {
  case sqlite, postgres
}

extension Metrics {
  /// Counts a sign-in attempt in this thread's shard.
  public static func signIn(_ channel: SignInChannel, _ outcome: SignInOutcome) {
    count(.signInAttempts, channel.rawValue * 5 + outcome.rawValue)
  }
}

// The process's families by name, where this module counts them: `Metrics.count(.mailDeliveries, 0)`.
extension MetricHandle {
  static var signInAttempts: MetricHandle { AccountMetrics.process.signInAttempts }
  static var lockoutsStarted: MetricHandle { AccountMetrics.process.lockoutsStarted }
  static var nativeExchanges: MetricHandle { AccountMetrics.process.nativeExchanges }
  static var handoffsCreated: MetricHandle { AccountMetrics.process.handoffsCreated }
  static var sessionsCreated: MetricHandle { AccountMetrics.process.sessionsCreated }
  static var sessionsRevoked: MetricHandle { AccountMetrics.process.sessionsRevoked }
  static var sessionCacheLookups: MetricHandle { AccountMetrics.process.sessionCacheLookups }
  static var databaseStatementDuration: MetricHandle { AccountMetrics.process.databaseStatementDuration }
  static var databaseErrors: MetricHandle { AccountMetrics.process.databaseErrors }
  static var mailDeliveries: MetricHandle { AccountMetrics.process.mailDeliveries }
}

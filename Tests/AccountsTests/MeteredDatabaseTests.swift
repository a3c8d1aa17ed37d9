import Edge
import TestSupport
import Testing

@testable import Accounts
@testable import Store

/// The store's counts reach the metrics only when their transaction commits, once.
@Suite("Metered database")
struct MeteredDatabaseTests {
  /// An engine whose transactions run their body `attempts` times (each attempt but the last
  /// rolled back, as PostgreSQL's retry after a serialization failure does), or fail.
  final class RetryingEngine: Database {
    var attempts = 1
    var fails = false
    var dialect: SQLDialect { .sqlite }
    var changes: Int { 0 }
    func query(_ sql: String, _ parameters: [DatabaseValue]) throws(StoreError) -> [[DatabaseValue]] {
      if sql == "FAIL" { throw StoreError.failed("no such table") }
      return []
    }
    func execute(_ sql: String) throws(StoreError) {}
    func transaction<T>(_ body: () throws(StoreError) -> T) throws(StoreError) -> T {
      for _ in 1..<attempts { _ = try body() }
      let result = try body()
      if fails { throw StoreError.failed("the commit failed") }
      return result
    }
    func exclusiveTransaction<T>(_ lock: ExclusiveLock, _ body: () throws(StoreError) -> T) throws(StoreError)
      -> T
    { try transaction(body) }
    func schemaVersion() throws(StoreError) -> Int { 0 }
    func recordSchemaVersion(_ version: Int) throws(StoreError) {}
    func checkServable(name: String) throws(StoreError) {}
    func announceChange() throws(StoreError) {}
    func changeCount() throws(StoreError) -> Int { 0 }
  }

  @Test(
    "a note counts once at commit, whatever the attempts; nothing when the transaction fails",
    arguments: [(1, false, 1 as UInt64), (3, false, 1), (1, true, 0), (2, true, 0)])
  func commitCounts(attempts: Int, fails: Bool, expected: UInt64) {
    let metrics = Metrics()
    let engine = RetryingEngine()
    engine.attempts = attempts
    engine.fails = fails
    let db = MeteredDatabase(engine, metrics: metrics)
    _ = try? db.transaction { () throws(StoreError) in
      db.note(.handoffsCreated)
      // A nested transaction is part of the outer one.
      try db.transaction { () throws(StoreError) in db.note(.handoffsCreated, by: 2) }
    }
    #expect(metrics.total(.handoffsCreated) == expected * 3)
  }

  @Test("outside a transaction a note counts at once; statements are timed and failures counted by engine")
  func statements() throws {
    let metrics = Metrics()
    let db = MeteredDatabase(RetryingEngine(), metrics: metrics)
    db.note(.lockoutsStarted)
    try db.query("SELECT 1", [])
    #expect(throws: StoreError.self) { try db.query("FAIL", []) }
    #expect(metrics.total(.lockoutsStarted) == 1)
    #expect(metrics.total(.databaseErrors, series: EngineName.sqlite.rawValue) == 1)
    let family = MetricHandle.databaseStatementDuration
    let count = metrics.totals()[family.offset..<family.offset + family.width - 1].reduce(0, +)
    #expect(count == 2)
  }

  @Test("the families registered for the accounts and the API, as /metrics names and describes them")
  func registeredFamilies() {
    AccountMetrics.register()
    let text = Metrics().exposition()
    let expected = [
      ("band_edge_signin_attempts_total", "counter", "Sign-in attempts, by form and outcome."),
      (
        "band_edge_lockouts_started_total", "counter",
        "Emails or trusted devices locked after repeated failures."
      ),
      ("band_edge_native_exchanges_total", "counter", "Native handoff code exchanges, by outcome."),
      ("band_edge_handoffs_created_total", "counter", "Native sign-in handoff codes issued."),
      ("band_edge_sessions_created_total", "counter", "Sessions started, by form."),
      ("band_edge_sessions_revoked_total", "counter", "Sessions revoked, by reason."),
      (
        "band_edge_session_cache_lookups_total", "counter",
        "Sessions looked up in the loops' caches (GET /session answers, forwarded reads' callers), by result."
      ),
      ("band_edge_db_statement_duration_seconds", "histogram", "Database statement durations, by engine."),
      ("band_edge_db_errors_total", "counter", "Database statements that failed, by engine."),
      ("band_edge_mail_deliveries_total", "counter", "Outbox mail handed to the SMTP server, by result."),
    ]
    for (name, kind, help) in expected {
      #expect(text.contains("# HELP \(name) \(help)\n# TYPE \(name) \(kind)\n"), "\(name)")
    }
    #expect(text.contains(#"band_edge_signin_attempts_total{channel="native",outcome="rate_limited"} 0"#))
    #expect(
      text.contains(#"band_edge_db_statement_duration_seconds_bucket{engine="postgres",le="0.00025"} 0"#))
  }

  @Test(
    "audited actions map to their counters",
    arguments: [
      ("session.created", "web", "band_edge_sessions_created_total{channel=\"web\"}"),
      ("session.created", "native", "band_edge_sessions_created_total{channel=\"native\"}"),
      ("session.revoked", "signed_out", "band_edge_sessions_revoked_total{reason=\"signed_out\"}"),
      ("session.revoked", "operator", "band_edge_sessions_revoked_total{reason=\"operator\"}"),
      ("session.revoked", "something_new", "band_edge_sessions_revoked_total{reason=\"other\"}"),
      ("handoff.created", nil, "band_edge_handoffs_created_total"),
      ("sign_in.succeeded", "native", "band_edge_native_exchanges_total{outcome=\"issued\"}"),
      ("handoff.retried", nil, "band_edge_native_exchanges_total{outcome=\"idempotent_retry\"}"),
      ("handoff.refused", nil, "band_edge_native_exchanges_total{outcome=\"invalid_grant\"}"),
      ("handoff.replayed", nil, "band_edge_native_exchanges_total{outcome=\"replay_revoked\"}"),
      ("sign_in.failed", "locked", "band_edge_lockouts_started_total"),
      ("sign_in.failed", nil, nil),
      ("sign_in.failed", "while_locked", nil),
      ("sign_in.succeeded", "web", nil),
      ("account.created", nil, nil),
    ] as [(String, String?, String?)])
  func auditMapping(action: String, detail: String?, series: String?) {
    let metrics = Metrics()
    if let (id, index) = ClientStore.metric(action: action, detail: detail) {
      metrics.shard()?.count(id, index)
    }
    let counted = metrics.exposition().split(separator: "\n").filter {
      !$0.hasPrefix("#") && $0.hasSuffix(" 1")
    }
    #expect(counted == (series.map { ["\($0) 1"] } ?? []))
  }
}

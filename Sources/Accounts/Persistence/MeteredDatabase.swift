import Edge
import Store

/// The store's engine with its metrics: every statement's duration and failures by engine, and
/// the domain's counts (sign-ins, exchanges, sessions created and revoked) kept until the
/// transaction they were noted in commits — a PostgreSQL transaction retried after a
/// serialization failure, or rolled back, counts nothing twice and nothing that did not happen.
/// Used by one thread at a time, as the engine is.
package final class MeteredDatabase: Database {
  package let engine: any Database
  private let metrics: Metrics
  private let clock = MonotonicClock()
  private let name: Int
  private var depth = 0
  /// Whether a `transaction` is running: a statement now commits with it, not on its own.
  package var inTransaction: Bool { depth > 0 }
  private var pending: [(MetricHandle, Int, UInt64)] = []

  package init(_ engine: any Database, metrics: Metrics = .process) {
    self.engine = engine
    self.metrics = metrics
    name = (engine.dialect == .postgres ? EngineName.postgres : EngineName.sqlite).rawValue
  }

  /// Counts `n` in series `series` of `id` once the current transaction commits (at once outside
  /// one).
  package func note(_ id: MetricHandle, _ series: Int = 0, by n: UInt64 = 1) {
    guard n > 0 else { return }
    if depth == 0 {
      metrics.shard()?.count(id, series, by: n)
    } else {
      pending.append((id, series, n))
    }
  }

  private func timed<T>(_ body: () throws(StoreError) -> T) throws(StoreError) -> T {
    let start = clock.now()
    do {
      let result = try body()
      observe(since: start)
      return result
    } catch {
      observe(since: start)
      metrics.shard()?.count(.databaseErrors, name)
      throw error
    }
  }

  private func observe(since start: Instant) {
    metrics.shard()?.observe(.databaseStatementDuration, name, clock.now().nanoseconds &- start.nanoseconds)
  }

  /// A transaction's notes are kept from its last attempt's start to its commit.
  private func attemptBegins() { pending.removeAll() }

  private func committed() {
    let shard = metrics.shard()
    for (id, series, n) in pending { shard?.count(id, series, by: n) }
    pending.removeAll()
  }

  @discardableResult
  package func query(_ sql: String, _ parameters: [DatabaseValue]) throws(StoreError) -> [[DatabaseValue]] {
    try timed { () throws(StoreError) in try engine.query(sql, parameters) }
  }

  package func execute(_ sql: String) throws(StoreError) {
    try timed { () throws(StoreError) in try engine.execute(sql) }
  }

  package func transaction<T>(_ body: () throws(StoreError) -> T) throws(StoreError) -> T {
    if depth > 0 { return try body() }
    depth += 1
    defer {
      depth -= 1
      pending.removeAll()
    }
    let result = try engine.transaction { () throws(StoreError) -> T in
      attemptBegins()  // what an earlier attempt noted was rolled back
      return try body()
    }
    committed()
    return result
  }

  package func exclusiveTransaction<T>(_ lock: ExclusiveLock, _ body: () throws(StoreError) -> T)
    throws(StoreError)
    -> T
  {
    if depth > 0 { return try body() }
    depth += 1
    defer {
      depth -= 1
      pending.removeAll()
    }
    let result = try engine.exclusiveTransaction(lock) { () throws(StoreError) -> T in
      attemptBegins()
      return try body()
    }
    committed()
    return result
  }

  package var changes: Int { engine.changes }
  package var dialect: SQLDialect { engine.dialect }
  package func schemaVersion() throws(StoreError) -> Int { try engine.schemaVersion() }
  package func recordSchemaVersion(_ version: Int) throws(StoreError) {
    try engine.recordSchemaVersion(version)
  }
  package func checkServable(name: String) throws(StoreError) { try engine.checkServable(name: name) }
  package func announceChange() throws(StoreError) { try engine.announceChange() }
  package func changeCount() throws(StoreError) -> Int { try engine.changeCount() }
}

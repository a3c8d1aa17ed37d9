/// Why the store failed. The message is for operators and logs; clients get a generic 500.
public struct StoreError: Error, CustomStringConvertible, Sendable {
  public let description: String
  /// An error with `description` as its message.
  public init(_ description: String) { self.description = description }
}

/// A value bound to a `?` parameter or read from a column, in every engine.
public enum DatabaseValue: Sendable, Equatable {
  case null
  case integer(Int64)
  case text(String)
  case blob([UInt8])
}

/// The narrow seam the store's rules are written against (architecture.md, "Data"): one
/// connection, used by one thread at a time. SQL is written once, with `?` placeholders and the
/// dialect both engines share (`ON CONFLICT ... DO UPDATE`, `RETURNING`-free statements); what
/// differs — placeholders, how a write transaction begins, where the schema version lives, how the
/// store is checked before serving — is each engine's to say here. No engine type appears above it.
public protocol Database: AnyObject {
  /// Runs one statement with `parameters`, returning every row (columns as values).
  @discardableResult
  func query(_ sql: String, _ parameters: [DatabaseValue]) throws(StoreError) -> [[DatabaseValue]]

  /// Runs SQL that returns no rows and takes no parameters (several statements allowed).
  func execute(_ sql: String) throws(StoreError)

  /// Runs `body` in one write transaction: all of it commits, or none of it. Inside another
  /// transaction it simply runs as part of that one.
  func transaction<T>(_ body: () throws(StoreError) -> T) throws(StoreError) -> T

  /// Rows changed by the last statement.
  var changes: Int { get }

  /// The schema version recorded in the database (0 for a new one).
  func schemaVersion() throws(StoreError) -> Int

  /// Records `version` as the schema version (inside the migration's transaction).
  func recordSchemaVersion(_ version: Int) throws(StoreError)

  /// Checks that the store can serve — its structure is sound and a write commits — or throws a
  /// one-line reason naming `name` (the path or the masked URI).
  func checkServable(name: String) throws(StoreError)
}

extension Database {
  /// `query` without parameters.
  @discardableResult
  public func query(_ sql: String) throws(StoreError) -> [[DatabaseValue]] { try query(sql, []) }
}

import CPostgres

#if canImport(Glibc)
  import Glibc
#endif

extension PostgresConnection {
  /// The server process serving this connection.
  package var backendPID: Int { Int(be_PQbackendPID(handle)) }

  /// Starts listening on `channel` (an identifier of letters and underscores, never client text).
  package func listen(_ channel: String) throws(StoreError) {
    precondition(channel.allSatisfy { $0.isASCII && ($0.isLetter || $0 == "_") })
    try execute("LISTEN \(channel)")
    listening = true
  }

  /// What a wait for notifications brought: how many announced a change, and the highest sync
  /// marker among the others (`PostgresDatabase.markerPrefix`; nil: none).
  package struct Heard: Equatable {
    package var changes = 0
    package var marker: Int64? = nil
  }

  /// Waits up to `milliseconds` for notifications and returns what arrived (nothing after a quiet
  /// wait). A connection the server closed (a restart, `pg_terminate_backend`) throws an `outage`
  /// at once, instead of waiting out the timeout.
  package func notifications(waitingUpTo milliseconds: Int32) throws(StoreError) -> Heard {
    var heard = Heard()
    drainNotifications(into: &heard)
    guard heard == Heard() else { return heard }
    let socket = be_PQsocket(handle)
    guard socket >= 0, be_PQstatus(handle) == CONNECTION_OK else {
      throw StoreError.outage("the PostgreSQL listening connection is closed")
    }
    var ready = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
    let polled = poll(&ready, 1, milliseconds)
    guard polled != 0 else { return heard }
    guard polled > 0 || errno == EINTR else {
      throw StoreError.outage("waiting for PostgreSQL notifications failed")
    }
    guard be_PQconsumeInput(handle) == 1, be_PQstatus(handle) == CONNECTION_OK else {
      throw StoreError.outage("the PostgreSQL listening connection was closed by the server")
    }
    drainNotifications(into: &heard)
    return heard
  }

  /// Every notification received so far: a payload "sync <n>" is a marker, anything else a change.
  private func drainNotifications(into heard: inout Heard) {
    while let notification = be_PQnotifies(handle) {
      let payload = notification.pointee.extra.map { String(cString: $0) } ?? ""
      be_PQfreemem(notification)
      if payload.hasPrefix(PostgresDatabase.markerPrefix),
        let marker = Int64(payload.dropFirst(PostgresDatabase.markerPrefix.count))
      {
        heard.marker = max(heard.marker ?? marker, marker)
      } else {
        heard.changes += 1
      }
    }
  }
}

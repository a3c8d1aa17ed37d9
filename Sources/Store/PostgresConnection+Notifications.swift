import CPostgres

#if canImport(Glibc)
  import Glibc
#endif

extension PostgresConnection {
  /// The server process serving this connection.
  package var backendPID: Int { Int(PQbackendPID(handle)) }

  /// Starts listening on `channel` (an identifier of letters and underscores, never client text).
  package func listen(_ channel: String) throws(StoreError) {
    precondition(channel.allSatisfy { $0.isASCII && ($0.isLetter || $0 == "_") })
    try execute("LISTEN \(channel)")
    listening = true
  }

  /// Waits up to `milliseconds` for notifications and returns how many arrived (0 after a quiet
  /// wait). A connection the server closed (a restart, `pg_terminate_backend`) throws
  /// an `outage` at once, instead of waiting out the timeout.
  package func notifications(waitingUpTo milliseconds: Int32) throws(StoreError) -> Int {
    var arrived = drainNotifications()
    guard arrived == 0 else { return arrived }
    let socket = PQsocket(handle)
    guard socket >= 0, PQstatus(handle) == CONNECTION_OK else {
      throw StoreError.outage("the PostgreSQL listening connection is closed")
    }
    var ready = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
    let polled = poll(&ready, 1, milliseconds)
    guard polled != 0 else { return 0 }
    guard polled > 0 || errno == EINTR else {
      throw StoreError.outage("waiting for PostgreSQL notifications failed")
    }
    guard PQconsumeInput(handle) == 1, PQstatus(handle) == CONNECTION_OK else {
      throw StoreError.outage("the PostgreSQL listening connection was closed by the server")
    }
    arrived = drainNotifications()
    return arrived
  }

  private func drainNotifications() -> Int {
    var count = 0
    while let notification = PQnotifies(handle) {
      PQfreemem(notification)
      count += 1
    }
    return count
  }
}

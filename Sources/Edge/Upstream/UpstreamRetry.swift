/// What the loop knows of a failed attempt when it decides whether to try again.
struct UpstreamAttempt: Equatable {
  /// The request's method.
  var method: HTTPMethod
  /// 1 for the first attempt, 2 for the retry.
  var number = 1
  /// Whether the attempt went on a connection that had carried a request before.
  var reusedConnection: Bool
  /// Whether any byte of the request was written to the connection.
  var requestBytesWritten: Bool
  /// Whether any byte of the response arrived.
  var responseBytesReceived = false
}

/// When a failed attempt is tried once more, on a fresh connection: only to get past the
/// idle-close race (the upstream closes an idle connection just as it is reused), and never where
/// the upstream may have acted on the request.
enum UpstreamRetry {
  /// Why an attempt is tried again (for the metrics).
  enum Reason: Hashable, Sendable {
    /// Nothing of the request was written: any method may go again.
    case nothingWritten
    /// A GET or HEAD was written and the connection closed before any byte of the response.
    case safeRequestUnanswered
  }

  /// Whether `attempt`, ended by `fault`, is tried again, and why; nil: answer with the fault.
  ///
  /// Never twice; never after a timeout (the upstream may still be working on it); never on a
  /// fresh connection (a failure there is news about the upstream, so a connect failure is a 502
  /// at once: a second connect would fail the same way); never once a response byte arrived.
  /// Past those, a request of which nothing was written goes again whatever its method, and a
  /// written one only when it is a GET or HEAD: a proxy must not retry a non-idempotent request
  /// (RFC 9110 §9.2.2), and the idempotent mutations (PUT, DELETE) are left to the client, whose
  /// own retry the upstream can recognise by its idempotency key.
  static func decide(_ attempt: UpstreamAttempt, after fault: UpstreamFault) -> Reason? {
    guard attempt.number < 2, attempt.reusedConnection, !attempt.responseBytesReceived else { return nil }
    switch fault {
    case .resetBeforeResponse, .closedBeforeResponse: break
    default: return nil
    }
    if !attempt.requestBytesWritten { return .nothingWritten }
    return attempt.method == .get || attempt.method == .head ? .safeRequestUnanswered : nil
  }
}

/// What an attempt says of its upstream's health, for the circuit.
enum UpstreamHealth: Hashable, Sendable {
  /// The upstream answered: a failure streak ends, a probe closes the circuit.
  case answered
  /// The upstream failed: one more in a streak, a probe reopens the circuit.
  case failed
  /// Nothing either way (the gateway's own fault): the streak stands, a probe is tried again.
  case nothing
}

/// How one attempt on the upstream ended, as the circuit sees it.
enum UpstreamOutcome: Hashable, Sendable {
  /// A response arrived with this status.
  case response(status: Int)
  /// No usable response.
  case fault(UpstreamFault)

  /// A fault as the fault says; a 502, 503 or 504 of the upstream's own is a failure (it says
  /// it cannot serve; RFC 9110 §15.6.3–15.6.5); any other status is an answer: a 500 from one
  /// route's bug must not shut every route of the upstream.
  var health: UpstreamHealth {
    switch self {
    case .response(let status): status == 502 || status == 503 || status == 504 ? .failed : .answered
    case .fault(let fault): fault.health
    }
  }
}

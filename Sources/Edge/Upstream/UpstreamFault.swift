/// Why a forwarded request got no usable answer from its upstream: the one list the gateway maps to
/// the client's status and its `Proxy-Status` field (RFC 9209), and the pool to its circuit.
///
/// Which connect errors are which: `connectRefused` for `ECONNREFUSED` and a Unix socket path
/// with nothing behind it (`ENOENT`); `connectBusy` for `EAGAIN` from a Unix socket's `connect`
/// (its accept backlog is full); `connectError` for anything else the upstream's side caused
/// (unreachable host or network); `outOfResources` for a failure of this process (`EMFILE`,
/// `ENOBUFS`), which says nothing about the upstream.
public enum UpstreamFault: Hashable, Sendable {
  /// The upstream refused the connection.
  case connectRefused
  /// The upstream's accept backlog is full (a Unix socket's `connect` failed with `EAGAIN`).
  case connectBusy
  /// The connection was not established within the connect timeout.
  case connectTimeout
  /// The connection failed for another reason on the upstream's side (unreachable).
  case connectError
  /// The TLS handshake with the upstream failed (its certificate included).
  case tlsHandshakeFailed
  /// This process could not open a connection (out of descriptors or buffers).
  case outOfResources
  /// The connection was reset before any byte of the response arrived.
  case resetBeforeResponse
  /// The connection was closed before any byte of the response arrived.
  case closedBeforeResponse
  /// The connection closed (or was reset) after part of the response arrived.
  case closedMidResponse
  /// No byte of the response arrived within the first-byte timeout after the request was written.
  case firstByteTimeout
  /// The exchange did not finish within the total timeout.
  case totalTimeout
  /// The response broke HTTP/1.1's rules. The description is this program's own wording (the
  /// parser's error), never the upstream's bytes: it is shown to the client.
  case badResponse(String)
  /// The response's status line and header section exceeded the limit.
  case responseHeadTooLarge
  /// The response's body exceeded the limit.
  case responseBodyTooLarge
  /// Every connection was busy and the wait queue was full.
  case queueFull
  /// The request waited for a connection longer than the queue timeout.
  case queueTimeout
  /// The upstream's circuit is open: recent requests to it failed.
  case circuitOpen
  /// The upstream is switched off by its operator.
  case disabled

  /// The status the client is answered with: 502 when the upstream failed or answered wrongly,
  /// 504 when it did not answer in time, 503 when the gateway did not try (or the upstream is
  /// overloaded) and a retry later may succeed.
  public var status: Status {
    switch self {
    case .connectTimeout, .firstByteTimeout, .totalTimeout: .gatewayTimeout
    case .connectBusy, .outOfResources, .queueFull, .queueTimeout, .circuitOpen, .disabled:
      .serviceUnavailable
    case .connectRefused, .connectError, .tlsHandshakeFailed, .resetBeforeResponse, .closedBeforeResponse,
      .closedMidResponse, .badResponse, .responseHeadTooLarge, .responseBodyTooLarge:
      .badGateway
    }
  }

  /// The `Retry-After` seconds a 503 carries (RFC 9110 §10.2.3); nil for 502 and 504. A hint:
  /// a second for load shedding, the default open time for a circuit, a minute when switched off.
  public var retryAfterSeconds: Int? {
    switch self {
    case .connectBusy, .outOfResources, .queueFull, .queueTimeout: 1
    case .circuitOpen: 5
    case .disabled: 60
    default: nil
    }
  }

  /// The RFC 9209 §2.3 error type for `Proxy-Status`.
  public var proxyStatusError: String {
    switch self {
    case .connectRefused, .connectBusy: "connection_refused"
    case .connectTimeout: "connection_timeout"
    case .connectError, .circuitOpen, .disabled: "destination_unavailable"
    case .tlsHandshakeFailed: "tls_protocol_error"
    case .outOfResources: "proxy_internal_error"
    // §2.3.8: closed before any part of the response was received.
    case .resetBeforeResponse, .closedBeforeResponse: "connection_terminated"
    case .closedMidResponse: "http_response_incomplete"
    // §2.3.10: expecting data on a connection but none arrived in the time limit.
    case .firstByteTimeout: "connection_read_timeout"
    // §2.3.28: a time limit waiting for the complete response.
    case .totalTimeout: "http_response_timeout"
    case .badResponse: "http_protocol_error"
    case .responseHeadTooLarge: "http_response_header_section_size"
    case .responseBodyTooLarge: "http_response_body_size"
    case .queueFull, .queueTimeout: "connection_limit_reached"
    }
  }

  /// The `details` parameter (RFC 9209 §2.1.5), only where it tells apart faults that share an
  /// error type; never an address, a path or a byte the upstream sent.
  public var proxyStatusDetails: String? {
    switch self {
    case .connectBusy: "backlog full"
    case .circuitOpen: "circuit open"
    case .disabled: "disabled"
    case .queueTimeout: "queue timeout"
    case .badResponse(let description): description
    default: nil
    }
  }

  /// The `Proxy-Status` field value: `name; error=type`, with `details` where there are any
  /// (RFC 9209 §2). `proxyName` is written as a token when it is one, else as a string.
  public func proxyStatus(proxyName: String) -> String {
    var value = StructuredField.item(proxyName) + "; error=" + proxyStatusError
    if let details = proxyStatusDetails { value += "; details=" + StructuredField.string(details) }
    return value
  }

  /// Whether the connection the fault happened on may carry another request: never, since its
  /// state is unknown (a response may be partly read, or still coming).
  public var leavesConnectionReusable: Bool { false }

  /// What the fault says of the upstream's health (its circuit): it `failed` to connect, to
  /// answer in time or to speak HTTP; it `answered`, only beyond this gateway's size limits (a
  /// property of one route's answer, not of the upstream); or `nothing`, for the gateway's own
  /// faults (its queue, its circuit, its switch, its descriptors).
  var health: UpstreamHealth {
    switch self {
    case .connectRefused, .connectBusy, .connectTimeout, .connectError, .tlsHandshakeFailed,
      .resetBeforeResponse, .closedBeforeResponse, .closedMidResponse, .firstByteTimeout, .totalTimeout,
      .badResponse:
      .failed
    case .responseHeadTooLarge, .responseBodyTooLarge: .answered
    case .outOfResources, .queueFull, .queueTimeout, .circuitOpen, .disabled: .nothing
    }
  }

  /// Whether the fault is a deadline that passed (a 504; never retried).
  var isTimeout: Bool { status == .gatewayTimeout }
}

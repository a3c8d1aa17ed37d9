import Testing

@testable import Edge

/// Every fault's answer: the status, `Retry-After` for a 503, the RFC 9209 `Proxy-Status` value,
/// what it says of the upstream's health, and that its connection is never reused.
@Suite("Upstream faults: status, Proxy-Status, circuit")
struct UpstreamFaultTests {
  @Test(
    "each fault maps to its status, Retry-After, Proxy-Status and health",
    arguments: [
      (UpstreamFault.connectRefused, 502, nil, "band-edge; error=connection_refused", UpstreamHealth.failed),
      (.connectBusy, 503, 1, "band-edge; error=connection_refused; details=\"backlog full\"", .failed),
      (.connectTimeout, 504, nil, "band-edge; error=connection_timeout", .failed),
      (.connectError, 502, nil, "band-edge; error=destination_unavailable", .failed),
      (.tlsHandshakeFailed, 502, nil, "band-edge; error=tls_protocol_error", .failed),
      (.outOfResources, 503, 1, "band-edge; error=proxy_internal_error", .nothing),
      (.resetBeforeResponse, 502, nil, "band-edge; error=connection_terminated", .failed),
      (.closedBeforeResponse, 502, nil, "band-edge; error=connection_terminated", .failed),
      (.closedMidResponse, 502, nil, "band-edge; error=http_response_incomplete", .failed),
      (.firstByteTimeout, 504, nil, "band-edge; error=connection_read_timeout", .failed),
      (.totalTimeout, 504, nil, "band-edge; error=http_response_timeout", .failed),
      (
        .badResponse("invalid chunk size"), 502, nil,
        "band-edge; error=http_protocol_error; details=\"invalid chunk size\"", .failed
      ),
      (.responseHeadTooLarge, 502, nil, "band-edge; error=http_response_header_section_size", .answered),
      (.responseBodyTooLarge, 502, nil, "band-edge; error=http_response_body_size", .answered),
      (.queueFull, 503, 1, "band-edge; error=connection_limit_reached", .nothing),
      (
        .queueTimeout, 503, 1, "band-edge; error=connection_limit_reached; details=\"queue timeout\"",
        .nothing
      ),
      (.circuitOpen, 503, 5, "band-edge; error=destination_unavailable; details=\"circuit open\"", .nothing),
      (.disabled, 503, 60, "band-edge; error=destination_unavailable; details=\"disabled\"", .nothing),
    ] as [(UpstreamFault, Int, Int?, String, UpstreamHealth)])
  func mapping(
    fault: UpstreamFault, status: Int, retryAfter: Int?, proxyStatus: String, health: UpstreamHealth
  ) {
    #expect(fault.status.code == status)
    #expect(fault.retryAfterSeconds == retryAfter)
    #expect((fault.retryAfterSeconds != nil) == (status == 503))
    #expect(fault.proxyStatus(proxyName: "band-edge") == proxyStatus)
    #expect(fault.health == health)
    #expect(fault.isTimeout == (status == 504))
    #expect(!fault.leavesConnectionReusable)
  }

  @Test(
    "Proxy-Status writes the proxy's name as a token only when it is one, and details as a clean string",
    arguments: [
      ("edge-1", UpstreamFault.queueFull, "edge-1; error=connection_limit_reached"),
      ("*edge:a/b", .queueFull, "*edge:a/b; error=connection_limit_reached"),
      ("edge one", .queueFull, "\"edge one\"; error=connection_limit_reached"),
      ("1edge", .queueFull, "\"1edge\"; error=connection_limit_reached"),
      ("", .queueFull, "\"\"; error=connection_limit_reached"),
      (
        "e", .badResponse("a \"quoted\\\" é\r\nx"),
        "e; error=http_protocol_error; details=\"a \\\"quoted\\\\\\\" x\""
      ),
    ])
  func structuredField(proxyName: String, fault: UpstreamFault, expected: String) {
    #expect(fault.proxyStatus(proxyName: proxyName) == expected)
  }

  @Test(
    "a response's status is an answer unless the upstream says it cannot serve (502, 503, 504)",
    arguments: [
      (200, UpstreamHealth.answered), (404, .answered), (500, .answered), (501, .answered),
      (502, .failed), (503, .failed), (504, .failed), (505, .answered),
    ])
  func responseHealth(status: Int, health: UpstreamHealth) {
    #expect(UpstreamOutcome.response(status: status).health == health)
  }
}
